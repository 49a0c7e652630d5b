"""The fast engine against the references: its own path against a slow no-cache recomputation (every forward's logits,
scheduling and refills included), the reference decoder's tokens / NFE / stop reasons where no decision is near-tied,
NTP mode against Hugging Face ``generate``, its cache against a fresh causal forward, stop strings, bad input."""

import pytest
import torch
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

from conftest import tiny_model
from oracles import (RecordingSolver, check_engine_path, check_greedy_path, decisions_are_stable, engine_ntp_logits,
                     eos_splitting)
from sbd_core.decode import BlockDecoder, DecodeConfig
from sbd_core.engine import FastDecoder
from sbd_core.engine.slots import token_table
from sbd_core.mask_token import setup_mask_token
from sbd_core.samplers import build_solver, sampler_spec
from sbd_core.solvers import get_solver

PROMPTS = ["hi", "a much longer prompt than the others, with many more tokens in it", "mid size", "x", "four"]
PAD, MASK = 2, 3
SOLVERS = [("eb", {"gamma": 0.5}), ("eb", {"gamma": 0.3, "proxy": "confidence"}),
           ("entropy_threshold", {"threshold": 1.0}), ("confidence_threshold", {"threshold": 0.5}),
           ("factor", {"f": 1.0}), ("topk", {"n": 2}), ("left_to_right", {"n": 1})]


def peaked_model(kind, tokenizer, attn="sdpa", scale=12.0):
    """A tiny SBD model whose output layer is scaled up: its distributions are peaked, so its decisions have margins
    (checked by :func:`decisions_are_stable` before any comparison of two code paths)."""
    model = tiny_model(kind, len(tokenizer) + (8 if kind == "qwen3" else 0), attn=attn)
    setup_mask_token(tokenizer, model)
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


def ids_of(tokenizer, prompts=PROMPTS):
    return [tokenizer(p)["input_ids"] for p in prompts]


@pytest.mark.parametrize("slots", [1, 2, 5])
@pytest.mark.parametrize("solver", [get_solver("eb", gamma=0.5), get_solver("topk", n=3)], ids=lambda s: s.tag)
def test_engine_follows_the_slow_reference_along_its_own_path(sbd_model, tokenizer, solver, slots):
    ids = ids_of(tokenizer)
    free = FastDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=()), solver)
    eos = (eos_splitting(free.generate(ids), 4),)
    recorder = RecordingSolver(solver)
    config = DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=eos, batch_size=slots)
    gens = FastDecoder(sbd_model, tokenizer, config, recorder).generate(ids)
    assert len({g.nfe for g in gens}) > 1  # rows stop at different blocks
    check_engine_path(sbd_model, ids, gens, recorder.calls, slots, 4, 13, eos, excluded=(PAD, MASK))


def reference_cases():
    """Every solver with each model family and attention: the default tier takes one (family, attention) per solver,
    rotating, so every solver, family and attention is checked; the slow tier takes the rest of the product."""
    combos = [(kind, attn) for kind in ("llama", "qwen3") for attn in ("sdpa", "eager")]
    for i, (name, params) in enumerate(SOLVERS):
        for j, (kind, attn) in enumerate(combos):
            marks = () if j == i % len(combos) else (pytest.mark.slow,)
            yield pytest.param(kind, attn, name, params, marks=marks,
                               id=f"{kind}-{attn}-{name}-{list(params.values())[0]}")


@pytest.mark.parametrize("kind, attn, name, params", list(reference_cases()))
def test_engine_gives_the_reference_decoders_results(kind, tokenizer, attn, name, params):
    model, ids = peaked_model(kind, tokenizer, attn), ids_of(tokenizer)
    spec = sampler_spec(name, **params)
    base = DecodeConfig(block_size=4, max_new_tokens=14, eos_token_ids=(), batch_size=2, engine="reference")
    eos = (eos_splitting(BlockDecoder(model, tokenizer, base, build_solver(spec)).generate(ids), 4),)
    recorder = RecordingSolver(build_solver(spec))
    config = DecodeConfig(block_size=4, max_new_tokens=14, eos_token_ids=eos, batch_size=2, engine="reference")
    reference = BlockDecoder(model, tokenizer, config, recorder).generate(ids)
    assert decisions_are_stable(build_solver(spec), recorder.calls), "a near-tied decision: no fair comparison"
    for slots in (1, 3):  # alone, and with refills
        fast = DecodeConfig(block_size=4, max_new_tokens=14, eos_token_ids=eos, batch_size=slots, engine="fast")
        for ours, ref in zip(BlockDecoder(model, tokenizer, fast, build_solver(spec)).generate(ids), reference):
            assert (ours.token_ids, ours.nfe, ours.stop_reason) == (ref.token_ids, ref.nfe, ref.stop_reason)
            assert ours.text == ref.text


def test_ntp_mode_follows_hf_generate(model_kind, tokenizer):
    model = tiny_model(model_kind, len(tokenizer))
    ids, max_new = ids_of(tokenizer), 12
    recorder = RecordingSolver(build_solver(sampler_spec("ntp")))
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=(), batch_size=2)
    decoder = FastDecoder(model, tokenizer, config, recorder)
    assert decoder.excluded_ids == (PAD,)
    gens = decoder.generate(ids)
    logits = engine_ntp_logits(recorder.calls, 2, len(ids), max_new, eos=())
    for prompt, gen, ours in zip(ids, gens, logits):
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False, eos_token_id=None,
                             pad_token_id=PAD, suppress_tokens=[PAD], output_scores=True, return_dict_in_generate=True)
        check_greedy_path(gen.token_ids, ours, out.sequences[0, len(prompt):].tolist(), torch.stack(out.scores)[:, 0])
        assert gen.nfe == max_new and gen.stop_reason == "length"


def test_cache_holds_exact_causal_keys_and_values(sbd_model, tokenizer):
    ids = tokenizer("check the cache")["input_ids"]
    decoder = FastDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=12, eos_token_ids=()),
                          get_solver("eb", gamma=1.0))
    gen = decoder.generate([ids])[0]
    length = len(ids) + 8  # the last block is never re-fed (nothing needs its keys)
    fresh = DynamicCache(config=sbd_model.config)
    sbd_model(input_ids=torch.tensor([ids + gen.token_ids[:8]]), cache=fresh, use_cache=True)
    for keys, values, ref in zip(decoder.cache.keys, decoder.cache.values, fresh.layers):
        assert torch.allclose(keys[0, :length].transpose(0, 1), ref.keys[0], atol=1e-5)
        assert torch.allclose(values[0, :length].transpose(0, 1), ref.values[0], atol=1e-5)


def test_stop_strings_end_rows_as_in_the_reference(tokenizer):
    model, ids = peaked_model("llama", tokenizer), ids_of(tokenizer)
    solver = get_solver("eb", gamma=0.5)
    free = BlockDecoder(model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=16, eos_token_ids=(),
                                                       engine="reference"), solver).generate(ids)
    texts = [g.text for g in free]
    stop = next(t[5:7] for t in texts if len(t) > 8 and t[5:7].strip())  # a stop string from inside a row's text
    assert any(stop in t for t in texts)
    results = {}
    for engine, slots in (("reference", 2), ("fast", 1), ("fast", 3)):
        config = DecodeConfig(block_size=4, max_new_tokens=16, eos_token_ids=(), stop_strings=(stop,),
                              batch_size=slots, engine=engine)
        results[engine, slots] = [(g.token_ids, g.nfe, g.stop_reason, g.text)
                                  for g in BlockDecoder(model, tokenizer, config, solver).generate(ids)]
    assert any(r[2] == "stop_string" for r in results["reference", 2])
    assert results["fast", 1] == results["reference", 2] == results["fast", 3]


def test_stop_table_marks_every_token_that_could_end_a_stop_string(tokenizer):
    table = token_table(tokenizer, len(tokenizer) + 4, ("ab\n", "xyz"), "cpu")
    for token in range(len(tokenizer)):
        text = tokenizer.decode([token])
        assert bool(table[token]) == ("\n" in text or "z" in text), (token, text)
    assert not table[len(tokenizer):].any()  # embedding rows beyond the tokenizer are never text
    assert token_table(tokenizer, len(tokenizer), (), "cpu") is None


def test_unsupported_models_and_settings_are_named_errors(tokenizer):
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2, n_positions=64))
    with pytest.raises(ValueError, match="decode.engine: reference"):
        FastDecoder(gpt2, tokenizer, DecodeConfig(mode="ntp", max_new_tokens=4)).generate(["hi"])
    with pytest.raises(ValueError, match="engine must be one of"):
        DecodeConfig(engine="turbo")


@pytest.mark.parametrize("mode", ["ntp", "sbd"])
def test_the_engine_counts_its_batch_forwards(sbd_model, tokenizer, mode):
    ids = ids_of(tokenizer)
    counts = {}
    for slots in (1, 3):
        config = DecodeConfig(mode=mode, block_size=4, max_new_tokens=9, eos_token_ids=(), batch_size=slots)
        engine = FastDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=0.5))
        gens = engine.generate(ids)
        counts[slots] = engine.forwards, [g.nfe for g in gens]
    forwards, nfe = counts[1]
    assert forwards == sum(nfe)  # one row at a time: every forward is one row's
    forwards, nfe = counts[3]
    assert max(nfe) <= forwards and sum(nfe) / 3 <= forwards < sum(nfe)  # shared forwards, at most 3 rows in each
