"""Typed settings of config sections that several stages share; every default lives here and only here.

The workflow's JSON schema checks types and ranges but carries no defaults, so a key left out of a config takes the
value below, whether a stage runs under Snakemake or by hand (``python -m sbd_core ...``).
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass, field, fields

from .errors import UserError


def from_section(cls, section: dict | None, where: str):
    """``cls(**section)`` for a dataclass, naming the config section and the allowed keys on an unknown key
    (UserError)."""
    if section is not None and not isinstance(section, dict):
        raise UserError(f"{where} must be a mapping of settings, got {section!r}")
    section = dict(section or {})
    allowed = sorted(f.name for f in fields(cls))
    unknown = sorted(set(section) - set(allowed))
    if unknown:
        raise UserError(f"unknown key(s) {unknown} in {where}; allowed: {allowed}")
    check_types(cls, section, where)
    return cls(**section)


def check_types(cls, section: dict, where: str) -> None:
    """UserError naming ``<where>.<key>`` when a value of ``section`` is not of the type the dataclass ``cls``
    declares for that key (JSON and YAML give lists for tuples and ints for floats; both are accepted)."""
    hints = typing.get_type_hints(cls)
    for key, value in section.items():
        if key in hints and not _accepts(hints[key], value):
            raise UserError(f"{where}.{key} must be {_describe(hints[key])}, got {value!r}")


_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null",
          list: "a list", tuple: "a list", dict: "a mapping"}


def _alternatives(hint) -> tuple:
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


def _accepts(hint, value) -> bool:
    for kind in (typing.get_origin(h) or h for h in _alternatives(hint)):
        if kind is typing.Any or (kind is float and isinstance(value, int) and not isinstance(value, bool)):
            return True
        if kind is tuple and isinstance(value, list):
            return True
        if isinstance(kind, type) and isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return True
    return False


def _describe(hint) -> str:
    return " or ".join(_NAMES.get(typing.get_origin(h) or h, str(h)) for h in _alternatives(hint))


@dataclass(frozen=True)
class RuntimeSettings:
    """Where models run: ``device`` (cpu, cuda, cuda:N), weight ``dtype`` for decoding, CPU ``threads`` per job;
    ``decode_threads``: CPU threads (and cores claimed) of each decode job; None: ``threads`` threads, claiming every core
    of the run. (The timed jobs, speed and timing, claim every core and run ``threads`` threads.)"""

    device: str = "cpu"
    dtype: str = "float32"
    threads: int = 2
    decode_threads: int | None = None

    def __post_init__(self):
        if not isinstance(self.device, str) or not re.fullmatch(r"cpu|cuda(:[0-9]+)?", self.device):
            raise UserError(f"runtime.device must be cpu, cuda or cuda:N, got {self.device!r}")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise UserError(f"runtime.dtype must be float32, bfloat16 or float16, got {self.dtype!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise UserError(f"runtime.threads must be an integer >= 1, got {self.threads!r}")
        if self.decode_threads is not None and (isinstance(self.decode_threads, bool)
                                                or not isinstance(self.decode_threads, int) or self.decode_threads < 1):
            raise UserError(f"runtime.decode_threads must be an integer >= 1 or null, got {self.decode_threads!r}")

    @property
    def gpus(self) -> int:
        """GPUs one model job needs (0 on the CPU)."""
        return 0 if self.device == "cpu" else 1


@dataclass(frozen=True)
class SpeedSettings:
    """The ``speed`` stage (:mod:`sbd_core.pipeline.speed`): wall-clock per (model, benchmark) as a paired, repeated,
    interleaved experiment. ``problems``: the test problems every row decodes (a seeded sample, the same for every
    row); ``rounds``: timed rounds, each row once per round and batch size in a fresh random order (``seed``);
    ``warmup``: untimed decodes of each (row, batch size) before the first round."""

    enabled: bool = True
    problems: int = 8
    rounds: int = 5
    warmup: int = 1
    seed: int = 0

    def __post_init__(self):
        for name, low in (("problems", 1), ("rounds", 2), ("warmup", 0), ("seed", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise UserError(f"speed.{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class TimingSettings:
    """The ``timing`` stage: time(k) of the fast engine on the run's own hardware (``python -m sbd_core timing``),
    which the report's eq. 16 predictions read. ``batches`` empty: 1 and the decode batch size; ``widths``: tokens
    per row (1: the NTP step), the decode block size and its 2k re-feed are always added; ``kv_lens``: cached tokens
    (they must span the runs' mean cache lengths, or the report leaves those predictions empty). Measured as the speed
    stage measures (:mod:`sbd_core.rounds`): ``rounds`` rounds, every step once per round in a fresh random order
    (``seed``); a step's value in a round is the median of ``repeats`` calls after ``warmup`` untimed ones."""

    enabled: bool = True
    batches: tuple[int, ...] = ()
    widths: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    kv_lens: tuple[int, ...] = (64, 256, 1024)
    warmup: int = 2
    repeats: int = 5
    rounds: int = 5
    seed: int = 0

    def __post_init__(self):
        for name in ("batches", "widths", "kv_lens"):
            values = tuple(getattr(self, name))
            low = 0 if name == "kv_lens" else 1
            if any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in values):
                raise UserError(f"timing.{name} must be integers >= {low}, got {list(values)}")
            object.__setattr__(self, name, values)
        if not self.kv_lens or not self.widths:
            raise UserError("timing.widths and timing.kv_lens need at least one value each")
        if self.warmup < 0 or self.repeats < 1 or self.rounds < 1 or self.seed < 0:
            raise UserError(f"timing.warmup and timing.seed must be >= 0, timing.repeats and timing.rounds >= 1, got "
                            f"{self.warmup}, {self.seed}, {self.repeats}, {self.rounds}")


@dataclass(frozen=True)
class StatsSettings:
    """How the report states how sure its numbers are (the config's ``report.stats``; docs/statistics.md).
    ``confidence``: the two-sided level of every interval and of every verdict (alpha = 1 - confidence);
    ``margin_pts``: the equivalence margin in accuracy points, a difference to the NTP arm inside +-margin counting
    as "the same accuracy" (``margins_pts``: per-benchmark margins in its place); ``n_boot`` resamples (``seed``:
    their seed) for the NFE speedup intervals; ``power`` and ``resolve`` (a fraction: 0.01 is one point) size the
    problems a task would need."""

    confidence: float = 0.95
    margin_pts: float = 2.0
    margins_pts: dict = field(default_factory=dict)
    n_boot: int = 10_000
    seed: int = 0
    power: float = 0.8
    resolve: float = 0.01

    def __post_init__(self):
        if not 0.5 <= self.confidence < 1.0 or not 0.0 < self.power < 1.0:
            raise UserError(f"report.stats.confidence must lie in [0.5, 1) and report.stats.power in (0, 1), got "
                            f"{self.confidence} and {self.power}")
        margins = {"margin_pts": self.margin_pts, **{f"margins_pts.{k}": v for k, v in self.margins_pts.items()}}
        bad = {k: v for k, v in margins.items()
               if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 100.0}
        if bad:
            raise UserError(f"report.stats.{next(iter(bad))} must be a number of points in (0, 100), got "
                            f"{next(iter(bad.values()))!r}")
        if self.n_boot < 100:
            raise UserError(f"report.stats.n_boot must be >= 100, got {self.n_boot}")
        if not 0.0 < self.resolve < 1.0:
            raise UserError(f"report.stats.resolve must lie in (0, 1) (a fraction: 0.01 is one point), got "
                            f"{self.resolve}")

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    def margin(self, benchmark: str) -> float:
        """The equivalence margin of ``benchmark`` as a fraction (0.02 for 2 points)."""
        return float(self.margins_pts.get(benchmark, self.margin_pts)) / 100.0
