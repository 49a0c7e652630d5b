"""The report's file names: what the report stage writes, named once for ``build_report`` and for the workflow, which
lists them when it parses the config (so this module imports neither torch nor pandas).
"""

from __future__ import annotations

import re

#: Every figure is written in both formats.
FIGURE_FORMATS = ("png", "pdf")
SUMMARY = "summary.csv"
TABLE1 = ("table1.csv", "table1.md", "table1.tex")
REPORT = "report.md"
#: The tables and the report every run writes (``provenance.json`` is the report stage's, beside them).
TABLES = (SUMMARY, *TABLE1, REPORT)
PROVENANCE = "provenance.json"
#: The likelihood tasks' Table 2 (written when the run scores them).
TABLE2 = ("table2.csv", "table2.md", "table2.tex")
#: The benchmark of the paper's Figure 1 (pass@1 against NFE speedup, one figure per model).
FIGURE1_BENCHMARK = "lcbv6"
#: Measured against predicted wall speedup (written when a run has both).
WALL_VS_PREDICTED = "wall_vs_predicted"
#: The paper's Figures 5, 12 and 13: stem -> the solver families (of the SBD arm) it compares, drawn in this order.
FIGURES = {"figure5": ("eb-entropy",), "figure12": ("eb-entropy", "factor"),
           "figure13": ("eb-confidence", "factor")}


#: Accuracy of both arms and the SBD arm's NFE speedup against fine-tune steps (a run with checkpoints).
TRAINING_CURVE = "training_curve"


def planned_figures(sbd_families, budgets: int = 1) -> list[str]:
    """The stems of Figures 5, 12, 13 a run draws, given the solver families its SBD arm is decoded with, and the
    training curve when the SBD arm is decoded with a block sampler at ``budgets`` > 1 training budgets (its final
    model and the checkpoints of ``finetune.eval_at_steps``)."""
    families = set(sbd_families)
    stems = [stem for stem, needed in FIGURES.items() if set(needed) <= families]
    return stems + ([TRAINING_CURVE] if budgets > 1 and families - {"ntp"} else [])


def speedup_stem(benchmark: str) -> str:
    """The stem of a benchmark's accuracy-against-speedup figure (the name made file-name safe)."""
    return "speedup_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", benchmark)


def figure1_stem(model: str) -> str:
    """The stem of Figure 1 for ``model``."""
    return f"figure1_{model}"


def figure_files(stem: str) -> list[str]:
    """A figure's files: ``<stem>.png``, ``<stem>.pdf``."""
    return [f"{stem}.{fmt}" for fmt in FIGURE_FORMATS]


def report_files(models, benchmarks, paper_figures) -> list[str]:
    """The files the report stage writes for a grid of models and benchmarks (Table 2's aside): the tables, the
    provenance, a speedup figure per benchmark, Figure 1 per model when its benchmark is run, and ``paper_figures``
    (:func:`planned_figures`)."""
    figure1 = [figure1_stem(m) for m in models] if FIGURE1_BENCHMARK in benchmarks else []
    stems = [speedup_stem(b) for b in benchmarks] + figure1 + list(paper_figures)
    return [*TABLES, PROVENANCE, *(name for stem in stems for name in figure_files(stem))]
