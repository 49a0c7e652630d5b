"""Launching a fine-tune on 1 to N processes and nodes with ``torchrun`` (torch.distributed.run), the same on CPU and GPU.

A fine-tune is described by one JSON *request* (below) and a layout (:class:`LaunchSettings`: nodes x processes per
node, one process per GPU). :func:`launch` runs ``torchrun`` on this machine, or, for several nodes inside a SLURM
allocation, ``srun`` of one ``torchrun`` per node that meet at this node (:func:`slurm_command`);
:func:`torchrun_command` gives the command line for other clusters (start it on every node with the same
``--rdzv-endpoint``). Every process runs :func:`worker`, which loads the base checkpoint (fp32 master weights), reads
the training rows, prepares the SBD mask token, trains (:func:`sbd_core.train.train`) and, in the main process, saves
the fine-tuned checkpoint (gathered weights, in the base model's dtype) and removes the resume state. A rerun after a
kill or time limit resumes from the newest checkpoint, on any number of processes.

Request keys: ``base`` (checkpoint folder), ``data`` (a built training mix: :func:`sbd_core.training_data.build`, the
pack stage's output), ``objective`` ("sbd" | "ntp"), ``train``
(:class:`sbd_core.train_config.TrainConfig` keys), ``out``, ``checkpoints``; optional ``allow_resize`` (mask token),
``device`` ("cuda" | "cpu"), ``threads`` (torch CPU threads per process), ``stop_after_steps`` (train up to that step,
checkpoint and exit: for time-limited jobs), ``extra_files`` ({name: JSON} written into the output, e.g. provenance),
``exports`` ({step: folder}: the model after that many steps, saved like the final one; kept in the resume state
until the run finishes, then moved to its folder).

    python -m sbd_core.launch --request req.json --processes 8 [--nodes 2 --rdzv-endpoint host:29500]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

REQUIRED = ("base", "data", "objective", "train", "out", "checkpoints")
OPTIONAL = ("allow_resize", "device", "threads", "stop_after_steps", "extra_files", "exports")
RDZV_PORT = 29500
log = logging.getLogger("sbd_core")


@dataclass(frozen=True)
class LaunchSettings:
    """Where a fine-tune runs (config ``finetune`` keys): ``nodes`` x ``processes_per_node`` processes (one per GPU;
    on the CPU, processes), and how many times the workflow resubmits a failed or timed-out job (``resubmit``; each
    resubmission resumes from the newest checkpoint). Several nodes need a SLURM allocation (:func:`slurm_command`)."""

    nodes: int = 1
    processes_per_node: int = 1
    resubmit: int = 0

    def __post_init__(self):
        for name in ("nodes", "processes_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"finetune.{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.resubmit, bool) or not isinstance(self.resubmit, int) or self.resubmit < 0:
            raise ValueError(f"finetune.resubmit must be an integer >= 0, got {self.resubmit!r}")

    @property
    def processes(self) -> int:
        """All processes of the run (the data-parallel world size)."""
        return self.nodes * self.processes_per_node


def check_request(request: dict) -> dict:
    """Reject missing or unknown request keys and unknown training settings, by name, before any process starts."""
    from .train_config import TrainConfig

    missing = [k for k in REQUIRED if k not in request]
    unknown = sorted(set(request) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise ValueError(f"fine-tune request: missing {missing}, unknown {unknown}; keys: {REQUIRED + OPTIONAL}")
    allowed = {f.name for f in fields(TrainConfig)} - {"objective"}
    bad = sorted(set(request["train"]) - allowed)
    if bad:
        raise ValueError(f"unknown training setting(s) {bad}; allowed: {sorted(allowed)}")
    config = TrainConfig(objective=request["objective"], **request["train"])
    bad = [k for k in request.get("exports", {}) if not str(k).isdigit() or not 1 <= int(k) < config.max_steps]
    if bad:
        raise ValueError(f"fine-tune request: exports at steps {bad}; each must be an integer in [1, max_steps)")
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


def slurm_command(request_path, processes: int, nodes: int, device: str | None = None) -> list[str]:
    """``srun`` of one ``torchrun`` per node of the current SLURM allocation (``nodes`` nodes), which meet at this node.

    Called from the job's own command, which SLURM runs on the allocation's first node (the slurm profile submits a
    multi-node fine-tune so, see ``workflow/rules/finetune.smk``); each node's torchrun starts ``processes`` workers.
    """
    job_id = os.environ.get("SLURM_JOB_ID")
    if not job_id:
        raise RuntimeError(f"a fine-tune on {nodes} nodes must run inside a SLURM allocation of {nodes} nodes (the "
                           "slurm profile submits it so); elsewhere start `python -m sbd_core.launch --nodes N "
                           "--rdzv-endpoint host:port` on every node yourself")
    srun = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            f"--cpus-per-task={len(os.sched_getaffinity(0))}", "--kill-on-bad-exit=1"]
    if (device or "cuda").startswith("cuda"):
        srun.append(f"--gpus-per-node={processes}")
    endpoint = f"{socket.gethostname()}:{RDZV_PORT}"
    return srun + torchrun_command(request_path, processes, nodes, endpoint, job_id=f"sbd-{job_id}")


def launch(request: dict, processes: int = 1, nodes: int = 1, rdzv_endpoint: str | None = None,
           env: dict | None = None, log_file=None) -> None:
    """Run the fine-tune ``request`` on ``nodes`` x ``processes`` workers: torchrun on this machine, or (several nodes,
    no ``rdzv_endpoint``) one torchrun per node of the SLURM allocation; raise if any process fails."""
    check_request(request)
    Path(request["checkpoints"]).mkdir(parents=True, exist_ok=True)
    request_path = Path(request["checkpoints"]) / "request.json"
    request_path.write_text(json.dumps(request, indent=1))
    if nodes > 1 and rdzv_endpoint is None:
        cmd = slurm_command(request_path, processes, nodes, request.get("device"))
    else:
        cmd = torchrun_command(request_path, processes, nodes, rdzv_endpoint)
    log.info("launching %d x %d fine-tune processes: %s", nodes, processes, shlex.join(cmd))
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
    """The rows of a built training mix (the pack stage's output), checked against this tokenizer and row length."""
    from .training_data import load_packed

    return load_packed(data_dir, tokenizer, max_length)[0]


def worker(request: dict) -> dict:
    """One process of a fine-tune (see the module doc); returns the training summary."""
    import torch

    from . import checkpoint, distributed
    from .mask_token import setup_mask_token
    from .train import train
    from .train_config import TrainConfig

    if request.get("threads"):
        torch.set_num_threads(request["threads"])
    runtime = distributed.init_runtime(request.get("device"))
    config = TrainConfig(objective=request["objective"], **request["train"])
    model, tokenizer = checkpoint.load(request["base"], dtype="float32")
    base_config = json.loads((Path(request["base"]) / "config.json").read_text())
    base_dtype = base_config.get("dtype") or base_config.get("torch_dtype") or "float32"
    # the rows are checked against the tokenizer they were made with, before a new mask token may extend it
    rows = load_training_rows(request["data"], tokenizer, config.max_length)
    setup_mask_token(tokenizer, model, allow_resize=request.get("allow_resize", False))
    config.record_in(model.config)
    checkpoints = Path(request["checkpoints"])
    log_path = checkpoints / "train_log.jsonl"
    dtype = base_dtype if base_dtype in checkpoint.DTYPES else "float32"
    exports = {int(step): Path(out) for step, out in request.get("exports", {}).items()}

    def save(out: Path, state, summary: dict) -> None:
        extra = {**request.get("extra_files", {}), "train_summary.json": summary}
        checkpoint.save(model, tokenizer, out, extra, copy_files={"train_log.jsonl": log_path}, state_dict=state,
                        dtype=dtype)

    def export(step: int) -> None:  # every process gathers; the main one writes into the resume state
        state = distributed.full_state_dict(model, runtime)
        if runtime.is_main:
            save(_staged_export(checkpoints, step), state, {"steps": step, "max_steps": config.max_steps,
                                                              "config": asdict(config)})
        distributed.barrier(runtime)

    summary = train(model, tokenizer, rows, config, checkpoints, log_path, progress=runtime.is_main,
                    runtime=runtime, stop_at=request.get("stop_after_steps"), export_steps=set(exports), export=export)
    state = distributed.full_state_dict(model, runtime) if summary["finished"] else None  # all processes gather
    if summary["finished"] and runtime.is_main:
        missing = [step for step in exports if not (_staged_export(checkpoints, step) / "config.json").is_file()]
        if missing:
            raise RuntimeError(f"exports at steps {missing} are missing from {checkpoints}; delete that folder and "
                               "rerun the fine-tune")
        save(Path(request["out"]), state, summary)
        for step, out in exports.items():
            _move_dir(_staged_export(checkpoints, step), out)
        shutil.rmtree(checkpoints)  # the finished model replaces the resume state
    distributed.barrier(runtime)
    return summary


def _staged_export(checkpoints: Path, step: int) -> Path:
    """Where the model after ``step`` steps waits, inside the resume state, until the run finishes."""
    return checkpoints / "exports" / f"step-{step}"


def _move_dir(source: Path, target: Path) -> None:
    """Move a finished folder into place (replacing an old one)."""
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)


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
