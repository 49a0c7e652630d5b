"""Synthetic tasks for the embedded default: GSM8K-style math (``math_long``: on longer numbers;
``math_direct``: each step's result written without working) and HumanEval-style
code (32 families; 952 in ``code_chain``; ``code_affine``: bodies computed from their docstrings); ``math_graded`` and
``code_graded``: ``math`` and ``code_chain`` with one problem in nine a computation the tiny models cannot learn;
``math_shorter``: only ``math``'s subtractions whose result is shorter than the number it is taken from.

``TASKS`` maps a task name to a :class:`Task` with a uniform interface (``make_problems``,
``prompt_text``, ``target_text``; ``extract_answer`` for math only). ``training_texts`` returns
(prompt, target) pairs for training; a training example is ``prompt + target``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import functools

from . import code_affine_task, code_chain_task, code_task, graded, math_task
from .splits import EVALUATION_SPLITS, SPLITS


@dataclass(frozen=True)
class Task:
    """Uniform view of a task module.

    ``stop_sequences`` are suggested generation stops after the target (the model should emit eos first);
    ``level_of``: a graded task's difficulty level of a problem id (:func:`graded.level_of`; None: one level).
    """

    name: str
    make_problems: Callable[[str, int, int], list]
    prompt_text: Callable[[dict], str]
    target_text: Callable[[dict], str]
    extract_answer: Optional[Callable[[str], Optional[str]]] = None
    stop_sequences: tuple[str, ...] = ()
    level_of: Optional[Callable[[str], str]] = None


_CODE_STOPS = ("\ndef ", "\nclass ", "\nif ", "\nprint(", "\n#")


def _math(name: str, make_problems=None, level_of=None, **variant) -> Task:
    """A task of the math task's prompts, answers and stops; its problems ``make_problems`` or the math task's with
    ``variant``: operand lengths and solution form (:func:`math_task.make_problems`'s ``one_step``, ``two_step`` and
    ``worked``)."""
    make_problems = make_problems or functools.partial(math_task.make_problems, **variant)
    return Task(name, make_problems, math_task.prompt_text, math_task.target_text, math_task.extract_answer,
                ("\n\n", "Question:"), level_of)


def _code(name: str, make_problems, level_of=None) -> Task:
    """A task of code problems in the evalplus schema (the code task's prompts, targets and stops)."""
    return Task(name, make_problems, code_task.prompt_text, code_task.target_text, None, _CODE_STOPS, level_of)


TASKS: dict[str, Task] = {
    "math": _math("math"),
    "code": _code("code", code_task.make_problems),
    "code_chain": _code("code_chain", code_chain_task.make_problems),
    "code_affine": _code("code_affine", code_affine_task.make_problems),
    "math_long": _math("math_long", one_step=math_task.LONG_DIGITS[0], two_step=math_task.LONG_DIGITS[1]),
    "math_direct": _math("math_direct", one_step=math_task.DIRECT_DIGITS[0], two_step=math_task.DIRECT_DIGITS[1],
                         worked=False),
    # below the ceiling by difficulty: one problem in nine a computation the tiny models do not learn (graded.py)
    "math_graded": _math("math_graded", graded.mixed(math_task.make_problems, math_task.make_products, "math/"),
                         graded.level_of),
    # math's shorter-result subtractions alone: a training source raising their share (docs/claim-study.md, lever F)
    "math_shorter": _math("math_shorter", math_task.make_shorter_results),
    "code_graded": _code("code_graded", graded.mixed(code_chain_task.make_problems,
                                                     code_affine_task.FOLD_TABLE.make_problems, "HumanEval/"),
                         graded.level_of),
}


def get_task(name: str) -> Task:
    """Return the registered task ``name``; ValueError naming the known tasks otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}")
    return TASKS[name]


def training_texts(task_names, n_per_task: int, seed: int, split: str = "train") -> list[tuple[str, str]]:
    """(prompt, target) pairs: ``n_per_task`` problems of each task in ``task_names``, in that order.

    Raises ValueError for an empty or duplicated ``task_names``, an unknown task or split, or a bad count.
    """
    if isinstance(task_names, str):
        task_names = [task_names]
    task_names = list(task_names)
    if not task_names:
        raise ValueError("task_names is empty")
    if len(set(task_names)) != len(task_names):
        raise ValueError(f"duplicate task names in {task_names}")
    tasks = [get_task(name) for name in task_names]
    pairs = []
    for task in tasks:
        for problem in task.make_problems(split, n_per_task, seed):
            pairs.append((task.prompt_text(problem), task.target_text(problem)))
    return pairs


__all__ = ["EVALUATION_SPLITS", "SPLITS", "TASKS", "Task", "code_chain_task", "code_task", "get_task", "math_task", "training_texts"]
