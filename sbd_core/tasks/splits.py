"""The splits of the synthetic tasks: one stable hash rule for every task.

A problem's split is decided by its key alone (a math problem's computations, a code problem's family and constants),
so a problem never changes split between runs, seeds or processes, and no key can be in two splits:

* ``train`` (80% of the keys): the training problems (the data stage draws them; the base model is pretrained on them);
* ``dev`` (10%): the development split, on which the recipe is tuned (``benchmarks: {math: {split: dev}}``); nothing
  trains on it;
* ``test`` (10%): the held-out problems the tables report (the default ``split: test``).

The development split is the 10% bucket that was called ``valid`` before it had a use; its problems are the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

SPLITS = ("train", "dev", "test")
EVALUATION_SPLITS = ("dev", "test")  # the splits a benchmark may decode (never train)


_BY_BUCKET = ("train",) * 80 + ("dev",) * 10 + ("test",) * 10  # a hash bucket in [0, 100) -> its split


def split_of(salt: str, key: str) -> str:
    """The split of a problem ``key`` (train 80% / dev 10% / test 10%) by a stable hash salted per task: the first
    four bytes of sha256(salt + key), big-endian, modulo 100."""
    return splits_of(salt, (key,))[0]


def splits_of(salt: str, keys: Iterable[str]) -> list[str]:
    """:func:`split_of` of every key (a code task has a million): the salt is hashed once and the hash state copied
    per key."""
    salted, by_bucket = hashlib.sha256(salt.encode()), _BY_BUCKET
    splits = []
    for key in keys:
        state = salted.copy()
        state.update(key.encode())
        splits.append(by_bucket[int.from_bytes(state.digest()[:4], "big") % 100])
    return splits


def check_split(split: str) -> str:
    """``split`` itself when it is one of :data:`SPLITS`; ValueError naming the known splits otherwise."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    return split


def check_count(n) -> int:
    """``n`` itself when it is a non-negative int (not a bool); ValueError otherwise."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    return n
