"""Benchmark report: score JSON files -> summary CSV, Table-1 style tables, speed/accuracy figures and report.md.

Speedup conventions (SBD_SPEC section 3.2):

* ``nfe_speedup`` is reading (b): total NFE of the NTP baseline run (objective ``ntp``, sampler ``ntp``, same model and
  task) divided by the row's total NFE.  It is NaN (with a logged warning) when the baseline is missing.
* ``tokens_per_forward`` is reading (a): total generated tokens / total NFE of the row itself.
* The Table-1 "mean speedup" column is the arithmetic mean of the per-task speedups, as in the paper.

Usage::

    python -m sbd_core.report --scores-dir results/scores --out results/report
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import re
import struct
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

import pandas as pd

logger = logging.getLogger(__name__)

#: Keys every score file must have (the rest of the schema is optional or derivable).
REQUIRED_KEYS = (
    "model", "objective", "sampler", "task", "accuracy", "n_problems", "total_nfe", "total_tokens", "solver",
)
#: Allowed training objectives.
OBJECTIVES = ("ntp", "sbd")
#: Identity of one score row.
KEY_COLUMNS = ["model", "objective", "sampler", "task"]
#: Preferred order of solver families in tables and figure legends; unknown families follow alphabetically.
FAMILY_ORDER = (
    "ntp", "eb-entropy", "eb-confidence", "eb", "entropy_threshold", "confidence_threshold", "factor", "topk",
)
#: Columns of ``summarize`` output, in order (metric_* columns are appended).
SUMMARY_COLUMNS = [
    "model", "objective", "sampler", "solver_family", "task", "accuracy", "nfe_speedup", "tokens_per_forward",
    "mean_tokens_per_forward", "mean_nfe", "total_nfe", "total_tokens", "wall_time_s", "n_problems", "block_size",
    "solver_name", "solver_params",
]
#: Shown in tables where no value exists (the paper prints an en dash).
DASH = "\u2013"
#: Figure geometry; PNGs come out FIG_SIZE_IN * FIG_DPI pixels.
FIG_SIZE_IN = (6.4, 4.8)
FIG_DPI = 100
#: Default location of the paper's Table 1 (repository checkout layout).
DEFAULT_PAPER_TABLE = Path(__file__).resolve().parent.parent / "results" / "paper" / "table1.csv"
#: Paper Table 1 benchmark columns: (csv prefix, display name).
PAPER_BENCHMARKS = [
    ("math500", "MATH500"), ("aime25", "AIME25"), ("lcbv6", "LCB v6"),
    ("gsm8k", "GSM8K"), ("humaneval_plus", "HE+"), ("mbpp", "MBPP"),
]
SYNTHETIC_NOTE = (
    "Speedups measured on the embedded default (a tiny model on synthetic tasks) are not comparable with the paper's "
    "8B-model numbers; only runs of the paper's models on the paper's benchmarks can be compared with Table 1."
)


class ScoreFileError(ValueError):
    """A score file is missing, unreadable or does not follow the score schema."""


# ----------------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------------


def _read_score(path: Path) -> dict:
    """Read and validate one score JSON file; raise ScoreFileError naming the file on any problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ScoreFileError(f"score file {path}: not found") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScoreFileError(f"score file {path}: cannot parse JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ScoreFileError(f"score file {path}: expected a JSON object, got {type(data).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise ScoreFileError(f"score file {path}: missing required key(s) {missing}")
    _validate_score(path, data)
    return data


def _validate_score(path: Path, data: dict) -> None:
    """Check types and ranges of the fields the report relies on."""
    if data["objective"] not in OBJECTIVES:
        raise ScoreFileError(f"score file {path}: objective must be one of {OBJECTIVES}, got {data['objective']!r}")
    for key in ("model", "sampler", "task"):
        if not isinstance(data[key], str) or not data[key]:
            raise ScoreFileError(f"score file {path}: {key!r} must be a non-empty string")
    acc = data["accuracy"]
    if not isinstance(acc, (int, float)) or isinstance(acc, bool) or not 0.0 <= acc <= 1.0:
        raise ScoreFileError(f"score file {path}: accuracy must be a fraction in [0, 1], got {acc!r}")
    for key in ("total_nfe", "total_tokens", "n_problems"):
        val = data[key]
        if not isinstance(val, (int, float)) or isinstance(val, bool) or val < 0:
            raise ScoreFileError(f"score file {path}: {key!r} must be a non-negative number, got {val!r}")
    if data["total_nfe"] <= 0:
        raise ScoreFileError(f"score file {path}: total_nfe must be positive, got {data['total_nfe']!r}")
    solver = data["solver"]
    if not isinstance(solver, dict) or not isinstance(solver.get("name"), str):
        raise ScoreFileError(f"score file {path}: 'solver' must be an object with a string 'name'")


def _num(value) -> float:
    """Return value as float, or NaN when it is None/missing."""
    return float("nan") if value is None else float(value)


def _score_row(path: Path, data: dict) -> dict:
    """Flatten one validated score dict into a DataFrame row (derived fields filled when absent)."""
    n = data["n_problems"]
    row = {key: data[key] for key in KEY_COLUMNS}
    row.update(
        accuracy=float(data["accuracy"]),
        n_problems=int(n),
        total_nfe=int(data["total_nfe"]),
        total_tokens=int(data["total_tokens"]),
        mean_nfe=_num(data.get("mean_nfe", data["total_nfe"] / n if n else None)),
        tokens_per_forward=_num(data.get("tokens_per_forward", data["total_tokens"] / data["total_nfe"])),
        mean_tokens_per_forward=_num(data.get("mean_tokens_per_forward")),
        wall_time_s=_num(data.get("wall_time_s")),
        block_size=_num(data.get("block_size")),
        solver_name=data["solver"]["name"],
        solver_params=dict(data["solver"].get("params") or {}),
        metrics=dict(data.get("metrics") or {}),
        provenance=data.get("provenance"),
        path=str(path),
    )
    return row


def load_scores(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Load score JSON files into a DataFrame with one row per file.

    Raises ScoreFileError naming the file when one is unreadable or misses required keys, and when two files share
    the same (model, objective, sampler, task).
    """
    rows = [_score_row(Path(p), _read_score(Path(p))) for p in paths]
    if not rows:
        raise ScoreFileError("no score files given")
    df = pd.DataFrame(rows)
    dup = df[df.duplicated(KEY_COLUMNS, keep=False)]
    if not dup.empty:
        groups = dup.groupby(KEY_COLUMNS)["path"].apply(list).tolist()
        raise ScoreFileError(f"duplicate (model, objective, sampler, task) in score files: {groups}")
    return df


# ----------------------------------------------------------------------------------------------------------------------
# Summary
# ----------------------------------------------------------------------------------------------------------------------


def solver_family(sampler: str, solver_name: str, params: dict | None = None) -> str:
    """Name the solver family: 'ntp' for NTP decoding, 'eb-<proxy>' for EB (proxy from params or sampler), else the
    solver name."""
    if solver_name == "ntp" or (sampler == "ntp" and not solver_name):
        return "ntp"
    if solver_name == "eb":
        params = params or {}
        proxy = params.get("proxy") or params.get("error_proxy") or params.get("proxy_name")
        if not proxy:
            match = re.match(r"eb-([a-z]+)", sampler)
            proxy = match.group(1) if match else None
        return f"eb-{proxy}" if proxy else "eb"
    return solver_name


def _is_baseline(df: pd.DataFrame) -> pd.Series:
    """Boolean mask of NTP-baseline rows (objective ntp decoded with sampler ntp)."""
    return (df["objective"] == "ntp") & (df["sampler"] == "ntp")


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, objective, sampler, task) with accuracy (fraction), nfe_speedup and solver_family.

    nfe_speedup = baseline total_nfe / row total_nfe, baseline = (same model, same task, objective ntp, sampler ntp);
    NaN with a logged warning where the baseline is missing.
    """
    out = df.copy()
    out["solver_family"] = [
        solver_family(s, n, p) for s, n, p in zip(out["sampler"], out["solver_name"], out["solver_params"])
    ]
    base = out.loc[_is_baseline(out), ["model", "task", "total_nfe"]].rename(columns={"total_nfe": "_base_nfe"})
    out = out.merge(base, on=["model", "task"], how="left")
    out["nfe_speedup"] = out["_base_nfe"] / out["total_nfe"]
    no_base = out.loc[out["_base_nfe"].isna(), ["model", "task"]].drop_duplicates()
    for model, task in sorted(no_base.itertuples(index=False)):
        logger.warning(
            "no NTP baseline (objective=ntp, sampler=ntp) for model=%r task=%r: nfe_speedup is NaN", model, task
        )
    out["solver_params"] = [json.dumps(p, sort_keys=True) for p in out["solver_params"]]
    metric_names = sorted({k for m in out["metrics"] for k in m})
    for name in metric_names:
        out[f"metric_{name}"] = [_num(m.get(name)) if _is_number(m.get(name)) else float("nan") for m in out["metrics"]]
    cols = SUMMARY_COLUMNS + [f"metric_{n}" for n in metric_names]
    return out[cols].sort_values(KEY_COLUMNS, kind="stable").reset_index(drop=True)


def _is_number(value) -> bool:
    """True for int/float values (not bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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


def _safe_name(task: str) -> str:
    """File-name-safe version of a task name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", task)


def _figure_bytes(summary: pd.DataFrame, task: str) -> dict[str, bytes]:
    """Draw accuracy (%) vs NFE speedup for one task; return {'png': ..., 'pdf': ...} file contents."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    data = summary[summary["task"] == task]
    models = sorted(data["model"].unique())
    multi = len(models) > 1
    fig = Figure(figsize=FIG_SIZE_IN, dpi=FIG_DPI)
    ax = fig.add_subplot(1, 1, 1)
    markers = "osD^vP<>X"
    for model in models:
        sub = data[data["model"] == model]
        prefix = f"{model}: " if multi else ""
        _plot_families(ax, sub, prefix, markers)
        _plot_reference_points(ax, sub, prefix)
    ax.set_xlabel("NFE speedup vs NTP baseline (x)")
    ax.set_ylabel("Accuracy (%)")
    ax.set_title(f"{task}: accuracy vs NFE speedup")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    out = {}
    for fmt in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=FIG_DPI)
        out[fmt] = buf.getvalue()
    return out


def _plot_families(ax, sub: pd.DataFrame, prefix: str, markers: str) -> None:
    """One line+markers curve per non-NTP solver family, points sorted by speedup."""
    fams = sorted(set(sub.loc[sub["sampler"] != "ntp", "solver_family"]), key=_family_rank)
    for f_idx, fam in enumerate(fams):
        pts = sub[(sub["solver_family"] == fam) & (sub["sampler"] != "ntp")].dropna(subset=["nfe_speedup"])
        pts = pts.sort_values("nfe_speedup")
        if pts.empty:
            continue
        ax.plot(pts["nfe_speedup"], 100 * pts["accuracy"], marker=markers[f_idx % len(markers)],
                linestyle="-", label=f"{prefix}SBD model, {fam}")
        for x, y in zip(pts["nfe_speedup"], 100 * pts["accuracy"]):
            ax.annotate(f"{x:.2f}x", (x, y), textcoords="offset points", xytext=(3, 4), fontsize=7)


def _plot_reference_points(ax, sub: pd.DataFrame, prefix: str) -> None:
    """Mark the NTP arm (black star) and the SBD model decoded with NTP sampling (hollow diamond)."""
    ntp = sub[(sub["objective"] == "ntp") & (sub["sampler"] == "ntp")]
    if not ntp.empty:
        ax.plot(ntp["nfe_speedup"].fillna(1.0), 100 * ntp["accuracy"], linestyle="none", marker="*", markersize=14,
                color="black", label=f"{prefix}NTP model")
    sbd_ntp = sub[(sub["objective"] == "sbd") & (sub["sampler"] == "ntp")]
    if not sbd_ntp.empty:
        ax.plot(sbd_ntp["nfe_speedup"].fillna(1.0), 100 * sbd_ntp["accuracy"], linestyle="none", marker="D",
                markersize=9, markerfacecolor="none", markeredgecolor="tab:red", markeredgewidth=1.5,
                label=f"{prefix}SBD model, NTP sampling")


def png_size(data: bytes) -> tuple[int, int]:
    """Return (width, height) of PNG bytes; raise ValueError if they are not a PNG."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    return struct.unpack(">II", data[16:24])


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
        "of the run (SPEC 3.2 reading (b)); `tokens_per_forward` in `summary.csv` is reading (a). "
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


def _atomic_write(path: Path, data: bytes) -> None:
    """Write bytes to path via a temporary file in the same directory and os.replace."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        _atomic_write(out / name, data)
        written.append(out / name)
    return written


# ----------------------------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse command-line arguments."""
    parser = argparse.ArgumentParser(prog="python -m sbd_core.report", description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--scores", nargs="+", type=Path, help="score JSON files")
    src.add_argument("--scores-dir", type=Path, help="directory searched recursively for *.json score files")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--paper-table", type=Path, default=DEFAULT_PAPER_TABLE, help="paper Table 1 CSV")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry: write the report; return 0 on success, 2 on a score/input error."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = _parse_args(argv)
    if args.scores_dir is not None:
        if not args.scores_dir.is_dir():
            print(f"error: --scores-dir {args.scores_dir} is not a directory", file=sys.stderr)
            return 2
        paths = sorted(args.scores_dir.glob("**/*.json"))
        if not paths:
            print(f"error: no *.json files under {args.scores_dir}", file=sys.stderr)
            return 2
    else:
        paths = list(args.scores)
    try:
        written = write_report(paths, args.out, args.paper_table)
    except (ScoreFileError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
