"""LiveCodeBench results as its users read them, from the verdicts of one scoring run: pass@k with lcb_runner's
unbiased estimator over the test file and over the contest-date windows papers call "LCB v6", per difficulty and per
platform (``lcb_runner/evaluation/compute_scores.py``'s groups), the per-problem records of lcb_runner's
``*_eval_all.json``, and the problems where the code extraction rule matters.

Windows select problems of the graded test file as ``compute_scores --start_date --end_date`` does: ``start <=
contest_date <= end`` with the dates at midnight (a contest later on the end day is outside); a window the test file
does not cover holds only the problems it has (``problems`` says how many).
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Mapping, Sequence

__all__ = ["PAPER_WINDOWS", "K_LIST", "pass_at_k", "window_rates", "flat_metrics", "eval_all_records"]

# the windows papers report as "LiveCodeBench v6": (label, first contest day, last contest day)
PAPER_WINDOWS = (("2025-02-01..2025-05-01", "2025-02-01", "2025-05-01"),
                 ("2024-08-01..2025-05-01", "2024-08-01", "2025-05-01"))
K_LIST = (1, 5, 10, 20, 40, 50, 75, 100, 125, 150, 200, 500, 1000)  # codegen_metrics' k_list
DIFFICULTIES = ("easy", "medium", "hard")
PLATFORMS = ("atcoder", "codeforces", "leetcode")
# lcb_runner's error codes (no_code: it runs the empty program, a runtime error; test_error: "Error during testing")
ERROR_CODES = {"wrong_answer": -2, "time_limit_exceeded": -3, "runtime_error": -4, "no_code": -4, "test_error": -4}


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``c`` correct of ``n`` samples, 1 - C(n-c, k) / C(n, k), computed as
    lcb_runner's ``estimate_pass_at_k`` does (a product, no large binomials)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def _rates(graded: Sequence[Sequence[bool]], ks: Sequence[int]) -> dict:
    """``{"problems", "pass@k"...}``: the mean over problems of each problem's estimate (None without problems)."""
    rates = {f"pass@{k}": sum(pass_at_k(len(g), sum(g), k) for g in graded) / len(graded) if graded else None
             for k in ks}
    return {"problems": len(graded), **rates}


def _midnight(day: str | None) -> datetime | None:
    return None if day is None else datetime.strptime(day, "%Y-%m-%d")


def window_rates(problems: Sequence[Mapping], graded: Mapping[str, Sequence[bool]], label: str, ks: Sequence[int],
                 ) -> list[dict]:
    """Per window (the whole test file as ``label``, then :data:`PAPER_WINDOWS`): ``{"window", "start_date",
    "end_date", "problems", "pass@k"..., "difficulty": {name: rates}, "platform": {name: rates}}``."""
    out = []
    for window, start, end in ((label, None, None), *PAPER_WINDOWS):
        first, last = _midnight(start), _midnight(end)
        inside = [p for p in problems if (first is None or first <= datetime.fromisoformat(p["contest_date"]))
                  and (last is None or datetime.fromisoformat(p["contest_date"]) <= last)]
        row = {"window": window, "start_date": start, "end_date": end,
               **_rates([graded[p["question_id"]] for p in inside], ks)}
        for key, names in (("difficulty", DIFFICULTIES), ("platform", PLATFORMS)):
            row[key] = {name: _rates([graded[p["question_id"]] for p in inside if p[key] == name], ks)
                        for name in names}
        out.append(row)
    return out


def flat_metrics(windows: list[dict], ks: Sequence[int]) -> dict[str, float]:
    """The score file's flat metrics: pass@k over the test file, pass@1 per paper window and, over the test file,
    per difficulty and platform (None where no problem falls in the group)."""
    whole = windows[0]
    metrics = {f"pass@{k}": whole[f"pass@{k}"] for k in ks}
    metrics.update({f"pass@1_{w['window']}": w["pass@1"] for w in windows[1:]})
    for key in ("difficulty", "platform"):
        metrics.update({f"pass@1_{name}": rates["pass@1"] for name, rates in whole[key].items()})
    return metrics


def _metadata(verdict: Mapping) -> str:
    """One sample's ``metadata`` entry (a JSON string, as lcb_runner stores it)."""
    if verdict["passed"]:
        return json.dumps({"status": "passed"})
    return json.dumps({"status": verdict["status"], "error_code": ERROR_CODES[verdict["status"]],
                       "error_message": verdict["detail"], "failed_test": verdict["failed_test"]})


def eval_all_records(problems: Sequence[Mapping], outputs: Mapping[str, list[str]],
                     verdicts: Mapping[str, list[dict]]) -> list[dict]:
    """lcb_runner's ``*_eval_all.json``: per problem (by ``question_id``) its fields, ``output_list`` (the raw
    completions), ``code_list`` (the extracted programs, "" for none), ``graded_list``, ``pass@1`` and
    ``metadata`` (per sample, a JSON string: our status and lcb_runner's error code and message)."""
    records = []
    for problem in sorted(problems, key=lambda p: p["question_id"]):
        qid, samples = problem["question_id"], verdicts[problem["question_id"]]
        graded = [v["passed"] for v in samples]
        records.append({
            **{key: problem[key] for key in ("question_title", "question_content", "platform", "question_id",
                                             "contest_id")},
            "contest_date": datetime.fromisoformat(problem["contest_date"]).isoformat(),
            "starter_code": problem["starter_code"], "difficulty": problem["difficulty"],
            "output_list": outputs[qid], "code_list": [v["program"] or "" for v in samples], "graded_list": graded,
            "pass@1": graded.count(True) / len(graded), "metadata": [_metadata(v) for v in samples]})
    return records
