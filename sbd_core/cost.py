"""What a fine-tune costs in GPU-hours, from a measured step throughput, with every assumption a named argument.

    cost = finetune_cost(row_tokens_per_s_per_gpu=..., steps=34_000, tokens_per_step=2 * 1024**2, gpus=64)

Assumptions (the defaults are the paper's run as we read it):
- ``tokens = steps x tokens_per_step`` row tokens (before the SBD doubling; 34k x 2M = 71.3B, the paper's "70B");
- ``row_tokens_per_s_per_gpu``: measured throughput of ONE GPU running the same model, objective, row length, precision
  and attention backend (``benchmarks/bench_train.py``, extrapolated to the full depth);
- ``scaling_efficiency``: the fraction of that per-GPU throughput kept at ``gpus`` GPUs (FSDP all-gathers and
  reduce-scatters not hidden behind compute); 0.9 is typical of FSDP on one InfiniBand fabric at this size, not measured;
- ``overhead``: time outside steps (checkpoints, restarts, data loading stalls) as a fraction of step time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class FinetuneCost:
    tokens: float
    gpu_hours: float
    wall_hours: float
    assumptions: dict

    def as_dict(self) -> dict:
        return asdict(self)


def finetune_cost(row_tokens_per_s_per_gpu: float, steps: int = 34_000, tokens_per_step: int = 2 * 1024**2,
                  gpus: int = 64, scaling_efficiency: float = 0.9, overhead: float = 0.05) -> FinetuneCost:
    """GPU-hours and wall-clock hours of one fine-tuning arm (see the module doc for the assumptions)."""
    if row_tokens_per_s_per_gpu <= 0 or gpus < 1 or not 0 < scaling_efficiency <= 1 or overhead < 0:
        raise ValueError("need a positive throughput, gpus >= 1, 0 < scaling_efficiency <= 1 and overhead >= 0")
    tokens = float(steps) * tokens_per_step
    gpu_seconds = tokens / (row_tokens_per_s_per_gpu * scaling_efficiency) * (1 + overhead)
    assumptions = {"steps": steps, "tokens_per_step": tokens_per_step, "gpus": gpus,
                   "row_tokens_per_s_per_gpu": row_tokens_per_s_per_gpu, "scaling_efficiency": scaling_efficiency,
                   "overhead": overhead}
    return FinetuneCost(tokens=tokens, gpu_hours=gpu_seconds / 3600, wall_hours=gpu_seconds / 3600 / gpus,
                        assumptions=assumptions)


def analytic_row_tokens_per_s(matmul_params: float, layers: int, hidden: int, row_tokens: int, objective: str,
                              peak_flops: float = 989e12, mfu: float = 0.4, recompute: bool = True) -> float:
    """A FLOP-count stand-in for a measured per-GPU throughput (row tokens/s), when no GPU run is at hand.

    ``matmul_params``: weights in matrix products per token (all but the embedding lookup; Llama-3.1 8B: 7.5e9).
    Forward FLOPs per model token = 2 x matmul_params + 4 x hidden x layers x (keys attended, on average row/2 for a
    causal row and also for SBD's block-sparse noised half). SBD runs 2 model tokens per row token (clean + noised).
    Training = 3 forwards (4 with activation ``recompute``). ``mfu``: the fraction of ``peak_flops`` (H100/H200 dense
    bf16: 989e12) a well-tuned FSDP run reaches; 0.4 is typical for long-context training, not measured here.
    """
    if objective not in ("ntp", "sbd"):
        raise ValueError(f"objective must be 'ntp' or 'sbd', got {objective!r}")
    model_tokens = 2 if objective == "sbd" else 1
    forward = model_tokens * (2 * matmul_params + 4 * hidden * layers * row_tokens / 2)
    return mfu * peak_flops / ((4 if recompute else 3) * forward)
