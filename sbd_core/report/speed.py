"""Wall-clock in the report: the speed stage's files (:mod:`sbd_core.pipeline.speed`, one per model and benchmark) as
the summary's wall speedups with intervals over rounds, the Wall-clock section with the A/A control (the machine's
noise floor), and a rerun's comparison. The columns and how they are measured: docs/speed.md.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..records.speed import read_speed
from ..rounds import NAN_INTERVAL, RoundInterval, interval_text, paired_ratio, ratio_words
from .keys import RUN_KEY, is_baseline
from .render import DASH
from .section import Context, Section, derived
from .tables import benchmark_order

SPEED_COLUMNS = ["wall_speedup_lo", "wall_speedup_hi", "wall_words", "latency_speedup", "latency_speedup_lo",
                 "latency_speedup_hi", "latency_words", "decode_speedup", "decode_speedup_lo", "decode_speedup_hi",
                 "tokens_per_s", "speed_level", "speed_rounds", "speed_problems", "speed_batch"]


def load_speeds(paths) -> list[dict]:
    """The speed stage's files, each checked for the fields the report reads (:mod:`sbd_core.records.speed`)."""
    return [read_speed(path) for path in paths or ()]


def round_times(doc: dict, prefill: bool = False) -> dict[tuple[str, int], list[float]]:
    """``{(row, batch): seconds per round, in round order}`` (``prefill``: with each decode's prefill subtracted)."""
    times: dict = {}
    for run in sorted(doc["runs"], key=lambda r: r["round"]):
        subtract = (run.get("prefill_s") or 0.0) if prefill else 0.0
        times.setdefault((run["row"], run["batch"]), []).append(run["wall_s"] - subtract)
    return times


def batches(doc: dict) -> list[int]:
    """The batch sizes the file measured (1 and the decode batch size)."""
    return sorted({run["batch"] for run in doc["runs"]})


def row_speedups(doc: dict, confidence: float = 0.95) -> dict[str, dict]:
    """``{row name: {"wall": {batch: interval}, "decode": {batch: interval}, "seconds": {batch: median}}}``: each
    row's paired speedups over its reference (module docstring)."""
    walls, decodes = round_times(doc), round_times(doc, prefill=True)
    out = {}
    for row in doc["rows"]:
        name, ref = row["name"], row["reference"]
        out[name] = {kind: {b: paired_ratio(times.get((ref, b), []), times.get((name, b), []), confidence)
                            for b in batches(doc)} for kind, times in (("wall", walls), ("decode", decodes))}
        out[name]["seconds"] = {b: _median(walls.get((name, b), [])) for b in batches(doc)}
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def speed_table(docs: list[dict], confidence: float = 0.95) -> pd.DataFrame:
    """One row per (speed file, row) with the columns of :data:`SPEED_COLUMNS` (and ``wall_speedup``), keyed by
    :data:`.keys.RUN_KEY`; ``control``: the A/A row."""
    rows = []
    for doc in docs:
        speedups, all_batches = row_speedups(doc, confidence), batches(doc)
        big = max(all_batches)
        for row in doc["rows"]:
            wall, latency = speedups[row["name"]]["wall"][big], speedups[row["name"]]["wall"][1]
            decode = speedups[row["name"]]["decode"][1]
            tokens = sum(p["num_tokens"] for p in row["problems"])
            rows.append({**run_of(doc, row), "control": bool(row.get("control")), "name": row["name"],
                         **_interval_columns("wall_speedup", wall), **_interval_columns("latency_speedup", latency),
                         **_interval_columns("decode_speedup", decode),
                         "wall_words": ratio_words(wall), "latency_words": ratio_words(latency),
                         "tokens_per_s": tokens / speedups[row["name"]]["seconds"][big],
                         "speed_level": wall.level, "speed_rounds": wall.rounds,
                         "speed_problems": len(doc.get("problem_ids", [])), "speed_batch": big})
    columns = [*RUN_KEY, "control", "name", "wall_speedup", *SPEED_COLUMNS]
    return pd.DataFrame(rows, columns=columns)


def run_of(doc: dict, row: dict) -> dict:
    """The run (:data:`.keys.RUN_KEY`) a row of a speed file times: the file's model and benchmark, the row's arm and
    sampler."""
    return {k: doc[k] if k in ("model", "benchmark") else row[k] for k in RUN_KEY}


def _interval_columns(name: str, interval: RoundInterval) -> dict:
    return {name: interval.median, f"{name}_lo": interval.lo, f"{name}_hi": interval.hi}


def add_wall_columns(summary: pd.DataFrame, speeds: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with ``wall_speedup`` and :data:`SPEED_COLUMNS` from the speed table (NaN for a run no speed file
    timed)."""
    out = summary.drop(columns=[c for c in ["wall_speedup", *SPEED_COLUMNS] if c in summary])
    if speeds.empty:
        return out.assign(**{c: math.nan for c in ["wall_speedup", *SPEED_COLUMNS]})
    timed = speeds[~speeds["control"].astype(bool)].drop(columns=["control", "name"])
    return out.merge(timed, on=list(RUN_KEY), how="left")


def controls(speeds: pd.DataFrame) -> pd.DataFrame:
    """The A/A rows (one per model and benchmark)."""
    return speeds[speeds["control"].astype(bool)] if len(speeds) else speeds


def floor_line(speeds: pd.DataFrame) -> str:
    """The A/A control in one line: the noise floor every wall-clock claim of the report stands beside."""
    aa = controls(speeds)
    if aa.empty:
        return "No wall-clock was measured (no speed stage in this run): no wall speedup is claimed.\n"
    parts = [f"{r.model} / {r.benchmark}: {_text(r, 'latency_speedup')} at batch 1, {_text(r, 'wall_speedup')} at "
             f"batch {r.speed_batch}" for r in aa.itertuples(index=False)]
    return ("**A/A control** (the NTP arm timed against itself, paired round by round: the noise floor of this "
            f"machine, which a wall speedup must clear to be a difference): {'; '.join(parts)}.\n")


def _text(rec, column: str) -> str:
    interval = RoundInterval(getattr(rec, column), getattr(rec, f"{column}_lo"), getattr(rec, f"{column}_hi"),
                             rec.speed_level, rec.speed_rounds)
    return interval_text(interval)


def wall_markdown(summary: pd.DataFrame, speeds: pd.DataFrame) -> str:
    """The report's wall-clock section: how it was measured, the A/A floor, and every timed run with its words."""
    lines = ["## Wall-clock (the speed stage: paired, repeated, interleaved)\n"]
    if speeds.empty:
        return "\n".join(lines + [floor_line(speeds)])
    first = speeds.iloc[0]
    problems = f"{first.speed_problems} test problem" + ("s" if first.speed_problems != 1 else "")
    lines += [f"Every run decodes the same {problems} at batch 1 and at batch "
              f"{first.speed_batch}, once per round over {first.speed_rounds} rounds, in a fresh random order per round, "
              "alone on the machine; a speedup is the median over rounds of the per-round ratio (the NTP arm's time / "
              f"the run's, same round), its interval the order statistics over rounds ({100 * first.speed_level:.1f}% "
              "coverage, distribution-free). Where an interval includes 1 the run is **no measurable difference** "
              "from the NTP arm.\n", floor_line(speeds),
              "| model | benchmark | run | fine-tune steps | wall x, batch 1 | | wall x, decode batch | | tokens/s |",
              "|---|---|---|---|---|---|---|---|---|"]
    shown = summary.dropna(subset=["wall_speedup"])
    shown = shown[~is_baseline(shown)]  # the reference: its A/A is above
    # a run decoded at several checkpoints (finetune.eval_at_steps) has a row per budget: the steps tell them apart;
    # the tasks in Table 1's order
    order = {name: i for i, name in enumerate(benchmark_order(shown["benchmark"].unique()))}
    shown = shown.sort_values(["model", "benchmark", "train_steps"], kind="stable",
                              key=lambda column: column.map(order) if column.name == "benchmark" else column)
    for r in shown.itertuples(index=False):
        steps = f"{r.train_steps:,}" if r.train_steps > 0 else DASH
        lines.append(f"| {r.model} | {r.benchmark} | {r.label} | {steps} | {_text(r, 'latency_speedup')} | "
                     f"{r.latency_words} | {_text(r, 'wall_speedup')} (batch {r.speed_batch}) | {r.wall_words} | "
                     f"{r.tokens_per_s:.0f} |")
    return "\n".join(lines) + "\n"


@derived
def speeds(ctx: Context) -> pd.DataFrame:
    """The run's speed table (:func:`speed_table`)."""
    return speed_table(list(ctx.speed_docs), ctx.stats.confidence)


@derived
def floor(ctx: Context) -> str:
    """The A/A floor line (:func:`floor_line`) that every section showing wall speedups stands beside."""
    return floor_line(speeds(ctx))


class WallClock(Section):
    """The summary's wall-clock columns and the Wall-clock section."""

    column_names = ("wall_speedup", *SPEED_COLUMNS)

    def columns(self, frame: pd.DataFrame, ctx: Context) -> pd.DataFrame:
        return add_wall_columns(frame, speeds(ctx))

    def markdown(self, ctx: Context) -> list[str]:
        return [wall_markdown(ctx.summary, speeds(ctx))]


# ----------------------------------------------------------------------------------------------------------------------
# A rerun against the first run
# ----------------------------------------------------------------------------------------------------------------------


def compare_reruns(first: Path, second: Path, confidence: float = 0.95) -> tuple[list[str], int, int]:
    """Every speed file under ``second`` against the one of the same model and benchmark under ``first``: per row (the
    references, 1 by construction, left out) and batch size, whether the rerun's median lies inside the first run's
    interval. Returns (lines, inside, compared)."""
    olds = {(d["model"], d["benchmark"]): d for d in load_speeds(sorted(Path(first).rglob("*.json")))}
    news = load_speeds(sorted(Path(second).rglob("*.json")))
    if not olds or not news:
        raise UserError(f"speed-compare: no speed files under {first if not olds else second}")
    lines, inside, compared = [], 0, 0
    for new in news:
        old = olds.get((new["model"], new["benchmark"]))
        if old is None:
            raise UserError(f"speed-compare: {new['path']} has no counterpart ({new['model']}/{new['benchmark']}) "
                            f"under {first}")
        before, after = row_speedups(old, confidence), row_speedups(new, confidence)
        for name in (r["name"] for r in new["rows"] if r["name"] != r["reference"]):
            for batch, again in after[name]["wall"].items():
                was = before.get(name, {}).get("wall", {}).get(batch, NAN_INTERVAL)
                hit = was.includes(again.median)
                inside, compared = inside + hit, compared + 1
                lines.append(f"{new['model']}/{new['benchmark']} {name} batch {batch}: first {interval_text(was)}, "
                             f"rerun {again.median:.2f}x: {'inside' if hit else 'OUTSIDE'}")
    return lines, inside, compared
