"""Table 2 in the report: numbers from the likelihood stage's score files only, the difference to the NTP arm, the
files it writes, and the paper's printed Table 2 shipped as data."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from sbd_core import cli
from sbd_core.report import ScoreFileError, build_report
from sbd_core.report.table2 import (DEFAULT_PAPER_TABLE2, build_table2, load_likelihood_scores, load_paper_table2,
                                    paper_table2_display)
from test_report import write_scores

# model -> objective -> task -> (accuracy, stderr)
RUNS = {
    "tiny": {"ntp": {"math_mc": (0.90, 0.01), "code_mc": (0.80, 0.02)},
             "sbd": {"math_mc": (0.88, 0.01), "code_mc": (0.82, 0.02)},
             "sbd_no_ntp_grad": {"math_mc": (0.30, 0.015), "code_mc": (0.25, 0.03)}},
    "other": {"sbd": {"math_mc": (0.70, 0.02)}},  # no NTP arm: no difference to show
}
COLUMNS = {"math_mc": "math (MC)", "code_mc": "code (MC)"}


def likelihood_score(model, objective, task, accuracy, stderr) -> dict:
    """A score file of the likelihood stage (the keys the report reads, plus per-document results)."""
    return {"model": model, "objective": objective, "task": task, "column": COLUMNS[task], "metric": "acc",
            "accuracy": accuracy, "stderr": stderr, "n": 200, "settings": {"metric": "acc", "problems": 200},
            "metrics": {"acc": accuracy, "acc_stderr": stderr}, "per_doc": {}}


def write_likelihood(root: Path, runs=RUNS) -> list[Path]:
    paths = []
    for model, arms in runs.items():
        for objective, tasks in arms.items():
            for task, (acc, se) in tasks.items():
                path = root / "likelihood" / model / objective / f"{task}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(likelihood_score(model, objective, task, acc, se)))
                paths.append(path)
    return paths


def test_table2_rows_columns_and_differences_to_ntp(tmp_path):
    files, section = build_table2(write_likelihood(tmp_path))
    table = pd.read_csv(io.BytesIO(files["table2.csv"]))
    assert list(zip(table["model"], table["objective"])) == [
        ("other", "sbd"), ("tiny", "ntp"), ("tiny", "sbd"), ("tiny", "sbd_no_ntp_grad")]
    tiny = table[table["model"] == "tiny"].set_index("objective")
    assert tiny.at["ntp", "math_mc_pct"] == pytest.approx(90.0) and pd.isna(tiny.at["ntp", "math_mc_delta_pts"])
    assert tiny.at["sbd", "math_mc_delta_pts"] == pytest.approx(-2.0)
    assert tiny.at["sbd", "code_mc_delta_pts"] == pytest.approx(2.0)
    assert tiny.at["sbd_no_ntp_grad", "math_mc_delta_pts"] == pytest.approx(-60.0)
    assert tiny.at["sbd_no_ntp_grad", "code_mc_stderr_pts"] == pytest.approx(3.0)
    assert tiny.at["sbd", "math_mc_n"] == 200
    other = table[table["model"] == "other"].iloc[0]
    assert other["math_mc_pct"] == pytest.approx(70.0) and pd.isna(other["math_mc_delta_pts"])
    assert pd.isna(other["code_mc_pct"])
    assert list(table.columns[2:6]) == ["math_mc_pct", "math_mc_stderr_pts", "math_mc_delta_pts", "math_mc_n"]
    md = files["table2.md"].decode()
    assert "| tiny | sbd | 88.0 \u00b11.0 (-2.0) | 82.0 \u00b12.0 (+2.0) |" in md
    assert "| tiny | ntp | 90.0 \u00b11.0 | 80.0 \u00b12.0 |" in md
    assert "| other | sbd | 70.0 \u00b12.0 | \u2013 |" in md
    assert "math (MC) (acc, 0-shot)" in md and "Paper Table 2 (arXiv 2509.04185v1, as printed)" in md
    assert "| SBD w/o NTP loss | 43.2 (-7.7) | 27.2 (+3.1) | 71.1 (-5.2) |" in md
    tex = files["table2.tex"].decode()
    assert r"88.0 $\pm$1.0 (-2.0)" in tex and r"sbd\_no\_ntp\_grad" in tex
    assert "not the absolute numbers" in section and "88.0 \u00b11.0 (-2.0)" in section


def test_report_writes_table2_beside_table1(tmp_path):
    files = build_report(write_scores(tmp_path), likelihood_paths=write_likelihood(tmp_path))
    assert {"table2.csv", "table2.md", "table2.tex", "table1.md"} <= set(files)
    report = files["report.md"].decode()
    assert report.index("Reproduction (Table 1 layout)") < report.index("Table 2 layout: likelihood tasks")
    assert "table2.csv" not in build_report(write_scores(tmp_path / "b"))  # no likelihood scores, no Table 2


def test_cli_report_with_likelihood_scores(tmp_path):
    out = tmp_path / "report"
    scores, likelihood = write_scores(tmp_path), write_likelihood(tmp_path)
    assert cli.main(["report", "--scores", *map(str, scores), "--likelihood", *map(str, likelihood),
                     "--out", str(out)]) == 0
    assert "88.0 \u00b11.0 (-2.0)" in (out / "table2.md").read_text()
    assert len(json.loads((out / "provenance.json").read_text())["settings"]["likelihood"]) == len(likelihood)


def test_bad_likelihood_score_files_are_named(tmp_path):
    paths = write_likelihood(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"model": "tiny"}))
    with pytest.raises(ScoreFileError, match=r"broken.json: missing key\(s\)"):
        load_likelihood_scores(paths + [broken])
    copy = tmp_path / "copy.json"
    copy.write_text(paths[0].read_text())
    with pytest.raises(ScoreFileError, match="duplicate"):
        load_likelihood_scores(paths + [copy])


def test_the_papers_table2_as_printed():
    """arXiv 2509.04185v1, Table 2: values and printed differences; each printed difference is the difference of the
    printed values up to the rounding of the unrounded ones (0.1)."""
    paper = load_paper_table2(DEFAULT_PAPER_TABLE2).set_index("objective")
    assert list(paper["row"]) == ["NTP", "SBD", "SBD w/o NTP loss"]
    assert paper.loc["ntp", ["mmlu", "gpqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge"]].tolist() == [
        50.9, 24.1, 76.4, 69.5, 71.2, 51.4]
    assert paper.at["sbd", "arc_challenge"] == 48.6 and paper.at["sbd_no_ntp_grad", "arc_easy_delta_pts"] == -12.4
    for task in ("mmlu", "gpqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge"):
        for arm in ("sbd", "sbd_no_ntp_grad"):
            assert abs(paper.at[arm, f"{task}_delta_pts"] - (paper.at[arm, task] - paper.at["ntp", task])) <= 0.1 + 1e-9
    shown = paper_table2_display(load_paper_table2()).set_index("Model (3B, 1T tokens)")
    assert shown.at["SBD", "GPQA"] == "27.7 (+3.6)" and shown.at["NTP", "ARC-C"] == "51.4"
