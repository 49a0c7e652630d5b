"""Synthetic HumanEval-style code problems with many families: chains of operations, in the evalplus schema.

The ``code`` task has 32 families, too few for a family-clustered interval narrow enough to call two arms
equivalent within 2 points. This task's 952 families are built from a small grammar (docs/tasks.md):

* 930 on an integer ``x``: a chain of two, three or four operations applied in order ("Return x plus 4, times 3,
  modulo 7."), each step one of times, plus, minus, modulo, floor-divided by, subtracted from, never the same step
  twice in a row; the body is one expression with the parentheses the order needs (``return (x + 4) * 3 % 7``), so
  the model must plan them from the whole docstring (a four-step chain opens up to three of them before ``x``, and a
  "subtracted from" step puts its constant, read last, first);
* 22 on a list ``xs``: a filter (greater than, less than, even, odd), an optional map (plus, times) and a reduction
  (sum, list, count): "Take the elements greater than 5, add 3 to each, and return their sum."

A family's entry point names its steps (``plus_times_mod``, ``gt_plus_sum``); the problem key is the family and its
constants, and a salted hash of it decides the split, as in the ``code`` task (:class:`code_task.FamilyTable`);
constant tuples that make a degenerate function (constant, or blind to one of its constants) are left out.
"""

from __future__ import annotations

import itertools

from .chains import informative
from .code_task import Family, FamilyTable, prompt_text, target_text  # noqa: F401 (the same record fields)

_MULTIPLIERS = tuple(range(2, 8))   # times, modulo, floor-division constants: 2-7
_ADDENDS = tuple(range(1, 16))      # plus, minus, subtracted-from constants: 1-15
# a four-step chain's constants: 2-5 and 1-7, which keeps its 750 families' grid to 0.66 million tuples (with the
# ranges above it would be 8.2 million, too many to hash at every start)
_MULTIPLIERS_LONG, _ADDENDS_LONG = tuple(range(2, 6)), tuple(range(1, 8))
CHAIN_LENGTHS = (2, 3, 4)

# integer step: name -> (docstring words, operator, constants, additive); "from" puts its constant on the left
_STEPS = {
    "times": ("times {}", "*", _MULTIPLIERS, False),
    "plus": ("plus {}", "+", _ADDENDS, True),
    "minus": ("minus {}", "-", _ADDENDS, True),
    "mod": ("modulo {}", "%", _MULTIPLIERS, False),
    "div": ("floor-divided by {}", "//", _MULTIPLIERS, False),
    "from": ("subtracted from {}", "-", _ADDENDS, True),
}


def _chain_family(steps: tuple[str, ...]) -> Family:
    """The family of the integer chain ``steps``: its docstring and its one-expression body with the parentheses
    Python's precedence needs (an additive expression is wrapped before a multiplicative step or under a
    subtraction from a constant)."""
    expr, additive, words, grid = "x", False, [], []
    for i, step in enumerate(steps, 1):
        text, op, values, step_additive = _STEPS[step]
        if len(steps) == 4:
            values = _ADDENDS_LONG if step_additive else _MULTIPLIERS_LONG
        const = "{c%d}" % i
        words.append(text.format(const))
        grid.append((f"c{i}", values))
        inner = f"({expr})" if additive and (step == "from" or not step_additive) else expr
        expr = f"{const} - {inner}" if step == "from" else f"{inner} {op} {const}"
        additive = step_additive
    return Family("_".join(steps), "x", "int", "Return x " + ", ".join(words) + ".", f"return {expr}", tuple(grid))


_FILTERS = {  # name -> (docstring words, condition, constants)
    "gt": ("the elements greater than {f}", "v > {f}", tuple(range(31))),
    "lt": ("the elements less than {f}", "v < {f}", tuple(range(31))),
    "even": ("the even elements", "v % 2 == 0", None),
    "odd": ("the odd elements", "v % 2 == 1", None),
}
_MAPS = {  # name -> (docstring words, value expression, constants); "" is no map
    "": ("", "v", None),
    "plus": (", add {m} to each,", "v + {m}", _ADDENDS),
    "times": (", multiply each by {m},", "v * {m}", _MULTIPLIERS),
}
_REDUCTIONS = {  # name -> (docstring words, body template over the generator, return annotation)
    "sum": ("their sum", "sum({value} for v in xs if {cond})", "int"),
    "list": ("them as a list", "[{value} for v in xs if {cond}]", "list[int]"),
    "count": ("their count", "sum(1 for v in xs if {cond})", "int"),
}


def _list_family(filt: str, mapping: str, reduction: str) -> Family:
    """The list family: keep the elements passing ``filt``, apply ``mapping`` to each, reduce by ``reduction``."""
    filter_words, cond, filter_values = _FILTERS[filt]
    map_words, value, map_values = _MAPS[mapping]
    reduce_words, body, returns = _REDUCTIONS[reduction]
    doc = f"Take {filter_words}{map_words} and return {reduce_words}."
    grid = tuple((k, v) for k, v in (("f", filter_values), ("m", map_values)) if v is not None)
    name = "_".join(part for part in (filt, mapping, reduction) if part)
    return Family(name, "xs", returns, doc, "return " + body.format(value=value, cond=cond), grid)


def _families() -> tuple[Family, ...]:
    names = tuple(_STEPS)
    chains = [c for n in CHAIN_LENGTHS for c in itertools.product(names, repeat=n)
              if all(a != b for a, b in zip(c, c[1:]))]
    lists = [(f, m, r) for f in _FILTERS for r in _REDUCTIONS for m in _MAPS
             if not (r == "count" and m) and (m or _FILTERS[f][2])]  # a family has a constant
    return tuple(_chain_family(c) for c in chains) + tuple(_list_family(*spec) for spec in lists)


FAMILIES: tuple[Family, ...] = _families()
TABLE = FamilyTable(FAMILIES, "sbd-code-chain-v2", keep=informative)
split_of = TABLE.split_of
signature = TABLE.signature
build_problem = TABLE.build_problem
capacities = TABLE.capacities
capacity = TABLE.capacity
make_problems = TABLE.make_problems

