"""Table 1: the Table-1 style view of a summary (each model's final budget), its cells, and the order of its rows and
columns (the registries' order of solver families and benchmarks)."""

from __future__ import annotations

import functools
import math

import pandas as pd

from ..benchmarks import BENCHMARKS
from ..samplers import describe_samplers, sampler_spec
from ..solver_rules import PROXIES
from .keys import NTP
from .render import DASH, number
from .seeds import SEED_MEAN, final_budget, seed_cell, seed_means


@functools.lru_cache(maxsize=1)
def family_order() -> tuple[str, ...]:
    """Solver families in the sampler registry's order (NTP first, EB by proxy, the peers last); tables and legends
    follow it."""
    specs = [sampler_spec(name, **({"proxy": proxy} if proxy else {}))
             for name in describe_samplers() for proxy in (PROXIES if name == "eb" else (None,))]
    return tuple(dict.fromkeys(spec["family"] for spec in specs))


def benchmark_order(names) -> list[str]:
    """Benchmarks in the registry's order (the paper's columns first); unknown names after, alphabetically."""
    known = [b for b in BENCHMARKS if b in set(names)]
    return known + sorted(set(names) - set(known))


# ----------------------------------------------------------------------------------------------------------------------
# Table 1
# ----------------------------------------------------------------------------------------------------------------------


def _speedup_text(value: float, ci: tuple[float, float] | None = None) -> str:
    return number(value, ".2f", suffix=f"x{_ci_text(ci, 1.0)}", missing="n/a")


def _ci_text(ci: tuple[float, float] | None, scale: float) -> str:
    """`` [lo, hi]`` (scaled, one or two decimals), or nothing when the interval is absent or NaN."""
    if ci is None or any(pd.isna(v) for v in ci):
        return ""
    digits = 1 if scale == 100.0 else 2
    return f" [{scale * ci[0]:.{digits}f}, {scale * ci[1]:.{digits}f}]"


def format_cell(accuracy: float, nfe_speedup: float, wall_speedup: float | None = None, *,
                accuracy_ci: tuple[float, float] | None = None, nfe_ci: tuple[float, float] | None = None,
                wall_ci: tuple[float, float] | None = None) -> str:
    """'accuracy % (NFE speedup x)', plus ', wall W x' when a wall-clock speedup is given; DASH without accuracy.
    Each ``*_ci`` (fractions / ratios) adds its 95% interval after the number: ``93.0 [89.3, 95.6] (4.62x [4.50,
    4.75], wall 1.15x [1.10, 1.20])``."""
    if pd.isna(accuracy):
        return DASH
    wall = "" if wall_speedup is None else f", wall {_speedup_text(wall_speedup, wall_ci)}"
    return f"{100 * accuracy:.1f}{_ci_text(accuracy_ci, 100.0)} ({_speedup_text(nfe_speedup, nfe_ci)}{wall})"


def interval_cell(rec) -> str:
    """A summary row's Table-1 cell with its intervals (see :func:`format_cell`)."""
    return format_cell(rec["accuracy"], rec["nfe_speedup"], rec["wall_speedup"],
                       accuracy_ci=(rec["accuracy_lo"], rec["accuracy_hi"]),
                       nfe_ci=(rec["nfe_speedup_lo"], rec["nfe_speedup_hi"]),
                       wall_ci=(rec["wall_speedup_lo"], rec["wall_speedup_hi"]))


def family_rank(family: str) -> tuple:
    """Sort key placing known families in registry order, unknown ones after, alphabetically."""
    order = family_order()
    return (order.index(family), "") if family in order else (len(order), family)


def arm_rank(objective: str, sampler: str) -> tuple:
    """NTP arm first (its peers follow by family), then each other arm's NTP decoding, then its block samplers (arms
    in their config order)."""
    return (0, "", 0) if objective == NTP else (1, objective, 0 if sampler == NTP else 1)


def _mean(values: pd.Series) -> float:
    values = values.dropna()
    return float(values.mean()) if len(values) else float("nan")


def table1(summary: pd.DataFrame) -> pd.DataFrame:
    """Table-1 style view of each model's final budget: rows (model, objective, sampler), one 'acc [95% interval] (NFE
    speedup [interval], wall speedup [interval])' column per benchmark, and the arithmetic mean of the row's
    per-benchmark NFE speedups (the paper's Speedup column; wall speedups are measured per benchmark, each with its
    interval over rounds, and have no mean).

    With several fine-tune seeds a ``seed`` column is added: one row per seed, then a ``mean ± sd`` row with the mean
    and the sample standard deviation over seeds. Rows: per model, the NTP arm first (NTP decoding, then the
    training-free peers), then each other arm decoded in NTP mode, then by solver family and speedup; ``label`` names
    each row in words (``NTP / HF generate``).
    """
    final = final_budget(summary)
    benchmarks = benchmark_order(final["benchmark"].unique())
    several = final["train_seed"].nunique() > 1
    rows = []
    for (model, objective, sampler), grp in final.groupby(["model", "objective", "sampler"], sort=False):
        base = {"model": model, "objective": objective, "sampler": sampler, "label": grp["label"].iloc[0],
                "family": grp["family"].iloc[0],
                "_sort_speedup": _mean(grp["nfe_speedup"])}  # the run's, so its seed rows stay together
        for seed, runs in grp.groupby("train_seed"):
            rows.append(_table1_row(base, seed, runs, benchmarks, interval_cell))
        if several:
            rows.append(_table1_row(base, SEED_MEAN, seed_means(grp), benchmarks, seed_cell))
    columns = (["model", "objective", "sampler", "label", "family"] + (["seed"] if several else [])
               + ["mean NFE speedup"] + benchmarks)
    table = pd.DataFrame(rows)
    order = sorted(range(len(table)), key=lambda i: (
        table.at[i, "model"], arm_rank(table.at[i, "objective"], table.at[i, "sampler"]),
        family_rank(table.at[i, "family"]), _nan_last(table.at[i, "_sort_speedup"]), table.at[i, "sampler"],
        _seed_rank(table.at[i, "seed"])))
    return table.iloc[order][columns].reset_index(drop=True)


def _table1_row(base: dict, seed, runs: pd.DataFrame, benchmarks: list[str], cell) -> dict:
    """One Table-1 row from the rows of one seed (or the seed means) of one (model, objective, sampler)."""
    by = runs.set_index("benchmark")
    row = {**base, "seed": seed, "mean NFE speedup": _mean(by["nfe_speedup"])}
    for bench in benchmarks:
        row[bench] = cell(by.loc[bench]) if bench in by.index else DASH
    return row


def _seed_rank(seed) -> tuple:
    """Seeds in order, the mean row last."""
    return (1, 0) if seed == SEED_MEAN else (0, seed)


def _nan_last(value: float) -> float:
    """Sort key mapping NaN to +inf."""
    return math.inf if value is None or math.isnan(value) else value


def table1_display(table: pd.DataFrame) -> pd.DataFrame:
    """Format the mean speedup column as text ('2.34x') for the md/tex renderings."""
    disp = table.copy()
    disp["mean NFE speedup"] = [number(v, ".2f", suffix="x", missing=DASH) for v in table["mean NFE speedup"]]
    return disp.astype(str)
