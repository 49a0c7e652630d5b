"""Deprecated: the synthetic ``math`` benchmark's scorer under its old name, kept until ``pipeline.run_score`` calls
the benchmark registry (``sbd_core.benchmarks.get_benchmark(task).score``) itself. Delete it then."""

from __future__ import annotations

from pathlib import Path

__all__ = ["score_math"]


def score_math(problems: list[dict], generations_path: Path, work_dir: Path) -> dict:
    """Exact-match accuracy of the stored completions (JSON lines with ``task_id`` or ``id`` and ``completion``) on
    the synthetic math ``problems``; see :class:`sbd_core.benchmarks.lm_eval_task.LmEvalBenchmark.score`."""
    from sbd_core.benchmarks import get_benchmark, read_generations

    bench = get_benchmark("math")
    return bench.score(bench.problems(problems, "problems"), read_generations(generations_path), work_dir,
                       bench.settings())
