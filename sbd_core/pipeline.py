"""The pipeline stages as plain functions: data, base, finetune, decode, score, report.

Each stage reads the previous stages' files only (never their internals), writes its outputs atomically with a provenance
record, and is what both the Snakemake rules and ``python -m sbd_core <stage>`` call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from . import checkpoint
from .io_utils import read_jsonl, write_json_atomic, write_jsonl_atomic
from .provenance import provenance
from .tasks import get_task

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
    """The data stage's settings (config ``data`` section plus the run's ``tasks`` and ``seed``)."""

    tasks: tuple[str, ...]
    train_per_task: int | dict
    test_per_task: int
    valid_per_task: int = 50
    seed: int = 0


def run_data(spec: DataSpec, out_dir: Path) -> None:
    """Synthetic train/valid (prompt, target) rows for all tasks and held-out test problems per task."""
    out_dir, tasks = Path(out_dir), list(spec.tasks)
    for split, counts in (("train", per_task(spec.train_per_task, tasks)), ("valid", per_task(spec.valid_per_task, tasks))):
        rows = []
        for name in tasks:
            task = get_task(name)
            rows += [{"task": name, "task_id": p["task_id"], "prompt": task.prompt_text(p), "target": task.target_text(p)}
                     for p in task.make_problems(split, counts[name], spec.seed)]
        write_jsonl_atomic(rows, out_dir / f"{split}.jsonl")
    for name in tasks:
        write_jsonl_atomic(get_task(name).make_problems("test", spec.test_per_task, spec.seed), out_dir / f"{name}_test.jsonl")
    write_json_atomic(provenance("data", asdict(spec), spec.seed), out_dir / "provenance.json")


def training_pairs(data_dir: Path, split: str = "train") -> list[tuple[str, str]]:
    """The (prompt, target) rows the data stage wrote."""
    return [(r["prompt"], r["target"]) for r in read_jsonl(Path(data_dir) / f"{split}.jsonl")]


# --------------------------------------------------------------------------------------------------------------- train
def train_config(objective: str, spec: dict):
    """A :class:`TrainConfig` from a config section, rejecting unknown keys by name."""
    from .train import TrainConfig

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
    from .train import tokenize_examples, train

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
        from .tokenizer import build_tokenizer

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
    """Fine-tune the base checkpoint with the ``ntp`` or ``sbd`` objective (same data, steps and optimizer)."""
    from .mask_token import setup_mask_token

    runtime = runtime or {}
    spec = dict(spec)
    allow_resize = spec.pop("allow_resize", False)
    model, tokenizer = checkpoint.load(base_dir, runtime.get("device", "cpu"), runtime.get("dtype", "float32"))
    model.train()
    setup_mask_token(tokenizer, model, allow_resize=allow_resize)  # both arms: identical models apart from the loss
    settings = {"objective": objective, "finetune": spec, "base": str(base_dir)}
    _train_and_save(model, tokenizer, objective, spec, data_dir, out_dir, checkpoint_dir, "finetune", settings,
                    progress, base_dir=base_dir)


# --------------------------------------------------------------------------------------------------------------- decode
def run_decode(model_dir: Path, task_name: str, data_dir: Path, sampler: str, sampler_spec: dict, decode_spec: dict,
               out_path: Path, runtime: dict | None = None, progress: bool = True) -> None:
    """Decode the task's held-out problems; one JSON line per problem with completion, NFE and cost."""
    from .decode import BlockDecoder, DecodeConfig
    from .samplers import build_solver

    runtime = runtime or {}
    model, tokenizer = checkpoint.load(model_dir, runtime.get("device", "cpu"), runtime.get("dtype", "float32"))
    task = get_task(task_name)
    problems = read_jsonl(Path(data_dir) / f"{task_name}_test.jsonl")
    config = DecodeConfig(mode=sampler_spec["mode"], stop_strings=task.stop_sequences, **decode_spec)
    decoder = BlockDecoder(model, tokenizer, config, build_solver(sampler_spec))
    prompts = [task.prompt_text(p) for p in problems]
    start = time.perf_counter()
    generations = decoder.generate(prompts, progress=progress)
    elapsed = time.perf_counter() - start
    records = [{"task_id": p["task_id"], "prompt": prompt, "completion": g.text, "token_ids": g.token_ids,
                "num_tokens": g.num_tokens, "nfe": g.nfe, "tokens_per_forward": g.tokens_per_forward,
                "stop_reason": g.stop_reason, "wall_time_s": g.wall_time_s, "sampler": sampler,
                "solver": {"name": sampler_spec["solver"], "params": sampler_spec["params"]},
                "block_size": config.block_size}
               for p, prompt, g in zip(problems, prompts, generations)]
    write_jsonl_atomic(records, out_path)
    settings = {"model": str(model_dir), "task": task_name, "sampler": sampler, "sampler_spec": sampler_spec,
                "decode": decode_spec, "runtime": runtime, "total_wall_time_s": elapsed}
    write_json_atomic(provenance("decode", settings), Path(str(out_path) + ".provenance.json"))


# --------------------------------------------------------------------------------------------------------------- score
def cost_aggregates(records: list[dict], wall_time_s: float | None = None) -> dict:
    """NFE and token totals of a generation file (speedups are relative, so the report derives them).

    ``wall_time_s`` is the decode stage's total time; without it, the sum of per-problem latencies stands in."""
    total_nfe = sum(r["nfe"] for r in records)
    total_tokens = sum(r["num_tokens"] for r in records)
    per_problem = [r["num_tokens"] / r["nfe"] for r in records if r["nfe"]]
    return {"n_problems": len(records), "total_nfe": total_nfe, "total_tokens": total_tokens,
            "mean_nfe": total_nfe / max(len(records), 1), "tokens_per_forward": total_tokens / max(total_nfe, 1),
            "mean_tokens_per_forward": sum(per_problem) / max(len(per_problem), 1),
            "wall_time_s": wall_time_s if wall_time_s is not None else sum(r["wall_time_s"] for r in records)}


def run_score(task_name: str, data_dir: Path, generations: Path, out_path: Path, names: dict, work_dir: Path,
              code_settings: dict | None = None) -> None:
    """Score stored generations (never regenerates): lm-eval for math, evalplus for code; add the cost aggregates."""
    problems = read_jsonl(Path(data_dir) / f"{task_name}_test.jsonl")
    records = read_jsonl(generations)
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    if task_name == "math":
        from .evaluation.math_eval import score_math

        result = score_math(problems, Path(generations), work_dir)
        accuracy, metrics = result["accuracy"], result["metrics"]
    elif task_name == "code":
        from .evaluation.code_eval import evaluate_code

        result = evaluate_code(problems, {r["task_id"]: r["completion"] for r in records}, work_dir,
                               **(code_settings or {}))
        accuracy = result["pass@1_plus"]
        metrics = {k: result[k] for k in ("pass@1_base", "pass@1_plus", "network_isolated")}
    else:
        raise ValueError(f"no scorer for task {task_name!r}")
    first = records[0] if records else {"solver": {"name": "ntp", "params": {}}, "block_size": 0}
    sidecar = Path(str(generations) + ".provenance.json")
    wall = json.loads(sidecar.read_text())["settings"]["total_wall_time_s"] if sidecar.exists() else None
    score = {**names, "task": task_name, "accuracy": accuracy, "metrics": metrics, **cost_aggregates(records, wall),
             "solver": first["solver"], "block_size": first["block_size"], "per_problem": result["per_problem"],
             "provenance": provenance("score", {"generations": str(generations), **names})}
    write_json_atomic(score, out_path)


# --------------------------------------------------------------------------------------------------------------- report
def run_report(scores: list[Path], out_dir: Path, paper_table: Path | None) -> None:
    """Tables and figures from score files only (never recomputes), with the run's provenance beside them."""
    from .report import write_report

    write_report(scores, out_dir, paper_table=paper_table)
    settings = {"scores": [str(p) for p in scores], "paper_table": str(paper_table)}
    write_json_atomic(provenance("report", settings), Path(out_dir) / "provenance.json")
