"""Tests for sbd_core.decoding.solvers: hand-computed cases, edge cases, invariants and error paths.

Logits are built as log(probabilities), so softmax(logits) returns exactly those probabilities
(log(0) = -inf gives probability 0). Entropies below use the natural log:
  H[.6,.4]      = .6*ln(1/.6) + .4*ln(1/.4)     = .306495 + .366516 = 0.673012
  H[.9,.1]      = .9*ln(1/.9) + .1*ln(10)       = .094825 + .230259 = 0.325083
  H[.95,.05]    = .95*ln(1/.95) + .05*ln(20)    = .048729 + .149787 = 0.198515
  H[.25]*4      = ln 4                                              = 1.386294
  H[.7,.1,.1,.1]= .7*ln(1/.7) + .3*ln(10)       = .249672 + .690776 = 0.940448
  H[.45,.15,.2,.2] = .45*ln(1/.45)+.15*ln(1/.15)+.4*ln 5 = .359329+.284568+.643775 = 1.287672
  H[1,0,0,0]    = 0
  H[.5,.5]      = ln 2                                              = 0.693147
  H[.85,.15]    = .85*ln(1/.85) + .15*ln(1/.15)  = .138141 + .284568 = 0.422709
"""

import math
import re

import pytest
import torch

from sbd_core.decoding.solvers import exclude_tokens, get_solver
from sbd_core.solver_rules import SOLVER_NAMES, SOLVERS, describe_solvers

P64 = [0.6, 0.4, 0.0, 0.0]  # H 0.6730, conf 0.60
P91 = [0.9, 0.1, 0.0, 0.0]  # H 0.3251, conf 0.90
P95 = [0.95, 0.05, 0.0, 0.0]  # H 0.1985, conf 0.95
UNI = [0.25, 0.25, 0.25, 0.25]  # H 1.3863, conf 0.25
ONE = [1.0, 0.0, 0.0, 0.0]  # H 0, conf 1
BLOCK = [P64, P91, P95, UNI]  # the hand-worked block used by most cases


def lg(*rows):
    """Logits [B,k,V] = log of the given per-position probability rows."""
    return torch.tensor(rows, dtype=torch.float32).log()


def mk(*rows):
    """Masked [B,k] bool tensor from 0/1 rows."""
    return torch.tensor(rows, dtype=torch.bool)


def revealed(solver, logits, masked):
    """Per row, the sorted list of revealed positions."""
    reveal, _ = solver(logits, masked)
    return [torch.nonzero(r).flatten().tolist() for r in reveal]


ALL_ON = mk([1, 1, 1, 1])


# --------------------------------------------------------------------------- eb
@pytest.mark.parametrize(
    "gamma, expected",
    [
        # entropy order: pos2 (.1985), pos1 (.3251), pos0 (.6730), pos3 (1.3863)
        # sum of the entropies before the s-th: s=1: 0, s=2: .1985, s=3: .5236, s=4: 1.1966
        (0.0, [2]),
        (0.1, [2]),  # .1985 > .1 -> s=1
        (0.3, [1, 2]),  # .1985 <= .3 < .5236 -> s=2
        (0.6, [0, 1, 2]),  # .5236 <= .6 < 1.1966 -> s=3
        (1.19, [0, 1, 2]),  # 1.1966 > 1.19
        (1.2, [0, 1, 2, 3]),  # 1.1966 <= 1.2 -> whole block
        (math.inf, [0, 1, 2, 3]),
    ],
)
def test_eb_entropy_hand_case(gamma, expected):
    assert revealed(get_solver("eb", gamma=gamma), lg(BLOCK), ALL_ON) == [expected]


def test_eb_ties_go_to_lower_index():
    # four identical positions, H = .3251 each: gamma=0 -> first one only;
    # gamma=.4: prefix sums-before 0, .3251, .6502 -> two positions, the two lowest indices.
    block = lg([P91] * 4)
    assert revealed(get_solver("eb", gamma=0.0), block, ALL_ON) == [[0]]
    assert revealed(get_solver("eb", gamma=0.0), block, mk([0, 1, 1, 1])) == [[1]]
    assert revealed(get_solver("eb", gamma=0.4), block, mk([1, 0, 1, 1])) == [[0, 2]]


def test_eb_zero_entropy_positions_all_revealed_at_gamma0():
    # H = [0, .3251, 0, 1.3863]; order 0, 2, 1, 3. U={0,2,1}: sum .3251 - max .3251 = 0 <= 0;
    # adding 3: 1.7114 - 1.3863 = .3251 > 0. So both zero-entropy positions plus the next one.
    out = revealed(get_solver("eb", gamma=0.0), lg([ONE, P91, ONE, UNI]), ALL_ON)
    assert out == [[0, 1, 2]]
    # all positions zero entropy: everything at once, and no NaN from 0*log 0
    reveal, tokens = get_solver("eb", gamma=0.0)(lg([ONE] * 4), ALL_ON)
    assert reveal.all() and (tokens == 0).all()


def test_eb_gamma0_one_per_forward_with_positive_entropies():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 8, 11, generator=g)
    masked = torch.rand(6, 8, generator=g) < 0.7
    masked[:, 3] = True
    reveal, _ = get_solver("eb", gamma=0.0)(logits, masked)
    assert reveal.sum(1).tolist() == [1] * 6
    ent = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1)
    lowest = ent.masked_fill(~masked, math.inf).sort(1)
    assert (lowest.values[:, 1] - lowest.values[:, 0]).min() > 1e-3  # decisive: no near-tie for the rounding to flip
    assert reveal.float().argmax(1).tolist() == lowest.indices[:, 0].tolist()


def test_eb_gamma_inf_reveals_whole_masked_set():
    logits = torch.randn(3, 16, 7, generator=torch.Generator().manual_seed(2)) * 5
    masked = torch.rand(3, 16, generator=torch.Generator().manual_seed(3)) < 0.5
    reveal, _ = get_solver("eb", gamma=math.inf)(logits, masked)
    assert torch.equal(reveal, masked)


# Crafted block where the three proxies order positions differently:
#   pos0 [.6,.4]         H .6730  conf .60  margin .20
#   pos1 [.7,.1,.1,.1]   H .9404  conf .70  margin .60
#   pos2 [.45,.15,.2,.2] H 1.2877 conf .45  margin .25
# entropy order 0,1,2 ; confidence order 1,0,2 ; margin order 1,2,0
PROXY_BLOCK = [P64, [0.7, 0.1, 0.1, 0.1], [0.45, 0.15, 0.2, 0.2]]


@pytest.mark.parametrize(
    "proxy, gamma, expected",
    [
        ("entropy", 0.0, [0]),
        ("confidence", 0.0, [1]),
        ("margin", 0.0, [1]),
        # confidence prefix {1,0}: sum 1.6134 - max .9404 = .6730 <= .7 (the max is NOT the last element:
        # "sum of those before the last" would give .9404 > .7 and reveal only [1])
        ("confidence", 0.7, [0, 1]),
        ("margin", 0.7, [1]),  # {1,2}: 2.2281 - 1.2877 = .9404 > .7
        ("entropy", 0.95, [0, 1]),  # {0,1}: .6730 ok; {0,1,2}: 2.9011 - 1.2877 = 1.6134 > .95
        ("margin", 0.95, [1, 2]),  # .9404 <= .95; adding 0: 2.9011 - 1.2877 > .95
    ],
)
def test_eb_proxies_change_the_order(proxy, gamma, expected):
    solver = get_solver("eb", gamma=gamma, proxy=proxy)
    assert revealed(solver, lg(PROXY_BLOCK), mk([1, 1, 1])) == [expected]


# ------------------------------------------------------------- entropy_threshold
@pytest.mark.parametrize(
    "threshold, expected",
    [
        (0.5, [1, 2]),  # H: .6730 .3251 .1985 1.3863 -> below .5: pos1, pos2
        (0.7, [0, 1, 2]),
        (2.0, [0, 1, 2, 3]),
        (0.1, [2]),  # none below .1 -> the single lowest-entropy one
    ],
)
def test_entropy_threshold_hand_case(threshold, expected):
    assert revealed(get_solver("entropy_threshold", threshold=threshold), lg(BLOCK), ALL_ON) == [expected]


def test_entropy_threshold_ties_and_zero_entropy():
    # all H=.3251 >= .1 -> fallback picks the lowest masked index
    assert revealed(get_solver("entropy_threshold", threshold=0.1), lg([P91] * 4), mk([0, 0, 1, 1])) == [[2]]
    # zero-entropy positions are below any positive threshold
    out = revealed(get_solver("entropy_threshold", threshold=1e-6), lg([P91, ONE, UNI, ONE]), ALL_ON)
    assert out == [[1, 3]]


# ---------------------------------------------------------- confidence_threshold
@pytest.mark.parametrize(
    "threshold, expected",
    [
        (0.92, [2]),  # conf: .60 .90 .95 .25 -> only .95 > .92
        (0.85, [1, 2]),
        (0.5, [0, 1, 2]),
        (0.0, [0, 1, 2, 3]),
        (0.99, [2]),  # none above -> the single most confident
        (1.0, [2]),
    ],
)
def test_confidence_threshold_hand_case(threshold, expected):
    solver = get_solver("confidence_threshold", threshold=threshold)
    assert revealed(solver, lg(BLOCK), ALL_ON) == [expected]


def test_confidence_threshold_ties_and_one_hot():
    assert revealed(get_solver("confidence_threshold", threshold=0.99), lg([UNI] * 4), mk([0, 1, 1, 0])) == [[1]]
    out = revealed(get_solver("confidence_threshold", threshold=0.99), lg([ONE, UNI, ONE, P95]), ALL_ON)
    assert out == [[0, 2]]


# ------------------------------------------------------------------------ factor
@pytest.mark.parametrize(
    "f, expected",
    [
        # descending conf: pos2 .95, pos1 .90, pos0 .60, pos3 .25 ; n-th accepted iff c_n >= 1 - f/(n+1)
        (1.0, [1, 2]),  # n=2: .90 >= 1-1/3=.667 ok ; n=3: .60 < 1-1/4=.75 stop
        (2.0, [0, 1, 2]),  # n=2: .9>=.333 ; n=3: .6>=.5 ; n=4: .25 < 1-2/5=.6 stop
        (0.1, [2]),  # n=2: .90 < 1-.1/3=.9667 stop
        (0.25, [2]),  # n=2: .90 < 1-.25/3=.9167 stop (a bound of 1-f/n=.875 would wrongly accept it)
        (10.0, [0, 1, 2, 3]),  # thresholds all negative
    ],
)
def test_factor_hand_case(f, expected):
    assert revealed(get_solver("factor", f=f), lg(BLOCK), ALL_ON) == [expected]


def test_factor_first_always_accepted_and_ties():
    # uniform: conf .25 < 1 - .1/2 = .95, yet the first (lowest index among ties) is accepted
    assert revealed(get_solver("factor", f=0.1), lg([UNI] * 4), mk([0, 1, 1, 1])) == [[1]]
    # one-hot positions have conf 1 >= any bound: n=1,2 accepted (1 >= .967), n=3 .95 < .975 stop
    assert revealed(get_solver("factor", f=0.1), lg([P95, ONE, UNI, ONE]), ALL_ON) == [[1, 3]]


# -------------------------------------------------------------------------- topk
def test_topk_hand_case_and_proxies():
    assert revealed(get_solver("topk", n=2), lg(BLOCK), ALL_ON) == [[1, 2]]  # conf .95, .90
    assert revealed(get_solver("topk", n=3), lg(BLOCK), mk([1, 0, 1, 1])) == [[0, 2, 3]]
    assert revealed(get_solver("topk", n=10), lg(BLOCK), ALL_ON) == [[0, 1, 2, 3]]
    block, on3 = lg(PROXY_BLOCK), mk([1, 1, 1])
    assert revealed(get_solver("topk", n=2, proxy="entropy"), block, on3) == [[0, 1]]
    assert revealed(get_solver("topk", n=2, proxy="margin"), block, on3) == [[1, 2]]
    assert revealed(get_solver("topk", n=2), lg([UNI] * 4), ALL_ON) == [[0, 1]]  # ties


# ------------------------------------------------------------------ left_to_right
def test_left_to_right_reveals_the_leftmost_masked_positions():
    # BLOCK's most certain position is 2 (H .1985, conf .95); left_to_right ignores that and takes the leftmost
    assert revealed(get_solver("left_to_right"), lg(BLOCK), ALL_ON) == [[0]]
    assert revealed(get_solver("left_to_right"), lg(BLOCK), mk([0, 0, 1, 1])) == [[2]]
    assert revealed(get_solver("left_to_right", n=2), lg(BLOCK), mk([1, 0, 1, 1])) == [[0, 2]]
    assert revealed(get_solver("left_to_right", n=9), lg(BLOCK), mk([0, 1, 0, 1])) == [[1, 3]]
    reveal, tokens = get_solver("left_to_right")(lg([UNI, ONE, P95, P64]), ALL_ON)
    assert reveal.tolist() == [[True, False, False, False]] and tokens[0, 0] == 0  # the uniform one: argmax of ties


def test_left_to_right_decodes_one_token_per_forward_in_order():
    block = lg(BLOCK)
    masked, order = ALL_ON.clone(), []
    solver = get_solver("left_to_right")
    while masked.any():
        reveal, _ = solver(block, masked)
        order += torch.nonzero(reveal[0]).flatten().tolist()
        masked &= ~reveal
    assert order == [0, 1, 2, 3]


# ------------------------------------------------------------------ excluded tokens (mask, padding)
# Vocabulary [a, b, MASK, c]; the mask id is 2.
MASK_ID = 2


def test_excluded_token_with_the_largest_logit_is_never_chosen():
    # pos0 p = [a .3, b .2, MASK .5, c 0]: renormalised without MASK: [.6, .4, 0, 0] -> token a, conf .6, H .6730
    logits = exclude_tokens(lg([[0.3, 0.2, 0.5, 0.0], [0.1, 0.2, 0.6, 0.1]]), [MASK_ID])
    assert torch.isneginf(logits[..., MASK_ID]).all()
    reveal, tokens = get_solver("topk", n=2)(logits, mk([1, 1]))
    assert reveal.all() and tokens.tolist() == [[0, 1]]  # pos1 renormalised: [.25, .5, 0, .25] -> b
    # pos0 conf .6 > .55 > pos1 conf .5: only pos0 (with MASK counted: .5 and .6, pos1 would be the confident one)
    assert revealed(get_solver("confidence_threshold", threshold=0.55), logits, mk([1, 1])) == [[0]]
    # entropy_threshold .68: pos0 H .6730 passes; pos1 H[.25,.5,.25] = 1.0397 does not
    assert revealed(get_solver("entropy_threshold", threshold=0.68), logits, mk([1, 1])) == [[0]]


def test_excluding_the_mask_changes_the_entropy_order():
    # pos0 [a .5, MASK .5]: H ln2 = .6931 with MASK, 0 without. pos1 [a .85, b .15]: H .4227 either way.
    block, both = [[0.5, 0.0, 0.5, 0.0], [0.85, 0.15, 0.0, 0.0]], mk([1, 1])
    lowest_entropy = get_solver("topk", n=1, proxy="entropy")
    assert revealed(lowest_entropy, lg(block), both) == [[1]]  # counting MASK, pos1 is the more certain one
    assert revealed(lowest_entropy, exclude_tokens(lg(block), [MASK_ID]), both) == [[0]]  # renormalised: pos0 certain
    # EB gamma=0: with MASK the prefix {1, 0} costs .4227 > 0 -> pos1 alone; without, {0, 1} costs 0 -> both
    assert revealed(get_solver("eb", gamma=0.0), lg(block), both) == [[1]]
    assert revealed(get_solver("eb", gamma=0.0), exclude_tokens(lg(block), [MASK_ID]), both) == [[0, 1]]


def test_exclude_tokens_keeps_other_logits_and_rejects_excluding_everything():
    logits = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    assert exclude_tokens(logits, []) is logits
    out = exclude_tokens(logits, (4, 1, 4))
    assert torch.equal(out[..., [0, 2, 3]], logits[..., [0, 2, 3]]) and torch.isneginf(out[..., [1, 4]]).all()
    assert not torch.isinf(logits).any()  # the input is not modified
    _, drawn = get_solver("topk", temperature=5.0)(out.repeat(100, 1, 1), torch.ones(200, 3, dtype=torch.bool))
    assert set(drawn.flatten().tolist()) == {0, 2, 3}  # hot sampling reaches every allowed id, never an excluded one
    with pytest.raises(ValueError, match="cannot exclude"):
        exclude_tokens(logits, range(5))


@pytest.mark.parametrize("name", ["topk", "eb"])
def test_many_ties_keep_index_order(name):
    # 300 identical positions, alternate ones masked: the lowest masked indices win (stable sort)
    masked = torch.zeros(1, 300, dtype=torch.bool)
    masked[0, 1::2] = True
    # topk: 5 positions; eb: s-1 times H .3251 <= 1.0 -> s = 4 (3 * .3251 = .975, 4 * .3251 = 1.3004)
    params, expected = ({"n": 5}, [1, 3, 5, 7, 9]) if name == "topk" else ({"gamma": 1.0}, [1, 3, 5, 7])
    reveal, _ = get_solver(name, **params)(lg([P91] * 300), masked)
    assert torch.nonzero(reveal[0]).flatten().tolist() == expected


# ------------------------------------------------------------- all solvers alike
def all_solvers():
    """One instance of every solver with non-default parameters where that matters."""
    return [get_solver(n) for n in SOLVER_NAMES] + [
        get_solver("eb", gamma=0.5, proxy="confidence"),
        get_solver("eb", gamma=0.0, proxy="margin"),
        get_solver("topk", n=3, proxy="entropy"),
        get_solver("confidence_threshold", threshold=0.5, order="prefix"),
        get_solver("eb", gamma=0.5, order="prefix"),
    ]


@pytest.mark.parametrize("solver", all_solvers(), ids=lambda s: s.tag)
def test_single_masked_position_always_revealed(solver):
    # uniform distribution at pos 3: the worst position, still revealed as it is the only masked one
    assert revealed(solver, lg(BLOCK), mk([0, 0, 0, 1])) == [[3]]


@pytest.mark.parametrize("solver", all_solvers(), ids=lambda s: s.tag)
def test_row_without_masks_reveals_nothing(solver):
    logits = lg(BLOCK, BLOCK)
    reveal, tokens = solver(logits, mk([0, 0, 0, 0], [1, 1, 1, 1]))
    assert not reveal[0].any() and reveal[1].any()
    assert tokens.dtype == torch.long and tokens.shape == (2, 4)


@pytest.mark.parametrize("solver", all_solvers(), ids=lambda s: s.tag)
def test_rows_are_independent(solver):
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(5, 8, 6, generator=g) * 3
    masked = torch.rand(5, 8, generator=g) < 0.6
    reveal, tokens = solver(logits, masked)
    for b in range(5):
        r1, t1 = solver(logits[b : b + 1], masked[b : b + 1])
        assert torch.equal(r1[0], reveal[b]) and torch.equal(t1[0], tokens[b])
    other = logits.clone()
    other[1:] = torch.randn(4, 8, 6, generator=g) * 3
    other_masked = torch.rand(5, 8, generator=g) < 0.6
    other_masked[0] = masked[0]
    r2, t2 = solver(other, other_masked)
    assert torch.equal(r2[0], reveal[0]) and torch.equal(t2[0], tokens[0])
    assert not torch.equal(r2[1:], reveal[1:])  # the other rows did change


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("solver", all_solvers(), ids=lambda s: s.tag)
def test_invariants_random(solver, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(8, 16, 13, generator=g) * (seed + 0.5)
    logits[0, :, 1:] = -math.inf  # one-hot row
    masked = torch.rand(8, 16, generator=g) < 0.5
    masked[2] = False
    masked[3] = True
    reveal, tokens = solver(logits, masked)
    assert reveal.dtype == torch.bool and reveal.shape == masked.shape
    assert not (reveal & ~masked).any()
    assert torch.equal(reveal.any(1), masked.any(1))
    assert torch.equal(tokens, logits.argmax(-1))


def test_dtypes_give_same_result():
    logits = torch.randn(4, 8, 9, generator=torch.Generator().manual_seed(7)) * 2
    masked = torch.ones(4, 8, dtype=torch.bool)
    for solver in all_solvers():
        ref = solver(logits.to(torch.bfloat16).float(), masked)
        for dtype in (torch.bfloat16, torch.float16, torch.float64):
            got = solver(logits.to(torch.bfloat16).to(dtype), masked)
            assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


# Distributions whose statistics are far apart (entropies 0, .1985, .4227, .6730, .9404, 1.2877, 1.3863; confidences
# 1, .95, .85, .6, .7, .45, .25) and away from every threshold and factor bound of all_solvers(): two devices' rounding
# cannot flip a reveal on them (test_decisive_block_resists_noise). Argmax ties (UNI) are exact on every device.
DECISIVE = [ONE, P95, [0.85, 0.15, 0.0, 0.0], P64, PROXY_BLOCK[1], PROXY_BLOCK[2], UNI]


def decisive_batch():
    g = torch.Generator().manual_seed(8)
    logits = torch.stack([lg(DECISIVE)[0, torch.randperm(7, generator=g)] for _ in range(6)])
    return logits, torch.rand(6, 7, generator=g) < 0.7


def test_decisive_block_resists_noise():
    logits, masked = decisive_batch()
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        noisy = logits + torch.randn(logits.shape, generator=g) * 1e-4  # 1,000x float32 rounding; -inf stays -inf
        for solver in all_solvers():
            assert torch.equal(solver(noisy, masked)[0], solver(logits, masked)[0]), solver.tag


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    logits, masked = decisive_batch()
    for solver in all_solvers():
        cpu = solver(logits, masked)
        gpu = solver(logits.cuda(), masked.cuda())
        assert gpu[0].device.type == "cuda"
        assert torch.equal(gpu[0].cpu(), cpu[0]) and torch.equal(gpu[1].cpu(), cpu[1])


# ------------------------------------------------------------------- temperature
def test_sampling_reproducible_and_in_support():
    # each position: 0.5 on token 1, 0.5 on token 3, zero elsewhere
    logits = lg(*[[[0.0, 0.5, 0.0, 0.5]] * 8] * 64)
    masked = torch.ones(64, 8, dtype=torch.bool)
    a = get_solver("eb", temperature=1.0, seed=11)
    b = get_solver("eb", temperature=1.0, seed=11)
    (ra, ta), (rb, tb) = a(logits, masked), b(logits, masked)
    assert torch.equal(ta, tb) and torch.equal(ra, rb)
    assert set(ta.unique().tolist()) == {1, 3}  # both drawn, never a zero-probability token
    assert not torch.equal(a(logits, masked)[1], ta)  # the generator stream advances
    assert not torch.equal(get_solver("eb", temperature=1.0, seed=12)(logits, masked)[1], ta)


def test_temperature_does_not_change_selection():
    logits = torch.randn(4, 8, 9, generator=torch.Generator().manual_seed(4)) * 2
    masked = torch.rand(4, 8, generator=torch.Generator().manual_seed(6)) < 0.7
    for name in SOLVER_NAMES:
        hot, _ = get_solver(name, temperature=2.0, seed=1)(logits, masked)
        cold, _ = get_solver(name)(logits, masked)
        assert torch.equal(hot, cold)


# --------------------------------------------------------------- metadata / API
def test_tags_params_and_description():
    assert get_solver("eb").tag == "eb-entropy-g0.1"
    assert get_solver("eb", gamma=math.inf, proxy="margin").tag == "eb-margin-ginf"
    assert get_solver("entropy_threshold").tag == "entropy-thr-0.5"
    assert get_solver("confidence_threshold").tag == "conf-thr-0.9"
    assert get_solver("factor", f=1.5).tag == "factor-f1.5"
    assert get_solver("factor").tag == "factor-f1"
    assert get_solver("topk", n=2).tag == "topk-2"
    assert get_solver("topk", n=2, proxy="entropy").tag == "topk-2-entropy"
    assert get_solver("eb", gamma=1e-5, temperature=0.7, seed=3).tag == "eb-entropy-g1e-05-t0.7-s3"
    assert get_solver("left_to_right").tag == "l2r-1" and get_solver("left_to_right", n=4).tag == "l2r-4"
    assert get_solver("left_to_right").params == {"n": 1, "verify": "none", "temperature": 0.0, "seed": 0}
    families = {s.tag: s.family for s in all_solvers()}
    assert families == {"eb-entropy-g0.1": "eb-entropy", "entropy-thr-0.5": "entropy_threshold",
                        "conf-thr-0.9": "confidence_threshold", "factor-f1": "factor", "topk-1": "topk",
                        "l2r-1": "left_to_right", "eb-confidence-g0.5": "eb-confidence", "eb-margin-g0": "eb-margin",
                        "topk-3-entropy": "topk", "conf-thr-0.5-prefix": "confidence_threshold-prefix",
                        "eb-entropy-g0.5-prefix": "eb-entropy-prefix"}
    assert get_solver("topk").params == {"n": 1, "proxy": "confidence", "verify": "none", "temperature": 0.0, "seed": 0}
    assert get_solver("eb", gamma=1).params["gamma"] == 1.0
    desc = describe_solvers()
    assert tuple(desc) == SOLVER_NAMES == tuple(SOLVERS)
    # own parameters first; first_token and order are listed with their defaults, though a spec shows them only when
    # set (test_first_token, test_reveal_order)
    assert list(desc["topk"]["params"]) == ["n", "proxy", "verify", "first_token", "order", "temperature", "seed"]
    assert desc["eb"]["params"]["gamma"] == 0.1 and desc["factor"]["params"]["temperature"] == 0.0
    for solver in all_solvers():
        assert re.fullmatch(r"[A-Za-z0-9._-]+", solver.tag)
        assert solver.name in SOLVER_NAMES


def test_verified_solvers_are_runs_of_their_own():
    for name in SOLVER_NAMES:  # every solver takes verify
        plain, verified = get_solver(name), get_solver(name, verify="greedy")
        assert verified.tag == plain.tag + "-verify" and verified.family == plain.family + "-verify"
        assert verified.verify == "greedy" and plain.verify == "none"
    sampled = get_solver("eb", gamma=0.3, verify="sample", temperature=0.7, seed=2)
    assert (sampled.tag, sampled.family) == ("eb-entropy-g0.3-verify-t0.7-s2", "eb-entropy-verify")
    with pytest.raises(ValueError, match=r"verify='greedy' .* needs temperature 0, got temperature=0.7; use "
                                         r"verify='sample'"):
        get_solver("eb", verify="greedy", temperature=0.7)
    with pytest.raises(ValueError, match=r"verify='sample' .* needs a temperature > 0"):
        get_solver("topk", verify="sample")
    with pytest.raises(ValueError, match=r"verify='yes' is not valid; allowed: \('none', 'greedy', 'sample'\)"):
        get_solver("eb", verify="yes")


@pytest.mark.parametrize(
    "name, params, match",
    [
        ("greedy", {}, "valid names"),
        ("eb", {"threshold": 0.5}, "'threshold'.*allowed"),
        ("topk", {"gamma": 0.1}, "'gamma'.*allowed"),
        ("eb", {"gamma": -0.1}, "gamma"),
        ("eb", {"gamma": float("nan")}, "gamma"),
        ("eb", {"gamma": "0.1"}, "gamma"),
        ("eb", {"proxy": "logprob"}, "proxy.*allowed"),
        ("topk", {"proxy": None}, "proxy"),
        ("entropy_threshold", {"threshold": 0.0}, "threshold"),
        ("entropy_threshold", {"threshold": -1.0}, "threshold"),
        ("confidence_threshold", {"threshold": 1.5}, "threshold"),
        ("confidence_threshold", {"threshold": -0.1}, "threshold"),
        ("factor", {"f": 0.0}, "f="),
        ("topk", {"n": 0}, "n must"),
        ("topk", {"n": 1.5}, "n must"),
        ("topk", {"n": True}, "n must"),
        ("left_to_right", {"n": 0}, "n must be an int >= 1"),
        ("left_to_right", {"proxy": "entropy"}, "'proxy'.*allowed"),
        ("eb", {"temperature": -1.0}, "temperature"),
        ("eb", {"temperature": math.inf}, "temperature"),
        ("eb", {"seed": "a"}, "seed"),
    ],
)
def test_bad_construction_raises(name, params, match):
    with pytest.raises(ValueError, match=match):
        get_solver(name, **params)


@pytest.mark.parametrize(
    "logits, masked, match",
    [
        (torch.zeros(4, 5), torch.ones(4, dtype=torch.bool), "logits"),
        (torch.zeros(2, 4, 0), torch.ones(2, 4, dtype=torch.bool), "logits"),
        (torch.zeros(2, 4, 5), torch.ones(2, 3, dtype=torch.bool), "masked shape"),
        (torch.zeros(2, 4, 5), torch.ones(2, 4), "bool"),
        (torch.zeros(2, 4, 5), [[True] * 4] * 2, "bool"),
    ],
)
def test_bad_inputs_raise(logits, masked, match):
    with pytest.raises(ValueError, match=match):
        get_solver("eb")(logits, masked)
