"""Table 2 (likelihood tasks) from the likelihood stage's score files, beside the paper's printed Table 2.

A row per (model, arm), a column per task (the registry's order, :data:`sbd_core.likelihood.TASKS`): the task's
metric in percent with lm-eval's standard error, and for every arm but NTP the difference to the NTP arm of the same
model in points. ``table2.csv`` holds the numbers (``<task>_pct``, ``<task>_stderr_pts``, ``<task>_delta_pts``,
``<task>_n``), ``table2.md`` / ``table2.tex`` the table and, below it, the paper's (``results/paper/table2.csv``: the
paper, arXiv 2509.04185v1, Table 2, as printed). Everything is read from score files; nothing is recomputed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from . import DEFAULT_PAPER_TABLE
from .scores import ScoreFileError
from .tables import DASH, to_latex, to_markdown

__all__ = ["DEFAULT_PAPER_TABLE2", "load_likelihood_scores", "table2", "table2_display", "load_paper_table2",
           "paper_table2_display", "build_table2"]

DEFAULT_PAPER_TABLE2 = DEFAULT_PAPER_TABLE.parent / "table2.csv"
REQUIRED_KEYS = ("model", "objective", "task", "column", "metric", "accuracy", "n", "settings")
ARMS = ("ntp", "sbd", "sbd_no_ntp_grad")  # the NTP arm first, then the paper's order
PAPER_ROWS = {"ntp": "NTP", "sbd": "SBD", "sbd_no_ntp_grad": "SBD w/o NTP loss"}
NOTE = (
    "The paper's Table 2 is a 3B pretraining ablation (an NTP model pretrained on 1T tokens; the SBD arms continue its "
    "900B-token checkpoint for the last 100B tokens). This run scores Table 2's lm-eval tasks (or the embedded "
    "analogue's multiple-choice questions) on the models and arms of its own config, so compare the signs and sizes of "
    "the differences to the NTP arm, not the absolute numbers. "
    "Log-likelihoods come from the NTP logits (the paper's eq. 9a) through lm-eval with the `sbd` model. Cells: "
    "accuracy % \u00b1 lm-eval's standard error (difference to the NTP arm of the same model, points)."
)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScoreFileError(f"likelihood score file {path}: cannot read JSON ({exc})") from exc
    missing = [k for k in REQUIRED_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise ScoreFileError(f"likelihood score file {path}: missing key(s) {missing} (is it an output of "
                             "`python -m sbd_core likelihood`?)")
    acc = data["accuracy"]
    if not isinstance(acc, (int, float)) or isinstance(acc, bool) or not 0.0 <= acc <= 1.0:
        raise ScoreFileError(f"likelihood score file {path}: accuracy must be a fraction in [0, 1], got {acc!r}")
    return data


def load_likelihood_scores(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """One row per score file: model, objective, task, column, metric, shots, accuracy, stderr, n, path.

    Raises ScoreFileError naming the file when one is unreadable or incomplete, and when two share (model, objective,
    task)."""
    rows = []
    for path in map(Path, paths):
        data = _read(path)
        rows.append({"model": data["model"], "objective": data["objective"], "task": data["task"],
                     "column": data["column"], "metric": data["metric"],
                     "num_fewshot": data["settings"].get("num_fewshot", 0), "accuracy": float(data["accuracy"]),
                     "stderr": float("nan") if data.get("stderr") is None else float(data["stderr"]),
                     "n": int(data["n"]), "path": str(path)})
    df = pd.DataFrame(rows, columns=["model", "objective", "task", "column", "metric", "num_fewshot", "accuracy",
                                     "stderr", "n", "path"])
    dup = df[df.duplicated(["model", "objective", "task"], keep=False)]
    if not dup.empty:
        raise ScoreFileError(f"duplicate (model, objective, task) in likelihood score files: {sorted(dup['path'])}")
    return df


def _task_order(names) -> list[str]:
    from ..likelihood import TASKS

    return [t for t in TASKS if t in set(names)] + sorted(set(names) - set(TASKS))


def _arm_order(objectives) -> list[str]:
    return [a for a in ARMS if a in set(objectives)] + sorted(set(objectives) - set(ARMS))


def table2(scores: pd.DataFrame) -> pd.DataFrame:
    """The numbers: a row per (model, objective), per task ``<task>_pct``, ``_stderr_pts``, ``_delta_pts`` (to the
    NTP arm of the same model; NaN for that arm or without it) and ``_n``."""
    tasks = _task_order(scores["task"].unique())
    rows = []
    for model in sorted(scores["model"].unique()):
        mine = scores[scores["model"] == model].set_index(["objective", "task"])
        for objective in _arm_order(mine.index.get_level_values(0).unique()):
            row = {"model": model, "objective": objective}
            for task in tasks:
                cell = mine.loc[(objective, task)] if (objective, task) in mine.index else None
                base = mine.loc[("ntp", task)] if ("ntp", task) in mine.index and objective != "ntp" else None
                pct = float("nan") if cell is None else 100 * cell["accuracy"]
                row[f"{task}_pct"] = pct
                row[f"{task}_stderr_pts"] = float("nan") if cell is None else 100 * cell["stderr"]
                row[f"{task}_delta_pts"] = float("nan") if base is None else pct - 100 * base["accuracy"]
                row[f"{task}_n"] = pd.NA if cell is None else int(cell["n"])
            rows.append(row)
    return pd.DataFrame(rows)


def _header(scores: pd.DataFrame, task: str) -> str:
    mine = scores[scores["task"] == task]
    settings = sorted({f"{m}, {k}-shot" for m, k in zip(mine["metric"], mine["num_fewshot"])})
    return f"{mine['column'].iloc[0]} ({'; '.join(settings)})"


def table2_display(scores: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The table as text: 'acc \u00b1 se (delta)' per cell, a dash where a run is missing."""
    rows = []
    for rec in table.to_dict("records"):
        row = {"Model": rec["model"], "Arm": rec["objective"]}
        for task in _task_order(scores["task"].unique()):
            pct, se, delta = rec[f"{task}_pct"], rec[f"{task}_stderr_pts"], rec[f"{task}_delta_pts"]
            text = DASH if pd.isna(pct) else f"{pct:.1f}" + ("" if pd.isna(se) else f" \u00b1{se:.1f}")
            row[_header(scores, task)] = text + ("" if pd.isna(delta) else f" ({delta:+.1f})")
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


def load_paper_table2(path: str | os.PathLike = DEFAULT_PAPER_TABLE2) -> pd.DataFrame:
    """The paper's Table 2 as shipped ('#' lines skipped): row, objective, then per task its value and printed
    difference."""
    from ..likelihood import PAPER_TASKS

    df = pd.read_csv(path, comment="#")
    expected = ["row", "objective"] + [f"{t}{s}" for t in PAPER_TASKS for s in ("", "_delta_pts")]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise ValueError(f"paper table {path}: missing column(s) {missing}")
    return df


def paper_table2_display(paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's table as printed: 'value (difference)'."""
    from ..likelihood import PAPER_TASKS, TASKS

    rows = []
    for rec in paper.to_dict("records"):
        row = {"Model (3B, 1T tokens)": rec["row"]}
        for task in PAPER_TASKS:
            delta = rec[f"{task}_delta_pts"]
            row[TASKS[task].column] = f"{rec[task]:.1f}" + ("" if pd.isna(delta) else f" ({delta:+.1f})")
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


def _latex(display: pd.DataFrame, caption: str) -> str:
    return to_latex(display, caption).replace("\u00b1", r"$\pm$")


def build_table2(paths: Iterable, paper_table: str | os.PathLike | None = DEFAULT_PAPER_TABLE2
                 ) -> tuple[dict[str, bytes], str]:
    """``({"table2.csv": ..., "table2.md": ..., "table2.tex": ...}, the markdown section report.md shows)``."""
    scores = load_likelihood_scores(paths)
    table = table2(scores)
    ours = table2_display(scores, table)
    md = [to_markdown(ours)]
    tex = [_latex(ours, "SBD reproduction, Table 2 layout: accuracy % +- standard error (difference to NTP, points)")]
    paper_md = ""
    if paper_table is not None and Path(paper_table).is_file():
        paper = paper_table2_display(load_paper_table2(paper_table))
        paper_md = "Paper Table 2 (arXiv 2509.04185v1, as printed):\n\n" + to_markdown(paper)
        md.append(paper_md)
        tex.append(_latex(paper, "arXiv 2509.04185v1 Table 2 (as printed)"))
    section = "\n".join(["## Table 2 layout: likelihood tasks\n", NOTE + "\n", md[0], paper_md])
    files = {"table2.csv": table.to_csv(index=False).encode(), "table2.md": "\n".join(md).encode(),
             "table2.tex": "\n".join(tex).encode()}
    return files, section
