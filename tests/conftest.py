"""Shared fixtures: tiny random Llama-3.1- and Qwen-3-class models and a character tokenizer, built offline."""

from __future__ import annotations

import shutil
import string

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|reserved_special_token_0|>"]


def inductor_cpp_compiler() -> str | None:
    """The C++ compiler torch's inductor would use on the CPU, or None when there is none."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler

        return shutil.which(get_cpp_compiler())
    except Exception:  # torch raises its own error types when no compiler is found
        return None


#: FlexAttention's CPU forward is a kernel that inductor compiles with a C++ compiler: skip (saying why) without one.
needs_inductor_cpp = pytest.mark.skipif(
    inductor_cpp_compiler() is None,
    reason="FlexAttention on the CPU is compiled by torch inductor, which needs a C++ compiler (g++ or clang++); "
           "none found (install one, or set CXX)")


def char_tokenizer(specials=SPECIALS) -> PreTrainedTokenizerFast:
    """A character-level fast tokenizer over printable ASCII plus ``specials``."""
    vocab = {tok: i for i, tok in enumerate(list(specials) + list(string.printable))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="?")
    tok.add_special_tokens({"additional_special_tokens": list(specials)})
    tok.bos_token, tok.eos_token, tok.pad_token = specials[0], specials[1], specials[2]
    return tok


def tiny_model(kind: str, vocab_size: int, attn: str = "sdpa", seed: int = 0, context: int = 256):
    """A 2-layer random model of the real class; fp32; vocab_size embedding rows."""
    torch.manual_seed(seed)
    common = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context,
                  bos_token_id=0, eos_token_id=1, pad_token_id=2)
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    elif kind == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=16, **common))
    else:
        raise ValueError(kind)
    model.set_attn_implementation(attn)
    return model.eval()


FIRST = ("test_workflow.py", "test_configs.py", "test_bad_configs.py")  # the longest files, by measured time


def pytest_collection_modifyitems(items):
    """The longest files first (the smoke DAG's alone takes about 3 minutes): --dist loadfile hands the files to the
    workers in collection order, so the short files then fill the other worker's time instead of trailing after them."""
    items.sort(key=lambda item: FIRST.index(item.path.name) if item.path.name in FIRST else len(FIRST))


@pytest.fixture(scope="session")
def tokenizer():
    return char_tokenizer()


@pytest.fixture(params=["llama", pytest.param("qwen3", marks=pytest.mark.slow)])
def model_kind(request):
    """The model family of the tests that take any tiny model: Llama in the default tier, Qwen-3 beside it in the slow
    tier (the default tier runs Qwen-3 through the tests that name both families: the engine and the decoders against
    their references, verify, bf16, the mask token)."""
    return request.param


@pytest.fixture
def sbd_model(model_kind, tokenizer):
    """A tiny model prepared for SBD (mask token recorded in its config)."""
    from sbd_core.mask_token import setup_mask_token

    extra = 8 if model_kind == "qwen3" else 0  # Qwen-3 style: spare embedding rows beyond the tokenizer
    model = tiny_model(model_kind, len(tokenizer) + extra)
    setup_mask_token(tokenizer, model)
    return model
