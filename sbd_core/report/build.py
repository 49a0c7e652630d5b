"""Report assembly: all files rendered in memory (``build_report``), then written atomically (``write_report``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import pandas as pd

from ..io_utils import write_bytes_atomic
from . import DEFAULT_PAPER_TABLE
from .figures import _figure_bytes, _safe_name
from .scores import load_scores, summarize
from .tables import _table1_display, load_paper_table, paper_table_display, table1, to_latex, to_markdown

logger = logging.getLogger(__package__)  # "sbd_core.report": one logger for the whole package

#: Shown at the top of report.md.
SYNTHETIC_NOTE = (
    "Speedups measured on the embedded default (a tiny model on synthetic tasks) are not comparable with the paper's "
    "8B-model numbers; only runs of the paper's models on the paper's benchmarks can be compared with Table 1."
)


def _report_md(summary: pd.DataFrame, table_md: str, paper_md: str | None, figures: list[str]) -> str:
    """Assemble report.md: note on comparability, reproduction table, paper table and figure links."""
    n_runs = len(summary)
    models = ", ".join(sorted(summary["model"].unique()))
    tasks = ", ".join(sorted(summary["task"].unique()))
    parts = [
        "# SBD benchmark report\n",
        f"{n_runs} score files; models: {models}; tasks: {tasks}.\n",
        f"> **Note.** {SYNTHETIC_NOTE}\n",
        "Speedup = total NFE of the NTP baseline (NTP-trained model, NTP sampling, same model and task) / total NFE "
        "of the run; `tokens_per_forward` in `summary.csv` is the run's own generated tokens per forward. "
        "Mean speedup = arithmetic mean of the per-task speedups, as in the paper's Table 1. "
        "Cells read accuracy % (speedup x). Machine-readable: [summary.csv](summary.csv), [table1.csv](table1.csv).\n",
        "## Reproduction (Table 1 layout)\n",
        table_md,
    ]
    if paper_md is not None:
        parts += ["## Paper Table 1 (arXiv 2509.04185v1, as printed)\n", paper_md]
    parts.append("## Figures: accuracy vs NFE speedup\n")
    for name in figures:
        stem = name[: -len(".png")]
        parts.append(f"![{stem}]({name})\n\n[{stem}.pdf]({stem}.pdf)\n")
    return "\n".join(parts)


# ----------------------------------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------------------------------


def _csv_bytes(df: pd.DataFrame) -> bytes:
    """CSV encoding of a DataFrame (no index)."""
    return df.to_csv(index=False).encode("utf-8")


def _resolve_paper_table(paper_table) -> Path | None:
    """Return the paper-table path to use, or None (with a warning) when the default one is absent."""
    if paper_table is None:
        return None
    path = Path(paper_table)
    if path.is_file():
        return path
    if not path.is_absolute() and (DEFAULT_PAPER_TABLE.parent.parent.parent / path).is_file():
        return DEFAULT_PAPER_TABLE.parent.parent.parent / path
    if path == DEFAULT_PAPER_TABLE:
        logger.warning("paper table %s not found; paper_table1.* will not be written", path)
        return None
    raise FileNotFoundError(f"paper table not found: {path}")


def build_report(score_paths: Sequence, paper_table=DEFAULT_PAPER_TABLE) -> dict[str, bytes]:
    """Compute every report file in memory: {file name: contents}. Nothing is written."""
    summary = summarize(load_scores(score_paths))
    table = table1(summary)
    disp = _table1_display(table)
    files: dict[str, bytes] = {
        "summary.csv": _csv_bytes(summary),
        "table1.csv": _csv_bytes(table),
        "table1.md": to_markdown(disp).encode(),
        "table1.tex": to_latex(disp, "SBD reproduction: accuracy % (NFE speedup x)").encode(),
    }
    paper_md = None
    paper_path = _resolve_paper_table(paper_table)
    if paper_path is not None:
        pdisp = paper_table_display(load_paper_table(paper_path))
        paper_md = to_markdown(pdisp)
        files["paper_table1.md"] = paper_md.encode()
        files["paper_table1.tex"] = to_latex(pdisp, "arXiv 2509.04185v1 Table 1 (as printed)").encode()
    figures = []
    for task in sorted(summary["task"].unique()):
        stem = f"speedup_{_safe_name(task)}"
        for fmt, data in _figure_bytes(summary, task).items():
            files[f"{stem}.{fmt}"] = data
        figures.append(f"{stem}.png")
    files["report.md"] = _report_md(summary, to_markdown(disp), paper_md, figures).encode()
    return files


def write_report(score_paths: Sequence, out_dir, paper_table=DEFAULT_PAPER_TABLE) -> list[Path]:
    """Build the full report and write it into out_dir; return the paths written.

    Everything is rendered in memory first, then each file is written atomically (temp file + os.replace), so a
    failure leaves no half-written output. ``paper_table=None`` skips the paper_table1.* files.
    """
    files = build_report(score_paths, paper_table)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in files.items():
        write_bytes_atomic(data, out / name)
        written.append(out / name)
    return written
