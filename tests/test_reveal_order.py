"""Reveals in position order (solver parameter ``order: prefix``, a departure from the paper's inference): a forward
keeps the leading run of its rule's reveals, else reveals the leftmost masked position. Hand-computed cases on the
block of tests/test_solvers.py (confidence .60 .90 .95 .25; entropy order 2, 1, 0, 3), its name, tag and label, what
it refuses, and both decoders with it: the engine against the reference, the reference against a slow causal
reference, and no block ever holding a revealed token right of a masked one."""

import pytest
import torch
from torch._dynamo.utils import counters

from oracles import RecordingSolver, check_engine_refilling_slots, check_sbd_path
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.setup import SHIFT_FIRST
from sbd_core.decoding.solvers import get_solver, leading_reveals
from sbd_core.samplers import checked_sampler, expand_samplers, sampler_label
from test_engine_compile import fresh_dynamo  # noqa: F401 (a fixture)
from test_solvers import ALL_ON, BLOCK, lg, mk, revealed

PREFIX = {"order": "prefix"}
PROMPTS = ["hi", "a longer prompt here", "mid size"]


@pytest.mark.parametrize("solver, masked, paper, ours", [
    # threshold .85 passes positions 1 and 2; position 0 is masked and fails, so nothing leads: the leftmost goes
    (get_solver("confidence_threshold", threshold=0.85), ALL_ON, [1, 2], [0]),
    (get_solver("confidence_threshold", threshold=0.5), ALL_ON, [0, 1, 2], [0, 1, 2]),  # already a leading run
    (get_solver("confidence_threshold", threshold=0.85), mk([0, 1, 1, 1]), [1, 2], [1, 2]),  # 0 revealed before
    (get_solver("confidence_threshold", threshold=0.85), mk([1, 0, 1, 0]), [2], [0]),  # 1 revealed, 0 still masked
    (get_solver("confidence_threshold", threshold=0.99), mk([0, 0, 1, 1]), [2], [2]),  # forced: the most confident
    (get_solver("confidence_threshold", threshold=0.99), mk([0, 1, 0, 1]), [1], [1]),  # is the leftmost here
    (get_solver("eb", gamma=0.3), ALL_ON, [1, 2], [0]),  # EB keeps 2 then 1; position 0 fails
    (get_solver("eb", gamma=0.6), ALL_ON, [0, 1, 2], [0, 1, 2]),
    (get_solver("topk", n=2), mk([0, 1, 1, 0]), [1, 2], [1, 2]),
])
def test_hand_cases(solver, masked, paper, ours):
    assert revealed(solver, lg(BLOCK), masked) == [paper]
    ordered = get_solver(solver.name, **{**solver.params, **PREFIX})
    assert revealed(ordered, lg(BLOCK), masked) == [ours]


@pytest.mark.parametrize("seed", range(3))
def test_a_leading_run_of_the_papers_reveals_or_the_leftmost_masked(seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(16, 8, 11, generator=g) * 2
    masked = torch.rand(16, 8, generator=g) < 0.6
    masked[0] = False
    for name, params in [("confidence_threshold", {"threshold": 0.7}), ("eb", {"gamma": 0.4}), ("factor", {})]:
        paper, _ = get_solver(name, **params)(logits, masked)
        ours, _ = get_solver(name, **params, **PREFIX)(logits, masked)
        leftmost = masked & (masked.long().cumsum(1) == 1)
        assert not (ours & ~(paper | leftmost)).any()  # nothing the paper's rule would not reveal, but the leftmost
        left = masked & ~ours
        assert not (ours & left.long().cummax(dim=1).values.bool()).any()  # no reveal right of a masked position
        assert torch.equal(ours.any(1), masked.any(1))  # a row with a masked position reveals one
        assert torch.equal(ours, leading_reveals(paper, masked))


def test_the_setting_has_its_own_tag_family_and_label_and_leaves_the_papers_spec_unchanged():
    specs = expand_samplers([{"solver": "confidence_threshold", "threshold": 0.999, "first_token": "ntp",
                              "order": ["any", "prefix"]}, {"solver": "eb", "gamma": 0.1, **PREFIX}])
    assert list(specs) == ["conf-thr-0.999-first-ntp", "conf-thr-0.999-first-ntp-prefix", "eb-entropy-g0.1-prefix"]
    assert "order" not in specs["conf-thr-0.999-first-ntp"]["params"]  # the paper's order: earlier runs' spec
    ours = specs["conf-thr-0.999-first-ntp-prefix"]
    assert ours["params"]["order"] == "prefix" and ours["family"] == "confidence_threshold-first-ntp-prefix"
    assert sampler_label(specs["eb-entropy-g0.1-prefix"]) == "EB \u03b3=0.1 (in position order)"
    assert checked_sampler(ours) == ours


def test_bad_values_and_verify_are_refused():
    with pytest.raises(ValueError, match=r"order=.* is not valid; allowed: \('any', 'prefix'\)"):
        get_solver("eb", order="left")
    with pytest.raises(ValueError, match="order='prefix' is a setting of plain decoding"):
        get_solver("eb", gamma=0.1, verify="greedy", **PREFIX)


def never_right_of_a_mask(calls) -> bool:
    """After every recorded forward, each row's masked positions form the end of its block."""
    for call in calls:
        left = call.masked & ~call.reveal
        if (~left & left.long().cummax(dim=1).values.bool()).any():
            return False
    return True


@pytest.mark.parametrize("first_token", ["mask", "ntp"])
def test_reference_follows_the_slow_reference_and_keeps_the_order(sbd_model, tokenizer, first_token):
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    recorder = RecordingSolver(get_solver("topk", n=2, first_token=first_token, **PREFIX))
    decoder = BlockDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=11, eos_token_ids=()),
                           recorder)
    gens = decoder.decode_batch(ids)
    check_sbd_path(sbd_model, ids, gens, recorder.calls, 4, 11, (), excluded=decoder.setup.excluded_ids,
                   shifted=SHIFT_FIRST if first_token == "ntp" else False)
    assert never_right_of_a_mask(recorder.calls)
    assert any(c.reveal.sum(1).max() > 1 for c in recorder.calls)  # it still reveals several tokens a forward
    paper = get_solver("topk", n=2)
    assert any(not torch.equal(paper(c.logits, c.masked)[0], c.reveal) for c in recorder.calls)  # and cuts some


@pytest.mark.parametrize("slots", [1, 2])
def test_engine_follows_the_reference(sbd_model, tokenizer, slots):
    check_engine_refilling_slots(sbd_model, tokenizer, PROMPTS, get_solver("eb", gamma=0.5, **PREFIX), slots)


def test_the_step_traces_into_one_graph(sbd_model, tokenizer, fresh_dynamo):
    config = DecodeConfig(block_size=4, max_new_tokens=6, eos_token_ids=(), batch_size=2, compile=True)
    solver = get_solver("eb", gamma=0.5, first_token="ntp", **PREFIX)
    engine = FastDecoder(sbd_model, tokenizer, config, solver, backend="eager")
    engine.generate([tokenizer(p)["input_ids"] for p in PROMPTS])  # fullgraph=True: a graph break raises
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 2  # the step and the prefill

