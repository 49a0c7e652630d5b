"""Table 2 (likelihood tasks) from the likelihood stage's score files, beside the paper's printed Table 2: a row per
(model, arm), per task the accuracy with its interval and, against the NTP arm of the same model and seed, the one
verdict procedure (:mod:`.stats.verdicts`). The files and columns: docs/likelihood.md and docs/statistics.md
(Table 2)."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from ..likelihood import PAPER_TASKS, TASKS
from ..settings import StatsSettings
from . import DEFAULT_PAPER_TABLE
from .keys import NTP
from .outputs import TABLE2
from .render import DASH, csv_bytes, number, to_latex, to_markdown
from .scores import ScoreFileError
from .section import Context, Section, derived
from .stats.estimates import design_effect, wilson_interval
from .stats.intervals import Problems
from .stats.verdicts import PairedTable, holm, paired_comparison, verdict, verdict_cell

__all__ = ["DEFAULT_PAPER_TABLE2", "load_likelihood_scores", "table2", "table2_display", "load_paper_table2",
           "paper_table2_display", "build_table2"]

DEFAULT_PAPER_TABLE2 = DEFAULT_PAPER_TABLE.parent / "table2.csv"
REQUIRED_KEYS = ("model", "objective", "task", "column", "metric", "accuracy", "n", "settings", "per_doc")
ARMS = ("ntp", "sbd", "sbd_no_ntp_grad")  # the NTP arm first, then the paper's order
PAPER_ROWS = {"ntp": "NTP", "sbd": "SBD", "sbd_no_ntp_grad": "SBD w/o NTP loss"}
NOTE = (
    "The paper's Table 2 is a 3B pretraining ablation (an NTP model pretrained on 1T tokens; the SBD arms continue its "
    "900B-token checkpoint for the last 100B tokens). This run scores Table 2's lm-eval tasks (or the embedded "
    "analogue's multiple-choice questions) on the models and arms of its own config, so compare the signs and sizes of "
    "the differences to the NTP arm, not the absolute numbers. "
    "Log-likelihoods come from the NTP logits (the paper's eq. 9a) through lm-eval with the `sbd` model. Cells: "
    "accuracy % [{level} Wilson interval over the questions]; for the other arms, the difference to the NTP arm of the "
    "same model and seed on the same questions with its paired interval and verdict, as in the differences to the NTP "
    "arm (equivalence margin {margins}; Holm's correction over this table's {tests} comparisons; docs/statistics.md)."
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
    """One row per score file: model, objective, task, column, metric, shots, accuracy, stderr, n, path and the
    per-question verdicts (``questions``: :class:`.intervals.Problems`).

    Raises ScoreFileError naming the file when one is unreadable or incomplete, and when two share (model, objective,
    task)."""
    rows = []
    for path in map(Path, paths):
        data = _read(path)
        rows.append({"model": data["model"], "objective": data["objective"], "task": data["task"],
                     "column": data["column"], "metric": data["metric"],
                     "num_fewshot": data["settings"].get("num_fewshot", 0), "accuracy": float(data["accuracy"]),
                     "stderr": float("nan") if data.get("stderr") is None else float(data["stderr"]),
                     "n": int(data["n"]), "path": str(path), "questions": _questions(path, data)})
    df = pd.DataFrame(rows, columns=["model", "objective", "task", "column", "metric", "num_fewshot", "accuracy",
                                     "stderr", "n", "path", "questions"])
    dup = df[df.duplicated(["model", "objective", "task"], keep=False)]
    if not dup.empty:
        raise ScoreFileError(f"duplicate (model, objective, task) in likelihood score files: {sorted(dup['path'])}")
    return df


def _questions(path: Path, data: dict) -> Problems:
    """The file's per-question verdicts (its ``metric`` per document of ``per_doc``), keyed ``<lm-eval task>/<doc
    id>``; a question's cluster is its document's ``cluster``, else its lm-eval task when the task is a group of
    several (MMLU's subjects). ScoreFileError naming the file when they do not give its accuracy."""
    per_doc, metric = data["per_doc"], data["metric"]
    records = [(leaf, doc) for leaf, docs in sorted((per_doc or {}).items()) for doc in docs]
    if not records or not all(isinstance(doc.get(metric), (int, float)) for _, doc in records):
        raise ScoreFileError(f"likelihood score file {path}: 'per_doc' must hold every document's {metric!r} (is it "
                             "an output of `python -m sbd_core likelihood`?)")
    correct = np.array([float(doc[metric]) for _, doc in records])
    if abs(correct.mean() - float(data["accuracy"])) > 1e-9:
        raise ScoreFileError(f"likelihood score file {path}: per_doc {metric!r} gives {correct.mean():.6f}, the file "
                             f"says accuracy {data['accuracy']}")
    clusters = [doc.get("cluster") if isinstance(doc.get("cluster"), str) else (leaf if len(per_doc) > 1 else None)
                for leaf, doc in records]
    return Problems(tuple(f"{leaf}/{doc['doc_id']}" for leaf, doc in records), correct, None,
                    tuple(clusters) if all(clusters) else None)


def _task_order(names) -> list[str]:
    return [t for t in TASKS if t in set(names)] + sorted(set(names) - set(TASKS))


def _arm_order(objectives) -> list[str]:
    def rank(arm: str) -> tuple:
        objective, seed = _split_arm(arm)
        return seed, ARMS.index(objective) if objective in ARMS else len(ARMS), arm

    return sorted(set(objectives), key=rank)


def _split_arm(arm: str) -> tuple[str, int]:
    """``sbd-s1`` -> (``sbd``, 1): an arm's objective and fine-tune seed (``sbd_core.pipeline.arms``)."""
    match = re.fullmatch(r"(.+?)(?:-s(\d+))?", arm)
    return match.group(1), int(match.group(2) or 0)


def _ntp_arm(arm: str) -> str:
    objective, seed = _split_arm(arm)
    return NTP + (f"-s{seed}" if seed else "")


def table2(scores: pd.DataFrame, settings: StatsSettings = StatsSettings()) -> pd.DataFrame:
    """The numbers: a row per (model, arm), per task ``_pct`` and its interval, lm-eval's ``_stderr_pts``, ``_n``, and
    against the NTP arm of the same model and seed the difference, its interval, p values and words (module doc;
    NaN / empty for that arm or without it)."""
    tasks = _task_order(scores["task"].unique())
    rows, tests = [], []
    for model in sorted(scores["model"].unique()):
        mine = scores[scores["model"] == model].set_index(["objective", "task"])
        for arm in _arm_order(mine.index.get_level_values(0).unique()):
            row = {"model": model, "objective": arm}
            for task in tasks:
                cell = mine.loc[(arm, task)] if (arm, task) in mine.index else None
                base_key = (_ntp_arm(arm), task)
                base = mine.loc[base_key] if base_key in mine.index and base_key[0] != arm else None
                row.update(_cell(task, cell, base, settings))
                if base is not None and cell is not None:
                    tests.append((len(rows), task))
            rows.append(row)
    for kind in ("diff_p", "equiv_p"):
        for (i, task), p in zip(tests, holm([rows[i][f"{task}_{kind}"] for i, task in tests])):
            rows[i][f"{task}_{kind}_holm"] = p
    for i, task in tests:
        row = rows[i]
        row[f"{task}_verdict"] = verdict(row[f"{task}_delta_pts"], row[f"{task}_diff_p_holm"],
                                         row[f"{task}_equiv_p_holm"], settings.alpha)
    return pd.DataFrame(rows)


def _cell(task: str, cell, base, settings: StatsSettings) -> dict:
    """One task's columns of a row (module doc)."""
    names = ["pct", "lo_pct", "hi_pct", "stderr_pts", "delta_pts", "delta_lo_pts", "delta_hi_pts", "diff_p",
             "equiv_p", "diff_p_holm", "equiv_p_holm"]
    out = {f"{task}_{name}": math.nan for name in names} | {f"{task}_verdict": "", f"{task}_n": pd.NA}
    if cell is None:
        return out
    q = cell["questions"]
    lo, hi = wilson_interval(q.correct.sum(), len(q.ids), settings.confidence,
                             design_effect(q.correct[None, :], q.clusters))
    out.update({f"{task}_pct": 100 * cell["accuracy"], f"{task}_lo_pct": 100 * lo, f"{task}_hi_pct": 100 * hi,
                f"{task}_stderr_pts": 100 * cell["stderr"], f"{task}_n": int(cell["n"])})
    if base is None:
        return out
    ref = base["questions"]
    if ref.ids != q.ids:
        raise ScoreFileError(f"likelihood score files {cell['path']} and {base['path']} (its NTP arm) do not hold the "
                             f"same questions ({len(q.ids)} vs {len(ref.ids)}); score both on the same data")
    result = paired_comparison(PairedTable.of(q.correct, ref.correct), settings.margin(task), settings.confidence,
                     design_effect((q.correct - ref.correct)[None, :], ref.clusters))
    out.update({f"{task}_delta_pts": 100 * result.diff, f"{task}_delta_lo_pts": 100 * result.lo,
                f"{task}_delta_hi_pts": 100 * result.hi, f"{task}_diff_p": result.p_diff,
                f"{task}_equiv_p": result.p_equiv})
    return out


def _header(scores: pd.DataFrame, task: str) -> str:
    mine = scores[scores["task"] == task]
    settings = sorted({f"{m}, {k}-shot" for m, k in zip(mine["metric"], mine["num_fewshot"])})
    return f"{mine['column'].iloc[0]} ({'; '.join(settings)})"


def table2_display(scores: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The table as text: ``acc [lo, hi]`` per cell, then ``; <difference to the NTP arm>`` (its verdict cell), a
    dash where a run is missing."""
    rows = []
    for rec in table.to_dict("records"):
        row = {"Model": rec["model"], "Arm": rec["objective"]}
        for task in _task_order(scores["task"].unique()):
            pct = rec[f"{task}_pct"]
            text = number(pct, ".1f", suffix=f" [{rec[f'{task}_lo_pct']:.1f}, {rec[f'{task}_hi_pct']:.1f}]",
                          missing=DASH)
            if not pd.isna(rec[f"{task}_delta_pts"]):
                text += "; " + verdict_cell(*(rec[f"{task}_{k}"] / 100 for k in ("delta_pts", "delta_lo_pts",
                                                                                  "delta_hi_pts")),
                                            rec[f"{task}_diff_p_holm"], rec[f"{task}_equiv_p_holm"],
                                            rec[f"{task}_verdict"])
            row[_header(scores, task)] = text
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


def load_paper_table2(path: str | os.PathLike = DEFAULT_PAPER_TABLE2) -> pd.DataFrame:
    """The paper's Table 2 as shipped ('#' lines skipped): row, objective, then per task its value and printed
    difference."""
    df = pd.read_csv(path, comment="#")
    expected = ["row", "objective"] + [f"{t}{s}" for t in PAPER_TASKS for s in ("", "_delta_pts")]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise ValueError(f"paper table {path}: missing column(s) {missing}")
    return df


def paper_table2_display(paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's table as printed: 'value (difference)'."""
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


def build_table2(paths: Iterable, paper_table: str | os.PathLike | None = DEFAULT_PAPER_TABLE2,
                 stats: StatsSettings = StatsSettings()) -> tuple[dict[str, bytes], str]:
    """``({"table2.csv": ..., "table2.md": ..., "table2.tex": ...}, the markdown section report.md shows)``."""
    scores = load_likelihood_scores(paths)
    table = table2(scores, stats)
    ours = table2_display(scores, table)
    md = [to_markdown(ours)]
    tex = [_latex(ours, "SBD reproduction, Table 2 layout: accuracy % [interval]; difference to NTP, points")]
    paper_md = ""
    if paper_table is not None and Path(paper_table).is_file():
        paper = paper_table2_display(load_paper_table2(paper_table))
        paper_md = "Paper Table 2 (arXiv 2509.04185v1, as printed):\n\n" + to_markdown(paper)
        md.append(paper_md)
        tex.append(_latex(paper, "arXiv 2509.04185v1 Table 2 (as printed)"))
    margins = sorted({f"\u00b1{100 * stats.margin(t):g} pt" for t in scores["task"].unique()})
    tests = int(sum(table[c].notna().sum() for c in table.columns if c.endswith("_diff_p")))
    note = NOTE.format(level=f"{100 * stats.confidence:g}%", margins=", ".join(margins), tests=tests)
    section = "\n".join(["## Table 2 layout: likelihood tasks\n", note + "\n", md[0], paper_md])
    files = dict(zip(TABLE2, (csv_bytes(table), "\n".join(md).encode(), "\n".join(tex).encode())))
    return files, section


@derived
def _table2(ctx: Context) -> tuple[dict[str, bytes], str]:
    return build_table2(ctx.likelihood_paths, stats=ctx.stats)


class Table2(Section):
    """``table2.{csv,md,tex}`` and the Table 2 section (none without likelihood score files)."""

    def files(self, ctx: Context) -> dict[str, bytes]:
        return _table2(ctx)[0] if ctx.likelihood_paths else {}

    def markdown(self, ctx: Context) -> list[str]:
        return [_table2(ctx)[1]] if ctx.likelihood_paths else []
