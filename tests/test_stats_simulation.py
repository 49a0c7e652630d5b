"""Simulation check of the verdict procedure (slow tier: ``pytest -m slow -s tests/test_stats_simulation.py`` prints
the rates): under no true difference, how often the words say "lower" or "higher" at 95%, for independent problems,
for problems in families whose differences only average out over families, and for three fine-tune seeds whose
differences only average out over seeds. Fixed seeds: the rates are the same on every run."""

import numpy as np
import pytest

from sbd_core.report.stats.estimates import INDEPENDENT, design_effect, z_value
from sbd_core.report.stats.verdicts import PairedTable, newcombe_interval, paired_comparison

pytestmark = pytest.mark.slow
NOMINAL = 0.05


def false_difference_rate_independent(accuracy: float, discordance: float, n: int = 1000, trials: int = 20_000,
                                      seed: int = 1) -> float:
    """Paired tables of n problems, both arms right with probability ``accuracy``, a fraction ``discordance`` decided
    differently, half each way: the share whose 95% interval excludes 0."""
    probs = [accuracy - discordance / 2, discordance / 2, discordance / 2, 1 - accuracy - discordance / 2]
    tables = np.random.default_rng(seed).multinomial(n, probs, size=trials)
    keys, counts = np.unique(tables, axis=0, return_counts=True)
    z = z_value(0.95)
    hits = 0
    for key, count in zip(keys, counts):
        lo, hi = newcombe_interval(PairedTable(*map(float, key)), z)
        hits += count * (lo > 0 or hi < 0)
    return hits / trials


def discordant(rng, n: int, rate, favour):
    """NTP-arm verdicts at 90% and a run that differs on a share ``rate`` of the problems, right there with
    probability ``favour`` (per problem)."""
    base = (rng.random(n) < 0.9).astype(float)
    flip = rng.random(n) < rate
    wins = rng.random(n) < favour
    row = base.copy()
    row[flip], base[flip] = wins[flip], 1.0 - wins[flip]
    return row, base


def families(rng, n=1000, groups=32, discordance=0.06, spread=0.3):
    """32 families: each its own discordance (0 to twice the mean) and its own lean (the run wins a discordant
    problem with probability 0.5 +- up to ``spread``): no difference over families, one within each."""
    labels = np.arange(n) % groups
    lean = rng.uniform(-spread, spread, groups)
    rate = rng.uniform(0, 2 * discordance, groups)
    row, base = discordant(rng, n, rate[labels], 0.5 + lean[labels])
    return row[None, :], base[None, :], labels.astype(str)


def seeds(rng, n=1000, count=3, discordance=0.06, spread=0.3):
    """Three seeds on the same problems, each with its own lean: no difference over seeds, one within each."""
    pairs = [discordant(rng, n, discordance, 0.5 + rng.uniform(-spread, spread)) for _ in range(count)]
    return np.stack([r for r, _ in pairs]), np.stack([b for _, b in pairs]), None


def false_difference_rate(draw, trials: int = 1000, seed: int = 0, aware: bool = True) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        row, base, clusters = draw(rng)
        design = design_effect(row - base, clusters) if aware else INDEPENDENT
        result = paired_comparison(PairedTable.of(row.ravel(), base.ravel()), 0.02, 0.95, design)
        hits += result.p_diff < NOMINAL
    return hits / trials


@pytest.mark.parametrize("accuracy, discordance", [(0.6, 0.01), (0.6, 0.06), (0.6, 0.2), (0.9, 0.01), (0.9, 0.03),
                                                   (0.9, 0.06), (0.9, 0.1), (0.97, 0.03), (0.97, 0.06)])
def test_independent_problems_call_a_difference_at_most_at_the_nominal_rate(accuracy, discordance):
    rate = false_difference_rate_independent(accuracy, discordance)
    print(f"\nindependent, accuracy {accuracy}, discordance {discordance}: {100 * rate:.2f}% (20,000 tables)")
    assert rate <= NOMINAL


@pytest.mark.parametrize("name, draw", [("32 families", families), ("3 seeds", seeds)])
def test_families_and_seeds_need_their_design_effect(name, draw):
    """With the design effect near the nominal rate (at most 2 Monte Carlo standard errors above it over 1,000
    draws); counting the problems as independent calls differences far more often."""
    aware, naive = false_difference_rate(draw), false_difference_rate(draw, aware=False)
    print(f"\n{name}: {100 * aware:.1f}% with the design effect, {100 * naive:.1f}% counting problems independent")
    assert aware <= NOMINAL + 2 * np.sqrt(NOMINAL * (1 - NOMINAL) / 1000) and naive > 1.5 * NOMINAL
