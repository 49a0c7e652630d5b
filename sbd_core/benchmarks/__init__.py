"""The benchmark registry: the one list the pipeline, config schema, report and CLI consult.

A benchmark is one module (data source, problem ids, prompt, generation settings, scorer) plus, for lm-eval-scored
ones, a task YAML in ``lm_eval_tasks/``; adding one means writing its module, listing it in ``_ALL`` below and giving
it a config entry ``benchmarks: {<name>: {...}}`` (keys: :mod:`sbd_core.benchmarks.settings`).

Public surface::

    bench = get_benchmark("gsm8k")
    settings = bench.settings({"limit": 200})                  # typed, validated; defaults in one place
    path = bench.fetch(settings, out_dir)                       # test file + provenance (download / copy / generate)
    problems = bench.load(path)                                 # each with its id under ID_KEY ("sbd_id")
    text = bench.prompt(problems[0], tokenizer, settings)       # the exact prompt
    max_new_tokens, stops = bench.generation(settings)
    result = bench.score(problems, {id: completion}, work_dir, settings)   # {"accuracy", "metrics", "n", "per_problem"}
    score_generations("gsm8k", "generations.jsonl", data=path)               # python -m sbd_core score ...

Importing this package is cheap (no torch, lm-eval or evalplus): those load when a benchmark fetches, prompts or
scores.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserError
from ..records.generations import read_generations
from . import aime25, gsm8k, humaneval_plus, lcbv6, math500, mbpp_plus, synthetic
from .base import ID_KEY, Benchmark, BenchmarkUnavailable
from .chat import THINKING_OFF, THINKING_ON, add_special_tokens_for
from .lm_eval_task import TASKS_DIR
from .settings import Settings

__all__ = ["BENCHMARKS", "PAPER_COLUMNS", "ID_KEY", "TASKS_DIR", "THINKING_ON", "THINKING_OFF", "Benchmark",
           "BenchmarkUnavailable", "Settings", "describe_benchmarks", "get_benchmark",
           "score_generations", "add_special_tokens_for"]

_ALL: tuple[Benchmark, ...] = (
    math500.BENCHMARK, aime25.BENCHMARK, lcbv6.BENCHMARK, gsm8k.BENCHMARK, humaneval_plus.BENCHMARK,
    mbpp_plus.BENCHMARK, synthetic.MATH, synthetic.CODE, synthetic.CODE_CHAIN,
    synthetic.MATH_LONG, synthetic.CODE_AFFINE, synthetic.MATH_DIRECT, synthetic.MATH_GRADED, synthetic.CODE_GRADED,
    synthetic.MATH_SHORTER,
)
BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in _ALL}
# Table 1's benchmark columns, in the paper's order
PAPER_COLUMNS: tuple[str, ...] = tuple(b.paper_column for b in _ALL if b.paper_column)


def get_benchmark(name: str) -> Benchmark:
    """The registered benchmark ``name``; UserError naming the registered ones otherwise."""
    if name not in BENCHMARKS:
        raise UserError(f"unknown benchmark {name!r}; registered: {sorted(BENCHMARKS)}")
    return BENCHMARKS[name]


def describe_benchmarks() -> dict[str, dict]:
    """What the schema, report and CLI need to list: per benchmark its paper column, group, availability (and why
    not), data source and default settings."""
    return {name: {"paper_column": b.paper_column, "group": b.group, "available": b.available, "reason": b.reason,
                   "source": b.source, "defaults": asdict(b.defaults)} for name, b in BENCHMARKS.items()}


def score_generations(name: str, generations: str | Path, data: str | Path | None = None,
                      settings: Mapping[str, Any] | None = None, work_dir: str | Path | None = None) -> dict:
    """Score a generations file (``{"id", "completion"}`` per line): ``{"benchmark", "split", "accuracy", "metrics",
    "n", "per_problem", "generations", "data", "limit_applied"}`` (``split``: where the problems come from,
    :meth:`Benchmark.problem_split`; each ``per_problem`` record with its ``cluster`` where the benchmark's problems
    come in families: :meth:`Benchmark.cluster`).

    ``data`` is the test file the generations answer: one the benchmark stage wrote is the problem set and is never
    cut again; a file in the source's own schema is cut only to a ``limit`` the settings state. Without ``data`` the
    benchmark's own test set is fetched, and its ``limit`` (stated or the default) applies there, as in the benchmark
    stage. ``limit_applied`` records which limit chose the problems and where (:meth:`Benchmark.problem_set`).
    ``settings`` is the benchmark's config section; ``work_dir`` holds the scorer's scratch files (a temporary folder
    if None). The CLI's ``python -m sbd_core score`` writes this result (see :func:`sbd_core.pipeline.run_score`).
    """
    bench = get_benchmark(name)
    resolved = bench.settings(settings)
    stated_limit = resolved.limit if settings and "limit" in settings else None
    split = bench.problem_split(data, resolved, settings.get("split") if settings else None)
    completions = read_generations(generations, samples=bench.several_samples)
    with tempfile.TemporaryDirectory(prefix=f"score_{name}_", dir=work_dir) as tmp:
        problems, limit_applied = bench.problem_set(data, resolved, stated_limit, tmp)
        bench.check_completions(problems, completions, f"{generations} (answering {data or bench.source})")
        result = bench.score(problems, completions, tmp, resolved)
    clusters = {p[ID_KEY]: bench.cluster(p) for p in problems}
    if any(c is not None for c in clusters.values()):
        result["per_problem"] = {i: {**r, "cluster": clusters[i]} for i, r in result["per_problem"].items()}
    return {"benchmark": name, "split": split, **result, "generations": str(generations),
            "data": str(data) if data is not None else bench.source, "limit_applied": limit_applied}
