"""The report's words on accuracy: each run against the NTP arm on the same problems (paired interval, McNemar p,
"same accuracy" only where the interval includes 0), and per task how many problems would resolve a 1-point
difference."""

from __future__ import annotations

import pandas as pd

from .intervals import SAME
from .seeds import SEED_MEAN, final_budget, seed_means
from .stats import StatsSettings, problems_to_resolve
from .tables import DASH, _arm_rank, _family_rank, benchmark_order, to_markdown


def difference_cell(rec) -> str:
    """``-0.5 [-2.0, +1.0] pt, p=0.73: same accuracy`` (points); DASH without a paired comparison."""
    if pd.isna(rec["diff_vs_ntp"]):
        return DASH
    words = rec["accuracy_verdict"]
    if words != SAME:
        words = f"{words} by {abs(100 * rec['diff_vs_ntp']):.1f} pt"
    return (f"{100 * rec['diff_vs_ntp']:+.1f} [{100 * rec['diff_lo']:+.1f}, {100 * rec['diff_hi']:+.1f}] pt, "
            f"p={rec['mcnemar_p']:.2g}: {words}")


def _seed_difference_cell(rec) -> str:
    """Over seeds: ``mean ± sd pt; same accuracy in 2 of 2 seeds``."""
    if pd.isna(rec["diff_vs_ntp"]):
        return DASH
    sd = "" if pd.isna(rec["diff_vs_ntp_sd"]) else f" \u00b1 {100 * rec['diff_vs_ntp_sd']:.1f}"
    return f"{100 * rec['diff_vs_ntp']:+.1f}{sd} pt; {rec['verdicts']}"


def differences(summary: pd.DataFrame) -> pd.DataFrame:
    """Each non-NTP-arm run of the final budget against the NTP arm of its seed: one row per (model, objective,
    sampler[, seed]), one cell per benchmark (see :func:`difference_cell`); a ``mean ± sd`` row over seeds."""
    final = final_budget(summary)
    final = final[~((final["objective"] == "ntp") & (final["sampler"] == "ntp"))]
    benchmarks = benchmark_order(final["benchmark"].unique())
    several = final["train_seed"].nunique() > 1
    rows = []
    for (model, objective, sampler), grp in final.groupby(["model", "objective", "sampler"], sort=False):
        base = {"model": model, "objective": objective, "sampler": sampler, "family": grp["family"].iloc[0]}
        parts = [(seed, runs, difference_cell) for seed, runs in grp.groupby("train_seed")]
        if several:
            parts.append((SEED_MEAN, seed_means(grp), _seed_difference_cell))
        for seed, runs, cell in parts:
            by = runs.set_index("benchmark")
            rows.append({**base, "seed": seed, **{b: cell(by.loc[b]) if b in by.index else DASH for b in benchmarks}})
    columns = ["model", "objective", "sampler"] + (["seed"] if several else []) + benchmarks
    if not rows:
        return pd.DataFrame(columns=columns)
    table = pd.DataFrame(rows)
    order = sorted(range(len(table)), key=lambda i: (
        table.at[i, "model"], _arm_rank(table.at[i, "objective"], table.at[i, "sampler"]),
        _family_rank(table.at[i, "family"]), table.at[i, "sampler"], table.at[i, "seed"] == SEED_MEAN))
    return table.iloc[order][columns].reset_index(drop=True).astype(str)


def resolution_lines(summary: pd.DataFrame, settings: StatsSettings = StatsSettings()) -> list[str]:
    """Per benchmark: its problems, the widest paired interval, and the problems a 1-point difference needs at the
    largest discordance rate of any comparison (or at the least rate that admits one, when every rate is lower)."""
    final = final_budget(summary)
    paired = final[final["diff_vs_ntp"].notna()]
    lines = []
    points = f"{100 * settings.resolve:g}-point"
    for bench in benchmark_order(paired["benchmark"].unique()):
        rows = paired[paired["benchmark"] == bench]
        n = int(rows["n_problems"].max())
        rate = float(((rows["n_better"] + rows["n_worse"]) / rows["n_problems"]).max())
        width = float((rows["diff_hi"] - rows["diff_lo"]).max()) / 2
        needed = problems_to_resolve(max(rate, settings.resolve), settings.resolve, settings.confidence,
                                     settings.power)
        basis = (f"at the largest discordance rate observed here ({100 * rate:.1f}% of problems decided differently "
                 "from the NTP arm)" if rate >= settings.resolve else
                 f"at a discordance rate of {100 * settings.resolve:g}%, the least that admits such a difference "
                 f"(observed at most {100 * rate:.1f}%: a lower bound)")
        lines.append(f"- **{bench}**: {n:,} problems; paired intervals up to \u00b1{100 * width:.1f} pt wide. A "
                     f"{points} difference would be resolved (McNemar, {100 * settings.confidence:g}% two-sided, "
                     f"{100 * settings.power:g}% power) by about **{needed:,} problems** {basis}.")
    return lines


def statistics_md(summary: pd.DataFrame, settings: StatsSettings = StatsSettings()) -> str:
    """The report's statistics section: the methods, the differences table and the resolution per task."""
    table = differences(summary)
    parts = [
        "## Differences to the NTP arm\n",
        f"Accuracy intervals are {100 * settings.confidence:g}% Wilson score intervals over the problems; "
        "differences are to the NTP arm (NTP objective, NTP decoding) of the same model, fine-tune seed and budget "
        f"on the same problems: a paired bootstrap percentile interval ({settings.n_boot:,} resamples of the "
        f"problems, seed {settings.seed}) and an exact McNemar test on the problems the two decide differently. "
        "NFE speedup intervals resample the problems the same way (the ratio of totals on each resample; wall "
        "speedups have intervals over the speed stage's rounds instead, see Wall-clock). A cell says "
        "**same accuracy** only where the paired interval includes 0, which is not a proof of equality: the "
        "interval is how large a difference the problems can hide.\n",
    ]
    if len(table):
        parts.append(to_markdown(table))
    lines = resolution_lines(summary, settings)
    if lines:
        parts += [f"### Problems needed to resolve a {100 * settings.resolve:g}-point difference\n",
                  "\n".join(lines) + "\n"]
    return "\n".join(parts)
