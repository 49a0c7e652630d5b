"""The paper's Table 1 (loaded, and shown as printed) and our runs beside it, cell by cell, with the difference in
points and in speedup. Which of our runs fills which cell: docs/pipeline.md (beside the paper's Table 1)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd

from ..benchmarks import BENCHMARKS
from ..errors import UserError
from ..samplers import sampler_spec
from . import DEFAULT_PAPER_TABLE
from .render import DASH, csv_bytes, number, text_or_dash, to_latex, to_markdown
from .section import Context, Section, derived
from .seeds import final_runs

logger = logging.getLogger(__package__)

#: Paper Table 1 benchmark columns: (csv prefix, display name).
PAPER_BENCHMARKS = [
    ("math500", "MATH500"), ("aime25", "AIME25"), ("lcbv6", "LCB v6"),
    ("gsm8k", "GSM8K"), ("humaneval_plus", "HE+"), ("mbpp", "MBPP"),
]

#: The paper's gamma per benchmark group and row.
PAPER_GAMMAS = {"reasoning": {"gamma_low": 0.1, "gamma_high": 0.35}, "chat": {"gamma_low": 0.35, "gamma_high": 0.6}}
#: The paper's rows of one base model: (Loss, Sampling, our objective, which gamma or None for NTP sampling).
PAPER_ROWS = (("NTP", "NTP", "ntp", None), ("SBD", "NTP", "sbd", None),
              ("SBD", "SBD (gamma_high)", "sbd", "gamma_high"), ("SBD", "SBD (gamma_low)", "sbd", "gamma_low"))
COMPARISON_COLUMNS = ["model", "paper_base", "loss", "sampling", "benchmark", "paper_column", "sampler",
                      "accuracy_pct", "nfe_speedup", "paper_accuracy_pct", "paper_speedup", "delta_pts",
                      "delta_speedup", "note"]


def paper_sampler(group: str, which: str | None) -> str:
    """Our sampler tag for a paper row: ``ntp``, or the EB-Sampler at the paper's gamma for the benchmark's group."""
    return "ntp" if which is None else sampler_spec("eb", gamma=PAPER_GAMMAS[group][which])["tag"]


def _paper_cells(paper: pd.DataFrame, base: str, loss: str, sampling: str) -> pd.Series | None:
    rows = paper[(paper["base"] == base) & (paper["loss"] == loss) & (paper["sampling"] == sampling)]
    return rows.iloc[0] if len(rows) else None


def _our_cell(summary: pd.DataFrame, model: str, objective: str, sampler: str, benchmark: str):
    rows = summary[(summary["model"] == model) & (summary["objective"] == objective)
                   & (summary["sampler"] == sampler) & (summary["benchmark"] == benchmark)]
    return rows.iloc[0] if len(rows) else None


def compare(summary: pd.DataFrame, paper: pd.DataFrame, bases: dict[str, str]) -> pd.DataFrame:
    """One row per (model, paper row, paper benchmark): our accuracy and NFE speedup, the paper's, the differences;
    UserError when ``bases`` names a base model the paper's table does not have."""
    known = sorted(set(paper["base"]))
    unknown = {model: base for model, base in bases.items() if base not in known}
    if unknown:
        raise UserError(f"paper bases {unknown} name no base model of the paper table; its bases: {known} (config: "
                        "models.<name>.paper_base)")
    paper_benchmarks = [b for b in BENCHMARKS.values() if b.paper_column]
    rows = []
    for model, base in bases.items():
        for loss, sampling, objective, which in PAPER_ROWS:
            printed = _paper_cells(paper, base, loss, sampling)
            for bench in paper_benchmarks:
                sampler = paper_sampler(bench.group, which)
                ours = _our_cell(summary, model, objective, sampler, bench.name)
                acc = float("nan") if ours is None else 100 * ours["accuracy"]
                speed = float("nan") if ours is None else ours["nfe_speedup"]
                p_acc = float("nan") if printed is None else printed[f"{bench.paper_column}_accuracy_pct"]
                p_speed = 1.0 if which is None else (float("nan") if printed is None
                                                      else printed[f"{bench.paper_column}_speedup"])
                note = bench.reason if not bench.available else ("" if ours is not None else f"{sampler} not run")
                rows.append({"model": model, "paper_base": base, "loss": loss, "sampling": sampling,
                             "benchmark": bench.name, "paper_column": bench.paper_column, "sampler": sampler,
                             "accuracy_pct": acc, "nfe_speedup": speed, "paper_accuracy_pct": p_acc,
                             "paper_speedup": p_speed, "delta_pts": acc - p_acc, "delta_speedup": speed - p_speed,
                             "note": note})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def _cell(rec: pd.Series) -> str:
    if pd.isna(rec["accuracy_pct"]):
        return DASH
    return (f"{rec['accuracy_pct']:.1f} ({rec['nfe_speedup']:.2f}x) vs {rec['paper_accuracy_pct']:.1f} "
            f"({rec['paper_speedup']:.2f}x): {rec['delta_pts']:+.1f} pt, {rec['delta_speedup']:+.2f}x")


def comparison_display(long: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """The comparison as a table in the paper's layout: 'ours (x) vs paper (x): delta' per cell, mean speedups."""
    names = dict(PAPER_BENCHMARKS)
    rows = []
    for (model, base, loss, sampling), grp in long.groupby(["model", "paper_base", "loss", "sampling"], sort=False):
        printed = _paper_cells(paper, base, loss, sampling)
        ours_mean = grp["nfe_speedup"].dropna().mean() if grp["nfe_speedup"].notna().any() else float("nan")
        paper_mean = float("nan") if printed is None else printed["mean_speedup"]
        row = {"Model": f"{model} ({base})", "Loss": loss, "Sampling": sampling.replace("gamma_", "\u03b3_"),
               "Speedup (ours vs paper)": number(ours_mean, ".2f", suffix=f"x vs {paper_mean:.1f}x", missing=DASH)}
        for rec in grp.itertuples(index=False):
            row[names[rec.paper_column]] = _cell(pd.Series(rec._asdict()))
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


# ----------------------------------------------------------------------------------------------------------------------
# The paper's table
# ----------------------------------------------------------------------------------------------------------------------


def load_paper_table(path: str | os.PathLike = DEFAULT_PAPER_TABLE) -> pd.DataFrame:
    """Load the paper's Table 1 CSV ('#' comment lines skipped; empty cells become NaN)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"paper table not found: {path}")
    try:
        df = pd.read_csv(path, comment="#")
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise UserError(f"paper table {path}: not a CSV table ({' '.join(str(err).split())})") from None
    expected = ["base", "training", "loss", "sampling", "mean_speedup"]
    expected += [f"{b}_{kind}" for b, _ in PAPER_BENCHMARKS for kind in ("accuracy_pct", "speedup")]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise UserError(f"paper table {path}: missing column(s) {missing}; expected the columns of "
                        f"{DEFAULT_PAPER_TABLE.name} (the paper's Table 1)")
    return df


def paper_table_display(paper: pd.DataFrame) -> pd.DataFrame:
    """Render the paper table as printed: 'acc (speedup x)' cells, accuracy alone where no speedup, DASH when empty."""
    rows = []
    for _, rec in paper.iterrows():
        row = {
            "Base": rec["base"],
            "Training": text_or_dash(rec["training"]),
            "Loss": text_or_dash(rec["loss"]),
            "Sampling": str(rec["sampling"]).replace("gamma_", "\u03b3_"),
            "Speedup": _paper_speedup(rec["mean_speedup"]),
        }
        for prefix, name in PAPER_BENCHMARKS:
            acc, spd = rec[f"{prefix}_accuracy_pct"], rec[f"{prefix}_speedup"]
            if pd.isna(acc):
                row[name] = DASH
            elif pd.isna(spd):
                row[name] = f"{acc:.1f}"
            else:
                row[name] = f"{acc:.1f} ({spd:.2f}x)"
        rows.append(row)
    return pd.DataFrame(rows).astype(str)


def _paper_speedup(value) -> str:
    """Paper 'Speedup' column text: '1x' for baselines, one decimal otherwise ('3.4x'), DASH when empty."""
    if pd.isna(value):
        return DASH
    return "1x" if value == 1.0 else f"{value:.1f}x"


def resolve_paper_table(paper_table) -> Path | None:
    """The paper-table path to use, or None (with a warning) when the default one is absent."""
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


@derived
def paper_table(ctx: Context) -> pd.DataFrame | None:
    """The paper's Table 1 (None without one)."""
    return None if ctx.paper_path is None else load_paper_table(ctx.paper_path)


@derived
def comparison(ctx: Context) -> pd.DataFrame | None:
    """Our runs beside the paper's (:func:`compare`; None without the paper's table or a model standing for one of its
    rows)."""
    paper = paper_table(ctx)
    bases = {m: b for m, b in ctx.paper_bases.items() if m in set(ctx.summary["model"])}
    return compare(final_runs(ctx), paper, bases) if paper is not None and bases else None


class PaperComparison(Section):
    """``paper_comparison.{csv,md}`` and the section beside the paper's Table 1, with the paper's benchmarks not
    run."""

    def files(self, ctx: Context) -> dict[str, bytes]:
        long = comparison(ctx)
        if long is None:
            return {}
        return {"paper_comparison.csv": csv_bytes(long),
                "paper_comparison.md": to_markdown(comparison_display(long, paper_table(ctx))).encode()}

    def markdown(self, ctx: Context) -> list[str]:
        long = comparison(ctx)
        if long is None:
            return []
        return ["## Beside the paper's Table 1 (ours vs paper: difference)\n",
                to_markdown(comparison_display(long, paper_table(ctx))), _unavailable_md()]


class PaperTable(Section):
    """``paper_table1.{md,tex}`` and the paper's Table 1 as printed."""

    def files(self, ctx: Context) -> dict[str, bytes]:
        paper = paper_table(ctx)
        if paper is None:
            return {}
        return {"paper_table1.md": to_markdown(paper_table_display(paper)).encode(),
                "paper_table1.tex": to_latex(paper_table_display(paper),
                                             "arXiv 2509.04185v1 Table 1 (as printed)").encode()}

    def markdown(self, ctx: Context) -> list[str]:
        paper = paper_table(ctx)
        if paper is None:
            return []
        return ["## Paper Table 1 (arXiv 2509.04185v1, as printed)\n", to_markdown(paper_table_display(paper))]


def _unavailable_md() -> str:
    missing = [b for b in BENCHMARKS.values() if b.paper_column and not b.available]
    if not missing:
        return ""
    lines = ["## Benchmarks of the paper not run\n"]
    lines += [f"- {b.name}: {b.reason}" for b in missing]
    return "\n".join(lines) + "\n"
