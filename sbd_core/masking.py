"""The SBD training layout: doubled input, labels, position ids and the four-quadrant attention mask.

A training row of ``N + 1`` tokens becomes a model input of length ``2N``: the clean sequence ``x[:-1]`` followed by a noised
copy in which each token is replaced by the mask token with probability ``eta ~ U(0, 1)`` (one rate per row, i.i.d. per
token, as in the paper). Both halves share position ids. Labels are the shifted next tokens on the clean half (NTP) and the
unshifted clean tokens at masked positions of the noised half (MATP); every other label is ``IGNORE_INDEX``.

Shifted MATP labels (training option ``matp_shift``, a departure from the paper, off by default): the noised token at
``j`` predicts the masked token at ``j + 1`` of its own block instead of the one at ``j``, as the clean half predicts
the next token; a block's first token is then the clean half's NTP target alone (the decoder reads it from the NTP
logit of the token before the block). Every noised position is a query in the noised block either way, so nothing
it may not see enters: the masked token it predicts is a mask in its input. ``matp_shift: revealed`` moves a label
only where the token before it is revealed (or is the token before the block); a mask after a mask keeps its own label,
as in the paper, so a mask query never predicts the token after it.

Attention (the paper's mask), with ``n = N`` and noised position ``j`` in block ``j // k``:
  clean -> clean   causal;
  noised -> clean  only clean tokens of strictly earlier blocks;
  noised -> noised bidirectional inside the same block;
  clean -> noised  never.

Packing: ``doc_ids`` (one id per token, ``-1`` = padding) restricts every quadrant to tokens of the same document, so
packed documents never see each other. Blocks keep tiling the row from position 0; a block that straddles a document
boundary is then, for the later document, a shorter block starting at an arbitrary offset, which is also what inference
sees (prompts of any length), so no special alignment is needed. Position ids restart at 0 for each document.

Dropping empty blocks (:func:`drop_empty_segments`, exact; training option ``drop_empty_blocks``): a noised token is
only ever attended to by noised tokens of its own block and document, so a (block, document) segment of the noised half that holds no MATP target influences no loss
term. Such segments are left out: the layout becomes ``[clean N | kept noised tokens M]`` with ``M <= N``, each kept
noised token carrying the clean-half index it copies (``noised_index``), hence its position, document and block. Loss and
gradients equal the full layout's; the step gets cheaper when the loss skips prompts or a block drew no mask.

FlexAttention takes the layout only at a length that is a multiple of its 128-token block (:func:`align_length`, done by
:func:`sbd_core.objective.model_inputs`): padding tokens appended at the end of the row see only padding, and no real
token sees them, so the loss is unchanged. Why: a partial last block can be misread by the compiled kernel (the
measurement: docs/training.md); whole blocks leave no tail to misread, on any device.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch.nn.attention.flex_attention import create_block_mask

from .train_config import SHIFT_REVEALED

IGNORE_INDEX = -100
FLEX_BLOCK = 128  # FlexAttention's block size: the layout length it is given is a multiple of this


@dataclass
class SBDBatch:
    """Model inputs for one SBD (or NTP) training step."""

    input_ids: torch.Tensor  # [B, 2N] (sbd) or [B, N] (ntp)
    position_ids: torch.Tensor  # same shape
    labels: torch.Tensor  # same shape, IGNORE_INDEX where no loss
    doc_ids: torch.Tensor  # [B, N] document id of each original position, -1 = padding
    block_size: int  # k (0 for the ntp objective)
    objective: str  # layout: "sbd" or "ntp"
    noised_index: torch.Tensor | None = None  # [B, L - N] clean-half index of each noised token (-1 = padding); None:
    # the full layout, noised token j copies clean token j

    @property
    def half(self) -> int:
        """N, the length of the clean half."""
        return self.doc_ids.shape[1]

    def to(self, device) -> "SBDBatch":
        """Move every tensor to ``device``."""
        moved = {k: (v.to(device) if torch.is_tensor(v) else v) for k, v in self.__dict__.items()}
        return SBDBatch(**moved)


def positions_within_documents(doc_ids: torch.Tensor) -> torch.Tensor:
    """Position ids that restart at 0 at every document start (``doc_ids`` [B, N])."""
    n = doc_ids.shape[1]
    idx = torch.arange(n, device=doc_ids.device).expand_as(doc_ids)
    starts = torch.ones_like(doc_ids, dtype=torch.bool)
    starts[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    start_idx = torch.where(starts, idx, torch.zeros_like(idx)).cummax(dim=1).values
    return idx - start_idx


def ntp_labels(sequence: torch.Tensor, doc_ids: torch.Tensor, loss_mask: torch.Tensor | None) -> torch.Tensor:
    """Shifted next-token labels ``sequence[:, 1:]``, ignored across document boundaries, on padding and off ``loss_mask``."""
    labels = sequence[:, 1:].clone()
    keep = (doc_ids[:, 1:] == doc_ids[:, :-1]) & (doc_ids[:, 1:] >= 0)
    if loss_mask is not None:
        keep &= loss_mask[:, 1:].bool()
    return labels.masked_fill(~keep, IGNORE_INDEX)


def block_end_after(lengths, block_size: int):
    """For rows of ``lengths`` tokens (an int or a tensor), the end (exclusive) of the block of ``block_size`` that
    holds each row's last token: the sequence width a row needs for :func:`fill_past_end` is this plus one (the clean
    half drops the last)."""
    return ((lengths - 1) // block_size + 1) * block_size


def fill_past_end(sequence: torch.Tensor, doc_ids: torch.Tensor, block_size: int,
                  eos_token_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """End-of-text after the end (training option ``matp_past_end``, a departure from the paper, off by default).

    At inference a block that holds the end of an answer has masks after it, up to the block's end, and its queries see
    them; here those positions are padding, which no query sees, so a mask query never learns what follows an end (the
    measurement: docs/claim-study.md, lever E). This fills them: in a row of one document ending with ``eos_token_id``,
    every position after that token up to the end of its block (:func:`block_end_after`; blocks tile the row from 0)
    becomes ``eos_token_id`` of the same document. Returns the new ``sequence`` and ``doc_ids`` and the filled positions
    ``fill`` [B, W]; the caller keeps NTP labels off them (an NTP arm or mode never reads past an end) and lets MATP
    label them. Rows cut before their end-of-text token, and the width left in the row, bound the fill.
    """
    if (doc_ids.amax(dim=1) > 0).any():
        raise ValueError("matp_past_end fills the block after a row's single document; packed rows hold several")
    width = sequence.shape[1]
    lengths = (doc_ids >= 0).sum(dim=1)
    last = sequence.gather(1, (lengths - 1).clamp(min=0)[:, None])[:, 0]
    ends = torch.where((lengths > 0) & (last == eos_token_id), block_end_after(lengths, block_size), lengths)
    idx = torch.arange(width, device=sequence.device)[None, :]
    fill = (idx >= lengths[:, None]) & (idx < ends[:, None])
    return sequence.masked_fill(fill, eos_token_id), doc_ids.masked_fill(fill, 0), fill


def build_batch(
    sequence: torch.Tensor,
    objective: str,
    mask_token_id: int | None = None,
    block_size: int = 0,
    doc_ids: torch.Tensor | None = None,
    loss_mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    matp_loss_mask: torch.Tensor | None = None,
    shift: bool | str = False,
) -> SBDBatch:
    """Build one training batch from token rows ``sequence`` [B, N+1].

    ``objective`` is the layout: ``"sbd"`` (doubled) or ``"ntp"`` (plain causal LM on the same code path). ``doc_ids``
    [B, N+1] marks packed documents (``-1`` = padding); ``loss_mask`` [B, N+1] marks tokens that may be targets (e.g. to
    exclude prompts); ``matp_loss_mask`` (default: ``loss_mask``) does the same for MATP targets alone. ``generator``
    drives the masking-rate and token-mask draws. :func:`drop_empty_segments` then leaves out noised segments without
    a MATP target (exact). ``shift`` puts each MATP label on the noised position before its token; ``"revealed"`` only
    where that position is not a mask (module doc).
    """
    if sequence.dim() != 2 or sequence.shape[1] < 2:
        raise ValueError(f"sequence must be [batch, N+1] with N >= 1, got shape {tuple(sequence.shape)}")
    if objective not in ("sbd", "ntp"):
        raise ValueError(f"objective must be 'sbd' or 'ntp', got {objective!r}")
    if doc_ids is None:
        doc_ids = torch.zeros_like(sequence)
    if doc_ids.shape != sequence.shape:
        raise ValueError(f"doc_ids shape {tuple(doc_ids.shape)} differs from sequence shape {tuple(sequence.shape)}")
    clean, clean_docs = sequence[:, :-1], doc_ids[:, :-1]
    positions = positions_within_documents(clean_docs)
    labels = ntp_labels(sequence, doc_ids, loss_mask)
    if objective == "ntp":
        return SBDBatch(clean, positions, labels, clean_docs, 0, "ntp")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1 for the sbd objective, got {block_size}")
    if mask_token_id is None:
        raise ValueError("the sbd objective needs mask_token_id")
    matp_mask = loss_mask if matp_loss_mask is None else matp_loss_mask
    noised, matp_labels = noise_copy(clean, clean_docs, mask_token_id, generator, matp_mask)
    if shift:
        masked = noised.eq(mask_token_id) if shift == SHIFT_REVEALED else None
        matp_labels = shift_to_previous(matp_labels, clean_docs, block_size, masked)
    return SBDBatch(
        input_ids=torch.cat([clean, noised], dim=1),
        position_ids=torch.cat([positions, positions], dim=1),
        labels=torch.cat([labels, matp_labels], dim=1),
        doc_ids=clean_docs,
        block_size=block_size,
        objective="sbd",
    )


def noise_copy(clean, clean_docs, mask_token_id, generator=None, loss_mask=None):
    """Mask each non-padding token with a per-row rate eta ~ U(0,1); return (noised ids, labels at masked positions)."""
    bsz, n = clean.shape
    eta = torch.rand(bsz, 1, generator=generator, device=clean.device)
    masked = (torch.rand(bsz, n, generator=generator, device=clean.device) < eta) & (clean_docs >= 0)
    noised = clean.masked_fill(masked, mask_token_id)
    target = masked if loss_mask is None else masked & loss_mask[:, :-1].bool()
    return noised, clean.masked_fill(~target, IGNORE_INDEX)


def shift_to_previous(matp_labels: torch.Tensor, clean_docs: torch.Tensor, block_size: int,
                      masked: torch.Tensor | None = None) -> torch.Tensor:
    """Each MATP label [B, N] moved one position left, onto the token before it in the same block and document; labels
    on a block's (or a document's) first token are dropped: the clean half's NTP label already has that target.
    ``masked`` [B, N] (the noised half's mask positions; ``matp_shift: revealed``): a label whose token before it is a
    mask stays where it is. No position gets two labels: a moved label lands on a revealed token, which has none."""
    shifted = torch.full_like(matp_labels, IGNORE_INDEX)
    if matp_labels.shape[1] < 2:
        return shifted
    idx = torch.arange(1, matp_labels.shape[1], device=matp_labels.device)
    same_segment = (idx % block_size != 0) & (clean_docs[:, 1:] == clean_docs[:, :-1])
    after_mask = torch.zeros_like(same_segment) if masked is None else same_segment & masked[:, :-1]
    shifted[:, :-1] = matp_labels[:, 1:].masked_fill(~same_segment | after_mask, IGNORE_INDEX)
    stays = after_mask & matp_labels[:, 1:].ne(IGNORE_INDEX)  # (an unmasked token may hold its successor's label)
    shifted[:, 1:] = torch.where(stays, matp_labels[:, 1:], shifted[:, 1:])
    return shifted


def kept_noised_index(matp_labels: torch.Tensor, clean_docs: torch.Tensor, block_size: int) -> torch.Tensor:
    """Clean-half indices [B, M] of the noised tokens whose (block, document) segment holds a MATP target, in order.

    Rows with fewer kept tokens than the widest row are filled with -1; M is 0 when no row has a target.
    """
    n = clean_docs.shape[1]
    idx = torch.arange(n, device=clean_docs.device).expand_as(clean_docs)
    starts = idx % block_size == 0
    starts[:, 1:] |= clean_docs[:, 1:] != clean_docs[:, :-1]
    segment = starts.long().cumsum(1) - 1
    targets = torch.zeros_like(segment).scatter_add_(1, segment, (matp_labels != IGNORE_INDEX).long())
    keep = (targets.gather(1, segment) > 0) & (clean_docs >= 0)
    width = int(keep.sum(1).max())
    order = torch.sort((~keep).to(torch.uint8), dim=1, stable=True).indices[:, :width]  # kept first, in order
    return order.masked_fill(~keep.gather(1, order), -1)


def gather_noised(values: torch.Tensor, index: torch.Tensor, fill: int) -> torch.Tensor:
    """``values`` [B, N] taken at ``index`` [B, M]; ``fill`` where the index is -1 (padding)."""
    return values.gather(1, index.clamp(min=0)).masked_fill(index < 0, fill)


def drop_empty_segments(batch: SBDBatch) -> SBDBatch:
    """``batch`` (the full sbd layout) without the noised segments that hold no MATP target: same loss and gradients.

    Noised padding gets input id 0 and position 0 (nothing but itself attends to it)."""
    if batch.objective != "sbd" or batch.noised_index is not None:
        raise ValueError("drop_empty_segments needs a full sbd layout (objective 'sbd', noised_index None)")
    n = batch.half
    index = kept_noised_index(batch.labels[:, n:], batch.doc_ids, batch.block_size)
    kept = {name: torch.cat([value[:, :n], gather_noised(value[:, n:], index, fill)], dim=1)
            for name, value, fill in (("input_ids", batch.input_ids, 0), ("position_ids", batch.position_ids, 0),
                                      ("labels", batch.labels, IGNORE_INDEX))}
    return replace(batch, **kept, noised_index=index)


def align_length(batch: SBDBatch, multiple: int = FLEX_BLOCK) -> SBDBatch:
    """``batch`` padded at the end of each row to a length that is a multiple of ``multiple``: same loss and gradients.

    sbd layouts grow their noised half by padding entries (``noised_index`` -1: input id 0, position 0, no label),
    which attend only to padding; a full layout is first written in its ``noised_index`` form (noised token j copies
    clean token j), which has the same mask. ntp layouts grow the row by padding tokens (document -1)."""
    length = batch.input_ids.shape[1]
    extra = -length % multiple
    if extra == 0:
        return batch
    grow = lambda value, fill: torch.nn.functional.pad(value, (0, extra), value=fill)  # noqa: E731
    padded = {"input_ids": grow(batch.input_ids, 0), "position_ids": grow(batch.position_ids, 0),
              "labels": grow(batch.labels, IGNORE_INDEX)}
    if batch.objective == "ntp":
        return replace(batch, **padded, doc_ids=grow(batch.doc_ids, -1))
    index = batch.noised_index
    if index is None:
        index = torch.arange(batch.half, device=batch.doc_ids.device).expand_as(batch.doc_ids)
    return replace(batch, **padded, noised_index=grow(index, -1))


def layout_sources(batch: SBDBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token of the sbd layout: the clean-half index it stands for and its document ([B, L] each; -1 = padding)."""
    docs = batch.doc_ids
    clean_index = torch.arange(batch.half, device=docs.device).expand_as(docs)
    index = batch.noised_index if batch.noised_index is not None else clean_index
    sources = torch.cat([clean_index, index], dim=1)
    return sources, torch.cat([docs, gather_noised(docs, index, -1)], dim=1)


def sbd_allowed(q_noised, q_src, kv_noised, kv_src, block_size: int) -> torch.Tensor:
    """Which (query, key) pairs of the sbd layout may attend, from each token's half and clean-half index (broadcast).

    Documents are not handled here."""
    clean_clean = ~q_noised & ~kv_noised & (kv_src <= q_src)
    same_block = (q_src // block_size) == (kv_src // block_size)
    noised_noised = q_noised & kv_noised & same_block
    noised_clean = q_noised & ~kv_noised & ((q_src // block_size) > (kv_src // block_size))
    return clean_clean | noised_noised | noised_clean


def dense_mask(batch: SBDBatch) -> torch.Tensor:
    """Boolean attention mask [B, 1, L, L] (True = may attend) for SDPA; see :func:`additive_mask` for eager."""
    n, device = batch.half, batch.doc_ids.device
    if batch.objective == "ntp":
        idx = torch.arange(n, device=device)
        allowed, docs = (idx[None, :] <= idx[:, None])[None], batch.doc_ids
    else:
        sources, docs = layout_sources(batch)
        noised = torch.arange(sources.shape[1], device=device) >= n
        allowed = sbd_allowed(noised[None, :, None], sources[:, :, None], noised[None, None, :], sources[:, None, :],
                              batch.block_size)
    allowed = allowed & (docs[:, :, None] == docs[:, None, :])
    eye = torch.eye(allowed.shape[-1], dtype=torch.bool, device=device)[None]
    return (allowed | eye)[:, None]  # every query keeps itself: no fully masked row (padding)


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Turn a boolean mask into the additive float mask eager attention needs (a bool mask is silently wrong there)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def flex_block_mask(batch: SBDBatch):
    """FlexAttention ``BlockMask`` with the same semantics as :func:`dense_mask`, block-sparse (no dense L x L tensor).

    ``batch`` must have a length that is a multiple of :data:`FLEX_BLOCK` (:func:`align_length`; module docstring)."""
    length = batch.input_ids.shape[1]
    if length % FLEX_BLOCK:
        raise ValueError(f"FlexAttention needs a layout of a multiple of {FLEX_BLOCK} tokens, got {length}: "
                         "pass the batch through masking.align_length first")
    n, k, objective = batch.half, batch.block_size, batch.objective
    if objective == "ntp":
        docs = batch.doc_ids
    else:
        sources, docs = layout_sources(batch)

    def mask_mod(b, h, q_idx, kv_idx):
        if objective == "ntp":
            allowed = kv_idx <= q_idx
        else:
            allowed = sbd_allowed(q_idx >= n, sources[b, q_idx], kv_idx >= n, sources[b, kv_idx], k)
        return (allowed & (docs[b, q_idx] == docs[b, kv_idx])) | (q_idx == kv_idx)

    # compiled, the mask is built block by block; uncompiled, torch materialises every (query, key) pair, which at the
    # doubled 32k row (65,536^2) needs tens of GB. On CPU (tests, short rows) the uncompiled path avoids a compile.
    return create_block_mask(mask_mod, B=docs.shape[0], H=None, Q_LEN=length, KV_LEN=length, device=docs.device,
                             _compile=docs.device.type == "cuda")


def backend_mask(model, allowed: torch.Tensor) -> torch.Tensor:
    """Express a boolean mask [B, 1, Q, KV] the way ``model``'s attention backend needs it (SDPA: bool, eager: additive)."""
    impl = model.config._attn_implementation
    if impl == "sdpa":
        return allowed
    if impl == "eager":
        return additive_mask(allowed, model.dtype)
    raise ValueError(
        f"attention implementation {impl!r} cannot take a dense custom mask; use 'sdpa' or 'eager' "
        "(or the FlexAttention BlockMask from flex_block_mask for training)"
    )
