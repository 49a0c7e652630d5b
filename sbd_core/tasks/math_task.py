"""Synthetic GSM8K-style math word problems with short worked digit steps.

Each problem is one or two operations (addition/subtraction of 2-3 digit numbers, multiplication of a
2-digit number by a single digit). The solution works column by column, e.g.

    question: "Ann has 47 pens and buys 38 more. How many pens now?"
    solution: "47+38: 7+8=15, 4+3+1=8. So 85.\\n#### 85"

Template tokens ("So", ":", "=") are predictable; column sums, carries ("+1") and borrows ("-1", "13-7")
depend on earlier tokens. Generation is deterministic from a seed (``random.Random``), and the split of a
problem is a stable hash of its arithmetic content, so train/valid/test never share a computation.

Records: ``task_id`` ("math/<i>"), ``question``, ``solution``, ``answer`` (string of the integer), plus
hidden fields ``_kind`` and ``_ops`` (list of ``[x, op, y]``) for checking.
"""

from __future__ import annotations

import hashlib
import random
import re

SPLITS = ("train", "valid", "test")
MAX_PROBLEMS = 50_000
_SPLIT_SALT = "sbd-math-v1"
_ANSWER_RE = re.compile(r"#### (-?\d+)")

_NAMES = ("Ann", "Ben", "Cal", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lea")
_ITEMS = ("pens", "cards", "shells", "coins", "books", "apples", "stamps", "beads", "rocks", "cups")
_GAIN = ("buys", "finds", "gets")
_LOSE = ("gives away", "loses", "sells")
_KINDS = ("add", "sub", "mul", "add_sub", "mul_add")
_KIND_WEIGHTS = (3, 3, 2, 1, 1)


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


def mul_steps(a: int, d: int) -> str:
    """Multiplication by one digit, e.g. ``mul_steps(36, 4) == "36*4: 6*4=24, 3*4+2=14. So 144."``."""
    if not 0 <= d <= 9:
        raise ValueError(f"mul_steps needs a single-digit multiplier, got {d}")
    carry, parts = 0, []
    for x in _digits(a, len(str(a))):
        p = x * d + carry
        parts.append(f"{x}*{d}" + (f"+{carry}" if carry else "") + f"={p}")
        carry = p // 10
    return f"{a}*{d}: {', '.join(parts)}. So {a * d}."


_STEPS = {"+": add_steps, "-": sub_steps, "*": mul_steps}
_APPLY = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}


def _num(rng: random.Random) -> int:
    """A 2-digit number (80%) or a 3-digit number (20%)."""
    return rng.randint(10, 99) if rng.random() < 0.8 else rng.randint(100, 999)


def _draw(rng: random.Random) -> tuple[str, list[tuple[int, str, int]], str]:
    """Draw one problem: (kind, ops, question). Ops chain: each op's x is the previous result."""
    kind = rng.choices(_KINDS, weights=_KIND_WEIGHTS)[0]
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    gain, lose = rng.choice(_GAIN), rng.choice(_LOSE)
    if kind == "add":
        a, b = _num(rng), _num(rng)
        ops = [(a, "+", b)]
        q = f"{name} has {a} {item} and {gain} {b} more. How many {item} now?"
    elif kind == "sub":
        a, b = sorted((_num(rng), _num(rng)), reverse=True)
        ops = [(a, "-", b)]
        q = f"{name} has {a} {item} and {lose} {b}. How many {item} are left?"
    elif kind == "mul":
        a, d = rng.randint(10, 99), rng.randint(2, 9)
        ops = [(a, "*", d)]
        q = f"{name} has {d} bags of {a} {item}. How many {item} in all?"
    elif kind == "add_sub":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        c = rng.randint(10, a + b)
        ops = [(a, "+", b), (a + b, "-", c)]
        q = f"{name} has {a} {item}, {gain} {b} more, then {lose} {c}. How many {item} now?"
    else:  # mul_add
        a, d, b = rng.randint(10, 99), rng.randint(2, 9), rng.randint(10, 99)
        ops = [(a, "*", d), (a * d, "+", b)]
        q = f"{name} has {d} bags of {a} {item} and {b} more. How many {item} in all?"
    return kind, ops, q


def _record(index: int, kind: str, ops: list[tuple[int, str, int]], question: str) -> dict:
    """Build the problem record with its worked solution."""
    steps = " ".join(_STEPS[op](x, y) for x, op, y in ops)
    x, op, y = ops[-1]
    answer = str(_APPLY[op](x, y))
    return {"task_id": f"math/{index}", "question": question,
            "solution": f"{steps}\n#### {answer}", "answer": answer,
            "_kind": kind, "_ops": [[x, op, y] for x, op, y in ops]}


def make_problems(split: str, n: int, seed: int) -> list[dict]:
    """Return ``n`` distinct problems of ``split``, deterministic in ``seed``.

    A problem's split is a stable hash of its computation (``_ops``), so splits are disjoint for every
    seed. Raises ValueError for an unknown split, a bad ``n``, or when ``n`` unique problems cannot be drawn.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if n > MAX_PROBLEMS:
        raise ValueError(f"n={n} exceeds MAX_PROBLEMS={MAX_PROBLEMS} unique math problems per split")
    rng, seen, out = random.Random(seed), set(), []
    for _ in range(1000 + 200 * n):
        if len(out) == n:
            break
        kind, ops, question = _draw(rng)
        key = repr(ops)
        if key in seen or split_of(key) != split:
            continue
        seen.add(key)
        out.append(_record(len(out), kind, ops, question))
    if len(out) < n:
        raise ValueError(f"could only generate {len(out)} unique {split} math problems, asked for {n}")
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
