"""The engine's numbers where a GPU user's first run differs from the tests' fp32 CPU runs:

* bf16: every forward's logits within bf16 rounding of an fp32 no-cache recomputation along the engine's own path, and
  the reference decoder's tokens in bf16 on prompts where no decision is near-tied at the bf16 bound;
* the rotary table: the model's own rotary embedding for every scaling the engine accepts (Llama-3.1 uses ``llama3``),
  at short and long lengths; scalings whose frequencies depend on the length are refused in one line;
* no attention row without a key, in the reference decoder's prefill (its left padding) and the engine's dense
  rectangles: on some kernels (the math kernel, FlexAttention's masked blocks) an empty row is NaN, and 0 x NaN
  poisons every query that reads the row's cache entry.
"""

import copy
import random
import string

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from oracles import RecordingSolver, check_engine_path, decisions_are_stable
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_block_decoder
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.engine.forward import CachedForward
from sbd_core.mask_token import setup_mask_token
from sbd_core.decoding.solvers import get_solver
from test_engine import MASK, PAD, PROMPTS, ids_of, peaked_model

BF16_ULPS = 8 * 2.0 ** -8  # 8 bf16 roundings (2^-8 relative each) of the largest logit; measured: under 1.5


def bf16_bound(calls) -> float:
    """The bf16 tolerance of a decode's logits: :data:`BF16_ULPS` of their largest magnitude."""
    return BF16_ULPS * max(float(c.logits[torch.isfinite(c.logits)].abs().max()) for c in calls)


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_bf16_logits_are_within_bf16_rounding_of_an_fp32_recomputation(tokenizer, kind):
    fp32 = peaked_model(kind, tokenizer, scale=1.0)
    bf16 = copy.deepcopy(fp32).to(torch.bfloat16)
    reference = copy.deepcopy(bf16).float()  # the same (bf16) weights, computed in fp32: only the arithmetic differs
    ids, recorder = ids_of(tokenizer), RecordingSolver(get_solver("eb", gamma=0.5))
    config = DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=(), batch_size=2)
    gens = FastDecoder(bf16, tokenizer, config, recorder).generate(ids)
    atol = bf16_bound(recorder.calls)
    assert atol < 0.05  # logits of a scale-1 model: the bound is tight enough to catch a wrong position or cache
    check_engine_path(reference, ids, gens, recorder.calls, 2, 4, 13, eos=(), excluded=(PAD, MASK), atol=atol)


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_bf16_engine_gives_the_bf16_reference_decoders_tokens(tokenizer, kind):
    """bf16 logits are coarse (8 bits): argmax ties and near-ties are common on a random model, so the prompts are
    those whose reference decode (alone, batch 1) has every decision stable at twice the bf16 bound (each path is
    within one bound of the exact logits); at least three of them."""
    model = peaked_model(kind, tokenizer).to(torch.bfloat16)
    solver = get_solver("left_to_right", n=2)  # its decisions are argmaxes
    config = DecodeConfig(block_size=4, max_new_tokens=8, eos_token_ids=(), batch_size=1, engine="reference")
    rng = random.Random(0)
    candidates = PROMPTS + ["".join(rng.choice(string.ascii_lowercase + " ") for _ in range(rng.randint(2, 20)))
                            for _ in range(15)]
    stable, reference = [], []
    for prompt in ids_of(tokenizer, candidates):
        recorder = RecordingSolver(solver)
        gen = make_block_decoder(model, tokenizer, config, recorder).generate([prompt])[0]
        if decisions_are_stable(solver, recorder.calls, eps=2 * bf16_bound(recorder.calls)):
            stable.append(prompt)
            reference.append(gen)
    assert len(stable) >= 3, "fewer than 3 prompts with stable decisions: pick other candidates"
    fast = DecodeConfig(block_size=4, max_new_tokens=8, eos_token_ids=(), batch_size=3)
    ours = FastDecoder(model, tokenizer, fast, solver).generate(stable)
    assert [(g.token_ids, g.nfe, g.widths) for g in ours] == [(g.token_ids, g.nfe, g.widths) for g in reference]


ROPES = {"default": {}, "linear": {"factor": 2.0},
         "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,  # Llama-3.1's, at a small scale
                    "original_max_position_embeddings": 64},
         "yarn": {"factor": 4.0, "original_max_position_embeddings": 64}}


def rope_model(rope_type: str, **params):
    config = LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=256,
                         rope_scaling={"rope_type": rope_type, "rope_theta": 10000.0, **params})
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("rope_type", list(ROPES))
def test_the_rotary_table_is_the_models_own_rotary_embedding(rope_type):
    model = rope_model(rope_type, **ROPES[rope_type])
    forward = CachedForward(model, 1, 256)
    probe = torch.zeros(1, 1)
    for length in (16, 256):  # inside and beyond the original context of the scaled types
        cos, sin = model.model.rotary_emb(probe, torch.arange(length)[None])
        assert torch.equal(forward.cos[:length], cos[0]) and torch.equal(forward.sin[:length], sin[0])


def test_the_engine_decodes_a_llama3_rope_model_along_its_own_path(tokenizer):
    model = rope_model("llama3", **ROPES["llama3"])
    model.resize_token_embeddings(len(tokenizer))
    setup_mask_token(tokenizer, model)
    ids, recorder = ids_of(tokenizer), RecordingSolver(get_solver("eb", gamma=0.5))
    config = DecodeConfig(block_size=4, max_new_tokens=9, eos_token_ids=(), batch_size=2)
    gens = FastDecoder(model, tokenizer, config, recorder).generate(ids)
    check_engine_path(model, ids, gens, recorder.calls, 2, 4, 9, eos=(), excluded=(PAD, MASK))


@pytest.mark.parametrize("rope_type, params", [("dynamic", {"factor": 2.0}),
                                               ("longrope", {"short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
                                                             "original_max_position_embeddings": 64})])
def test_rotary_scalings_that_change_with_the_length_are_refused(rope_type, params):
    with pytest.raises(ValueError, match=f"rope_type '{rope_type}'") as error:
        CachedForward(rope_model(rope_type, **params), 1, 64)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("engine", ["reference", "fast"])
@pytest.mark.parametrize("mode", ["sbd", "ntp"])
def test_no_attention_row_is_left_without_a_key(sbd_model, tokenizer, monkeypatch, engine, mode):
    masks = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(*args, attn_mask=None, **kwargs):
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            masks.append(attn_mask)
        return sdpa(*args, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    config = DecodeConfig(mode=mode, block_size=4, max_new_tokens=6, eos_token_ids=(), batch_size=3, engine=engine)
    make_block_decoder(sbd_model, tokenizer, config, get_solver("eb", gamma=0.5)).generate(ids_of(tokenizer))
    assert masks and all(bool(m.any(-1).all()) for m in masks), "a query row of an attention mask sees no key"
