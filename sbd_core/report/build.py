"""Report assembly: the sections in report.md's order (:data:`SECTIONS`), the summary their columns make
(:func:`summarize`), every file rendered in memory (:func:`build_report`), then written atomically
(:func:`write_report`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import pandas as pd

from ..io_utils import write_bytes_atomic
from ..settings import StatsSettings
from . import DEFAULT_PAPER_TABLE
from .curves import PaperFigures
from .differences import Differences
from .figures import Figure1, SpeedupFigures
from .lcb import LiveCodeBench
from .levels import Levels
from .lossless import Lossless, NotLossless
from .outputs import REPORT, SUMMARY
from .overview import Head, Recipe
from .paper import PaperComparison, PaperTable, resolve_paper_table
from .peers import Peers
from .prediction import Prediction, load_timings
from .render import csv_bytes
from .scores import KEY_COLUMNS, SUMMARY_COLUMNS, ScoreFileError, Speedups, is_number, load_scores, number_or_nan
from .section import Context
from .speed import WallClock, load_speeds
from .stats.intervals import PairingError
from .table2 import Table2

#: The report's topics: their columns are added in this order, their parts of report.md follow in this order.
SECTIONS = (Speedups(), Head(), Differences(), Levels(), Peers(), Lossless(), Recipe(), WallClock(), Prediction(),
            PaperComparison(), PaperTable(), Figure1(), SpeedupFigures(), PaperFigures(), LiveCodeBench(), Table2())


def summarize(df: pd.DataFrame, speed_docs: list[dict] = (), timings: dict | None = None,
              stats: StatsSettings = StatsSettings()) -> pd.DataFrame:
    """One row per score file (:data:`.scores.KEY_COLUMNS`) of :func:`.scores.load_scores`'s frame ``df``, with every
    section's columns (speedups, intervals, lossless flags, wall-clock from the speed stage's files ``speed_docs``,
    eq. 16 predictions from ``timings``, ``{model: time(k)}``), the sampler's parameters as columns (``gamma``,
    ``proxy``, ...) and the benchmark's metrics as ``metric_*``; ScoreFileError when a row and its NTP arm do not hold
    the same problems, or a verified run's tokens differ from its arm's NTP decoding."""
    return _summary(Context(df, stats, tuple(speed_docs), timings or {}))


def _summary(ctx: Context) -> pd.DataFrame:
    out = ctx.scores.copy()
    try:
        for section in SECTIONS:
            out = section.columns(out, ctx)
    except (PairingError, NotLossless) as err:
        raise ScoreFileError(str(err)) from None
    param_names = sorted({k for p in out["params"] for k in p})
    for name in param_names:
        out[name] = [p.get(name) for p in out["params"]]
    metric_names = sorted({k for m in out["metrics"] for k in m if is_number(m[k])})
    for name in metric_names:
        out[f"metric_{name}"] = [number_or_nan(m.get(name)) if is_number(m.get(name)) else float("nan")
                                 for m in out["metrics"]]
    sections = [c for section in SECTIONS for c in section.column_names if c not in SUMMARY_COLUMNS]
    cols = SUMMARY_COLUMNS + sections + param_names + [f"metric_{n}" for n in metric_names]
    return out[cols].sort_values(KEY_COLUMNS, kind="stable").reset_index(drop=True)


def build_report(score_paths: Sequence, paper_table=DEFAULT_PAPER_TABLE,
                 paper_bases: dict[str, str] | None = None, timing_paths: Sequence = (),
                 likelihood_paths: Sequence = (), stats: StatsSettings = StatsSettings(),
                 speed_paths: Sequence = ()) -> dict[str, bytes]:
    """Compute every report file in memory: {file name: contents}. Nothing is written.

    ``paper_bases`` maps our model names to the paper's base-model rows (``{"llama-3.1-8b": "Llama-3.1 8B"}``); with
    it, ``paper_comparison.{csv,md}`` put our runs beside the published Table 1, cell by cell. ``timing_paths``: the
    timing stage's time(k) files (``<model>.json``), for the eq. 16 predictions and the measured Tables 3-4;
    ``speed_paths``: the speed stage's files (wall-clock: :mod:`.speed`). ``likelihood_paths`` (the likelihood stage's
    score files) add ``table2.{csv,md,tex}`` and a Table 2 section (:mod:`.table2`). ``stats``: the confidence,
    equivalence margins and resamples (the config's ``report.stats``).
    """
    timings = load_timings(timing_paths)
    speed_docs = tuple(load_speeds(speed_paths))
    ctx = Context(load_scores(score_paths), stats, speed_docs, timings, tuple(likelihood_paths),
                  paper_bases=dict(paper_bases or {}))
    ctx = replace(ctx, summary=_summary(ctx), paper_path=resolve_paper_table(paper_table))
    files = {SUMMARY: csv_bytes(ctx.summary)}
    for section in SECTIONS:
        files.update(section.files(ctx))
    files[REPORT] = "\n".join(part for section in SECTIONS for part in section.markdown(ctx)).encode()
    return files


def write_report(score_paths: Sequence, out_dir, paper_table=DEFAULT_PAPER_TABLE,
                 paper_bases: dict[str, str] | None = None, timing_paths: Sequence = (),
                 likelihood_paths: Sequence = (), stats: StatsSettings = StatsSettings(),
                 speed_paths: Sequence = ()) -> list[Path]:
    """Build the full report and write it into out_dir; return the paths written.

    Everything is rendered in memory first, then each file is written atomically (temp file + os.replace), so a
    failure leaves no half-written output. ``paper_table=None`` skips the paper_table1.* files.
    """
    files = build_report(score_paths, paper_table, paper_bases, timing_paths, likelihood_paths, stats, speed_paths)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in files.items():
        write_bytes_atomic(data, out / name)
        written.append(out / name)
    return written
