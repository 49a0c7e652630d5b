"""Choosing, recording and finding the SBD mask token.

The paper only says "a special mask token m". Our reading, in order of preference:
1. the tokenizer's own ``mask_token`` if it defines one;
2. an unused reserved special token (Llama-3.1: ``<|reserved_special_token_0|>`` and up; the lowest-numbered one that
   exists is taken), so no embedding row changes meaning and nothing is resized;
3. a new token ``<|sbd_mask|>`` added to the tokenizer. When the embedding matrix already has spare rows beyond the
   tokenizer (Qwen-3 pads its matrix past its vocabulary) the new id lands in a spare row and nothing is resized;
   otherwise the embeddings are resized, which must be allowed explicitly (``allow_resize``).
The chosen id is stored as ``sbd_mask_token_id`` in the model config, so it is saved with every checkpoint and the
decoder finds it with :func:`mask_token_id`.
"""

from __future__ import annotations

import re

from .errors import UserError

NEW_MASK_TOKEN = "<|sbd_mask|>"
CONFIG_KEY = "sbd_mask_token_id"
_RESERVED = re.compile(r"^<\|reserved_special_token_(\d+)\|>$")


def reserved_token(tokenizer) -> str | None:
    """The lowest-numbered ``<|reserved_special_token_N|>`` in the vocabulary, or None."""
    found = [(int(m.group(1)), tok) for tok in tokenizer.get_vocab() if (m := _RESERVED.match(tok))]
    return min(found)[1] if found else None


def setup_mask_token(tokenizer, model, allow_resize: bool = False) -> int:
    """Pick the mask token for ``model`` (see module doc), record it in ``model.config`` and return its id."""
    existing = getattr(model.config, CONFIG_KEY, None)
    if existing is not None:
        return int(existing)
    token = tokenizer.mask_token or reserved_token(tokenizer)
    if token is None:
        token_id = _add_new_token(tokenizer, model, allow_resize)
    else:
        token_id = tokenizer.convert_tokens_to_ids(token)
    setattr(model.config, CONFIG_KEY, int(token_id))
    return int(token_id)


def check_mask_token(tokenizer, model_config: dict, allow_resize: bool = False, where: str = "") -> None:
    """Before loading the model (``model_config``: its ``config.json``; ``where``: the checkpoint, for the message):
    UserError when :func:`setup_mask_token` would have to resize the embeddings and ``allow_resize`` is off."""
    if model_config.get(CONFIG_KEY) is None and not (tokenizer.mask_token or reserved_token(tokenizer)):
        _check_room(tokenizer, model_config.get("vocab_size", len(tokenizer)), allow_resize, where)


def _check_room(tokenizer, rows: int, allow_resize: bool, where: str = "") -> None:
    if len(tokenizer) >= rows and not allow_resize:
        raise UserError(
            f"{where + ': ' if where else ''}the tokenizer has no mask token and no unused reserved special token, and "
            f"its {len(tokenizer)} tokens fill all {rows} embedding rows; pass allow_resize=True (config: "
            f"finetune.allow_resize: true) to add {NEW_MASK_TOKEN} and resize the embeddings"
        )


def _add_new_token(tokenizer, model, allow_resize: bool) -> int:
    rows = model.get_input_embeddings().weight.shape[0]
    _check_room(tokenizer, rows, allow_resize)
    tokenizer.add_special_tokens({"additional_special_tokens": [NEW_MASK_TOKEN]})
    token_id = tokenizer.convert_tokens_to_ids(NEW_MASK_TOKEN)
    if token_id >= rows:
        model.resize_token_embeddings(len(tokenizer))
    return token_id


def mask_token_id(model, required: bool = True) -> int | None:
    """The mask token id recorded in ``model.config`` by :func:`setup_mask_token`; if absent, a clear error (or None
    when not ``required``)."""
    value = getattr(model.config, CONFIG_KEY, None)
    if value is None:
        if not required:
            return None
        raise ValueError(
            f"model config has no {CONFIG_KEY}: this checkpoint was not prepared for SBD (run setup_mask_token before "
            "training, or decode it in NTP mode)"
        )
    return int(value)
