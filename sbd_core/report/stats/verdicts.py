"""One verdict procedure for a run against the NTP arm on the same problems: Newcombe's paired score interval (method
10), its dual p values of a difference and of equivalence, Holm's correction and the words read from the p values, so
interval, p and words cannot disagree. The method and its references: docs/statistics.md (difference to the NTP
arm)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .estimates import INDEPENDENT, Design, wilson_bounds

EQUIVALENT, LOWER, HIGHER, INCONCLUSIVE = "equivalent", "lower", "higher", "inconclusive"
_MAX_CRITICAL = 40.0  # a claim that survives a 40-sigma interval has p < 1e-300


@dataclass(frozen=True)
class PairedTable:
    """A run against the NTP arm on the same problems (counts; non-integer after a design effect)."""

    both: float
    row_only: float
    base_only: float
    neither: float

    @classmethod
    def of(cls, row: np.ndarray, base: np.ndarray) -> PairedTable:
        """From 0/1 verdicts per problem (the same problems in the same order)."""
        row, base = np.asarray(row, dtype=bool), np.asarray(base, dtype=bool)
        return cls(float((row & base).sum()), float((row & ~base).sum()), float((~row & base).sum()),
                   float((~row & ~base).sum()))

    @property
    def n(self) -> float:
        return self.both + self.row_only + self.base_only + self.neither

    @property
    def diff(self) -> float:
        return (self.row_only - self.base_only) / self.n

    @property
    def discordance(self) -> float:
        """The share of problems the two decide differently."""
        return (self.row_only + self.base_only) / self.n

    def scaled(self, deff: float) -> PairedTable:
        return PairedTable(self.both / deff, self.row_only / deff, self.base_only / deff, self.neither / deff)


def newcombe_interval(table: PairedTable, crit: float) -> tuple[float, float]:
    """Newcombe's method 10 interval of ``table.diff`` with the two-sided quantile ``crit`` (module doc)."""
    a, b, c, d, n = table.both, table.row_only, table.base_only, table.neither, table.n
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_bounds(a + b, n, crit)
    l2, u2 = wilson_bounds(a + c, n, crit)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else min(cross, 0.0)
    phi = corrected / math.sqrt(margins) if margins > 0 else 0.0
    down = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    up = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    return max(-1.0, p1 - p2 - math.sqrt(max(down, 0.0))), min(1.0, p1 - p2 + math.sqrt(max(up, 0.0)))


@dataclass(frozen=True)
class Comparison:
    """One run against the NTP arm: the difference (a fraction), its interval and the two dual p values."""

    diff: float
    lo: float
    hi: float
    p_diff: float
    p_equiv: float


def paired_comparison(table: PairedTable, margin: float, confidence: float = 0.95,
            design: Design = INDEPENDENT) -> Comparison:
    """The interval at ``confidence`` and the p values of a difference and of equivalence within +-``margin``."""
    effective = table.scaled(design.deff)

    def excludes_zero(crit: float) -> bool:
        lo, hi = newcombe_interval(effective, crit)
        return lo > 0.0 or hi < 0.0

    def inside_margin(crit: float) -> bool:
        lo, hi = newcombe_interval(effective, crit)
        return -margin < lo and hi < margin

    lo, hi = newcombe_interval(effective, design.critical(confidence))
    return Comparison(table.diff, lo, hi, _dual_p(excludes_zero, design), _dual_p(inside_margin, design))


def _dual_p(claim: Callable[[float], bool], design: Design) -> float:
    """The least alpha whose (1 - alpha) interval makes ``claim`` (a function of the interval's quantile, true below
    some quantile c*): 1 when even the narrowest interval does not make it, else the tail beyond c* (bisection)."""
    if not claim(1e-9):
        return 1.0
    lo, hi = 1e-9, _MAX_CRITICAL
    if claim(hi):
        return design.p_value(hi)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if claim(mid) else (lo, mid)
    return design.p_value(lo)


def holm(p_values) -> list[float]:
    """Holm's step-down adjusted p values (NaN stays NaN and does not count): the i-th smallest of m becomes
    max over j <= i of min(1, (m - j + 1) p_(j))."""
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    m, running = len(order), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def verdict(diff: float, p_diff: float, p_equiv: float, alpha: float) -> str:
    """``equivalent``, ``lower``, ``higher``, ``equivalent, lower`` / ``equivalent, higher`` or ``inconclusive``
    (empty without a comparison), from the (adjusted) p values."""
    if any(map(math.isnan, (diff, p_diff, p_equiv))):
        return ""
    claims = [EQUIVALENT] if p_equiv < alpha else []
    if p_diff < alpha:
        claims.append(HIGHER if diff > 0 else LOWER)
    return ", ".join(claims) or INCONCLUSIVE


def p_text(p: float) -> str:
    return "p<0.001" if p < 0.001 else f"p={p:.2g}"


def verdict_cell(diff: float, lo: float, hi: float, p_diff: float, p_equiv: float, words: str) -> str:
    """``-0.4 [-1.3, +0.5] pt: equivalent (p=0.003)``, ``-5.0 [-6.6, -3.5] pt: lower by 5.0 pt (p<0.001)``,
    ``+0.2 [-0.9, +1.4] pt: inconclusive (difference p=0.7, equivalence p=0.08)``: each claim with its p."""
    parts = []
    for claim in words.split(", "):
        if claim == EQUIVALENT:
            parts.append(f"{EQUIVALENT} ({p_text(p_equiv)})")
        elif claim in (LOWER, HIGHER):
            parts.append(f"{claim} by {abs(100 * diff):.1f} pt ({p_text(p_diff)})")
        else:
            parts.append(f"{INCONCLUSIVE} (difference {p_text(p_diff)}, equivalence {p_text(p_equiv)})")
    return f"{100 * diff:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] pt: " + ", ".join(parts)
