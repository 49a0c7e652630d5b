"""SBD loss: dense vs FlexAttention, pooled reduction, and a few training steps lower both parts."""

import math

import pytest
import torch

from conftest import tiny_model
from sbd_core.mask_token import setup_mask_token
from sbd_core.masking import IGNORE_INDEX, build_batch
from sbd_core.objective import compute_loss
from sbd_core.train import TrainConfig, tokenize_examples, train


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
