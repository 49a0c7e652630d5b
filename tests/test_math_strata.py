"""scripts/math_strata.py: a math run's verdicts split by problem kind, the kinds read off the reference steps; checked
against hand cases, against the worked answers the task itself writes, and on score files written here."""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from sbd_core.tasks import get_task

_SPEC = importlib.util.spec_from_file_location("math_strata", Path(__file__).parents[1] / "scripts" / "math_strata.py")
math_strata = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(math_strata)


def test_kinds_by_hand():
    assert math_strata.stratum([[1231, "-", 922]]) == "shorter result"  # 309: the top column's zero dropped
    assert math_strata.stratum([[9086, "-", 1018]]) == "other"  # 8068: as many digits
    assert math_strata.stratum([[61, "+", 71], [132, "-", 84]]) == "shorter result"  # 48
    assert math_strata.stratum([[61, "+", 71]]) == "other"
    assert math_strata.stratum([[12, "*", 345]]) == "product"


def test_a_shorter_result_is_a_worked_answer_whose_top_column_is_zero():
    """An independent reading of the same kind: the task's own worked answer, where a subtraction's last column (the
    top digit) comes out 0 exactly when the result is shorter than the number it is taken from."""
    task = get_task("math_graded")
    problems = task.make_problems("dev", 450, 0)
    kinds = {"product": 0, "shorter result": 0, "other": 0}
    for p in problems:
        steps = re.findall(r"(\d+)-(\d+):([^.]*)\. So", task.target_text(p))
        zero_top = any(columns.split(", ")[-1].endswith("=0") for _, _, columns in steps)
        kind = math_strata.stratum(p["_ops"])
        kinds[kind] += 1
        assert (kind == "shorter result") == zero_top, p["_ops"]
    assert kinds["product"] == 50 and kinds["shorter result"] > 20 and kinds["other"] > 200


def _files(tmp_path, verdicts):
    bench = tmp_path / "bench.jsonl"
    ops = [[[12, "*", 345]], [[1231, "-", 922]], [[450, "-", 401]], [[9086, "-", 1018]], [[3, "+", 4]]]
    bench.write_text("".join(json.dumps({"sbd_id": f"math/{i}", "_ops": o}) + "\n" for i, o in enumerate(ops)))
    score = tmp_path / "score.json"
    score.write_text(json.dumps({"accuracy": sum(verdicts) / len(verdicts), "data": str(bench),
                                 "per_problem": {f"math/{i}": {"correct": v} for i, v in enumerate(verdicts)}}))
    return score, bench


def test_counts_per_kind_from_a_score_file(tmp_path):
    score, _ = _files(tmp_path, [False, True, False, True, True])
    assert math_strata.count(score) == {"product": (0, 1), "shorter result": (1, 2), "other": (2, 2)}
    table = math_strata.markdown([("run", math_strata.count(score))])
    assert table.splitlines()[-1] == "| run | 0 / 1 | 1 / 2 | 2 / 2 |"


def test_a_benchmark_without_reference_steps_is_one_line_naming_file_and_line(tmp_path, capsys):
    score, bench = _files(tmp_path, [True] * 5)
    bench.write_text(bench.read_text() + json.dumps({"sbd_id": "math/5", "question": "?"}) + "\n")
    with pytest.raises(SystemExit):
        math_strata.main([str(score)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{bench}:6: no reference steps" in err


def test_a_score_file_naming_no_benchmark_asks_for_one(tmp_path, capsys):
    score, _ = _files(tmp_path, [True] * 5)
    data = json.loads(score.read_text())
    del data["data"]
    score.write_text(json.dumps(data))
    with pytest.raises(SystemExit):
        math_strata.main([str(score)])
    assert f"{score}: names no benchmark file ('data'); pass --benchmark" in capsys.readouterr().err


def test_a_benchmark_line_that_is_not_json_is_one_line_naming_file_and_line(tmp_path, capsys):
    score, bench = _files(tmp_path, [True] * 5)
    bench.write_text(bench.read_text() + "{not json\n")
    with pytest.raises(SystemExit):
        math_strata.main([str(score)])
    assert f"{bench}:6: invalid JSON line" in capsys.readouterr().err
