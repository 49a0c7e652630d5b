"""The time(k) file (``kind: sbd_timing``, ``version: 1``): written by the timing stage (:mod:`sbd_core.timing`), read
by the roofline and the report (:func:`sbd_core.roofline.load_timing`). This module owns its fields.

Header: ``device``, ``device_name``, ``dtype``, ``warmup``, ``repeats``, ``rounds``, ``seed``, ``compiled``,
``engine``, ``model`` (name, source, class, shape), ``threads``, ``complete``, ``unmeasured``, ``orders`` (every
round's order of points). ``rows``: one per (step, batch, width, kv_len) with its ``block_size`` (:func:`block_of`),
every round's milliseconds (``rounds_ms``), their median (``median_ms``) and its interval over rounds (``lo_ms``,
``hi_ms``, ``level``). Older files may lack ``step`` (a bare ``forward``) and ``rounds_ms``; both are still read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import UserError
from ..io_utils import read_json_object, write_json_atomic

KIND, VERSION = "sbd_timing", 1

#: The steps a time(k) row may time: ``ntp`` (one token, the NTP decoder), ``block`` (a block of ``width`` tokens, its
#: logits and the solver), ``refeed`` (the first forward of a block: the finished block of ``width / 2`` re-fed
#: causally plus the new block, logits for the new block only), ``forward`` (a bare forward; rows without ``step``).
STEPS = ("ntp", "block", "refeed", "forward")


class TimingFileError(UserError):
    """A time(k) file is unreadable or does not follow the ``sbd_timing`` format."""


def block_of(step: str, width: int) -> int:
    """The block size of a step: 1 (ntp), ``width`` (block) or ``width / 2`` (refeed: the re-fed block plus the new)."""
    return 1 if step == "ntp" else (width // 2 if step == "refeed" else width)


def timing_row(step: str, width: int, batch: int, kv_len: int, interval, rounds_ms: list[float]) -> dict:
    """A row: the point, every round's milliseconds and their median with its interval (a
    :class:`sbd_core.rounds.RoundInterval`)."""
    return {"step": step, "batch": batch, "width": width, "kv_len": kv_len, "block_size": block_of(step, width),
            "median_ms": interval.median, "lo_ms": interval.lo, "hi_ms": interval.hi, "level": interval.level,
            "rounds_ms": rounds_ms}


def timing_document(*, device: str, device_name: str, dtype: str, warmup: int, repeats: int, rounds: int, seed: int,
                    compiled: bool, model: dict, threads: int, complete: bool, unmeasured: int, rows: list[dict],
                    orders: list) -> dict:
    """The file's contents (without provenance), its keys in the file's order."""
    return {"kind": KIND, "version": VERSION, "device": device, "device_name": device_name, "dtype": dtype,
            "warmup": warmup, "repeats": repeats, "rounds": rounds, "seed": seed, "compiled": compiled,
            "engine": "fast", "model": model, "threads": threads, "complete": complete, "unmeasured": unmeasured,
            "rows": rows, "orders": orders}


def write_timing(document: dict, provenance: dict, out) -> None:
    """Write the file atomically, its provenance record beside the contents."""
    write_json_atomic({**document, "provenance": provenance}, out)


@dataclass(frozen=True)
class TimingFile:
    """A validated time(k) file: its header, and its rows' median seconds as ``by_step[step][batch][width][kv_len]``
    and per-round seconds by ``(step, batch, width, kv_len)`` (rows with ``rounds_ms``)."""

    path: str
    device: str
    device_name: str
    dtype: str
    model: dict
    warmup: int
    repeats: int
    by_step: dict
    rounds: dict = field(default_factory=dict)


def read_timing(path) -> TimingFile:
    """Read and validate a time(k) file; TimingFileError naming the file and the field otherwise."""
    data = read_json_object(path, "timing file", TimingFileError)
    _field(path, data, "kind", str, check=lambda v: v == KIND, expect=f"{KIND!r}")
    _field(path, data, "version", int, check=lambda v: v == VERSION, expect=f"{VERSION}")
    header = {key: _field(path, data, key, str, check=bool, expect="a non-empty string")
              for key in ("device", "device_name", "dtype")}
    counts = {key: _field(path, data, key, int, check=lambda v: v >= 0, expect="an integer >= 0")
              for key in ("warmup", "repeats")}
    model = _field(path, data, "model", dict, expect="an object")
    rows = _field(path, data, "rows", list, check=bool, expect="a non-empty list")
    by_step, rounds = _read_rows(path, rows)
    return TimingFile(path=str(path), model=model, by_step=by_step, rounds=rounds, **header, **counts)


def _field(path, data: dict, key: str, kind, where: str = "", check=lambda v: True, expect: str = ""):
    """``data[key]`` checked for type and ``check``; TimingFileError naming the file and the field otherwise."""
    name = f"{where}{key}"
    if key not in data:
        raise TimingFileError(f"timing file {path}: missing field {name!r}")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, kind) or not check(value):
        raise TimingFileError(f"timing file {path}: field {name!r} must be {expect or kind}, got {value!r}")
    return value


def _read_rows(path, rows: list) -> tuple[dict, dict]:
    """The ``rows`` of a time(k) file as ``{step: {batch: {width: {kv_len: median seconds}}}}`` and each row's
    per-round seconds by ``(step, batch, width, kv_len)`` (where it has ``rounds_ms``), each validated."""
    positive = dict(check=lambda v: math.isfinite(v) and v > 0, expect="a positive number")
    grids: dict = {}
    rounds: dict = {}
    for i, row in enumerate(rows):
        where = f"rows[{i}]."
        if not isinstance(row, dict):
            raise TimingFileError(f"timing file {path}: field 'rows[{i}]' must be an object, got {row!r}")
        key = tuple(_field(path, row, name, int, where, check=lambda v, low=low: v >= low,
                           expect=f"an integer >= {low}") for name, low in (("batch", 1), ("width", 1), ("kv_len", 0)))
        median = _field(path, row, "median_ms", (int, float), where, **positive)
        for low, high in (("p10_ms", "p90_ms"), ("lo_ms", "hi_ms")):
            spread = [_field(path, row, name, (int, float), where, **positive) for name in (low, high) if name in row]
            if spread and not spread[0] <= median <= spread[-1]:
                raise TimingFileError(f"timing file {path}: rows[{i}] must have {low} <= median_ms <= {high}")
        per_round = _field(path, row, "rounds_ms", list, where, check=lambda v: v and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in v),
            expect="a non-empty list of positive numbers") if "rounds_ms" in row else None
        step = row.get("step", "forward")
        if step not in STEPS:
            raise TimingFileError(f"timing file {path}: field 'rows[{i}].step' must be one of {STEPS}, got {step!r}")
        batch, width, kv_len = key
        by_kv = grids.setdefault(step, {}).setdefault(batch, {}).setdefault(width, {})
        if kv_len in by_kv:
            raise TimingFileError(f"timing file {path}: rows[{i}] repeats (step, batch, width, kv_len) = "
                                  f"{(step, *key)}")
        by_kv[kv_len] = median / 1000.0
        if per_round is not None:
            rounds[(step, *key)] = tuple(v / 1000.0 for v in per_round)
    return grids, rounds
