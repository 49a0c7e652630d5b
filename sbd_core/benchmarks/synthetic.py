"""The embedded default's synthetic tasks as benchmarks: ``math`` (GSM8K-style) and ``code`` (HumanEval-style).

Their problems are generated from a seed by :mod:`sbd_core.tasks` (``make_problems(split, n, seed)``; ``limit`` is the
number of problems, ``split`` the held-out split they come from: ``test``, the default, or ``dev``, the development
split the recipe is tuned on) instead of downloaded, and they also provide the train rows the tiny models are trained
on (:meth:`training_rows`). Prompts are the task modules' plain text (``prompt_text``), stop strings their
``stop_sequences`` (chat prompts are refused); ``math`` is scored by lm-eval with the task's own ``#### N`` extraction
(``lm_eval_tasks/sbd_synth_math.yaml``), ``code`` by the code scorer on the prompt plus the completion.
"""

from __future__ import annotations

from sbd_core.errors import UserError
from sbd_core.tasks import get_task
from sbd_core.tasks.graded import HARD_EVERY
from sbd_core.tasks.math_task import DIRECT_DIGITS, LONG_DIGITS

from .code import CodeBenchmark
from .lm_eval_task import LmEvalBenchmark
from .settings import GeneratedCodeSettings, GeneratedSettings

__all__ = ["MATH", "MATH_LONG", "MATH_DIRECT", "MATH_GRADED", "MATH_SHORTER", "CODE", "CODE_CHAIN", "CODE_AFFINE",
           "CODE_GRADED"]

_DEFAULTS = dict(max_new_tokens=96, limit=100, chat=False)  # the embedded default's decode budget and test size


class _Generated:
    """Plain-text problems from a synthetic task generator (mixed into a benchmark class)."""

    def settings(self, mapping=None):
        """The validated settings; ``chat`` must be false and ``limit`` (the number of test problems) set."""
        settings = super().settings(mapping)
        if settings.chat:
            raise UserError(f"benchmarks.{self.name}.chat must be false: the synthetic tasks have plain-text prompts "
                            "only (their tiny tokenizer has no chat template)")
        if settings.limit is None:
            raise UserError(f"benchmarks.{self.name}.limit must be an integer >= 1: it is the number of problems "
                            "generated")
        return settings

    def _source_rows(self, settings) -> list[dict]:
        return get_task(self.name).make_problems(settings.split, settings.limit, settings.seed)

    def training_rows(self, split: str, n: int, seed: int) -> list[dict]:
        """``n`` ``{"task", "task_id", "prompt", "target"}`` rows of ``split`` (the data stage: "train")."""
        task = get_task(self.name)
        return [{"task": self.name, "task_id": p["task_id"], "prompt": task.prompt_text(p),
                 "target": task.target_text(p)} for p in task.make_problems(split, n, seed)]

    def default_stops(self, chat: bool) -> tuple[str, ...]:
        return get_task(self.name).stop_sequences

    def prompt(self, problem: dict, tokenizer, settings) -> str:
        """The task module's plain-text prompt."""
        return get_task(self.name).prompt_text(problem)


class SyntheticMath(_Generated, LmEvalBenchmark):
    """Synthetic math: each problem carries the task's prompt text, which the task YAML shows the model."""

    def _prepare(self, problem: dict) -> dict:
        return {**problem, "prompt": get_task(self.name).prompt_text(problem)}


class SyntheticCode(_Generated, CodeBenchmark):
    """Synthetic code: the program is the task's prompt plus the completion, unsanitized, as the embedded default has
    always scored it."""

    def program(self, problem: dict, completion: str, settings) -> str:
        return self.prompt(problem, None, settings) + completion

    def cluster(self, problem: dict) -> str:
        """The problem's family (its entry point: one function name per family, :mod:`sbd_core.tasks.code_task`)."""
        return problem["entry_point"]


def _math(name: str, max_new_tokens: int, **source) -> SyntheticMath:
    """A math benchmark over the task ``name`` (the math task's records and ``#### N`` answer, one lm-eval task)."""
    return SyntheticMath(
        name=name, paper_column=None, group="synthetic", task="sbd_synth_math", headline="exact_match,none",
        answer_of=get_task(name).extract_answer, required_fields=("task_id", "question", "answer"),
        source={"generator": "sbd_core.tasks.math_task", **source},
        defaults=GeneratedSettings(**{**_DEFAULTS, "max_new_tokens": max_new_tokens}))


MATH = _math("math", _DEFAULTS["max_new_tokens"])
# the math task on longer numbers; its solutions run to 103 tokens
MATH_LONG = _math("math_long", 112, operand_digits=LONG_DIGITS)
# each step's result written at once (no columns) on shorter numbers; its solutions run to 29 tokens
MATH_DIRECT = _math("math_direct", 48, operand_digits=DIRECT_DIGITS, worked=False)
# the math task with one problem in nine a product written at once (sbd_core/tasks/graded.py)
MATH_GRADED = _math("math_graded", _DEFAULTS["max_new_tokens"], hard="sbd_core.tasks.math_task.make_products",
                    hard_every=HARD_EVERY)
# the math task's subtractions whose result is shorter than the number it is taken from, alone (a training source)
MATH_SHORTER = _math("math_shorter", _DEFAULTS["max_new_tokens"], keep="sbd_core.tasks.math_task.shorter_result")


def _code(name: str, generator: str, **source) -> SyntheticCode:
    """A code benchmark over the task ``name`` (evalplus records, scored by the code scorer)."""
    return SyntheticCode(name=name, paper_column=None, group="synthetic", dataset="humaneval", release=None,
                         source={"generator": generator, **source}, defaults=GeneratedCodeSettings(**_DEFAULTS))


CODE = _code("code", "sbd_core.tasks.code_task")
CODE_CHAIN = _code("code_chain", "sbd_core.tasks.code_chain_task")
CODE_AFFINE = _code("code_affine", "sbd_core.tasks.code_affine_task")
# code_chain with one problem in nine a fold whose slope and intercept are products (sbd_core/tasks/graded.py)
CODE_GRADED = _code("code_graded", "sbd_core.tasks.code_chain_task", hard="sbd_core.tasks.code_affine_task.FOLD_TABLE",
                    hard_every=HARD_EVERY)
