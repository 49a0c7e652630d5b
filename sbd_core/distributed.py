"""Process group, sharding, mixed precision and resumable checkpoints for fine-tuning, on torch's own tools.

One code path for 1 and N processes, CPU and GPU: ``torchrun`` (see :mod:`sbd_core.launch`) starts the processes and sets
``RANK``/``WORLD_SIZE``/``LOCAL_RANK``; :func:`init_runtime` joins them (NCCL on GPUs, gloo on CPUs). With more than one
process the model is sharded with FSDP2 (``torch.distributed.fsdp.fully_shard``: every decoder layer, then the root);
checkpoints are written with ``torch.distributed.checkpoint`` (DCP), which reshards on load, so a run resumes on another
number of processes. A single process trains the plain module and still writes DCP checkpoints.

Precision: master weights and optimizer state are always fp32 (a bf16 AdamW update of 3e-4 is lost on weights near 1:
``1.0 + 3e-4 == 1.0`` in bf16). With ``bf16`` the compute runs in bf16: FSDP2 casts the gathered weights
(``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``, gradients reduced in fp32); a single process uses
``torch.autocast``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

log = logging.getLogger("sbd_core")
STATE_FILE = "trainer_state.json"


@dataclass(frozen=True)
class Runtime:
    """Where this process runs: its rank among ``world_size`` processes and its device."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def init_runtime(device: str | None = None) -> Runtime:
    """Join the process group ``torchrun`` describes (if any) and pick this process's device.

    ``device``: ``"cuda"``, ``"cuda:N"``, ``"cpu"`` or None (CUDA when available). Under torchrun each process on a
    machine takes GPU ``LOCAL_RANK``. Without ``WORLD_SIZE`` > 1 no process group is created.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda":
        if dev.index is None or world > 1:
            dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo", device_id=dev if dev.type == "cuda" else None)
    rank = dist.get_rank() if dist.is_initialized() else 0
    return Runtime(rank=rank, world_size=world, device=dev)


def decoder_layers(model) -> list[torch.nn.Module]:
    """The repeated transformer blocks (the classes a Hugging Face model lists in ``_no_split_modules``)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"cannot find the decoder layers of {type(model).__name__} (no _no_split_modules) to shard")
    return layers


def shard(model, runtime: Runtime, bf16: bool):
    """FSDP2-shard ``model`` in place (every decoder layer, then the root) when several processes run; else move it."""
    model.to(runtime.device)
    if not runtime.distributed:
        return model
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else MixedPrecisionPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def autocast(runtime: Runtime, bf16: bool):
    """bf16 autocast for a single process; FSDP2 casts by itself, so sharded runs need no context."""
    if bf16 and not runtime.distributed:
        return torch.autocast(device_type=runtime.device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def all_reduce_sum(values: torch.Tensor, runtime: Runtime) -> torch.Tensor:
    """Sum a tensor over all processes (identity for one process)."""
    if runtime.distributed:
        values = values.clone()
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def barrier(runtime: Runtime) -> None:
    if runtime.distributed:
        dist.barrier()


# --------------------------------------------------------------------------------------------------------------- checkpoints
def _checkpoints(checkpoint_dir: Path) -> list[Path]:
    """Complete checkpoints (those with a state file), oldest first."""
    found = [p for p in Path(checkpoint_dir).glob("checkpoint-*") if (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def last_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest complete checkpoint in ``checkpoint_dir``, or None."""
    found = _checkpoints(checkpoint_dir)
    return found[-1] if found else None


@contextlib.contextmanager
def _single_process_ok():
    """DCP warns that it assumes a single process when no process group exists: that is intended here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*assuming the intent is to (save|load) in a single process")
        yield


def save_checkpoint(checkpoint_dir: Path, step: int, model, optimizer, state: dict, runtime: Runtime,
                    keep: int = 2) -> Path:
    """Write model + optimizer shards (DCP) and ``state`` (JSON) as ``checkpoint-<step>``; keep the newest ``keep``.

    The folder appears under its final name only once every shard and the state file are written.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    final = Path(checkpoint_dir) / f"checkpoint-{step}"
    tmp = final.with_name(f".{final.name}.tmp")
    if runtime.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
    barrier(runtime)
    model_state, optim_state = get_state_dict(model, optimizer)
    with _single_process_ok():
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(tmp))
    barrier(runtime)
    if runtime.is_main:
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in _checkpoints(checkpoint_dir)[:-keep]:
            shutil.rmtree(old)
    barrier(runtime)
    return final


def load_checkpoint(path: Path, model, optimizer) -> dict:
    """Load model + optimizer shards from ``path`` into the (possibly sharded) model and optimizer; return the state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    both = {"model": model_state, "optim": optim_state}
    with _single_process_ok():
        dcp.load(both, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=both["model"], optim_state_dict=both["optim"])
    return json.loads((Path(path) / STATE_FILE).read_text())


def full_state_dict(model, runtime: Runtime) -> dict | None:
    """The unsharded model weights on CPU in the main process (None elsewhere); every process must call it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    if not runtime.distributed:
        return None  # the plain module saves itself
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    return state if runtime.is_main else None
