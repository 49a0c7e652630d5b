"""Run identity in the report: the columns that name one run (one score file), the NTP arm every speedup and
difference is measured against, and the keys that pair rows with it.

Free of torch and pandas (a frame, a row or a dict all answer :func:`is_baseline`), so the workflow and the stages may
import it.
"""

from __future__ import annotations

#: The NTP objective and the NTP sampler's tag: the NTP arm is the NTP-trained model decoded with NTP.
NTP = "ntp"
#: The columns that name one run: one score file, one summary row.
RUN_KEY = ("model", "objective", "train_seed", "train_steps", "sampler", "benchmark")


def key_without(*names: str) -> list[str]:
    """:data:`RUN_KEY` without ``names``, in its order."""
    return [c for c in RUN_KEY if c not in names]


#: A run and its NTP arm share these.
PAIR_KEY = key_without("objective", "sampler")
#: An arm's run with any sampler (a verified run and its arm's NTP decoding share these).
ARM_KEY = key_without("sampler")
#: A run over its fine-tune seeds.
SEEDS_KEY = key_without("train_seed")


def is_baseline(run):
    """Whether ``run`` is the NTP arm (objective ntp, sampler ntp): a bool for one run (a dict or a row), a boolean
    mask for a frame."""
    return (run["objective"] == NTP) & (run["sampler"] == NTP)


def baseline_of(run: dict) -> dict:
    """The identity of ``run``'s NTP arm (the same run with the NTP objective and the NTP sampler)."""
    return {**run, "objective": NTP, "sampler": NTP}
