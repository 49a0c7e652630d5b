"""Typed settings of one benchmark, read from the config mapping ``benchmarks: {<name>: {...}}``.

Every setting has exactly one default: the ``defaults`` instance that each benchmark module declares (a paper
benchmark's token limit, stop strings, system prompt ...). ``resolve(name, defaults, mapping)`` overlays a config
mapping on those defaults and rejects unknown keys and bad values with a message that names the key, the value and
what is allowed. The field validators live next to the fields (``metadata={"check": ...}``).

Keys, for every benchmark:

* ``max_new_tokens`` (int >= 1) and ``stop_strings`` (list of non-empty strings; null: the benchmark's convention
  for the prompt mode, see ``Benchmark.generation``): the generation settings.
* ``limit`` (int >= 1, or null for all): the benchmark stage keeps the first ``limit`` problems of the source. The test
  file it writes is the problem set: scoring it never cuts it again (``Benchmark.problem_set``).
* ``data`` (path or null): a local file in the hub dataset's own schema instead of the download (offline runs).
* ``chat`` (bool): true wraps the prompt in the checkpoint's chat template (the fine-tuned arms); false gives the
  plain-text prompt (base models, synthetic tasks), which never carries a system prompt.
* ``system_prompt`` (string or null): the system message when ``chat`` is true.

Code benchmarks add ``parallel``, ``timeout_s``, ``max_memory_bytes`` (the code scorer's limits); benchmarks whose
data are generated add ``seed`` and ``split``: ``test`` (the default; the tables' numbers) or ``dev`` (the development
split the recipe is tuned on; :mod:`sbd_core.tasks.splits`); a real benchmark has one fixed test set and no
``split``. LiveCodeBench adds its problem window (``release``, ``start_date``, ``end_date``), ``test_timeout_s`` (per
test) and ``max_tests_bytes`` (the cap on one problem's decompressed tests); its ``data`` is a folder of the hub
dataset's shards.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

from sbd_core.errors import UserError
from sbd_core.sandbox import limits
from sbd_core.tasks.splits import EVALUATION_SPLITS

__all__ = ["Settings", "CodeSettings", "GeneratedSettings", "GeneratedCodeSettings", "LiveCodeBenchSettings",
           "resolve"]


# ------------------------------------------------------------------------------------------------ value checks
def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("must be an integer >= 1")
    return value


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("must be an integer >= 0")
    return value


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def optional(value: Any) -> Any:
        return None if value is None else check(value)

    return optional


def _positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError("must be a number > 0")
    return float(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return value


def _path(value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ValueError("must be a file path")
    return str(value)


def _evaluation_split(value: Any) -> str:
    if value not in EVALUATION_SPLITS:
        raise ValueError(f"must be one of {list(EVALUATION_SPLITS)} (train is what the models learn from)")
    return value


def _date(value: Any) -> str:
    try:
        datetime.strptime(value, "%Y-%m-%d")
    except (TypeError, ValueError):
        raise ValueError("must be a date YYYY-MM-DD") from None
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) \
            or not all(isinstance(s, str) and s for s in value):
        raise ValueError("must be a list of non-empty strings")
    return tuple(value)


def _setting(check: Callable[[Any], Any], default: Any = dataclasses.MISSING):
    """A dataclass field whose value ``check`` validates (and normalises) in :func:`resolve`."""
    return field(default=default, metadata={"check": check})


# ------------------------------------------------------------------------------------------------ settings classes
@dataclass(frozen=True, kw_only=True)
class Settings:
    """Generation, data and prompt settings shared by every benchmark (see the module doc for each key)."""

    max_new_tokens: int = _setting(_positive_int)
    stop_strings: tuple[str, ...] | None = _setting(_optional(_strings), None)  # None: the prompt mode's default
    limit: int | None = _setting(_optional(_positive_int), None)
    data: str | None = _setting(_optional(_path), None)
    chat: bool = _setting(_boolean, True)
    system_prompt: str | None = _setting(_optional(_text), None)


@dataclass(frozen=True, kw_only=True)
class CodeSettings(Settings):
    """Settings of an execution-scored benchmark: the code scorer's worker count and limits."""

    parallel: int = _setting(_positive_int, limits.PARALLEL)
    timeout_s: float = _setting(_positive_number, limits.TIMEOUT_S)  # whole scoring run
    max_memory_bytes: int = _setting(_positive_int, limits.MAX_MEMORY_BYTES)  # per program


@dataclass(frozen=True, kw_only=True)
class GeneratedSettings(Settings):
    """Settings of a benchmark whose problems are generated from a seed out of its ``split`` (``limit``: the count)."""

    seed: int = _setting(_non_negative_int, 0)
    split: str = _setting(_evaluation_split, "test")


@dataclass(frozen=True, kw_only=True)
class GeneratedCodeSettings(CodeSettings, GeneratedSettings):
    """Generated problems scored by execution."""


@dataclass(frozen=True, kw_only=True)
class LiveCodeBenchSettings(CodeSettings):
    """LiveCodeBench: the problem window (a named release of the hub dataset, then contest dates from ``start_date``
    to ``end_date``, both inclusive, as lcb_runner selects them), the time limit per test and the tests' size cap."""

    release: str = _setting(_text)
    start_date: str | None = _setting(_optional(_date), None)
    end_date: str | None = _setting(_optional(_date), None)
    test_timeout_s: float = _setting(_positive_number, limits.LCB_TEST_TIMEOUT_S)
    max_tests_bytes: int = _setting(_positive_int, limits.LCB_MAX_TESTS_BYTES)


def resolve(name: str, defaults: Settings, mapping: Mapping[str, Any] | None = None) -> Settings:
    """``defaults`` with the keys of ``mapping`` (one benchmark's config section) applied and validated.

    Raises UserError naming ``benchmarks.<name>.<key>``, the bad value and the allowed keys or values.
    """
    if mapping is None:
        return defaults
    if not isinstance(mapping, Mapping):
        raise UserError(f"benchmarks.{name} must be a mapping of settings, got {mapping!r}")
    known = {f.name: f for f in dataclasses.fields(defaults)}
    unknown = sorted(set(mapping) - set(known))
    if unknown:
        raise UserError(f"benchmarks.{name}: unknown setting(s) {unknown}; allowed: {sorted(known)}")
    values = {}
    for key, value in mapping.items():
        try:
            values[key] = known[key].metadata["check"](value)
        except ValueError as err:
            raise UserError(f"benchmarks.{name}.{key} {err}, got {value!r}") from None
    if values.get("chat") is False and values.get("system_prompt") is not None:
        raise UserError(f"benchmarks.{name}: system_prompt applies only with chat: true; "
                        "drop system_prompt or set chat: true")
    return dataclasses.replace(defaults, **values)
