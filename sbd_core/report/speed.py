"""Wall-clock against the roofline: every run's measured speedups beside the paper's eq. 16 from measured time(k).

Per run (a summary row):

* ``latency_speedup``: the NTP arm's decode time / the run's, decoding the same first problems one at a time
  (batch 1, prompts' prefill excluded: what eq. 16 models);
* ``wall_speedup`` and ``tokens_per_s``: the same at the configured batch size (throughput);
* ``forwards_per_block`` (l): the run's forwards / the blocks it decoded;
* ``predicted_speedup``: eq. 16 with the run's own l and the engine's measured step times at batch 1 and the run's
  mean cache length (``python -m sbd_core timing``): ``NFE speedup x l T_ntp(1) / (T_refeed(2k) + (l - 1) T_block(k))``
  (the NTP arm's forwards per token against the run's; for the paper's same-length case this is exactly
  ``k T(1) / (T(2k) + (l - 1) T(k))``). NaN where no time(k) file covers the run (or for peers: no block decoding).
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import pandas as pd

from .. import roofline

logger = logging.getLogger(__package__)

SPEED_COLUMNS = ["latency_speedup", "tokens_per_s", "forwards_per_block", "predicted_speedup"]


def load_timings(paths) -> dict[str, roofline.Timing]:
    """``{model name: time(k)}`` from the timing stage's files (the file's stem names the model)."""
    return {Path(p).stem: roofline.load_timing(p) for p in paths or ()}


def predicted(row, timing: roofline.Timing | None) -> float:
    """Eq. 16 for one summary row at batch 1 (module docstring); NaN when it cannot be read off ``timing``."""
    if timing is None or pd.isna(row["nfe_speedup"]):
        return float("nan")
    if row["mode"] == "ntp":
        return float(row["nfe_speedup"])  # one token per forward on both sides
    if row["mode"] != "sbd" or pd.isna(row["forwards_per_block"]):
        return float("nan")
    k, l_mean = int(row["block_size"]), float(row["forwards_per_block"])
    kv = int(round(row["mean_prompt_tokens"] + row["total_tokens"] / max(row["n_problems"], 1) / 2))
    time_fn = partial(roofline.measured_time, timing)
    refeed = partial(roofline.measured_time, timing, refeed=True) if timing.refeeds else None
    try:
        per_forward = roofline.predicted_speedup(time_fn, k, min(max(l_mean, 1.0), k), 1, kv, refeed) * l_mean / k
    except roofline.RooflineInputError as err:
        logger.warning("no eq. 16 prediction for %s/%s/%s/%s: %s", row["model"], row["objective"], row["sampler"],
                       row["benchmark"], err)
        return float("nan")
    return float(row["nfe_speedup"]) * per_forward


def add_speed_columns(summary: pd.DataFrame, timings: dict[str, roofline.Timing]) -> pd.DataFrame:
    """``summary`` with :data:`SPEED_COLUMNS` filled in (it carries the raw latency and block columns)."""
    out = summary.copy()
    out["tokens_per_s"] = out["total_tokens"] / out["wall_time_s"]
    blocks = out["total_blocks"].where(out["total_blocks"] > 0)
    out["forwards_per_block"] = (out["total_nfe"] / blocks).where(out["mode"] == "sbd")
    out["predicted_speedup"] = [predicted(row, timings.get(row["model"])) for _, row in out.iterrows()]
    return out


def speed_markdown(summary: pd.DataFrame, timings: dict[str, roofline.Timing]) -> str:
    """The report's section: measured against predicted per run, and how the time(k) was measured."""
    rows = summary.dropna(subset=["latency_speedup", "predicted_speedup"])
    lines = ["## Wall-clock against the roofline (eq. 16 from measured time(k))\n"]
    for name, timing in sorted(timings.items()):
        lines.append(f"- {name}: time(k) measured on {timing.device_name} ({timing.device}, {timing.dtype}), median "
                     f"of {timing.repeats} after {timing.warmup} warm-up steps ({timing.path}).")
    if rows.empty:
        lines.append("\nNo run has both a batch-1 latency measurement (`decode.latency_problems`) and a time(k) file.\n")
        return "\n".join(lines) + "\n"
    lines += ["", "| model | objective / sampler | benchmark | NFE x | l | predicted x | latency x | measured / "
              "predicted | throughput x | tokens/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples(index=False):
        ratio = r.latency_speedup / r.predicted_speedup
        lines.append(f"| {r.model} | {r.objective} / {r.sampler} | {r.benchmark} | {r.nfe_speedup:.2f} | "
                     f"{_fmt(r.forwards_per_block)} | {r.predicted_speedup:.2f} | {r.latency_speedup:.2f} | "
                     f"{ratio:.2f} | {_fmt(r.wall_speedup)} | {r.tokens_per_s:.0f} |")
    lines.append("\nlatency x: batch 1, prefill excluded; throughput x: the configured batch size, prefill included; "
                 "l: forwards per block; predicted x: eq. 16 with the run's l and this machine's measured step times.")
    return "\n".join(lines) + "\n"


def _fmt(value) -> str:
    return "-" if pd.isna(value) else f"{value:.2f}"


def speed_figure(summary: pd.DataFrame) -> dict[str, bytes] | None:
    """Measured (batch-1) against predicted speedup, one point per run, with the line y = x and a +-15% band."""
    from .figures import _new_axes, _rendered

    rows = summary.dropna(subset=["latency_speedup", "predicted_speedup"])
    if rows.empty:
        return None
    fig, ax = _new_axes()
    top = max(rows["latency_speedup"].max(), rows["predicted_speedup"].max()) * 1.1
    ax.plot([0, top], [0, top], color="gray", lw=1, label="measured = predicted")
    ax.fill_between([0, top], [0, 0.85 * top], [0, 1.15 * top], color="gray", alpha=0.15, label="within 15%")
    for bench, sub in rows.groupby("benchmark"):
        ax.scatter(sub["predicted_speedup"], sub["latency_speedup"], label=bench)
    ax.set_xlabel("predicted wall speedup, eq. 16 from measured time(k) (x)")
    ax.set_ylabel("measured wall speedup, batch 1 (x)")
    ax.set_title("Wall-clock speedup: measured vs the roofline")
    return _rendered(fig, ax, pd.Series(dtype=float))  # no accuracy axis


def timing_tables(timings: dict[str, roofline.Timing]) -> dict[str, bytes]:
    """Tables 3 and 4 of the paper from each model's measured time(k) (the roofline's measured mode)."""
    files = {}
    for name, timing in sorted(timings.items()):
        for table in (3, 4):
            rows = roofline.build_table(table, timing=timing, block_sizes=_block_sizes(timing))
            if rows:
                files[f"roofline_measured_table{table}_{name}.csv"] = roofline.write_table(rows, table, None).encode()
    return files


def _block_sizes(timing: roofline.Timing) -> list[int]:
    widths = sorted({w for by_width in timing.grids.values() for w in by_width if w > 1})
    return widths or [1]
