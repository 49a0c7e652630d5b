"""The report's statistics by hand: McNemar's exact test, Wilson intervals, the bootstrap's resamples and coverage, the
paired intervals and the problems needed to resolve a difference."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sbd_core.report.intervals import PairingError, Problems, add_intervals, problems_of, verdict
from sbd_core.report.stats import (StatsSettings, bootstrap_sums, mcnemar_exact, percentile_interval,
                                   problems_to_resolve, ratio_samples, wilson_interval, z_value)


# ------------------------------------------------------------------------------------------------ McNemar
@pytest.mark.parametrize("b, c, p", [
    (1, 5, 2 * (1 + 6) / 64),             # n = 6: P(X <= 1) = (C(6,0) + C(6,1)) / 2^6, doubled
    (0, 6, 2 * 1 / 64),
    (2, 8, 2 * (1 + 10 + 45) / 1024),     # n = 10: 0.109375
    (3, 3, 1.0),                          # doubled tail over 1 is capped
    (0, 0, 1.0),                          # no discordant problem: nothing to test
    (0, 1, 1.0),                          # one discordant problem can never be significant
])
def test_mcnemar_exact_by_hand(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact(c, b) == mcnemar_exact(b, c)


def test_mcnemar_large_counts_do_not_underflow_and_match_scipy():
    assert 0.0 < mcnemar_exact(400, 600) < 1e-9  # 2^-1000 terms: exact integers, no float underflow in the sum
    scipy_stats = pytest.importorskip("scipy.stats")
    for b, c in ((10, 30), (57, 41), (0, 12), (150, 190)):
        assert mcnemar_exact(b, c) == pytest.approx(scipy_stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_rejects_negative_counts():
    with pytest.raises(ValueError, match="discordant"):
        mcnemar_exact(-1, 3)


# ------------------------------------------------------------------------------------------------ Wilson
def test_wilson_interval_by_hand():
    z2 = z_value(0.95) ** 2
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    lo, hi = wilson_interval(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(z2 / (10 + z2))  # k = 0: z^2 / (n + z^2)
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(10 / (10 + z2)) and hi == pytest.approx(1.0, abs=1e-12)
    lo, hi = wilson_interval(5, 10)  # centre 0.5, half-width z sqrt(1/40 + z^2/400) / (1 + z^2/10)
    half = math.sqrt(z2) * math.sqrt(0.025 + z2 / 400) / (1 + z2 / 10)
    assert (lo, hi) == pytest.approx((0.5 - half, 0.5 + half)) and lo == pytest.approx(0.2366, abs=1e-4)
    assert wilson_interval(200, 200)[0] == pytest.approx(0.9812, abs=1e-4)  # 100% of 200: not a point
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


# ------------------------------------------------------------------------------------------------ bootstrap
def test_bootstrap_sums_resample_rows_with_replacement():
    """n = 2, values [1, 0]: a resample's sum is 0, 1 or 2 with probabilities 1/4, 1/2, 1/4."""
    sums = bootstrap_sums(np.array([[1.0], [0.0]]), n_boot=20_000, seed=0)[:, 0]
    assert set(np.unique(sums)) == {0.0, 1.0, 2.0}
    freq = [np.mean(sums == v) for v in (0, 1, 2)]
    assert freq == pytest.approx([0.25, 0.5, 0.25], abs=0.02)  # > 6 standard errors: not a flaky bound
    assert percentile_interval(sums) == (0.0, 2.0)


def test_bootstrap_sums_moments_and_pairing():
    """n = 3, values [0, 1, 5]: E[sum] = 6, Var[sum] = n * population variance = 3 * 14/3 = 14; two columns of one
    resample see the same rows, so their difference is fixed when the columns differ by a constant per row."""
    x = np.array([0.0, 1.0, 5.0])
    sums = bootstrap_sums(np.stack([x, x + 1.0], axis=1), n_boot=20_000, seed=3)
    assert sums[:, 0].mean() == pytest.approx(6.0, abs=0.15) and sums[:, 0].var() == pytest.approx(14.0, rel=0.05)
    assert np.array_equal(sums[:, 1] - sums[:, 0], np.full(20_000, 3.0))
    again = bootstrap_sums(np.stack([x, x + 1.0], axis=1), n_boot=20_000, seed=3)
    assert np.array_equal(sums, again)  # fixed seed: the same resamples on every run
    assert not np.array_equal(sums, bootstrap_sums(np.stack([x, x + 1.0], axis=1), n_boot=20_000, seed=4))


def test_bootstrap_chunks_do_not_change_the_distribution():
    x = np.arange(50, dtype=float)[:, None]
    a = bootstrap_sums(x, n_boot=4000, seed=0, chunk=4000)[:, 0]
    b = bootstrap_sums(x, n_boot=4000, seed=0, chunk=300)[:, 0]
    assert a.mean() == pytest.approx(b.mean(), rel=0.02) and a.std() == pytest.approx(b.std(), rel=0.1)


def test_interval_coverage_on_simulated_data():
    """With fixed seeds (deterministic, so it cannot flake): 95% intervals of a Bernoulli(0.7) mean over 100 problems
    cover the true value in about 95% of 300 simulated test sets; the bounds are about 4 standard errors wide."""
    rng = np.random.default_rng(12345)
    wilson_hits = boot_hits = diff_hits = 0
    trials = 300
    for t in range(trials):
        x = (rng.random(100) < 0.7).astype(float)
        lo, hi = wilson_interval(int(x.sum()), 100)
        wilson_hits += lo <= 0.7 <= hi
        lo, hi = percentile_interval(bootstrap_sums(x[:, None], 1000, seed=t)[:, 0] / 100)
        boot_hits += lo <= 0.7 <= hi
        y = np.where(rng.random(100) < 0.1, 1.0 - x, x)  # a paired arm that flips 10% of verdicts: true diff 0.1*(1-2p)
        sums = bootstrap_sums(np.stack([y, x], axis=1), 1000, seed=t)
        lo, hi = percentile_interval((sums[:, 0] - sums[:, 1]) / 100)
        diff_hits += lo <= 0.1 * (1 - 2 * 0.7) <= hi
    for hits in (wilson_hits, boot_hits, diff_hits):
        assert 0.89 <= hits / trials <= 0.99, hits


def test_ratio_samples_and_percentiles():
    assert list(ratio_samples(np.array([4.0, 3.0]), np.array([2.0, 0.0]))) == [2.0, np.inf]
    assert all(math.isnan(v) for v in percentile_interval(np.array([1.0, np.nan])))
    lo, hi = percentile_interval(np.arange(101, dtype=float), confidence=0.9)
    assert (lo, hi) == pytest.approx((5.0, 95.0))


# ------------------------------------------------------------------------------------------------ problems needed
def test_problems_to_resolve_by_hand():
    # Connor (1987): n = (1.959964 * sqrt(0.03) + 0.841621 * sqrt(0.03 - 0.0001))^2 / 0.0001 = 2352.3 -> 2353
    assert problems_to_resolve(0.03) == 2353
    assert problems_to_resolve(0.01) == 783  # the least rate that admits a 1-point difference
    assert problems_to_resolve(0.12, delta=0.05) < problems_to_resolve(0.12, delta=0.02)
    with pytest.raises(ValueError, match="discordance"):
        problems_to_resolve(0.005)


def test_settings_are_checked():
    with pytest.raises(ValueError):
        StatsSettings(confidence=1.5)
    with pytest.raises(ValueError):
        StatsSettings(n_boot=10)


# ------------------------------------------------------------------------------------------------ pairing
def probs(correct, nfe=None, ids=None) -> Problems:
    ids = ids or [f"p{i:02d}" for i in range(len(correct))]
    return Problems(tuple(ids), np.array(correct, dtype=float), None if nfe is None else np.array(nfe, dtype=float))


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame([{"model": "m", "train_seed": 0, "train_steps": 10, "benchmark": "math", "path": f"f{i}.json",
                          **r} for i, r in enumerate(rows)])


def test_paired_difference_mcnemar_and_speedup_interval_by_hand():
    ntp = probs([1] * 8 + [0] * 2, nfe=[10] * 10)
    row = probs([1] * 6 + [0] * 4, nfe=[2] * 10)  # loses problems 6 and 7: b = 0, c = 2
    out = add_intervals(frame([{"objective": "ntp", "sampler": "ntp", "problems": ntp},
                               {"objective": "sbd", "sampler": "eb", "problems": row}]))
    r = out.iloc[1]
    assert r["diff_vs_ntp"] == pytest.approx(-0.2) and (r["n_better"], r["n_worse"]) == (0, 2)
    assert r["mcnemar_p"] == pytest.approx(0.5)
    # a resample loses k ~ Binomial(10, 0.2) draws of the two problems: P(k = 0) = 0.107 > 2.5%, so the interval
    # reaches 0; P(k >= 5) = 0.033 and P(k >= 6) = 0.006 put its lower end at -5/10
    assert (r["diff_lo"], r["diff_hi"]) == (pytest.approx(-0.5), 0.0) and r["accuracy_verdict"] == "same accuracy"
    assert (r["nfe_speedup_lo"], r["nfe_speedup_hi"]) == (5.0, 5.0)  # every problem 5x cheaper: no spread
    assert (r["accuracy_lo"], r["accuracy_hi"]) == pytest.approx(wilson_interval(6, 10))
    assert math.isnan(out.iloc[0]["diff_vs_ntp"]) and out.iloc[0]["accuracy_verdict"] == ""


def test_identical_arms_are_the_same_accuracy_and_a_clear_loss_is_lower():
    ntp = probs([1] * 100)
    worse = probs([1] * 80 + [0] * 20)
    out = add_intervals(frame([{"objective": "ntp", "sampler": "ntp", "problems": ntp},
                               {"objective": "sbd", "sampler": "ntp", "problems": probs([1] * 100)},
                               {"objective": "sbd", "sampler": "eb", "problems": worse}]))
    same, lower = out.iloc[1], out.iloc[2]
    assert (same["diff_lo"], same["diff_hi"], same["accuracy_verdict"]) == (0.0, 0.0, "same accuracy")
    assert lower["diff_hi"] < 0 and lower["accuracy_verdict"] == "lower" and lower["mcnemar_p"] < 1e-5
    assert lower["problems_needed"] == problems_to_resolve(0.2) and math.isnan(same["problems_needed"])
    assert verdict(0.02, 0.01, 0.03) == "higher" and verdict(0.0, -0.01, 0.01) == "same accuracy"


def test_rows_pair_with_the_ntp_arm_of_their_own_seed_only():
    out = add_intervals(pd.DataFrame([
        {"model": "m", "train_seed": s, "train_steps": 10, "benchmark": "math", "path": f"{o}{s}",
         "objective": o, "sampler": o, "problems": probs(c)}
        for s, o, c in ((0, "ntp", [1, 1, 1, 1]), (1, "ntp", [0, 0, 0, 0]),
                        (0, "sbd", [1, 1, 1, 1]), (1, "sbd", [1, 1, 0, 0]))]))
    by = out.set_index(["objective", "train_seed"])
    assert by.loc[("sbd", 0), "diff_vs_ntp"] == 0.0 and by.loc[("sbd", 1), "diff_vs_ntp"] == 0.5


def test_files_with_other_problems_are_refused_by_name():
    with pytest.raises(PairingError, match=r"ntp\.json.*do not hold the same problems|same problems"):
        add_intervals(frame([{"objective": "ntp", "sampler": "ntp", "problems": probs([1, 0], ids=["a", "b"]),
                              "path": "ntp.json"},
                             {"objective": "sbd", "sampler": "eb", "problems": probs([1, 0], ids=["a", "c"])}]))


def test_problems_of_reads_the_verdict_and_checks_it_against_the_accuracy():
    code = {"per_problem": {"t/1": {"passed_base": True, "passed_plus": False, "nfe": 4},
                            "t/0": {"passed_base": True, "passed_plus": True, "nfe": 6}}, "accuracy": 0.5}
    p = problems_of(Path("code.json"), code)
    assert p.ids == ("t/0", "t/1") and list(p.correct) == [1.0, 0.0] and list(p.nfe) == [6.0, 4.0]
    math_file = {"per_problem": {"0": {"correct": True}, "1": {"correct": True}}, "accuracy": 0.5}
    with pytest.raises(ValueError, match=r"math\.json.*accuracy 1\.0"):
        problems_of(Path("math.json"), math_file)
    with pytest.raises(ValueError, match="boolean verdict"):
        problems_of(Path("x.json"), {"per_problem": {"0": {"score": 1}}, "accuracy": 1.0})
    assert problems_of(Path("y.json"), {"accuracy": 1.0}) is None
    assert problems_of(Path("m.json"), {"per_problem": {"0": {"correct": True}}, "accuracy": 1.0}).nfe is None
