"""Tests for sbd_core.report: summary numbers, Table-1 formatting/order, written files, errors, paper Table 1."""

from __future__ import annotations

import io
import json
import logging
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sbd_core import cli, report
from sbd_core.report import (
    DEFAULT_PAPER_TABLE, FIG_DPI, FIG_SIZE_IN, ScoreFileError, load_paper_table, load_scores, paper_table_display,
    build_report, png_size, summarize, table1, write_report,
)
from sbd_core.samplers import sampler_spec
from speed_fixtures import speed_doc, write_speed

REPO = Path(__file__).resolve().parents[1]

MODEL = "tiny"
# (objective, sampler, solver, params, {benchmark: (accuracy, total_nfe, wall seconds)}); total_tokens is 1000 everywhere;
# the wall seconds are the speed stage's (speed_docs), the same in every round.
RUNS = [
    ("ntp", "ntp", "ntp", {}, {"math": (0.80, 1000, 10.0), "code": (0.50, 800, 8.0)}),
    ("sbd", "ntp", "ntp", {}, {"math": (0.81, 1000, 10.0), "code": (0.52, 800, 8.0)}),
    ("sbd", "eb-entropy-g0.1", "eb", {"gamma": 0.1}, {"math": (0.79, 500, 4.0), "code": (0.50, 400, 5.0)}),
    ("sbd", "eb-entropy-g0.4", "eb", {"gamma": 0.4}, {"math": (0.75, 250, 2.0), "code": (0.45, 320, 4.0)}),
    ("sbd", "eb-entropy-g0.01", "eb", {"gamma": 0.01}, {"math": (0.80, 800, 8.0), "code": (0.51, 640, 6.4)}),
    ("sbd", "conf-thr-0.9", "confidence_threshold", {"threshold": 0.9},
     {"math": (0.78, 400, 5.0), "code": (0.49, 200, 2.0)}),
]


def score_dict(objective, sampler, solver, params, benchmark, acc, nfe, model=MODEL, departures=None,
               n_problems=10) -> dict:
    """One score record following the score stage's schema (the cost aggregates as the score stage computes them)."""
    spec = sampler_spec(solver, **params)
    assert spec["tag"] == sampler, (spec["tag"], sampler)
    return {
        "model": model, "objective": objective, "sampler": sampler, "benchmark": benchmark, "accuracy": acc,
        "metrics": {"exact_match": acc}, "n": 10, "n_problems": n_problems, "total_nfe": nfe, "total_tokens": 1000,
        "mean_nfe": nfe / n_problems, "tokens_per_forward": 1000 / nfe, "mean_tokens_per_forward": 1000 / nfe,
        "sampler_spec": spec, "block_size": 16,
        "batch_size": 8, "recipe": {"objective": objective, "departures": departures or {}},
        "provenance": {"git": "x"},
    }


def write_scores(root: Path, runs=RUNS, model=MODEL) -> list[Path]:
    """Write one JSON file per (run, benchmark) under root; return the paths."""
    paths = []
    for objective, sampler, solver, params, benches in runs:
        for bench, (acc, nfe, _) in benches.items():
            path = root / "scores" / f"{model}_{objective}_{sampler}_{bench}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(score_dict(objective, sampler, solver, params, bench, acc, nfe, model)))
            paths.append(path)
    return paths


def speed_docs(runs=RUNS, model=MODEL) -> list[dict]:
    """The speed stage's files of ``runs`` (one per benchmark): each run decodes in its wall seconds, every round."""
    specs = {sampler: sampler_spec(solver, **params) for _, sampler, solver, params, _ in runs}
    return [speed_doc(model, bench, {(o, s): benches[bench][2] for o, s, _, _, benches in runs if bench in benches},
                      specs) for bench in sorted({b for *_, benches in runs for b in benches})]


def write_speeds(root: Path, runs=RUNS, model=MODEL) -> list[Path]:
    return [write_speed(root, doc) for doc in speed_docs(runs, model)]


@pytest.fixture()
def score_paths(tmp_path):
    return write_scores(tmp_path)


@pytest.fixture()
def summary(score_paths):
    return summarize(load_scores(score_paths), speed_docs())


def row(df, sampler, benchmark, objective="sbd"):
    sel = df[(df["sampler"] == sampler) & (df["benchmark"] == benchmark) & (df["objective"] == objective)]
    assert len(sel) == 1
    return sel.iloc[0]


def test_load_scores_one_row_per_file(score_paths):
    df = load_scores(score_paths)
    assert len(df) == len(score_paths) == 12
    assert set(df["path"]) == {str(p) for p in score_paths}


def test_summary_speedups_families_and_parameter_columns(summary):
    expected_cols = {"model", "objective", "sampler", "family", "benchmark", "accuracy", "nfe_speedup", "wall_speedup",
                     "tokens_per_forward", "mean_nfe", "latency_speedup", "n_problems", "gamma", "threshold", "proxy"}
    assert expected_cols <= set(summary.columns) and "solver_params" not in summary.columns
    assert len(summary) == 12
    assert row(summary, "ntp", "math", "ntp")["nfe_speedup"] == 1.0 == row(summary, "ntp", "math", "ntp")["wall_speedup"]
    assert row(summary, "eb-entropy-g0.1", "math")["nfe_speedup"] == pytest.approx(1000 / 500)
    assert row(summary, "eb-entropy-g0.1", "code")["wall_speedup"] == pytest.approx(8.0 / 5.0)
    assert row(summary, "conf-thr-0.9", "code")["nfe_speedup"] == pytest.approx(800 / 200)
    # tokens_per_forward is the row's own tokens / NFE, independent of the baseline
    assert row(summary, "eb-entropy-g0.4", "code")["tokens_per_forward"] == pytest.approx(1000 / 320)
    assert row(summary, "eb-entropy-g0.1", "math")["accuracy"] == pytest.approx(0.79)  # stays a fraction
    assert row(summary, "eb-entropy-g0.4", "math")["gamma"] == 0.4 and row(summary, "eb-entropy-g0.4", "math")["proxy"] == "entropy"
    assert row(summary, "conf-thr-0.9", "math")["threshold"] == 0.9 and pd.isna(row(summary, "conf-thr-0.9", "math")["gamma"])
    assert row(summary, "ntp", "math")["family"] == "ntp"
    assert row(summary, "eb-entropy-g0.01", "math")["family"] == "eb-entropy"
    assert row(summary, "conf-thr-0.9", "math")["family"] == "confidence_threshold"
    assert row(summary, "conf-thr-0.9", "math")["metric_exact_match"] == pytest.approx(0.78)


def test_table1_format_mean_and_order(summary):
    t = table1(summary)
    assert list(t["sampler"]) == ["ntp", "ntp", "eb-entropy-g0.01", "eb-entropy-g0.1", "eb-entropy-g0.4",
                                  "conf-thr-0.9"]
    assert list(t["objective"]) == ["ntp"] + ["sbd"] * 5
    ntp = t.iloc[0]
    assert ntp["math"] == "80.0 (1.00x, wall 1.00x [1.00, 1.00])"
    assert ntp["code"] == "50.0 (1.00x, wall 1.00x [1.00, 1.00])"
    assert ntp["mean NFE speedup"] == 1.0
    g04 = t[t["sampler"] == "eb-entropy-g0.4"].iloc[0]
    assert g04["math"] == "75.0 (4.00x, wall 5.00x [5.00, 5.00])"
    assert g04["code"] == "45.0 (2.50x, wall 2.00x [2.00, 2.00])"
    assert g04["mean NFE speedup"] == pytest.approx((4.0 + 2.5) / 2)
    assert "mean wall speedup" not in t.columns  # wall speedups are per benchmark, each with its interval
    assert list(t.columns[-2:]) == ["math", "code"]  # the registry's order


def test_write_report_files(score_paths, tmp_path):
    out = tmp_path / "report"
    written = write_report(score_paths, out, speed_paths=write_speeds(tmp_path))
    names = {p.name for p in written}
    expected = {"summary.csv", "table1.csv", "table1.md", "table1.tex", "paper_table1.md", "paper_table1.tex",
                "speedup_math.png", "speedup_math.pdf", "speedup_code.png", "speedup_code.pdf", "report.md",
                "figure5.png", "figure5.pdf"}  # the SBD arm sweeps EB (entropy proxy): Figure 5
    assert names == expected
    for name in expected:
        assert (out / name).stat().st_size > 0, name
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    size = (round(FIG_SIZE_IN[0] * FIG_DPI), round(FIG_SIZE_IN[1] * FIG_DPI))
    for bench in ("math", "code"):
        assert png_size((out / f"speedup_{bench}.png").read_bytes()) == size
        assert (out / f"speedup_{bench}.pdf").read_bytes().startswith(b"%PDF")
    csv = pd.read_csv(out / "summary.csv")
    assert row(csv, "eb-entropy-g0.1", "math")["nfe_speedup"] == pytest.approx(2.0)
    tex = (out / "table1.tex").read_text()
    assert r"\begin{tabular}" in tex and r"confidence\_threshold" in tex and r"mean NFE speedup" in tex
    assert re.search(r"(?<!\\)[_%]", tex.split("\n", 1)[1]) is None  # no unescaped _ or % after the comment line
    md = (out / "report.md").read_text()
    assert "not comparable" in md and "docs/claim-study.md" in md and "speedup_math.png" in md
    assert "--configfile config/claim.yaml" in md and "results/reference/claim/" in md
    assert "75.0 (4.00x, wall 5.00x [5.00, 5.00])" in md
    assert "Wall speedup" in md and "tiny / sbd: none" in md
    assert "90.1 (2.77x)" in (out / "paper_table1.md").read_text()


PEER_RUNS = [  # the training-free peers on the NTP arm: HF generate (the NTP arm's forwards), prompt lookup (fewer)
    ("ntp", "hf-generate", "hf_generate", {}, {"math": (0.80, 1000, 12.5), "code": (0.50, 800, 10.0)}),
    ("ntp", "prompt-lookup-10", "prompt_lookup", {}, {"math": (0.80, 625, 20.0), "code": (0.50, 400, 16.0)}),
]


def test_peers_are_rows_of_the_ntp_arm_named_in_words(tmp_path):
    from sbd_core.report.figures import _plot_families, _plot_reference_points, new_axes

    summary = summarize(load_scores(write_scores(tmp_path, RUNS + PEER_RUNS)), speed_docs(RUNS + PEER_RUNS))
    lookup, hf = row(summary, "prompt-lookup-10", "math", "ntp"), row(summary, "hf-generate", "code", "ntp")
    assert (lookup["label"], lookup["mode"], lookup["family"], lookup["tokens"]) == (
        "NTP / prompt lookup (10)", "hf", "prompt-lookup", 10)
    assert lookup["nfe_speedup"] == pytest.approx(1000 / 625) and lookup["tokens_per_forward"] == pytest.approx(1.6)
    assert lookup["wall_speedup"] == pytest.approx(10.0 / 20.0)
    assert (hf["label"], hf["nfe_speedup"], hf["wall_speedup"]) == ("NTP / HF generate", 1.0, pytest.approx(0.8))
    assert row(summary, "eb-entropy-g0.1", "math")["label"] == "SBD / EB \u03b3=0.1"
    assert row(summary, "ntp", "math")["label"] == "SBD / NTP" and row(summary, "ntp", "math", "ntp")["mode"] == "ntp"
    t = table1(summary)
    assert list(t["sampler"][:4]) == ["ntp", "hf-generate", "prompt-lookup-10", "ntp"]  # the NTP arm, then SBD's
    assert list(t["label"][:4]) == ["NTP / NTP", "NTP / HF generate", "NTP / prompt lookup (10)", "SBD / NTP"]
    assert t.iloc[2]["math"] == "80.0 (1.60x, wall 0.50x [0.50, 0.50])"
    fig, ax = new_axes()  # the speedup figure: the peers are points of their own, not a solver curve
    _plot_families(ax, summary[summary["benchmark"] == "math"], "", "os")
    _plot_reference_points(ax, summary[summary["benchmark"] == "math"], "")
    labels = ax.get_legend_handles_labels()[1]
    assert {"NTP / HF generate", "NTP / prompt lookup (10)"} <= set(labels)
    assert not [label for label in labels if label.startswith("ntp model")]
    md = build_report(write_scores(tmp_path, RUNS + PEER_RUNS), paper_table=None,
                      speed_paths=write_speeds(tmp_path, RUNS + PEER_RUNS))["report.md"].decode()
    assert "NTP / prompt lookup (10)" in md and "**Peers**" in md
    section = md.split("## Peers: what SBD buys over a free speedup\n")[1].split("\n## ")[0]
    math_rows = [line for line in section.splitlines() if line.startswith(f"| {MODEL} | math |")]
    runs = [line.split(" | ")[2] for line in math_rows]
    assert runs[:3] == ["NTP / NTP", "NTP / HF generate", "NTP / prompt lookup (10)"]  # then the block decoders
    assert runs[3:] and all(label.startswith("SBD / ") for label in runs[3:]) and "SBD / NTP" not in runs
    # accuracy, tokens per forward, NFE x, wall x (batch), latency x (batch 1), tokens/s (the speed stage's 100 tokens
    # in 20 s)
    assert math_rows[2].endswith("| NTP / prompt lookup (10) | 80.0 | 1.60 | 1.60x | 0.50x (8) | 0.50x | 5 |")
    assert "**A/A control**" in section
    plain = build_report(write_scores(tmp_path / "plain", RUNS), paper_table=None)["report.md"].decode()
    assert "## Peers" not in plain  # no peer decoded: no section


def test_every_number_names_its_split(tmp_path):
    """A score file's split (a synthetic task's dev or test; none: a real benchmark's test set) is a summary column
    and report.md names it per benchmark."""
    paths = write_scores(tmp_path)
    for path in paths:
        if path.name.endswith("_code.json"):
            path.write_text(json.dumps({**json.loads(path.read_text()), "split": "dev"}))
    summary = summarize(load_scores(paths))
    assert set(zip(summary["benchmark"], summary["split"])) == {("math", "test"), ("code", "dev")}
    md = build_report(paths, paper_table=None)["report.md"].decode()
    assert "benchmarks: code (dev split), math (test split)." in md


def test_report_lists_recipe_departures(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(score_dict("ntp", "ntp", "ntp", {}, "math", 0.5, 10,
                                          departures={"matp_on_prompt": False, "block_size_max": 8})))
    md = build_report([path], paper_table=None)["report.md"].decode()
    assert "tiny / ntp: block_size_max=8; matp_on_prompt=False" in md
    assert "inference" not in md  # no sampler departs from the paper's inference: no such list


def test_report_names_where_each_arm_was_fine_tuned(tmp_path):
    """Torch's CPU kernels set a fine-tune's floats, so the report names the CPU and kernels of each arm's model (from
    the recipe the decode stage copies out of its provenance); records without them (older runs) add no such list."""
    where = {"cpu": "AMD EPYC (cpu family 25, model 17, stepping 1)", "cpu_capability": "AVX2"}
    paths = []
    for objective, sampler, solver, trained_on in (("ntp", "ntp", "ntp", where),
                                                   ("sbd", "conf-thr-0.9", "confidence_threshold", None)):
        record = score_dict(objective, sampler, solver, {"threshold": 0.9} if objective == "sbd" else {}, "math",
                            0.5, 10)
        if trained_on:
            record["recipe"]["trained_on"] = trained_on
        paths.append(tmp_path / f"{sampler}.json")
        paths[-1].write_text(json.dumps(record))
    files = build_report(paths, paper_table=None)
    md = files["report.md"].decode()
    assert "- tiny / ntp: AMD EPYC (cpu family 25, model 17, stepping 1), torch CPU kernels AVX2" in md
    assert "- tiny / sbd: not recorded" in md
    assert "trained_on" in files["summary.csv"].decode().splitlines()[0].split(",")
    md = build_report(paths[1:], paper_table=None)["report.md"].decode()
    assert "fine-tuned" not in md and "not recorded" not in md


def test_report_lists_the_samplers_that_depart_from_the_papers_inference(tmp_path):
    runs = [("ntp", "ntp", "ntp", {}), ("sbd", "conf-thr-0.9", "confidence_threshold", {"threshold": 0.9}),
            ("sbd", "conf-thr-0.9-first-ntp", "confidence_threshold", {"threshold": 0.9, "first_token": "ntp"}),
            ("sbd", "conf-thr-0.9-prefix", "confidence_threshold", {"threshold": 0.9, "order": "prefix"})]
    paths = []
    for objective, sampler, solver, params in runs:
        paths.append(tmp_path / f"{sampler}.json")
        paths[-1].write_text(json.dumps(score_dict(objective, sampler, solver, params, "math", 0.5, 10)))
    md = build_report(paths, paper_table=None)["report.md"].decode()
    listed = md.split("Departures from the paper's inference")[1].split("\n## ")[0]
    assert "- conf-thr-0.9-first-ntp: first_token=ntp" in listed and "- conf-thr-0.9:" not in listed
    assert "- conf-thr-0.9-prefix: order=prefix (reveals in position order" in listed
    assert "- conf-thr-0.9-first-ntp: order" not in listed and "- conf-thr-0.9-prefix: first_token" not in listed


PAPER_RUNS = [  # our Llama stand-in on three of the paper's benchmarks: gsm8k (chat), math500 and lcbv6 (reasoning)
    ("ntp", "ntp", "ntp", {}, {"gsm8k": (0.85, 1000, 10.0), "math500": (0.80, 2000, 20.0),
                               "lcbv6": (0.315, 5000, 50.0)}),
    ("sbd", "ntp", "ntp", {}, {"gsm8k": (0.86, 1000, 10.0), "math500": (0.81, 2000, 20.0),
                               "lcbv6": (0.313, 5000, 50.0)}),
    ("sbd", "eb-entropy-g0.35", "eb", {"gamma": 0.35}, {"gsm8k": (0.842, 454, 6.0), "math500": (0.80, 600, 8.0),
                                                        "lcbv6": (0.299, 1000, 12.0)}),
    ("sbd", "eb-entropy-g0.6", "eb", {"gamma": 0.6}, {"gsm8k": (0.84, 400, 5.0)}),
    ("sbd", "eb-entropy-g0.1", "eb", {"gamma": 0.1}, {"math500": (0.81, 560, 7.0), "lcbv6": (0.317, 1250, 14.0)}),
]


def test_paper_comparison_cell_by_cell(tmp_path):
    paths = write_scores(tmp_path, PAPER_RUNS, model="llama-3.1-8b")
    files = build_report(paths, paper_bases={"llama-3.1-8b": "Llama-3.1 8B"})
    long = pd.read_csv(io.BytesIO(files["paper_comparison.csv"]))
    low_gsm = long[(long["sampling"] == "SBD (gamma_low)") & (long["benchmark"] == "gsm8k")].iloc[0]
    assert low_gsm["sampler"] == "eb-entropy-g0.35"  # chat benchmarks: gamma_low = 0.35
    assert low_gsm["accuracy_pct"] == pytest.approx(84.2) and low_gsm["paper_accuracy_pct"] == 84.2
    assert low_gsm["delta_pts"] == pytest.approx(0.0) and low_gsm["nfe_speedup"] == pytest.approx(1000 / 454)
    assert low_gsm["delta_speedup"] == pytest.approx(1000 / 454 - 2.20)
    low_math = long[(long["sampling"] == "SBD (gamma_low)") & (long["benchmark"] == "math500")].iloc[0]
    assert low_math["sampler"] == "eb-entropy-g0.1"  # reasoning benchmarks: gamma_low = 0.1
    assert low_math["delta_pts"] == pytest.approx(81.0 - 81.0) and low_math["paper_speedup"] == 3.55
    high_math = long[(long["sampling"] == "SBD (gamma_high)") & (long["benchmark"] == "math500")].iloc[0]
    assert high_math["sampler"] == "eb-entropy-g0.35" and high_math["delta_pts"] == pytest.approx(80.0 - 80.4)
    low_lcb = long[(long["sampling"] == "SBD (gamma_low)") & (long["benchmark"] == "lcbv6")].iloc[0]
    assert low_lcb["sampler"] == "eb-entropy-g0.1" and low_lcb["accuracy_pct"] == pytest.approx(31.7)
    assert low_lcb["nfe_speedup"] == pytest.approx(4.0) and low_lcb["delta_speedup"] == pytest.approx(4.0 - 3.72)
    assert long[long["benchmark"] == "lcbv6"]["accuracy_pct"].notna().all()  # every LCB cell filled
    table = pd.read_csv(io.BytesIO(files["table1.csv"]))
    assert "lcbv6" in table.columns and table.loc[0, "lcbv6"] == "31.5 (1.00x, wall n/a)"  # no speed stage
    ntp = long[(long["loss"] == "NTP") & (long["benchmark"] == "gsm8k")].iloc[0]
    assert ntp["paper_speedup"] == 1.0 and ntp["delta_pts"] == pytest.approx(85.0 - 85.3)
    md = files["report.md"].decode()
    assert "Beside the paper" in md and "not comparable" not in md and "lcbv6" in md
    assert "84.2 (2.20x) vs 84.2 (2.20x): +0.0 pt, +0.00x" in files["paper_comparison.md"].decode()
    assert "31.7 (4.00x) vs 31.7 (3.72x): +0.0 pt, +0.28x" in files["paper_comparison.md"].decode()


def test_figure1_per_model_from_the_score_files(tmp_path):
    """LCB pass@1 against NFE speedup: one figure per model that ran LCB, from score files alone (without LCB scores
    there is none: test_write_report_files)."""
    paths = write_scores(tmp_path, PAPER_RUNS, model="llama-3.1-8b")
    paths += write_scores(tmp_path, [r for r in PAPER_RUNS if "lcbv6" in r[4]], model="qwen-3-8b")
    files = build_report(paths, paper_table=None)
    size = (round(FIG_SIZE_IN[0] * FIG_DPI), round(FIG_SIZE_IN[1] * FIG_DPI))
    for model in ("llama-3.1-8b", "qwen-3-8b"):
        assert png_size(files[f"figure1_{model}.png"]) == size and files[f"figure1_{model}.pdf"].startswith(b"%PDF")
    md = files["report.md"].decode()
    assert "## Figure 1: lcbv6 pass@1 against NFE speedup" in md and "![figure1_qwen-3-8b](figure1_qwen-3-8b.png)" in md
    assert not [name for name in files if name.startswith("figure1_") and "llama" not in name and "qwen" not in name]


def test_missing_baseline_gives_nan(tmp_path, caplog):
    runs = [r for r in RUNS if r[0] != "ntp"]
    paths = write_scores(tmp_path, runs)
    with caplog.at_level(logging.WARNING, logger="sbd_core.report"):
        s = summarize(load_scores(paths))
    assert s["nfe_speedup"].isna().all()
    assert "no NTP baseline" in caplog.text
    t = table1(s)
    assert math.isnan(t.iloc[0]["mean NFE speedup"]) and "(n/a, wall n/a)" in t.iloc[0]["math"]
    written = write_report(paths, tmp_path / "out", paper_table=None)
    assert (tmp_path / "out" / "speedup_math.png") in written
    assert not (tmp_path / "out" / "paper_table1.md").exists()


@pytest.mark.parametrize("content, needle", [
    ("{not json", "cannot parse JSON"),
    (json.dumps({"model": "m", "objective": "ntp"}), "missing required key"),
    (json.dumps(score_dict("ntp", "ntp", "ntp", {}, "math", 1.7, 10)), "accuracy"),
])
def test_malformed_file_names_it(score_paths, tmp_path, content, needle):
    bad = tmp_path / "broken_score.json"
    bad.write_text(content)
    with pytest.raises(ScoreFileError, match=needle) as exc:
        load_scores(score_paths + [bad])
    assert "broken_score.json" in str(exc.value)
    out = tmp_path / "out"
    with pytest.raises(ScoreFileError):
        write_report(score_paths + [bad], out)
    assert not out.exists() or not any(out.iterdir())


def test_duplicate_key_rejected(score_paths, tmp_path):
    dup = tmp_path / "dup.json"
    dup.write_text(score_paths[0].read_text())
    with pytest.raises(ScoreFileError, match="duplicate"):
        load_scores(score_paths + [dup])


def test_paper_table_numbers():
    p = load_paper_table()
    assert len(p) == 13
    qwen_low = p[(p["base"] == "Qwen-3 8B") & (p["sampling"] == "SBD (gamma_low)")].iloc[0]
    assert qwen_low["gsm8k_accuracy_pct"] == 90.1 and qwen_low["gsm8k_speedup"] == 2.77
    llama = p[p["base"] == "Llama-3.1 8B"].set_index("sampling")["mean_speedup"]
    assert llama["SBD (gamma_high)"] == 3.4 and llama["SBD (gamma_low)"] == 3.0
    # the paper's Speedup column is the mean of the 6 per-benchmark speedups, to one decimal
    sbd = p[p["sampling"].str.startswith("SBD")]
    cols = [c for c in p.columns if c.endswith("_speedup") and c != "mean_speedup"]
    assert (sbd[cols].mean(axis=1).round(1) == sbd["mean_speedup"]).all()
    gemini = p[p["base"] == "Gemini Diffusion"].iloc[0]
    assert pd.isna(gemini["math500_accuracy_pct"]) and gemini["aime25_accuracy_pct"] == 23.3
    disp = paper_table_display(p)
    assert disp.iloc[0]["MATH500"] == "\u2013" and disp.iloc[5]["GSM8K"] == "85.3"
    assert disp.iloc[7]["Speedup"] == "3.4x" and disp.iloc[5]["Speedup"] == "1x"
    assert disp.iloc[12]["Sampling"] == "SBD (\u03b3_low)" and disp.iloc[12]["GSM8K"] == "90.1 (2.77x)"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m sbd_core report ...`` from the repository root."""
    cmd = [sys.executable, "-m", "sbd_core", "--no-progress", "report", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_cli_report(score_paths, tmp_path):
    paper = tmp_path / "paper.csv"
    paper.write_text(DEFAULT_PAPER_TABLE.read_text())
    out = tmp_path / "cli_out"
    proc = run_cli("--scores", *map(str, score_paths), "--out", str(out), "--paper-table", str(paper))
    assert proc.returncode == 0, proc.stderr
    for name in ("summary.csv", "table1.md", "table1.tex", "paper_table1.md", "speedup_math.png", "report.md"):
        assert (out / name).is_file(), name
    assert "90.1 (2.77x)" in (out / "paper_table1.md").read_text()
    bad = tmp_path / "broken_score.json"
    bad.write_text("[]")
    out2 = tmp_path / "cli_bad"
    proc = run_cli("--scores", *map(str, score_paths), str(bad), "--out", str(out2), "--paper-table", str(paper))
    assert proc.returncode == 1  # a user's mistake: one line naming the file, no traceback
    assert proc.stderr.strip().splitlines()[-1].startswith("error: score file ") and "Traceback" not in proc.stderr
    assert "broken_score.json: expected a JSON object" in proc.stderr
    assert not out2.exists() or not any(out2.iterdir())


def test_cli_default_paper_table(score_paths, tmp_path):
    out = tmp_path / "cli_default"
    assert cli.main(["report", "--scores", *map(str, score_paths), "--out", str(out)]) == 0
    assert "90.1 (2.77x)" in (out / "paper_table1.md").read_text()


def test_latex_escape():
    assert report.latex_escape("a_b 50% \u2013") == r"a\_b 50\% --"
