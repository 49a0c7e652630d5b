"""The ablation objective sbd_no_ntp_grad and the named departures matp_loss_weight / matp_on_prompt / matp_past_end."""

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny_model
from sbd_core.mask_token import setup_mask_token
from sbd_core.distributed import Runtime
from sbd_core.masking import IGNORE_INDEX, build_batch, fill_past_end
from sbd_core.objective import compute_loss, model_inputs
from sbd_core.train import BatchSource, layout, pad_rows, tokenize_examples, train
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
    ours = dict(loss_on_prompt=False, matp_loss_weight=2.0, matp_past_end=True, block_size_max=8)
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


EOS, PAD, MASK = 1, 2, 3


def test_fill_past_end_fills_to_the_end_of_the_block_holding_the_end_of_text():
    """Hand cases, blocks of 3 tiling from position 0: the end of text at 3 fills 4-5 (block 3-5); at 1, fills 2;
    at 5, the last of its block, fills nothing; a row cut before its end of text is left alone."""
    rows = [[5, 6, 7, EOS], [5, 6, 7, 8, 9, 10, 11, 12], [5, EOS], [5, 6, 7, 8, 9, EOS]]
    inputs = pad_rows([{"input_ids": r, "target": [1] * len(r)} for r in rows], PAD, width=8)
    sequence, doc_ids, fill = fill_past_end(inputs["sequence"], inputs["doc_ids"], 3, EOS)
    assert fill.tolist() == [[0, 0, 0, 0, 1, 1, 0, 0], [0] * 8, [0, 0, 1, 0, 0, 0, 0, 0], [0] * 8]
    assert sequence.tolist() == [[5, 6, 7, EOS, EOS, EOS, PAD, PAD], rows[1], [5, EOS, EOS, PAD, PAD, PAD, PAD, PAD],
                                 rows[3] + [PAD, PAD]]
    assert doc_ids.tolist() == [[0] * 6 + [-1] * 2, [0] * 8, [0] * 3 + [-1] * 5, [0] * 6 + [-1] * 2]
    packed = pad_rows([{"input_ids": [5, EOS, 6, EOS], "target": [1] * 4, "doc_lengths": [2, 2]}], PAD, width=6)
    with pytest.raises(ValueError, match="packed"):
        fill_past_end(packed["sequence"], packed["doc_ids"], 3, EOS)


def test_matp_past_end_adds_end_of_text_targets_after_the_end_and_changes_nothing_else(tokenizer):
    """Through the training loop's layout, at one width: the clean half's NTP labels and every MATP label on the rows'
    own tokens are the option-off layout's (the same noise draws); the filled positions are end-of-text tokens of the
    row's document, never NTP targets, MATP targets (end of text) where masked; the NTP objective is untouched."""
    rows = tokenize_examples(tokenizer, [(f"q{i}=", "x" * (i % 5 + 1)) for i in range(12)], 64)
    inputs = pad_rows(rows, tokenizer.pad_token_id, width=max(len(r["input_ids"]) for r in rows) + 8)
    eos = tokenizer.eos_token_id
    common = dict(objective="sbd", block_size_min=4, block_size_max=4, loss_on_prompt=False, drop_empty_blocks=False)
    off = layout(inputs, list(range(12)), TrainConfig(**common), MASK, step=3, eos_token_id=eos)
    on = layout(inputs, list(range(12)), TrainConfig(**common, matp_past_end=True), MASK, step=3, eos_token_id=eos)
    n = off.half
    _, _, fill = fill_past_end(inputs["sequence"], inputs["doc_ids"], 4, eos)
    fill = fill[:, :n]
    assert fill.any(dim=1).sum() >= 9  # 3 of 12 rows end on a block's last position
    assert torch.equal(on.labels[:, :n], off.labels[:, :n])  # NTP labels: the same, none on the fill
    assert torch.equal(on.labels[:, n:][~fill], off.labels[:, n:][~fill])
    assert torch.equal(on.input_ids[:, n:][~fill], off.input_ids[:, n:][~fill])
    filled_inputs, filled_labels = on.input_ids[:, n:][fill], on.labels[:, n:][fill]
    masked = filled_inputs == MASK
    assert masked.any() and (~masked).any()
    assert (filled_labels[masked] == eos).all() and (filled_labels[~masked] == IGNORE_INDEX).all()
    assert (filled_inputs[~masked] == eos).all() and (on.doc_ids[fill] == 0).all()
    assert torch.equal(on.position_ids[:, :n][fill], fill.nonzero()[:, 1])  # positions run on past the end
    ntp = dict(common, objective="ntp")
    ntp_on = layout(inputs, list(range(12)), TrainConfig(**ntp, matp_past_end=True), None, step=3, eos_token_id=eos)
    ntp_off = layout(inputs, list(range(12)), TrainConfig(**ntp), None, step=3, eos_token_id=eos)
    assert all(torch.equal(getattr(ntp_on, f), getattr(ntp_off, f)) for f in ("input_ids", "labels", "doc_ids"))


def test_the_training_loop_widens_its_rows_for_the_fill_and_trains(tokenizer, tmp_path):
    """Every row ending with its end of text gets the whole rest of that block, the longest row included (its end of
    text then enters the noised half too), and the loop trains with the option."""
    rows = tokenize_examples(tokenizer, [(f"{a}+{b}=", f"{a + b}") for a in range(10, 20) for b in range(3)], 16)
    config = TrainConfig(objective="sbd", batch_size=8, matp_past_end=True, drop_empty_blocks=False,
                         block_size_min=5, block_size_max=5)
    source = BatchSource(rows, config, Runtime(0, 1, torch.device("cpu")), tokenizer.pad_token_id, MASK,
                         tokenizer.eos_token_id)
    batch = source.step(0)[0]
    ends = (batch.doc_ids >= 0).sum(dim=1)
    assert (ends % 5 == 0).all()  # each row's document now ends where its block does
    eos_at = [int(r.tolist().index(tokenizer.eos_token_id)) for r in batch.input_ids[:, : batch.half]]
    assert all(e // 5 == (end - 1) // 5 for e, end in zip(eos_at, ends.tolist()))
    model = tiny_model("llama", len(tokenizer))
    setup_mask_token(tokenizer, model)
    train_config = TrainConfig(objective="sbd", max_steps=2, batch_size=8, save_steps=100, logging_steps=1,
                               matp_past_end=True)
    summary = train(model, tokenizer, rows, train_config, tmp_path / "ckpt", tmp_path / "log.jsonl", progress=False)
    assert summary["steps"] == 2 and math.isfinite(summary["final"]["matp_loss"])
