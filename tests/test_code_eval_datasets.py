"""Real problems: the reference solutions score 100% on HumanEval and MBPP+, shifted by one problem almost 0%.

Reads the offline copies in ../shared/benchmarks (see ``code_eval_datasets``) and skips where they are missing.
MBPP+ leaves out its 19 slowest problems (reference run over 0.15 s each, Mbpp/599 alone about a minute, all of
them together over 98% of the MBPP+ run time here), and the shifted run uses every third of the rest, to keep the
suite fast; ``benchmarks/bench_code_eval.py`` scores all of them.
"""

from __future__ import annotations

import pytest

pytest.importorskip("evalplus")

from code_eval_datasets import benchmarks_dir, humaneval_plus_like, mbpp_plus  # noqa: E402

from sbd_core.sandbox.problems import validate_problems  # noqa: E402
from sbd_core.sandbox.scorer import evaluate_code  # noqa: E402

FOLDER = benchmarks_dir()
pytestmark = [pytest.mark.slow,  # about 30 s on 2 busy cores
              pytest.mark.skipif(FOLDER is None, reason="../shared/benchmarks is not available here")]
SLOW_MBPP = {84, 96, 123, 162, 247, 255, 256, 271, 300, 389, 392, 453, 583, 589, 592, 599, 603, 630, 745}


def reference_samples(problems: list[dict], shift: int) -> dict[str, str]:
    """Each problem's sample is the reference solution of the problem ``shift`` places further (cyclically)."""
    return {p["task_id"]: problems[(i + shift) % len(problems)]["canonical_solution"] for i, p in enumerate(problems)}


@pytest.fixture(scope="module")
def datasets():
    mbpp = [p for p in mbpp_plus(FOLDER) if int(p["task_id"].split("/")[1]) not in SLOW_MBPP]
    return {"humaneval": humaneval_plus_like(FOLDER), "mbpp": mbpp}


@pytest.mark.parametrize("dataset", ["humaneval", "mbpp"])
def test_reference_solutions_pass_everything(datasets, dataset, tmp_path):
    problems = datasets[dataset]
    validate_problems(problems, dataset)
    assert len(problems) == {"humaneval": 164, "mbpp": 380}[dataset]
    result = evaluate_code(problems, reference_samples(problems, 0), tmp_path, dataset=dataset, timeout_s=600)
    failed = {t: r for t, r in result["per_problem"].items() if not r["passed_plus"]}
    assert failed == {} and result["pass@1_base"] == result["pass@1_plus"] == 1.0


@pytest.mark.parametrize("dataset", ["humaneval", "mbpp"])
def test_reference_solutions_of_the_next_problem_fail(datasets, dataset, tmp_path):
    problems = datasets[dataset] if dataset == "humaneval" else datasets[dataset][::3]
    result = evaluate_code(problems, reference_samples(problems, 1), tmp_path, dataset=dataset, timeout_s=600)
    assert result["pass@1_base"] <= 0.05 and result["pass@1_plus"] <= 0.05, result["pass@1_base"]
