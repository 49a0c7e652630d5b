"""The report's intervals, paired differences, seeds, training budgets and Figures 5, 12, 13, from hand-made score
files with per-problem verdicts."""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from test_report import score_dict

from sbd_core.report import ScoreFileError, build_report, load_scores, png_size, summarize, table1
from sbd_core.report.curves import _curves, _panel
from sbd_core.report.outputs import planned_figures
from sbd_core.report.differences import differences
from sbd_core.report.seeds import seed_means
from sbd_core.report.stats.estimates import design_effect, wilson_interval
from sbd_core.report.stats.verdicts import PairedTable, paired_comparison
from sbd_core.samplers import sampler_spec


def scored(root: Path, objective, solver, params, verdicts, nfe, seed=0, steps=100, benchmark="math",
           ids=None) -> Path:
    """A score file with ``per_problem`` verdicts (one NFE value per problem)."""
    tag = sampler_spec(solver, **params)["tag"]
    ids = ids or [f"{benchmark}/{i}" for i in range(len(verdicts))]
    data = score_dict(objective, tag, solver, params, benchmark, sum(verdicts) / len(verdicts), nfe * len(verdicts),
                      n_problems=len(verdicts))
    data.update(train_seed=seed, train_steps=steps,
                per_problem={i: {"correct": bool(v), "nfe": nfe} for i, v in zip(ids, verdicts)})
    path = root / f"{objective}_{tag}_{benchmark}_s{seed}_{steps}.json"
    path.write_text(json.dumps(data))
    return path


NTP_VERDICTS = [1] * 9 + [0]
LOSER = [1] * 2 + [0] * 8  # right on 2 of the NTP arm's 9: lower, even on 10 problems


def one_seed(root: Path, seed=0, steps=100, sbd=None) -> list[Path]:
    return [scored(root, "ntp", "ntp", {}, NTP_VERDICTS, 20, seed, steps),
            scored(root, "sbd", "ntp", {}, NTP_VERDICTS, 20, seed, steps),
            scored(root, "sbd", "eb", {"gamma": 0.1}, sbd or [1] * 5 + [0] * 5, 5, seed, steps)]


def test_summary_intervals_and_paired_columns(tmp_path):
    s = summarize(load_scores(one_seed(tmp_path, sbd=LOSER))).set_index("sampler")
    ntp = s[s["objective"] == "ntp"].iloc[0]
    assert (ntp["accuracy_lo"], ntp["accuracy_hi"]) == pytest.approx(wilson_interval(9, 10))
    assert (ntp["nfe_speedup_lo"], ntp["nfe_speedup_hi"]) == (1.0, 1.0) and pd.isna(ntp["diff_vs_ntp"])
    eb = s.loc["eb-entropy-g0.1"]
    assert eb["diff_vs_ntp"] == pytest.approx(-0.7) and (eb["n_better"], eb["n_worse"]) == (0, 7)
    expected = paired_comparison(PairedTable(2, 0, 7, 1), 0.02)  # both right 2, NTP arm only 7, neither 1
    assert (eb["diff_lo"], eb["diff_hi"], eb["diff_p"], eb["equiv_p"]) == pytest.approx(
        (expected.lo, expected.hi, expected.p_diff, expected.p_equiv))
    # two comparisons in the seed's table (SBD in NTP mode, EB): Holm doubles the smaller p
    assert eb["diff_p_holm"] == pytest.approx(2 * expected.p_diff) and eb["accuracy_verdict"] == "lower"
    assert (eb["nfe_speedup"], eb["nfe_speedup_lo"], eb["nfe_speedup_hi"]) == (4.0, 4.0, 4.0)
    same = s[(s["objective"] == "sbd") & (s.index == "ntp")].iloc[0]
    assert same["diff_lo"] < 0 < same["diff_hi"] and same["diff_p"] == 1.0 and same["equiv_margin"] == 0.02
    assert same["accuracy_verdict"] == "inconclusive"  # 10 problems cannot show a 2-point equivalence
    assert (ntp["n_seeds"], eb["n_seeds"]) == (1, 1) and pd.isna(eb["seeds_diff_lo"])


def test_report_words_follow_the_paired_intervals(tmp_path):
    files = build_report(one_seed(tmp_path, sbd=LOSER), paper_table=None)
    csv = pd.read_csv(io.BytesIO(files["summary.csv"]))
    for col in ("accuracy_lo", "accuracy_hi", "diff_vs_ntp", "diff_lo", "diff_hi", "diff_p", "equiv_p",
                "diff_p_holm", "equiv_p_holm", "accuracy_verdict", "equiv_margin", "nfe_speedup_lo",
                "nfe_speedup_hi", "wall_speedup_lo", "wall_speedup_hi", "train_seed", "train_steps"):
        assert col in csv.columns, col
    md = files["report.md"].decode()
    lines = {line.split(" | ")[2]: line for line in md.splitlines() if line.startswith("| tiny | sbd |")}
    assert "-70.0 [-86.5, -26.6] pt: lower by 70.0 pt (p=0.0021)" in lines["eb-entropy-g0.1"]
    assert "inconclusive (difference p=1, equivalence p=" in lines["ntp"]
    assert "equivalence margin (\u00b12 pt)" in md and "Holm's method over each seed's 2 comparisons" in md
    assert "_One fine-tune seed: seed variance not included._" in md
    assert "**math**: 10 problems" in md and "70.0% of problems at most decided differently" in md
    lo, hi = wilson_interval(9, 10)
    cell = f"90.0 [{100 * lo:.1f}, {100 * hi:.1f}] (1.00x [1.00, 1.00], wall n/a)"  # no speed stage: no wall claim
    assert cell in files["table1.md"].decode()


def test_seeds_pair_within_a_seed_and_tables_give_mean_and_spread(tmp_path):
    paths = one_seed(tmp_path, seed=0) + one_seed(tmp_path, seed=1, sbd=NTP_VERDICTS)
    summary = summarize(load_scores(paths))
    t = table1(summary)
    eb = t[t["sampler"] == "eb-entropy-g0.1"]
    assert list(eb["seed"]) == [0, 1, "mean \u00b1 sd"]
    # accuracies 50 and 90 over seeds and problems; both seeds 4x fewer forwards; no speed stage
    row = summary[(summary["sampler"] == "eb-entropy-g0.1")].iloc[0]
    lo, hi = wilson_interval(14, 20, 0.95, design_effect(np.array([[1] * 5 + [0] * 5, NTP_VERDICTS], dtype=float)))
    assert (row["seeds_accuracy_lo"], row["seeds_accuracy_hi"]) == pytest.approx((lo, hi))
    assert eb.iloc[2]["math"] == f"70.0 \u00b1 28.3 [{100 * lo:.1f}, {100 * hi:.1f}] (4.00x \u00b1 0.00, wall n/a)"
    d = differences(summary)
    over = d[(d["sampler"] == "eb-entropy-g0.1") & (d["seed"] == "all seeds")].iloc[0]
    assert over["math"].startswith("-20.0 [") and over["math"].endswith("; seeds -40.0, +0.0")
    seed1 = d[(d["sampler"] == "eb-entropy-g0.1") & (d["seed"] == "1")].iloc[0]
    assert seed1["math"].startswith("+0.0 [-27.8, +27.8] pt: inconclusive")
    md = build_report(paths, paper_table=None)["report.md"].decode()
    assert "2 fine-tune seeds" in md and "seed variance not included" not in md


def test_with_seeds_the_report_compares_the_ntp_arms_of_two_seeds_the_training_aa_control(tmp_path):
    arm1 = [0] + [1] * 9  # 9 of 10 right, as seed 0's arm, on other problems: 2 of 10 decided differently
    paths = one_seed(tmp_path, seed=0) + [scored(tmp_path, "ntp", "ntp", {}, arm1, 20, 1),
                                          scored(tmp_path, "sbd", "ntp", {}, arm1, 20, 1),
                                          scored(tmp_path, "sbd", "eb", {"gamma": 0.1}, arm1, 5, 1)]
    md = build_report(paths, paper_table=None)["report.md"].decode()
    expected = paired_comparison(PairedTable.of(np.array(arm1), np.array(NTP_VERDICTS)), 0.02)
    assert expected.diff == 0.0 and expected.lo < -0.1 and expected.hi > 0.1
    # the other runs against their own arm: seed 0's EB row 4 of 10 (40%), every other row 0
    assert (f"- **math** (tiny), NTP arm seed 1 against seed 0: +0.0 [{100 * expected.lo:+.1f}, "
            f"{100 * expected.hi:+.1f}] pt, 20.0% of problems decided differently; every other run against its own "
            "NTP arm: 0.0-40.0%.") in md
    assert "### The training's A/A control" in md
    (tmp_path / "one").mkdir()
    one_seed_md = build_report(one_seed(tmp_path / "one"), paper_table=None)["report.md"].decode()
    assert "training's A/A control" not in one_seed_md


def test_the_training_curve_over_seeds_bars_the_mean_speedup_with_the_seeds_sd(tmp_path):
    # two budgets, two seeds whose EB rows take 5 and 2 forwards a problem: 4x and 10x, mean 7x, sd 4.24; the first
    # seed's bootstrap interval is [4, 4], which the mean lies outside (a negative error bar, once a crash)
    paths = []
    for steps in (50, 100):
        paths += one_seed(tmp_path, seed=0, steps=steps)
        paths += [scored(tmp_path, "ntp", "ntp", {}, NTP_VERDICTS, 20, 1, steps),
                  scored(tmp_path, "sbd", "ntp", {}, NTP_VERDICTS, 20, 1, steps),
                  scored(tmp_path, "sbd", "eb", {"gamma": 0.1}, [1] * 5 + [0] * 5, 2, 1, steps)]
    means = seed_means(summarize(load_scores(paths)))
    assert means["nfe_speedup_lo"].isna().all() and means["accuracy_lo"].isna().all()  # one seed's: not the mean's
    accuracy_ax, speedup_ax = Figure().subplots(2)
    _curves(accuracy_ax, speedup_ax, means)
    (bars,) = [c for c in speedup_ax.containers]
    segments = bars.lines[2][0].get_segments()
    assert [tuple(np.round(seg[:, 1], 2)) for seg in segments] == [(7 - 4.24, 7 + 4.24)] * 2
    assert "training_curve.png" in build_report(paths, paper_table=None)


def test_table1_shows_the_final_budget_and_figure5_every_budget(tmp_path):
    paths = one_seed(tmp_path, steps=100) + one_seed(tmp_path, steps=50, sbd=[1] * 2 + [0] * 8)
    paths.append(scored(tmp_path, "sbd", "eb", {"gamma": 1.0}, [1] * 4 + [0] * 6, 3, steps=50))
    files = build_report(paths, paper_table=None)
    t = pd.read_csv(io.BytesIO(files["table1.csv"]))
    assert list(t["sampler"]) == ["ntp", "ntp", "eb-entropy-g0.1"]  # the 50-step checkpoints are not in Table 1
    assert t.iloc[2]["math"].startswith("50.0 [")
    assert png_size(files["figure5.png"])[0] > 0 and files["figure5.pdf"].startswith(b"%PDF")
    assert "figure12.png" not in files and "![figure5](figure5.png)" in files["report.md"].decode()
    ax = Figure().add_subplot()
    _panel(ax, seed_means(summarize(load_scores(paths))), ("eb-entropy",))
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"50 steps: SBD, eb-entropy", "50 steps: NTP (AR)", "100 steps (final): SBD, eb-entropy",
                          "100 steps (final): NTP (AR)"}
    curve = lines["50 steps: SBD, eb-entropy"]
    assert list(curve.get_xdata()) == [3.0, 5.0] and list(curve.get_ydata()) == [40.0, 20.0]  # sorted by mean NFE
    assert list(lines["100 steps (final): NTP (AR)"].get_xdata()) == [20.0]


def test_training_curve_draws_both_arms_against_steps(tmp_path):
    paths = one_seed(tmp_path, steps=100) + one_seed(tmp_path, steps=50, sbd=[1] * 2 + [0] * 8)
    files = build_report(paths, paper_table=None)
    assert png_size(files["training_curve.png"])[0] > 0 and files["training_curve.pdf"].startswith(b"%PDF")
    assert "![training_curve](training_curve.png)" in files["report.md"].decode()
    accuracy_ax, speedup_ax = Figure().add_subplot(), Figure().add_subplot()
    means = seed_means(summarize(load_scores(paths)))
    _curves(accuracy_ax, speedup_ax, means)

    def curves(ax):
        handles, labels = ax.get_legend_handles_labels()
        return {label: (list(h.lines[0].get_xdata()), list(h.lines[0].get_ydata())) for h, label in
                zip(handles, labels)}
    assert curves(accuracy_ax) == {"NTP arm": ([50, 100], [90.0, 90.0]), "SBD / NTP mode": ([50, 100], [90.0, 90.0]),
                                   "SBD / EB \u03b3=0.1": ([50, 100], [20.0, 50.0])}
    assert curves(speedup_ax) == {"SBD / EB \u03b3=0.1": ([50, 100], [4.0, 4.0])}  # 20 forwards a problem against 5
    # the axis holds every interval's ends, so no error bar is cut off (10 problems: wide Wilson intervals)
    bottom, top = accuracy_ax.get_ylim()
    assert bottom <= 100 * means["accuracy_lo"].min() and top >= 100 * means["accuracy_hi"].max()
    (tmp_path / "one").mkdir()
    one_budget = build_report(one_seed(tmp_path / "one"), paper_table=None)
    assert "training_curve.png" not in one_budget and "Training curve" not in one_budget["report.md"].decode()
    assert planned_figures({"eb-entropy", "ntp"}, budgets=2) == ["figure5", "training_curve"]
    assert planned_figures({"ntp"}, budgets=3) == []  # NTP mode alone: no block sampler to follow


def test_figures_12_and_13_compare_eb_proxies_with_the_factor_rule(tmp_path):
    paths = one_seed(tmp_path)
    paths.append(scored(tmp_path, "sbd", "factor", {"f": 1.0}, [1] * 7 + [0] * 3, 4))
    paths.append(scored(tmp_path, "sbd", "eb", {"gamma": 0.1, "proxy": "confidence"}, [1] * 6 + [0] * 4, 4))
    files = build_report(paths, paper_table=None)
    for stem in ("figure5", "figure12", "figure13"):
        assert png_size(files[f"{stem}.png"])[1] > 0 and files[f"{stem}.pdf"].startswith(b"%PDF"), stem
    assert planned_figures({"eb-entropy"}) == ["figure5"]
    assert planned_figures({"factor", "eb-confidence", "ntp"}) == ["figure13"]
    assert planned_figures({"eb-entropy", "eb-confidence", "factor"}) == ["figure5", "figure12", "figure13"]


def test_files_with_other_problems_are_named(tmp_path):
    paths = one_seed(tmp_path)
    paths[2] = scored(tmp_path, "sbd", "eb", {"gamma": 0.1}, [1] * 5 + [0] * 5, 5,
                      ids=[f"math/{i}" for i in range(1, 11)])
    with pytest.raises(ScoreFileError, match=r"eb-entropy-g0\.1_math_s0_100\.json and .*ntp_ntp_math_s0_100\.json"):
        build_report(paths, paper_table=None)


def test_verdicts_must_give_the_files_accuracy(tmp_path):
    path = scored(tmp_path, "ntp", "ntp", {}, NTP_VERDICTS, 20)
    data = json.loads(path.read_text())
    data["accuracy"] = 1.0
    path.write_text(json.dumps(data))
    with pytest.raises(ScoreFileError, match="per_problem verdicts"):
        load_scores([path])
