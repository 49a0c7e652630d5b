"""A block's first token from the NTP logit (solver parameter ``first_token: ntp``, a departure from the paper's
inference): its name, tag and label, what it refuses, and both decoders reading block position 0 at the token before
the block (every other position at its own mask) against a slow reference and against NTP mode; the engine's step
with it still traces into one graph."""

import pytest
from torch._dynamo.utils import counters

from oracles import (RecordingSolver, check_blocks_of_one_read_ntp_logits, check_engine_refilling_slots,
                     check_sbd_path)
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.setup import SHIFT_FIRST, DecodeSetup
from sbd_core.decoding.solvers import get_solver
from sbd_core.samplers import checked_sampler, expand_samplers, sampler_label
from sbd_core.train_config import SHIFT_CONFIG_KEY
from test_engine_compile import fresh_dynamo  # noqa: F401 (a fixture)

PROMPTS = ["hi", "a longer prompt here", "mid size"]
FIRST = {"first_token": "ntp"}


def test_the_setting_has_its_own_tag_family_and_label_and_leaves_the_papers_spec_unchanged():
    specs = expand_samplers([{"solver": "confidence_threshold", "threshold": 0.999, "first_token": ["mask", "ntp"]},
                             {"solver": "eb", "gamma": 0.1, "first_token": "ntp"}])
    assert list(specs) == ["conf-thr-0.999", "conf-thr-0.999-first-ntp", "eb-entropy-g0.1-first-ntp"]
    paper, ours = specs["conf-thr-0.999"], specs["conf-thr-0.999-first-ntp"]
    assert "first_token" not in paper["params"]  # the paper's inference: the spec of every earlier run
    assert ours["params"]["first_token"] == "ntp" and ours["family"] == "confidence_threshold-first-ntp"
    assert sampler_label(specs["eb-entropy-g0.1-first-ntp"]) == "EB \u03b3=0.1 (first token: NTP)"
    assert checked_sampler(ours) == ours  # the JSON form resolves to itself (what a stage is given)


@pytest.mark.parametrize("value", ["NTP", "ntp_head", True])
def test_first_token_takes_mask_or_ntp(value):
    with pytest.raises(ValueError, match=r"first_token=.* is not valid; allowed: \('mask', 'ntp'\)"):
        get_solver("eb", first_token=value)


def test_verify_refuses_it():
    with pytest.raises(ValueError, match="first_token='ntp' is a setting of plain decoding"):
        get_solver("eb", gamma=0.1, verify="greedy", **FIRST)


def test_setup_reads_the_first_position_early_only_in_sbd_mode_and_leaves_a_shifted_model_its_own(sbd_model,
                                                                                                  tokenizer):
    solver = get_solver("eb", **FIRST)
    assert DecodeSetup.of(sbd_model, tokenizer, DecodeConfig(), solver).shift == SHIFT_FIRST
    assert DecodeSetup.of(sbd_model, tokenizer, DecodeConfig(), get_solver("eb")).shift is False
    assert DecodeSetup.of(sbd_model, tokenizer, DecodeConfig(mode="ntp"), solver).shift is False
    setattr(sbd_model.config, SHIFT_CONFIG_KEY, True)  # block position 0 is already the NTP logit there
    assert DecodeSetup.of(sbd_model, tokenizer, DecodeConfig(), solver).shift is True


@pytest.mark.parametrize("solver", [get_solver("eb", gamma=0.5, **FIRST), get_solver("topk", n=3, **FIRST)],
                         ids=lambda s: s.tag)
def test_decoder_follows_slow_reference(sbd_model, tokenizer, solver):
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    recorder = RecordingSolver(solver)
    decoder = BlockDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=11, eos_token_ids=()),
                           recorder)
    gens = decoder.decode_batch(ids)
    check_sbd_path(sbd_model, ids, gens, recorder.calls, 4, 11, (), excluded=decoder.setup.excluded_ids,
                   shifted=SHIFT_FIRST)


def test_blocks_of_one_read_the_ntp_logits(sbd_model, tokenizer):
    """With blocks of one token every prediction is the NTP logit: the same logits as NTP mode."""
    check_blocks_of_one_read_ntp_logits(sbd_model, tokenizer, PROMPTS, get_solver("topk", n=1, **FIRST))


@pytest.mark.parametrize("slots", [1, 2])
def test_engine_follows_slow_reference(sbd_model, tokenizer, slots):
    """Rows stop at different blocks, so slots are refilled mid-run: a new row's first block reads its prompt's NTP
    logits while the other slots re-feed their finished blocks."""
    check_engine_refilling_slots(sbd_model, tokenizer, PROMPTS, get_solver("eb", gamma=0.5, **FIRST), slots,
                                 shifted=SHIFT_FIRST)


def test_the_step_traces_into_one_graph(sbd_model, tokenizer, fresh_dynamo):
    config = DecodeConfig(block_size=4, max_new_tokens=6, eos_token_ids=(), batch_size=2, compile=True)
    engine = FastDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=0.5, **FIRST), backend="eager")
    engine.generate([tokenizer(p)["input_ids"] for p in PROMPTS])  # fullgraph=True: a graph break raises
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 2  # the step and the prefill
