"""Benchmark report: score JSON files -> summary CSV, Table-1 style tables, speed/accuracy figures and report.md.

Speedup conventions (the paper measures speedup as the reduction in forward passes, NFE; it does not say which ratio):

* ``nfe_speedup``: total NFE of the NTP baseline run (objective ``ntp``, sampler ``ntp``, same model and
  benchmark) divided by the row's total NFE.  It is NaN (with a logged warning) when the baseline is missing.
* ``wall_speedup``: the NTP baseline's decode time divided by the row's, from the speed stage: the median over rounds
  of the per-round paired ratio on a subset of the problems, at the decode batch size (``speed``).
* ``tokens_per_forward``: total generated tokens / total NFE of the row itself.
* The Table-1 mean NFE speedup is the arithmetic mean of the per-benchmark NFE speedups, as in the paper.

Modules: ``scores`` (load/validate score files, ``summarize``), ``tables`` (Table 1, the paper's table, markdown/LaTeX),
``paper`` (our runs beside the paper's Table 1), ``table2`` (the likelihood tasks' Table 2 beside the paper's),
``figures`` (matplotlib figures: accuracy vs speedup per benchmark, and the paper's Figure 1), ``build``
(``build_report`` / ``write_report``); ``stats`` (Wilson, design effects of families and seeds, bootstrap,
problems needed), ``verdicts`` (the one verdict procedure: Newcombe's paired interval, its p values, Holm, the words),
``intervals`` (per-problem pairing with the NTP arm, the summary's interval columns), ``seeds`` (final budget, means
over fine-tune seeds), ``differences`` (the paired differences table and its words), ``curves`` (the paper's Figures
5, 12, 13), ``plan`` (which of them a run draws; no pandas: the workflow imports it), ``speed`` (the speed stage's
files: wall speedups with intervals over rounds, the A/A control, a rerun's comparison), ``prediction`` (eq. 16 from
measured time(k) and the widths each run fed, beside the measurement; time(k)'s plausibility).  The names below are
re-exported lazily, so ``sbd_core.report.DEFAULT_PAPER_TABLE`` (used by the CLI's defaults) needs neither pandas,
matplotlib nor scipy, which are the optional ``report`` extra.

Usage::

    python -m sbd_core report --scores results/scores/*.json --out results/report
"""

from __future__ import annotations

import importlib
from pathlib import Path

#: Default location of the paper's Table 1 (repository checkout layout: <repo>/results/paper/table1.csv).
DEFAULT_PAPER_TABLE = Path(__file__).resolve().parents[2] / "results" / "paper" / "table1.csv"
#: The benchmark of the paper's Figure 1 (pass@1 against NFE speedup, one figure per model).
FIGURE1_BENCHMARK = "lcbv6"


def figure1_stem(model: str) -> str:
    """File name (without extension) of Figure 1 for ``model`` in the report folder."""
    return f"figure1_{model}"


#: Re-exported name -> submodule defining it.
_EXPORTS = {
    **dict.fromkeys(["ScoreFileError", "REQUIRED_KEYS", "KEY_COLUMNS", "SUMMARY_COLUMNS", "load_scores", "summarize",
                     "departures_text"], "scores"),
    **dict.fromkeys(["DASH", "PAPER_BENCHMARKS", "format_cell", "family_order", "benchmark_order", "table1",
                     "load_paper_table", "paper_table_display", "to_markdown", "to_latex", "latex_escape"], "tables"),
    **dict.fromkeys(["PAPER_GAMMAS", "PAPER_ROWS", "compare", "comparison_display", "paper_sampler"], "paper"),
    **dict.fromkeys(["FIG_SIZE_IN", "FIG_DPI", "png_size"], "figures"),
    **dict.fromkeys(["SYNTHETIC_NOTE", "build_report", "write_report"], "build"),
    **dict.fromkeys(["wilson_interval", "design_effect", "problems_to_resolve"], "stats"),
    **dict.fromkeys(["paired_comparison", "holm", "verdict"], "verdicts"),
    **dict.fromkeys(["FIGURES", "planned_figures"], "plan"),
    **dict.fromkeys(["DEFAULT_PAPER_TABLE2", "build_table2", "load_likelihood_scores", "table2"], "table2"),
}

__all__ = ["DEFAULT_PAPER_TABLE", "FIGURE1_BENCHMARK", "figure1_stem", *_EXPORTS]


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
