"""Block decoder: its own path against a slow reference, exact cache, NTP vs generate, scripted NFE accounting,
excluded tokens, bad input. Comparisons with a second code path never depend on near-tied scores (see oracles.py)."""

import pytest
import torch
from transformers import DynamicCache

from conftest import tiny_model
from oracles import RecordingSolver, check_greedy_path, check_sbd_path, eos_splitting
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import generate, make_block_decoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.setup import never_generated_ids
from sbd_core.decoding.solvers import get_solver

PROMPTS = ["hi", "a longer prompt here", "mid size"]
MASK, PAD = 3, 2  # conftest's tokenizer: <|reserved_special_token_0|> is the mask token, <|pad|> the padding


@pytest.mark.parametrize("solver", [get_solver("eb", gamma=0.5), get_solver("confidence_threshold", threshold=0.02),
                                    get_solver("topk", n=3)], ids=lambda s: s.tag)
def test_sbd_decoder_follows_slow_reference(sbd_model, tokenizer, solver):
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    free = BlockDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=11, eos_token_ids=()), solver)
    eos = (eos_splitting(free.decode_batch(ids), 4),)  # rows leave the batch and cache at different blocks
    recorder = RecordingSolver(solver)
    decoder = BlockDecoder(sbd_model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=11, eos_token_ids=eos),
                           recorder)
    assert decoder.setup.excluded_ids == (PAD, MASK)
    gens = decoder.decode_batch(ids)
    check_sbd_path(sbd_model, ids, gens, recorder.calls, 4, 11, eos, excluded=(PAD, MASK))


def test_cache_equals_fresh_causal_forward(sbd_model, tokenizer):
    config = DecodeConfig(mode="sbd", block_size=4, max_new_tokens=12, eos_token_ids=(), batch_size=1)
    decoder = BlockDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=1.0))
    ids = tokenizer("check the cache")["input_ids"]
    gen = decoder.decode_batch([ids])[0]
    cached = decoder.cache.get_seq_length()
    assert cached == len(ids) + 8  # the last block is never fed causally (nothing needs its keys)
    fresh = DynamicCache(config=sbd_model.config)
    sbd_model(input_ids=torch.tensor([ids + gen.token_ids[:8]]), cache=fresh, use_cache=True)
    for mine, ref in zip(decoder.cache.layers, fresh.layers):
        assert torch.allclose(mine.keys, ref.keys, atol=1e-5) and torch.allclose(mine.values, ref.values, atol=1e-5)


def generate_reference(model, enc, max_new, excluded):
    """HF greedy ``generate`` with the decoder's excluded ids suppressed: (tokens per row, scores [rows, T, V])."""
    out = model.generate(**enc, max_new_tokens=max_new, do_sample=False, eos_token_id=None, pad_token_id=PAD,
                         suppress_tokens=list(excluded), output_scores=True, return_dict_in_generate=True)
    return out.sequences[:, enc["input_ids"].shape[1]:].tolist(), torch.stack(out.scores, dim=1)


def ntp_decode(model, tokenizer, prompts, max_new):
    """NTP decoding of ``prompts`` as one batch: (generations, per-row logits [rows, T, V], excluded ids)."""
    recorder = RecordingSolver(get_solver("topk", n=1))
    decoder = BlockDecoder(model, tokenizer, DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=()),
                           recorder)
    gens = decoder.decode_batch([tokenizer(p)["input_ids"] for p in prompts])
    return gens, torch.cat([c.logits for c in recorder.calls], dim=1), decoder.setup.excluded_ids


def test_ntp_mode_follows_hf_generate_greedy(model_kind, tokenizer):
    model = tiny_model(model_kind, len(tokenizer))
    gens, logits, excluded = ntp_decode(model, tokenizer, PROMPTS, 12)  # one left-padded batch
    assert excluded == (PAD,)  # no mask token recorded: only the padding is excluded
    for row, (prompt, gen) in enumerate(zip(PROMPTS, gens)):
        ref, scores = generate_reference(model, tokenizer(prompt, return_tensors="pt"), 12, excluded)  # alone
        check_greedy_path(gen.token_ids, logits[row], ref[0], scores[0])
        assert gen.nfe == 12


def test_batched_ntp_follows_left_padded_generate(tokenizer):
    model = tiny_model("llama", len(tokenizer))
    tokenizer.padding_side = "left"
    gens, logits, excluded = ntp_decode(model, tokenizer, PROMPTS, 8)
    ref, scores = generate_reference(model, tokenizer(PROMPTS, return_tensors="pt", padding=True), 8, excluded)
    for row, gen in enumerate(gens):
        check_greedy_path(gen.token_ids, logits[row], ref[row], scores[row])


class ScriptedModel(torch.nn.Module):
    """A real tiny model whose logits are replaced: the token at absolute position p is ``script(p)``, with a
    confidence that falls (``order='left'``) or rises (``'right'``) along the sequence, so top-k reveals in that order
    (decisive: neighbouring confidences differ by ~1%, and a float tie would resolve to the same, lower index).
    ``planted`` adds fixed logits {token: value} at every position."""

    def __init__(self, base, script, shift, order="left", planted=None):
        super().__init__()
        self.base, self.script, self.shift, self.order = base, script, shift, order
        self.planted = planted or {}
        self.config = base.config

    @property
    def device(self):
        return self.base.device

    def forward(self, input_ids, position_ids, logits_to_keep=0, **kw):
        out = self.base(input_ids=input_ids, position_ids=position_ids, logits_to_keep=logits_to_keep, **kw)
        pos = position_ids[:, -out.logits.shape[1]:] + self.shift
        logits = torch.zeros_like(out.logits)
        for token, value in self.planted.items():
            logits[..., token] = value
        for b in range(pos.shape[0]):
            for i, p in enumerate(pos[b].tolist()):
                strength = 10.0 - 0.1 * p if self.order == "left" else 5.0 + 0.1 * p
                logits[b, i, self.script(p)] = strength
        out.logits = logits
        return out


def test_generate_batches_by_length_and_keeps_input_order(sbd_model, tokenizer):
    letters = "abcdefghijklmnopqrstuvwxyz"
    model = ScriptedModel(sbd_model, lambda p: tokenizer.convert_tokens_to_ids(letters[p % 26]), shift=0)
    lengths = (7, 2, 5, 3, 9)  # unsorted; batches of two are formed by length
    config = DecodeConfig(block_size=4, max_new_tokens=6, eos_token_ids=(), batch_size=2, engine="reference")
    out = generate(model, tokenizer, [[5] * n for n in lengths], config, get_solver("topk", n=2))
    assert [g.text for g in out] == [letters[n:n + 6] for n in lengths]  # token at position p is letters[p]


def test_nfe_accounting_on_scripted_logits(sbd_model, tokenizer):
    eos, a = 1, tokenizer.convert_tokens_to_ids("a")
    script = lambda p: eos if p == 12 else a  # EOS at absolute position 12
    model = ScriptedModel(sbd_model, script, shift=0)
    config = DecodeConfig(mode="sbd", block_size=4, max_new_tokens=40, batch_size=2)
    # prompt lengths 3 and 10: EOS at generation index 9 and 2
    long_gen, short_gen = BlockDecoder(model, tokenizer, config, get_solver("topk", n=2)).decode_batch(
        [[5] * 3, [5] * 10])
    # row 1: blocks [0-3] 2 fwd, [4-7] 2 fwd, [8-11] first fwd reveals 8, 9=EOS -> stop: 5 forwards, 10 tokens
    assert (long_gen.nfe, long_gen.num_tokens, long_gen.stop_reason) == (5, 10, "eos")
    # row 2: block [0-3]: fwd 1 reveals 0,1; fwd 2 reveals 2=EOS,3 -> stop after 2 forwards, 3 tokens
    assert (short_gen.nfe, short_gen.num_tokens, short_gen.text) == (2, 3, "aa")


def test_eos_waits_until_every_earlier_position_is_revealed(sbd_model, tokenizer):
    a = tokenizer.convert_tokens_to_ids("a")
    model = ScriptedModel(sbd_model, lambda p: 1 if p == 6 else a, shift=0, order="right")
    config = DecodeConfig(mode="sbd", block_size=4, max_new_tokens=40)
    gen = BlockDecoder(model, tokenizer, config, get_solver("topk", n=2)).decode_batch([[5] * 3])[0]
    # block [3..6]: fwd 1 reveals 5 and 6 (EOS) but 3, 4 are masked; fwd 2 reveals 3, 4 -> stop
    assert (gen.nfe, gen.num_tokens) == (2, 4)


def test_ntp_nfe_counts_generated_tokens(sbd_model, tokenizer):
    a = tokenizer.convert_tokens_to_ids("a")
    model = ScriptedModel(sbd_model, lambda p: 1 if p == 9 else a, shift=1)
    gen = BlockDecoder(model, tokenizer, DecodeConfig(mode="ntp", max_new_tokens=40)).decode_batch([[5] * 4])[0]
    assert (gen.nfe, gen.num_tokens, gen.stop_reason, gen.text) == (6, 6, "eos", "aaaaa")


def test_stop_strings_and_length_limit(sbd_model, tokenizer):
    ids = {c: tokenizer.convert_tokens_to_ids(c) for c in "ab\n"}
    text = "aab\n\nbbbbbbbbbb"
    model = ScriptedModel(sbd_model, lambda p: ids[text[p - 2]] if 2 <= p < 2 + len(text) else ids["a"], shift=0)
    config = DecodeConfig(mode="sbd", block_size=4, max_new_tokens=30, stop_strings=("\n\n",))
    gen = BlockDecoder(model, tokenizer, config, get_solver("topk", n=1)).decode_batch([[5, 5]])[0]
    assert (gen.text, gen.stop_reason, gen.num_tokens, gen.nfe) == ("aab", "stop_string", 5, 5)
    config = DecodeConfig(mode="sbd", block_size=4, max_new_tokens=6)
    gen = BlockDecoder(model, tokenizer, config, get_solver("topk", n=4)).decode_batch([[5, 5]])[0]
    assert (gen.num_tokens, gen.stop_reason, gen.nfe) == (6, "length", 2)


@pytest.mark.parametrize("mode", ["sbd", "ntp"])
def test_mask_and_padding_are_never_written(sbd_model, tokenizer, mode):
    a, b = tokenizer.convert_tokens_to_ids("a"), tokenizer.convert_tokens_to_ids("b")
    # logits: MASK 40, PAD 39, b 30, the scripted 'a' <= 10, the rest 0. With MASK and PAD every position has entropy
    # H[.73,.27] = .58 (EB gamma=.1 reveals one per forward); renormalised without them, b is certain (H < 1e-6).
    model = ScriptedModel(sbd_model, lambda p: a, shift=0, planted={MASK: 40.0, PAD: 39.0, b: 30.0})
    config = DecodeConfig(mode=mode, block_size=4, max_new_tokens=8)
    gen = BlockDecoder(model, tokenizer, config, get_solver("eb", gamma=0.1)).decode_batch([[5] * 3])[0]
    assert gen.token_ids == [b] * 8
    assert gen.nfe == (2 if mode == "sbd" else 8)  # SBD: a whole block per forward


def test_which_ids_are_never_written(tokenizer):
    from conftest import char_tokenizer
    from sbd_core.mask_token import setup_mask_token

    plain, sbd = tiny_model("llama", len(tokenizer)), tiny_model("llama", len(tokenizer))
    setup_mask_token(tokenizer, sbd)
    assert never_generated_ids(sbd, tokenizer, {1}) == (PAD, MASK)
    assert never_generated_ids(plain, tokenizer, {1}) == (PAD,)  # no mask token recorded (an NTP-only model)
    assert never_generated_ids(plain, tokenizer, {PAD}) == ()  # padding configured as an EOS: it ends generations
    for shared in ("<|end_of_text|>", "<|begin_of_text|>"):  # pad reusing EOS (Qwen-3) or BOS has a real job
        tok = char_tokenizer()
        tok.pad_token = shared
        assert never_generated_ids(sbd, tok, {1}) == (MASK,)


def test_bad_input_gets_clear_errors(sbd_model, tokenizer):
    with pytest.raises(ValueError, match="block_size"):
        DecodeConfig(block_size=0)
    with pytest.raises(ValueError, match="mode"):
        DecodeConfig(mode="diffusion")
    decoder = make_block_decoder(sbd_model, tokenizer, DecodeConfig(), get_solver("eb"))
    with pytest.raises(ValueError, match="context"):
        decoder.generate(["x" * 300])
    with pytest.raises(ValueError, match="empty prompt"):
        decoder.generate([[]])
    plain = tiny_model("llama", len(tokenizer))
    with pytest.raises(ValueError, match="sbd_mask_token_id"):
        BlockDecoder(plain, tokenizer, DecodeConfig(mode="sbd"))
