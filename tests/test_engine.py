"""The fast engine against the references: its own path against a slow no-cache recomputation (every forward's logits,
scheduling and refills included), the reference decoder's tokens / NFE / stop reasons / widths where no decision is
near-tied, NTP mode against Hugging Face ``generate``, its cache against a fresh causal forward, stop strings, the
tokens each forward feeds (the rows' widths), admission, buffers set up once, bad input. Compiled paths:
test_engine_compile.py; bf16, the rotary table and attention masks: test_engine_numerics.py."""

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from conftest import tiny_model
from oracles import (RecordingSolver, check_engine_path, check_greedy_path, decisions_are_stable, engine_ntp_logits,
                     eos_splitting)
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_block_decoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.engine.slots import token_table
from sbd_core.mask_token import setup_mask_token
from sbd_core.decoding.factory import make_solver
from sbd_core.samplers import sampler_spec
from sbd_core.decoding.solvers import get_solver

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
    eos = (eos_splitting(make_block_decoder(model, tokenizer, base, make_solver(spec)).generate(ids), 4),)
    recorder = RecordingSolver(make_solver(spec))
    config = DecodeConfig(block_size=4, max_new_tokens=14, eos_token_ids=eos, batch_size=2, engine="reference")
    reference = make_block_decoder(model, tokenizer, config, recorder).generate(ids)
    assert decisions_are_stable(make_solver(spec), recorder.calls), "a near-tied decision: no fair comparison"
    for slots in (1, 3):  # alone, and with refills
        fast = DecodeConfig(block_size=4, max_new_tokens=14, eos_token_ids=eos, batch_size=slots, engine="fast")
        for ours, ref in zip(make_block_decoder(model, tokenizer, fast, make_solver(spec)).generate(ids), reference):
            assert (ours.token_ids, ours.nfe, ours.stop_reason) == (ref.token_ids, ref.nfe, ref.stop_reason)
            assert ours.text == ref.text and ours.widths == ref.widths and len(ref.widths) == ref.nfe


def test_ntp_mode_follows_hf_generate(model_kind, tokenizer):
    model = tiny_model(model_kind, len(tokenizer))
    ids, max_new = ids_of(tokenizer), 12
    recorder = RecordingSolver(make_solver(sampler_spec("ntp")))
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=(), batch_size=2)
    decoder = FastDecoder(model, tokenizer, config, recorder)
    assert decoder.setup.excluded_ids == (PAD,)
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
    for keys, values, ref in zip(decoder.forward.keys, decoder.forward.values, fresh.layers):
        assert torch.allclose(keys[0, :length].transpose(0, 1), ref.keys[0], atol=1e-5)
        assert torch.allclose(values[0, :length].transpose(0, 1), ref.values[0], atol=1e-5)


@pytest.mark.parametrize("solver", [pytest.param(get_solver("eb", gamma=0.5), marks=pytest.mark.slow),
                                    get_solver("left_to_right", n=1)],
                         ids=lambda s: getattr(s, "tag", None))  # one token per forward: every stop string ends a
# forward's new tokens (the case that catches a stop-string scan one token early)
def test_stop_strings_end_rows_as_in_the_reference(tokenizer, solver):
    model, ids = peaked_model("llama", tokenizer), ids_of(tokenizer)
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
                                  for g in make_block_decoder(model, tokenizer, config, solver).generate(ids)]
    assert any(r[2] == "stop_string" for r in results["reference", 2])
    assert results["fast", 1] == results["reference", 2] == results["fast", 3]


def test_stop_table_marks_every_token_that_could_end_a_stop_string(tokenizer):
    table = token_table(tokenizer, len(tokenizer) + 4, ("ab\n", "xyz"), "cpu")
    for token in range(len(tokenizer)):
        text = tokenizer.decode([token])
        assert bool(table[token]) == ("\n" in text or "z" in text), (token, text)
    assert not table[len(tokenizer):].any()  # embedding rows beyond the tokenizer are never text
    assert token_table(tokenizer, len(tokenizer), (), "cpu") is None


def sentencepiece_tokenizer() -> PreTrainedTokenizerFast:
    """A Llama-2-style tokenizer: word starts as ``▁`` pieces, bytes outside the vocabulary as ``<0xNN>`` tokens."""
    pieces = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "x", "\u2581a", "\u2581b", "\u2581x", "ab"]
    pieces += [f"<0x{b:02X}>" for b in range(256)]
    core = Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=[], byte_fallback=True,
                                unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    core.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                      decoders.Strip(" ", 1, 0)])
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def test_stop_table_marks_byte_and_word_start_tokens_that_complete_a_stop_string():
    """A token completes a stop string when the text of (previous token, token) holds it and the previous token's
    text alone does not: every such token is marked, also a byte of a UTF-8 character (alone it decodes to U+FFFD) and
    a word start completing a stop string that ends in a space (alone it decodes without the space)."""
    tok = sentencepiece_tokenizer()
    stops = ("x ", "\u00e9", "b\n")
    table = token_table(tok, len(tok), stops, "cpu")
    completing = set()
    for previous in range(len(tok)):
        before = tok.decode([previous])
        for token in range(len(tok)):
            text = tok.decode([previous, token])
            if any(s in text and s not in before for s in stops):
                completing.add(token)
    assert {tok.convert_tokens_to_ids(p) for p in ("<0xA9>", "\u2581a", "<0x0A>")} <= completing  # the cases named
    assert all(table[t] for t in completing), sorted(t for t in completing if not table[t])


def test_unsupported_models_and_settings_are_named_errors(tokenizer):
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=1, n_head=2, n_positions=64))
    with pytest.raises(ValueError, match="decode.engine: reference"):
        FastDecoder(gpt2, tokenizer, DecodeConfig(mode="ntp", max_new_tokens=4)).generate(["hi"])
    with pytest.raises(ValueError, match="engine must be one of"):
        DecodeConfig(engine="turbo")
    sampling = get_solver("eb", gamma=0.5, temperature=0.7)
    with pytest.raises(ValueError, match="decode.compile: true cannot sample"):
        FastDecoder(peaked_model("llama", tokenizer), tokenizer, DecodeConfig(compile=True), sampling)
    small = DecodeConfig(block_size=4, max_new_tokens=30, max_len=20)
    with pytest.raises(ValueError, match="more than decode.max_len=20") as error:
        FastDecoder(peaked_model("llama", tokenizer), tokenizer, small).generate(ids_of(tokenizer))
    assert "\n" not in str(error.value)


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


@pytest.mark.parametrize("mode", ["sbd", "ntp"])
def test_rows_widths_sum_to_the_tokens_the_steps_fed(sbd_model, tokenizer, mode):
    """The contract of ``Generation.widths``: one entry per forward counted in the row's NFE, the tokens it fed there
    (SBD: its block, plus the k re-fed tokens in a block's first forward); their sum over rows is what the model's
    embedding saw in the decode steps (counted by a hook; the prefills' tokens apart)."""
    ids, k = ids_of(tokenizer), 4
    config = DecodeConfig(mode=mode, block_size=k, max_new_tokens=11, eos_token_ids=(), batch_size=3)
    engine = FastDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=0.5))
    engine.generate(ids[:1])  # sets up the buffers (and the stepper to watch)
    fed = {"step": 0, "prefill": 0}
    phase = ["step"]
    hook = sbd_model.model.embed_tokens.register_forward_hook(
        lambda module, args, out: fed.__setitem__(phase[0], fed[phase[0]] + args[0].numel()))
    prefill = engine.stepper.prefill_step

    def prefilling(*args):
        phase[0] = "prefill"
        prefill(*args)
        phase[0] = "step"

    engine.stepper.prefill_step = prefilling
    try:
        gens = engine.generate(ids)
    finally:
        hook.remove()
    assert sum(sum(g.widths) for g in gens) == fed["step"] == engine.stats.row_tokens == engine.stats.fed_tokens
    assert fed["prefill"] == engine.stats.prefill_tokens == sum(len(p) - (mode == "ntp") for p in ids)
    for g in gens:
        assert len(g.widths) == g.nfe
        if mode == "ntp":
            assert g.widths == [1] * g.nfe
        else:  # blocks of k (the last one shorter); a block's first forward after the first block re-feeds k more
            assert g.widths[0] == k and set(g.widths) <= {k, 2 * k, 11 % k, 11 % k + k}


def test_admission_prefills_the_slots_freed_in_a_step_together(sbd_model, tokenizer):
    """Scheduling (which prompt takes which slot when) is check_engine_path's; here: between two steps at most one
    prefill forward, which starts every slot freed in the step before it."""
    ids = ids_of(tokenizer) * 2
    free = FastDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=()),
                       get_solver("eb", gamma=0.5))
    eos = (eos_splitting(free.generate(ids), 4),)
    engine = FastDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=eos,
                                                            batch_size=3), get_solver("eb", gamma=0.5))
    engine.generate(ids[:1])
    events, step, prefill = [], engine.stepper.step, engine.stepper.prefill_step
    engine.stepper.step = lambda *args: (events.append(("step", engine.state.active.tolist())), step(*args))[1]
    engine.stepper.prefill_step = lambda batch, *args: (events.append(("prefill", sorted(set(batch.slots.tolist())))),
                                                        prefill(batch, *args))[1]
    gens = engine.generate(ids)
    prefills = [i for i, (kind, _) in enumerate(events) if kind == "prefill"]
    assert prefills[0] == 0 and events[0][1] == [0, 1, 2] and len(prefills) == engine.stats.prefills
    assert all(b - a > 1 for a, b in zip(prefills, prefills[1:])), "two prefills without a step between them"
    admitted = sum(len(events[i][1]) for i in prefills)
    assert admitted == len(ids) and len(prefills) < admitted  # some prefill started several rows at once
    steps = [i for i, (kind, _) in enumerate(events) if kind == "step"]
    for a, b in zip(steps, steps[1:]):
        busy, next_busy = (events[a][1], events[b][1])
        if b < prefills[-1]:  # prompts were queued: a slot freed by step a is busy again at step b
            assert all(next_busy[s] for s in range(3) if busy[s]), f"a freed slot waited past step {b}"
        if b - a == 2:  # the prefill between them started slots the step freed, no other
            assert set(events[a + 1][1]) <= {s for s in range(3) if busy[s] and next_busy[s]}
    assert {g.stop_reason for g in gens} == {"eos", "length"}


def test_the_engine_sets_up_once_and_reuses_its_buffers(sbd_model, tokenizer):
    ids = ids_of(tokenizer)
    config = DecodeConfig(block_size=4, max_new_tokens=9, eos_token_ids=(), batch_size=3)
    engine = FastDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=0.5))
    engine.generate(ids)
    keys, gen, stepper = engine.forward.keys[0], engine.state.gen, engine.stepper
    second = engine.generate(ids[3:] + ids[:2])
    assert engine.forward.keys[0] is keys and engine.state.gen is gen and engine.stepper is stepper
    fresh = FastDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=0.5)).generate(ids[3:] + ids[:2])
    assert [(g.token_ids, g.nfe, g.widths) for g in second] == [(g.token_ids, g.nfe, g.widths) for g in fresh]
