"""The training stages: base (a checkpoint to start from), pack (the documents tokenised and packed for one base model)
and finetune (one objective, through the torchrun launcher); the data stage before them is :mod:`.data`.

Where each runs: ``data`` and a fetched ``base`` download (login node, internet); ``pack`` is CPU work; ``finetune``
runs on ``nodes`` x ``processes_per_node`` processes (:class:`sbd_core.launch.LaunchSettings`), also when that is one
CPU process, so the embedded default, the one-GPU pilot and the paper's multi-node runs share one code path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import torch

from .. import checkpoint
from ..errors import UserError
from ..io_utils import write_json_atomic
from ..launch import LaunchSettings, launch
from ..mask_token import check_mask_token
from ..provenance import provenance
from ..settings import RuntimeSettings, from_section
from ..training_data import MixSpec, build, check_packed
from ..training_data.build import MANIFEST
from .data import synthetic_files, synthetic_pairs
from .plan import check_layout, train_config

log = logging.getLogger("sbd_core")


# --------------------------------------------------------------------------------------------------------------- base
def build_scratch_model(arch: dict, tokenizer):
    """A randomly initialised Llama or Qwen-3 model of the given shape over ``tokenizer``'s vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    arch = dict(arch)
    kind = arch.pop("architecture", "llama")
    classes = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}
    if kind not in classes:
        raise UserError(f"architecture must be one of {sorted(classes)}, got {kind!r}")
    config_cls, model_cls = classes[kind]
    ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
               pad_token_id=tokenizer.pad_token_id)
    return model_cls(config_cls(vocab_size=len(tokenizer), tie_word_embeddings=True, **ids, **arch))


def pretrain_scratch(model_spec: dict, data_dir: Path, out_dir: Path, checkpoint_dir: Path, progress: bool = True):
    """A tokenizer and a tiny model built here and pretrained (NTP, one process) on the synthetic tasks' rows."""
    from ..tokenizer import build_tokenizer
    from ..train import tokenize_examples, train

    if not isinstance(model_spec.get("arch"), dict):
        raise UserError("a scratch model spec needs 'arch', the model's shape, e.g. {architecture: llama, "
                        f"hidden_size: 96, num_hidden_layers: 3, ...}}; got {sorted(model_spec)}")
    pairs = synthetic_pairs(data_dir)
    tokenizer = build_tokenizer([p + t for p, t in pairs], model_spec.get("vocab_size", 512))
    config = train_config("ntp", model_spec.get("pretrain", {}), "pretrain")
    torch.manual_seed(config.seed)
    model = build_scratch_model(model_spec["arch"], tokenizer)
    checkpoint_dir = Path(checkpoint_dir)
    fresh_checkpoints(checkpoint_dir, model_spec, synthetic_files(data_dir))
    log_path = checkpoint_dir / "train_log.jsonl"
    rows = tokenize_examples(tokenizer, pairs, config.max_length)
    summary = train(model, tokenizer, rows, config, checkpoint_dir, log_path, progress=progress)
    checkpoint.save(model, tokenizer, out_dir,
                    {"provenance.json": provenance("base", model_spec, config.seed), "train_summary.json": summary},
                    copy_files={"train_log.jsonl": log_path})
    shutil.rmtree(checkpoint_dir)  # the finished model replaces the resume state


def run_base(model_spec: dict, out_dir: Path, data_dir: Path | None = None, checkpoint_dir: Path | None = None,
             progress: bool = True) -> None:
    """Make the base checkpoint: fetched from its source (hub, local folder, GGUF; see :func:`checkpoint.fetch`) or,
    for ``source: scratch``, pretrained here on the synthetic tasks (needs ``data_dir`` and ``checkpoint_dir``)."""
    out_dir = Path(out_dir)
    if model_spec.get("source") == "scratch":
        if data_dir is None or checkpoint_dir is None:
            raise UserError("a scratch base model needs the data stage's folder and a checkpoint folder")
        pretrain_scratch(model_spec, data_dir, out_dir, checkpoint_dir, progress)
        return
    checkpoint.fetch(model_spec, out_dir)
    write_json_atomic(provenance("base", model_spec), out_dir / "provenance.json")


# --------------------------------------------------------------------------------------------------------------- pack
def run_pack(spec: dict, base_dir: Path, data_dir: Path, out_dir: Path) -> dict:
    """The data stage's documents tokenised with the base model's tokenizer (and chat template), selected by the token
    budget and packed into rows of ``max_length`` tokens (``spec``: the ``data`` section plus ``max_length``)."""
    mix = MixSpec.from_dict(spec)
    tokenizer = checkpoint.load_tokenizer(base_dir)
    if not Path(data_dir).is_dir():
        raise FileNotFoundError(f"{data_dir}: no such folder; expected the data stage's output")
    manifest = build(mix, tokenizer, data_dir, out_dir)
    inputs = {"base": str(base_dir), "data": str(data_dir)}
    write_json_atomic(provenance("pack", {**spec, **inputs}, mix.seed), Path(out_dir) / "provenance.json")
    return manifest


# --------------------------------------------------------------------------------------------------------------- train
def _file_digest(path: Path) -> str | None:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).exists() else None


def fresh_checkpoints(checkpoint_dir: Path, settings: dict, inputs: list[Path]) -> None:
    """Drop checkpoints left by a run with other settings or inputs: resuming is only valid for the same run.

    ``inputs``: small files that change whenever an input is remade (provenance records, manifests); hashing the
    weights or data themselves would not be cheap."""
    stamp_of = {"settings": settings, "inputs": {str(p): _file_digest(p) for p in inputs}}
    fingerprint = hashlib.sha256(json.dumps(stamp_of, sort_keys=True, default=str).encode()).hexdigest()
    stamp = checkpoint_dir / "settings.sha256"
    if checkpoint_dir.exists() and (not stamp.exists() or stamp.read_text() != fingerprint):
        log.warning("checkpoints in %s come from other settings; starting fresh", checkpoint_dir)
        shutil.rmtree(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint)


def run_finetune(base_dir: Path, data_dir: Path, objective: str, spec: dict, out_dir: Path, checkpoint_dir: Path,
                 runtime: dict | None = None, layout: LaunchSettings = LaunchSettings(),
                 threads: int | None = None, exports: dict | None = None) -> None:
    """Fine-tune the base checkpoint with one objective on the packed rows (``data_dir``, the pack stage's output),
    through the torchrun launcher on ``layout`` (same data, steps and optimizer for every objective).

    ``spec``: TrainConfig keys plus ``allow_resize``; ``runtime``: ``{"device": ...}``; ``threads``: CPU threads of the
    whole job, shared by its processes; ``exports``: ``{step: folder}``, the model after that many steps saved as a
    checkpoint folder of its own (``finetune.eval_at_steps``). A rerun resumes from ``checkpoint_dir`` when the
    settings, exports and inputs match, whatever the layout."""
    spec = dict(spec)
    allow_resize = spec.pop("allow_resize", False)
    if not isinstance(allow_resize, bool):
        raise UserError(f"finetune.allow_resize must be true or false, got {allow_resize!r}")
    config = train_config(objective, spec)  # named errors before any process starts
    check_layout([objective], spec, layout)
    device = from_section(RuntimeSettings, runtime, "runtime").device
    tokenizer = checkpoint.load_tokenizer(checkpoint.check_folder(base_dir))
    check_mask_token(tokenizer, checkpoint.model_config(base_dir), allow_resize, str(base_dir))
    check_packed(data_dir, tokenizer, config.max_length)
    settings = {"objective": objective, "finetune": spec, "allow_resize": allow_resize, "base": str(base_dir),
                "data": str(data_dir), "departures": config.departures()}  # departures are read by the report
    exports = {int(step): str(out) for step, out in (exports or {}).items()}
    if exports:
        settings["export_steps"] = sorted(exports)
    checkpoint_dir = Path(checkpoint_dir)
    fresh_checkpoints(checkpoint_dir, settings, [Path(base_dir) / "provenance.json", Path(data_dir) / MANIFEST])
    request = {"base": str(base_dir), "data": str(data_dir), "objective": objective, "train": spec,
               "out": str(out_dir), "checkpoints": str(checkpoint_dir), "allow_resize": allow_resize,
               "device": device,
               "extra_files": {"provenance.json": provenance("finetune", settings, config.seed)}}
    if exports:
        request["exports"] = {str(step): out for step, out in sorted(exports.items())}
    if threads:
        request["threads"] = max(1, threads // layout.processes_per_node)
    launch(request, layout.processes_per_node, layout.nodes)
