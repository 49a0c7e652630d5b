"""The report's arithmetic of uncertainty: Wilson intervals of single proportions, design effects of families and
seeds, the bootstrap of cost ratios and the problems a task needs; the verdicts on differences are :mod:`.verdicts`.
The method and its references: docs/statistics.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy.special import stdtr, stdtrit  # Student t CDF and its inverse (scipy.stats imports slowly)


@dataclass(frozen=True)
class Design:
    """How dependent the problems behind an estimate are: ``deff`` (>= 1, 1 for independent problems) and the degrees
    of freedom ``df`` of its variance (inf: a normal quantile)."""

    deff: float = 1.0
    df: float = math.inf

    def critical(self, confidence: float) -> float:
        """The two-sided quantile of ``confidence``: z, or Student t on ``df`` degrees of freedom."""
        return float(stdtrit(self.df, 0.5 + confidence / 2))

    def p_value(self, critical: float) -> float:
        """The two-sided tail probability beyond ``critical`` (the inverse of :meth:`critical`)."""
        return float(min(1.0, 2 * stdtr(self.df, -critical)))


INDEPENDENT = Design()


def z_value(confidence: float) -> float:
    """The standard normal quantile of a two-sided ``confidence`` (1.95996... for 0.95)."""
    return INDEPENDENT.critical(confidence)


def wilson_bounds(k: float, n: float, crit: float) -> tuple[float, float]:
    """Wilson's score interval of k / n with quantile ``crit`` (k and n may be effective, non-integer counts)."""
    p, c2 = k / n, crit * crit
    centre = (p + c2 / (2 * n)) / (1 + c2 / n)
    half = crit * math.sqrt(max(p * (1 - p), 0.0) / n + c2 / (4 * n * n)) / (1 + c2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def wilson_interval(k: float, n: float, confidence: float = 0.95,
                    design: Design = INDEPENDENT) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n, on ``n / deff`` effective problems (NaN, NaN when n == 0)."""
    if n <= 0:
        return math.nan, math.nan
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    return wilson_bounds(k / design.deff, n / design.deff, design.critical(confidence))


def _codes(clusters) -> np.ndarray | None:
    """Integer codes of the cluster labels; None without labels or with fewer than two clusters (nothing to pool)."""
    if clusters is None:
        return None
    codes = np.unique(np.asarray(clusters), return_inverse=True)[1].ravel()
    return codes if codes.max() >= 1 else None


def cluster_totals(columns: np.ndarray, clusters=None) -> np.ndarray:
    """The rows of ``columns`` [n, m] summed per cluster: [G, m] (unchanged without clusters)."""
    codes = _codes(clusters)
    if codes is None:
        return np.asarray(columns, dtype=np.float64)
    out = np.zeros((codes.max() + 1, columns.shape[1]))
    np.add.at(out, codes, columns)
    return out


def design_effect(values: np.ndarray, clusters=None) -> Design:
    """The design of the mean of ``values`` [seeds, problems] (one row per fine-tune seed, the same problems in each;
    a verdict per problem, or a paired difference in {-1, 0, 1}), its problems grouped by ``clusters`` (a label per
    problem; None: independent problems).

    Variance of the grand mean m: V = V_seeds + V_problems. V_seeds = s^2 / S, s^2 the sample variance of the S
    seeds' means (S - 1 degrees of freedom): the seeds' own spread plus each seed's noise over its problems.
    V_problems = max(0, C - s_int^2 / (S n)), where C is the cluster-robust variance over the problems of each
    problem's mean over seeds, G / (G - 1) sum_g (sum_{i in g} (m_i - m))^2 / n^2 (G - 1 degrees of freedom; every
    problem its own cluster without families), and s_int^2 the seed-by-problem residual variance (two-way residuals
    over (S - 1)(n - 1) degrees of freedom), which V_seeds holds already; one seed: V = C. deff = V / V_iid, V_iid the
    variance of the mean of S n independent values (sum (x - m)^2 / (N (N - 1))), at least 1. df: S - 1 with several
    seeds, else G - 1: the fewer of the two parts' (Satterthwaite's combination lies above it, and with three seeds
    whose differences lean apart it called a difference in 5.8% of simulated runs without one, S - 1 in 4.9%). One
    seed without clusters: independent problems (deff 1, z). Nothing varies anywhere: the seeds count as one (deff S:
    they share the problems)."""
    x = np.atleast_2d(np.asarray(values, dtype=np.float64))
    seeds, n = x.shape
    codes = _codes(clusters)
    if seeds == 1 and codes is None:
        return INDEPENDENT
    total_n, mean = x.size, float(x.mean())
    v_iid = float(((x - mean) ** 2).sum()) / (total_n * (total_n - 1)) if total_n > 1 else 0.0
    per_problem = x.mean(axis=0)
    groups = cluster_totals((per_problem - mean)[:, None], codes)[:, 0]
    g = len(groups)
    v_problems = g / (g - 1) * float((groups ** 2).sum()) / n ** 2 if g > 1 else 0.0
    v_seeds = 0.0
    if seeds > 1 and n > 1:
        seed_means = x.mean(axis=1)
        residual = x - seed_means[:, None] - per_problem[None, :] + mean
        interaction = float((residual ** 2).sum()) / ((seeds - 1) * (n - 1))
        v_seeds = float(seed_means.var(ddof=1)) / seeds
        v_problems = max(0.0, v_problems - interaction / (seeds * n))  # the seeds' part holds that noise already
    if v_iid <= 0.0:
        return Design(float(seeds), math.inf)
    df = seeds - 1 if seeds > 1 else max(g - 1, 1)  # the fewest degrees of freedom of the two parts
    return Design(max(1.0, (v_problems + v_seeds) / v_iid), float(df))


def bootstrap_sums(columns: np.ndarray, n_boot: int, seed: int, chunk: int = 1000) -> np.ndarray:
    """Column sums of ``n_boot`` resamples (with replacement) of the rows of ``columns`` [n, m]: [n_boot, m].

    All columns see the same resampled rows, so statistics of several columns are paired; rows are problems, or
    families of problems (:func:`cluster_totals`: the cluster bootstrap). The draws depend only on (n, n_boot, seed,
    chunk), never on the values."""
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


def problems_for_equivalence(discordance: float, margin: float, confidence: float = 0.95,
                             power: float = 0.8) -> int:
    """Problems a paired comparison needs to show equivalence within +-``margin`` (its ``confidence`` interval inside
    the margin) with ``power`` when the true difference is 0 and a fraction ``discordance`` of the problems are
    decided differently: n = (z_a + z_b)^2 pd / margin^2 with z_b the two-sided quantile of ``power`` (both one-sided
    tests must pass). At least what the score interval needs with no discordant problem at all (its half-width
    z^2 / (n + z^2) below the margin)."""
    if not 0.0 <= discordance <= 1.0 or not 0.0 < margin < 1.0:
        raise ValueError(f"need 0 <= discordance <= 1 and 0 < margin < 1, got {discordance}, {margin}")
    z_a, z_b = z_value(confidence), z_value(power)
    floor = math.floor(z_a * z_a * (1 - margin) / margin) + 1
    return max(floor, math.ceil((z_a + z_b) ** 2 * discordance / margin ** 2))
