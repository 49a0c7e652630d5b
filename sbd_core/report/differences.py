"""The report's words on accuracy: the summary's interval columns (:mod:`.stats.intervals`), each run against the NTP
arm on the same problems (the one verdict procedure of :mod:`.stats.verdicts`), and per task how many problems would
show equivalence or resolve a 1-point difference: the Differences section."""

from __future__ import annotations

import pandas as pd

from ..settings import StatsSettings
from .keys import is_baseline
from .render import DASH, to_markdown
from .section import Context, Section
from .seeds import ONE_SEED, final_budget
from .stats.estimates import problems_for_equivalence, problems_to_resolve
from .stats.intervals import INTERVAL_COLUMNS, add_intervals, paired_difference
from .stats.verdicts import verdict_cell
from .tables import arm_rank, benchmark_order, family_rank

#: The seed column of the differences table's row over seeds.
ALL_SEEDS = "all seeds"


def difference_cell(rec) -> str:
    """A run against the NTP arm of its seed (:func:`.verdicts.verdict_cell`, Holm-adjusted p values); DASH without
    a paired comparison."""
    if pd.isna(rec["diff_vs_ntp"]):
        return DASH
    return verdict_cell(rec["diff_vs_ntp"], rec["diff_lo"], rec["diff_hi"], rec["diff_p_holm"], rec["equiv_p_holm"],
                        rec["accuracy_verdict"])


def _seeds_cell(runs: pd.DataFrame) -> str:
    """A run over its seeds and problems (its seeds' rows), then each seed's difference: ``... pt: equivalent
    (p=0.01); seeds -0.4, +0.1, -1.2``."""
    rec = runs.iloc[0]
    if pd.isna(rec["seeds_diff_lo"]):
        return DASH
    cell = verdict_cell(rec["seeds_diff"], rec["seeds_diff_lo"], rec["seeds_diff_hi"], rec["seeds_diff_p_holm"],
                        rec["seeds_equiv_p_holm"], rec["seeds_accuracy_verdict"])
    return f"{cell}; seeds {', '.join(f'{100 * d:+.1f}' for d in runs.sort_values('train_seed')['diff_vs_ntp'])}"


def differences(summary: pd.DataFrame) -> pd.DataFrame:
    """Each non-NTP-arm run of the final budget against the NTP arm of its seed: one row per (model, objective,
    sampler[, seed]), one cell per benchmark (see :func:`difference_cell`); with several seeds a last row per run over
    all of them (seeds, then problems)."""
    final = final_budget(summary)
    final = final[~is_baseline(final)]
    benchmarks = benchmark_order(final["benchmark"].unique())
    several = final["train_seed"].nunique() > 1
    rows = []
    for (model, objective, sampler), grp in final.groupby(["model", "objective", "sampler"], sort=False):
        base = {"model": model, "objective": objective, "sampler": sampler, "family": grp["family"].iloc[0]}
        for seed, runs in grp.groupby("train_seed"):
            by = runs.set_index("benchmark")
            rows.append({**base, "seed": seed,
                         **{b: difference_cell(by.loc[b]) if b in by.index else DASH for b in benchmarks}})
        if several:
            by = dict(list(grp.groupby("benchmark")))
            rows.append({**base, "seed": ALL_SEEDS, **{b: _seeds_cell(by[b]) if b in by else DASH for b in benchmarks}})
    columns = ["model", "objective", "sampler"] + (["seed"] if several else []) + benchmarks
    if not rows:
        return pd.DataFrame(columns=columns)
    table = pd.DataFrame(rows)
    order = sorted(range(len(table)), key=lambda i: (
        table.at[i, "model"], arm_rank(table.at[i, "objective"], table.at[i, "sampler"]),
        family_rank(table.at[i, "family"]), table.at[i, "sampler"], table.at[i, "seed"] == ALL_SEEDS))
    return table.iloc[order][columns].reset_index(drop=True).astype(str)


def resolution_lines(summary: pd.DataFrame, settings: StatsSettings = StatsSettings()) -> list[str]:
    """Per benchmark: its problems, the widest paired interval, the problems that would show equivalence within the
    margin (true difference 0) and resolve a 1-point difference, at the largest discordance rate of any comparison
    (or, for the difference, at the least rate that admits one when every rate is lower)."""
    final = final_budget(summary)
    paired = final[final["diff_vs_ntp"].notna()]
    lines = []
    points = f"{100 * settings.resolve:g}-point"
    for bench in benchmark_order(paired["benchmark"].unique()):
        rows = paired[paired["benchmark"] == bench]
        n = int(rows["n_problems"].max())
        rate = float(((rows["n_better"] + rows["n_worse"]) / rows["n_problems"]).max())
        width = float((rows["diff_hi"] - rows["diff_lo"]).max()) / 2
        margin = settings.margin(bench)
        equivalent = problems_for_equivalence(rate, margin, settings.confidence, settings.power)
        needed = problems_to_resolve(max(rate, settings.resolve), settings.resolve, settings.confidence,
                                     settings.power)
        basis = ("" if rate >= settings.resolve else
                 f" (at a discordance rate of {100 * settings.resolve:g}%, the least that admits such a difference: "
                 "a lower bound)")
        lines.append(f"- **{bench}**: {n:,} problems; paired intervals up to about \u00b1{100 * width:.1f} pt wide; "
                     f"{100 * rate:.1f}% of problems at most decided differently from the NTP arm. At that rate, "
                     f"equivalence within \u00b1{100 * margin:g} pt of a run with no true difference would be shown "
                     f"with {100 * settings.power:g}% power by about **{equivalent:,} problems**, and a {points} "
                     f"difference resolved (McNemar, {100 * settings.confidence:g}% two-sided) by about "
                     f"**{needed:,} problems**{basis}.")
    return lines


def training_aa_lines(scores: pd.DataFrame, summary: pd.DataFrame,
                      settings: StatsSettings = StatsSettings()) -> list[str]:
    """The training's A/A control, per model and benchmark with several fine-tune seeds: each later seed's NTP arm
    against the first seed's (the final budget), compared as a run is compared with its NTP arm, beside the share of
    problems the other runs decide differently from their own NTP arm. Two NTP arms differ only by the training's
    spread, so a run's difference to its arm reads against it. Empty with one seed."""
    final = final_budget(scores)
    arms = final[is_baseline(final) & final["problems"].notna()]
    rows = final_budget(summary)
    rows = rows[rows["diff_vs_ntp"].notna()]
    lines = []
    for bench in benchmark_order(arms["benchmark"].unique()):
        for model, group in arms[arms["benchmark"] == bench].groupby("model", sort=True):
            group = group.sort_values("train_seed")
            if len(group) < 2:
                continue
            first, seed0 = group["problems"].iloc[0], group["train_seed"].iloc[0]
            pairs = []
            for seed, probs in zip(group["train_seed"].iloc[1:], group["problems"].iloc[1:]):
                if probs.ids != first.ids:
                    continue  # unreachable in a report: pooling the seeds refuses such a run first
                tested, table = paired_difference(probs.correct[None, :], first.correct[None, :], first.clusters,
                                                  settings.margin(bench), settings)
                pairs.append(f"seed {seed} against seed {seed0}: {100 * tested.diff:+.1f} [{100 * tested.lo:+.1f}, "
                             f"{100 * tested.hi:+.1f}] pt, {100 * table.discordance:.1f}% of problems decided differently")
            if not pairs:
                continue
            others = rows[(rows["benchmark"] == bench) & (rows["model"] == model)]
            shares = (others["n_better"] + others["n_worse"]) / others["n_problems"]
            beside = (f"; every other run against its own NTP arm: {100 * shares.min():.1f}-{100 * shares.max():.1f}%"
                      if len(shares) else "")
            lines.append(f"- **{bench}** ({model}), NTP arm {'; '.join(pairs)}{beside}.")
    return lines


def statistics_md(summary: pd.DataFrame, settings: StatsSettings = StatsSettings(),
                  scores: pd.DataFrame | None = None) -> str:
    """The report's statistics section: the procedure (margin and correction stated once), the differences table,
    the problems per task and, with several seeds and the score rows ``scores``, the training's A/A control."""
    table = differences(summary)
    final = final_budget(summary)
    margins = sorted({f"\u00b1{100 * settings.margin(b):g} pt" for b in final["benchmark"].unique()})
    n_tests = int(final.groupby("train_seed")["diff_p"].count().max()) if len(final) else 0
    seeds = final["train_seed"].nunique()
    parts = [
        "## Differences to the NTP arm\n",
        f"Each run against the NTP arm (NTP objective, NTP decoding) of the same model, fine-tune seed and budget on "
        f"the same problems: the difference in points with its {100 * settings.confidence:g}% paired score interval "
        "(Newcombe 1998, method 10; problems of one family counted through a design effect), then the verdict: "
        f"**equivalent** when the interval lies inside the equivalence margin ({', '.join(margins) or DASH}), "
        "**lower** or **higher** when it excludes 0, both when both hold, **inconclusive** when neither does. Each "
        "claim carries its p value (the least alpha at which the interval makes the claim). The p values and words "
        f"are corrected by Holm's method over each seed's {n_tests} comparisons (separately for the "
        "differences and the equivalences), so a cell whose interval excludes 0 reads inconclusive when its "
        f"corrected p is not below {settings.alpha:g}; the intervals are per comparison. NFE speedup intervals are a "
        f"bootstrap ({settings.n_boot:,} resamples, seed {settings.seed}) of the problems, of whole families where a "
        "task has them (the ratio of totals on each resample; wall speedups have intervals over the speed stage's "
        "rounds instead, see Wall-clock). Method and margin: docs/statistics.md.\n",
    ]
    if seeds == 1:
        parts.append(f"_{ONE_SEED[0].upper()}{ONE_SEED[1:]}: the intervals cover which problems were drawn, not a "
                     "second fine-tune._\n")
    else:
        parts.append(f"{seeds} fine-tune seeds: each seed's row, then **{ALL_SEEDS}**: the difference averaged over "
                     "the seeds with an interval over seeds, then problems (between-seed variance plus the problems' "
                     "variance: docs/statistics.md), corrected by Holm over the runs, and each seed's difference.\n")
    if len(table):
        parts.append(to_markdown(table))
    lines = resolution_lines(summary, settings)
    if lines:
        parts += ["### Problems a task needs\n", "\n".join(lines) + "\n"]
    lines = training_aa_lines(scores, summary, settings) if scores is not None else []
    if lines:
        parts += ["### The training's A/A control\n",
                  "Two fine-tunes of the NTP arm that differ only in their seed, compared as a run is compared with "
                  "its NTP arm: how far apart the training alone puts two models on these problems. A run's "
                  "difference to its NTP arm says more than the training's spread only where it is larger than "
                  "this.\n", "\n".join(lines) + "\n"]
    return "\n".join(parts)


class Differences(Section):
    """The summary's intervals and paired differences to the NTP arm, and the Differences section; PairingError when
    a run and its NTP arm (or two seeds of a run) do not hold the same problems."""

    column_names = tuple(INTERVAL_COLUMNS)

    def columns(self, frame: pd.DataFrame, ctx: Context) -> pd.DataFrame:
        return add_intervals(frame, ctx.stats)

    def markdown(self, ctx: Context) -> list[str]:
        return [statistics_md(ctx.summary, ctx.stats, ctx.scores)]
