"""The summary's interval columns: each score file's per-problem verdicts and costs, paired problem by problem with
the NTP arm of the same model, fine-tune seed, budget and benchmark (and, with several seeds, each run over its seeds),
through :mod:`.estimates` and :mod:`.verdicts`. What a ``per_problem`` record holds and how the columns are made:
docs/statistics.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...settings import StatsSettings
from ..keys import PAIR_KEY, SEEDS_KEY, baseline_of, is_baseline
from .estimates import (bootstrap_sums, cluster_totals, design_effect, percentile_interval, problems_to_resolve,
                        ratio_samples, wilson_interval)
from .verdicts import PairedTable, holm, paired_comparison, verdict

#: Per-problem verdict keys, in the order they are looked for (the first one every problem has is the verdict).
VERDICT_KEYS = ("correct", "passed", "passed_plus")
#: Columns added to the summary (fractions for accuracies, differences and the margin).
INTERVAL_COLUMNS = [
    "accuracy_lo", "accuracy_hi", "diff_vs_ntp", "diff_lo", "diff_hi", "n_better", "n_worse", "equiv_margin",
    "diff_p", "equiv_p", "diff_p_holm", "equiv_p_holm", "accuracy_verdict", "nfe_speedup_lo", "nfe_speedup_hi",
    "problems_needed", "n_seeds", "seeds_accuracy_lo", "seeds_accuracy_hi", "seeds_diff", "seeds_diff_lo",
    "seeds_diff_hi", "seeds_diff_p", "seeds_equiv_p", "seeds_diff_p_holm", "seeds_equiv_p_holm",
    "seeds_accuracy_verdict",
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


@dataclass
class Tested:
    """One comparison with the NTP arm: the difference (a fraction), its interval, the raw and the Holm-adjusted p
    values of a difference and of equivalence, and the words read from the adjusted ones."""

    diff: float
    lo: float
    hi: float
    p_diff: float
    p_equiv: float
    p_diff_holm: float = math.nan
    p_equiv_holm: float = math.nan
    words: str = ""

    def columns(self, names: tuple[str, ...]) -> dict:
        """The comparison under ``names`` (:data:`PER_SEED` or :data:`OVER_SEEDS`)."""
        return dict(zip(names, (self.diff, self.lo, self.hi, self.p_diff, self.p_equiv, self.p_diff_holm,
                                self.p_equiv_holm, self.words)))


#: The summary's names for a :class:`Tested`: a run against the NTP arm of its seed, and a run over its seeds.
PER_SEED = ("diff_vs_ntp", "diff_lo", "diff_hi", "diff_p", "equiv_p", "diff_p_holm", "equiv_p_holm",
            "accuracy_verdict")
OVER_SEEDS = ("seeds_diff", "seeds_diff_lo", "seeds_diff_hi", "seeds_diff_p", "seeds_equiv_p", "seeds_diff_p_holm",
              "seeds_equiv_p_holm", "seeds_accuracy_verdict")


@dataclass
class RowIntervals:
    """The interval columns of one summary row (NaN, or no comparison, where they cannot be computed)."""

    accuracy_lo: float = math.nan
    accuracy_hi: float = math.nan
    n_better: float = math.nan
    n_worse: float = math.nan
    equiv_margin: float = math.nan
    nfe_speedup_lo: float = math.nan
    nfe_speedup_hi: float = math.nan
    problems_needed: float = math.nan
    n_seeds: float = math.nan
    seeds_accuracy_lo: float = math.nan
    seeds_accuracy_hi: float = math.nan
    per_seed: Tested | None = None
    over_seeds: Tested | None = None

    def columns(self) -> dict:
        """``{column: value}`` for :data:`INTERVAL_COLUMNS`."""
        out = {name: getattr(self, name) for name in INTERVAL_COLUMNS if hasattr(self, name)}
        for tested, names in ((self.per_seed, PER_SEED), (self.over_seeds, OVER_SEEDS)):
            out.update(tested.columns(names) if tested is not None else
                       {name: "" if name in _TEXT_COLUMNS else math.nan for name in names})
        return out


def add_intervals(summary: pd.DataFrame, settings: StatsSettings = StatsSettings()) -> pd.DataFrame:
    """``summary`` with :data:`INTERVAL_COLUMNS`, from its ``problems`` column (:class:`Problems` or None per row);
    NaN where a file has no per-problem data or its row has no NTP arm (the NTP arm itself has no difference)."""
    found = {i: RowIntervals() for i in summary.index}
    for i, probs in summary["problems"].items():
        if probs is not None:
            design = design_effect(probs.correct[None, :], probs.clusters)
            found[i].accuracy_lo, found[i].accuracy_hi = wilson_interval(probs.correct.sum(), len(probs.ids),
                                                                         settings.confidence, design)
    for _, group in summary.groupby(PAIR_KEY, sort=False, dropna=False):
        base = _baseline(group)
        if base is not None and summary.at[base, "problems"] is not None:
            _paired_group(group, base, settings, found)
    families = summary.groupby(["train_seed", "train_steps"]).groups.values()
    _adjust([[found[i].per_seed for i in family if found[i].per_seed is not None] for family in families], settings)
    _over_seeds(summary, settings, found)
    out = summary.copy()
    columns = [found[i].columns() for i in out.index]
    for col in INTERVAL_COLUMNS:
        out[col] = [row[col] for row in columns]
    return out


def _baseline(group: pd.DataFrame):
    """The index of the group's NTP arm (NTP objective, NTP decoding), or None."""
    base = group.index[is_baseline(group)]
    return base[0] if len(base) == 1 else None


def _paired_group(group: pd.DataFrame, base, settings: StatsSettings, found: dict) -> None:
    """Paired statistics of every row of one group against its NTP arm ``base`` (one bootstrap of the problems, or
    of their families, for the group), into ``found`` (``{row index: RowIntervals}``)."""
    ref = group.at[base, "problems"]
    members = {i: p for i, p in group["problems"].items() if p is not None}
    for i, p in members.items():
        if p.ids != ref.ids:
            raise PairingError(_mismatch(group.at[i, "path"], group.at[base, "path"], p.ids, ref.ids))
    columns, index = [], {}
    for i, p in members.items():
        if p.nfe is not None:
            index[i] = len(columns)
            columns.append(p.nfe)
    sums = (bootstrap_sums(cluster_totals(np.stack(columns, axis=1), ref.clusters), settings.n_boot, settings.seed)
            if columns else None)
    for i, p in members.items():
        row = found[i]
        if i in index and base in index:
            ratio = ratio_samples(sums[:, index[base]], sums[:, index[i]])
            row.nfe_speedup_lo, row.nfe_speedup_hi = percentile_interval(ratio, settings.confidence)
        if i != base:
            margin = settings.margin(group.at[i, "benchmark"])
            row.per_seed, table = paired_difference(p.correct[None, :], ref.correct[None, :], ref.clusters, margin,
                                                    settings)
            rate = table.discordance
            row.n_better, row.n_worse, row.equiv_margin = table.row_only, table.base_only, margin
            row.problems_needed = (problems_to_resolve(rate, settings.resolve, settings.confidence, settings.power)
                                   if rate >= settings.resolve else math.nan)


def paired_difference(row: np.ndarray, base: np.ndarray, clusters, margin: float,
                      settings: StatsSettings) -> tuple[Tested, PairedTable]:
    """A run's paired difference to the NTP arm (or to any run of the same problems) from verdicts [seeds, problems]
    (the point, its interval, the raw p values) and its paired table."""
    table = PairedTable.of(row.ravel(), base.ravel())
    result = paired_comparison(table, margin, settings.confidence, design_effect(row - base, clusters))
    return Tested(result.diff, result.lo, result.hi, result.p_diff, result.p_equiv), table


def _adjust(families: list[list[Tested]], settings: StatsSettings) -> None:
    """Holm's correction within each family (one table's comparisons), separately for the tests of a difference and
    of equivalence, and the words from the adjusted p values."""
    for family in families:
        for tested, p in zip(family, holm([t.p_diff for t in family])):
            tested.p_diff_holm = p
        for tested, p in zip(family, holm([t.p_equiv for t in family])):
            tested.p_equiv_holm = p
        for tested in family:
            tested.words = verdict(tested.diff, tested.p_diff_holm, tested.p_equiv_holm, settings.alpha)


def _over_seeds(summary: pd.DataFrame, settings: StatsSettings, found: dict) -> None:
    """Each run with several seeds over all of them (the ``seeds_*`` columns, the same on every seed's row): the
    accuracy's and the paired difference's intervals on the seeds' pooled problems, with the two-level design
    effect."""
    runs = {}
    for key, grp in summary.groupby(SEEDS_KEY, sort=False):
        for i in grp.index:
            found[i].n_seeds = grp["train_seed"].nunique()
        members = grp[[p is not None for p in grp["problems"]]].sort_values("train_seed")
        if len(members) > 1:
            runs[key] = members
    bases = {key: grp for key, grp in runs.items() if is_baseline(dict(zip(SEEDS_KEY, key)))}
    family: dict = {}
    for key, members in runs.items():
        run = dict(zip(SEEDS_KEY, key))
        probs = list(members["problems"])
        _same_problems(members)
        correct = np.stack([p.correct for p in probs])
        lo, hi = wilson_interval(correct.sum(), correct.size, settings.confidence,
                                 design_effect(correct, probs[0].clusters))
        base = bases.get(tuple(baseline_of(run)[c] for c in SEEDS_KEY))
        tested = None
        if base is not None and not is_baseline(run) and list(base["train_seed"]) == list(members["train_seed"]):
            base_correct = np.stack([p.correct for p in base["problems"]])  # each seed paired already
            tested, _ = paired_difference(correct, base_correct, probs[0].clusters,
                                          settings.margin(run["benchmark"]), settings)
            family.setdefault(run["train_steps"], []).append(tested)
        for i in members.index:  # one comparison for the run: every seed's row shows it
            found[i].seeds_accuracy_lo, found[i].seeds_accuracy_hi, found[i].over_seeds = lo, hi, tested
    _adjust(list(family.values()), settings)


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
