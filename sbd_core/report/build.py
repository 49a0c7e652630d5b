"""Report assembly: all files rendered in memory (``build_report``), then written atomically (``write_report``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import pandas as pd

from ..io_utils import write_bytes_atomic
from ..settings import StatsSettings
from . import DEFAULT_PAPER_TABLE, FIGURE1_BENCHMARK, figure1_stem
from .curves import figure_bytes, sbd_families
from .differences import ONE_SEED, statistics_md
from .figures import _figure_bytes, _safe_name, figure1_bytes
from .lcb import lcb_markdown
from .lossless import lossless_markdown
from .paper import compare, comparison_display
from .peers import peers_markdown
from .plan import planned_figures
from .prediction import load_timings, prediction_figure, prediction_markdown, timing_tables
from .scores import load_scores, summarize
from .seeds import final_budget, seed_means
from .speed import floor_line, load_speeds, speed_table, wall_markdown
from .table2 import build_table2
from .tables import _table1_display, load_paper_table, paper_table_display, table1, to_latex, to_markdown

logger = logging.getLogger(__package__)  # "sbd_core.report": one logger for the whole package

#: Shown at the top of report.md when the run has no model standing for a row of the paper's table.
SYNTHETIC_NOTE = (
    "Speedups measured on the embedded default (a tiny model on synthetic tasks) are not comparable with the paper's "
    "8B-model numbers; only runs of the paper's models on the paper's benchmarks can be compared with Table 1."
)
DEFINITIONS = (
    "Cells read `accuracy % [{level} interval] (NFE speedup x [interval], wall wall-clock speedup x [interval])`: "
    "Wilson score intervals of the accuracy (problems of one family counted through a design effect), bootstrap "
    "intervals of the NFE speedups (see Differences to the NTP arm), intervals of the wall speedups over the speed "
    "stage's rounds (see Wall-clock). **NFE speedup** = forward passes of the NTP "
    "arm (NTP-trained model, NTP decoding, same model and benchmark) / forward passes of the row: the paper's "
    "measure. **Wall speedup** = the NTP arm's decode time / the row's, measured by the speed stage on a subset of "
    "the test problems at the decode batch size, alone on the machine: the median over rounds of the per-round "
    "paired ratio, its interval over rounds, beside the A/A control (see Wall-clock): what the NFE reduction buys "
    "on the hardware of this run. The mean NFE speedup is the arithmetic mean over benchmarks, as the paper's "
    "Speedup column. **Peers** (NTP / HF generate, NTP / prompt lookup (k)): training-free decoding of the NTP arm "
    "with Hugging Face `generate`, greedy, to show what SBD buys over a free speedup; their NFE counts every forward "
    "of `generate` (its first also prefills the prompt), so HF generate costs the NTP arm's NFE for the same tokens; "
    "a prompt-lookup forward verifies up to k draft tokens copied from the text, and its tokens per forward are 1 + "
    "the drafts accepted per forward. Prompt lookup decodes one problem at a time (transformers supports batch 1 "
    "only; `batch_size` 1 in summary.csv), so its wall speedup sets batch 1 against the NTP arm's batch. "
    "Machine-readable: [summary.csv](summary.csv) (one row per run, sampler parameters as columns), "
    "[table1.csv](table1.csv)."
)


def _recipe_md(summary: pd.DataFrame) -> str:
    """Which departures from the paper's training recipe each arm was trained with."""
    arms = summary[["model", "objective", "departures"]].drop_duplicates()
    lines = ["## Training recipe\n", "Departures from the paper's recipe, per arm (none: the paper's recipe):\n"]
    lines += [f"- {r.model} / {r.objective}: {r.departures or 'none'}" for r in arms.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def _unavailable_md() -> str:
    from ..benchmarks import BENCHMARKS

    missing = [b for b in BENCHMARKS.values() if b.paper_column and not b.available]
    if not missing:
        return ""
    lines = ["## Benchmarks of the paper not run\n"]
    lines += [f"- {b.name}: {b.reason}" for b in missing]
    return "\n".join(lines) + "\n"


def _report_md(summary: pd.DataFrame, table_md: str, comparison_md: str | None, paper_md: str | None,
               figures: list[str], figure1: list[str], paper_figures: list[str], speed_md: str = "",
               peers_md: str = "", stats: StatsSettings = StatsSettings(), lossless_md: str = "",
               floor_md: str = "") -> str:
    """Assemble report.md."""
    models = ", ".join(sorted(summary["model"].unique()))
    benchmarks = ", ".join(f"{bench} ({', '.join(sorted(rows['split'].unique()))} split)"
                           for bench, rows in summary.groupby("benchmark"))
    parts = ["# SBD benchmark report\n", f"{len(summary)} score files; models: {models}; benchmarks: {benchmarks}.\n"]
    if comparison_md is None:
        parts.append(f"> **Note.** {SYNTHETIC_NOTE}\n")
    parts += [DEFINITIONS.format(level=f"{100 * stats.confidence:g}%") + "\n", "## Reproduction (Table 1 layout)\n",
              table_md, floor_md, f"_{_seeds_note(summary)}_\n", statistics_md(summary, stats), peers_md, lossless_md,
              _recipe_md(summary), speed_md]
    if comparison_md is not None:
        parts += ["## Beside the paper's Table 1 (ours vs paper: difference)\n", comparison_md, _unavailable_md()]
    if paper_md is not None:
        parts += ["## Paper Table 1 (arXiv 2509.04185v1, as printed)\n", paper_md]
    if figure1:
        parts.append(f"## Figure 1: {FIGURE1_BENCHMARK} pass@1 against NFE speedup (SBD over gamma, NTP at 1x)\n")
        parts += _figure_links(figure1)
    parts.append("## Figures: accuracy vs NFE speedup\n")
    parts += _figure_links(figures)
    if paper_figures:
        parts.append("## Figures 5, 12, 13: accuracy vs mean NFE across training budgets and solvers\n")
        parts += _figure_links([f"{stem}.png" for stem in paper_figures])
    return "\n".join(parts)


def _seeds_note(summary: pd.DataFrame) -> str:
    """What Table 1's numbers cover: one fine-tune seed, or how the seeds are summed up."""
    seeds = final_budget(summary)["train_seed"].nunique()
    if seeds == 1:
        return ONE_SEED[0].upper() + ONE_SEED[1:] + "."
    return (f"{seeds} fine-tune seeds: a row per seed, then the mean \u00b1 sample sd over seeds with the accuracy's "
            "interval over seeds and problems.")


def _figure_links(names: list[str]) -> list[str]:
    return [f"![{name[:-4]}]({name})\n\n[{name[:-4]}.pdf]({name[:-4]}.pdf)\n" for name in names]


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
    speed_docs = load_speeds(speed_paths)
    speeds = speed_table(speed_docs, stats.confidence)
    scores = load_scores(score_paths)
    summary = summarize(scores, speed_docs, timings, stats)
    final = seed_means(final_budget(summary))  # one row per run of the final budgets: the paper's view
    table = table1(summary)
    disp = _table1_display(table)
    files: dict[str, bytes] = {
        "summary.csv": _csv_bytes(summary),
        "table1.csv": _csv_bytes(table),
        "table1.md": to_markdown(disp).encode(),
        "table1.tex": to_latex(disp, f"SBD reproduction: accuracy % [{100 * stats.confidence:g}% interval] (NFE "
                               f"speedup x [interval], wall-clock speedup x [interval]). {_seeds_note(summary)}"
                               ).encode(),
    }
    paper_md = comparison_md = None
    paper_path = _resolve_paper_table(paper_table)
    if paper_path is not None:
        paper = load_paper_table(paper_path)
        paper_md = to_markdown(paper_table_display(paper))
        files["paper_table1.md"] = paper_md.encode()
        files["paper_table1.tex"] = to_latex(paper_table_display(paper), "arXiv 2509.04185v1 Table 1 (as printed)").encode()
        bases = {m: b for m, b in (paper_bases or {}).items() if m in set(summary["model"])}
        if bases:
            long = compare(final, paper, bases)
            comparison_md = to_markdown(comparison_display(long, paper))
            files["paper_comparison.csv"] = _csv_bytes(long)
            files["paper_comparison.md"] = comparison_md.encode()
    figures = []
    for bench in sorted(summary["benchmark"].unique()):
        stem = f"speedup_{_safe_name(bench)}"
        for fmt, data in _figure_bytes(final, bench).items():
            files[f"{stem}.{fmt}"] = data
        figures.append(f"{stem}.png")
    figure1 = []
    for model in sorted(final.loc[final["benchmark"] == FIGURE1_BENCHMARK, "model"].unique()):
        for fmt, data in figure1_bytes(final, model, FIGURE1_BENCHMARK).items():
            files[f"{figure1_stem(model)}.{fmt}"] = data
        figure1.append(f"{figure1_stem(model)}.png")
    paper_figures = planned_figures(sbd_families(summary))
    for stem in paper_figures:
        for fmt, data in figure_bytes(summary, stem).items():
            files[f"{stem}.{fmt}"] = data
    files.update(timing_tables(timings))
    speed_png = prediction_figure(summary)
    if speed_png is not None:
        files.update({f"wall_vs_predicted.{fmt}": data for fmt, data in speed_png.items()})
    speed_md = wall_markdown(summary, speeds) + "\n" + prediction_markdown(summary, timings) + (
        "\n" + _figure_links(["wall_vs_predicted.png"])[0] if speed_png is not None else "")
    lossless_md = lossless_markdown(final_budget(summary))
    if lossless_md:  # its wall speedups, beside the A/A floor
        lossless_md += "\n" + floor_line(speeds)
    report_md = _report_md(summary, to_markdown(disp), comparison_md, paper_md, figures, figure1, paper_figures,
                           speed_md, peers_markdown(final, speeds), stats, lossless_md, floor_line(speeds))
    lcb_md = lcb_markdown(scores)
    if lcb_md:
        report_md += "\n" + lcb_md
    if likelihood_paths:
        table2_files, table2_md = build_table2(likelihood_paths, stats=stats)
        files.update(table2_files)
        report_md += "\n" + table2_md
    files["report.md"] = report_md.encode()
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
