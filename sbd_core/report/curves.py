"""The paper's Figures 5, 12 and 13: accuracy against mean NFE per problem, one panel per task (a row per model), one
colour per training budget, drawn where the SBD arm was decoded with every solver family a figure needs
(:func:`.outputs.planned_figures`). What each shows: docs/figures.md."""

from __future__ import annotations

import textwrap

import pandas as pd
from matplotlib.figure import Figure

from .figures import MIN_SPAN, figure_bytes
from .keys import NTP, is_baseline
from .outputs import FIGURES, figure_files, planned_figures
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
    seeds = int(means["n_seeds"].max()) if len(means) else 1
    title = TITLES[stem] + (f" (mean over {seeds} fine-tune seeds)" if seeds > 1 else "")
    fig.suptitle("\n".join(textwrap.wrap(title, width=int(12 * fig.get_figwidth()))), fontsize=10)
    legend = {}  # label -> handle, over every panel (a budget may lack a family on one task)
    for ax in axes.flat:
        legend.update(zip(*reversed(ax.get_legend_handles_labels())))
    if legend:
        fig.legend(list(legend.values()), list(legend), loc="outside right center", fontsize=8, frameon=False)
    return figure_bytes(fig)


def _accuracy_span(ax, rows: pd.DataFrame) -> None:
    """At least MIN_SPAN points of accuracy on the axis, so a one-problem difference does not fill the panel."""
    accuracy = 100 * rows["accuracy"].dropna()
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


class PaperFigures(Section):
    """Figures 5, 12 and 13 (those the SBD arm's solver families allow: none without them)."""

    def files(self, ctx: Context) -> dict[str, bytes]:
        return {f"{stem}.{fmt}": data for stem in planned_figures(sbd_families(ctx.summary))
                for fmt, data in paper_figure(ctx.summary, stem).items()}

    def markdown(self, ctx: Context) -> list[str]:
        stems = planned_figures(sbd_families(ctx.summary))
        if not stems:
            return []
        return ["## Figures 5, 12, 13: accuracy vs mean NFE across training budgets and solvers\n",
                *figure_links([figure_files(stem)[0] for stem in stems])]
