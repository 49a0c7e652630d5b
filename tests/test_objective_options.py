"""The ablation objective sbd_no_ntp_grad and the named departures matp_loss_weight / matp_on_prompt."""

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_model
from sbd_core.mask_token import setup_mask_token
from sbd_core.masking import IGNORE_INDEX, build_batch
from sbd_core.objective import compute_loss, model_inputs
from sbd_core.train import layout, pad_rows, tokenize_examples, train
from sbd_core.train_config import PAPER_RECIPE, TrainConfig

N = 24


def batch_of(vocab, seed=0, **kwargs):
    seq = torch.randint(7, vocab, (4, N + 1), generator=torch.Generator().manual_seed(seed))
    return build_batch(seq, "sbd", 3, 4, generator=torch.Generator().manual_seed(seed + 1), **kwargs)


def grads_of(model, loss):
    model.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def matp_part(model, batch, n_labels):
    """The MATP term alone, computed here from the logits: sum of MATP cross-entropies / all labels."""
    logits = model(input_ids=batch.input_ids, position_ids=batch.position_ids,
                   attention_mask=model_inputs(model, batch)[1], use_cache=False).logits
    matp = F.cross_entropy(logits[:, N:].flatten(0, 1), batch.labels[:, N:].flatten(), ignore_index=IGNORE_INDEX,
                           reduction="sum")
    return matp / n_labels


def test_no_ntp_grad_has_the_sbd_loss_value_and_only_the_matp_gradient(model_kind, tokenizer):
    model = tiny_model(model_kind, len(tokenizer)).train()
    batch = batch_of(len(tokenizer))
    sbd = compute_loss(model, batch)
    ablation = compute_loss(model, batch, ntp_gradient=False)
    assert math.isclose(ablation.loss.item(), sbd.loss.item(), rel_tol=1e-6)  # logged curves compare
    assert (ablation.ntp_loss, ablation.matp_loss) == pytest.approx((sbd.ntp_loss, sbd.matp_loss), rel=1e-6)
    got = grads_of(model, ablation.loss)
    want = grads_of(model, matp_part(model, batch, sbd.n_ntp + sbd.n_matp))
    full = grads_of(model, compute_loss(model, batch).loss)
    assert got.keys() == want.keys()
    for name in want:
        assert torch.allclose(got[name], want[name], atol=1e-7, rtol=1e-5), name
    assert any(not torch.allclose(got[n], full[n], atol=1e-5) for n in full)  # the NTP term did carry gradient


def test_matp_loss_weight_scales_each_matp_label_in_the_pooled_mean(tokenizer):
    model = tiny_model("llama", len(tokenizer))
    batch = batch_of(len(tokenizer), seed=2)
    with torch.no_grad():
        out = compute_loss(model, batch, matp_loss_weight=2.5)
    expected = (out.ntp_loss * out.n_ntp + 2.5 * out.matp_loss * out.n_matp) / (out.n_ntp + out.n_matp)
    assert math.isclose(out.loss.item(), expected, rel_tol=1e-5)
    with pytest.raises(ValueError, match="matp_loss_weight"):
        compute_loss(model, batch, matp_loss_weight=0)
    with pytest.raises(ValueError, match="matp_loss_weight"):
        TrainConfig(matp_loss_weight=-1.0)


def test_matp_on_prompt_false_keeps_ntp_prompt_labels_and_drops_matp_ones(tokenizer):
    """Through the training loop's layout: NTP labels on prompts stay (loss_on_prompt), MATP targets are answers only."""
    rows = tokenize_examples(tokenizer, [("question number %d is" % i, " answer %d" % i) for i in range(8)], 64)
    inputs = pad_rows(rows, tokenizer.pad_token_id)
    config = TrainConfig(objective="sbd", matp_on_prompt=False, block_size_min=4, block_size_max=4)
    batch = layout(inputs, list(range(len(rows))), config, mask_token_id=3, step=0)
    n, answer = batch.half, inputs["target"][:, :-1].bool()
    ntp_targets = batch.labels[:, :n] != IGNORE_INDEX
    assert (ntp_targets & ~inputs["target"][:, 1:].bool()).any()  # NTP still learns prompt tokens
    rows_idx = torch.arange(len(rows))[:, None].expand_as(batch.noised_index)
    matp = (batch.labels[:, n:] != IGNORE_INDEX) & (batch.noised_index >= 0)
    assert matp.any() and answer[rows_idx[matp], batch.noised_index[matp]].all()


def test_departures_name_the_settings_that_leave_the_papers_recipe():
    assert TrainConfig(objective="sbd").departures() == {}
    assert TrainConfig(objective="sbd", **PAPER_RECIPE).departures() == {}
    ours = dict(loss_on_prompt=False, matp_loss_weight=2.0, block_size_max=8)
    assert TrainConfig(objective="sbd_no_ntp_grad", **ours).departures() == ours
    assert TrainConfig(objective="ntp", **ours).departures() == {"loss_on_prompt": False}  # MATP options do not apply


def test_sbd_no_ntp_grad_trains_through_the_training_loop(tokenizer, tmp_path):
    model = tiny_model("llama", len(tokenizer))
    setup_mask_token(tokenizer, model)
    rows = tokenize_examples(tokenizer, [(f"{a}+{b}=", f"{a + b}") for a in range(10, 20) for b in range(3)], 16)
    config = TrainConfig(objective="sbd_no_ntp_grad", max_steps=2, batch_size=8, save_steps=100, logging_steps=1)
    summary = train(model, tokenizer, rows, config, tmp_path / "ckpt", tmp_path / "log.jsonl", progress=False)
    assert summary["steps"] == 2 and "ntp_loss" in summary["final"]  # the NTP loss is still logged
    with pytest.raises(ValueError, match="sbd_no_ntp_grad"):
        TrainConfig(objective="mdm")
