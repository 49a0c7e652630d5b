"""Block decoder: exact cache, slow reference, NTP vs generate, scripted NFE accounting, bad input."""

import pytest
import torch
from transformers import DynamicCache

from conftest import tiny_model
from sbd_core.decode import BlockDecoder, DecodeConfig, generate
from sbd_core.solvers import get_solver

PROMPTS = ["hi", "a longer prompt here", "mid size"]


def reference_sbd(model, prompt_ids, block_size, max_new, solver, mask_id):
    """Slow reference: recompute the whole sequence with no cache at every forward."""
    seq = list(prompt_ids)
    while len(seq) - len(prompt_ids) < max_new:
        length = min(block_size, max_new - (len(seq) - len(prompt_ids)))
        block = torch.full((1, length), mask_id)
        masked = torch.ones(1, length, dtype=torch.bool)
        while masked.any():
            ids = torch.cat([torch.tensor([seq]), block], dim=1)
            n = ids.shape[1]
            allowed = torch.ones(n, n).tril().bool()
            allowed[len(seq):] = True
            logits = model(input_ids=ids, attention_mask=allowed[None, None]).logits[:, len(seq):]
            reveal, tokens = solver(logits, masked)
            block = torch.where(reveal, tokens, block)
            masked &= ~reveal
        seq += block[0].tolist()
    return seq[len(prompt_ids):]


@pytest.mark.parametrize("solver", [get_solver("eb", gamma=0.5), get_solver("confidence_threshold", threshold=0.02),
                                    get_solver("topk", n=3)])
def test_sbd_tokens_equal_slow_reference(sbd_model, tokenizer, solver):
    config = DecodeConfig(mode="sbd", block_size=4, max_new_tokens=11, eos_token_ids=(), batch_size=3)
    out = generate(sbd_model, tokenizer, PROMPTS, config, solver)
    for prompt, gen in zip(PROMPTS, out):
        ids = tokenizer(prompt)["input_ids"]
        assert gen.token_ids == reference_sbd(sbd_model, ids, 4, 11, solver, 3)
        assert gen.stop_reason == "length" and gen.num_tokens == 11


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


def test_ntp_mode_equals_hf_generate_greedy(model_kind, tokenizer):
    model = tiny_model(model_kind, len(tokenizer))
    config = DecodeConfig(mode="ntp", max_new_tokens=12, eos_token_ids=(), batch_size=3)
    out = generate(model, tokenizer, PROMPTS, config)
    for prompt, gen in zip(PROMPTS, out):
        enc = tokenizer(prompt, return_tensors="pt")
        ref = model.generate(**enc, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=2)
        assert gen.token_ids == ref[0, enc["input_ids"].shape[1]:].tolist()
        assert gen.nfe == 12


def test_batched_ntp_equals_left_padded_generate(tokenizer):
    model = tiny_model("llama", len(tokenizer))
    tokenizer.padding_side = "left"
    enc = tokenizer(PROMPTS, return_tensors="pt", padding=True)
    ref = model.generate(**enc, max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=2)
    out = generate(model, tokenizer, PROMPTS, DecodeConfig(mode="ntp", max_new_tokens=8, eos_token_ids=()))
    for row, gen in enumerate(out):
        assert gen.token_ids == ref[row, enc["input_ids"].shape[1]:].tolist()


class ScriptedModel(torch.nn.Module):
    """A real tiny model whose logits are replaced: the token at absolute position p is ``script(p)``, with a
    confidence that falls (``order='left'``) or rises (``'right'``) along the sequence, so top-k reveals in that order."""

    def __init__(self, base, script, shift, order="left"):
        super().__init__()
        self.base, self.script, self.shift, self.order = base, script, shift, order
        self.config = base.config

    @property
    def device(self):
        return self.base.device

    def forward(self, input_ids, position_ids, logits_to_keep=0, **kw):
        out = self.base(input_ids=input_ids, position_ids=position_ids, logits_to_keep=logits_to_keep, **kw)
        pos = position_ids[:, -out.logits.shape[1]:] + self.shift
        logits = torch.zeros_like(out.logits)
        for b in range(pos.shape[0]):
            for i, p in enumerate(pos[b].tolist()):
                strength = 20.0 - 0.1 * p if self.order == "left" else 5.0 + 0.1 * p
                logits[b, i, self.script(p)] = strength
        out.logits = logits
        return out


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


def test_bad_input_gets_clear_errors(sbd_model, tokenizer):
    with pytest.raises(ValueError, match="block_size"):
        DecodeConfig(block_size=0)
    with pytest.raises(ValueError, match="mode"):
        DecodeConfig(mode="diffusion")
    decoder = BlockDecoder(sbd_model, tokenizer, DecodeConfig(), get_solver("eb"))
    with pytest.raises(ValueError, match="context"):
        decoder.generate(["x" * 300])
    with pytest.raises(ValueError, match="empty prompt"):
        decoder.generate([[]])
    plain = tiny_model("llama", len(tokenizer))
    with pytest.raises(ValueError, match="sbd_mask_token_id"):
        BlockDecoder(plain, tokenizer, DecodeConfig(mode="sbd"))
