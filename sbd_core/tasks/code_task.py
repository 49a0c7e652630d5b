"""Synthetic HumanEval-style code problems in the evalplus problem schema.

Each problem is a small function: a signature plus a docstring that states the operation with constants
(e.g. "Return x times 3 plus 7.") and one doctest example; the canonical body (1-3 lines) must copy those
constants and map the operation words to code. 32 families: 16 on an integer ``x`` with two constants (a factor or
modulus and an offset), 8 on a list ``xs`` and 8 on a string ``s`` with one constant.

A problem is fully determined by its family and constants (its "signature"); the split is a stable hash
of that signature (80/10/10), so train/dev/test never share a prompt; the test split holds 1,898 problems
(``capacity``). ``make_problems`` picks problems of the split round-robin over families in a seed-shuffled order,
so a family whose pool runs out leaves its turn to the others. The plus inputs of ``x`` and ``xs`` problems include
each integer constant and its neighbours, so that a body with a constant off by one fails. Records carry exactly the
evalplus fields: ``task_id`` ("HumanEval/<i>", numbered within the returned list), ``prompt``, ``canonical_solution``,
``entry_point``, ``base_input``, ``plus_input``, ``atol`` (0) and ``contract`` ("").

History: the 200-problem default had the first 24 families with narrower integer constants (held-out split: 240
problems). For 1,000-problem test sets the integer families' grids were widened and 8 integer families of the same
kind added; the list and string families are unchanged, so the recipe's train set (1,200 problems) keeps its mix: all
of their 262 train problems, the same as before, and 938 integer ones. (Widening them too, with two-constant list and
string families, moved that mix and the tiny model failed to copy the quoted words.) The hash is unchanged, so every
problem of the old splits keeps its split and its prompt; the plus inputs at the constants were appended.
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass
from typing import Callable

from .splits import SPLITS, check_count, check_split
from .splits import split_of as _split_of
from .splits import splits_of

_SPLIT_SALT = "sbd-code-v1"
_WORDS = ("pre", "un", "re", "ab", "big", "red", "top", "new", "old", "my", "sub", "ok")
_LETTERS = "abcdefgh"


@dataclass(frozen=True)
class Family:
    """A problem family: ``doc`` and ``body`` are format templates over the constants in ``grid``."""

    name: str                       # entry point
    arg: str                        # "x" (int), "xs" (list[int]) or "s" (str)
    returns: str                    # return annotation
    doc: str
    body: str | Callable[[dict], str]  # body lines without the 4-space function indent, or a function of the
    #                                    constants that writes them (a body computed from them: code_affine)
    grid: tuple[tuple[str, tuple], ...]
    nonempty: bool = False          # inputs must be non-empty (max/min of a list)


def _r(lo: int, hi: int) -> tuple[int, ...]:
    """Inclusive integer range as a tuple."""
    return tuple(range(lo, hi + 1))


_PAIRS = tuple(f"{a}{b}" for a, b in itertools.permutations(_LETTERS, 2))
_FACTORS = _r(2, 12)   # multipliers and moduli of the integer families
_OFFSETS = _r(1, 99)   # their added or subtracted constants

FAMILIES: tuple[Family, ...] = (
    # on an integer x, two constants: the test split's bulk (grids widened for 1,000-problem test sets)
    Family("times_plus", "x", "int", "Return x times {a} plus {b}.", "return x * {a} + {b}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("times_minus", "x", "int", "Return x times {a} minus {b}.", "return x * {a} - {b}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("plus_times", "x", "int", "Return x plus {b}, times {a}.", "return (x + {b}) * {a}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("minus_times", "x", "int", "Return x minus {b}, times {a}.", "return (x - {b}) * {a}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("mod_plus", "x", "int", "Return x modulo {a} plus {b}.", "return x % {a} + {b}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("even_or_plus", "x", "int", "Return {b} if x is even, else x plus {a}.",
           "if x % 2 == 0:\n    return {b}\nreturn x + {a}", (("a", _r(1, 40)), ("b", _r(0, 40)))),
    Family("min_times", "x", "int", "Return the smaller of x times {a} and {b}.", "return min(x * {a}, {b})",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("max_plus", "x", "int", "Return the larger of x and {b}, plus {a}.", "return max(x, {b}) + {a}",
           (("a", _r(1, 12)), ("b", _r(0, 99)))),
    # added with the 1,000-problem test sets: the same kind (x, two constants, one operation each)
    Family("div_plus", "x", "int", "Return x divided by {a}, rounded down, plus {b}.", "return x // {a} + {b}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("mod_minus", "x", "int", "Return x modulo {a} minus {b}.", "return x % {a} - {b}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("from_times", "x", "int", "Return {b} minus x, times {a}.", "return ({b} - x) * {a}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("times_from", "x", "int", "Return {b} minus x times {a}.", "return {b} - x * {a}",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("max_times", "x", "int", "Return the larger of x times {a} and {b}.", "return max(x * {a}, {b})",
           (("a", _FACTORS), ("b", _OFFSETS))),
    Family("min_plus", "x", "int", "Return the smaller of x and {b}, plus {a}.", "return min(x, {b}) + {a}",
           (("a", _r(1, 12)), ("b", _r(0, 99)))),
    Family("odd_or_times", "x", "int", "Return {b} if x is odd, else x times {a}.",
           "if x % 2 == 1:\n    return {b}\nreturn x * {a}", (("a", _FACTORS), ("b", _r(0, 99)))),
    Family("even_plus_or_times", "x", "int", "Return x plus {b} if x is even, else x times {a}.",
           "if x % 2 == 0:\n    return x + {b}\nreturn x * {a}", (("a", _FACTORS), ("b", _OFFSETS))),
    # on a list xs or a string s, one constant: unchanged since the 200-problem default (their pools are small, so
    # the recipe's train set takes all of them and the test set the few held out)
    Family("sum_greater", "xs", "int", "Return the sum of the elements greater than {c}.",
           "return sum(v for v in xs if v > {c})", (("c", _r(0, 30)),)),
    Family("count_less", "xs", "int", "Return the number of elements less than {c}.",
           "return sum(1 for v in xs if v < {c})", (("c", _r(0, 30)),)),
    Family("count_multiples", "xs", "int", "Return the number of multiples of {c} in xs.",
           "return sum(1 for v in xs if v % {c} == 0)", (("c", _r(2, 12)),)),
    Family("max_plus_c", "xs", "int", "Return the largest element plus {c}.", "return max(xs) + {c}",
           (("c", _r(1, 30)),), nonempty=True),
    Family("min_times_c", "xs", "int", "Return the smallest element times {c}.", "return min(xs) * {c}",
           (("c", _r(2, 12)),), nonempty=True),
    Family("sum_times", "xs", "int", "Return the sum of the elements times {c}.", "return sum(xs) * {c}",
           (("c", _r(2, 12)),)),
    Family("add_each", "xs", "list[int]", "Return xs with {c} added to each element.",
           "return [v + {c} for v in xs]", (("c", _r(1, 30)),)),
    Family("keep_greater", "xs", "list[int]", "Return the elements of xs greater than {c}, in order.",
           "return [v for v in xs if v > {c}]", (("c", _r(0, 30)),)),
    Family("repeat", "s", "str", "Return s repeated {n} times.", "return s * {n}", (("n", _r(2, 9)),)),
    Family("add_prefix", "s", "str", "Return s with the prefix '{w}'.", "return '{w}' + s", (("w", _WORDS),)),
    Family("add_suffix", "s", "str", "Return s with the suffix '{w}'.", "return s + '{w}'", (("w", _WORDS),)),
    Family("first_chars", "s", "str", "Return the first {n} characters of s.", "return s[:{n}]",
           (("n", _r(1, 9)),)),
    Family("last_chars", "s", "str", "Return the last {n} characters of s.", "return s[-{n}:]",
           (("n", _r(1, 9)),)),
    Family("replace_char", "s", "str", "Return s with each '{p[0]}' replaced by '{p[1]}'.",
           "return s.replace('{p[0]}', '{p[1]}')", (("p", _PAIRS),)),
    Family("count_char", "s", "int", "Return the number of times '{ch}' occurs in s.", "return s.count('{ch}')",
           (("ch", tuple(_LETTERS)),)),
    Family("len_plus", "s", "int", "Return the length of s plus {n}.", "return len(s) + {n}", (("n", _r(1, 30)),)),
)
_ANNOT = {"x": "int", "xs": "list[int]", "s": "str"}


def _gen_arg(fam: Family, rng: random.Random, plus: bool):
    """One argument value for ``fam``: small values for base inputs (lists of 3-4 elements, which keeps the doctest
    example and so the prompt short); for plus inputs, negatives, values in the range of the constants, large
    magnitudes, empty and longer lists/strings."""
    if fam.arg == "x":
        if not plus:
            return rng.randint(0, 20)
        lo, hi = rng.choice(((-50, -1), (0, 60), (100, 10**4), (10**6, 10**9)))
        return rng.randint(lo, hi)
    if fam.arg == "xs":
        lo = 1 if fam.nonempty else 0
        if not plus:
            return [rng.randint(0, 20) for _ in range(rng.randint(3, 4))]  # short: the doctest shows one
        span = (-1000, 1000) if rng.random() < 0.3 else (-50, 60)
        return [rng.randint(*span) for _ in range(rng.randint(lo, 12))]
    alphabet = _LETTERS + "xyz" if plus else _LETTERS[:5]
    length = rng.randint(0, 20) if plus else rng.randint(2, 6)
    return "".join(rng.choice(alphabet) for _ in range(length))


def _inputs(fam: Family, rng: random.Random, count: int, plus: bool) -> list[list]:
    """``count`` distinct single-argument input lists."""
    seen, out = set(), []
    for _ in range(50 * count):
        arg = _gen_arg(fam, rng, plus)
        if repr(arg) not in seen:
            seen.add(repr(arg))
            out.append([arg])
        if len(out) == count:
            break
    return out


def _boundary_inputs(fam: Family, consts: dict, taken: list[list]) -> list[list]:
    """Plus inputs at the integer constants: each constant ``k`` and ``k +- 1`` (as ``x``, or together in one list
    ``xs``), so that a body with a neighbouring constant (``v > 17`` for "greater than 18") fails; none for strings.
    Inputs already in ``taken`` are left out."""
    near = [k + d for k in consts.values() if isinstance(k, int) for d in (-1, 0, 1)]
    candidates = {"x": [[v] for v in dict.fromkeys(near)], "xs": [[near]] if near else [], "s": []}[fam.arg]
    return [args for args in candidates if args not in taken]


def _run(prompt: str, body: str, entry_point: str) -> Callable:
    """Exec ``prompt + body`` and return the entry-point function."""
    scope: dict = {}
    exec(prompt + body, scope)  # noqa: S102 - our own generated code
    return scope[entry_point]


class FamilyTable:
    """A code task: its families and the salt of its split hash, with the problem builder and the round-robin draw
    over them (the default task's table is this module's ``FAMILIES``; another task brings its own table)."""

    def __init__(self, families: tuple[Family, ...], salt: str,
                 keep: Callable[[Family, list[tuple]], list[bool]] | None = None):
        self.families = families
        self.salt = salt
        self.keep = keep  # which constant tuples of a family make problems (None: all of them)
        self.by_name = {f.name: f for f in families}
        if len(self.by_name) != len(families):
            raise ValueError("two code families share an entry point")

    def split_of(self, key: str) -> str:
        """The split ("train" 80% / "dev" 10% / "test" 10%) of a problem key, by stable hash."""
        return _split_of(self.salt, key)

    def signature(self, family: str, consts: dict) -> str:
        """Stable text key of a problem (family name + constants, e.g. ``"times_plus:a=3,b=7"``); its hash is the
        split."""
        return family + ":" + ",".join(f"{k}={consts[k]}" for k, _ in self.by_name[family].grid)

    def build_problem(self, family: str, consts: dict, task_id: str = "HumanEval/0") -> dict:
        """Build the evalplus record of one problem; the record depends only on ``family`` and ``consts``."""
        if family not in self.by_name:
            raise ValueError(f"unknown code family {family!r}; expected one of {sorted(self.by_name)}")
        fam = self.by_name[family]
        if set(consts) != {k for k, _ in fam.grid}:
            raise ValueError(f"family {family!r} needs constants {[k for k, _ in fam.grid]}, got {sorted(consts)}")
        key = self.signature(family, consts)
        rng = random.Random(key)
        text = fam.body(consts) if callable(fam.body) else fam.body.format(**consts)
        body = "".join(f"    {line}\n" for line in text.split("\n"))
        head = f"def {fam.name}({fam.arg}: {_ANNOT[fam.arg]}) -> {fam.returns}:\n"
        example = _gen_arg(fam, random.Random("example:" + key), plus=False)
        result = _run(head + '    """\n    """\n', body, fam.name)(example)
        prompt = (f'{head}    """{fam.doc.format(**consts)}\n'
                  f"    >>> {fam.name}({example!r})\n    {result!r}\n    \"\"\"\n")
        base = _inputs(fam, rng, rng.randint(3, 5), plus=False)
        plus = _inputs(fam, rng, rng.randint(5, 10), plus=True)
        return {"task_id": task_id, "prompt": prompt, "entry_point": fam.name, "canonical_solution": body,
                "base_input": base,
                "plus_input": plus + _boundary_inputs(fam, consts, base + plus), "atol": 0, "contract": ""}

    @functools.cached_property
    def _pools(self) -> dict[str, dict[str, tuple[tuple, ...]]]:
        """Per split and family, the constant tuples kept whose problems fall in that split (in grid order): one
        pass over every key of the table."""
        pools = {split: {} for split in SPLITS}
        for fam in self.families:
            found = {split: [] for split in SPLITS}
            combos = list(itertools.product(*(vals for _, vals in fam.grid)))
            # each tuple's :meth:`signature`, built in the same (grid) order from its parts
            parts = itertools.product(*([f"{k}={v}" for v in vals] for k, vals in fam.grid))
            keys = (fam.name + ":" + ",".join(part) for part in parts)
            if self.keep is not None:
                kept = self.keep(fam, combos)
                combos, keys = list(itertools.compress(combos, kept)), itertools.compress(keys, kept)
            for combo, split in zip(combos, splits_of(self.salt, keys), strict=True):
                found[split].append(combo)
            for split in SPLITS:
                pools[split][fam.name] = tuple(found[split])
        return pools

    def _pool(self, split: str) -> dict[str, tuple[tuple, ...]]:
        """Per family, the constant tuples whose problems fall in ``split`` (in grid order)."""
        return self._pools[check_split(split)]

    def capacities(self, split: str) -> dict[str, int]:
        """How many distinct problems ``split`` holds per family (in the table's order)."""
        return {name: len(combos) for name, combos in self._pool(check_split(split)).items()}

    def capacity(self, split: str) -> int:
        """How many distinct problems ``split`` holds."""
        return sum(self.capacities(split).values())

    def make_problems(self, split: str, n: int, seed: int) -> list[dict]:
        """Return ``n`` distinct problems of ``split``, balanced over families, deterministic in ``seed``.

        Raises ValueError for an unknown split, a bad ``n``, or ``n > capacity(split)``.
        """
        if check_count(n) > self.capacity(split):
            raise ValueError(f"n={n} exceeds the {self.capacity(split)} unique {split} code problems")
        rng = random.Random(seed)
        queues = {}
        for fam in self.families:
            combos = list(self._pool(split)[fam.name])
            rng.shuffle(combos)
            queues[fam.name] = combos
        order = [f.name for f in self.families]
        rng.shuffle(order)
        chosen: list[tuple[str, tuple]] = []
        while len(chosen) < n:
            for name in order:
                if queues[name] and len(chosen) < n:
                    chosen.append((name, queues[name].pop()))
        out = []
        for i, (name, combo) in enumerate(chosen):
            names = [k for k, _ in self.by_name[name].grid]
            out.append(self.build_problem(name, dict(zip(names, combo)), task_id=f"HumanEval/{i}"))
        return out


TABLE = FamilyTable(FAMILIES, _SPLIT_SALT)
split_of = TABLE.split_of
signature = TABLE.signature
build_problem = TABLE.build_problem
capacities = TABLE.capacities
capacity = TABLE.capacity
make_problems = TABLE.make_problems


def prompt_text(problem: dict) -> str:
    """What the decoder is given: the HumanEval prompt (signature + docstring)."""
    return problem["prompt"]


def target_text(problem: dict) -> str:
    """What the model should produce after the prompt: the canonical body (4-space indent, final newline)."""
    return problem["canonical_solution"]

