"""HumanEval+ and MBPP+ problems in evalplus's schema: validation, the programs to run, their inputs.

A problem is one record of evalplus's release files (HumanEval+ v0.1.10, MBPP+ v0.2.0) exactly as loaded from
the jsonl (``json.loads`` of each line): ``task_id`` (``HumanEval/<n>`` or ``Mbpp/<n>``), ``prompt``,
``entry_point``, ``canonical_solution``, ``base_input`` and ``plus_input`` (lists of positional-argument lists),
``atol``, ``contract`` and, for MBPP+, ``assertion``. MBPP+ inputs are stored as JSON, so tuples, sets and
complex numbers arrive as lists/strings; ``task_inputs`` converts them back with evalplus's own
``mbpp_deserialize_inputs`` (as ``evalplus.data.get_mbpp_plus`` does), so do not convert them beforehand.

Programs, as in evalplus: the reference program is ``prompt + canonical_solution``; a sample is either a
*completion* appended to the prompt (``completion_format="append"``, the default for HumanEval+, whose prompt is
a function signature and docstring) or a full *program* run as it is (``"program"``, the default for MBPP+, whose
prompt is prose in a string literal, so models answer with a whole solution).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

__all__ = ["DATASETS", "COMPLETION_FORMATS", "validate_problems", "task_inputs", "reference_program",
           "sample_program", "output_modes"]

COMPLETION_FORMATS = ("append", "program")
COMMON_KEYS = ("task_id", "prompt", "entry_point", "canonical_solution", "base_input", "plus_input", "atol",
               "contract")


@dataclass(frozen=True)
class DatasetRules:
    """What a dataset's records must look like and how its samples are read by default."""

    task_id_pattern: str
    required_keys: tuple[str, ...]
    default_completion_format: str


DATASETS = {
    "humaneval": DatasetRules(r"HumanEval/\d+", COMMON_KEYS, "append"),
    "mbpp": DatasetRules(r"Mbpp/\d+", COMMON_KEYS + ("assertion",), "program"),
}


def _problem_error(index: int, problem: Mapping, message: str) -> ValueError:
    name = problem.get("task_id", "?") if isinstance(problem, Mapping) else "?"
    return ValueError(f"problems[{index}] ({name}): {message}")


def _check_record(index: int, problem: Any, rules: DatasetRules, dataset: str) -> None:
    if not isinstance(problem, Mapping):
        raise _problem_error(index, {}, f"is a {type(problem).__name__}, expected a dict (one evalplus record)")
    missing = [key for key in rules.required_keys if key not in problem]
    if missing:
        raise _problem_error(index, problem, f"lacks required keys {missing} of the {dataset} schema")
    task_id = problem["task_id"]
    if not isinstance(task_id, str) or not re.fullmatch(rules.task_id_pattern, task_id):
        raise _problem_error(index, problem, f"task_id {task_id!r} does not match {rules.task_id_pattern!r}; "
                                             f"is dataset={dataset!r} the right dataset?")
    for key in ("prompt", "canonical_solution", "contract") + (("assertion",) if dataset == "mbpp" else ()):
        if not isinstance(problem[key], str):
            raise _problem_error(index, problem, f"{key!r} must be a string, got {type(problem[key]).__name__}")
    if not isinstance(problem["entry_point"], str) or not problem["entry_point"].isidentifier():
        raise _problem_error(index, problem, f"entry_point {problem['entry_point']!r} is not a function name")
    for key in ("base_input", "plus_input"):
        inputs = _input_list(problem[key])
        if not isinstance(inputs, list) or not all(isinstance(args, list) for args in inputs):
            raise _problem_error(index, problem, f"{key!r} must be a list of argument lists (JSON as released)")
    atol = problem["atol"]
    if isinstance(atol, bool) or not isinstance(atol, (int, float)) or not atol >= 0:
        raise _problem_error(index, problem, f"atol must be a number >= 0, got {atol!r}")


def _input_list(inputs: Any) -> Any:
    """An input set; ``{}`` counts as no inputs (evalplus iterates it: an MBPP+ pre-release has one, Mbpp/793)."""
    return [] if isinstance(inputs, dict) and not inputs else inputs


def validate_problems(problems: Sequence[Mapping[str, Any]], dataset: str) -> None:
    """Raise ValueError naming the record and key when ``problems`` is not a valid ``dataset`` problem list.

    Checks: a non-empty list of dicts with the dataset's keys and types, ids ``HumanEval/<n>`` or ``Mbpp/<n>``
    (evalplus reads the number of MBPP ids), unique ids, inputs as lists of argument lists, ``atol`` >= 0."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {dataset!r}")
    if not isinstance(problems, Sequence) or isinstance(problems, (str, bytes)) or not problems:
        raise ValueError(f"problems must be a non-empty list of evalplus {dataset} records (for a dict keyed by "
                         f"task_id, as evalplus's loaders return, pass list(problems.values()))")
    seen: set[str] = set()
    for index, problem in enumerate(problems):
        _check_record(index, problem, DATASETS[dataset], dataset)
        if problem["task_id"] in seen:
            raise _problem_error(index, problem, "duplicate task_id")
        seen.add(problem["task_id"])


def task_inputs(problem: Mapping[str, Any], dataset: str) -> tuple[list, list]:
    """(base inputs, plus inputs) as the programs receive them (MBPP+: evalplus's deserialisation)."""
    base, plus = _input_list(problem["base_input"]), _input_list(problem["plus_input"])
    if dataset == "mbpp":
        from evalplus.data.mbpp import mbpp_deserialize_inputs

        return mbpp_deserialize_inputs(problem["task_id"], base), mbpp_deserialize_inputs(problem["task_id"], plus)
    return base, plus


def reference_program(problem: Mapping[str, Any]) -> str:
    """The program whose outputs are the expected outputs (``evalplus.evaluate.get_groundtruth``)."""
    return problem["prompt"] + problem["canonical_solution"]


def sample_program(problem: Mapping[str, Any], text: str, completion_format: str) -> str:
    """The program to score: prompt + completion ("append") or the text alone ("program")."""
    return problem["prompt"] + text if completion_format == "append" else text


def output_modes(problem: Mapping[str, Any], dataset: str) -> tuple[str, str]:
    """How outputs are reduced before comparison: (reference, sample) modes for the worker.

    MBPP tasks in evalplus's ``MBPP_OUTPUT_NOT_NONE_TASKS`` return unserialisable objects: evalplus compares only
    ``out is not None`` (``trusted_exec(output_not_none=True)``), accepting a bool sample as it is
    (``unsafe_execute``)."""
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS

    if dataset == "mbpp" and problem["entry_point"] in MBPP_OUTPUT_NOT_NONE_TASKS:
        return "is_not_none", "bool_or_not_none"
    return "plain", "plain"
