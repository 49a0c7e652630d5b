"""The speed stage: wall-clock of every decode row of one (model, benchmark), measured as a paired, repeated,
interleaved experiment (``python -m sbd_core speed``; the DAG runs it alone on the machine).

Rows: every (arm, sampler) the decode stage ran for this model and benchmark, plus an **A/A control**: the NTP arm's
NTP decoding a second time, as a row of its own (``<arm>/ntp (A/A)``), whose speedup over the NTP arm measures nothing
but the machine's noise. Each arm's model is loaded once; its decoders (one per sampler and batch size; the SBD arm
serves all its samplers) share it.

Protocol (:mod:`sbd_core.rounds`): a fixed subset of the test problems (``speed.problems``, a seeded sample, the same
for every row) is decoded by every row at batch 1 and at the decode batch size (``decode.batch_size``); first
``speed.warmup`` untimed decodes of each (row, batch size), then ``speed.rounds`` rounds, each (row, batch size) once
per round, in a fresh random order per round (seed ``speed.seed``; every order is written to the file). A decode is
timed from a device synchronisation before it to one after it (``torch.cuda.synchronize`` on a GPU: every kernel of
the decode counted, none of the one before), with Python's garbage collector paused during it.

Guard: every timed decode's tokens must be the decode job's tokens for the same problems (same decoder and settings):
a mismatch is an error naming the row, the batch size and the problem, so what is timed is what is scored. Sampling
rows (temperature > 0) draw other tokens by design; they are timed unchecked, and the file says so.

The file: ``kind: sbd_speed``; the subset's problem ids; per row its identity (arm, objective, fine-tune seed and
steps, sampler), its ``reference`` (the NTP arm of the same seed and budget), and per problem the cost the decode job
recorded (prompt tokens, tokens, forwards, and the tokens fed per forward: the record's ``widths``, or derived where
it has none, ``widths_source``); ``runs``: every timed decode (round, position in the round, row, batch size, wall
and prefill seconds); its format is :mod:`sbd_core.records.speed`'s. The report (:mod:`sbd_core.report.speed`) turns
them into speedups with intervals.
"""

from __future__ import annotations

import gc
import logging
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from .. import checkpoint
from ..benchmarks import ID_KEY, get_benchmark
from ..errors import UserError
from ..provenance import provenance
from ..records.generations import forward_widths, read_records
from ..records.speed import speed_document, speed_problem, speed_row, timed_run, write_speed
from ..report.keys import is_baseline
from ..rounds import round_orders
from ..samplers import checked_sampler
from ..settings import RuntimeSettings, SpeedSettings, from_section
from ..timing import device_name, synchronize
from .decode import checked_decoder, decode_config, decode_options

log = logging.getLogger("sbd_core")

CONTROL_SUFFIX = " (A/A)"
ROW_KEYS = ("arm", "model", "objective", "train_seed", "train_steps", "sampler", "sampler_spec", "generations")


class TokenMismatch(UserError):
    """A timed decode wrote other tokens than the decode job did for the same problem."""


@dataclass(frozen=True)
class Row:
    """One timed row: an (arm, sampler) of the decode stage, or the A/A control (``control``)."""

    arm: str
    model: Path
    objective: str
    train_seed: int
    train_steps: int
    sampler: str
    spec: dict
    generations: Path
    control: bool = False

    @property
    def name(self) -> str:
        return f"{self.arm}/{self.sampler}" + (CONTROL_SUFFIX if self.control else "")

    @property
    def is_baseline(self) -> bool:
        return bool(is_baseline({"objective": self.objective, "sampler": self.sampler}))

    @property
    def sampling(self) -> bool:
        return float(self.spec["params"].get("temperature", 0) or 0) > 0


def plan_rows(entries: list[dict]) -> list[Row]:
    """The rows of the ``--rows`` argument (one entry per decode run, :data:`ROW_KEYS`), checked (each has its
    reference), with the A/A control (the first NTP arm's NTP decoding again) last; UserError naming the entry
    otherwise."""
    if not isinstance(entries, list) or not entries:
        raise UserError("speed: --rows must be a non-empty list of decode runs")
    rows = []
    for i, entry in enumerate(entries):
        missing = [k for k in ROW_KEYS if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise UserError(f"speed: --rows[{i}] lacks {missing} (each entry needs {list(ROW_KEYS)})")
        rows.append(Row(entry["arm"], Path(entry["model"]), entry["objective"], int(entry["train_seed"]),
                        int(entry["train_steps"]), entry["sampler"], checked_sampler(entry["sampler_spec"]),
                        Path(entry["generations"])))
    baselines = [r for r in rows if r.is_baseline]
    if not baselines:
        raise UserError("speed: --rows has no NTP arm decoded with ntp (the reference of every speedup)")
    names = [r.name for r in rows]
    if len(set(names)) != len(names):
        raise UserError(f"speed: --rows repeats a run: {sorted(n for n in names if names.count(n) > 1)}")
    rows.append(replace(baselines[0], control=True))
    for row in rows:
        reference_of(row, rows)
    return rows


def reference_of(row: Row, rows: list[Row]) -> str:
    """The name of the row a row's speedup is measured against: the NTP arm of its fine-tune seed and budget (the
    A/A control: the NTP arm it repeats)."""
    for other in rows:
        if other.is_baseline and not other.control and (other.train_seed, other.train_steps) == (
                row.train_seed, row.train_steps):
            return other.name
    raise UserError(f"speed: row {row.name} has no NTP arm of fine-tune seed {row.train_seed} after "
                    f"{row.train_steps} steps in --rows")


def subset(problems: list[dict], size: int, seed: int) -> list[dict]:
    """A seeded sample of ``size`` problems (all when there are fewer), in the test file's order."""
    keep = sorted(random.Random(seed).sample(range(len(problems)), min(size, len(problems))))
    return [problems[i] for i in keep]


def _scored(row: Row, ids: list[str]) -> dict[str, dict]:
    """The decode job's records of the subset's problems, by id; UserError naming the file when one is missing."""
    records = {str(r["id"]): r for r in read_records(row.generations)}
    missing = [i for i in ids if i not in records]
    if missing:
        raise UserError(f"speed: {row.generations} (row {row.name}) has no generation of problem(s) {missing[:5]}; "
                        "decode the same test file")
    return {i: records[i] for i in ids}


def check_tokens(row: Row, batch: int, ids: list[str], generations, scored: dict[str, dict]) -> None:
    """TokenMismatch naming the row, the batch size and the first problem whose tokens differ from the decode job's."""
    for pid, gen in zip(ids, generations):
        expected = scored[pid]["token_ids"]
        if gen.token_ids != expected:
            at = next((i for i, (a, b) in enumerate(zip(gen.token_ids, expected)) if a != b),
                      min(len(gen.token_ids), len(expected)))
            raise TokenMismatch(f"speed: row {row.name} at batch {batch} decoded other tokens than its decode job "
                                f"({row.generations}) for problem {pid}: first difference at token {at} "
                                f"({len(gen.token_ids)} vs {len(expected)} tokens); the timed computation must be the "
                                "scored one (same decoder, settings and device)")


def timed_decode(decoder, prompts: list[str], device: str) -> tuple[list, float]:
    """One decode of ``prompts`` and its wall seconds, between two device synchronisations, Python's garbage collector
    paused (its collections run between decodes; a full collection before each would cost more than a tiny decode)."""
    gc.disable()
    try:
        synchronize(device)
        start = time.perf_counter()
        generations = decoder.generate(prompts)
        synchronize(device)
        return generations, time.perf_counter() - start
    finally:
        gc.enable()


def _row_record(row: Row, rows: list[Row], scored: dict[str, dict], block_size: int, batch: int) -> dict:
    mode = row.spec["mode"]
    problems, sources = [], set()
    for pid, record in scored.items():
        widths, source = forward_widths(record, block_size, mode)
        sources.add(source)
        problems.append(speed_problem(pid, record, widths))
    return speed_row(name=row.name, arm=row.arm, objective=row.objective, train_seed=row.train_seed,
                     train_steps=row.train_steps, sampler=row.sampler, mode=mode, sampler_spec=row.spec,
                     control=row.control, reference=reference_of(row, rows), block_size=block_size, batch_size=batch,
                     checked=not row.sampling, generations=str(row.generations),
                     widths_source="/".join(sorted(sources)), problems=problems)


def run_speed(entries: list[dict], model_name: str, benchmark: str, benchmark_settings: dict | None, test_file: Path,
              decode_spec: dict, speed_spec: dict | None, out: Path, runtime: RuntimeSettings = RuntimeSettings(),
              progress: bool = True) -> dict:
    """Time every row (module docstring) and write the speed file; returns its contents."""
    speed = from_section(SpeedSettings, speed_spec, "speed")
    rows = plan_rows(entries)
    bench = get_benchmark(benchmark)
    settings = bench.settings(benchmark_settings)
    problems = subset(bench.load(test_file), speed.problems, speed.seed)
    ids = [str(p[ID_KEY]) for p in problems]
    options = decode_options(decode_spec)
    scored = {row.name: _scored(row, ids) for row in rows}
    loaded = {}
    for row in rows:  # each arm's model once
        if row.model not in loaded:
            loaded[row.model] = checkpoint.load(row.model, runtime.device, runtime.dtype)
    units, configs = {}, {}
    for row in rows:
        model, tokenizer = loaded[row.model]
        prompts = [bench.prompt(p, tokenizer, settings) for p in problems]
        configs[row.name] = decode_config(bench, settings, row.spec, options, prompts, tokenizer)
        for batch in sorted({1, configs[row.name].batch_size}):
            decoder = checked_decoder(model, tokenizer, replace(configs[row.name], batch_size=batch), row.spec,
                                      row.model)
            units[row.name, batch] = _Unit(row, batch, decoder, prompts)
    for _ in range(speed.warmup):
        for unit in units.values():
            unit.decode(ids, scored[unit.row.name], runtime.device)
    runs = []
    for r, order in enumerate(round_orders(list(units), speed.rounds, speed.seed)):
        for position, key in enumerate(order):
            generations, wall = units[key].decode(ids, scored[key[0]], runtime.device)
            runs.append(timed_run(round=r, position=position, row=key[0], batch=key[1], wall_s=wall,
                                  prefill_s=sum(g.prefill_time_s for g in generations)))
        if progress:
            print(f"speed {model_name}/{benchmark}: round {r + 1}/{speed.rounds} done", flush=True)
    batch = max(b for _, b in units)
    result = speed_document(
        model=model_name, benchmark=benchmark, device=runtime.device, device_name=device_name(runtime.device),
        dtype=runtime.dtype, threads=torch.get_num_threads(), settings={**asdict(speed), "batch": batch},
        problem_ids=ids, runs=runs,
        rows=[_row_record(row, rows, scored[row.name], configs[row.name].block_size,
                          units[row.name, batch].decoder.config.batch_size) for row in rows])
    write_speed(result, provenance("speed", {"out": str(out), "test_file": str(test_file), "decode": options}), out)
    return result


@dataclass(frozen=True)
class _Unit:
    """What one timed decode runs: a row's decoder at one batch size, on the subset's prompts."""

    row: Row
    batch: int
    decoder: object
    prompts: list

    def decode(self, ids: list[str], scored: dict[str, dict], device: str) -> tuple[list, float]:
        """One timed decode, its tokens checked against the decode job's (greedy rows)."""
        generations, wall = timed_decode(self.decoder, self.prompts, device)
        if not self.row.sampling:
            check_tokens(self.row, self.batch, ids, generations, scored)
        return generations, wall
