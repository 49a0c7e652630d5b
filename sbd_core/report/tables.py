"""Tables: the Table-1 style view of a summary, the paper's Table 1, and markdown / LaTeX rendering."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from . import DEFAULT_PAPER_TABLE

#: Preferred order of solver families in tables and figure legends; unknown families follow alphabetically.
FAMILY_ORDER = (
    "ntp", "eb-entropy", "eb-confidence", "eb", "entropy_threshold", "confidence_threshold", "factor", "topk",
)
#: Shown in tables where no value exists (the paper prints an en dash).
DASH = "\u2013"
#: Paper Table 1 benchmark columns: (csv prefix, display name).
PAPER_BENCHMARKS = [
    ("math500", "MATH500"), ("aime25", "AIME25"), ("lcbv6", "LCB v6"),
    ("gsm8k", "GSM8K"), ("humaneval_plus", "HE+"), ("mbpp", "MBPP"),
]


# ----------------------------------------------------------------------------------------------------------------------
# Table 1
# ----------------------------------------------------------------------------------------------------------------------


def format_cell(accuracy: float, speedup: float) -> str:
    """Format 'accuracy % (speedup x)', e.g. '84.0 (2.34x)'; accuracy is a fraction; DASH if accuracy is missing."""
    if pd.isna(accuracy):
        return DASH
    spd = "n/a" if pd.isna(speedup) else f"{speedup:.2f}x"
    return f"{100 * accuracy:.1f} ({spd})"


def _family_rank(family: str) -> tuple:
    """Sort key placing known families in FAMILY_ORDER, unknown ones after, alphabetically."""
    return (FAMILY_ORDER.index(family), "") if family in FAMILY_ORDER else (len(FAMILY_ORDER), family)


def _arm_rank(objective: str, sampler: str) -> int:
    """0: NTP baseline, 1: other NTP-model rows, 2: SBD model with NTP sampling, 3: everything else."""
    if objective == "ntp":
        return 0 if sampler == "ntp" else 1
    return 2 if sampler == "ntp" else 3


def table1(summary: pd.DataFrame) -> pd.DataFrame:
    """Table-1 style view: rows (model, objective, sampler), one 'acc (speedup x)' column per task, 'mean speedup'.

    'mean speedup' is the arithmetic mean of the row's per-task speedups (tasks without a speedup are skipped).
    Rows: per model, the NTP arm first, then SBD with NTP sampling, then by solver family and increasing mean speedup.
    """
    tasks = sorted(summary["task"].unique())
    rows = []
    for (model, objective, sampler), grp in summary.groupby(["model", "objective", "sampler"], sort=False):
        by_task = grp.set_index("task")
        row = {"model": model, "objective": objective, "sampler": sampler,
               "solver_family": grp["solver_family"].iloc[0]}
        speedups = by_task["nfe_speedup"].dropna()
        row["mean speedup"] = float(speedups.mean()) if len(speedups) else float("nan")
        for task in tasks:
            if task in by_task.index:
                row[task] = format_cell(by_task.at[task, "accuracy"], by_task.at[task, "nfe_speedup"])
            else:
                row[task] = DASH
        rows.append(row)
    table = pd.DataFrame(rows, columns=["model", "objective", "sampler", "solver_family", "mean speedup"] + tasks)
    order = sorted(
        range(len(table)),
        key=lambda i: (
            table.at[i, "model"],
            _arm_rank(table.at[i, "objective"], table.at[i, "sampler"]),
            _family_rank(table.at[i, "solver_family"]),
            _nan_last(table.at[i, "mean speedup"]),
            table.at[i, "sampler"],
        ),
    )
    return table.iloc[order].reset_index(drop=True)


def _nan_last(value: float) -> float:
    """Sort key mapping NaN to +inf."""
    return math.inf if value is None or math.isnan(value) else value


def _table1_display(table: pd.DataFrame) -> pd.DataFrame:
    """Format the 'mean speedup' column as text ('2.34x') for the md/tex renderings."""
    disp = table.copy()
    disp["mean speedup"] = [DASH if math.isnan(v) else f"{v:.2f}x" for v in table["mean speedup"]]
    return disp.astype(str)


# ----------------------------------------------------------------------------------------------------------------------
# Paper table
# ----------------------------------------------------------------------------------------------------------------------


def load_paper_table(path: str | os.PathLike = DEFAULT_PAPER_TABLE) -> pd.DataFrame:
    """Load the paper's Table 1 CSV ('#' comment lines skipped; empty cells become NaN)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"paper table not found: {path}")
    df = pd.read_csv(path, comment="#")
    expected = ["base", "training", "loss", "sampling", "mean_speedup"]
    expected += [f"{b}_{kind}" for b, _ in PAPER_BENCHMARKS for kind in ("accuracy_pct", "speedup")]
    missing = [c for c in expected if c not in df.columns]
    if missing:
        raise ValueError(f"paper table {path}: missing column(s) {missing}")
    return df


def paper_table_display(paper: pd.DataFrame) -> pd.DataFrame:
    """Render the paper table as printed: 'acc (speedup x)' cells, accuracy alone where no speedup, DASH when empty."""
    rows = []
    for _, rec in paper.iterrows():
        row = {
            "Base": rec["base"],
            "Training": _text_or_dash(rec["training"]),
            "Loss": _text_or_dash(rec["loss"]),
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


def _text_or_dash(value) -> str:
    """String value, or DASH for NaN/empty."""
    return DASH if pd.isna(value) or str(value).strip() == "" else str(value)


# ----------------------------------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------------------------------


def to_markdown(df: pd.DataFrame) -> str:
    """Render a DataFrame as a GitHub-flavoured markdown table (no index; '|' escaped)."""
    def cell(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in rec) + " |" for rec in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", DASH: "--", "\u03b3": r"$\gamma$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters (and map the en dash / gamma to LaTeX)."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def to_latex(df: pd.DataFrame, caption: str | None = None) -> str:
    """Render a DataFrame as a plain LaTeX tabular (no booktabs), all cells escaped."""
    spec = "l" * len(df.columns)
    lines = []
    if caption:
        lines.append(f"% {latex_escape(caption)}")
    lines += [f"\\begin{{tabular}}{{{spec}}}", "\\hline"]
    lines.append(" & ".join(latex_escape(c) for c in df.columns) + r" \\")
    lines.append("\\hline")
    lines += [" & ".join(latex_escape(v) for v in rec) + r" \\" for rec in df.itertuples(index=False)]
    lines += ["\\hline", "\\end{tabular}"]
    return "\n".join(lines) + "\n"
