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
from sbd_core.report.stats.estimates import wilson_interval
from sbd_core.report.table2 import (DEFAULT_PAPER_TABLE2, build_table2, load_likelihood_scores, load_paper_table2,
                                    paper_table2_display)
from sbd_core.report.stats.verdicts import PairedTable, holm, paired_comparison
from test_report import write_scores

# model -> objective -> task -> (accuracy, stderr)
RUNS = {
    "tiny": {"ntp": {"math_mc": (0.90, 0.01), "code_mc": (0.80, 0.02)},
             "sbd": {"math_mc": (0.88, 0.01), "code_mc": (0.82, 0.02)},
             "sbd_no_ntp_grad": {"math_mc": (0.30, 0.015), "code_mc": (0.25, 0.03)}},
    "other": {"sbd": {"math_mc": (0.70, 0.02)}},  # no NTP arm: no difference to show
}
COLUMNS = {"math_mc": "math (MC)", "code_mc": "code (MC)"}


def per_doc(task: str, accuracy: float, n: int = 200) -> dict:
    """Documents 0..n-1, the first ``accuracy * n`` right; the code questions in 20 families of 10."""
    right = round(accuracy * n)
    docs = [{"doc_id": i, "doc_hash": f"h{i}", "target": 0, "acc": float(i < right),
             **({"cluster": f"family{i % 20}"} if task == "code_mc" else {})} for i in range(n)]
    return {f"sbd_synth_{task}": docs}


def likelihood_score(model, objective, task, accuracy, stderr) -> dict:
    """A score file of the likelihood stage (the keys the report reads, plus per-document results)."""
    return {"model": model, "objective": objective, "task": task, "column": COLUMNS[task], "metric": "acc",
            "accuracy": accuracy, "stderr": stderr, "n": 200, "settings": {"metric": "acc", "problems": 200},
            "metrics": {"acc": accuracy, "acc_stderr": stderr}, "per_doc": per_doc(task, accuracy)}


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
    assert (tiny.at["ntp", "math_mc_lo_pct"], tiny.at["ntp", "math_mc_hi_pct"]) == pytest.approx(
        tuple(100 * v for v in wilson_interval(180, 200)))
    assert tiny.at["sbd", "math_mc_delta_pts"] == pytest.approx(-2.0)
    # math: documents 176-179 right for the NTP arm only (both 176, NTP only 4, neither 20)
    expected = paired_comparison(PairedTable(176, 0, 4, 20), 0.02)
    assert (tiny.at["sbd", "math_mc_delta_lo_pts"], tiny.at["sbd", "math_mc_delta_hi_pts"]) == pytest.approx(
        (100 * expected.lo, 100 * expected.hi))
    assert tiny.at["sbd", "math_mc_diff_p"] == pytest.approx(expected.p_diff)
    assert tiny.at["sbd", "code_mc_delta_pts"] == pytest.approx(2.0)
    assert tiny.at["sbd_no_ntp_grad", "math_mc_delta_pts"] == pytest.approx(-60.0)
    assert tiny.at["sbd_no_ntp_grad", "math_mc_verdict"] == "lower"
    assert tiny.at["sbd_no_ntp_grad", "code_mc_stderr_pts"] == pytest.approx(3.0)
    assert tiny.at["sbd", "math_mc_n"] == 200
    # Holm over the table's 4 comparisons (2 arms x 2 tasks)
    raw = [tiny.at[arm, f"{task}_diff_p"] for arm in ("sbd", "sbd_no_ntp_grad") for task in ("math_mc", "code_mc")]
    adjusted = [tiny.at[arm, f"{task}_diff_p_holm"] for arm in ("sbd", "sbd_no_ntp_grad")
                for task in ("math_mc", "code_mc")]
    assert adjusted == pytest.approx(holm(raw))
    # the code questions come in families: a wider interval than the same verdicts counted independent
    assert tiny.at["ntp", "code_mc_lo_pct"] < 100 * wilson_interval(160, 200)[0]
    other = table[table["model"] == "other"].iloc[0]
    assert other["math_mc_pct"] == pytest.approx(70.0) and pd.isna(other["math_mc_delta_pts"])
    assert pd.isna(other["code_mc_pct"])
    assert list(table.columns[2:7]) == ["math_mc_pct", "math_mc_lo_pct", "math_mc_hi_pct", "math_mc_stderr_pts",
                                        "math_mc_delta_pts"]
    md = files["table2.md"].decode()
    lo, hi = wilson_interval(180, 200)
    assert f"| tiny | ntp | 90.0 [{100 * lo:.1f}, {100 * hi:.1f}] |" in md
    sbd_cell = f"88.0 [{100 * wilson_interval(176, 200)[0]:.1f}, {100 * wilson_interval(176, 200)[1]:.1f}]; -2.0 ["
    assert f"| tiny | sbd | {sbd_cell}" in md and "| other | sbd | 70.0 [" in md
    assert "math (MC) (acc, 0-shot)" in md and "Paper Table 2 (arXiv 2509.04185v1, as printed)" in md
    assert "| SBD w/o NTP loss | 43.2 (-7.7) | 27.2 (+3.1) | 71.1 (-5.2) |" in md
    tex = files["table2.tex"].decode()
    assert sbd_cell in tex and r"sbd\_no\_ntp\_grad" in tex
    assert "not the absolute numbers" in section and "Holm's correction over this table's 4 comparisons" in section


def test_table2_pairs_each_seed_with_its_own_ntp_arm(tmp_path):
    runs = {"tiny": {"ntp": {"math_mc": (0.90, 0.01)}, "sbd": {"math_mc": (0.88, 0.01)},
                     "ntp-s1": {"math_mc": (0.50, 0.01)}, "sbd-s1": {"math_mc": (0.55, 0.01)}}}
    files, _ = build_table2(write_likelihood(tmp_path, runs))
    table = pd.read_csv(io.BytesIO(files["table2.csv"])).set_index("objective")
    assert list(table.index) == ["ntp", "sbd", "ntp-s1", "sbd-s1"]
    assert table.at["sbd", "math_mc_delta_pts"] == pytest.approx(-2.0)
    assert table.at["sbd-s1", "math_mc_delta_pts"] == pytest.approx(5.0)


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
                     "--stats", '{"margin_pts": 5, "margins_pts": {"code_mc": 3}}', "--out", str(out)]) == 0
    assert "| tiny | sbd | 88.0 [" in (out / "table2.md").read_text()
    settings = json.loads((out / "provenance.json").read_text())["settings"]
    assert len(settings["likelihood"]) == len(likelihood) and settings["stats"]["margin_pts"] == 5
    assert "equivalence margin \u00b13 pt, \u00b15 pt" in (out / "report.md").read_text()


def test_bad_likelihood_score_files_are_named(tmp_path):
    paths = write_likelihood(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"model": "tiny"}))
    with pytest.raises(ScoreFileError, match=r"broken.json: missing key\(s\)"):
        load_likelihood_scores(paths + [broken])
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**likelihood_score("tiny", "ntp", "math_mc", 0.9, 0.01), "accuracy": 0.8}))
    with pytest.raises(ScoreFileError, match=r"wrong.json: per_doc 'acc' gives 0.900000"):
        load_likelihood_scores([wrong])
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
