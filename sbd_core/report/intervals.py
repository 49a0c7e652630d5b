"""Intervals of the summary: per-problem verdicts and costs read from score files, paired with the NTP arm of the same
model, fine-tune seed, training budget and benchmark, and the statistics of :mod:`.stats` on them.

A score file's ``per_problem`` maps each problem id to its verdict (``correct`` for lm-eval tasks, ``passed`` or
``passed_plus`` for code benchmarks: :data:`VERDICT_KEYS`) and, from the decode stage, its ``nfe``. A row and its NTP
arm are paired by problem id; two files that do not hold the same problems are an error naming both. (Wall-clock is
not resampled over problems: its intervals are over the speed stage's rounds, :mod:`.speed`.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .stats import (StatsSettings, bootstrap_sums, mcnemar_exact, percentile_interval, problems_to_resolve,
                    ratio_samples, wilson_interval)

#: Per-problem verdict keys, in the order they are looked for (the first one every problem has is the verdict).
VERDICT_KEYS = ("correct", "passed", "passed_plus")
#: A row is paired with the NTP arm that shares these.
PAIR_COLUMNS = ["model", "train_seed", "train_steps", "benchmark"]
#: Columns added to the summary (fractions for accuracies and differences).
INTERVAL_COLUMNS = [
    "accuracy_lo", "accuracy_hi", "diff_vs_ntp", "diff_lo", "diff_hi", "n_better", "n_worse", "mcnemar_p",
    "accuracy_verdict", "nfe_speedup_lo", "nfe_speedup_hi", "problems_needed",
]
SAME = "same accuracy"


class PairingError(ValueError):
    """Two score files that must be compared problem by problem do not hold the same problems."""


@dataclass(frozen=True)
class Problems:
    """A score file's problems in id order: verdicts and (when the decode stage recorded them) NFE."""

    ids: tuple[str, ...]
    correct: np.ndarray
    nfe: np.ndarray | None


def problems_of(path: Path, data: dict) -> Problems | None:
    """The per-problem verdicts and costs of one score file (None without ``per_problem``); ValueError naming the
    file when a verdict is missing or the verdicts do not give the file's accuracy."""
    per_problem = data.get("per_problem")
    if not per_problem:
        return None
    if not isinstance(per_problem, dict):
        raise ValueError(f"score file {path}: 'per_problem' must map problem ids to records")
    ids = tuple(sorted(per_problem, key=str))
    records = [per_problem[i] for i in ids]
    key = next((k for k in VERDICT_KEYS if all(isinstance(r, dict) and isinstance(r.get(k), bool) for r in records)),
               None)
    if key is None:
        raise ValueError(f"score file {path}: not every per_problem record has a boolean verdict (one of "
                         f"{list(VERDICT_KEYS)})")
    correct = np.array([r[key] for r in records], dtype=np.float64)
    if abs(correct.mean() - float(data["accuracy"])) > 1e-9:
        raise ValueError(f"score file {path}: per_problem verdicts ({key!r}) give accuracy {correct.mean():.6f}, "
                         f"the file says {data['accuracy']}")
    return Problems(tuple(str(i) for i in ids), correct, _costs(records, "nfe"))


def _costs(records: list[dict], key: str) -> np.ndarray | None:
    values = [r.get(key) for r in records]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values):
        return None
    return np.array(values, dtype=np.float64)


def verdict(diff: float, lo: float, hi: float) -> str:
    """The words for a paired difference: ``same accuracy`` only when its interval includes 0."""
    if any(map(math.isnan, (diff, lo, hi))):
        return ""
    if lo <= 0.0 <= hi:
        return SAME
    return "higher" if lo > 0 else "lower"


# ----------------------------------------------------------------------------------------------------------------------
# Summary columns
# ----------------------------------------------------------------------------------------------------------------------


def add_intervals(summary: pd.DataFrame, settings: StatsSettings = StatsSettings()) -> pd.DataFrame:
    """``summary`` with :data:`INTERVAL_COLUMNS`, from its ``problems`` column (:class:`Problems` or None per row);
    NaN where a file has no per-problem data or its row has no NTP arm (the NTP arm itself has no difference)."""
    found: dict = {}  # row index -> {column: value}
    for i, probs in summary["problems"].items():
        if probs is not None:
            lo, hi = wilson_interval(int(probs.correct.sum()), len(probs.ids), settings.confidence)
            found[i] = {"accuracy_lo": lo, "accuracy_hi": hi}
    baseline = (summary["objective"] == "ntp") & (summary["sampler"] == "ntp")
    for _, group in summary.groupby(PAIR_COLUMNS, sort=False, dropna=False):
        base = [i for i in group.index if baseline[i]]
        if len(base) == 1 and summary.at[base[0], "problems"] is not None:
            for i, values in _paired_group(group, base[0], settings).items():
                found.setdefault(i, {}).update(values)
    out = summary.copy()
    for col in INTERVAL_COLUMNS:
        default = "" if col == "accuracy_verdict" else math.nan
        out[col] = [found.get(i, {}).get(col, default) for i in out.index]
    return out


def _paired_group(group: pd.DataFrame, base, settings: StatsSettings) -> dict:
    """Paired statistics of every row of one group against its NTP arm ``base`` (one bootstrap for the group):
    ``{row index: {column: value}}``."""
    ref = group.at[base, "problems"]
    members = {i: p for i, p in group["problems"].items() if p is not None}
    for i, p in members.items():
        if p.ids != ref.ids:
            raise PairingError(_mismatch(group.at[i, "path"], group.at[base, "path"], p.ids, ref.ids))
    columns, index = [], {}
    for i, p in members.items():
        for name, values in (("correct", p.correct), ("nfe", p.nfe)):
            if values is not None:
                index[i, name] = len(columns)
                columns.append(values)
    sums = bootstrap_sums(np.stack(columns, axis=1), settings.n_boot, settings.seed)
    n, found = len(ref.ids), {}
    for i, p in members.items():
        values = found.setdefault(i, {})
        if (i, "nfe") in index and (base, "nfe") in index:
            ratio = ratio_samples(sums[:, index[base, "nfe"]], sums[:, index[i, "nfe"]])
            values["nfe_speedup_lo"], values["nfe_speedup_hi"] = percentile_interval(ratio, settings.confidence)
        if i != base:
            values.update(_difference(p, ref, sums[:, index[i, "correct"]] - sums[:, index[base, "correct"]], n,
                                      settings))
    return found


def _difference(row: Problems, ref: Problems, resampled: np.ndarray, n: int, settings: StatsSettings) -> dict:
    """A row's paired difference to the NTP arm: point, bootstrap interval, McNemar, verdict, problems needed."""
    better = int(((row.correct == 1) & (ref.correct == 0)).sum())
    worse = int(((row.correct == 0) & (ref.correct == 1)).sum())
    diff = (better - worse) / n
    lo, hi = percentile_interval(resampled / n, settings.confidence)
    rate = (better + worse) / n
    needed = (problems_to_resolve(rate, settings.resolve, settings.confidence, settings.power)
              if rate >= settings.resolve else math.nan)
    return {"diff_vs_ntp": diff, "diff_lo": lo, "diff_hi": hi, "n_better": better, "n_worse": worse,
            "mcnemar_p": mcnemar_exact(better, worse), "accuracy_verdict": verdict(diff, lo, hi),
            "problems_needed": needed}


def _mismatch(path: str, base_path: str, ids: tuple, base_ids: tuple) -> str:
    only_row, only_base = sorted(set(ids) - set(base_ids)), sorted(set(base_ids) - set(ids))
    return (f"score files {path} and {base_path} (its NTP arm) do not hold the same problems: {len(ids)} vs "
            f"{len(base_ids)} problems; only in the first: {only_row[:5]}{' ...' if len(only_row) > 5 else ''}; "
            f"only in the second: {only_base[:5]}{' ...' if len(only_base) > 5 else ''} (decode both on the same "
            "test file)")
