"""Launching a fine-tune on 1 to N processes and nodes with ``torchrun`` (torch.distributed.run), the same on CPU and GPU.

A fine-tune is described by one JSON *request* (below). :func:`launch` runs ``torchrun`` on this machine;
:func:`torchrun_command` gives the command line for a cluster job (under SLURM: ``srun`` it once per node, every node
with the same ``--rdzv-endpoint``). Every process runs :func:`worker`, which loads the base checkpoint (fp32 master
weights), prepares the SBD mask token, reads the training rows, trains (:func:`sbd_core.train.train`) and, in the main
process, saves the fine-tuned checkpoint (gathered weights, in the base model's dtype) and removes the resume state.
A rerun after a kill or time limit resumes from the newest checkpoint, on any number of processes.

Request keys: ``base`` (checkpoint folder), ``data`` (a built training mix, :mod:`sbd_core.training_data`, or a folder
with the synthetic ``train.jsonl`` of ``prompt``/``target`` rows), ``objective`` ("sbd" | "ntp"), ``train``
(:class:`sbd_core.train.TrainConfig` keys), ``out``, ``checkpoints``; optional ``allow_resize`` (mask token),
``device`` ("cuda" | "cpu"), ``stop_after_steps`` (train up to that step, checkpoint and exit: for time-limited jobs),
``extra_files`` ({name: JSON} written into the output, e.g. provenance).

    python -m sbd_core.launch --request req.json --processes 8 [--nodes 2 --rdzv-endpoint host:29500]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

REQUIRED = ("base", "data", "objective", "train", "out", "checkpoints")
OPTIONAL = ("allow_resize", "device", "stop_after_steps", "extra_files")
log = logging.getLogger("sbd_core")


def check_request(request: dict) -> dict:
    """Reject missing or unknown request keys and unknown training settings, by name, before any process starts."""
    from .train import TrainConfig

    missing = [k for k in REQUIRED if k not in request]
    unknown = sorted(set(request) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise ValueError(f"fine-tune request: missing {missing}, unknown {unknown}; keys: {REQUIRED + OPTIONAL}")
    allowed = {f.name for f in fields(TrainConfig)} - {"objective"}
    bad = sorted(set(request["train"]) - allowed)
    if bad:
        raise ValueError(f"unknown training setting(s) {bad}; allowed: {sorted(allowed)}")
    TrainConfig(objective=request["objective"], **request["train"])
    return request


def torchrun_command(request_path, processes: int, nodes: int = 1, rdzv_endpoint: str | None = None,
                     job_id: str = "sbd-finetune") -> list[str]:
    """The ``torchrun`` command that runs :func:`worker` on ``processes`` per node, on ``nodes`` nodes."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={processes}", f"--nnodes={nodes}"]
    if nodes > 1:
        if not rdzv_endpoint:
            raise ValueError("several nodes need rdzv_endpoint (host:port of the first node)")
        cmd += ["--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}", f"--rdzv-id={job_id}"]
    else:
        cmd += ["--standalone"]
    return cmd + ["-m", "sbd_core.launch", "--worker", "--request", str(request_path)]


def launch(request: dict, processes: int = 1, nodes: int = 1, rdzv_endpoint: str | None = None,
           env: dict | None = None, log_file=None) -> None:
    """Run the fine-tune ``request`` under torchrun on this machine; raise if any process fails."""
    check_request(request)
    Path(request["checkpoints"]).mkdir(parents=True, exist_ok=True)
    request_path = Path(request["checkpoints"]) / "request.json"
    request_path.write_text(json.dumps(request, indent=1))
    cmd = torchrun_command(request_path, processes, nodes, rdzv_endpoint)
    out = open(log_file, "a") if log_file else None
    try:
        done = subprocess.run(cmd, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT if out else None)
    finally:
        if out:
            out.close()
    if done.returncode != 0:
        raise RuntimeError(f"fine-tune failed (exit {done.returncode}): {' '.join(cmd)}"
                           + (f"; see {log_file}" if log_file else ""))


def load_training_rows(data_dir, tokenizer, max_length: int):
    """Rows of a built training mix (checked against this tokenizer and row length) or of synthetic pairs."""
    from .io_utils import read_jsonl
    from .train import tokenize_examples
    from .training_data import load_packed
    from .training_data.build import MANIFEST

    data_dir = Path(data_dir)
    if (data_dir / MANIFEST).is_file():
        return load_packed(data_dir, tokenizer, max_length)[0]
    pairs = [(r["prompt"], r["target"]) for r in read_jsonl(data_dir / "train.jsonl")]
    return tokenize_examples(tokenizer, pairs, max_length)


def worker(request: dict) -> dict:
    """One process of a fine-tune (see the module doc); returns the training summary."""
    from . import checkpoint, distributed
    from .mask_token import setup_mask_token
    from .train import TrainConfig, train

    runtime = distributed.init_runtime(request.get("device"))
    config = TrainConfig(objective=request["objective"], **request["train"])
    model, tokenizer = checkpoint.load(request["base"], dtype="float32")
    base_config = json.loads((Path(request["base"]) / "config.json").read_text())
    base_dtype = base_config.get("dtype") or base_config.get("torch_dtype") or "float32"
    setup_mask_token(tokenizer, model, allow_resize=request.get("allow_resize", False))
    rows = load_training_rows(request["data"], tokenizer, config.max_length)
    checkpoints = Path(request["checkpoints"])
    log_path = checkpoints / "train_log.jsonl"
    summary = train(model, tokenizer, rows, config, checkpoints, log_path, progress=runtime.is_main,
                    runtime=runtime, stop_at=request.get("stop_after_steps"))
    state = distributed.full_state_dict(model, runtime) if summary["finished"] else None  # all processes gather
    if summary["finished"] and runtime.is_main:
        extra = {**request.get("extra_files", {}), "train_summary.json": summary}
        dtype = base_dtype if base_dtype in checkpoint.DTYPES else "float32"
        checkpoint.save(model, tokenizer, request["out"], extra, copy_files={"train_log.jsonl": log_path},
                        state_dict=state, dtype=dtype)
        shutil.rmtree(checkpoints)  # the finished model replaces the resume state
    distributed.barrier(runtime)
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sbd_core.launch", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--request", type=Path, required=True, help="the fine-tune request (JSON file)")
    p.add_argument("--processes", type=int, default=1, help="processes per node (one per GPU)")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--rdzv-endpoint", default=None, help="host:port of the first node (several nodes)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    request = json.loads(args.request.read_text())
    if args.worker:
        worker(request)
    else:
        launch(request, args.processes, args.nodes, args.rdzv_endpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
