"""What every benchmark has in common: its settings, its test file and the generations file it scores.

A benchmark's test file (written by :meth:`Benchmark.fetch`, the benchmark stage) holds one JSON object per problem: the
row in the source dataset's own schema plus ``sbd_id``, the problem id (see :func:`problem_id`). It is the problem set:
the stage's ``limit`` chose it, and scoring never cuts it again (:meth:`Benchmark.problem_set`). A generations file holds
one JSON object per line (its format: :mod:`sbd_core.records.generations`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from sbd_core.errors import UserError
from sbd_core.io_utils import iter_jsonl, write_json_atomic, write_jsonl_atomic

from .settings import Settings, resolve

__all__ = ["Benchmark", "BenchmarkUnavailable", "ID_KEY", "problem_id", "read_rows", "is_test_file"]

ID_KEY = "sbd_id"  # a key no source dataset uses, so a dataset's own "id" column is never overwritten


class BenchmarkUnavailable(UserError):
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
        raise FileNotFoundError(f"benchmark data file {path} does not exist (expected a JSON-lines test file)")
    return list(iter_jsonl(path))


def is_test_file(rows: list) -> bool:
    """Whether ``rows`` are a test file the benchmark stage wrote: every row carries its ``sbd_id``, a key no source
    dataset has."""
    return bool(rows) and all(isinstance(row, dict) and ID_KEY in row for row in rows)


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
        source: where a real run gets the test split (recorded in provenance, shown in docs/benchmarks.md).
        stops: the stop strings used when the settings give none.
    """

    available = True
    reason = ""  # why the benchmark is unavailable
    several_samples = False  # whether a generations record may hold several samples (read_generations)

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
        record = {"benchmark": self.name, "source": self.source, "data": settings.data, "split": self.split(settings),
                  "n": len(problems), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                  "settings": asdict(settings)}
        write_json_atomic(record, Path(str(path) + ".provenance.json"))
        return path

    def split(self, settings: Settings) -> str:
        """The split the settings' problems come from: ``test`` for a real benchmark (its one fixed test set), the
        ``split`` setting for generated ones (``dev`` or ``test``)."""
        return getattr(settings, "split", "test")

    def problem_split(self, data: str | Path | None, settings: Settings, stated_split: str | None) -> str:
        """The split of the problems a generations file answers: the one the benchmark stage recorded for its test
        file ``data``, else the settings' (:meth:`split`). ``stated_split`` (the split the user's settings name) must
        agree with the recorded one: UserError naming the file otherwise."""
        recorded = _stage_settings(data).get("split") if data is not None else None
        if recorded is not None and stated_split is not None and stated_split != recorded:
            raise UserError(f"{data}: the benchmark stage wrote this test file from the {recorded!r} split, but the "
                            f"settings name split {stated_split!r}; score it with split {recorded!r}, or rerun the "
                            "benchmark stage with the settings' split")
        return recorded or self.split(settings)

    def load(self, path: str | Path) -> list[dict]:
        """The problems of a test file written by :meth:`fetch`, or of a file in the source's own schema."""
        return self.problems(read_rows(path), path)

    def problem_set(self, data: str | Path | None, settings: Settings, stated_limit: int | None,
                    work_dir: str | Path) -> tuple[list[dict], dict]:
        """The problems a generations file answers, and the limit that chose them (``{"limit", "by"}``).

        * no ``data``: the benchmark's own test set, fetched into ``work_dir`` as the benchmark stage does, so the
          settings' ``limit`` (stated or the default) chooses the problems (``by: "fetch"``);
        * ``data`` written by the benchmark stage (:func:`is_test_file`): it is the problem set and is never cut again
          (``by: "benchmark stage"``, with the limit its provenance record names); a ``stated_limit`` that would cut
          it is a UserError;
        * ``data`` in the source's own schema: every row, or the first ``stated_limit`` (``by: "settings"``).

        ``stated_limit``: the limit the user gave (None when the settings do not name one).
        """
        if data is None:
            return self.load(self.fetch(settings, work_dir)), {"limit": settings.limit, "by": "fetch"}
        rows = read_rows(data)
        problems = self.problems(rows, data)
        if is_test_file(rows):
            if stated_limit is not None and stated_limit < len(problems):
                raise UserError(f"{data}: the benchmark stage wrote this test file with {len(problems)} problems, "
                                f"and limit {stated_limit} would cut it; a test file is the problem set: drop 'limit' "
                                "from the settings, or rerun the benchmark stage with that limit")
            return problems, {"limit": _stage_limit(data), "by": "benchmark stage"}
        if stated_limit is not None:
            return problems[:stated_limit], {"limit": stated_limit, "by": "settings"}
        return problems, {"limit": None, "by": None}

    def problems(self, rows: list, origin) -> list[dict]:
        """Source rows as problems: each with its id (:func:`problem_id`) under ``sbd_id``. UserError naming
        ``origin`` when there are none, a row lacks a required field, or ids repeat."""
        if not rows:
            raise UserError(f"{origin}: no problems (an empty test file); expected one JSON object per problem")
        for n, row in enumerate(rows):
            missing = [k for k in self.required_fields if not isinstance(row, dict) or k not in row]
            if missing:
                raise UserError(f"{origin}: row {n + 1} lacks field(s) {missing}; {self.name} rows need "
                                f"{list(self.required_fields)} (the schema of its source, {self.source})")
        problems = [self._prepare({**row, ID_KEY: problem_id(row, i)}) for i, row in enumerate(rows)]
        first_row: dict[str, int] = {}
        for n, problem in enumerate(problems, start=1):
            if problem[ID_KEY] in first_row:
                raise UserError(f"{origin}: problem id {problem[ID_KEY]!r} repeats (rows {first_row[problem[ID_KEY]]} "
                                f"and {n}); each problem needs its own id")
            first_row[problem[ID_KEY]] = n
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

    def cluster(self, problem: dict) -> str | None:
        """The family ``problem`` belongs to, where a benchmark's problems come in families whose verdicts go
        together (the report then resamples whole families); None: independent problems."""
        return None

    def score(self, problems: list[dict], completions: Mapping[str, str], work_dir: str | Path,
              settings: Settings) -> dict:
        """Score one completion per problem: ``{"accuracy", "metrics", "n", "per_problem"}``.

        ``completions`` maps every problem id to the text generated after the prompt; a missing or unknown id is a
        ValueError (a partial generations file must not pass as a low score).
        """
        raise NotImplementedError

    def check_completions(self, problems: list[dict], completions: Mapping[str, str],
                           origin: str | None = None) -> None:
        """UserError unless ``completions`` answer exactly ``problems`` (``origin``: the files, for the message)."""
        ids = [p[ID_KEY] for p in problems]
        missing = [i for i in ids if i not in completions]
        unknown = sorted(set(completions) - set(ids))
        if missing or unknown:
            raise UserError(f"{origin or self.name}: {len(missing)} of {len(ids)} problems have no completion "
                            f"(first: {missing[:3]}) and {len(unknown)} completions name no problem "
                            f"(first: {unknown[:3]}); generations must cover exactly the test file's problems")


def _stage_settings(test_file: str | Path) -> dict:
    """The settings the benchmark stage recorded for ``test_file`` (empty: no readable provenance record beside it)."""
    record = Path(str(test_file) + ".provenance.json")
    try:
        settings = json.loads(record.read_text())["settings"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _stage_limit(test_file: str | Path) -> int | None:
    """The ``limit`` the benchmark stage recorded for ``test_file`` (None: none, or no provenance record beside it)."""
    return _stage_settings(test_file).get("limit")
