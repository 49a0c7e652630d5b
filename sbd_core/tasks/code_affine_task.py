"""Synthetic HumanEval-style code problems whose body must be computed: chains of affine steps, folded.

``code_chain``'s bodies transcribe their docstrings (``x plus 4, times 3`` -> ``(x + 4) * 3``), which a three-layer
model learns perfectly. Here the docstring is the same kind of chain, but the canonical body is its folded form, one
slope and one intercept: "Return x plus 4, times 3, minus 5." -> ``return x * 3 + 7``, so the slope (a product of the
"times" constants) and the intercept (``4 * 3 - 5``) must be worked out before they are written, with no scratch work.
The difficulty is in the function, as in the math task's columns, and a longer chain is harder.

Families (144): two or three steps of times, plus, minus, subtracted from (never one step twice in a row), then
optionally modulo or floor-divided by a constant, applied to the folded expression (``return (x * 3 + 7) % 5``). The
entry point names the steps (``plus_times_minus_mod``), which are the same step names as ``code_chain``'s, so the
same check of degenerate constant tuples applies (:func:`chains.informative`). Constants: times 2-5, plus,
minus and subtracted-from 1-9, modulo and floor division 2-7. The split hash has its own salt. The scorer runs the
body on base and plus inputs, so any correct body passes (an unfolded chain too), and a wrong slope or intercept
fails.
"""

from __future__ import annotations

import itertools

from .chains import informative
from .code_task import Family, FamilyTable, prompt_text, target_text  # noqa: F401 (the same record fields)

_TIMES = tuple(range(2, 6))     # times: 2-5
_ADDENDS = tuple(range(1, 10))  # plus, minus, subtracted from: 1-9
_MODULI = tuple(range(2, 8))    # the optional last step, modulo or floor division: 2-7
CHAIN_LENGTHS = (2, 3)
_WORDS = {"times": "times {}", "plus": "plus {}", "minus": "minus {}", "from": "subtracted from {}",
          "mod": "modulo {}", "div": "floor-divided by {}"}
_LAST = {"": None, "mod": "%", "div": "//"}  # the optional last step and its operator


def fold(steps: tuple[str, ...], consts: tuple[int, ...]) -> tuple[int, int]:
    """The slope and intercept of an affine chain: ``x`` taken through ``steps`` with ``consts`` is
    ``slope * x + intercept`` (e.g. plus 4, times 3, minus 5 -> (3, 7))."""
    slope, intercept = 1, 0
    for step, c in zip(steps, consts):
        if step == "times":
            slope, intercept = slope * c, intercept * c
        elif step == "plus":
            intercept += c
        elif step == "minus":
            intercept -= c
        elif step == "from":
            slope, intercept = -slope, c - intercept
        else:
            raise ValueError(f"not an affine step: {step!r}")
    return slope, intercept


def affine_text(slope: int, intercept: int) -> str:
    """The folded expression as it is written: ``x * 3 + 7``, ``x - 2``, ``7 - x * 3``, ``-x * 2``, ``x``."""
    term = "x" if abs(slope) == 1 else f"x * {abs(slope)}"
    if slope > 0:
        return term if intercept == 0 else f"{term} {'+' if intercept > 0 else '-'} {abs(intercept)}"
    return f"-{term}" if intercept == 0 else f"{intercept} - {term}"


def _affine_family(steps: tuple[str, ...], last: str) -> Family:
    """The family of the chain ``steps`` followed by the optional ``last`` step (``""``: none)."""
    grid = [(f"c{i}", _TIMES if step == "times" else _ADDENDS) for i, step in enumerate(steps, 1)]
    words = [_WORDS[step].format("{c%d}" % i) for i, step in enumerate(steps, 1)]
    if last:
        grid.append(("m", _MODULI))
        words.append(_WORDS[last].format("{m}"))

    def body(consts: dict) -> str:
        expr = affine_text(*fold(steps, tuple(consts[f"c{i}"] for i in range(1, len(steps) + 1))))
        return f"return {expr}" if not last else f"return ({expr}) {_LAST[last]} {consts['m']}"
    name = "_".join(steps + ((last,) if last else ()))
    return Family(name, "x", "int", "Return x " + ", ".join(words) + ".", body, tuple(grid))


def _families() -> tuple[Family, ...]:
    chains = [c for n in CHAIN_LENGTHS for c in itertools.product(("times", "plus", "minus", "from"), repeat=n)
              if all(a != b for a, b in zip(c, c[1:]))]
    return tuple(_affine_family(c, last) for c in chains for last in _LAST)


FAMILIES: tuple[Family, ...] = _families()
TABLE = FamilyTable(FAMILIES, "sbd-code-affine-v1", keep=informative)
split_of = TABLE.split_of
signature = TABLE.signature
build_problem = TABLE.build_problem
capacities = TABLE.capacities
capacity = TABLE.capacity
make_problems = TABLE.make_problems

# code_graded's hard problems: chains of three or four affine steps with at least two "times" on two-digit constants,
# folded ("Return x times 37, plus 18, times 43, as one slope and one intercept." -> ``return x * 1591 + 774``): the
# slope is a product of two or more 2-digit numbers, written at once, which the embedded configs' tiny models do not
# learn to compute (docs/tasks.md), and the doctest's one example gives the intercept only with it. 77 families (10
# of three steps, 67 of four), so a test set's hard problems spread over many families as its easy ones do; constants
# 11-39 in three steps, 11-19 in four (which keeps the grid to 0.68 million tuples). The docstring's last words tell
# them apart from code_chain's transcribed chains.
FOLD_LENGTHS = {3: tuple(range(11, 40)), 4: tuple(range(11, 20))}


def _fold_family(steps: tuple[str, ...]) -> Family:
    """The family of the affine chain ``steps``, written folded."""
    def body(consts: dict) -> str:
        return f"return {affine_text(*fold(steps, tuple(consts[f'c{i}'] for i in range(1, len(steps) + 1))))}"
    words = ", ".join(_WORDS[step].format("{c%d}" % i) for i, step in enumerate(steps, 1))
    return Family("fold_" + "_".join(steps), "x", "int", f"Return x {words}, as one slope and one intercept.", body,
                  tuple((f"c{i}", FOLD_LENGTHS[len(steps)]) for i in range(1, len(steps) + 1)))


FOLD_FAMILIES = tuple(_fold_family(steps) for n in FOLD_LENGTHS
                      for steps in itertools.product(("times", "plus", "minus", "from"), repeat=n)
                      if steps.count("times") >= 2)
FOLD_TABLE = FamilyTable(FOLD_FAMILIES, "sbd-code-fold-v2")
