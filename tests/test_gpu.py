"""GPU checks (skipped without CUDA): FlexAttention training with backward, and the decoder on the GPU against the slow
CPU reference along its own path (see oracles.py: no comparison of near-tied choices between devices)."""

import copy

import pytest
import torch

from conftest import tiny_model
from oracles import RecordingSolver, check_sbd_path
from sbd_core.decode import BlockDecoder, DecodeConfig
from sbd_core.mask_token import setup_mask_token
from sbd_core.masking import build_batch
from sbd_core.objective import compute_loss
from sbd_core.solvers import get_solver

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_flex_and_dense_training_agree_on_gpu(tokenizer):
    seq = torch.randint(7, len(tokenizer), (4, 129), generator=torch.Generator().manual_seed(0)).cuda()
    grads = {}
    for attn in ("sdpa", "flex_attention"):
        model = tiny_model("llama", len(tokenizer), attn=attn).cuda().train()
        batch = build_batch(seq, "sbd", 3, 16, generator=torch.Generator(device="cuda").manual_seed(1))
        out = compute_loss(model, batch)
        out.loss.backward()
        grads[attn] = (out.loss.item(), model.model.embed_tokens.weight.grad.clone())
    assert abs(grads["sdpa"][0] - grads["flex_attention"][0]) < 1e-4
    assert torch.allclose(grads["sdpa"][1], grads["flex_attention"][1], atol=1e-4)


def test_decoder_on_gpu_follows_cpu_reference(tokenizer):
    model = tiny_model("qwen3", len(tokenizer) + 8)
    setup_mask_token(tokenizer, model)
    config = DecodeConfig(block_size=8, max_new_tokens=24, eos_token_ids=())
    ids = [tokenizer(p)["input_ids"] for p in ["gpu check", "a second, longer prompt"]]
    recorder = RecordingSolver(get_solver("eb", gamma=0.3))
    gens = BlockDecoder(copy.deepcopy(model).cuda(), tokenizer, config, recorder).decode_batch(ids)
    assert recorder.calls and all(g.num_tokens == 24 for g in gens)
    check_sbd_path(model, ids, gens, recorder.calls, 8, 24, eos=(), excluded=(2, 3))
