"""What every benchmark has in common: its settings, its test file and the generations file it scores.

A benchmark's test file (written by :meth:`Benchmark.fetch`) holds one JSON object per problem: the row in the source
dataset's own schema plus ``sbd_id``, the problem id (see :func:`problem_id`). A generations file holds one JSON object
per line, ``{"id": <problem id>, "completion": "<text after the prompt>"}`` (``task_id`` is accepted for ``id``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from sbd_core.io_utils import iter_jsonl, write_json_atomic, write_jsonl_atomic

from .settings import Settings, resolve

__all__ = ["Benchmark", "BenchmarkUnavailable", "ID_KEY", "problem_id", "read_rows", "read_generations"]

ID_KEY = "sbd_id"  # a key no source dataset uses, so a dataset's own "id" column is never overwritten


class BenchmarkUnavailable(RuntimeError):
    """The benchmark is registered but cannot be run yet (its ``reason`` says why)."""


def problem_id(row: Mapping[str, Any], index: int) -> str:
    """The id of the problem in ``row`` at 0-based ``index`` of its test file: the id already assigned, else the
    dataset's ``task_id`` (HumanEval/0, Mbpp/2), else the row index as a string ("0", "1", ...)."""
    for key in (ID_KEY, "task_id"):
        if key in row:
            return str(row[key])
    return str(index)


def read_rows(path: str | Path) -> list[dict]:
    """The records of a JSON-lines file, plain or gzip-compressed (``.gz``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"benchmark data file {path} does not exist")
    if path.suffix != ".gz":
        return list(iter_jsonl(path))
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_generations(path: str | Path) -> dict[str, str]:
    """``{problem id: completion}`` from a generations file; ValueError on a malformed record or a repeated id with a
    different completion."""
    completions: dict[str, str] = {}
    for n, record in enumerate(iter_jsonl(path), start=1):
        key = record.get("id", record.get("task_id")) if isinstance(record, dict) else None
        if key is None or not isinstance(record.get("completion"), str):
            raise ValueError(f"{path}: record {n} needs an 'id' and a string 'completion', e.g. "
                             '{"id": "0", "completion": "..."}')
        key = str(key)
        if completions.get(key, record["completion"]) != record["completion"]:
            raise ValueError(f"{path}: record {n} repeats id {key!r} with a different completion")
        completions[key] = record["completion"]
    return completions


class Benchmark:
    """One benchmark: data source, problem ids, prompt, generation settings and scorer.

    Subclasses implement :meth:`_source_rows`, :meth:`prompt` and :meth:`score`; a benchmark module builds one
    instance with keyword arguments:

    Args:
        name: registry name, also the config key (``benchmarks: {<name>: {...}}``).
        paper_column: the column of the paper's Table 1 it fills (None for the synthetic tasks).
        group: ``"reasoning"`` (thinking on), ``"chat"`` (thinking off) or ``"synthetic"``.
        defaults: the settings object holding every default of this benchmark.
        required_fields: fields every source row must have (its source's schema).
        source: where a real run gets the test split (recorded in provenance, shown in the README).
        stops: the stop strings used when the settings give none.
    """

    available = True
    reason = ""  # why the benchmark is unavailable

    def __init__(self, *, name: str, paper_column: str | None, group: str, defaults: Settings,
                 required_fields: tuple[str, ...], source: dict, stops: tuple[str, ...] = ()):
        self.name, self.paper_column, self.group = name, paper_column, group
        self.defaults, self.required_fields, self.source = defaults, tuple(required_fields), dict(source)
        self.stops = tuple(stops)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    # ------------------------------------------------------------------------------------------ settings, data
    def settings(self, mapping: Mapping[str, Any] | None = None) -> Settings:
        """The validated settings for one config section (None: the defaults)."""
        return resolve(self.name, self.defaults, mapping)

    def generation(self, settings: Settings) -> tuple[int, tuple[str, ...]]:
        """``(max_new_tokens, stop_strings)`` to decode with: the settings' stop strings, else the benchmark's own
        for the prompt mode (:meth:`default_stops`)."""
        stops = settings.stop_strings if settings.stop_strings is not None else self.default_stops(settings.chat)
        return settings.max_new_tokens, tuple(stops)

    def default_stops(self, chat: bool) -> tuple[str, ...]:
        """The benchmark's stop strings for chat (True) or plain-text (False) prompts."""
        return self.stops

    def fetch(self, settings: Settings, out_dir: str | Path) -> Path:
        """Write the test problems to ``out_dir/<name>_test.jsonl`` (the first ``limit``, each with its ``sbd_id``)
        and a provenance record beside it; return the file's path.

        The rows come from ``settings.data`` when set (a local file in the source's schema), else from the source
        (download, or generation from a seed).
        """
        self._check_available()
        if settings.data:
            problems = self.load(settings.data)
        else:
            problems = self.problems(self._source_rows(settings), self.source)
        problems = problems[:settings.limit]
        path = write_jsonl_atomic(problems, Path(out_dir) / f"{self.name}_test.jsonl")
        record = {"benchmark": self.name, "source": self.source, "data": settings.data, "n": len(problems),
                  "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "settings": asdict(settings)}
        write_json_atomic(record, Path(str(path) + ".provenance.json"))
        return path

    def load(self, path: str | Path) -> list[dict]:
        """The problems of a test file written by :meth:`fetch`, or of a file in the source's own schema."""
        return self.problems(read_rows(path), path)

    def problems(self, rows: list, origin) -> list[dict]:
        """Source rows as problems: each with its id (:func:`problem_id`) under ``sbd_id``. ValueError naming
        ``origin`` when there are none, a row lacks a required field, or ids repeat."""
        if not rows:
            raise ValueError(f"{origin}: no problems")
        for n, row in enumerate(rows):
            missing = [k for k in self.required_fields if not isinstance(row, dict) or k not in row]
            if missing:
                raise ValueError(f"{origin}: row {n} lacks field(s) {missing}; {self.name} rows need "
                                 f"{list(self.required_fields)} (the schema of its source, {self.source})")
        problems = [self._prepare({**row, ID_KEY: problem_id(row, i)}) for i, row in enumerate(rows)]
        if len({p[ID_KEY] for p in problems}) != len(problems):
            raise ValueError(f"{origin}: problem ids repeat; each problem needs its own id")
        return problems

    def _prepare(self, problem: dict) -> dict:
        """A problem as the prompt and scorer use it (unchanged unless a benchmark derives fields)."""
        return problem

    def _source_rows(self, settings: Settings) -> list[dict]:
        """The test rows from the benchmark's own source (download, or generation from a seed)."""
        raise NotImplementedError

    def _check_available(self) -> None:
        if not self.available:
            raise BenchmarkUnavailable(f"benchmark {self.name!r} is not available: {self.reason}")

    # ------------------------------------------------------------------------------------------ prompt, score
    def prompt(self, problem: dict, tokenizer, settings: Settings) -> str:
        """The exact text the model is given for ``problem`` (``tokenizer`` is needed only when ``settings.chat``)."""
        raise NotImplementedError

    def score(self, problems: list[dict], completions: Mapping[str, str], work_dir: str | Path,
              settings: Settings) -> dict:
        """Score one completion per problem: ``{"accuracy", "metrics", "n", "per_problem"}``.

        ``completions`` maps every problem id to the text generated after the prompt; a missing or unknown id is a
        ValueError (a partial generations file must not pass as a low score).
        """
        raise NotImplementedError

    def _check_completions(self, problems: list[dict], completions: Mapping[str, str]) -> None:
        ids = [p[ID_KEY] for p in problems]
        missing = [i for i in ids if i not in completions]
        unknown = sorted(set(completions) - set(ids))
        if missing or unknown:
            raise ValueError(f"{self.name}: {len(missing)} of {len(ids)} problems have no completion "
                             f"(first: {missing[:3]}) and {len(unknown)} completions name no problem "
                             f"(first: {unknown[:3]}); generations must cover exactly the test file's problems")
