"""The training stages: data (training rows), base (a checkpoint to start from) and finetune (one objective)."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from .. import checkpoint
from ..io_utils import read_jsonl, write_json_atomic, write_jsonl_atomic
from ..provenance import provenance

log = logging.getLogger("sbd_core")


# --------------------------------------------------------------------------------------------------------------- data
def per_task(count: int | dict, tasks: list[str]) -> dict[str, int]:
    """One count for every task, or a ``{task: count}`` mapping that must name every task."""
    if isinstance(count, int):
        return {name: count for name in tasks}
    missing = sorted(set(tasks) - set(count))
    if missing:
        raise ValueError(f"train_per_task gives no count for task(s) {missing}; give one integer or one per task")
    return {name: int(count[name]) for name in tasks}


@dataclass(frozen=True)
class DataSpec:
    """The data stage's settings: training and validation rows of synthetic tasks (config ``data`` section)."""

    tasks: tuple[str, ...]
    train_per_task: int | dict
    valid_per_task: int = 50
    seed: int = 0


def run_data(spec: DataSpec, out_dir: Path) -> None:
    """Train/valid (prompt, target) rows of the synthetic tasks (their test problems are the benchmarks' own)."""
    from ..benchmarks import get_benchmark

    out_dir, tasks = Path(out_dir), list(spec.tasks)
    for split, counts in (("train", per_task(spec.train_per_task, tasks)), ("valid", per_task(spec.valid_per_task, tasks))):
        rows = [row for name in tasks for row in get_benchmark(name).training_rows(split, counts[name], spec.seed)]
        write_jsonl_atomic(rows, out_dir / f"{split}.jsonl")
    write_json_atomic(provenance("data", asdict(spec), spec.seed), out_dir / "provenance.json")


def training_pairs(data_dir: Path, split: str = "train") -> list[tuple[str, str]]:
    """The (prompt, target) rows the data stage wrote."""
    return [(r["prompt"], r["target"]) for r in read_jsonl(Path(data_dir) / f"{split}.jsonl")]


# --------------------------------------------------------------------------------------------------------------- train
def train_config(objective: str, spec: dict):
    """A :class:`TrainConfig` from a config section, rejecting unknown keys by name."""
    from ..train import TrainConfig

    allowed = {f.name for f in fields(TrainConfig)} - {"objective"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ValueError(f"unknown training setting(s) {unknown}; allowed: {sorted(allowed)}")
    return TrainConfig(objective=objective, **spec)


def _file_digest(path: Path) -> str | None:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).exists() else None


def _fresh_checkpoints(checkpoint_dir: Path, settings: dict, inputs: list[Path]) -> None:
    """Drop checkpoints left by a run with other settings or inputs: resuming is only valid for the same run."""
    stamp_of = {"settings": settings, "inputs": {str(p): _file_digest(p) for p in inputs}}
    fingerprint = hashlib.sha256(json.dumps(stamp_of, sort_keys=True, default=str).encode()).hexdigest()
    stamp = checkpoint_dir / "settings.sha256"
    if checkpoint_dir.exists() and (not stamp.exists() or stamp.read_text() != fingerprint):
        log.warning("checkpoints in %s come from other settings; starting fresh", checkpoint_dir)
        shutil.rmtree(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint)


def _train_and_save(model, tokenizer, objective, spec, data_dir, out_dir, checkpoint_dir, stage, settings, progress,
                    base_dir=None):
    from ..train import tokenize_examples, train

    config = train_config(objective, spec)
    torch.manual_seed(config.seed)
    checkpoint_dir = Path(checkpoint_dir)
    # the base's provenance changes whenever it is remade (hashing 16 GB of weights would not be cheap)
    inputs = [Path(data_dir) / "train.jsonl"] + ([Path(base_dir) / "provenance.json"] if base_dir else [])
    _fresh_checkpoints(checkpoint_dir, settings, inputs)
    rows = tokenize_examples(tokenizer, training_pairs(data_dir), config.max_length)
    log_path = checkpoint_dir / "train_log.jsonl"
    summary = train(model, tokenizer, rows, config, checkpoint_dir, log_path, progress=progress)
    checkpoint.save(model, tokenizer, out_dir,
                    {"provenance.json": provenance(stage, settings, config.seed), "train_summary.json": summary},
                    copy_files={"train_log.jsonl": log_path})
    shutil.rmtree(checkpoint_dir)  # the finished model replaces the resume state


def build_scratch_model(arch: dict, tokenizer):
    """A randomly initialised Llama or Qwen-3 model of the given shape over ``tokenizer``'s vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    arch = dict(arch)
    kind = arch.pop("architecture", "llama")
    classes = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}
    if kind not in classes:
        raise ValueError(f"architecture must be one of {sorted(classes)}, got {kind!r}")
    config_cls, model_cls = classes[kind]
    ids = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
               pad_token_id=tokenizer.pad_token_id)
    return model_cls(config_cls(vocab_size=len(tokenizer), tie_word_embeddings=True, **ids, **arch))


def run_base(model_spec: dict, data_dir: Path, out_dir: Path, checkpoint_dir: Path, progress: bool = True) -> None:
    """Make the base checkpoint: a pinned hub snapshot, a local folder, or a tiny model pretrained here (NTP)."""
    source, out_dir = model_spec.get("source"), Path(out_dir)
    if source == "hub":
        checkpoint.download(model_spec["repo_id"], model_spec.get("revision"), out_dir)
        write_json_atomic(provenance("base", model_spec), out_dir / "provenance.json")
    elif source == "local":
        model, tokenizer = checkpoint.load(model_spec["path"])
        checkpoint.save(model, tokenizer, out_dir, {"provenance.json": provenance("base", model_spec)})
    elif source == "scratch":
        from ..tokenizer import build_tokenizer

        pairs = training_pairs(data_dir)
        tokenizer = build_tokenizer([p + t for p, t in pairs], model_spec.get("vocab_size", 512))
        torch.manual_seed(model_spec.get("pretrain", {}).get("seed", 0))
        model = build_scratch_model(model_spec["arch"], tokenizer)
        _train_and_save(model, tokenizer, "ntp", model_spec.get("pretrain", {}), data_dir, out_dir, checkpoint_dir,
                        "base", model_spec, progress)
    else:
        raise ValueError(f"model source must be 'scratch', 'hub' or 'local', got {source!r}")


def run_finetune(base_dir: Path, data_dir: Path, objective: str, spec: dict, out_dir: Path, checkpoint_dir: Path,
                 runtime: dict | None = None, progress: bool = True) -> None:
    """Fine-tune the base checkpoint with one objective (``ntp``, ``sbd``, ``sbd_no_ntp_grad``; same data, steps and
    optimizer)."""
    from ..mask_token import setup_mask_token

    runtime = runtime or {}
    spec = dict(spec)
    allow_resize = spec.pop("allow_resize", False)
    model, tokenizer = checkpoint.load(base_dir, runtime.get("device", "cpu"), runtime.get("dtype", "float32"))
    model.train()
    setup_mask_token(tokenizer, model, allow_resize=allow_resize)  # both arms: identical models apart from the loss
    settings = {"objective": objective, "finetune": spec, "base": str(base_dir),
                "departures": train_config(objective, spec).departures()}  # read by the report
    _train_and_save(model, tokenizer, objective, spec, data_dir, out_dir, checkpoint_dir, "finetune", settings,
                    progress, base_dir=base_dir)
