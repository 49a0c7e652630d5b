"""evaluate_code's verdicts and contract on small synthetic problems (HumanEval+ and MBPP+ schema), and io_utils.

The HumanEval-style cases share ONE evaluation (module fixture) to stay fast; hostile samples are in
test_code_sandbox.py, real datasets in test_code_eval_datasets.py.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("evalplus")

from sbd_core.sandbox.problems import validate_problems  # noqa: E402
from sbd_core.sandbox.scorer import MISSING_STATUS, evaluate_code  # noqa: E402
from sbd_core.sandbox import scorer  # noqa: E402
from sbd_core.sandbox.pool import Isolation  # noqa: E402
from sbd_core.io_utils import read_jsonl, write_json_atomic, write_jsonl_atomic  # noqa: E402


def problem(num: int, prompt: str, entry: str, canonical: str, base, plus, atol=0) -> dict:
    """One evalplus HumanEval+ record."""
    return {"task_id": f"HumanEval/{num}", "prompt": prompt, "entry_point": entry, "canonical_solution": canonical,
            "base_input": base, "plus_input": plus, "atol": atol, "contract": ""}


ADD = 'def add(a, b):\n    """Return a + b."""\n'
ABS = "def my_abs(x):\n"
MEAN = "def mean(xs):\n"
INC = problem(0, "def inc(x):\n", "inc", "    return x + 1\n", [[1], [2]], [[10]])
CATCH_TIMEOUTS = """\
    import time
    while True:
        try:
            time.sleep(10)
        except BaseException:
            pass
"""
CASES = {  # name: (problem, sample or None, expected (base_status, plus_status))
    "correct": (problem(0, ADD, "add", "    return a + b\n", [[1, 2], [3, 4]], [[-1, 1], [10**9, 10**9]]),
                "    return a + b\n", ("pass", "pass")),
    "wrong": (problem(1, ADD, "add", "    return a + b\n", [[1, 2]], [[5, 5]]), "    return a - b\n", ("fail", "fail")),
    "base_only": (problem(2, ABS, "my_abs", "    return abs(x)\n", [[1], [2]], [[-3]]), "    return x\n",
                  ("pass", "fail")),
    "plus_only": (problem(3, ABS, "my_abs", "    return abs(x)\n", [[-1]], [[4]]), "    return x\n", ("fail", "pass")),
    "missing": (problem(4, ABS, "my_abs", "    return abs(x)\n", [[1]], [[2]]), None, (MISSING_STATUS,) * 2),
    "raises": (problem(5, ABS, "my_abs", "    return abs(x)\n", [[1]], [[2]]), "    raise ValueError\n", ("fail",) * 2),
    "no_entry_point": (problem(6, ABS, "my_abs", "    return abs(x)\n", [[1]], [[2]]),
                       "    return x\nmy_abs = None\n", ("fail",) * 2),
    "syntax_error": (problem(7, ABS, "my_abs", "    return abs(x)\n", [[1]], [[2]]), "    return )\n", ("fail",) * 2),
    # never returns on a negative input: the per-input limit, max(1 s, 4x the reference), always cuts it, however
    # loaded the machine (a sleep just past the limit would race it)
    "slow_input": (problem(8, ABS, "my_abs", "    return abs(x)\n", [[1]], [[-2]]),
                   "    while x < 0:\n        pass\n    return abs(x)\n", ("pass", "fail")),
    "catches_timeouts": (problem(9, ABS, "my_abs", "    return abs(x)\n", [[1]], [[2]]), CATCH_TIMEOUTS,
                         ("timeout", "timeout")),
    "exits_early": (problem(10, ABS, "my_abs", "    return abs(x)\n", [[1], [2]], [[3]]),
                    "    import os\n    os._exit(0)\n", ("timeout", "timeout")),
    "float_tolerance": (problem(11, MEAN, "mean", "    return sum(xs) / len(xs)\n", [[[0.1, 0.2, 0.3]]], [[[1e-3]]]),
                        "    return sum(x + 1 for x in xs) / len(xs) - 1 + 1e-9\n", ("pass", "pass")),
    "float_too_far": (problem(12, MEAN, "mean", "    return sum(xs) / len(xs)\n", [[[0.1, 0.2]]], [[[1.0]]]),
                      "    return sum(xs) / len(xs) + 1e-3\n", ("fail", "fail")),
    "numpy_scalar": (problem(13, MEAN, "mean", "    return sum(xs) / len(xs)\n", [[[1.0, 2.0]]], [[[4.0]]]),
                     "    import numpy\n    return numpy.mean(xs)\n", ("pass", "pass")),
    "generator": (problem(14, "def evens(n):\n", "evens", "    return [i for i in range(n) if i % 2 == 0]\n",
                          [[4]], [[5]]), "    return (i for i in range(n) if i % 2 == 0)\n", ("fail", "fail")),
    "full_program": (problem(15, ADD, "add", "    return a + b\n", [[1, 2]], [[3, 4]]),  # appended to the prompt
                     "import math\n\ndef add(a, b):\n    return math.fsum([a, b])\n", ("pass", "pass")),
    "large_output": (problem(17, "def squares(n):\n", "squares", "    return [i * i for i in range(n)]\n",
                             [[200_000]], [[3]]),  # over 1 MiB: travels as a digest of its exact serialisation
                     "    out = []\n    for i in range(n):\n        out.append(i ** 2)\n    return out\n",
                     ("pass", "pass")),
    "large_output_off_by_one": (problem(18, "def squares(n):\n", "squares", "    return [i * i for i in range(n)]\n",
                                        [[200_000]], [[3]]),
                                "    return [i * i for i in range(n - 1)] + [n * n]\n", ("fail", "fail")),
    "find_zero": (problem(16, "def find_zero(xs):\n", "find_zero", "    return -xs[0] / xs[1]\n", [[[1, 2]]],
                          [[[-6, 3]]], atol=1e-6), "    return -xs[0] / xs[1] + 1e-9\n", ("pass", "pass")),
}


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One evaluation of every case; returns (result, output path, work_dir)."""
    work_dir = tmp_path_factory.mktemp("work")
    out = work_dir / "result.json"
    problems = [case[0] for case in CASES.values()]
    completions = {case[0]["task_id"]: case[1] for case in CASES.values() if case[1] is not None}
    result = evaluate_code(problems, completions, work_dir, parallel=2, timeout_s=120, output_path=out)
    return result, out, work_dir


def test_result_schema_pass_rates_and_cleanup(scored):
    result, out, work_dir = scored
    assert set(result) == {"pass@1_base", "pass@1_plus", "n", "dataset", "per_problem", "network_isolated",
                           "filesystem_readonly", "evalplus_version"}
    assert result["n"] == len(CASES) and result["dataset"] == "humaneval" and result["evalplus_version"] == "0.3.1"
    passed_base = [name for name, (_, _, want) in CASES.items() if want[0] == "pass"]
    passed_plus = [name for name, (_, _, want) in CASES.items() if want == ("pass", "pass")]
    assert result["pass@1_base"] == pytest.approx(len(passed_base) / len(CASES))
    assert result["pass@1_plus"] == pytest.approx(len(passed_plus) / len(CASES))
    assert json.loads(out.read_text()) == result  # written atomically on request
    assert sorted(p.name for p in work_dir.iterdir()) == ["result.json"]  # throwaway directory removed


@pytest.mark.parametrize("name", list(CASES))
def test_statuses_follow_evalplus(scored, name):
    prob, _, (base, plus) = CASES[name]
    record = scored[0]["per_problem"][prob["task_id"]]
    assert record == {"base_status": base, "plus_status": plus, "passed_base": base == "pass",
                      "passed_plus": base == plus == "pass"}


MBPP_SHARED = {"contract": "", "assertion": "", "atol": 0}
MBPP_CASES = {  # evalplus's MBPP special cases, and its input deserialisation (Mbpp/2 gets tuples)
    "Mbpp/2": ("'''Shared elements of two tuples.'''\n", "similar_elements",
               "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n", [[[3, 4, 5, 6], [5, 7, 4, 10]]],
               [[[1, 2, 3], [3, 2]]],
               "def similar_elements(a, b):\n    assert type(a) is tuple\n"
               "    return sorted(set(a) & set(b), reverse=True)\n"),
    "Mbpp/9": ("'''Match 'abbb'.'''\n", "text_match_three",
               "import re\ndef text_match_three(text):\n    return re.search('ab{3}', text)\n", [["abbbc"], ["ac"]],
               [["xabbb"]], "def text_match_three(text):\n    return 'abbb' in text\n"),
    "Mbpp/3": ("'''Not prime.'''\n", "is_not_prime",
               "def is_not_prime(n):\n    return n < 2 or any(n % i == 0 for i in range(2, n))\n",
               [[4], [10]], [[35]], "def is_not_prime(n):\n    return n % 2 == 0\n"),
}


def test_mbpp_rules_and_full_program_samples(tmp_path):
    problems = [{"task_id": task_id, "prompt": prompt, "entry_point": entry, "canonical_solution": canonical,
                 "base_input": base, "plus_input": plus, **MBPP_SHARED}
                for task_id, (prompt, entry, canonical, base, plus, _) in MBPP_CASES.items()]
    samples = {task_id: case[-1] for task_id, case in MBPP_CASES.items()}
    per = evaluate_code(problems, samples, tmp_path, dataset="mbpp")["per_problem"]
    assert per["Mbpp/2"]["passed_plus"]  # compared as sets (MBPP_OUTPUT_SET_EQ_TASKS); inputs arrive as tuples
    assert per["Mbpp/9"]["passed_plus"]  # only "is not None" counts (MBPP_OUTPUT_NOT_NONE_TASKS); a bool passes
    assert per["Mbpp/3"]["base_status"] == "pass" and per["Mbpp/3"]["plus_status"] == "fail"  # 35 is odd
    appended = {task_id: "\n" + case[-1] for task_id, case in MBPP_CASES.items()}
    per = evaluate_code(problems, appended, tmp_path, dataset="mbpp", completion_format="append")["per_problem"]
    assert per["Mbpp/2"]["passed_plus"] and per["Mbpp/9"]["passed_plus"]


def test_unjailed_machines_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(scorer, "detect_isolation", lambda: Isolation())
    result = evaluate_code([INC, {**INC, "task_id": "HumanEval/1"}], {"HumanEval/0": "    return x + 1\n",
                           "HumanEval/1": "    return x\n"}, tmp_path / "work")
    assert not result["network_isolated"] and not result["filesystem_readonly"]
    assert result["pass@1_plus"] == 0.5 and result["per_problem"]["HumanEval/0"]["passed_plus"]
    assert list((tmp_path / "work").iterdir()) == []


def test_whole_evaluation_timeout(tmp_path):
    out = tmp_path / "result.json"
    with pytest.raises(RuntimeError, match="timeout_s"):
        evaluate_code([INC], {"HumanEval/0": "    while True:\n        pass\n"}, tmp_path / "work", timeout_s=0.5,
                      output_path=out)
    assert not out.exists()
    assert list((tmp_path / "work").iterdir()) == []


def test_broken_reference_raises(tmp_path):
    broken = {**INC, "canonical_solution": "    raise ValueError('bad oracle')\n"}
    with pytest.raises(RuntimeError, match="(?s)HumanEval/0.*base inputs.*bad oracle"):
        evaluate_code([broken], {"HumanEval/0": "    return x + 1\n"}, tmp_path / "work")


@pytest.mark.parametrize("problems, completions, kwargs, message", [
    ([{**INC, "task_id": "Mbpp/1"}], {}, {}, "task_id 'Mbpp/1' does not match"),
    ([INC], {}, {"dataset": "mbpp"}, r"lacks required keys \['assertion'\]"),
    ([{k: v for k, v in INC.items() if k != "plus_input"}], {}, {}, r"problems\[0\] \(HumanEval/0\): lacks"),
    ([INC], {"HumanEval/7": "    return 1\n"}, {}, "not in problems"),
    ([INC, INC], {}, {}, "duplicate task_id"),
    ([{**INC, "base_input": [1, 2]}], {}, {}, "'base_input' must be a list of argument lists"),
    ([{**INC, "atol": -1}], {}, {}, "atol must be a number >= 0"),
    ([{**INC, "entry_point": "not a name"}], {}, {}, "is not a function name"),
    ([INC], {}, {"dataset": "apps"}, "dataset must be one of"),
    ([INC], {}, {"completion_format": "patch"}, "completion_format must be one of"),
    ([INC], {}, {"parallel": 0}, "parallel must be"),
    ([INC], {}, {"max_memory_bytes": 1024}, "max_memory_bytes must be"),
    ([INC], {"HumanEval/0": 3}, {}, "completions must be strings"),
    ([], {}, {}, "non-empty list"),
])
def test_invalid_inputs_raise(tmp_path, problems, completions, kwargs, message):
    with pytest.raises(ValueError, match=message):
        evaluate_code(problems, completions, tmp_path, **kwargs)


def test_validate_problems_accepts_both_schemas():
    validate_problems([INC], "humaneval")
    validate_problems([{**INC, "task_id": "Mbpp/7", "assertion": "assert inc(1) == 2", "plus_input": {}}], "mbpp")


def test_io_utils_roundtrip_and_atomicity(tmp_path):
    path = tmp_path / "sub" / "a.jsonl"
    write_jsonl_atomic([{"x": 1}, {"y": "line\nbreak"}], path)
    assert read_jsonl(path) == [{"x": 1}, {"y": "line\nbreak"}]
    target = tmp_path / "r.json"
    write_json_atomic({"ok": True}, target)
    with pytest.raises(TypeError):
        write_json_atomic({"bad": object()}, target)  # fails before touching the file
    assert json.loads(target.read_text()) == {"ok": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "sub"]  # no temp files left
    (tmp_path / "broken.jsonl").write_text('{"a": 1}\nnot json\n')
    with pytest.raises(ValueError, match="broken.jsonl:2"):
        read_jsonl(tmp_path / "broken.jsonl")
