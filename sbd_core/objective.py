"""The training losses on any Hugging Face causal LM: NTP, SBD and the paper's ablation SBD without NTP gradient.

One forward over the batch layout of :mod:`sbd_core.masking`; one pooled mean cross-entropy over all NTP and MATP labels
(the paper passes a single label tensor, so both terms have equal per-token weight and no extra hyper-parameter). The two
parts are also returned separately for logging.

Objectives (:data:`sbd_core.train_config.OBJECTIVES` maps each to its batch layout):
  ``ntp``              plain next-token prediction;
  ``sbd``              the paper's loss, NTP + MATP pooled;
  ``sbd_no_ntp_grad``  the paper's ablation "SBD without gradients on the NTP term" (its Table 2): the same layout and
                       the same loss value as ``sbd`` (so the logged curves compare), but the NTP term is detached. This is
                       the faithful reading: only the NTP *loss term* stops sending gradient; the clean half's activations
                       are not detached, so the clean tokens keep learning as the context the noised blocks attend to,
                       exactly as in one forward over the paper's doubled sequence. What the model loses is the direct
                       training signal of next-token prediction.

``matp_loss_weight`` ``w`` (default 1, the paper) scales each MATP label's cross-entropy inside the pooled mean:
``(sum CE_ntp + w * sum CE_matp) / (n_ntp + n_matp)`` (the denominator stays the label count, so a training loop may keep
turning the mean into a sum by multiplying with the count). A departure from the paper when not 1.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .masking import IGNORE_INDEX, SBDBatch, align_length, backend_mask, dense_mask, flex_block_mask


@dataclass
class LossOutput:
    """Pooled loss (for backward) and its NTP / MATP parts (detached means, NaN when a part has no label)."""

    loss: torch.Tensor
    ntp_loss: float
    matp_loss: float
    n_ntp: int
    n_matp: int


def model_inputs(model, batch: SBDBatch) -> tuple[SBDBatch, object]:
    """``(batch, mask)`` as ``model``'s attention backend takes them: for flex the batch aligned to whole FlexAttention
    blocks (:func:`sbd_core.masking.align_length`: padding that changes no loss) and its block-sparse BlockMask; for
    SDPA / eager the batch as it is and its dense mask."""
    if model.config._attn_implementation == "flex_attention":
        batch = align_length(batch)
        return batch, flex_block_mask(batch)
    return batch, backend_mask(model, dense_mask(batch))


@contextmanager
def labelled_logits_only(model, keep: torch.Tensor):
    """Within the block, ``model``'s output layer sees only the hidden states at the flat positions ``keep`` (its
    logits come out as ``[1, len(keep), vocab]``): no logits for unlabelled positions (prompts, the unmasked noised
    copy, padding). The loss is the same; the step is cheaper and, at the paper's 65k-token rows and 128k vocabularies,
    the logits tensor shrinks with the share of unlabelled positions. A forward pre-hook, so the module tree, the
    state dict and FSDP's sharding stay as they are."""
    head = model.get_output_embeddings()
    handle = head.register_forward_pre_hook(
        lambda module, args: (args[0].flatten(0, 1).index_select(0, keep).unsqueeze(0), *args[1:]))
    try:
        yield
    finally:
        handle.remove()


def compute_loss(model, batch: SBDBatch, ntp_gradient: bool = True, matp_loss_weight: float = 1.0) -> LossOutput:
    """Forward ``batch`` through ``model`` and return the pooled cross-entropy with its NTP and MATP parts.

    ``ntp_gradient=False`` detaches the NTP term (objective ``sbd_no_ntp_grad``); ``matp_loss_weight`` scales each MATP
    label's cross-entropy (module docstring). With the defaults this is the paper's loss. The logged parts are unweighted.
    """
    if matp_loss_weight <= 0:
        raise ValueError(f"matp_loss_weight must be > 0, got {matp_loss_weight}")
    batch, mask = model_inputs(model, batch)
    labels = batch.labels
    keep = (labels != IGNORE_INDEX).flatten().nonzero().squeeze(1)  # flat positions that carry a label
    with labelled_logits_only(model, keep):
        out = model(input_ids=batch.input_ids, position_ids=batch.position_ids, attention_mask=mask, use_cache=False)
    logits = out.logits[0].to(torch.promote_types(out.logits.dtype, torch.float32))  # at least fp32 (fp64 stays)
    ce = F.cross_entropy(logits, labels.flatten()[keep], reduction="none")
    in_ntp_half = (keep % labels.shape[1]) < batch.half
    ntp_sum, matp_sum = ce[in_ntp_half].sum(), ce[~in_ntp_half].sum()
    n_ntp, n_matp = int(in_ntp_half.sum()), int((~in_ntp_half).sum())
    ntp_term = ntp_sum if ntp_gradient else ntp_sum.detach()
    loss = (ntp_term + matp_loss_weight * matp_sum) / max(n_ntp + n_matp, 1)
    return LossOutput(
        loss=loss,
        ntp_loss=(ntp_sum.item() / n_ntp) if n_ntp else float("nan"),
        matp_loss=(matp_sum.item() / n_matp) if n_matp else float("nan"),
        n_ntp=n_ntp,
        n_matp=n_matp,
    )
