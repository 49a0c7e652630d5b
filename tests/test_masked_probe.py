"""scripts/masked_probe.py: the computed-token spans, the probe's layout, and that a masked block's predictions do not
see the block's own tokens (a leak would make the probe's masked accuracy meaningless)."""

import importlib.util
from pathlib import Path

import torch

from sbd_core.mask_token import mask_token_id
from sbd_core.masking import backend_mask, dense_mask

_SPEC = importlib.util.spec_from_file_location("masked_probe", Path(__file__).parents[1] / "scripts" / "masked_probe.py")
probe = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(probe)


def test_computed_chars_are_the_results_digits():
    target = " 347+86: 7+6=13, 4+8+1=13, 3+0+1=4. So 433.\n#### 433"
    chars = probe.computed_chars("math", target)
    assert "".join(target[i] for i in sorted(chars)) == "13" + "13" + "4" + "433" + "433"
    assert probe.computed_chars("math_long", target) == chars
    direct = " 61+71=132. 132-84=48.\n#### 48"
    assert "".join(direct[i] for i in sorted(probe.computed_chars("math_direct", direct))) == "132" + "48" + "48"
    assert probe.computed_chars("code_chain", "    return x * 3\n") == set()
    for body, computed in (("    return x * 25 - 10\n", "2510"), ("    return (8 - x * 4) % 5\n", "84"),
                           ("    return (-5 - x) // 5\n", "-5"), ("    return x + 5\n", "5")):
        chars = probe.computed_chars("code_affine", body)
        assert "".join(body[i] for i in sorted(chars)) == computed, body


def test_layout_starts_a_block_at_the_first_target_token_and_masks_the_target_only():
    ids, target = [0, 5, 6, 7, 8, 9, 10, 11, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1]
    batch, pad = probe.probe_layout(ids, target, block=4, mask_id=99, pad_id=2)
    n = batch.half
    assert pad == 1 and n == len(ids) - 1 + pad and (3 + pad) % 4 == 0
    assert batch.input_ids[0, :n].tolist() == [2] + ids[:-1]
    assert batch.input_ids[0, n:].tolist() == [2, 0, 5, 6, 99, 99, 99, 99, 99]
    assert batch.doc_ids[0].tolist() == [-1] + [0] * 8 and batch.position_ids[0, 1:n].tolist() == list(range(8))


def test_past_end_runs_the_row_on_with_masks_to_the_end_of_the_block_holding_its_end_of_text():
    """As the decoder's last block: the end of text and every position after it in its block are masks of the
    document; when the end of text starts a block, the whole block follows it."""
    ids, target = [0, 5, 6, 7, 8, 9, 10, 11, 1], [0, 0, 0, 1, 1, 1, 1, 1, 1]  # response 7..11, end of text at 8
    batch, pad = probe.probe_layout(ids, target, block=4, mask_id=99, pad_id=2, end_of_text=1)
    n = batch.half
    assert pad == 1 and n == 12 and n % 4 == 0  # blocks: [pad 0 5 6] [7 8 9 10] [11 <end> <fill> <fill>]
    assert batch.input_ids[0, :n].tolist() == [2, 0, 5, 6, 7, 8, 9, 10, 11, 1, 1, 1]
    assert batch.input_ids[0, n:].tolist() == [2, 0, 5, 6] + [99] * 8
    assert batch.doc_ids[0].tolist() == [-1] + [0] * 11
    ids, target = [0, 5, 6, 7, 8, 9, 10, 1], [0, 0, 0, 1, 1, 1, 1, 1]  # the end of text starts the third block
    batch, pad = probe.probe_layout(ids, target, block=4, mask_id=99, pad_id=2, end_of_text=1)
    assert pad == 1 and batch.half == 12 and batch.input_ids[0, 12:].tolist() == [2, 0, 5, 6] + [99] * 8
    assert batch.input_ids[0, :12].tolist() == [2, 0, 5, 6, 7, 8, 9, 10, 1, 1, 1, 1]


def test_a_masked_block_does_not_see_its_own_tokens(sbd_model, tokenizer):
    """Changing the tokens of one block leaves the masked logits of that block and of the blocks before it, and the
    NTP logits before it, unchanged (to float rounding); the next block's masked logits do change."""
    mask = mask_token_id(sbd_model)
    ids = [0] + tokenizer("Q: 12+34=", add_special_tokens=False)["input_ids"]
    target = tokenizer(" 46 so 46.", add_special_tokens=False)["input_ids"]
    first, block = len(ids), 4
    row, response = ids + target + [1], [0] * len(ids) + [1] * (len(target) + 1)

    def logits(tokens):
        batch, pad = probe.probe_layout(tokens, response, block, mask, tokenizer.pad_token_id)
        with torch.no_grad():
            out = sbd_model(input_ids=batch.input_ids, position_ids=batch.position_ids,
                            attention_mask=backend_mask(sbd_model, dense_mask(batch)), use_cache=False).logits[0]
        return out, batch.half, pad
    base, n, pad = logits(row)
    changed = list(row)
    for j in range(first + block, first + 2 * block):  # the target's second block
        changed[j] = tokenizer.convert_tokens_to_ids("7")
    moved, _, _ = logits(changed)
    second = slice(n + pad + first + block, n + pad + first + 2 * block)
    before = slice(n + pad + first, n + pad + first + block)
    assert torch.allclose(base[second], moved[second], atol=1e-5)
    assert torch.allclose(base[before], moved[before], atol=1e-5)
    assert torch.allclose(base[:pad + first + block], moved[:pad + first + block], atol=1e-5)
    third = slice(n + pad + first + 2 * block, n + pad + first + 3 * block)
    assert not torch.allclose(base[third], moved[third], atol=1e-3)


def test_a_shifted_model_is_read_one_token_earlier():
    n = 20  # [clean 20 | noised 20]; clean column 7 is the target
    assert probe.masked_row(n, 7, position=3, shift=False) == 27  # its own mask query
    assert probe.masked_row(n, 7, position=3, shift=True) == 26  # the noised token before it
    assert probe.masked_row(n, 7, position=0, shift=True) == 6  # a block's first token: the NTP logit before it
    # matp_shift: revealed reads the token before it only where that token is revealed
    assert probe.masked_row(n, 7, position=3, shift="revealed") == 27  # after a mask: its own mask query
    assert probe.masked_row(n, 7, position=3, shift="revealed", before_masked=False) == 26
    assert probe.masked_row(n, 7, position=0, shift="revealed") == 6


def test_a_code_answers_closing_newline_is_its_own_kind():
    body = "    return x * 25 - 10\n"
    computed = probe.computed_chars("code_affine", body)
    assert probe.token_kind(body, len(body) - 1, len(body), computed, last=True) == "end"
    assert probe.token_kind(body, len(body) - 1, len(body), computed, last=False) == "other"  # a newline inside
    digit = body.index("25")
    assert probe.token_kind(body, digit, digit + 2, computed, last=False) == "computed"
    assert probe.token_kind(body, digit, digit + 2, set(), last=False) == "other"  # code_chain computes nothing
    math = " 61+71=132.\n#### 132"  # a math answer ends in its result, which stays computed
    chars = probe.computed_chars("math_direct", math)
    assert probe.token_kind(math, len(math) - 3, len(math), chars, last=True) == "computed"
