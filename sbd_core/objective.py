"""The SBD and NTP training losses on any Hugging Face causal LM (SBD_SPEC §1.5).

One forward over the batch layout of :mod:`sbd_core.masking`; one pooled mean cross-entropy over all NTP and MATP labels
(the paper passes a single label tensor, so both terms have equal per-token weight and no extra hyper-parameter). The two
parts are also returned separately for logging.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .masking import IGNORE_INDEX, SBDBatch, backend_mask, dense_mask, flex_block_mask


@dataclass
class LossOutput:
    """Pooled loss (for backward) and its NTP / MATP parts (detached means, NaN when a part has no label)."""

    loss: torch.Tensor
    ntp_loss: float
    matp_loss: float
    n_ntp: int
    n_matp: int


def attention_mask_for(model, batch: SBDBatch):
    """The mask in the form the model's attention backend takes: a block-sparse BlockMask for flex, dense otherwise."""
    if model.config._attn_implementation == "flex_attention":
        return flex_block_mask(batch)
    return backend_mask(model, dense_mask(batch))


def compute_loss(model, batch: SBDBatch) -> LossOutput:
    """Forward ``batch`` through ``model`` and return the pooled cross-entropy with its NTP and MATP parts."""
    out = model(
        input_ids=batch.input_ids,
        position_ids=batch.position_ids,
        attention_mask=attention_mask_for(model, batch),
        use_cache=False,
    )
    logits, labels = out.logits.float(), batch.labels
    ce = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="none")
    ce = ce.view(labels.shape)
    valid = labels != IGNORE_INDEX
    n = batch.half
    ntp_sum, matp_sum = ce[:, :n].sum(), ce[:, n:].sum()
    n_ntp, n_matp = int(valid[:, :n].sum()), int(valid[:, n:].sum())
    loss = (ntp_sum + matp_sum) / max(n_ntp + n_matp, 1)
    return LossOutput(
        loss=loss,
        ntp_loss=(ntp_sum.item() / n_ntp) if n_ntp else float("nan"),
        matp_loss=(matp_sum.item() / n_matp) if n_matp else float("nan"),
        n_ntp=n_ntp,
        n_matp=n_matp,
    )
