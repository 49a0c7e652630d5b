"""Synthetic GSM8K-style math word problems with short worked digit steps.

Each problem is one addition or one subtraction of two 2-digit numbers, worked column by column, e.g.

    question: "Ann has 47 pens and buys 38 more. How many pens now?"
    solution: "47+38: 7+8=15, 4+3+1=8. So 85.\n#### 85"

Template tokens ("So", ":", "=") are predictable and operand digits are copied, but column sums, carries ("+1"),
borrows ("-1", "13-7") and the final answer must be computed from earlier tokens. The task is deliberately this small:
it is what a model of the embedded default learns to near-perfect NTP accuracy in minutes on a CPU, so that the masked
(MATP) mode, not the task, is what the SBD arms are compared on. (Multiplication and two-step problems were dropped
after measurement: with them the NTP arm reached only ~80% and the SBD arm ~20% under parallel decoding.)

Every computation ``(a, op, b)`` belongs to one split by a stable hash, so train/valid/test never share a computation;
``make_problems`` alternates addition and subtraction and draws each split's computations without repetition; when one
kind runs out, the other fills the rest. The test split holds 1,226 computations, 821 additions and 405 subtractions,
so 1,000 test problems alternate for 810 and hold every held-out subtraction (595 additions, 405 subtractions), where
200 held 100 of each. Generation is deterministic from a seed (``random.Random``).

Records: ``task_id`` ("math/<i>"), ``question``, ``solution``, ``answer`` (string of the integer), plus
hidden fields ``_kind`` and ``_ops`` (list of ``[x, op, y]``) for checking.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re

SPLITS = ("train", "valid", "test")
_SPLIT_SALT = "sbd-math-v1"
_ANSWER_RE = re.compile(r"#### (-?\d+)")
_OPERANDS = range(10, 100)

_NAMES = ("Ann", "Ben", "Cal", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lea")
_ITEMS = ("pens", "cards", "shells", "coins", "books", "apples", "stamps", "beads", "rocks", "cups")
_GAIN = ("buys", "finds", "gets")
_LOSE = ("gives away", "loses", "sells")


def split_of(key: str) -> str:
    """Return the split ("train" 80% / "valid" 10% / "test" 10%) of a problem key, by stable hash."""
    bucket = int(hashlib.sha256((_SPLIT_SALT + key).encode()).hexdigest()[:8], 16) % 100
    return "train" if bucket < 80 else ("valid" if bucket < 90 else "test")


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
_APPLY = {"+": lambda x, y: x + y, "-": lambda x, y: x - y}
_KIND_OF = {"+": "add", "-": "sub"}


@functools.lru_cache(maxsize=None)
def _pool(split: str) -> dict[str, tuple[tuple[int, str, int], ...]]:
    """Per kind, the computations ``(a, op, b)`` of ``split``: every a + b, and every a - b with a >= b."""
    pool = {"add": [], "sub": []}
    for a in _OPERANDS:
        for b in _OPERANDS:
            for op in ("+", "-") if a >= b else ("+",):
                if split_of(repr([(a, op, b)])) == split:
                    pool[_KIND_OF[op]].append((a, op, b))
    return {kind: tuple(ops) for kind, ops in pool.items()}


def capacity(split: str) -> int:
    """How many distinct problems ``split`` holds."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return sum(len(ops) for ops in _pool(split).values())


def _question(rng: random.Random, a: int, op: str, b: int) -> str:
    """The word problem of one computation, with a random name, item and verb."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    if op == "+":
        return f"{name} has {a} {item} and {rng.choice(_GAIN)} {b} more. How many {item} now?"
    return f"{name} has {a} {item} and {rng.choice(_LOSE)} {b}. How many {item} are left?"


def _record(index: int, a: int, op: str, b: int, question: str) -> dict:
    """Build the problem record with its worked solution."""
    answer = str(_APPLY[op](a, b))
    return {"task_id": f"math/{index}", "question": question,
            "solution": f"{_STEPS[op](a, b)}\n#### {answer}", "answer": answer,
            "_kind": _KIND_OF[op], "_ops": [[a, op, b]]}


def make_problems(split: str, n: int, seed: int) -> list[dict]:
    """Return ``n`` distinct problems of ``split``, alternating addition and subtraction while both last,
    deterministic in ``seed``.

    Raises ValueError for an unknown split, a bad ``n``, or ``n > capacity(split)``.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if n > capacity(split):
        raise ValueError(f"n={n} exceeds the {capacity(split)} unique {split} math problems")
    rng = random.Random(seed)
    queues = {kind: rng.sample(ops, len(ops)) for kind, ops in _pool(split).items()}
    kinds = rng.sample(sorted(queues), len(queues))
    out: list[dict] = []
    while len(out) < n:
        for kind in kinds:
            if queues[kind] and len(out) < n:
                a, op, b = queues[kind].pop()
                out.append(_record(len(out), a, op, b, _question(rng, a, op, b)))
    return out


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
