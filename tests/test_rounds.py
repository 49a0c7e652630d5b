"""Rounds of a timed experiment: orders, the median of per-round paired ratios and its order-statistic interval, on
hand-made timings."""

import math
from collections import Counter

import pytest

from sbd_core.rounds import (NO_DIFFERENCE, coverage, interval_text, median_interval, paired_ratio, ratio_words,
                             round_orders)


def test_every_round_holds_every_unit_once_in_a_fresh_seeded_order():
    units = [(row, batch) for row in ("ntp", "sbd", "aa") for batch in (1, 8)]
    orders = round_orders(units, 6, seed=3)
    assert all(Counter(order) == Counter(units) for order in orders)
    assert all(a != b for a, b in zip(orders, orders[1:]))
    assert orders == round_orders(units, 6, seed=3) and orders != round_orders(units, 6, seed=4)
    two = round_orders(["a", "b"], 5, seed=0)  # two units: the order must alternate
    assert two == [two[0], two[0][::-1]] * 2 + [two[0]]
    assert round_orders(["only"], 3, seed=0) == [["only"]] * 3


def test_coverage_of_order_statistics_is_the_binomial_one():
    assert coverage(5, 1) == pytest.approx(1 - 2 / 32)  # [min, max] of 5 rounds: 93.75%
    assert coverage(6, 1) == pytest.approx(1 - 2 / 64)
    assert coverage(9, 2) == pytest.approx(1 - 2 * 10 / 512)


def test_median_interval_takes_the_widest_pair_only_when_it_must():
    five = median_interval([1.3, 1.1, 1.2, 1.0, 1.4])
    assert (five.median, five.lo, five.hi, five.rounds) == (1.2, 1.0, 1.4, 5)
    assert five.level == pytest.approx(0.9375)  # below 95%: no pair of 5 reaches it, and the level says so
    nine = median_interval([9, 1, 8, 2, 7, 3, 6, 4, 5])
    assert (nine.median, nine.lo, nine.hi) == (5, 2, 8) and nine.level == pytest.approx(1 - 20 / 512)
    assert math.isnan(median_interval([]).median) and math.isnan(median_interval([1.0, math.inf]).lo)


def test_speedup_is_the_median_of_per_round_paired_ratios():
    # the machine slows down in round 3 for both sides: the pair cancels it, the unpaired medians would not
    reference = [2.0, 2.0, 6.0, 2.0, 2.0]
    row = [1.0, 1.1, 3.0, 0.9, 1.0]
    speedup = paired_ratio(reference, row)
    ratios = sorted(r / t for r, t in zip(reference, row))
    assert speedup.median == pytest.approx(2.0) and (speedup.lo, speedup.hi) == (ratios[0], ratios[-1])
    assert ratio_words(speedup) == "faster" and interval_text(speedup) == "2.00x [1.82, 2.22]"
    assert ratio_words(paired_ratio(row, reference)) == "slower"


def test_an_interval_that_includes_one_is_no_measurable_difference():
    same = paired_ratio([1.00, 1.02, 0.99, 1.01, 1.00], [1.01, 1.00, 1.00, 0.99, 1.02])
    assert same.lo < 1 < same.hi and ratio_words(same) == NO_DIFFERENCE
    assert ratio_words(median_interval([])) == ""
