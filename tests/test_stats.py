"""The report's statistics by hand and against published worked examples: Wilson intervals, Newcombe's paired score
interval, its dual p values and the words, Holm's correction, design effects of families and seeds, the (cluster)
bootstrap and the problems a task needs."""

import math

import numpy as np
import pytest

from sbd_core.errors import UserError
from sbd_core.report.stats.estimates import (INDEPENDENT, Design, bootstrap_sums, cluster_totals, design_effect,
                                   percentile_interval, problems_for_equivalence, problems_to_resolve, ratio_samples,
                                   wilson_interval, z_value)
from sbd_core.report.stats.verdicts import (PairedTable, holm, newcombe_interval, paired_comparison, verdict,
                                      verdict_cell)
from sbd_core.settings import StatsSettings

Z = z_value(0.95)


# ------------------------------------------------------------------------------------------------ Wilson
def test_wilson_interval_by_hand():
    z2 = Z ** 2
    assert Z == pytest.approx(1.959964, abs=1e-6)
    lo, hi = wilson_interval(0, 10)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(z2 / (10 + z2))  # k = 0: z^2 / (n + z^2)
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(10 / (10 + z2)) and hi == pytest.approx(1.0, abs=1e-12)
    lo, hi = wilson_interval(5, 10)  # centre 0.5, half-width z sqrt(1/40 + z^2/400) / (1 + z^2/10)
    half = Z * math.sqrt(0.025 + z2 / 400) / (1 + z2 / 10)
    assert (lo, hi) == pytest.approx((0.5 - half, 0.5 + half)) and lo == pytest.approx(0.2366, abs=1e-4)
    assert wilson_interval(200, 200)[0] == pytest.approx(0.9812, abs=1e-4)  # 100% of 200: not a point
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_wilson_with_a_design_uses_effective_problems_and_a_t_quantile():
    """deff 4, 3 degrees of freedom: the interval of 40/100 is Wilson's of 10/25 with t_3(0.975) = 3.182446."""
    lo, hi = wilson_interval(40, 100, 0.95, Design(4.0, 3.0))
    t3 = 3.182446305284263
    centre = (0.4 + t3 ** 2 / 50) / (1 + t3 ** 2 / 25)
    half = t3 * math.sqrt(0.24 / 25 + t3 ** 2 / 2500) / (1 + t3 ** 2 / 25)
    assert (lo, hi) == pytest.approx((centre - half, centre + half), abs=1e-9)
    assert Design(4.0, 3.0).critical(0.95) == pytest.approx(t3, abs=1e-9)
    assert Design(4.0, 3.0).p_value(t3) == pytest.approx(0.05, abs=1e-12) and INDEPENDENT.p_value(Z) == \
        pytest.approx(0.05, abs=1e-12)


# ------------------------------------------------------------------------------------------------ Newcombe's interval
# Newcombe (1998), Stat Med 17:2635-2650, Table III: the 95% limits of method 10 for its example tables (e, f, g, h) =
# (both, first only, second only, neither), theta = (f - g) / n, printed to 4 decimals.
NEWCOMBE_TABLE_III = [
    (36, 12, 2, 0, 0.0569, 0.3404), (20, 12, 2, 16, 0.0562, 0.3292), (18, 12, 2, 18, 0.0562, 0.3290),
    (36, 14, 0, 0, 0.1528, 0.4167), (35, 14, 0, 1, 0.1461, 0.4175), (18, 14, 0, 18, 0.1441, 0.3963),
    (2, 97, 1, 0, 0.8721, 0.9854), (1, 97, 1, 1, 0.8736, 0.9850), (0, 29, 1, 0, 0.6666, 0.9882),
    (2, 98, 0, 0, 0.9178, 0.9945), (1, 98, 0, 1, 0.9171, 0.9916), (0, 30, 0, 0, 0.8395, 1.0),
    (54, 0, 0, 0, -0.0664, 0.0664), (53, 0, 0, 1, -0.0729, 0.0729), (30, 0, 0, 24, -0.0358, 0.0358),
    (29, 0, 0, 25, -0.0354, 0.0354), (28, 0, 0, 26, -0.0352, 0.0352), (27, 0, 0, 27, -0.0351, 0.0351),
]
OFF_BY_ONE_DIGIT = {(1, 97, 1, 1)}  # its lower limit computes as 0.873672 (0.8737): printed 0.8736


@pytest.mark.parametrize("e, f, g, h, lower, upper", NEWCOMBE_TABLE_III)
def test_newcombe_method_10_reproduces_the_published_limits(e, f, g, h, lower, upper):
    lo, hi = newcombe_interval(PairedTable(e, f, g, h), Z)
    tolerance = 0.5e-4 + 1e-12  # the printed precision
    assert hi == pytest.approx(upper, abs=tolerance)
    assert lo == pytest.approx(lower, abs=2 * tolerance if (e, f, g, h) in OFF_BY_ONE_DIGIT else tolerance)


def test_newcombe_reproduces_a_textbook_example():
    """Fagerland, Lydersen and Laake (2017), Statistical Analysis of Contingency Tables, ch. 8: Cavo et al. (2012),
    complete response before and after consolidation (59, 6, 16, 80): -0.0621 (95% CI -0.1186 to -0.0046)."""
    lo, hi = newcombe_interval(PairedTable(59, 6, 16, 80), Z)
    assert PairedTable(59, 6, 16, 80).diff == pytest.approx(-0.0621, abs=5e-5)
    assert (lo, hi) == pytest.approx((-0.1186, -0.0046), abs=5e-5)


def all_tables(n: int):
    for a in range(n + 1):
        for b in range(n + 1 - a):
            for c in range(n + 1 - a - b):
                yield PairedTable(a, b, c, n - a - b - c)


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_the_interval_is_never_empty_or_a_point_and_holds_its_estimate(n):
    """Every table of n problems, the extremes 0/n and n/n on either side included, and with a design effect."""
    for table in all_tables(n):
        for design in (INDEPENDENT, Design(2.5, 4.0)):
            effective = table.scaled(design.deff)
            lo, hi = newcombe_interval(effective, design.critical(0.95))
            assert -1.0 <= lo < hi <= 1.0 and lo - 1e-12 <= table.diff <= hi + 1e-12, (table, design)


def test_at_the_ceiling_and_with_one_problem():
    """1,000 problems all right on both sides: +-z^2 / (n + z^2) = +-0.38 points, equivalent; one problem the run
    gets and the NTP arm misses: +100 points, but nothing resolved."""
    result = paired_comparison(PairedTable(1000, 0, 0, 0), 0.02)
    assert (result.lo, result.hi) == pytest.approx((-Z * Z / (1000 + Z * Z), Z * Z / (1000 + Z * Z)))
    assert result.p_diff == 1.0 and result.p_equiv < 0.05
    assert verdict(result.diff, result.p_diff, result.p_equiv, 0.05) == "equivalent"
    one = paired_comparison(PairedTable(0, 1, 0, 0), 0.02)
    assert one.diff == 1.0 and one.lo < 0.0 < one.hi == 1.0 and one.p_diff > 0.05 and one.p_equiv == 1.0
    assert verdict(one.diff, one.p_diff, one.p_equiv, 0.05) == "inconclusive"


def test_four_losses_in_1000_problems_read_as_their_interval():
    """b = 0, c = 4 (the bootstrap said "lower" with an exact McNemar p of 0.12): the interval reaches 0, so no
    difference; it lies inside +-2 points, so equivalent."""
    result = paired_comparison(PairedTable(996, 0, 4, 0), 0.02)
    assert result.lo < 0.0 < result.hi < 0.02 and -0.02 < result.lo
    assert result.p_diff > 0.05 and result.p_equiv < 0.001
    cell = verdict_cell(result.diff, result.lo, result.hi, result.p_diff, result.p_equiv,
                        verdict(result.diff, result.p_diff, result.p_equiv, 0.05))
    assert cell == f"-0.4 [{100 * result.lo:+.1f}, +0.1] pt: equivalent (p<0.001)"


def random_tables(count: int, seed: int = 20250916):
    """Paired tables of 1 to 2,000 problems with accuracies and discordance anywhere in [0, 1], ceilings included."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.choice([1, 2, 3, 5, 10, 30, 100, 1000, 2000]))
        probs = rng.dirichlet(rng.choice([0.2, 1.0, 5.0]) * np.ones(4))
        if rng.random() < 0.2:  # no discordant problem, the ceiling or the floor
            probs = np.array([probs[0], 0.0, 0.0, probs[3]]) / (probs[0] + probs[3])
        yield PairedTable(*map(float, rng.multinomial(n, probs))), float(rng.choice([0.01, 0.02, 0.05]))


def test_words_and_p_never_disagree_with_the_interval_on_random_tables():
    """Property test (2,000 tables, fixed seed, with and without design effects): the 95% interval excludes 0 exactly
    when p_diff < 0.05 and lies inside the margin exactly when p_equiv < 0.05, and the words say the same; the
    intervals are nested in the level (so each p is the least alpha at which its claim holds)."""
    rng = np.random.default_rng(7)
    for table, margin in random_tables(2000):
        design = INDEPENDENT if rng.random() < 0.5 else Design(float(rng.uniform(1, 6)), float(rng.choice([2, 9,
                                                                                                            np.inf])))
        result = paired_comparison(table, margin, 0.95, design)
        words = verdict(result.diff, result.p_diff, result.p_equiv, 0.05)
        excludes_zero, inside = result.lo > 0 or result.hi < 0, -margin < result.lo and result.hi < margin
        assert excludes_zero == (result.p_diff < 0.05) == ("lower" in words or "higher" in words), (table, result)
        assert inside == (result.p_equiv < 0.05) == ("equivalent" in words), (table, result)
        assert (words == "inconclusive") == (not excludes_zero and not inside)
        assert ("higher" in words) <= (result.diff > 0) and ("lower" in words) <= (result.diff < 0)
        wider = newcombe_interval(table.scaled(design.deff), design.critical(0.99))
        assert wider[0] <= result.lo + 1e-12 and result.hi <= wider[1] + 1e-12, (table, design)


def test_the_cell_shows_each_claim_with_its_p():
    assert verdict_cell(-0.05, -0.066, -0.035, 1e-8, 1.0, "lower") == (
        "-5.0 [-6.6, -3.5] pt: lower by 5.0 pt (p<0.001)")
    assert verdict_cell(-0.005, -0.009, -0.001, 0.012, 0.0004, "equivalent, lower") == (
        "-0.5 [-0.9, -0.1] pt: equivalent (p<0.001), lower by 0.5 pt (p=0.012)")
    assert verdict_cell(0.002, -0.009, 0.014, 0.7, 0.081, "inconclusive") == (
        "+0.2 [-0.9, +1.4] pt: inconclusive (difference p=0.7, equivalence p=0.081)")
    assert verdict(0.01, 0.01, 0.2, 0.05) == "higher" and verdict(math.nan, 0.5, 0.5, 0.05) == ""


# ------------------------------------------------------------------------------------------------ Holm
def test_holm_by_hand():
    """p = (0.01, 0.04, 0.03, 0.005), m = 4: sorted 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 =
    0.04 -> 0.06 (the running maximum keeps the order); NaN is not a test."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([0.2, math.nan, 0.6])
    assert adjusted[0] == pytest.approx(0.4) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.6)
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([]) == []


# ------------------------------------------------------------------------------------------------ design effects
def test_one_seed_without_families_is_independent():
    assert design_effect(np.array([[1.0, 0.0, 1.0, 1.0]])) == INDEPENDENT
    assert design_effect(np.array([[1.0, 0.0, 1.0]]), ["a", "a", "a"]) == INDEPENDENT  # one family: nothing to pool


def test_perfectly_correlated_families_widen_the_interval():
    """4 families of 5 problems, each family all right or all wrong (1, 1, 0, 1): mean 0.75; V_iid = sum (x - m)^2 /
    (N (N - 1)) = 3.75 / 380; families' totals of x - m: 1.25, 1.25, -3.75, 1.25, so V = 4/3 * 18.75 / 400 =
    0.0625; deff = 0.0625 * 380 / 3.75 = 6.333, on 3 degrees of freedom."""
    verdicts = np.repeat([1.0, 1.0, 0.0, 1.0], 5)
    families = np.repeat(["f0", "f1", "f2", "f3"], 5)
    design = design_effect(verdicts[None, :], families)
    assert design.deff == pytest.approx(0.0625 * 380 / 3.75) and design.df == pytest.approx(3.0)
    plain, clustered = wilson_interval(15, 20), wilson_interval(15, 20, 0.95, design)
    assert clustered[0] < plain[0] and clustered[1] > plain[1]
    mixed = np.tile([1.0, 0.0, 1.0, 1.0, 0.0], 4)  # every family alike: no evidence of dependence, deff stays 1
    assert design_effect(mixed[None, :], families).deff == 1.0


def test_two_seeds_that_agree_count_as_one():
    """Identical seeds: the seeds' means do not spread and there is no seed-by-problem noise, so V is the problems'
    variance of one seed, sum (x - m)^2 / (n (n - 1)), against V_iid = 2 sum (x - m)^2 / (2n (2n - 1)):
    deff = (2n - 1) / (n - 1), on S - 1 = 1 degree of freedom (two seeds say little about the seeds' spread)."""
    x = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    design = design_effect(np.stack([x, x]))
    assert design.deff == pytest.approx(15 / 7) and design.df == pytest.approx(1.0)


def test_seeds_that_disagree_wholesale():
    """Seeds (all right, all wrong, all right) on 4 problems: every problem's mean is 2/3, so the problems add no
    variance; the seeds' means (1, 0, 1) have sample variance 1/3, V = 1/9 on 2 degrees of freedom; V_iid = (8/9 +
    16/9) / 132; deff = 132/24 = 5.5. The accuracy's interval over seeds is Wilson's of 8/12 on 12/5.5 problems with
    t_2 = 4.303."""
    x = np.array([[1.0] * 4, [0.0] * 4, [1.0] * 4])
    design = design_effect(x)
    assert design.deff == pytest.approx(5.5) and design.df == pytest.approx(2.0)
    lo, hi = wilson_interval(8, 12, 0.95, design)
    assert (lo, hi) == pytest.approx(wilson_interval(8 / 5.5, 12 / 5.5, 0.95, Design(1.0, 2.0)))
    assert hi - lo > 0.8  # three seeds that disagree this much say little


def test_without_any_variation_the_seeds_share_their_problems():
    design = design_effect(np.ones((3, 50)))
    assert design == Design(3.0, math.inf)
    lo, _ = wilson_interval(150, 150, 0.95, design)
    assert lo == pytest.approx(wilson_interval(50, 50)[0])  # three perfect seeds: the evidence of 50 problems


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


def test_the_cluster_bootstrap_resamples_whole_families():
    """Costs 1 or 3 per problem, constant within 4 families of 10: totals per family are 10, 30, 10, 30; resampling
    families gives mean costs in {1, 1.5, 2, 2.5, 3} (a family's 10 problems go together), resampling problems a
    far narrower spread around 2."""
    families = np.repeat(["a", "b", "c", "d"], 10)
    cost = np.repeat([1.0, 3.0, 1.0, 3.0], 10)[:, None]
    totals = cluster_totals(cost, families)
    assert totals[:, 0].tolist() == [10.0, 30.0, 10.0, 30.0]
    by_family = bootstrap_sums(totals, 4000, seed=0)[:, 0] / 40
    by_problem = bootstrap_sums(cost, 4000, seed=0)[:, 0] / 40
    assert set(np.round(np.unique(by_family), 6)) <= {1.0, 1.5, 2.0, 2.5, 3.0}
    fam_lo, fam_hi = percentile_interval(by_family)
    prob_lo, prob_hi = percentile_interval(by_problem)
    assert fam_hi - fam_lo > 1.5 * (prob_hi - prob_lo)
    assert np.array_equal(cluster_totals(cost, None), cost)


def test_interval_coverage_on_simulated_data():
    """With fixed seeds (deterministic, so it cannot flake): 95% intervals over 100 problems cover the true value in
    about 95% of 300 simulated test sets: Wilson's of a Bernoulli(0.7) mean, the bootstrap's of it, and Newcombe's of
    a paired arm that flips 10% of the verdicts (true difference 0.1 * (1 - 2 * 0.7))."""
    rng = np.random.default_rng(12345)
    wilson_hits = boot_hits = diff_hits = 0
    trials = 300
    for t in range(trials):
        x = (rng.random(100) < 0.7).astype(float)
        lo, hi = wilson_interval(int(x.sum()), 100)
        wilson_hits += lo <= 0.7 <= hi
        lo, hi = percentile_interval(bootstrap_sums(x[:, None], 1000, seed=t)[:, 0] / 100)
        boot_hits += lo <= 0.7 <= hi
        y = np.where(rng.random(100) < 0.1, 1.0 - x, x)
        lo, hi = newcombe_interval(PairedTable.of(y, x), Z)
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


def test_problems_for_equivalence_by_hand():
    # (1.959964 + 1.281552)^2 * 0.04 / 0.02^2 = 1050.7 -> 1051; with no discordance, the score interval's own width:
    # z^2 (1 - 0.02) / 0.02 = 188.2 -> 189 problems
    assert problems_for_equivalence(0.04, 0.02) == 1051
    assert problems_for_equivalence(0.0, 0.02) == 189
    assert paired_comparison(PairedTable(189, 0, 0, 0), 0.02).p_equiv < 0.05
    assert paired_comparison(PairedTable(188, 0, 0, 0), 0.02).p_equiv >= 0.05


def test_settings_are_checked_with_the_config_key():
    assert StatsSettings().margin("math") == pytest.approx(0.02)
    assert StatsSettings(margins_pts={"aime25": 10}).margin("aime25") == pytest.approx(0.1)
    for bad, key in (({"confidence": 1.5}, "confidence"), ({"n_boot": 10}, "n_boot"), ({"margin_pts": 0}, "margin"),
                     ({"margins_pts": {"code": -1}}, "margins_pts.code"), ({"resolve": 2.0}, "resolve")):
        with pytest.raises(UserError, match=f"report.stats.{key}"):
            StatsSettings(**bad)
