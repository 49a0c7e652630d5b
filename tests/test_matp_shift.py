"""Shifted MATP labels (training option ``matp_shift``, a departure): the labels, what a fine-tune records, and both
decoders reading each block position one position earlier (``true``), or only after a revealed token
(``"revealed"``), against a slow reference and against NTP mode; the engine's step with it still traces into one
graph."""

import pytest
import torch
from torch._dynamo.utils import counters

from oracles import (RecordingSolver, check_blocks_of_one_read_ntp_logits, check_engine_refilling_slots,
                     check_sbd_path)
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.solvers import get_solver
from sbd_core.errors import UserError
from sbd_core.pipeline.plan import check_shifted_samplers
from sbd_core.samplers import expand_samplers
from sbd_core.masking import IGNORE_INDEX, build_batch, shift_to_previous
from sbd_core.train_config import SHIFT_CONFIG_KEY, SHIFT_REVEALED, TrainConfig
from test_engine_compile import fresh_dynamo  # noqa: F401 (a fixture)

X = IGNORE_INDEX
PROMPTS = ["hi", "a longer prompt here", "mid size"]


def test_labels_move_to_the_previous_token_of_the_same_block_and_document():
    labels = torch.tensor([[X, 11, 12, X, 14, 15, 16, X]])  # MATP labels at masked positions 1, 2, 4, 5, 6
    docs = torch.tensor([[0, 0, 0, 0, 0, 0, 1, 1]])  # a second document starts at 6
    # blocks of 3: [0 1 2] [3 4 5] [6 7]; 14 moves to 3 (unmasked: it now predicts the mask after it);
    # 15 moves to 4; 16 starts document 1 and block [6 7]: dropped; 11 -> 0, 12 -> 1
    assert shift_to_previous(labels, docs, 3).tolist() == [[11, 12, X, 14, 15, X, X, X]]
    # blocks of 2: [0 1] [2 3] [4 5] [6 7]: 12 and 14 start blocks and are dropped
    assert shift_to_previous(labels, docs, 2).tolist() == [[11, X, X, X, 15, X, X, X]]


def test_revealed_moves_a_label_only_onto_a_revealed_token():
    labels = torch.tensor([[X, 11, 12, 13, 14, X, 16, X]])  # masked (with a label) at 1, 2, 3, 4, 6
    masked = torch.tensor([[False, True, True, True, True, False, True, False]])
    docs = torch.zeros(1, 8, dtype=torch.long)
    # blocks of 4: [0 1 2 3] [4 5 6 7]; 11 -> 0 (0 revealed); 12 and 13 follow a mask: they stay; 14 starts a block:
    # dropped; 16 -> 5 (5 revealed)
    assert shift_to_previous(labels, docs, 4, masked).tolist() == [[11, X, 12, 13, X, 16, X, X]]
    # a revealed token keeps its successor's label when a masked token without a label (a prompt) precedes it
    labels = torch.tensor([[X, X, X, 13]])
    masked = torch.tensor([[False, True, False, True]])
    assert shift_to_previous(labels, torch.zeros(1, 4, dtype=torch.long), 4, masked).tolist() == [[X, X, 13, X]]


def test_shifted_batch_keeps_the_noise_and_the_ntp_half():
    seq = torch.arange(20, 37).unsqueeze(0)  # N + 1 = 17 tokens
    plain = build_batch(seq, "sbd", mask_token_id=3, block_size=4, generator=torch.Generator().manual_seed(5))
    shifted = build_batch(seq, "sbd", mask_token_id=3, block_size=4, generator=torch.Generator().manual_seed(5),
                          shift=True)
    assert torch.equal(plain.input_ids, shifted.input_ids)  # the same masks
    n = plain.half
    assert torch.equal(plain.labels[:, :n], shifted.labels[:, :n])
    masked = (plain.input_ids[0, n:] == 3).tolist()
    want = [seq[0, j + 1].item() if j % 4 != 3 and masked[j + 1] else X for j in range(n - 1)] + [X]
    assert shifted.labels[0, n:].tolist() == want
    assert any(w != X for w in want)
    revealed = build_batch(seq, "sbd", mask_token_id=3, block_size=4, generator=torch.Generator().manual_seed(5),
                           shift=SHIFT_REVEALED)
    assert torch.equal(plain.input_ids, revealed.input_ids)
    want = [seq[0, j + 1].item() if j % 4 != 3 and masked[j + 1] and not masked[j] else
            seq[0, j].item() if j % 4 and masked[j] and masked[j - 1] else X for j in range(n)]
    assert revealed.labels[0, n:].tolist() == want
    assert any(w != X for j, w in enumerate(want) if masked[j]) and any(w != X for j, w in enumerate(want)
                                                                         if not masked[j])


def test_an_sbd_arm_records_the_option_and_names_the_departure(sbd_model):
    TrainConfig(objective="ntp", matp_shift=True).record_in(sbd_model.config)
    assert not hasattr(sbd_model.config, SHIFT_CONFIG_KEY)  # an NTP arm has no MATP labels to shift
    config = TrainConfig(objective="sbd", matp_shift=True)
    config.record_in(sbd_model.config)
    assert getattr(sbd_model.config, SHIFT_CONFIG_KEY) is True
    assert config.departures() == {"matp_shift": True}
    config = TrainConfig(objective="sbd", matp_shift="revealed")
    config.record_in(sbd_model.config)
    assert getattr(sbd_model.config, SHIFT_CONFIG_KEY) == "revealed"
    assert config.departures() == {"matp_shift": "revealed"}


@pytest.mark.parametrize("value", [1, "all", "Revealed", None])
def test_matp_shift_takes_false_true_or_revealed(value):
    with pytest.raises(ValueError, match="matp_shift must be false, true or 'revealed'"):
        TrainConfig(matp_shift=value)


@pytest.mark.parametrize("shift", [True, SHIFT_REVEALED])
@pytest.mark.parametrize("solver", [get_solver("eb", gamma=0.5), get_solver("topk", n=3)], ids=lambda s: s.tag)
def test_shifted_decoder_follows_slow_reference(sbd_model, tokenizer, solver, shift):
    setattr(sbd_model.config, SHIFT_CONFIG_KEY, shift)
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    recorder = RecordingSolver(solver)
    decoder = BlockDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=11, eos_token_ids=()),
                           recorder)
    assert decoder.setup.shifted
    gens = decoder.decode_batch(ids)
    check_sbd_path(sbd_model, ids, gens, recorder.calls, 4, 11, (), excluded=decoder.setup.excluded_ids, shifted=shift)


def test_blocks_of_one_read_the_ntp_logits(sbd_model, tokenizer):
    """With blocks of one token a shifted model's every prediction is its NTP logit: the same logits as NTP mode."""
    setattr(sbd_model.config, SHIFT_CONFIG_KEY, True)
    check_blocks_of_one_read_ntp_logits(sbd_model, tokenizer, PROMPTS, get_solver("topk", n=1))


@pytest.mark.parametrize("shift", [True, SHIFT_REVEALED])
@pytest.mark.parametrize("slots", [1, 2])
def test_shifted_engine_follows_slow_reference(sbd_model, tokenizer, slots, shift):
    """Rows stop at different blocks, so slots are refilled mid-run: a new row's first block reads its prompt's NTP
    logits while the other slots re-feed their finished blocks."""
    setattr(sbd_model.config, SHIFT_CONFIG_KEY, shift)
    check_engine_refilling_slots(sbd_model, tokenizer, PROMPTS, get_solver("eb", gamma=0.5), slots, shifted=shift)


@pytest.mark.parametrize("shift", [True, SHIFT_REVEALED])
def test_the_shifted_step_traces_into_one_graph(sbd_model, tokenizer, fresh_dynamo, shift):
    setattr(sbd_model.config, SHIFT_CONFIG_KEY, shift)
    config = DecodeConfig(block_size=4, max_new_tokens=6, eos_token_ids=(), batch_size=2, compile=True)
    engine = FastDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=0.5), backend="eager")
    engine.generate([tokenizer(p)["input_ids"] for p in PROMPTS])  # fullgraph=True: a graph break raises
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 2  # the step and the prefill


def test_verify_refuses_a_shifted_model(sbd_model, tokenizer):
    setattr(sbd_model.config, SHIFT_CONFIG_KEY, True)
    config, solver = DecodeConfig(block_size=4, max_new_tokens=4), get_solver("eb", gamma=0.1, verify="greedy")
    with pytest.raises(ValueError, match="matp_shift"):
        FastDecoder(sbd_model, tokenizer, config, solver).generate([tokenizer("hi")["input_ids"]])
    with pytest.raises(ValueError, match="matp_shift"):
        BlockDecoder(sbd_model, tokenizer, config, solver).decode_batch([tokenizer("hi")["input_ids"]])


def test_a_config_with_matp_shift_and_verify_is_refused_before_any_job():
    specs = expand_samplers([{"solver": "ntp"}, {"solver": "eb", "gamma": [0.1]},
                             {"solver": "eb", "gamma": [0.1], "verify": "greedy"}])
    every = lambda objective: list(specs)  # noqa: E731
    with pytest.raises(UserError, match=r"matp_shift.*\['eb-entropy-g0.1-verify'\]"):
        check_shifted_samplers(["ntp", "sbd"], {"matp_shift": True}, specs, every)
    check_shifted_samplers(["ntp", "sbd"], {"matp_shift": False}, specs, every)  # the paper's labels: verify decodes
    check_shifted_samplers(["ntp"], {"matp_shift": True}, specs, every)  # no SBD arm to verify
    plain = lambda objective: [tag for tag in specs if "verify" not in tag]  # noqa: E731
    check_shifted_samplers(["ntp", "sbd"], {"matp_shift": True}, specs, plain)  # decode.restrict leaves verify out
