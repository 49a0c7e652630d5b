"""The summary's paired columns from per-problem verdicts: pairing with the NTP arm, Holm's correction over a table,
families (clusters) in score files, and the comparison over fine-tune seeds."""

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sbd_core.report.stats.intervals import PairingError, Problems, add_intervals, problems_of
from sbd_core.report.stats.estimates import cluster_totals, design_effect, problems_to_resolve, wilson_interval
from sbd_core.report.stats.verdicts import PairedTable, holm, paired_comparison
from sbd_core.settings import StatsSettings


def probs(correct, nfe=None, ids=None, clusters=None) -> Problems:
    ids = ids or [f"p{i:02d}" for i in range(len(correct))]
    return Problems(tuple(ids), np.array(correct, dtype=float), None if nfe is None else np.array(nfe, dtype=float),
                    None if clusters is None else tuple(clusters))


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame([{"model": "m", "train_seed": 0, "train_steps": 10, "benchmark": "math", "path": f"f{i}.json",
                          **r} for i, r in enumerate(rows)])


def test_paired_difference_and_speedup_interval_by_hand():
    ntp = probs([1] * 8 + [0] * 2, nfe=[10] * 10)
    row = probs([1] * 6 + [0] * 4, nfe=[2] * 10)  # loses problems 6 and 7: b = 0, c = 2
    out = add_intervals(frame([{"objective": "ntp", "sampler": "ntp", "problems": ntp},
                               {"objective": "sbd", "sampler": "eb", "problems": row}]))
    r = out.iloc[1]
    expected = paired_comparison(PairedTable(6, 0, 2, 2), 0.02)
    assert r["diff_vs_ntp"] == pytest.approx(-0.2) and (r["n_better"], r["n_worse"]) == (0, 2)
    assert (r["diff_lo"], r["diff_hi"]) == pytest.approx((expected.lo, expected.hi)) and r["diff_lo"] < 0 < r["diff_hi"]
    assert r["diff_p"] == r["diff_p_holm"] == pytest.approx(expected.p_diff)  # one comparison: Holm changes nothing
    assert r["accuracy_verdict"] == "inconclusive"
    assert (r["nfe_speedup_lo"], r["nfe_speedup_hi"]) == (5.0, 5.0)  # every problem 5x cheaper: no spread
    assert (r["accuracy_lo"], r["accuracy_hi"]) == pytest.approx(wilson_interval(6, 10))
    assert math.isnan(out.iloc[0]["diff_vs_ntp"]) and out.iloc[0]["accuracy_verdict"] == ""


def test_identical_arms_are_equivalent_and_a_clear_loss_is_lower():
    ntp = probs([1] * 1000)
    worse = probs([1] * 800 + [0] * 200)
    out = add_intervals(frame([{"objective": "ntp", "sampler": "ntp", "problems": ntp},
                               {"objective": "sbd", "sampler": "ntp", "problems": probs([1] * 1000)},
                               {"objective": "sbd", "sampler": "eb", "problems": worse}]))
    same, lower = out.iloc[1], out.iloc[2]
    assert same["diff_hi"] == pytest.approx(-same["diff_lo"]) and 0.0038 < same["diff_hi"] < 0.0039
    assert same["accuracy_verdict"] == "equivalent" and lower["accuracy_verdict"] == "lower"
    assert lower["diff_hi"] < 0 and lower["diff_p_holm"] < 1e-5
    assert lower["problems_needed"] == problems_to_resolve(0.2) and math.isnan(same["problems_needed"])


def test_holm_runs_over_the_comparisons_of_one_seeds_table():
    """Three comparisons in seed 0's table (two benchmarks), one in seed 1's: each family is adjusted on its own, the
    words follow the adjusted p values."""
    base, near = [1] * 40 + [0] * 10, [1] * 37 + [0] * 13
    rows = [{"objective": "ntp", "sampler": "ntp", "problems": probs(base)},
            {"objective": "sbd", "sampler": "eb", "problems": probs(near)},
            {"objective": "sbd", "sampler": "ntp", "problems": probs(base)},
            {"objective": "ntp", "sampler": "ntp", "problems": probs(base), "benchmark": "code"},
            {"objective": "sbd", "sampler": "eb", "problems": probs(near), "benchmark": "code"},
            {"objective": "ntp", "sampler": "ntp", "problems": probs(base), "train_seed": 1},
            {"objective": "sbd", "sampler": "eb", "problems": probs(near), "train_seed": 1}]
    out = add_intervals(frame(rows))
    family = out[(out["train_seed"] == 0) & out["diff_p"].notna()]
    assert len(family) == 3
    assert list(family["diff_p_holm"]) == pytest.approx(holm(list(family["diff_p"])))
    assert list(family["equiv_p_holm"]) == pytest.approx(holm(list(family["equiv_p"])))
    alone = out[(out["train_seed"] == 1) & out["diff_p"].notna()].iloc[0]
    assert alone["diff_p_holm"] == pytest.approx(alone["diff_p"])
    assert family.iloc[0]["diff_p_holm"] > family.iloc[0]["diff_p"]  # 3 tests: the smallest p tripled


def test_rows_pair_with_the_ntp_arm_of_their_own_seed_only():
    out = add_intervals(pd.DataFrame([
        {"model": "m", "train_seed": s, "train_steps": 10, "benchmark": "math", "path": f"{o}{s}",
         "objective": o, "sampler": o, "problems": probs(c)}
        for s, o, c in ((0, "ntp", [1, 1, 1, 1]), (1, "ntp", [0, 0, 0, 0]),
                        (0, "sbd", [1, 1, 1, 1]), (1, "sbd", [1, 1, 0, 0]))]))
    by = out.set_index(["objective", "train_seed"])
    assert by.loc[("sbd", 0), "diff_vs_ntp"] == 0.0 and by.loc[("sbd", 1), "diff_vs_ntp"] == 0.5


def test_families_widen_the_accuracy_and_difference_intervals_and_are_resampled_whole():
    """The same verdicts with and without families (perfectly correlated within each): the family-aware intervals
    are wider, and the speedup's bootstrap draws whole families."""
    families = [f"f{i // 10}" for i in range(40)]
    ntp = [1] * 40
    row = [1] * 10 + [0] * 10 + [1] * 20  # loses one whole family
    nfe_ntp, nfe_row = [10] * 40, [2] * 20 + [5] * 20

    def run(clusters):
        return add_intervals(frame([
            {"objective": "ntp", "sampler": "ntp", "problems": probs(ntp, nfe_ntp, clusters=clusters)},
            {"objective": "sbd", "sampler": "eb", "problems": probs(row, nfe_row, clusters=clusters)}])).iloc[1]

    plain, clustered = run(None), run(families)
    assert clustered["accuracy_lo"] < plain["accuracy_lo"] and clustered["diff_lo"] < plain["diff_lo"]
    design = design_effect((np.array(row) - np.array(ntp))[None, :], families)
    assert design.deff > 3 and design.df == 3
    expected = paired_comparison(PairedTable(30, 0, 10, 0), 0.02, 0.95, design)
    assert (clustered["diff_lo"], clustered["diff_hi"]) == pytest.approx((expected.lo, expected.hi))
    assert clustered["nfe_speedup_hi"] - clustered["nfe_speedup_lo"] > plain["nfe_speedup_hi"] - plain[
        "nfe_speedup_lo"]
    totals = cluster_totals(np.array(nfe_row, dtype=float)[:, None], families)[:, 0]
    assert totals.tolist() == [20.0, 20.0, 50.0, 50.0]


def test_the_comparison_over_seeds_pools_the_seeds_with_the_two_level_design():
    """Two seeds: seed 0 loses 4 of 20 problems, seed 1 none. Over seeds: the pooled paired table with the design
    effect of the differences [seeds, problems]; every seed's row carries the same seeds_* values."""
    ntp = [1] * 20
    seeds = {0: [1] * 16 + [0] * 4, 1: [1] * 20}
    rows = []
    for seed, verdicts in seeds.items():
        rows += [{"objective": "ntp", "sampler": "ntp", "problems": probs(ntp), "train_seed": seed},
                 {"objective": "sbd", "sampler": "eb", "problems": probs(verdicts), "train_seed": seed}]
    out = add_intervals(frame(rows))
    eb = out[out["objective"] == "sbd"]
    diffs = np.array([np.array(v) - np.array(ntp) for v in seeds.values()], dtype=float)
    expected = paired_comparison(PairedTable(36, 0, 4, 0), 0.02, 0.95, design_effect(diffs))
    for _, r in eb.iterrows():
        assert (r["seeds_diff_lo"], r["seeds_diff_hi"]) == pytest.approx((expected.lo, expected.hi))
        assert r["seeds_diff_p_holm"] == pytest.approx(expected.p_diff) and r["n_seeds"] == 2
    assert eb.iloc[0]["seeds_accuracy_verdict"] == eb.iloc[1]["seeds_accuracy_verdict"] == "inconclusive"
    lo, hi = wilson_interval(36, 40, 0.95, design_effect(np.array(list(seeds.values()), dtype=float)))
    assert (eb.iloc[0]["seeds_accuracy_lo"], eb.iloc[0]["seeds_accuracy_hi"]) == pytest.approx((lo, hi))
    ntp_row = out[out["objective"] == "ntp"].iloc[0]
    assert pd.isna(ntp_row["seeds_diff_lo"]) and ntp_row["seeds_accuracy_lo"] == pytest.approx(
        wilson_interval(40, 40, 0.95, design_effect(np.ones((2, 20))))[0])


def test_a_margin_per_benchmark_changes_the_words():
    ntp, row = probs([1] * 100), probs([1] * 97 + [0] * 3)
    rows = [{"objective": "ntp", "sampler": "ntp", "problems": ntp}, {"objective": "sbd", "sampler": "eb",
                                                                      "problems": row}]
    assert add_intervals(frame(rows)).iloc[1]["accuracy_verdict"] == "inconclusive"
    wide = add_intervals(frame(rows), StatsSettings(margins_pts={"math": 10})).iloc[1]
    assert wide["accuracy_verdict"] == "equivalent" and wide["equiv_margin"] == pytest.approx(0.1)


def test_files_with_other_problems_are_refused_by_name():
    with pytest.raises(PairingError, match=r"ntp\.json.*do not hold the same problems|same problems"):
        add_intervals(frame([{"objective": "ntp", "sampler": "ntp", "problems": probs([1, 0], ids=["a", "b"]),
                              "path": "ntp.json"},
                             {"objective": "sbd", "sampler": "eb", "problems": probs([1, 0], ids=["a", "c"])}]))


def test_problems_of_reads_the_verdict_the_family_and_checks_the_accuracy():
    code = {"per_problem": {"t/1": {"passed_base": True, "passed_plus": False, "nfe": 4, "cluster": "add_k"},
                            "t/0": {"passed_base": True, "passed_plus": True, "nfe": 6, "cluster": "count_s"}},
            "accuracy": 0.5}
    p = problems_of(Path("code.json"), code)
    assert p.ids == ("t/0", "t/1") and list(p.correct) == [1.0, 0.0] and list(p.nfe) == [6.0, 4.0]
    assert p.clusters == ("count_s", "add_k")
    math_file = {"per_problem": {"0": {"correct": True}, "1": {"correct": True}}, "accuracy": 0.5}
    with pytest.raises(ValueError, match=r"math\.json.*accuracy 1\.0"):
        problems_of(Path("math.json"), math_file)
    with pytest.raises(ValueError, match="boolean verdict"):
        problems_of(Path("x.json"), {"per_problem": {"0": {"score": 1}}, "accuracy": 1.0})
    assert problems_of(Path("y.json"), {"accuracy": 1.0}) is None
    single = problems_of(Path("m.json"), {"per_problem": {"0": {"correct": True}}, "accuracy": 1.0})
    assert single.nfe is None and single.clusters is None


def test_the_synthetic_code_benchmark_names_each_problems_family(tmp_path):
    from sbd_core.benchmarks import get_benchmark, score_generations

    bench = get_benchmark("code")
    test_file = bench.fetch(bench.settings({"limit": 6}), tmp_path / "data")
    problems = bench.load(test_file)
    generations = tmp_path / "gen.jsonl"
    generations.write_text("".join(json.dumps({"id": p["sbd_id"], "completion": p["canonical_solution"]}) + "\n"
                                   for p in problems))
    result = score_generations("code", generations, data=test_file, settings={"limit": 6}, work_dir=tmp_path)
    clusters = {i: r["cluster"] for i, r in result["per_problem"].items()}
    assert clusters == {p["sbd_id"]: p["entry_point"] for p in problems} and len(set(clusters.values())) == 6
    assert get_benchmark("math").cluster(problems[0]) is None
