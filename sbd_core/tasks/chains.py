"""Which constant tuples of an integer chain make a problem worth asking, shared by the chain tasks (``code_chain``,
``code_affine``): a family's entry point names its steps (``plus_times_mod``), and a tuple is kept only where the
function is not constant and every constant matters."""

from __future__ import annotations

import numpy as np

__all__ = ["informative"]

_PROBES = np.concatenate([np.arange(-40, 41), [997, 10_007, -1_234, 123_456]])  # the x values a check runs on
_FIRST_PROBES = _PROBES[::6]  # 15 of them, -40 to 123,456: the first look (:func:`informative`)
_NUMPY_STEPS = {"times": np.multiply, "plus": np.add, "minus": np.subtract, "mod": np.mod, "div": np.floor_divide,
                "from": lambda y, c: c - y}  # numpy's integer mod and floor division round as Python's do


def informative(fam, combos: list[tuple]) -> list[bool]:
    """Which constant tuples of the integer chain ``fam`` (a :class:`code_task.Family`) make a problem whose every
    constant matters: the function is not constant on the probe values (``(x % 3) // 5`` is 0), and moving any one
    constant by 1 changes it there (``x * 4 + 2`` then ``% 2``), so no body with a wrong constant can pass by accident.
    List families keep all tuples.

    Both conditions ask for a witness among the probes, so a witness among a few of them decides a tuple; only the
    tuples with none there are checked on every probe (the same answer in about half the time: code_chain's table
    1.9-2.0 s -> 1.0-1.1 s on 2026-12-07)."""
    if fam.arg != "x":
        return [True] * len(combos)
    steps = fam.name.split("_")
    consts = np.array(combos, dtype=np.int64)
    keep = _witnessed(steps, consts, _FIRST_PROBES)
    unsure = ~keep
    if unsure.any():
        keep[unsure] = _witnessed(steps, consts[unsure], _PROBES)
    return keep.tolist()


def _witnessed(steps: list[str], consts: np.ndarray, probes: np.ndarray) -> np.ndarray:
    """Per constant tuple (a row of ``consts``), whether ``probes`` show the chain not constant and every constant
    mattering."""
    def values(c):
        y = np.broadcast_to(probes, (len(c), len(probes))).astype(np.int64)
        for j, step in enumerate(steps):
            y = _NUMPY_STEPS[step](y, c[:, j:j + 1])
        return y
    base = values(consts)
    keep = base.min(axis=1) != base.max(axis=1)
    for j in range(len(steps)):
        moved = consts.copy()
        moved[:, j] += 1
        keep &= (values(moved) != base).any(axis=1)
    return keep
