"""The report's LiveCodeBench section: from each LiveCodeBench score file (its ``lcb`` block, written by
``sbd_core.benchmarks.lcbv6``), pass@1 over the graded test file and over the windows papers call "LiveCodeBench
v6", overall and per difficulty and platform, with the problem counts; pass@k when the run scored several samples;
and how many problems the code extraction rule affects. Every number comes from the same decode.
"""

from __future__ import annotations

import pandas as pd

from .render import MISSING, number, to_markdown
from .section import Context, Section

GROUPS = (("difficulty", ("easy", "medium", "hard")), ("platform", ("atcoder", "codeforces", "leetcode")))
NOTE = (
    "pass@1 % (problems) of each run over the graded test file, then over the contest-day windows papers report as "
    "\"LiveCodeBench v6\" (both days included; a window the test file does not cover holds only its problems), "
    "overall and per difficulty and platform. With several samples per problem, pass@k is lcb_runner's unbiased "
    "estimator. *after </think>*: problems whose program would differ if code were taken only from the text after "
    "the thinking block (lcb_runner reads the raw completion, thinking included; so do we). Per problem: the score "
    "file and its `_eval_all.json` (lcb_runner's format).")


def _cell(rates: dict) -> str:
    return number(rates["pass@1"], ".1f", scale=100, suffix=f" ({rates['problems']})")


def lcb_markdown(scores: pd.DataFrame) -> str:
    """The section (empty without a LiveCodeBench score file); ``scores``: :func:`.scores.load_scores`'s frame."""
    runs = scores[scores["lcb"].notna()].sort_values(["model", "label", "train_seed", "train_steps"])
    if runs.empty:
        return ""
    rows = []
    for run in runs.itertuples(index=False):
        block, first = run.lcb, True
        for window in block["windows"]:
            row = {"model": run.model, "run": run.label, "window": window["window"], "pass@1": _cell(window)}
            row.update({name: _cell(window[key][name]) for key, names in GROUPS for name in names})
            row["pass@k"] = ", ".join(f"pass@{k} {100 * window[f'pass@{k}']:.1f}" for k in block["k"][1:]
                                      if window[f"pass@{k}"] is not None) or MISSING
            row["after </think>"] = block["extraction"]["problems_with_another_program_after_thinking"] if first else ""
            rows.append(row)
            first = False
    return "## LiveCodeBench\n\n" + NOTE + "\n\n" + to_markdown(pd.DataFrame(rows))


class LiveCodeBench(Section):
    """The LiveCodeBench section (none without a LiveCodeBench score file)."""

    def markdown(self, ctx: Context) -> list[str]:
        section = lcb_markdown(ctx.scores)
        return [section] if section else []
