"""Fine-tune seeds and training budgets in the report: the rows Table 1 shows (each model's final budget, its largest
``train_steps``; earlier checkpoints go to Figure 5), the mean and spread over seeds of each run, and how their cells
read (docs/statistics.md, several seeds).
"""

from __future__ import annotations

import math

import pandas as pd

from .keys import SEEDS_KEY
from .render import number
from .section import Context, derived

#: The columns averaged over seeds (the others are the run's identity or its settings).
AVERAGED = ["accuracy", "nfe_speedup", "wall_speedup", "mean_nfe", "tokens_per_forward", "diff_vs_ntp"]
#: One seed's intervals of AVERAGED columns: a row over several seeds has none (they bound one seed, not the mean;
#: its intervals over seeds are the ``seeds_*`` columns, its speedups' spread the ``*_sd`` ones).
SEED_INTERVALS = ["accuracy_lo", "accuracy_hi", "nfe_speedup_lo", "nfe_speedup_hi", "wall_speedup_lo",
                  "wall_speedup_hi", "diff_lo", "diff_hi"]
SEED_MEAN = "mean \u00b1 sd"  # the seed column of a table's row over seeds
ONE_SEED = "one fine-tune seed: seed variance not included"


def final_budget(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of each model's final budget (its largest ``train_steps``)."""
    last = summary.groupby("model")["train_steps"].transform("max")
    return summary[summary["train_steps"] == last]


def seed_means(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per run over its seeds: the mean of :data:`AVERAGED` (``<name>_sd``: sample standard deviation over
    seeds, NaN with one seed) and the run's other columns from its first seed (``seeds_*``: the same in every seed's
    row), but no :data:`SEED_INTERVALS` with several seeds."""
    rows = []
    for _, grp in summary.groupby(SEEDS_KEY, sort=False):
        row = grp.iloc[0].to_dict()
        for col in AVERAGED:
            values = grp[col].dropna() if col in grp else pd.Series(dtype=float)
            row[col] = float(values.mean()) if len(values) else math.nan
            row[f"{col}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        if len(grp) > 1:
            row.update({col: math.nan for col in SEED_INTERVALS if col in row})
        rows.append(row)
    return pd.DataFrame(rows)


@derived
def final_runs(ctx: Context) -> pd.DataFrame:
    """One row per run of the final budgets, over its seeds: the paper's view."""
    return seed_means(final_budget(ctx.summary))


def _spread(mean: float, sd: float, scale: float, fmt: str, unit: str = "") -> str:
    if pd.isna(mean):
        return "n/a"
    return number(mean, fmt, scale=scale, suffix=unit) + number(sd, fmt, scale=scale, prefix=" \u00b1 ", missing="")


def seed_cell(rec) -> str:
    """A run's cell over seeds: ``mean ± sd [interval over seeds and problems] (NFE speedup x ± sd, wall W x ±
    sd)``."""
    acc = _spread(rec["accuracy"], rec["accuracy_sd"], 100.0, ".1f")
    if not pd.isna(rec.get("seeds_accuracy_lo")):
        acc += f" [{100 * rec['seeds_accuracy_lo']:.1f}, {100 * rec['seeds_accuracy_hi']:.1f}]"
    nfe = _spread(rec["nfe_speedup"], rec["nfe_speedup_sd"], 1.0, ".2f", "x")
    wall = _spread(rec["wall_speedup"], rec["wall_speedup_sd"], 1.0, ".2f", "x")
    return f"{acc} ({nfe}, wall {wall})"


def seeds_note(summary: pd.DataFrame) -> str:
    """What Table 1's numbers cover: one fine-tune seed, or how the seeds are summed up."""
    seeds = final_budget(summary)["train_seed"].nunique()
    if seeds == 1:
        return ONE_SEED[0].upper() + ONE_SEED[1:] + "."
    return (f"{seeds} fine-tune seeds: a row per seed, then the mean \u00b1 sample sd over seeds with the accuracy's "
            "interval over seeds and problems.")
