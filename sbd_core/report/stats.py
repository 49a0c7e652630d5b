"""Statistics of the report: how sure each number is, with the problems of the test set as the unit of resampling.

* **Accuracy**: the Wilson score interval of k correct out of n problems. Chosen over a bootstrap percentile interval
  because accuracies here sit near 0% and 100%, where a percentile interval collapses to a point (200/200 correct
  resamples to 100% every time) while Wilson's still says how far below 100% the true rate may be; it is exact to
  compute, so it needs no seed.
* **Difference to the NTP arm** (same problems, same fine-tune seed and budget): a paired bootstrap percentile interval
  of the difference in accuracy (problems resampled with replacement, the two verdicts of a problem kept together), and
  an exact McNemar test on the discordant problems (b: the row right where the NTP arm is wrong, c: the reverse;
  two-sided p = P(min(b, c) or fewer of b + c fair coin flips), doubled, at most 1).
* **Speedups**: the same paired resamples; the ratio of the NTP arm's total NFE (or wall time) to the row's is
  recomputed on each resample and its percentiles give the interval.
* **Problems needed** to resolve a difference of ``delta`` (a fraction): McNemar's sample size (Connor 1987) at the
  observed discordance rate, two-sided ``confidence``, ``power``.

Everything is numpy with a fixed seed: one report's intervals are the same on every rerun. (scipy.stats has a
bootstrap and a binomial test, but scipy is not a dependency of the package; the McNemar tail is a sum of binomial
coefficients in exact integers, and tests check it against scipy where scipy is installed.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

import numpy as np


@dataclass(frozen=True)
class StatsSettings:
    """How the report's intervals are computed (one home for these defaults)."""

    confidence: float = 0.95  # two-sided level of every interval
    n_boot: int = 10_000  # bootstrap resamples of the problems
    seed: int = 0  # the resamples' seed (numpy's PCG64): the same intervals on every rerun
    power: float = 0.8  # for the number of problems that resolves a difference
    resolve: float = 0.01  # that difference, as a fraction (1 point)

    def __post_init__(self):
        if not 0.0 < self.confidence < 1.0 or not 0.0 < self.power < 1.0:
            raise ValueError(f"confidence and power must lie in (0, 1), got {self.confidence}, {self.power}")
        if self.n_boot < 100:
            raise ValueError(f"n_boot must be >= 100, got {self.n_boot}")
        if not 0.0 < self.resolve < 1.0:
            raise ValueError(f"resolve must lie in (0, 1), got {self.resolve}")


def z_value(confidence: float) -> float:
    """The standard normal quantile of a two-sided ``confidence`` (1.95996... for 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n (NaN, NaN when n == 0)."""
    if n <= 0:
        return math.nan, math.nan
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    z = z_value(confidence)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of ``b`` and ``c`` discordant pairs (1.0 when there are none)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n, low = b + c, min(b, c)
    if n == 0:
        return 1.0
    tail = Fraction(sum(math.comb(n, i) for i in range(low + 1)), 2 ** n)  # exact: no underflow at large n
    return float(min(Fraction(1), 2 * tail))


def bootstrap_sums(columns: np.ndarray, n_boot: int, seed: int, chunk: int = 1000) -> np.ndarray:
    """Column sums of ``n_boot`` resamples (with replacement) of the rows of ``columns`` [n, m]: [n_boot, m].

    All columns see the same resampled rows, so statistics of several columns are paired. The draws depend only on
    (n, n_boot, seed, chunk), never on the values."""
    columns = np.asarray(columns, dtype=np.float64)
    if columns.ndim != 2 or columns.shape[0] == 0:
        raise ValueError(f"need a non-empty [problems, columns] array, got shape {columns.shape}")
    n = columns.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, columns.shape[1]))
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        draws = rng.integers(0, n, size=(size, n))
        counts = np.bincount((draws + n * np.arange(size)[:, None]).ravel(), minlength=size * n).reshape(size, n)
        out[start:start + size] = counts @ columns
    return out


def percentile_interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` percentile interval of bootstrap ``samples`` (NaN where a sample is NaN)."""
    samples = np.asarray(samples, dtype=np.float64)
    if np.isnan(samples).any():
        return math.nan, math.nan
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(samples, [alpha, 1 - alpha])
    return float(lo), float(hi)


def ratio_samples(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den per resample; inf where den is 0 (a resample without cost in the denominator)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)


def problems_to_resolve(discordance: float, delta: float = 0.01, confidence: float = 0.95,
                        power: float = 0.8) -> int:
    """Problems a paired (McNemar) comparison needs to detect a true difference ``delta`` with ``power`` at two-sided
    ``confidence``, when a fraction ``discordance`` of the problems get different verdicts from the two arms (Connor
    1987: n = (z_a sqrt(pd) + z_b sqrt(pd - delta^2))^2 / delta^2). A difference of ``delta`` needs at least that
    fraction of discordant problems, so ``discordance`` must be >= ``delta`` (``delta`` itself gives the smallest n of
    any rate)."""
    if not 0.0 < delta <= discordance <= 1.0:
        raise ValueError(f"need 0 < delta <= discordance <= 1, got delta={delta}, discordance={discordance}")
    z_a, z_b = z_value(confidence), NormalDist().inv_cdf(power)
    return math.ceil((z_a * math.sqrt(discordance) + z_b * math.sqrt(discordance - delta * delta)) ** 2 / delta ** 2)
