"""``evaluate_code``: pass@1 of one sample per problem on HumanEval+ or MBPP+, judged outside the sample's process.

Two phases, each on its own pool of sandboxed workers (``pool.py``), so no process that runs a sample ever
held an expected output:

1. reference: every problem's ``prompt + canonical_solution`` runs on its base and plus inputs (timed per input,
   as ``evalplus.evaluate.get_groundtruth`` does); its outputs, returned as plain data, are the expected outputs
   and stay in this (trusted) process. A reference that fails raises RuntimeError: the dataset is broken.
2. samples: each sample runs on the same inputs with evalplus's limits -- per input max(1 s, 4 x the reference's
   time) (``DEFAULT_MIN_TIME_LIMIT``, ``DEFAULT_GT_TIME_LIMIT_FACTOR``), per input set min(60 s, their sum) + 2 s
   (``untrusted_check``), ``max_memory_bytes`` of address space, evalplus's ``reliability_guard`` -- and reports
   its outputs; ``oracle.py`` compares them with evalplus's rules.

"plus" means passing the base AND the plus inputs, as evalplus counts it (``base_status == plus_status ==
"pass"``); both statuses are reported independently.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from evalplus.config import DEFAULT_GT_TIME_LIMIT_FACTOR, DEFAULT_MIN_TIME_LIMIT

from sbd_core.sandbox import limits
from sbd_core.io_utils import write_json_atomic

from . import problems as schema
from .oracle import RunReport, input_set_status, output_matches
from .plain_data import Unserialisable, encode
from .pool import SandboxSettings, detect_isolation, parse_report, run_requests

__all__ = ["evaluate_code", "MISSING_STATUS", "INPUT_SETS"]

MISSING_STATUS = "missing"  # status of problems without a sample
INPUT_SETS = ("base", "plus")
EVALPLUS_TIMEOUT_PER_TASK = 60.0  # evalplus's default cap on one input set (``untrusted_check``)


@dataclass(frozen=True)
class _Task:
    """One problem, ready to run: its inputs per input set and how outputs are reduced."""

    task_id: str
    entry_point: str
    atol: float
    inputs: dict[str, list]
    encoded_inputs: dict[str, Any]
    reference: str
    reference_mode: str
    sample_mode: str


def _prepare(problem: Mapping[str, Any], dataset: str) -> _Task:
    base, plus = schema.task_inputs(problem, dataset)
    try:
        encoded = {"base": encode(base), "plus": encode(plus)}
    except (Unserialisable, RecursionError) as exc:
        raise ValueError(f"{problem['task_id']}: inputs are not plain data ({exc})") from exc
    reference_mode, sample_mode = schema.output_modes(problem, dataset)
    return _Task(problem["task_id"], problem["entry_point"], problem["atol"], {"base": base, "plus": plus},
                 encoded, schema.reference_program(problem), reference_mode, sample_mode)


def _run_references(tasks: list[_Task], settings: SandboxSettings, parallel: int, deadline: float
                    ) -> dict[tuple[str, str], RunReport]:
    """Expected outputs and reference times per (task_id, input set); raise RuntimeError if a reference fails.

    Like ``get_groundtruth``, one process runs a reference on both input sets (base, then plus)."""
    requests = [{"id": i, "program": task.reference, "entry_point": task.entry_point,
                 "inputs": task.encoded_inputs["base"] + task.encoded_inputs["plus"], "time_limits": None,
                 "deadline_s": _remaining(deadline), "memory_bytes": None, "output_mode": task.reference_mode,
                 "record_time": True, "guard": None} for i, task in enumerate(tasks)]
    raw = run_requests(requests, settings, parallel, _remaining(deadline))
    expected = {}
    for i, task in enumerate(tasks):
        n_base, n_all = len(task.inputs["base"]), len(task.inputs["base"]) + len(task.inputs["plus"])
        report = parse_report(*raw[i], n_all)
        if report.error is not None or len(report.outputs) != n_all:
            failed_set = "base" if len(report.outputs) < n_base else "plus"
            raise RuntimeError(
                f"the reference solution of {task.task_id} failed on its {failed_set} inputs after "
                f"{len(report.outputs)} of {n_all} ({report.outcome}, {report.error}: {report.detail}); "
                f"the problem record is broken")
        for input_set, part in (("base", slice(0, n_base)), ("plus", slice(n_base, n_all))):
            expected[task.task_id, input_set] = RunReport("done", report.outputs[part], report.times[part])
    return expected


def _sample_limits(reference: RunReport, max_memory_bytes: int) -> dict:
    time_limits = [max(DEFAULT_MIN_TIME_LIMIT, DEFAULT_GT_TIME_LIMIT_FACTOR * t) for t in reference.times]
    return {"time_limits": time_limits, "deadline_s": min(EVALPLUS_TIMEOUT_PER_TASK, sum(time_limits)) + 2.0,
            "memory_bytes": max_memory_bytes, "record_time": False, "guard": "evalplus"}


def _judge(task: _Task, input_set: str, report: RunReport, expected: RunReport, dataset: str) -> str:
    inputs, wanted = task.inputs[input_set], expected.outputs

    def matches(index: int, out: Any, atol: float) -> tuple[bool, float]:
        return output_matches(dataset, task.entry_point, inputs[index], wanted[index], out, atol)

    return input_set_status(report, len(inputs), matches, task.atol)


def _run_samples(tasks: list[_Task], programs: dict[str, str], expected: dict, settings: SandboxSettings,
                 parallel: int, max_memory_bytes: int, deadline: float, dataset: str) -> dict[str, dict[str, str]]:
    """Status per task_id and input set of every sample in ``programs``."""
    keys = [(task, input_set) for task in tasks if task.task_id in programs for input_set in INPUT_SETS]
    requests = [{"id": i, "program": programs[task.task_id], "entry_point": task.entry_point,
                 "inputs": task.encoded_inputs[input_set], "output_mode": task.sample_mode,
                 **_sample_limits(expected[task.task_id, input_set], max_memory_bytes)}
                for i, (task, input_set) in enumerate(keys)]
    raw = run_requests(requests, settings, parallel, _remaining(deadline))
    statuses: dict[str, dict[str, str]] = {}
    for i, (task, input_set) in enumerate(keys):
        report = parse_report(*raw[i], len(task.inputs[input_set]))
        status = _judge(task, input_set, report, expected[task.task_id, input_set], dataset)
        statuses.setdefault(task.task_id, {})[input_set] = status
    return statuses


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise RuntimeError("code evaluation did not finish within timeout_s; no result was written")
    return left


def _validate_call(completions: Any, task_ids: set[str], completion_format: str, parallel: Any,
                   max_memory_bytes: Any, timeout_s: Any) -> None:
    if not isinstance(completions, Mapping):
        raise ValueError("completions must be a dict task_id -> sample text")
    unknown = sorted(set(completions) - task_ids)
    if unknown:
        raise ValueError(f"completions for task ids not in problems: {unknown[:5]}")
    bad = [task_id for task_id, text in completions.items() if not isinstance(text, str)]
    if bad:
        raise ValueError(f"completions must be strings; not for {bad[:5]}")
    if completion_format not in schema.COMPLETION_FORMATS:
        raise ValueError(f"completion_format must be one of {schema.COMPLETION_FORMATS}, got {completion_format!r}")
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"parallel must be an int >= 1, got {parallel!r}")
    if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int) or max_memory_bytes < 16 << 20:
        raise ValueError(f"max_memory_bytes must be an int >= 16 MiB, got {max_memory_bytes!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a number > 0, got {timeout_s!r}")


def _summarise(task_ids: list[str], statuses: dict, dataset: str, jailed: bool) -> dict:
    per_problem = {}
    for task_id in task_ids:
        base, plus = (statuses[task_id][s] for s in INPUT_SETS) if task_id in statuses else (MISSING_STATUS,) * 2
        per_problem[task_id] = {"base_status": base, "plus_status": plus, "passed_base": base == "pass",
                                "passed_plus": base == plus == "pass"}
    n = len(task_ids)
    return {
        "pass@1_base": sum(r["passed_base"] for r in per_problem.values()) / n,
        "pass@1_plus": sum(r["passed_plus"] for r in per_problem.values()) / n,
        "n": n, "dataset": dataset, "per_problem": per_problem,
        "network_isolated": jailed, "filesystem_readonly": jailed,
        "evalplus_version": importlib.metadata.version("evalplus"),
    }


def evaluate_code(problems: Sequence[Mapping[str, Any]], completions: Mapping[str, str], work_dir: Path, *,
                  dataset: str = "humaneval", completion_format: str | None = None, parallel: int = limits.PARALLEL,
                  max_memory_bytes: int = limits.MAX_MEMORY_BYTES, timeout_s: float = limits.TIMEOUT_S,
                  output_path: Path | None = None) -> dict:
    """Score one sample per problem on its base and plus inputs; return pass@1 and per-problem statuses.

    Args:
        problems: evalplus records of ``dataset`` as released (see ``problems.validate_problems``).
        completions: task_id -> sample text; a problem without one fails with status "missing".
        work_dir: a throwaway directory is made (and removed afterwards) inside it.
        dataset: "humaneval" (HumanEval+) or "mbpp" (MBPP+).
        completion_format: "append" (prompt + text) or "program" (text alone); default: "append" for
            humaneval, "program" for mbpp (see ``problems``).
        parallel: sandboxed workers per phase.
        max_memory_bytes: address-space limit of each sample process (>= 16 MiB).
        timeout_s: wall-clock limit of the whole evaluation; past it, RuntimeError and nothing is written.
        output_path: if given, the result is also written there atomically.

    Returns:
        ``{"pass@1_base", "pass@1_plus", "n", "dataset", "per_problem", "network_isolated",
        "filesystem_readonly", "evalplus_version"}``; ``per_problem[task_id]``: ``base_status``, ``plus_status``
        ("pass" / "fail" / "timeout" as evalplus reports them, or "missing"), ``passed_base``, ``passed_plus``.
        ``network_isolated`` and ``filesystem_readonly`` are False when this machine cannot build the sandbox
        (no ``unshare``/user namespaces): the samples then ran with evalplus's in-process guard and the seccomp
        filter only (see ``jail.py``), with the host file system and network reachable.
    """
    schema.validate_problems(problems, dataset)
    completion_format = completion_format or schema.DATASETS[dataset].default_completion_format
    _validate_call(completions, {p["task_id"] for p in problems}, completion_format, parallel, max_memory_bytes,
                   timeout_s)
    deadline = time.monotonic() + timeout_s
    tasks = [_prepare(problem, dataset) for problem in problems]
    programs = {p["task_id"]: schema.sample_program(p, completions[p["task_id"]], completion_format)
                for p in problems if p["task_id"] in completions}
    isolation = detect_isolation()
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="code_eval_", dir=work_dir)).resolve()
    try:
        settings = SandboxSettings(run_dir, isolation)
        settings.prepare()
        expected = _run_references(tasks, settings, parallel, deadline)
        statuses = _run_samples(tasks, programs, expected, settings, parallel, max_memory_bytes, deadline, dataset)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    result = _summarise([task.task_id for task in tasks], statuses, dataset, isolation.jailed)
    if output_path is not None:
        write_json_atomic(result, output_path)
    return result
