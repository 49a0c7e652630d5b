"""Judge a program's reported outputs against the expected ones, with evalplus's rules, in the trusted parent.

``input_set_status`` mirrors ``evalplus.eval.untrusted_check`` + ``unsafe_execute`` (evalplus 0.3.1) with
``fast_check`` on, as ``evalplus.evaluate.evaluate`` uses it: inputs are judged in order and the first failure
decides. Per input (``output_matches``, the body of ``unsafe_execute``'s loop):

* ``exact_match = out == exp``, then evalplus's special oracles (``evalplus.eval._special_oracle``):
  MBPP ``are_equivalent`` (any output), ``sum_div`` (also 0), ``surface_Area`` (``_surface_Area`` within atol),
  ``digit_distance_nums`` (``_digit_distance_nums``), ``MBPP_OUTPUT_SET_EQ_TASKS`` (``set(out) == set(exp)``),
  ``MBPP_OUTPUT_NOT_NONE_TASKS`` (the sandbox already reduced the output to a bool, see ``problems.output_modes``);
  HumanEval ``find_zero``: ``abs(_poly(*inp, out)) <= atol`` and nothing else (evalplus 0.3.1 as released on
  PyPI then ``continue``s without recording the pass, so it fails every HumanEval/32 sample, even the reference
  solution; upstream evalplus records it. We apply the check as intended);
* if ``atol == 0`` and ``is_floats(exp)``: ``atol = 1e-6`` -- and, as in evalplus, that value carries over to
  the following inputs of the same input set;
* if not an exact match and ``atol != 0``: same type, same length for lists/tuples and
  ``np.allclose(out, exp, rtol=1e-07, atol=atol)``; otherwise the exact match decides.

Differences from evalplus, all on the safe side: the values compared are plain data decoded from JSON (see
``plain_data``), so a rigged ``__eq__`` or a patched ``is_floats``/``numpy`` in the program cannot change the
verdict; the special oracles see the parent's pristine copy of the input (a program that mutates its argument
cannot fake ``find_zero``); outputs too large to ship (``plain_data.Digest``) must be identical to the expected
ones (a tolerance or set comparison cannot be applied to a digest).

Statuses as evalplus reports them: "pass" (every input matched), "fail" (a wrong output, an exception, a
per-input timeout, an output that is not plain data, a program that does not load), "timeout" (the run was
killed at its deadline or died before reporting every input, with no failure among what it reported).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from evalplus.eval import is_floats
from evalplus.eval._special_oracle import (
    MBPP_OUTPUT_SET_EQ_TASKS,
    _digit_distance_nums,
    _poly,
    _surface_Area,
)

from .plain_data import Digest

__all__ = ["RunReport", "output_matches", "input_set_status", "PASS", "FAIL", "TIMEOUT"]

PASS, FAIL, TIMEOUT = "pass", "fail", "timeout"


@dataclass
class RunReport:
    """What one sandboxed run reported: decoded outputs up to the first error, and how the run ended.

    ``outcome``: "done", "killed" (deadline), "too_large" (report over the cap) or "crashed" (the worker died);
    ``error``: None, or "sandbox" | "program" | "exception" | "timeout" | "unserialisable" | "malformed"."""

    outcome: str
    outputs: list[Any] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    error: str | None = None
    detail: str = ""


def _special_match(dataset: str, entry_point: str, inp: list, exp: Any, out: Any, atol: float,
                   exact: Any) -> Any:
    """evalplus's per-task special oracles for MBPP (``unsafe_execute``); returns the new exact_match."""
    if dataset != "mbpp":
        return exact
    if entry_point == "are_equivalent":  # Mbpp/164
        return True
    if entry_point == "sum_div":  # Mbpp/295
        return exact or out == 0
    if entry_point == "surface_Area":  # Mbpp/581
        return exact or abs(out - _surface_Area(*inp)) <= atol
    if entry_point == "digit_distance_nums":  # Mbpp/558
        return exact or out == _digit_distance_nums(*inp)
    if entry_point in MBPP_OUTPUT_SET_EQ_TASKS:
        return set(out) == set(exp)
    return exact


def output_matches(dataset: str, entry_point: str, inp: list, exp: Any, out: Any, atol: float) -> tuple[bool, float]:
    """One input of ``unsafe_execute``: (passed, atol for the next input). Any exception means failed."""
    if isinstance(exp, Digest) or isinstance(out, Digest):
        return exp == out, atol
    try:
        if dataset == "humaneval" and entry_point == "find_zero":
            return bool(abs(_poly(*inp, out)) <= atol), atol
        exact = _special_match(dataset, entry_point, inp, exp, out, atol, out == exp)
        if atol == 0 and is_floats(exp):
            atol = 1e-6
        if not exact and atol != 0:
            same_shape = type(out) == type(exp) and (not isinstance(exp, (list, tuple)) or len(out) == len(exp))
            return bool(same_shape and np.allclose(out, exp, rtol=1e-07, atol=atol)), atol
        return bool(exact), atol
    except Exception:
        return False, atol


def input_set_status(report: RunReport, n_inputs: int, matches: Callable[[int, Any, float], tuple[bool, float]],
                     atol: float) -> str:
    """Status of one input set: ``matches(i, out, atol)`` judges output i (see module doc for the rules)."""
    for index, out in enumerate(report.outputs):
        passed, atol = matches(index, out, atol)
        if not passed:
            return FAIL
    if report.error is not None or report.outcome == "too_large":
        return FAIL
    return PASS if len(report.outputs) == n_inputs else TIMEOUT
