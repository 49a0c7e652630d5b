"""Dropping noised blocks without a MATP target is exact: same loss and gradients as the full doubled layout.

Exactness is checked in float64: there the two layouts' sums (attention over different key sets and orders, matmuls of
other shapes) differ by ~1e-16 relative, so a tolerance of 1e-10 says "equal" with no float32 summation noise in it,
while a real slip (a dropped target, a wrong position or document) moves the loss by more than 1e-4. One exception:
transformers' eager attention takes its softmax in float32 whatever the model's dtype, so with eager the bound is that
softmax's: a row of at most 2N = 48 weights carries a relative error of at most about (48 + 3) * 2**-24 = 3e-6 per
weight, hence relative 1e-5 on the loss and on every gradient (measured: 1e-10 and 2e-9). FlexAttention on these
layouts is checked in tests/test_flex_attention.py."""

import pytest
import torch

from conftest import tiny_model
from sbd_core.masking import IGNORE_INDEX, build_batch, drop_empty_segments, kept_noised_index
from sbd_core.objective import compute_loss

N, K = 24, 4
EXACT = 1e-10  # float64: far above summation-order noise, far below any real difference
EAGER = 1e-5  # eager's float32 softmax (module docstring)


def close(a: torch.Tensor, b: torch.Tensor, rel: float) -> bool:
    """|a - b| <= rel * (largest |a|), elementwise."""
    return bool(((a - b).abs() <= rel * a.abs().max()).all())


def packed_rows(vocab: int):
    """Three rows: packed documents, right padding, and prompts (loss mask 0) that leave whole blocks target-free."""
    seq = torch.randint(7, vocab, (3, N + 1), generator=torch.Generator().manual_seed(0))
    docs = torch.tensor([[0] * 9 + [1] * 10 + [2] * 6, [0] * 17 + [-1] * 8, [0] * 25])
    answer = torch.zeros_like(seq)
    answer[0, 6:9], answer[0, 15:19], answer[0, 23:] = 1, 1, 1  # a short answer at the end of each document
    answer[1, 12:17], answer[2, 20:] = 1, 1
    return seq, docs, answer


def both_layouts(vocab: int, seed: int, **kwargs):
    seq, docs, answer = packed_rows(vocab)
    make = lambda: build_batch(seq, "sbd", 3, K, doc_ids=docs, generator=torch.Generator().manual_seed(seed),  # noqa: E731
                               **kwargs)
    return make(), drop_empty_segments(make())


def loss_and_grads(model, batch):
    model.zero_grad()
    out = compute_loss(model, batch)
    out.loss.backward()
    return out, {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("prompts", ["answers only", "everything"])
def test_dropping_empty_blocks_keeps_loss_and_gradients(model_kind, tokenizer, attn, prompts):
    _, _, answer = packed_rows(len(tokenizer))
    mask = {"loss_mask": answer} if prompts == "answers only" else {}
    full, compact = both_layouts(len(tokenizer), seed=1, **mask)
    assert (compact.noised_index >= 0).sum() < (full.doc_ids >= 0).sum()  # something was dropped
    model = tiny_model(model_kind, len(tokenizer), attn=attn).double().train()
    (a, grads_a), (b, grads_b) = loss_and_grads(model, full), loss_and_grads(model, compact)
    assert (a.n_ntp, a.n_matp) == (b.n_ntp, b.n_matp) and b.n_matp > 0
    assert a.loss.dtype == torch.float64
    rel = EXACT if attn == "sdpa" else EAGER
    assert close(a.loss, b.loss, rel) and a.matp_loss == pytest.approx(b.matp_loss, rel=rel)
    for name, grad in grads_a.items():
        assert close(grad, grads_b[name], rel), name


def test_kept_tokens_carry_their_position_document_and_label(tokenizer):
    seq, docs, answer = packed_rows(len(tokenizer))
    full, compact = both_layouts(len(tokenizer), seed=3, loss_mask=answer)
    index = compact.noised_index
    kept = index >= 0
    rows = torch.arange(3)[:, None].expand_as(index)
    assert torch.equal(compact.input_ids[:, N:][kept], full.input_ids[:, N:][rows[kept], index[kept]])
    assert torch.equal(compact.position_ids[:, N:][kept], full.position_ids[:, :N][rows[kept], index[kept]])
    assert torch.equal(compact.labels[:, N:][kept], full.labels[:, N:][rows[kept], index[kept]])
    assert (compact.labels[:, N:][~kept] == IGNORE_INDEX).all()
    assert (docs[:, :-1][rows[kept], index[kept]] >= 0).all()  # padding is never kept


def test_a_segment_is_kept_iff_its_block_and_document_hold_a_target():
    labels = torch.full((1, 8), IGNORE_INDEX)
    labels[0, 2], labels[0, 5] = 9, 9  # targets in block 0 (doc 0) and in block 1's part of doc 1
    docs = torch.tensor([[0, 0, 0, 0, 0, 1, 1, -1]])
    assert kept_noised_index(labels, docs, block_size=4).tolist() == [[0, 1, 2, 3, 5, 6]]
    none = kept_noised_index(torch.full((2, 8), IGNORE_INDEX), torch.zeros(2, 8, dtype=torch.long), 4)
    assert none.shape == (2, 0)


def test_a_batch_without_any_target_has_an_empty_noised_half(tokenizer):
    seq, docs, _ = packed_rows(len(tokenizer))
    batch = drop_empty_segments(build_batch(seq, "sbd", 3, K, doc_ids=docs, loss_mask=torch.zeros_like(seq)))
    assert batch.input_ids.shape == (3, N)
    out = compute_loss(tiny_model("llama", len(tokenizer)), batch)
    assert out.n_ntp == 0 and out.n_matp == 0
