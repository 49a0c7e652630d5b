"""Tasks below the ceiling by difficulty: a task a tiny model learns to the ceiling, with a share of problems it does
not learn at all (``math_graded``, ``code_graded``).

On a task a tiny model learns only in part, two NTP fine-tunes of one recipe, one seed apart, disagree on 6-16% of
the problems and differ by about 2.4 points (docs/claim-study.md, "an A/A test of the training"): which of the
half-learnt problems a run gets right is the training's chance, so no pair of arms can be shown equivalent within 2
points there, an NTP arm against itself included. Real benchmarks are below the ceiling in another way: a model
solves the problems within its reach and fails those beyond it, and two runs agree on both. A graded task is built
that way: every :data:`HARD_EVERY`-th problem is a hard one (a product of a 2-digit and a 3-digit number, or a fold
whose slope is a product of two-digit constants, written at once), the others come from the easy task (``math``,
``code_chain``), which the tiny models learn to 98-100% (study-r4 and r6 there). The hard problems are in the training
data as well, so the model knows their form; what it cannot do is the computation.

Problems are renumbered in the mixed order (``math/<i>``, ``HumanEval/<i>``); the easy and hard draws take the same
seed, and each keeps its own keys and split hash, so a problem's split is the one it has in its own task.
"""

from __future__ import annotations

from typing import Callable

from .splits import check_count

HARD_EVERY = 9  # one problem in nine is hard: an arm that solves every easy problem and no hard one scores 88.9%
LEVELS = ("easy", "hard")


def level_of(problem_id: str) -> str:
    """The level of a graded task's problem from its id (``"math/17"``: the 18th problem, hard)."""
    index = int(problem_id.rsplit("/", 1)[-1])
    return LEVELS[index % HARD_EVERY == HARD_EVERY - 1]


def mixed(easy: Callable[[str, int, int], list], hard: Callable[[str, int, int], list], id_prefix: str
          ) -> Callable[[str, int, int], list]:
    """A ``make_problems(split, n, seed)`` whose problem ``i`` is hard where ``i % HARD_EVERY`` is the last of a
    cycle, easy otherwise; ``id_prefix``: the prefix of the renumbered task ids (``"math/"``)."""

    def make_problems(split: str, n: int, seed: int) -> list[dict]:
        n_hard = check_count(n) // HARD_EVERY
        easy_rows, hard_rows = iter(easy(split, n - n_hard, seed)), iter(hard(split, n_hard, seed))
        return [{**next(hard_rows if i % HARD_EVERY == HARD_EVERY - 1 else easy_rows), "task_id": f"{id_prefix}{i}"}
                for i in range(n)]
    return make_problems
