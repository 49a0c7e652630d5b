"""Wall-clock as a paired, repeated, interleaved experiment: the order of each round, and how sure a median over rounds
is (the speed stage, :mod:`sbd_core.pipeline.speed`, and time(k), :mod:`sbd_core.timing`, measure this way; the report
reads their files with the functions here).

* **Rounds.** Every unit (a decode row at one batch size, or one time(k) step) is timed once per round, in a fresh
  random order per round (seeded, and recorded), so a slow spell of the machine falls on different units in different
  rounds instead of always on the same one. A round's order is never the previous round's.
* **Paired ratio.** A speedup is the median over rounds of the per-round ratio ``reference time / row time``, both
  measured in the same round: the machine's state in that round cancels out of the ratio.
* **Interval.** The distribution-free confidence interval of a median from order statistics: with the n per-round
  values sorted, ``[x_(j), x_(n+1-j)]`` covers the true median with probability ``1 - 2 P(Bin(n, 1/2) <= j - 1)``
  whenever rounds are exchangeable (nothing else is assumed). ``j`` is the largest index whose coverage is at least the
  confidence asked; with fewer rounds than that needs (n <= 5 for 95%) it is ``[min, max]`` at its own, stated level
  (93.75% for 5 rounds; 6 to 8 rounds give ``[min, max]`` at 96.9-99.2%). Ratios and log ratios give the same interval
  (order statistics commute with ``log``). Not the percentile bootstrap of the log ratio: for a median over a handful
  of rounds its resamples take the observed values only, so it returns order statistics too, but at a level it does
  not know (over 7 rounds it returns ``[x_(2), x_(6)]`` labelled 95%, whose coverage is 87.5%); the interval never
  collapses to a point unless every round measured the very same ratio.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

#: The words for a ratio whose interval includes 1.
NO_DIFFERENCE = "no measurable difference"


def round_orders(units: list, rounds: int, seed: int) -> list[list]:
    """``rounds`` orders of ``units``, each a fresh shuffle (``random.Random(seed)``) that differs from the one before
    (when there are two units or more)."""
    rng, orders = random.Random(seed), []
    for _ in range(rounds):
        order = list(units)
        rng.shuffle(order)
        while len(units) > 1 and orders and order == orders[-1]:
            rng.shuffle(order)
        orders.append(order)
    return orders


@dataclass(frozen=True)
class RoundInterval:
    """The median over ``rounds`` values and its order-statistic interval ``[lo, hi]`` at coverage ``level``."""

    median: float
    lo: float
    hi: float
    level: float
    rounds: int

    def includes(self, value: float) -> bool:
        return self.lo <= value <= self.hi


NAN_INTERVAL = RoundInterval(math.nan, math.nan, math.nan, math.nan, 0)


def coverage(n: int, j: int) -> float:
    """The probability that ``[x_(j), x_(n+1-j)]`` of n exchangeable values covers their median."""
    return 1.0 - 2.0 * sum(math.comb(n, i) for i in range(j)) / 2 ** n


def median_interval(values, confidence: float = 0.95) -> RoundInterval:
    """The median of ``values`` (one per round) with its order-statistic interval (module docstring); NaN when empty
    or when a value is not finite."""
    values = sorted(float(v) for v in values)
    n = len(values)
    if n == 0 or not all(math.isfinite(v) for v in values):
        return NAN_INTERVAL
    j = 1
    while j + 1 <= (n + 1) // 2 and coverage(n, j + 1) >= confidence:
        j += 1
    return RoundInterval(statistics.median(values), values[j - 1], values[n - j], max(coverage(n, j), 0.0), n)


def paired_ratio(reference, row, confidence: float = 0.95) -> RoundInterval:
    """Per round ``reference / row`` (times of the same round, in round order), summarised by :func:`median_interval`;
    rounds missing on either side are left out."""
    ratios = [r / t for r, t in zip(reference, row) if r is not None and t is not None and t > 0]
    return median_interval(ratios, confidence)


def ratio_words(interval: RoundInterval, faster: str = "faster", slower: str = "slower") -> str:
    """``no measurable difference`` where the interval includes 1, else ``faster`` (above 1) or ``slower``; empty for
    a NaN interval."""
    if math.isnan(interval.lo):
        return ""
    if interval.includes(1.0):
        return NO_DIFFERENCE
    return faster if interval.lo > 1.0 else slower


def interval_text(interval: RoundInterval, unit: str = "x") -> str:
    """``1.23x [1.10, 1.31]`` (``-`` for NaN)."""
    if math.isnan(interval.median):
        return "-"
    if math.isnan(interval.lo):
        return f"{interval.median:.2f}{unit}"
    return f"{interval.median:.2f}{unit} [{interval.lo:.2f}, {interval.hi:.2f}]"
