"""SBD loss: dense vs FlexAttention, pooled reduction, and a few training steps lower both parts."""

import math

import pytest
import torch

from conftest import tiny_model
from sbd_core.mask_token import setup_mask_token
from sbd_core.masking import IGNORE_INDEX, build_batch
from sbd_core.objective import compute_loss, model_inputs
from sbd_core.train import tokenize_examples, train
from sbd_core.train_config import TrainConfig


def fixed_batch(vocab, objective="sbd", k=4, rows=4, n=24, seed=0):
    seq = torch.randint(7, vocab, (rows, n + 1), generator=torch.Generator().manual_seed(seed))
    return build_batch(seq, objective, mask_token_id=3, block_size=k, generator=torch.Generator().manual_seed(seed + 1))


def test_loss_is_pooled_mean_with_parts(tokenizer):
    model = tiny_model("llama", len(tokenizer))
    batch = fixed_batch(len(tokenizer))
    out = compute_loss(model, batch)
    n_matp = int((batch.labels[:, 24:] != IGNORE_INDEX).sum())
    assert out.n_ntp == 4 * 24 and out.n_matp == n_matp
    pooled = (out.ntp_loss * out.n_ntp + out.matp_loss * out.n_matp) / (out.n_ntp + out.n_matp)
    assert math.isclose(out.loss.item(), pooled, rel_tol=1e-5)
    ntp = compute_loss(model, fixed_batch(len(tokenizer), "ntp"))
    assert ntp.n_matp == 0 and math.isnan(ntp.matp_loss)
    assert math.isclose(ntp.loss.item(), out.ntp_loss, rel_tol=1e-5)  # the clean half is the NTP objective


@pytest.mark.parametrize("objective", ["sbd", "ntp"])
def test_loss_from_labelled_logits_equals_full_logits_cross_entropy(model_kind, tokenizer, objective):
    """compute_loss asks the output layer for labelled positions only; the reference takes every position's logits."""
    seq = torch.randint(7, len(tokenizer), (3, 41), generator=torch.Generator().manual_seed(5))
    prompt = torch.zeros_like(seq)
    prompt[:, 12:] = 1  # loss on the last 29 tokens only: many unlabelled positions
    batch = build_batch(seq, objective, mask_token_id=3, block_size=4, loss_mask=prompt,
                        generator=torch.Generator().manual_seed(6))
    model, reference = tiny_model(model_kind, len(tokenizer)), tiny_model(model_kind, len(tokenizer))
    out = compute_loss(model, batch, matp_loss_weight=2.0)
    out.loss.backward()
    logits = reference(input_ids=batch.input_ids, position_ids=batch.position_ids,
                       attention_mask=model_inputs(reference, batch)[1], use_cache=False).logits
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE_INDEX,
                                           reduction="none").view(batch.labels.shape)
    n = batch.half
    valid = batch.labels != IGNORE_INDEX
    expected = (ce[:, :n].sum() + 2.0 * ce[:, n:].sum()) / valid.sum()
    expected.backward()
    assert out.n_ntp == int(valid[:, :n].sum()) and out.n_matp == int(valid[:, n:].sum())
    assert valid.float().mean() < 0.8  # the test covers unlabelled positions
    assert abs(out.loss.item() - expected.item()) < 1e-5
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-4), name
    assert model.get_output_embeddings()._forward_pre_hooks == {}  # the hook is gone after the forward


@pytest.mark.slow  # the default tier compares flex and dense losses in tests/test_flex_attention.py
def test_dense_and_flex_masks_give_the_same_loss(tokenizer):
    pytest.importorskip("torch.nn.attention.flex_attention")
    dense = tiny_model("qwen3", len(tokenizer))
    flex = tiny_model("qwen3", len(tokenizer), attn="flex_attention")
    batch = fixed_batch(len(tokenizer), k=8, n=64)
    with torch.no_grad():
        a, b = compute_loss(dense, batch), compute_loss(flex, batch)
    assert abs(a.loss.item() - b.loss.item()) < 1e-4
    assert abs(a.matp_loss - b.matp_loss) < 1e-4


def test_a_few_sbd_steps_lower_ntp_and_matp_loss(tokenizer, tmp_path):
    model = tiny_model("llama", len(tokenizer))
    setup_mask_token(tokenizer, model)
    pairs = [(f"{a}+{b}=", f"{a + b}") for a in range(10, 30) for b in range(10, 14)]
    rows = tokenize_examples(tokenizer, pairs, max_length=32)
    probe = build_batch(torch.tensor([r["input_ids"][:9] for r in rows[:32]]), "sbd", 3, 4,
                        generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = compute_loss(model, probe)
    config = TrainConfig(objective="sbd", max_steps=12, batch_size=16, learning_rate=3e-3, warmup_steps=1,
                         block_size_min=2, block_size_max=8, save_steps=100, logging_steps=4)
    summary = train(model, tokenizer, rows, config, tmp_path / "ckpt", tmp_path / "log.jsonl", progress=False)
    with torch.no_grad():
        after = compute_loss(model.eval(), probe)
    assert after.ntp_loss < before.ntp_loss - 0.3 and after.matp_loss < before.matp_loss - 0.3
    assert summary["steps"] == 12
    lines = (tmp_path / "log.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(k in lines[-1] for k in ("ntp_loss", "matp_loss", "tokens_per_s"))


def test_train_config_rejects_bad_values():
    with pytest.raises(ValueError, match="objective"):
        TrainConfig(objective="mdm")
    with pytest.raises(ValueError, match="block_size"):
        TrainConfig(block_size_min=0)
    with pytest.raises(ValueError, match="block_size"):
        TrainConfig(block_size_min=8, block_size_max=4)
