"""The graded tasks' accuracy by difficulty level (:mod:`sbd_core.tasks.graded`): per run of the final budget, the
share of the easy problems and of the hard ones it solves, so a reader sees where a task's accuracy below the ceiling
comes from and that the arms agree on both parts."""

from __future__ import annotations

import pandas as pd

from ..tasks import TASKS
from ..tasks.graded import HARD_EVERY
from .render import to_markdown
from .section import Context, Section
from .seeds import final_budget
from .tables import arm_rank, benchmark_order, family_rank

INTRO = (f"A graded task is a task the model can learn to the ceiling with one problem in {HARD_EVERY} replaced by a "
         "computation it is not expected to learn (docs/tasks.md); its accuracy below the ceiling comes from those. "
         "Each cell: the level's accuracy % (problems solved / problems).")


def level_table(scores: pd.DataFrame, benchmark: str) -> pd.DataFrame | None:
    """One row per run (and seed) of the final budget on the graded ``benchmark``, one column per level; None when the
    benchmark is not graded or no run has per-problem verdicts."""
    task = TASKS.get(benchmark)
    if task is None or task.level_of is None:
        return None
    runs = final_budget(scores)
    runs = runs[(runs["benchmark"] == benchmark) & runs["problems"].notna()]
    if runs.empty:
        return None
    runs = runs.assign(_rank=[(arm_rank(o, s), family_rank(f), s) for o, s, f in
                              zip(runs["objective"], runs["sampler"], runs["family"])]).sort_values(
        ["_rank", "train_seed"], kind="stable")
    rows = []
    for rec in runs.itertuples(index=False):
        levels = pd.Series([task.level_of(i) for i in rec.problems.ids])
        row = {"model": rec.model, "run": rec.label, "seed": rec.train_seed}
        for level in sorted(levels.unique()):
            solved = rec.problems.correct[(levels == level).to_numpy()]
            row[level] = f"{100 * solved.mean():.1f} ({int(solved.sum())} / {len(solved)})"
        rows.append(row)
    return pd.DataFrame(rows)


class Levels(Section):
    """The graded tasks' accuracy by level (none in a run without a graded task)."""

    def markdown(self, ctx: Context) -> list[str]:
        tables = [(bench, level_table(ctx.scores, bench)) for bench in benchmark_order(ctx.scores["benchmark"].unique())]
        tables = [(bench, table) for bench, table in tables if table is not None]
        if not tables:
            return []
        parts = ["## Graded tasks: accuracy by difficulty\n", INTRO + "\n"]
        for bench, table in tables:
            parts += [f"**{bench}**\n", to_markdown(table)]
        return parts
