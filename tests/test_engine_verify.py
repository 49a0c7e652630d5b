"""The engine's verify path (sbd_core.decoding.engine.verified) against the reference decoder's (sbd_core.decoding.verify), the oracle:
per row the same tokens, stop reasons, NFE, widths, accepted and drafted counts, alone and with refills, with EOS, the
length cap and stop strings, on decision-stable models; its cache against a fresh causal forward after rejections; the
settings it refuses or hands to the reference decoder."""

import pytest
import torch
from transformers import DynamicCache

from oracles import RecordingSolver, decisions_are_stable, eos_splitting
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_block_decoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.factory import make_solver
from sbd_core.samplers import sampler_spec
from test_verify import PROMPTS, ntp_reference, peaked


def results(gens):
    return [(g.token_ids, g.stop_reason, g.text, g.nfe, g.widths, g.accepted, g.drafted) for g in gens]


class Recording(RecordingSolver):
    """A :class:`RecordingSolver` that shows the solver's settings (``verify``, ``rule``) to the decoder."""

    def __getattr__(self, name):
        if name == "solver":
            raise AttributeError(name)
        return getattr(self.solver, name)


def reference_results(model, tokenizer, ids, spec, **config):
    """The reference decoder's verified results (batch of 2), with its solver's decisions checked stable."""
    recorder = Recording(make_solver(spec))
    config = DecodeConfig(batch_size=2, engine="reference", **config)
    gens = make_block_decoder(model, tokenizer, config, recorder).generate(ids)
    assert decisions_are_stable(make_solver(spec), recorder.calls), "a near-tied draft decision: no fair comparison"
    assert all(g.accepted is not None for g in gens)  # the recorder's solver verified
    return gens


# (family, solver, its parameters, block size): the default tier's cases, then the other solvers (slow tier)
CASES = [("llama", "eb", {"gamma": 0.3}, 4), ("qwen3", "eb", {"gamma": 1.0, "proxy": "confidence"}, 3),
         ("llama", "topk", {"n": 2}, 4), ("qwen3", "left_to_right", {"n": 1}, 6)]
SLOW_CASES = [("qwen3", "eb", {"gamma": 0.3}, 6), ("llama", "eb", {"gamma": float("inf")}, 4),
              ("qwen3", "entropy_threshold", {"threshold": 1.0}, 4),
              ("llama", "confidence_threshold", {"threshold": 0.5}, 3), ("qwen3", "factor", {"f": 1.0}, 4),
              ("llama", "left_to_right", {"n": 1}, 2)]


@pytest.mark.parametrize("kind, name, params, block_size",
                         CASES + [pytest.param(*case, marks=pytest.mark.slow) for case in SLOW_CASES])
def test_engine_verify_gives_the_reference_decoders_results(tokenizer, kind, name, params, block_size):
    model, ids = peaked(kind, tokenizer), [tokenizer(p)["input_ids"] for p in PROMPTS]
    free = ntp_reference(model, tokenizer, ids, max_new_tokens=14, eos_token_ids=())  # NTP decisions checked stable
    eos = (eos_splitting(free, 4),)
    spec = sampler_spec(name, verify="greedy", **params)
    settings = dict(block_size=block_size, max_new_tokens=14, eos_token_ids=eos)
    reference = reference_results(model, tokenizer, ids, spec, **settings)
    assert {g.stop_reason for g in reference} == {"eos", "length"}
    assert any(a < d for g in reference for a, d in zip(g.accepted, g.drafted))  # rejections happen
    for slots in (1, 3):  # alone, and with refills (5 prompts through 3 slots)
        config = DecodeConfig(batch_size=slots, engine="fast", **settings)
        decoder = make_block_decoder(model, tokenizer, config, make_solver(spec))
        assert results(decoder.generate(ids)) == results(reference)
        forwards, nfe = decoder.stats.forwards, sum(g.nfe for g in reference)
        assert forwards == nfe if slots == 1 else forwards < nfe  # with 3 slots, rows share forwards


def test_engine_verify_ends_rows_at_stop_strings_as_the_reference_does(tokenizer):
    model, ids = peaked("llama", tokenizer), [tokenizer(p)["input_ids"] for p in PROMPTS]
    texts = [g.text for g in ntp_reference(model, tokenizer, ids, max_new_tokens=16, eos_token_ids=())]
    stop = next(t[5:7] for t in texts if len(t) > 8 and t[5:7].strip())  # a stop string from inside a row's text
    spec = sampler_spec("eb", gamma=0.5, verify="greedy")
    settings = dict(block_size=4, max_new_tokens=16, eos_token_ids=(), stop_strings=(stop,))
    reference = reference_results(model, tokenizer, ids, spec, **settings)
    assert "stop_string" in {g.stop_reason for g in reference}
    gens = make_block_decoder(model, tokenizer, DecodeConfig(batch_size=2, **settings), make_solver(spec)).generate(ids)
    assert results(gens) == results(reference)


def test_engine_cache_holds_exact_causal_keys_after_rejections(sbd_model, tokenizer):
    ids = tokenizer("check the cache")["input_ids"]
    config = DecodeConfig(block_size=4, max_new_tokens=16, eos_token_ids=(), batch_size=1)
    engine = FastDecoder(sbd_model, tokenizer, config, make_solver(sampler_spec("eb", gamma=1.0, verify="greedy")))
    gen = engine.generate([ids])[0]
    assert sum(a < d for a, d in zip(gen.accepted, gen.drafted)) >= 2  # a random model: drafts were rejected
    fed = len(gen.token_ids) - 1  # the last committed token is never fed
    fresh = DynamicCache(config=sbd_model.config)
    sbd_model(input_ids=torch.tensor([ids + gen.token_ids[:fed]]), cache=fresh, use_cache=True)
    n = len(ids) + fed
    for keys, values, ref in zip(engine.forward.keys, engine.forward.values, fresh.layers):
        assert torch.allclose(keys[0, :n].transpose(0, 1), ref.keys[0], atol=1e-5)
        assert torch.allclose(values[0, :n].transpose(0, 1), ref.values[0], atol=1e-5)


def test_engine_refuses_compiling_verify_and_hands_sampled_verify_to_the_reference(sbd_model, tokenizer):
    greedy = make_solver(sampler_spec("eb", gamma=0.3, verify="greedy"))
    with pytest.raises(ValueError, match="decode.compile: true cannot run a solver with verify"):
        FastDecoder(sbd_model, tokenizer, DecodeConfig(compile=True), greedy)
    assert not FastDecoder(sbd_model, tokenizer, DecodeConfig(), greedy).compile  # null: eager with verify
    sampled = make_solver(sampler_spec("eb", gamma=0.3, temperature=1.0, seed=0, verify="sample"))
    with pytest.raises(ValueError, match="verify: sample does not run on decode.engine 'fast'"):
        FastDecoder(sbd_model, tokenizer, DecodeConfig(), sampled)
    assert isinstance(make_block_decoder(sbd_model, tokenizer, DecodeConfig(), sampled), BlockDecoder)
    assert isinstance(make_block_decoder(sbd_model, tokenizer, DecodeConfig(), greedy), FastDecoder)
