"""The fine-tune engine in one process: fp32 master weights under bf16, FlexAttention on packed rows (forward on CPU,
backward on GPU), the CPU fallback to the dense mask, tokens per step, the step-level batch accounting."""

import json
import logging

import pytest
import torch

from conftest import tiny_model
from sbd_core.distributed import Runtime
from sbd_core.mask_token import setup_mask_token
from sbd_core.masking import build_batch
from sbd_core.objective import compute_loss
from sbd_core.train import attention_backend, pad_rows, train
from sbd_core.train_config import TrainConfig, micro_batches_per_step

CPU = Runtime(rank=0, world_size=1, device=torch.device("cpu"))
PAPER_OPTIMIZER = dict(learning_rate=3e-4, warmup_steps=200, scheduler="cosine", weight_decay=0.1, adam_beta2=0.95,
                       min_lr_ratio=0.1, max_grad_norm=1.0)


def norm_weights(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith("norm.weight")}


def test_bf16_training_keeps_fp32_master_weights_so_weights_of_one_move(tokenizer, tmp_path):
    """Paper optimizer, step 2 of a 200-step warmup: the update is ~1.5e-6, far below bf16's spacing at 1.0 (2^-7)."""
    model = tiny_model("llama", len(tokenizer)).to(torch.bfloat16)  # a base loaded in bf16, as GPUs load it
    setup_mask_token(tokenizer, model)
    before = norm_weights(model)
    assert all(bool((w == 1.0).all()) for w in before.values())
    rows = [{"input_ids": [0] + [7 + (i * j) % 90 for j in range(30)], "target": [1] * 31} for i in range(8)]
    config = TrainConfig(objective="sbd", max_steps=2, batch_size=4, bf16=True, max_length=32, save_steps=10,
                         logging_steps=1, **PAPER_OPTIMIZER)
    train(model, tokenizer, rows, config, tmp_path / "ckpt", tmp_path / "log.jsonl", progress=False, runtime=CPU)
    after = norm_weights(model)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    moved = torch.cat([(w != 1.0).flatten() for w in after.values()])
    assert float(moved.float().mean()) > 0.9  # (an element whose two gradients nearly cancel moves < fp32 spacing)
    assert all(float((w - 1).abs().max()) > 1e-6 for w in after.values())
    # the old path (weights and AdamW in bf16) loses exactly this update: same step on a bf16 copy changes nothing
    weight = torch.nn.Parameter(torch.ones(64, dtype=torch.bfloat16))
    weight.grad = torch.randn(64).to(torch.bfloat16)
    torch.optim.AdamW([weight], lr=3e-4 * 1 / 200, betas=(0.9, 0.95), weight_decay=0.0).step()
    assert bool((weight == 1.0).all())


def packed_batch(vocab, k=5):
    """Two rows of three and two packed documents (one padded), as the packer writes them."""
    gen = torch.Generator().manual_seed(0)
    rows = [{"input_ids": torch.randint(7, vocab, (41,), generator=gen).tolist(), "target": [1] * 41,
             "doc_lengths": [13, 20, 8]},
            {"input_ids": torch.randint(7, vocab, (33,), generator=gen).tolist(), "target": [1] * 33,
             "doc_lengths": [25, 8]}]
    inputs = pad_rows(rows, pad_token_id=2)
    return build_batch(inputs["sequence"], "sbd", 3, k, doc_ids=inputs["doc_ids"],
                       generator=torch.Generator().manual_seed(1))


@pytest.fixture
def fresh_compiler():
    """A clean torch.compile state before and after: after a first FlexAttention compile at another length, torch 2.13
    recompiles with dynamic shapes, and its CPU kernel for those fails to build (a C++ codegen error)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.slow  # a flex kernel compile; the default tier compares the losses in tests/test_flex_attention.py
def test_flex_and_dense_give_the_same_sbd_loss_on_packed_rows(tokenizer, fresh_compiler):
    pytest.importorskip("torch.nn.attention.flex_attention")
    batch = packed_batch(len(tokenizer))
    assert batch.position_ids[0, 13] == 0 and batch.position_ids[0, 33] == 0  # positions restart per document
    with torch.no_grad():
        dense = compute_loss(tiny_model("llama", len(tokenizer)), batch)
        flex = compute_loss(tiny_model("llama", len(tokenizer), attn="flex_attention"), batch)
    assert flex.n_matp == dense.n_matp > 0
    assert abs(flex.loss.item() - dense.loss.item()) < 1e-4 and abs(flex.matp_loss - dense.matp_loss) < 1e-4


def test_flex_on_cpu_trains_with_the_dense_mask_and_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="sbd_core"):
        assert attention_backend("flex", torch.device("cpu")) == "sdpa"
    assert "no backward pass on cpu" in caplog.text
    assert attention_backend("auto", torch.device("cpu")) == "sdpa"
    assert attention_backend("auto", torch.device("cuda")) == attention_backend("flex", torch.device("cuda")) == \
        "flex_attention"


def test_tokens_per_step_sets_accumulation_and_rejects_remainders():
    config = TrainConfig(tokens_per_step=2 * 1024 * 1024, max_length=32768, batch_size=1)
    assert micro_batches_per_step(config, world_size=8) == 8  # 64 rows of 32k tokens = the paper's 2M per step
    assert micro_batches_per_step(TrainConfig(grad_accum=3), world_size=4) == 3
    with pytest.raises(ValueError, match="tokens_per_step=1000 is not a multiple"):
        micro_batches_per_step(TrainConfig(tokens_per_step=1000, max_length=256, batch_size=1), world_size=1)
    with pytest.raises(ValueError, match="attention must be one of"):
        TrainConfig(attention="flash")


def test_split_batches_and_accumulation_give_the_same_losses(tokenizer, tmp_path):
    """4 rows per micro-batch vs 2 x 2 accumulated: same rows, k, noise and pooled loss (rows of unequal length)."""
    rows = [{"input_ids": [0] + [7 + (i * j) % 90 for j in range(10 + 3 * i)], "target": [1] * (11 + 3 * i)}
            for i in range(8)]
    logs = {}
    for name, shape in {"whole": dict(batch_size=4), "split": dict(batch_size=2, grad_accum=2)}.items():
        model = tiny_model("llama", len(tokenizer), seed=2)
        setup_mask_token(tokenizer, model)
        config = TrainConfig(objective="sbd", max_steps=3, learning_rate=3e-3, warmup_steps=0, save_steps=10,
                             logging_steps=1, max_length=40, **shape)
        train(model, tokenizer, rows, config, tmp_path / name, tmp_path / f"{name}.jsonl", progress=False, runtime=CPU)
        logs[name] = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
    for a, b in zip(logs["whole"], logs["split"]):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5) and a["matp_loss"] == pytest.approx(b["matp_loss"], abs=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_flex_backward_matches_dense_on_gpu(tokenizer):
    batch = packed_batch(len(tokenizer)).to("cuda")
    grads = {}
    for attn in ("sdpa", "flex_attention"):
        model = tiny_model("llama", len(tokenizer), attn=attn).cuda().train()
        out = compute_loss(model, batch)
        out.loss.backward()
        grads[attn] = (out.loss.item(), model.model.layers[0].self_attn.q_proj.weight.grad.clone())
    assert abs(grads["sdpa"][0] - grads["flex_attention"][0]) < 1e-4
    assert torch.allclose(grads["sdpa"][1], grads["flex_attention"][1], atol=1e-4)
