"""Benchmark report: score JSON files (and the timing, speed and likelihood stages' files) -> summary.csv, Table 1,
the paper's tables beside ours, figures and report.md. What each number means: docs/statistics.md, docs/speed.md.

The report is a list of sections (:mod:`.section`, walked by :mod:`.build`), one per topic module; the statistics are
:mod:`.stats`, the formatting :mod:`.render`, the run keys :mod:`.keys`, the file names :mod:`.outputs` (the last two
free of torch and pandas: the workflow imports them). The names below are re-exported lazily, so
``sbd_core.report.DEFAULT_PAPER_TABLE`` (used by the CLI's defaults) needs neither pandas, matplotlib nor scipy, which
are the optional ``report`` extra.

Usage::

    python -m sbd_core report --scores results/scores/*.json --out results/report
"""

from __future__ import annotations

import importlib
from pathlib import Path

#: Default location of the paper's Table 1 (repository checkout layout: <repo>/results/paper/table1.csv).
DEFAULT_PAPER_TABLE = Path(__file__).resolve().parents[2] / "results" / "paper" / "table1.csv"

#: Re-exported name -> submodule defining it.
_EXPORTS = {
    **dict.fromkeys(["ScoreFileError", "REQUIRED_KEYS", "KEY_COLUMNS", "SUMMARY_COLUMNS", "load_scores",
                     "departures_text"], "scores"),
    **dict.fromkeys(["DASH", "to_markdown", "to_latex", "latex_escape"], "render"),
    **dict.fromkeys(["format_cell", "family_order", "benchmark_order", "table1"], "tables"),
    **dict.fromkeys(["PAPER_BENCHMARKS", "PAPER_GAMMAS", "PAPER_ROWS", "compare", "comparison_display",
                     "paper_sampler", "load_paper_table", "paper_table_display"], "paper"),
    **dict.fromkeys(["FIG_SIZE_IN", "FIG_DPI", "png_size"], "figures"),
    **dict.fromkeys(["SYNTHETIC_NOTE"], "overview"),
    **dict.fromkeys(["SECTIONS", "summarize", "build_report", "write_report"], "build"),
    **dict.fromkeys(["wilson_interval", "design_effect", "problems_to_resolve"], "stats.estimates"),
    **dict.fromkeys(["paired_comparison", "holm", "verdict"], "stats.verdicts"),
    **dict.fromkeys(["FIGURE1_BENCHMARK", "FIGURES", "figure1_stem", "planned_figures"], "outputs"),
    **dict.fromkeys(["DEFAULT_PAPER_TABLE2", "build_table2", "load_likelihood_scores", "table2"], "table2"),
}

__all__ = ["DEFAULT_PAPER_TABLE", *_EXPORTS]


def __getattr__(name: str):
    """Import the submodule defining ``name`` on first access (PEP 562) and cache the value here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
