"""Intervals of the summary: per-problem verdicts and costs read from score files, paired with the NTP arm of the same
model, fine-tune seed, training budget and benchmark, and the statistics of :mod:`.stats` and :mod:`.verdicts` on
them (docs/statistics.md).

A score file's ``per_problem`` maps each problem id to its verdict (``correct`` for lm-eval tasks, ``passed`` or
``passed_plus`` for code benchmarks: :data:`VERDICT_KEYS`), from the decode stage its ``nfe``, and, for a task whose
problems come in families, its ``cluster``. A row and its NTP arm are paired by problem id; two files that do not hold
the same problems are an error naming both. (Wall-clock is not resampled over problems: its intervals are over the
speed stage's rounds, :mod:`.speed`.)

Several fine-tune seeds: every row is compared with the NTP arm of its own seed (the per-seed columns), and each run
over all its seeds with the NTP arm over the same seeds (``seeds_*``: the paired tables pooled, the design effect
two-level, seeds then problems: :func:`.stats.design_effect`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..settings import StatsSettings
from .stats import (bootstrap_sums, cluster_totals, design_effect, percentile_interval, problems_to_resolve,
                    ratio_samples, wilson_interval)
from .verdicts import PairedTable, holm, paired_comparison, verdict

#: Per-problem verdict keys, in the order they are looked for (the first one every problem has is the verdict).
VERDICT_KEYS = ("correct", "passed", "passed_plus")
#: A row is paired with the NTP arm that shares these.
PAIR_COLUMNS = ["model", "train_seed", "train_steps", "benchmark"]
#: A run over its seeds.
RUN_COLUMNS = ["model", "objective", "train_steps", "sampler", "benchmark"]
#: The verdict columns of one comparison: raw and Holm-adjusted p values, the words.
VERDICT_COLUMNS = ["diff_p", "equiv_p", "diff_p_holm", "equiv_p_holm", "accuracy_verdict"]
#: Columns added to the summary (fractions for accuracies, differences and the margin).
INTERVAL_COLUMNS = [
    "accuracy_lo", "accuracy_hi", "diff_vs_ntp", "diff_lo", "diff_hi", "n_better", "n_worse", "equiv_margin",
    *VERDICT_COLUMNS, "nfe_speedup_lo", "nfe_speedup_hi", "problems_needed",
    "n_seeds", "seeds_accuracy_lo", "seeds_accuracy_hi", "seeds_diff", "seeds_diff_lo", "seeds_diff_hi",
    *(f"seeds_{c}" for c in VERDICT_COLUMNS),
]
_TEXT_COLUMNS = {"accuracy_verdict", "seeds_accuracy_verdict"}


class PairingError(ValueError):
    """Two score files that must be compared problem by problem do not hold the same problems."""


@dataclass(frozen=True)
class Problems:
    """A score file's problems in id order: verdicts, (when the decode stage recorded them) NFE, and (for a task with
    families) each problem's family."""

    ids: tuple[str, ...]
    correct: np.ndarray
    nfe: np.ndarray | None
    clusters: tuple[str, ...] | None = None


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
    clusters = [r.get("cluster") for r in records]
    clusters = tuple(clusters) if all(isinstance(c, str) for c in clusters) else None
    return Problems(tuple(str(i) for i in ids), correct, _costs(records, "nfe"), clusters)


def _costs(records: list[dict], key: str) -> np.ndarray | None:
    values = [r.get(key) for r in records]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values):
        return None
    return np.array(values, dtype=np.float64)


# ----------------------------------------------------------------------------------------------------------------------
# Summary columns
# ----------------------------------------------------------------------------------------------------------------------


def add_intervals(summary: pd.DataFrame, settings: StatsSettings = StatsSettings()) -> pd.DataFrame:
    """``summary`` with :data:`INTERVAL_COLUMNS`, from its ``problems`` column (:class:`Problems` or None per row);
    NaN where a file has no per-problem data or its row has no NTP arm (the NTP arm itself has no difference)."""
    found: dict = {}  # row index -> {column: value}
    for i, probs in summary["problems"].items():
        if probs is not None:
            design = design_effect(probs.correct[None, :], probs.clusters)
            lo, hi = wilson_interval(probs.correct.sum(), len(probs.ids), settings.confidence, design)
            found[i] = {"accuracy_lo": lo, "accuracy_hi": hi}
    for _, group in summary.groupby(PAIR_COLUMNS, sort=False, dropna=False):
        base = _baseline(group)
        if base is not None and summary.at[base, "problems"] is not None:
            for i, values in _paired_group(group, base, settings).items():
                found.setdefault(i, {}).update(values)
    _adjust(found, summary.groupby(["train_seed", "train_steps"]).groups.values(), "", "diff_vs_ntp", settings)
    for i, values in _over_seeds(summary, settings).items():
        found.setdefault(i, {}).update(values)
    out = summary.copy()
    for col in INTERVAL_COLUMNS:
        default = "" if col in _TEXT_COLUMNS else math.nan
        out[col] = [found.get(i, {}).get(col, default) for i in out.index]
    return out


def _baseline(group: pd.DataFrame):
    """The index of the group's NTP arm (NTP objective, NTP decoding), or None."""
    base = group.index[(group["objective"] == "ntp") & (group["sampler"] == "ntp")]
    return base[0] if len(base) == 1 else None


def _paired_group(group: pd.DataFrame, base, settings: StatsSettings) -> dict:
    """Paired statistics of every row of one group against its NTP arm ``base`` (one bootstrap of the problems, or
    of their families, for the group): ``{row index: {column: value}}``."""
    ref = group.at[base, "problems"]
    members = {i: p for i, p in group["problems"].items() if p is not None}
    for i, p in members.items():
        if p.ids != ref.ids:
            raise PairingError(_mismatch(group.at[i, "path"], group.at[base, "path"], p.ids, ref.ids))
    columns, index = [], {}
    for i, p in members.items():
        if p.nfe is not None:
            index[i, "nfe"] = len(columns)
            columns.append(p.nfe)
    sums = (bootstrap_sums(cluster_totals(np.stack(columns, axis=1), ref.clusters), settings.n_boot, settings.seed)
            if columns else None)
    found = {}
    for i, p in members.items():
        values = found.setdefault(i, {})
        if (i, "nfe") in index and (base, "nfe") in index:
            ratio = ratio_samples(sums[:, index[base, "nfe"]], sums[:, index[i, "nfe"]])
            values["nfe_speedup_lo"], values["nfe_speedup_hi"] = percentile_interval(ratio, settings.confidence)
        if i != base:
            values.update(_difference(p.correct[None, :], ref.correct[None, :], ref.clusters,
                                      settings.margin(group.at[i, "benchmark"]), settings))
    return found


def _difference(row: np.ndarray, base: np.ndarray, clusters, margin: float, settings: StatsSettings) -> dict:
    """A run's paired difference to the NTP arm from verdicts [seeds, problems]: the point, its interval, the raw p
    values, the discordant counts and the problems a ``settings.resolve`` difference needs."""
    table = PairedTable.of(row.ravel(), base.ravel())
    result = paired_comparison(table, margin, settings.confidence, design_effect(row - base, clusters))
    rate = (table.row_only + table.base_only) / table.n
    needed = (problems_to_resolve(rate, settings.resolve, settings.confidence, settings.power)
              if rate >= settings.resolve else math.nan)
    return {"diff_vs_ntp": result.diff, "diff_lo": result.lo, "diff_hi": result.hi, "n_better": table.row_only,
            "n_worse": table.base_only, "diff_p": result.p_diff, "equiv_p": result.p_equiv, "equiv_margin": margin,
            "problems_needed": needed}


def _adjust(found: dict, families, prefix: str, diff: str, settings: StatsSettings) -> None:
    """Holm's correction within each family of row indices (one table's comparisons), separately for the tests of a
    difference and of equivalence (``<prefix>diff_p``, ``<prefix>equiv_p``), and the words from the adjusted p
    values and the difference ``diff``."""
    for family in families:
        rows = [i for i in family if f"{prefix}diff_p" in found.get(i, {})]
        for kind in ("diff_p", "equiv_p"):
            adjusted = holm([found[i][f"{prefix}{kind}"] for i in rows])
            for i, p in zip(rows, adjusted):
                found[i][f"{prefix}{kind}_holm"] = p
        for i in rows:
            values = found[i]
            values[f"{prefix}accuracy_verdict"] = verdict(values[diff], values[f"{prefix}diff_p_holm"],
                                                          values[f"{prefix}equiv_p_holm"], settings.alpha)


def _over_seeds(summary: pd.DataFrame, settings: StatsSettings) -> dict:
    """Each run with several seeds over all of them (``seeds_*`` columns on every seed's row): the accuracy's and
    the paired difference's intervals on the seeds' pooled problems, with the two-level design effect."""
    found: dict = {}
    runs = {}
    for key, grp in summary.groupby(RUN_COLUMNS, sort=False):
        found.update({i: {"n_seeds": grp["train_seed"].nunique()} for i in grp.index})
        members = grp[[p is not None for p in grp["problems"]]].sort_values("train_seed")
        if len(members) > 1:
            runs[key] = members
    bases = {key: grp for key, grp in runs.items() if key[1] == "ntp" and key[3] == "ntp"}
    family: dict = {}
    for (model, objective, steps, sampler, bench), members in runs.items():
        probs = list(members["problems"])
        _same_problems(members)
        correct = np.stack([p.correct for p in probs])
        lo, hi = wilson_interval(correct.sum(), correct.size, settings.confidence,
                                 design_effect(correct, probs[0].clusters))
        values = {"seeds_accuracy_lo": lo, "seeds_accuracy_hi": hi}
        base = bases.get((model, "ntp", steps, "ntp", bench))
        if base is not None and (objective, sampler) != ("ntp", "ntp") and list(base["train_seed"]) == list(
                members["train_seed"]):
            base_correct = np.stack([p.correct for p in base["problems"]])  # each seed paired already
            diff = _difference(correct, base_correct, probs[0].clusters, settings.margin(bench), settings)
            values.update({"seeds_diff": diff["diff_vs_ntp"], "seeds_diff_lo": diff["diff_lo"],
                           "seeds_diff_hi": diff["diff_hi"], "seeds_diff_p": diff["diff_p"],
                           "seeds_equiv_p": diff["equiv_p"]})
            family.setdefault(steps, []).append(members.index[0])
        for i in members.index:
            found[i].update(values)
    _adjust(found, family.values(), "seeds_", "seeds_diff", settings)
    for members in runs.values():  # the first seed's row carried the family's words: every seed's row shows them
        first = found[members.index[0]]
        for i in members.index[1:]:
            found[i].update({k: v for k, v in first.items() if k.startswith("seeds_")})
    return found


def _same_problems(members: pd.DataFrame) -> None:
    first = members["problems"].iloc[0]
    for path, p in zip(members["path"], members["problems"]):
        if p.ids != first.ids:
            raise PairingError(_mismatch(path, members["path"].iloc[0], p.ids, first.ids).replace(
                "(its NTP arm)", "(the same run, another seed)"))


def _mismatch(path: str, base_path: str, ids: tuple, base_ids: tuple) -> str:
    only_row, only_base = sorted(set(ids) - set(base_ids)), sorted(set(base_ids) - set(ids))
    return (f"score files {path} and {base_path} (its NTP arm) do not hold the same problems: {len(ids)} vs "
            f"{len(base_ids)} problems; only in the first: {only_row[:5]}{' ...' if len(only_row) > 5 else ''}; "
            f"only in the second: {only_base[:5]}{' ...' if len(only_base) > 5 else ''} (decode both on the same "
            "test file)")
