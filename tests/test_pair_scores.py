"""scripts/pair_scores.py: two score files compared problem by problem with the report's procedure, on files written
here with hand-counted tables."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("pair_scores", Path(__file__).parents[1] / "scripts" / "pair_scores.py")
pair_scores = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(pair_scores)


def _score(path: Path, verdicts: list[bool], prefix: str = "p") -> Path:
    per_problem = {f"{prefix}/{i}": {"correct": v} for i, v in enumerate(verdicts)}
    path.write_text(json.dumps({"accuracy": sum(verdicts) / len(verdicts), "per_problem": per_problem}))
    return path


def test_a_pair_gives_its_accuracies_difference_and_disagreement(tmp_path):
    # 20 problems: both right on 14, A alone on 3, B alone on 1, neither on 2
    a = [True] * 14 + [True] * 3 + [False] * 1 + [False] * 2
    b = [True] * 14 + [False] * 3 + [True] * 1 + [False] * 2
    row = pair_scores.compare(_score(tmp_path / "a.json", a), _score(tmp_path / "b.json", b), 0.02, 1000)
    assert row["problems"] == 20
    assert row["accuracy_a"] == pytest.approx(17 / 20) and row["accuracy_b"] == pytest.approx(15 / 20)
    assert row["diff"] == pytest.approx(2 / 20)
    assert row["diff_lo"] < row["diff"] < row["diff_hi"]
    assert not row["inside_margin"]  # 20 problems cannot show a 2-point equivalence
    assert row["disagree"] == pytest.approx(4 / 20)
    assert row["half_width_at"] == pytest.approx(1.959964 * math.sqrt(0.2 / 1000), rel=1e-5)


def test_identical_files_are_inside_any_margin_with_enough_problems(tmp_path):
    verdicts = [True] * 950 + [False] * 50
    row = pair_scores.compare(_score(tmp_path / "a.json", verdicts), _score(tmp_path / "b.json", verdicts))
    assert row["diff"] == 0.0 and row["disagree"] == 0.0 and row["inside_margin"]
    assert "| +0.0 [" in pair_scores.markdown([row])


def test_files_of_other_problems_are_refused_with_both_names(tmp_path, capsys):
    a = _score(tmp_path / "a.json", [True, False])
    b = _score(tmp_path / "b.json", [True, False], prefix="q")
    with pytest.raises(ValueError, match="a.json and .*b.json do not hold the same problems"):
        pair_scores.compare(a, b)
    with pytest.raises(SystemExit):
        pair_scores.main([f"{a}::{b}"])
    assert "do not hold the same problems" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pair_scores.main([str(a)])
    assert "expected two score files joined by '::'" in capsys.readouterr().err
