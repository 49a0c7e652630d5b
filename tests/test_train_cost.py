"""The fine-tune cost estimator: GPU-hours from a throughput, and the FLOP-count stand-in for a measured throughput."""

import pytest

from sbd_core.cost import analytic_row_tokens_per_s, finetune_cost


def test_gpu_hours_follow_from_tokens_and_throughput():
    cost = finetune_cost(row_tokens_per_s_per_gpu=1000.0, steps=100, tokens_per_step=36_000, gpus=4,
                         scaling_efficiency=0.5, overhead=0.0)
    assert cost.tokens == 3.6e6
    assert cost.gpu_hours == pytest.approx(3.6e6 / 500 / 3600) and cost.wall_hours == pytest.approx(0.5)
    assert finetune_cost(1000.0).tokens == 34_000 * 2 * 1024**2  # the paper's 34k steps of 2M tokens
    with pytest.raises(ValueError, match="positive throughput"):
        finetune_cost(0.0)


def test_sbd_costs_twice_ntp_per_row_token_with_a_block_sparse_mask():
    ntp = analytic_row_tokens_per_s(7.5e9, 32, 4096, 32768, "ntp")
    sbd = analytic_row_tokens_per_s(7.5e9, 32, 4096, 32768, "sbd")
    assert sbd == pytest.approx(ntp / 2)
    # by hand: forward 2 x 7.5e9 + 4 x 4096 x 32 x 16384 = 2.359e10 FLOP/token, x4 with recompute, at 0.4 x 989e12
    assert ntp == pytest.approx(0.4 * 989e12 / (4 * (1.5e10 + 4 * 4096 * 32 * 16384)))
