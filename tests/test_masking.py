"""Training layout and attention mask: semantics by perturbation, NTP half intact, labels, packing, mask token."""

import pytest
import torch

from conftest import char_tokenizer, tiny_model
from sbd_core.mask_token import NEW_MASK_TOKEN, mask_token_id, setup_mask_token
from sbd_core.masking import IGNORE_INDEX, build_batch, dense_mask
from sbd_core.objective import model_inputs

N, K = 12, 4


def expected_influence(j: int, n: int, k: int) -> torch.Tensor:
    """Hand-written rule: which positions of the 2n layout may change when input position j changes."""
    out = torch.zeros(2 * n, dtype=torch.bool)
    for q in range(2 * n):
        if j < n:  # clean token j: later clean tokens, and noised blocks strictly after j's block
            out[q] = (q >= j) if q < n else ((q - n) // k > j // k)
        else:  # noised token j: only its own noised block
            out[q] = q >= n and (q - n) // k == (j - n) // k
    return out


def logits_of(model, batch):
    batch, mask = model_inputs(model, batch)
    out = model(input_ids=batch.input_ids, position_ids=batch.position_ids, attention_mask=mask, use_cache=False)
    return out.logits


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_perturbing_one_token_changes_exactly_what_it_may_influence(model_kind, tokenizer, attn):
    model = tiny_model(model_kind, len(tokenizer), attn=attn)
    seq = torch.randint(4, len(tokenizer), (1, N + 1), generator=torch.Generator().manual_seed(1))
    batch = build_batch(seq, "sbd", mask_token_id=3, block_size=K, generator=torch.Generator().manual_seed(2))
    base = logits_of(model, batch)
    for j in [0, 3, 5, N - 1, N, N + 5, 2 * N - 1]:
        changed = batch.input_ids.clone()
        changed[0, j] = (changed[0, j] + 7) % len(tokenizer)
        moved = (logits_of(model, type(batch)(**{**batch.__dict__, "input_ids": changed})) - base).abs().amax(-1)[0]
        assert torch.equal(moved > 1e-6, expected_influence(j, N, K)), f"position {j}"


def test_clean_half_equals_plain_causal_forward(model_kind, tokenizer):
    model = tiny_model(model_kind, len(tokenizer))
    seq = torch.randint(4, len(tokenizer), (3, N + 1), generator=torch.Generator().manual_seed(3))
    batch = build_batch(seq, "sbd", mask_token_id=3, block_size=K, generator=torch.Generator().manual_seed(4))
    causal = model(input_ids=seq[:, :-1]).logits
    assert torch.allclose(logits_of(model, batch)[:, :N], causal, atol=1e-5)


def test_labels_follow_figure_8_layout():
    seq = torch.arange(10, 19)[None]  # x1..x9: N = 8
    batch = build_batch(seq, "sbd", mask_token_id=3, block_size=4, generator=torch.Generator().manual_seed(0))
    clean, noised = batch.input_ids[0, :8], batch.input_ids[0, 8:]
    assert torch.equal(clean, seq[0, :8])
    assert torch.equal(batch.labels[0, :8], seq[0, 1:])  # shifted NTP labels
    masked = noised == 3
    assert torch.equal(batch.labels[0, 8:][masked], clean[masked])  # unshifted, only at masked positions
    assert (batch.labels[0, 8:][~masked] == IGNORE_INDEX).all()
    assert torch.equal(noised[~masked], clean[~masked])
    assert torch.equal(batch.position_ids[0], torch.arange(8).repeat(2))


def test_masking_rate_is_per_row_and_covers_the_unit_interval():
    seq = torch.randint(4, 50, (400, 65), generator=torch.Generator().manual_seed(0))
    batch = build_batch(seq, "sbd", mask_token_id=3, block_size=8, generator=torch.Generator().manual_seed(1))
    rate = (batch.input_ids[:, 64:] == 3).float().mean(1)
    assert rate.min() < 0.1 and rate.max() > 0.9  # eta ~ U(0,1) per row
    assert abs(rate.mean().item() - 0.5) < 0.05


def test_mask_quadrants_match_the_spec():
    batch = build_batch(torch.zeros(1, 9, dtype=torch.long), "sbd", mask_token_id=3, block_size=4)
    m = dense_mask(batch)[0, 0]
    assert not m[:8, 8:].any()  # clean never sees noised
    assert torch.equal(m[:8, :8], torch.ones(8, 8).tril().bool())
    assert m[8, 8:12].all() and not m[8, 12:].any()  # block 0 bidirectional, not block 1
    assert not m[8:12, :8].any()  # block 0 sees no clean token (not even its own clean copy)
    assert m[12:16, :4].all() and not m[12:16, 4:8].any()  # block 1 sees clean block 0 only


def test_packed_documents_do_not_attend_to_each_other(tokenizer):
    model = tiny_model("llama", len(tokenizer))
    seq = torch.randint(4, len(tokenizer), (1, 13), generator=torch.Generator().manual_seed(5))
    docs = torch.tensor([[0] * 5 + [1] * 8])
    batch = build_batch(seq, "sbd", mask_token_id=3, block_size=4, doc_ids=docs,
                        generator=torch.Generator().manual_seed(6))
    assert batch.position_ids[0, :12].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6]
    assert batch.labels[0, 4] == IGNORE_INDEX  # no NTP target across the document boundary
    base = logits_of(model, batch)
    changed = batch.input_ids.clone()
    changed[0, 0] += 1  # first document's first token
    moved = (logits_of(model, type(batch)(**{**batch.__dict__, "input_ids": changed})) - base).abs().amax(-1)[0]
    assert moved[5:12].max() < 1e-6  # the second document's clean tokens never see the first
    # the second document's clean half equals running it alone
    alone = model(input_ids=seq[:, 5:12]).logits
    assert torch.allclose(base[:, 5:12], alone, atol=1e-5)


def test_ntp_objective_is_a_plain_causal_layout():
    seq = torch.arange(4, 14)[None]
    batch = build_batch(seq, "ntp")
    assert batch.input_ids.shape == (1, 9) and torch.equal(batch.labels[0], seq[0, 1:])
    assert torch.equal(dense_mask(batch)[0, 0], torch.ones(9, 9).tril().bool())


def test_build_batch_rejects_bad_input():
    seq = torch.zeros(2, 8, dtype=torch.long)
    with pytest.raises(ValueError, match="block_size"):
        build_batch(seq, "sbd", mask_token_id=3, block_size=0)
    with pytest.raises(ValueError, match="objective"):
        build_batch(seq, "mdm")
    with pytest.raises(ValueError, match="mask_token_id"):
        build_batch(seq, "sbd", block_size=4)


def test_mask_token_reuses_reserved_token_then_spare_row_then_resizes():
    tok = char_tokenizer()
    llama = tiny_model("llama", len(tok))
    assert setup_mask_token(tok, llama) == tok.convert_tokens_to_ids("<|reserved_special_token_0|>")
    assert mask_token_id(llama) == 3

    plain = char_tokenizer(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"])
    qwen = tiny_model("qwen3", len(plain) + 8)  # spare embedding rows, as in Qwen-3
    token_id = setup_mask_token(plain, qwen)
    assert plain.convert_ids_to_tokens(token_id) == NEW_MASK_TOKEN
    assert qwen.get_input_embeddings().weight.shape[0] == len(plain) + 7  # nothing resized

    full_tok = char_tokenizer(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"])
    full = tiny_model("llama", len(full_tok))
    with pytest.raises(ValueError, match=r"config: finetune\.allow_resize: true"):  # the key that exists
        setup_mask_token(full_tok, full)
    token_id = setup_mask_token(full_tok, full, allow_resize=True)
    assert full.get_input_embeddings().weight.shape[0] == token_id + 1


def test_mask_token_survives_save_and_load(tmp_path):
    tok = char_tokenizer()
    model = tiny_model("qwen3", len(tok))
    setup_mask_token(tok, model)
    model.save_pretrained(tmp_path)
    from transformers import AutoModelForCausalLM

    assert mask_token_id(AutoModelForCausalLM.from_pretrained(tmp_path)) == 3
    with pytest.raises(ValueError, match="sbd_mask_token_id"):
        mask_token_id(tiny_model("llama", len(tok)))
