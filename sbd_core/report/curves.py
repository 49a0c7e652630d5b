"""The paper's Figures 5, 12 and 13: accuracy against mean NFE per problem, one panel per task (a row per model), one
colour per training budget, drawn where the SBD arm was decoded with every solver family a figure needs
(:func:`.outputs.planned_figures`); and the training curve: both arms' accuracy and the SBD arm's NFE speedup against
fine-tune steps, with intervals. What each shows: docs/figures.md."""

from __future__ import annotations

import textwrap

import pandas as pd
from matplotlib.figure import Figure

from .figures import FIG_DPI, MIN_SPAN, figure_bytes
from .keys import NTP, is_baseline
from .outputs import FIGURES, TRAINING_CURVE, figure_files, planned_figures
from .render import figure_links
from .section import Context, Section
from .seeds import seed_means
from .tables import benchmark_order

TITLES = {"figure5": "SBD (EB, entropy proxy) vs NTP across training budgets",
          "figure12": "EB (entropy proxy) vs Fast-dLLM factor rule",
          "figure13": "EB (confidence proxy) vs Fast-dLLM factor rule"}
SBD_OBJECTIVE = "sbd"
PANEL_IN = (4.4, 3.6)  # inches per panel
LEGEND_IN = 2.6  # inches for the legend, right of the panels
STYLES = ("-", "--", ":")
MARKERS = ("o", "s", "^")
EQUIVALENT_LABEL = "filled: equivalent to the NTP arm"  # the training curve's legend entry for filled markers


def sbd_families(summary: pd.DataFrame) -> set[str]:
    """The solver families of the SBD arm's block-sampler rows in a summary."""
    rows = summary[(summary["objective"] == SBD_OBJECTIVE) & (summary["sampler"] != NTP)]
    return set(rows["family"])


def budget_label(steps: int, final: int) -> str:
    """``1,125 steps``; the final budget says so (``0``: a model whose steps its score files do not record)."""
    if steps == 0:
        return "final model"
    return f"{steps:,} steps" + (" (final)" if steps == final else "")


def paper_figure(summary: pd.DataFrame, stem: str) -> dict[str, bytes]:
    """Draw figure ``stem`` (a key of :data:`.outputs.FIGURES`) from a summary; return {'png': ..., 'pdf': ...}."""
    means = seed_means(summary)
    models = sorted(means["model"].unique())
    benchmarks = benchmark_order(means["benchmark"].unique())
    fig = Figure(figsize=(PANEL_IN[0] * len(benchmarks) + LEGEND_IN, PANEL_IN[1] * len(models) + 0.5), dpi=FIG_DPI,
                 layout="constrained")
    axes = fig.subplots(len(models), len(benchmarks), squeeze=False)
    for r, model in enumerate(models):
        for c, bench in enumerate(benchmarks):
            ax = axes[r][c]
            rows = means[(means["model"] == model) & (means["benchmark"] == bench)]
            _panel(ax, rows, FIGURES[stem])
            _accuracy_span(ax, rows)
            ax.set_title(bench if len(models) == 1 else f"{model}: {bench}", fontsize=10)
            ax.set_xlabel("mean NFE per problem")
            ax.set_ylabel("accuracy (%)")
            ax.grid(True, alpha=0.3)
    return _finished(fig, axes, TITLES[stem], means)


def _finished(fig, axes, title: str, means: pd.DataFrame) -> dict[str, bytes]:
    """A figure's title (with its seed count), one legend for every panel right of them, and its file contents."""
    seeds = int(means["n_seeds"].max()) if len(means) else 1
    title += f" (mean over {seeds} fine-tune seeds)" if seeds > 1 else ""
    fig.suptitle("\n".join(textwrap.wrap(title, width=int(12 * fig.get_figwidth()))), fontsize=10)
    legend = {}  # label -> handle, over every panel (a budget may lack a family on one task)
    for ax in axes.flat:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    if legend:
        fig.legend(list(legend.values()), list(legend), loc="outside right center", fontsize=8, frameon=False)
    return figure_bytes(fig)


def _accuracy_span(ax, rows: pd.DataFrame, columns: tuple[str, ...] = ("accuracy",)) -> None:
    """At least MIN_SPAN points of accuracy on the axis, so a one-problem difference does not fill the panel, and every
    value of ``columns`` (a curve's interval ends too, so no error bar is cut off)."""
    accuracy = 100 * pd.concat([rows[c] for c in columns]).dropna()
    if len(accuracy):
        top, bottom = float(accuracy.max()), float(accuracy.min())
        ax.set_ylim(max(-1.0, min(bottom, top - MIN_SPAN) - 1.0), min(101.0, max(top, bottom + MIN_SPAN) + 1.0))


def _panel(ax, rows: pd.DataFrame, families: tuple[str, ...]) -> None:
    """One task: per budget (a colour), each family's points sorted by mean NFE, and the NTP arm's AR point."""
    budgets = sorted(rows["train_steps"].unique())
    final = max(budgets) if budgets else 0
    for b, steps in enumerate(budgets):
        colour = f"C{b % 10}"  # matplotlib's default colour cycle: one colour per budget
        label = budget_label(int(steps), int(final))
        at = rows[rows["train_steps"] == steps]
        for f, family in enumerate(families):
            pts = at[(at["objective"] == SBD_OBJECTIVE) & (at["family"] == family)].sort_values("mean_nfe")
            if len(pts):
                ax.plot(pts["mean_nfe"], 100 * pts["accuracy"], linestyle=STYLES[f % len(STYLES)],
                        marker=MARKERS[f % len(MARKERS)], color=colour, markersize=5, label=f"{label}: SBD, {family}")
        ntp = at[is_baseline(at)]
        if len(ntp):
            ax.plot(ntp["mean_nfe"], 100 * ntp["accuracy"], linestyle="none", marker="*", markersize=13,
                    color=colour, markeredgecolor="black", label=f"{label}: NTP (AR)")


def training_curve(summary: pd.DataFrame) -> dict[str, bytes]:
    """Draw the training curve: per task (a column; two rows per model) the accuracy of the NTP arm, the SBD arm in NTP
    mode and each of its block samplers against fine-tune steps, with their intervals (filled markers: equivalent to
    the NTP arm of the same budget), and below it the block samplers' NFE speedup with its interval (over several
    seeds: the mean ± the seeds' sd)."""
    means = seed_means(summary)
    models = sorted(means["model"].unique())
    benchmarks = benchmark_order(means["benchmark"].unique())
    fig = Figure(figsize=(PANEL_IN[0] * len(benchmarks) + LEGEND_IN, 2 * PANEL_IN[1] * len(models) + 0.5),
                 dpi=FIG_DPI, layout="constrained")
    axes = fig.subplots(2 * len(models), len(benchmarks), squeeze=False)
    for r, model in enumerate(models):
        for c, bench in enumerate(benchmarks):
            rows = means[(means["model"] == model) & (means["benchmark"] == bench)]
            accuracy_ax, speedup_ax = axes[2 * r][c], axes[2 * r + 1][c]
            _curves(accuracy_ax, speedup_ax, rows)
            accuracy_ax.set_title(bench if len(models) == 1 else f"{model}: {bench}", fontsize=10)
            accuracy_ax.set_ylabel("accuracy (%)")
            speedup_ax.set_ylabel("NFE speedup (x)")
            speedup_ax.set_xlabel("fine-tune steps")
            for ax in (accuracy_ax, speedup_ax):
                ax.grid(True, alpha=0.3)
    return _finished(fig, axes, "Accuracy and NFE speedup against fine-tune steps", means)


def _curves(accuracy_ax, speedup_ax, rows: pd.DataFrame) -> None:
    """One task's curves: a line per run (the NTP arm; the SBD arm per sampler) over its budgets, sorted by steps."""
    several = int(rows["n_seeds"].max()) > 1 if len(rows) else False
    lo, hi, words = (("seeds_accuracy_lo", "seeds_accuracy_hi", "seeds_accuracy_verdict") if several
                     else ("accuracy_lo", "accuracy_hi", "accuracy_verdict"))
    runs = [("NTP arm", rows[is_baseline(rows)])]
    sbd = rows[rows["objective"] == SBD_OBJECTIVE]
    runs += [(str(grp["label"].iloc[0]) + (" mode" if sampler == NTP else ""), grp)
             for sampler, grp in sorted(sbd.groupby("sampler"), key=lambda kv: (kv[0] != NTP, kv[0]))]
    any_equivalent = False
    for i, (label, run) in enumerate(runs):
        run = run.sort_values("train_steps")
        if not len(run):
            continue
        colour = "black" if i == 0 else f"C{(i - 1) % 10}"
        steps, accuracy = run["train_steps"], 100 * run["accuracy"]
        accuracy_ax.errorbar(steps, accuracy, yerr=[accuracy - 100 * run[lo], 100 * run[hi] - accuracy], color=colour,
                             marker="*" if i == 0 else "o", markersize=9 if i == 0 else 5, capsize=3,
                             markerfacecolor="white" if i else colour, label=label)
        equivalent = run[run[words].fillna("").str.contains("equivalent")]
        if len(equivalent):
            accuracy_ax.plot(equivalent["train_steps"], 100 * equivalent["accuracy"], linestyle="none", marker="o",
                             markersize=5, color=colour)
            any_equivalent = True
        if i and run["sampler"].iloc[0] != NTP:
            speedup = run["nfe_speedup"]
            # one seed: the bootstrap interval; over seeds (no one-seed interval: seeds.SEED_INTERVALS) the seeds' sd,
            # as Table 1 gives it
            yerr = ([run["nfe_speedup_sd"].fillna(0.0)] * 2 if several else
                    [speedup - run["nfe_speedup_lo"], run["nfe_speedup_hi"] - speedup])
            speedup_ax.errorbar(steps, speedup, yerr=yerr, color=colour, marker="o", markersize=5, capsize=3,
                                label=label)
    if any_equivalent:  # one legend entry for the filled markers, in no run's colour
        accuracy_ax.plot([], [], linestyle="none", marker="o", markersize=5, color="grey", label=EQUIVALENT_LABEL)
    _accuracy_span(accuracy_ax, rows, ("accuracy", lo, hi))  # the bars' ends too: none is cut off
    ticks = sorted(int(t) for t in rows["train_steps"].unique())
    for ax in (accuracy_ax, speedup_ax):  # slanted: checkpoints close on a linear axis (3,600 and 7,200) stay legible
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks], rotation=30, ha="right")


class PaperFigures(Section):
    """Figures 5, 12 and 13 (those the SBD arm's solver families allow: none without them) and the training curve
    (a run with checkpoints)."""

    def _stems(self, ctx: Context) -> list[str]:
        return planned_figures(sbd_families(ctx.summary), budgets=ctx.summary["train_steps"].nunique())

    def files(self, ctx: Context) -> dict[str, bytes]:
        return {f"{stem}.{fmt}": data for stem in self._stems(ctx)
                for fmt, data in (training_curve(ctx.summary) if stem == TRAINING_CURVE
                                  else paper_figure(ctx.summary, stem)).items()}

    def markdown(self, ctx: Context) -> list[str]:
        stems = self._stems(ctx)
        paper = [stem for stem in stems if stem != TRAINING_CURVE]
        lines = []
        if paper:
            lines += ["## Figures 5, 12, 13: accuracy vs mean NFE across training budgets and solvers\n",
                      *figure_links([figure_files(stem)[0] for stem in paper])]
        if TRAINING_CURVE in stems:
            lines += ["## Training curve: accuracy and NFE speedup against fine-tune steps\n",
                      "Both arms at each budget (intervals: 95%, problems clustered by family where a task has them); "
                      "a filled marker is a run equivalent to the NTP arm of the same budget (the differences "
                      "table's verdict, margin \u00b12 pt).\n",
                      *figure_links([figure_files(TRAINING_CURVE)[0]])]
        return lines
