"""Synthetic GSM8K-style math word problems with short worked digit steps.

Three kinds of problems, taken in turn (``KINDS``: per four problems an addition, two subtractions and a two-step
problem): one addition or subtraction of two numbers of 2 to 4 digits, or two steps (an addition, then a subtraction
from its result) on 2-digit numbers. Every step is worked column by column, e.g.

    question: "Ann has 347 pens and buys 86 more. How many pens now?"
    solution: "347+86: 7+6=13, 4+8+1=13, 3+0+1=4. So 433.\n#### 433"

    question: "Ben has 47 cards, finds 38 more, then sells 19. How many cards are left?"
    solution: "47+38: 7+8=15, 4+3+1=8. So 85. 85-19: 15-9=6, 8-1-1=6. So 66.\n#### 66"

``math_direct`` writes each step's result at once, no columns, on 2-3 digit numbers (two steps on 2 digits):
"347+86=433.\n#### 433", "47+38=85. 85-19=66.\n#### 66"; its difficulty is the carries and borrows the model must
work out before it writes a result's first digit. A computation has the same key, so the same split, in every task.

Template tokens ("So", ":", "=") are predictable and operand digits are copied, but column sums, carries ("+1"),
borrows ("-1", "13-7"), the step results and the final answer must be computed from earlier tokens. The task is sized
so that the embedded default's tiny model learns it well but not perfectly in its training budget (docs/tasks.md has
the measured accuracies): 2-digit single steps, the task before, were solved 1,000 / 1,000 by every arm, which cannot
show a difference between them; the errors that remain are mostly subtractions (whether to borrow, leading zeros of
the result), hence half the problems subtract.

Every problem is keyed by its computations (``repr`` of the ``(a, op, b)`` list), and the key's stable hash decides its
split (:mod:`sbd_core.tasks.splits`): train, dev and test never share a computation. ``make_problems`` takes the kinds
in turn (a seeded order of the cycle) and draws each kind's computations at random, keeping those of the split not
drawn before; the spaces are large (over 100 million one-step computations), so every split holds far more problems
than a run asks for. Generation is deterministic from a seed (``random.Random``).

Records: ``task_id`` ("math/<i>"), ``question``, ``solution``, ``answer`` (string of the integer), plus
hidden fields ``_kind`` and ``_ops`` (list of ``[x, op, y]``) for checking.
"""

from __future__ import annotations

import random
import re

from .splits import SPLITS, check_count, check_split
from .splits import split_of as _split_of

__all__ = ["KINDS", "SPLITS", "MAX_PROBLEMS", "add_steps", "sub_steps", "direct_step", "split_of", "make_problems",
           "make_products", "shorter_result", "make_shorter_results", "prompt_text", "target_text", "extract_answer"]

KINDS = ("add", "sub", "sub", "add_sub")  # drawn in turn (a seeded order of this cycle): half the problems subtract
MAX_PROBLEMS = 100_000  # per call: a bound on the work of one call, far below what a held-out split holds
_SPLIT_SALT = "sbd-math-v1"
_ANSWER_RE = re.compile(r"#### (-?\d+)")

_NAMES = ("Ann", "Ben", "Cal", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lea")
_ITEMS = ("pens", "cards", "shells", "coins", "books", "apples", "stamps", "beads", "rocks", "cups")
_GAIN = ("buys", "finds", "gets")
_LOSE = ("gives away", "loses", "sells")


def split_of(key: str) -> str:
    """The split ("train" 80% / "dev" 10% / "test" 10%) of a problem key, by stable hash."""
    return _split_of(_SPLIT_SALT, key)


def _digits(n: int, width: int) -> list[int]:
    """Digits of ``n`` from the units upwards, zero-padded to ``width``."""
    return [int(c) for c in reversed(str(n).zfill(width))]


def add_steps(a: int, b: int) -> str:
    """Column addition, e.g. ``add_steps(47, 38) == "47+38: 7+8=15, 4+3+1=8. So 85."``."""
    width = max(len(str(a)), len(str(b)))
    carry, parts = 0, []
    for x, y in zip(_digits(a, width), _digits(b, width)):
        s = x + y + carry
        parts.append(f"{x}+{y}" + ("+1" if carry else "") + f"={s}")
        carry = s // 10
    return f"{a}+{b}: {', '.join(parts)}. So {a + b}."


def sub_steps(a: int, b: int) -> str:
    """Column subtraction with borrows, e.g. ``sub_steps(83, 47) == "83-47: 13-7=6, 8-1-4=3. So 36."``."""
    if a < b:
        raise ValueError(f"sub_steps needs a >= b, got {a} - {b}")
    width = len(str(a))
    borrow, parts = 0, []
    for x, y in zip(_digits(a, width), _digits(b, width)):
        need = 1 if x - borrow < y else 0
        left = x + 10 * need
        parts.append(f"{left}" + ("-1" if borrow else "") + f"-{y}={left - borrow - y}")
        borrow = need
    return f"{a}-{b}: {', '.join(parts)}. So {a - b}."


_STEPS = {"+": add_steps, "-": sub_steps}
_APPLY = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


def direct_step(x: int, op: str, y: int) -> str:
    """One step written without working, its result computed at once: ``direct_step(347, "+", 86) == "347+86=433."``
    (``math_direct``: every carry and borrow is worked out inside the model, none on the page)."""
    return f"{x}{op}{y}={_APPLY[op](x, y)}."


ONE_STEP_DIGITS = (2, 3, 4)  # operand lengths of one-step problems, each equally likely
TWO_STEP_DIGITS = (2,)  # of two-step problems
# math_long's operand lengths (one step, two steps): the same kinds and worked columns on longer numbers, so that more
# columns must be computed right (a computation has the same split in both tasks: its key and salt are the same)
LONG_DIGITS = ((3, 4, 5), (2, 3))
# math_direct's (one step, two steps): shorter numbers, since a result is written at once (a first draft on math_long's
# lengths, commit 31beff8, had learnt not even the units digit of a 2-digit sum after 7,200 steps: docs/claim-study.md)
DIRECT_DIGITS = ((2, 3), (2,))


def _number(rng: random.Random, lengths: tuple[int, ...]) -> int:
    """A number whose length in digits is drawn from ``lengths``, uniform among the numbers of that length."""
    digits = rng.choice(lengths)
    return rng.randint(10 ** (digits - 1), 10 ** digits - 1)


def _draw(kind: str, rng: random.Random, one_step: tuple[int, ...] = ONE_STEP_DIGITS,
          two_step: tuple[int, ...] = TWO_STEP_DIGITS) -> list[tuple[int, str, int]]:
    """One computation of ``kind``: its steps ``(x, op, y)``, a later step's ``x`` the previous step's result;
    ``one_step`` and ``two_step`` are the operand lengths of the one- and two-step kinds."""
    if kind == "add":
        return [(_number(rng, one_step), "+", _number(rng, one_step))]
    if kind == "sub":
        a, b = sorted((_number(rng, one_step), _number(rng, one_step)), reverse=True)
        return [(a, "-", b)]
    a, b = _number(rng, two_step), _number(rng, two_step)
    c = _number(rng, two_step)
    while c > a + b:  # what is taken away never exceeds what there is
        c = _number(rng, two_step)
    return [(a, "+", b), (a + b, "-", c)]


def _question(rng: random.Random, ops: list[tuple[int, str, int]]) -> str:
    """The word problem of one computation, with a random name, item and verbs."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    (a, op, b), rest = ops[0], ops[1:]
    if op == "*":
        return f"{name} has {a} boxes of {b} {item}. How many {item} in all?"
    if rest:
        return (f"{name} has {a} {item}, {rng.choice(_GAIN)} {b} more, then {rng.choice(_LOSE)} {rest[0][2]}. "
                f"How many {item} are left?")
    if op == "+":
        return f"{name} has {a} {item} and {rng.choice(_GAIN)} {b} more. How many {item} now?"
    return f"{name} has {a} {item} and {rng.choice(_LOSE)} {b}. How many {item} are left?"


def _record(index: int, kind: str, ops: list[tuple[int, str, int]], question: str, worked: bool) -> dict:
    """The problem record with its solution (every step, worked column by column or, if not ``worked``, its result
    written at once; then the answer)."""
    answer = str(_APPLY[ops[-1][1]](ops[-1][0], ops[-1][2]))
    steps = " ".join(_STEPS[op](x, y) if worked else direct_step(x, op, y) for x, op, y in ops)
    return {"task_id": f"math/{index}", "question": question, "solution": f"{steps}\n#### {answer}",
            "answer": answer, "_kind": kind, "_ops": [list(step) for step in ops]}


def make_problems(split: str, n: int, seed: int, one_step: tuple[int, ...] = ONE_STEP_DIGITS,
                  two_step: tuple[int, ...] = TWO_STEP_DIGITS, worked: bool = True) -> list[dict]:
    """``n`` distinct problems of ``split``, the kinds in turn (a seeded order), deterministic in ``seed``;
    ``one_step`` / ``two_step``: the operand lengths (``math_long`` takes longer ones, :data:`LONG_DIGITS`);
    ``worked``: whether the solution works each step column by column (``math_direct`` writes results at once).

    Raises ValueError for an unknown split, a bad ``n``, or ``n > MAX_PROBLEMS``.
    """
    _check_request(split, n)
    rng = random.Random(seed)
    kinds = rng.sample(KINDS, len(KINDS))

    def draw(i: int) -> tuple[str, list]:
        kind = kinds[i % len(kinds)]
        return kind, _draw(kind, rng, one_step, two_step)
    return _collect(split, n, rng, draw, worked)


def _check_request(split: str, n: int) -> None:
    """ValueError for an unknown split, a bad ``n``, or ``n > MAX_PROBLEMS``."""
    check_split(split)
    if check_count(n) > MAX_PROBLEMS:
        raise ValueError(f"n={n} exceeds MAX_PROBLEMS={MAX_PROBLEMS} math problems per call")


def _collect(split: str, n: int, rng: random.Random, draw, worked: bool) -> list[dict]:
    """``n`` distinct problems of ``split``: ``draw(i)`` gives the ``i``-th problem's kind and steps, drawn again while
    they fall in another split or were drawn before; each record's question is drawn from ``rng`` once accepted."""
    seen: set[str] = set()
    out: list[dict] = []
    while len(out) < n:
        kind, ops = draw(len(out))
        key = repr(ops)
        if key in seen or split_of(key) != split:
            continue
        seen.add(key)
        out.append(_record(len(out), kind, ops, _question(rng, ops), worked))
    return out


# a product's operand lengths (math_graded's hard problems, :func:`make_products`)
PRODUCT_DIGITS = (2, 3)


def make_products(split: str, n: int, seed: int) -> list[dict]:
    """``n`` distinct one-step products of ``split`` (kind ``"mul"``), a 2-digit times a 3-digit number, the result
    written at once: "Ann has 34 boxes of 127 pens. How many pens in all?" -> ``" 34*127=4318.\n#### 4318"``.
    ``math_graded``'s hard problems: no column work on the page, and a product of that size is a computation the
    tiny models of the embedded configs do not learn to do in one step (docs/tasks.md). Deterministic in ``seed``;
    the key and split hash are the other kinds' (``repr`` of the steps).

    Raises ValueError for an unknown split, a bad ``n``, or ``n > MAX_PROBLEMS``.
    """
    _check_request(split, n)
    rng = random.Random(seed)

    def draw(i: int) -> tuple[str, list]:
        return "mul", [(_number(rng, PRODUCT_DIGITS[:1]), "*", _number(rng, PRODUCT_DIGITS[1:]))]
    return _collect(split, n, rng, draw, worked=False)


def shorter_result(ops) -> bool:
    """Whether a problem's steps (``[(a, op, b), ...]``) hold a subtraction whose result has fewer digits than the
    number it is taken from (``1231 - 922 = 309``): its worked answer's top column comes out 0 and the answer drops
    that zero while it reads the column digits back (docs/claim-study.md: the last skill either arm learns)."""
    return any(op == "-" and len(str(a - b)) < len(str(a)) for a, op, b in ops)


def make_shorter_results(split: str, n: int, seed: int) -> list[dict]:
    """``n`` distinct problems of ``split`` whose result is shorter (:func:`shorter_result`): the math task's problems
    (its kinds at random, its operand lengths, worked columns) kept only when they are of that kind, so they come in
    the proportions the math task has them. A training source (``math_shorter``) that raises their share in a run's
    data without touching its benchmarks; deterministic in ``seed``, keys and split hash the math task's.

    Raises ValueError for an unknown split, a bad ``n``, or ``n > MAX_PROBLEMS``.
    """
    _check_request(split, n)
    rng = random.Random(f"shorter/{seed}")  # not the math task's stream: a run takes both with one seed

    def draw(i: int) -> tuple[str, list]:
        while True:  # about one draw in six is of the kind ("add" never is)
            kind = rng.choice(KINDS)
            ops = _draw(kind, rng)
            if shorter_result(ops):
                return kind, ops
    return _collect(split, n, rng, draw, worked=True)


def prompt_text(problem: dict) -> str:
    """What the decoder is given: ``"Question: <question>\\nAnswer:"``."""
    return f"Question: {problem['question']}\nAnswer:"


def target_text(problem: dict) -> str:
    """What the model should produce after the prompt: ``" <solution>"`` ending in ``#### N``."""
    return " " + problem["solution"]


def extract_answer(text: str) -> str | None:
    """The first ``#### N`` answer in ``text`` (as a string), or None if there is none."""
    m = _ANSWER_RE.search(text)
    return m.group(1) if m else None
