"""Wall-clock against the roofline: eq. 16 with the widths each run actually fed, from this machine's measured time(k),
beside the speed stage's measurement on the same problems (the summary's prediction columns, the section, the
measured-vs-predicted figure, Tables 3-4 from time(k)); and the plausibility of time(k) itself. The rule: docs/speed.md
(eq. 16).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pandas as pd

from .. import roofline
from ..rounds import RoundInterval, interval_text, median_interval, paired_ratio
from .figures import new_axes, rendered
from .keys import RUN_KEY
from .outputs import WALL_VS_PREDICTED, figure_files
from .render import figure_links, number
from .section import Context, Section
from .speed import run_of

logger = logging.getLogger(__package__)

PREDICTION_COLUMNS = ["forwards_per_block", "predicted_speedup", "predicted_lo", "predicted_hi", "widths_source"]


def step_time(timing: roofline.Timing, mode: str, block_size: int, width: int, kv_len: int) -> float:
    """Seconds of one batch-1 forward feeding ``width`` tokens: the NTP step (NTP decoding), the re-feed step (SBD,
    2k), or the block step. With a fixed block size only a block's first forward feeds 2k tokens (the re-feed rule,
    docs/engine.md); under verify that same forward also checks the draft (docs/verify.md), priced here as the
    re-feed, without the logits of the k drafted positions it adds."""
    refeed = mode == "sbd" and width == 2 * block_size and bool(timing.refeeds)
    return roofline.measured_time(timing, 1, width, kv_len, refeed=refeed)


def predicted_time(timing: roofline.Timing, row: dict) -> float:
    """A speed-file row's decode time at batch 1 on its problems, predicted from ``timing`` (module docstring)."""
    total = 0.0
    for problem in row["problems"]:
        kv = int(round((problem.get("prompt_tokens") or 0) + problem["num_tokens"] / 2))
        for width, count in problem["widths"].items():
            total += count * step_time(timing, row["mode"], row["block_size"], int(width), kv)
    return total


def speedup_from_widths(timing: roofline.Timing, row: dict, reference: dict,
                        confidence: float = 0.95) -> RoundInterval:
    """The reference's predicted time over the row's, per time(k) round (median and interval over rounds; the file's
    medians, without an interval, for a file measured before rounds); NaN where time(k) does not cover the run."""
    if row["mode"] not in ("ntp", "sbd"):
        return median_interval([])
    views = [timing.at_round(i) for i in range(timing.n_rounds)] or [timing]
    values = []
    for view in views:
        try:
            values.append(predicted_time(view, reference) / predicted_time(view, row))
        except roofline.RooflineInputError as err:
            logger.warning("no eq. 16 prediction for %s of round %d: %s", row["name"], len(values), err)
            return median_interval([])
    interval = median_interval(values, confidence)
    return interval if len(values) > 1 else RoundInterval(values[0], math.nan, math.nan, math.nan, 1)


def prediction_table(docs: list[dict], timings: dict[str, roofline.Timing], confidence: float = 0.95) -> pd.DataFrame:
    """One row per timed (non-control) speed-file row: its predicted speedup with interval and widths source."""
    rows = []
    for doc in docs:
        timing = timings.get(doc["model"])
        by_name = {r["name"]: r for r in doc["rows"]}
        for row in doc["rows"]:
            if row.get("control") or row["name"] == row["reference"]:  # the A/A control; the reference itself
                continue
            interval = (speedup_from_widths(timing, row, by_name[row["reference"]], confidence) if timing is not None
                        else median_interval([]))
            rows.append({**run_of(doc, row), "predicted_speedup": interval.median, "predicted_lo": interval.lo,
                         "predicted_hi": interval.hi, "widths_source": row.get("widths_source", "")})
    return pd.DataFrame(rows, columns=[*RUN_KEY, *PREDICTION_COLUMNS[1:]])


def add_prediction_columns(summary: pd.DataFrame, predictions: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with :data:`PREDICTION_COLUMNS`: eq. 16's l from the scores (forwards per block on the full test
    set) and the predictions on the speed subset."""
    out = summary.drop(columns=[c for c in PREDICTION_COLUMNS if c in summary])
    blocks = out["total_blocks"].where(out["total_blocks"] > 0)
    out["forwards_per_block"] = (out["total_nfe"] / blocks).where(out["mode"] == "sbd")
    if predictions.empty:
        return out.assign(**{c: math.nan for c in PREDICTION_COLUMNS[1:]})
    keys = [c for c in predictions.columns if c not in PREDICTION_COLUMNS]
    return out.merge(predictions, on=keys, how="left")


# ----------------------------------------------------------------------------------------------------------------------
# time(k): plausibility, tables
# ----------------------------------------------------------------------------------------------------------------------


def _fed(step: str, width: int) -> int:
    return 1 if step == "ntp" else width


def implausible_steps(timing: roofline.Timing) -> list[dict]:
    """Pairs of steps (same batch size and cache length) where the one feeding more tokens per row was measured
    faster beyond its interval over rounds: ``{"batch", "kv_len", "narrow", "wide", "ratio"}`` (``ratio``: wide time /
    narrow time, a :class:`RoundInterval` lying below 1). Empty for a file measured before rounds."""
    points: dict = {}
    for (step, batch, width, kv_len), values in timing.rounds.items():
        points.setdefault((batch, kv_len), {})[(step, width)] = values
    flagged = []
    for (batch, kv_len), steps in sorted(points.items()):
        for narrow in sorted(steps, key=lambda s: _fed(*s)):
            for wide in steps:
                if not _comparable(narrow, wide):
                    continue
                ratio = paired_ratio(steps[wide], steps[narrow])
                if ratio.hi < 1.0:
                    flagged.append({"batch": batch, "kv_len": kv_len, "narrow": narrow, "wide": wide, "ratio": ratio})
    return flagged


def _comparable(narrow: tuple[str, int], wide: tuple[str, int]) -> bool:
    """Whether ``wide`` must take at least ``narrow``'s time: it feeds more tokens per row, and a re-feed of 2k (logits
    for k only) is compared with steps of at most k tokens only."""
    if narrow[0] == "refeed" or _fed(*narrow) >= _fed(*wide):
        return False
    return wide[0] != "refeed" or _fed(*narrow) <= wide[1] // 2


def _step_name(step: tuple[str, int]) -> str:
    return {"ntp": "the NTP step", "block": f"a block step of {step[1]}", "refeed": f"a re-feed step of {step[1]}"}[
        step[0]]


def plausibility_lines(name: str, timing: roofline.Timing) -> list[str]:
    """The report's words on one time(k) file."""
    if not timing.rounds:
        return [f"- {name}: time(k) measured before rounds: its plausibility is not checked."]
    flagged = implausible_steps(timing)
    if not flagged:
        return [f"- {name}: no step of time(k) was measured faster than a step feeding fewer tokens, beyond its "
                "interval over rounds."]
    lines = [f"- **{name}: implausible time(k)**: {len(flagged)} pair(s) of steps where the wider was measured faster "
             "beyond its interval (the machine was not quiet, or the steps do not do what their widths say):"]
    lines += [f"  - batch {f['batch']}, {f['kv_len']} cached keys: {_step_name(f['wide'])} / {_step_name(f['narrow'])}"
              f" = {interval_text(f['ratio'])}" for f in flagged[:10]]
    return lines + ([f"  - ... and {len(flagged) - 10} more"] if len(flagged) > 10 else [])


def prediction_markdown(summary: pd.DataFrame, timings: dict[str, roofline.Timing]) -> str:
    """The report's section: each model's time(k) and its plausibility, then measured against predicted per run."""
    lines = ["## Wall-clock against the roofline (eq. 16 from measured time(k))\n"]
    for name, timing in sorted(timings.items()):
        rounds = f"{timing.n_rounds} rounds, each the median of {timing.repeats} calls" if timing.rounds else (
            f"median of {timing.repeats}")
        lines.append(f"- {name}: time(k) measured on {timing.device_name} ({timing.device}, {timing.dtype}), "
                     f"{rounds} after {timing.warmup} warm-up calls ({timing.path}).")
        lines += plausibility_lines(name, timing)
    rows = _measured_and_predicted(summary)
    if rows.empty:
        lines.append("\nNo run has both a speed-stage measurement and an eq. 16 prediction.\n")
        return "\n".join(lines) + "\n"
    derived = sorted(set(rows.loc[rows["widths_source"].str.contains("derived"), "label"]))
    lines += ["", "| model | run | benchmark | NFE x | l | predicted x | measured x | measured / predicted |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows.itertuples(index=False):
        predicted = RoundInterval(r.predicted_speedup, r.predicted_lo, r.predicted_hi, math.nan, 0)
        measured = RoundInterval(r.decode_speedup, r.decode_speedup_lo, r.decode_speedup_hi, math.nan, 0)
        lines.append(f"| {r.model} | {r.label} | {r.benchmark} | {r.nfe_speedup:.2f} | {number(r.forwards_per_block, '.2f')} | "
                     f"{interval_text(predicted)} | {interval_text(measured)} | "
                     f"{r.decode_speedup / r.predicted_speedup:.2f} |")
    lines.append("\nBoth on the speed stage's problems at batch 1, prefill excluded; intervals over rounds (measured: "
                 "the speed stage's, predicted: time(k)'s). l: forwards per block on the whole test set. predicted x: "
                 "eq. 16 with the tokens every forward of the run fed (per problem at its mean cache length).")
    if derived:
        lines.append(f"Widths derived (the generation records carry none: k per forward, 2k in the first forward of "
                     f"every block after the first) for: {', '.join(derived)}.")
    return "\n".join(lines) + "\n"


def prediction_figure(summary: pd.DataFrame) -> dict[str, bytes] | None:
    """Measured (batch 1, prefill excluded) against predicted speedup, one point per run with both intervals as error
    bars, and the line y = x; None without such a run."""
    rows = _measured_and_predicted(summary)
    if rows.empty:
        return None
    fig, ax = new_axes()
    top = max(rows[["decode_speedup", "decode_speedup_hi", "predicted_speedup", "predicted_hi"]].max()) * 1.1
    ax.plot([0, top], [0, top], color="gray", lw=1, label="measured = predicted")
    for bench, sub in rows.groupby("benchmark"):
        xerr = _errors(sub, "predicted_speedup", "predicted_lo", "predicted_hi")
        yerr = _errors(sub, "decode_speedup", "decode_speedup_lo", "decode_speedup_hi")
        ax.errorbar(sub["predicted_speedup"], sub["decode_speedup"], xerr=xerr, yerr=yerr, fmt="o", capsize=3,
                    label=bench)
    ax.set_xlabel("predicted wall speedup, eq. 16 from measured time(k) (x; interval over its rounds)")
    ax.set_ylabel("measured wall speedup, batch 1 (x; interval over rounds)")
    ax.set_title("Wall-clock speedup: measured vs the roofline")
    return rendered(fig, ax, pd.Series(dtype=float))  # no accuracy axis


def _measured_and_predicted(summary: pd.DataFrame) -> pd.DataFrame:
    """The runs with both a speed-stage measurement and an eq. 16 prediction."""
    if "decode_speedup" not in summary:
        return summary[:0]
    return summary.dropna(subset=["decode_speedup", "predicted_speedup"])


def _errors(rows: pd.DataFrame, mid: str, lo: str, hi: str):
    """Error bar lengths below and above (0 where an interval is missing)."""
    return [(rows[mid] - rows[lo]).fillna(0).clip(lower=0), (rows[hi] - rows[mid]).fillna(0).clip(lower=0)]


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


def load_timings(paths) -> dict[str, roofline.Timing]:
    """``{model name: time(k)}`` from the timing stage's files (the file's stem names the model)."""
    return {Path(p).stem: roofline.load_timing(p) for p in paths or ()}


class Prediction(Section):
    """The summary's prediction columns (eq. 16's l on the test set, the predictions on the speed subset), Tables 3-4
    from each model's time(k), the measured-vs-predicted figure and the roofline section."""

    column_names = tuple(PREDICTION_COLUMNS)

    def columns(self, frame: pd.DataFrame, ctx: Context) -> pd.DataFrame:
        return add_prediction_columns(frame, prediction_table(list(ctx.speed_docs), ctx.timings, ctx.stats.confidence))

    def files(self, ctx: Context) -> dict[str, bytes]:
        figure = prediction_figure(ctx.summary) or {}
        return {**timing_tables(ctx.timings), **{f"{WALL_VS_PREDICTED}.{fmt}": data for fmt, data in figure.items()}}

    def markdown(self, ctx: Context) -> list[str]:
        section = prediction_markdown(ctx.summary, ctx.timings)
        if not _measured_and_predicted(ctx.summary).empty:
            section += "\n" + figure_links(figure_files(WALL_VS_PREDICTED)[:1])[0]
        return [section]
