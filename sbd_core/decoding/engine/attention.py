"""Attention over the engine's cache for a ragged batch: every token of a forward carries its own cache row, position
and the last key position it may see, so a row feeds only its own tokens (no ``[rows, 2k]`` rectangle of inputs).

The cache of each layer is ``[rows + 1, max_len, kv_heads, head_dim]``: one row per slot and a scratch row that takes
the keys of padding tokens (a compiled forward pads its tokens to a bucket; padding never touches a slot's row). A
token at position ``p`` of row ``r`` with limit ``l`` attends to the keys of row ``r`` at positions ``0..l``: ``l = p``
for causal tokens (prompts, a re-fed block, NTP), the block's last position for the tokens of a block.

Two ways to compute it, the same numbers (``tests/test_engine_compile.py`` checks them against each other and the
reference decoder):

* :class:`FlexPlan` (CUDA, compiled): FlexAttention over the whole cache flattened to one sequence, with a
  ``BlockMask`` built in the graph from the tokens' rows and limits: blocks of 16 queries by 128 keys, each query block
  visiting only the key blocks of its own rows up to their limits. Expected kernel: inductor's Triton FlexAttention
  kernel (``BACKEND: TRITON``, tiles of 16 x 64). Why this one: the mask is neither causal nor a padding
  mask (a block sees itself bidirectionally, rows have their own lengths), so SDPA's flash and memory-efficient kernels
  cannot take it; SDPA with a boolean mask and ``enable_gqa`` falls back to the math kernel, which repeats K/V per
  query head and materialises fp32 scores. Flex takes the mask as a function plus a block list, reads K/V once per
  KV head (GQA without expansion) and skips the other rows' blocks. Not compiled (eager, or the CPU), flex runs
  torch's unfused reference, materialising every (query, key) pair: tests only.
* :class:`DensePlan` (the CPU; eager anywhere): SDPA over a rectangle of query cells, one rectangle row per cache row
  that has tokens, as wide as the widest row of the forward, against that row's keys ``[0, span)`` with a boolean mask
  from the limits. Only attention sees the rectangle: the projections, the MLP and the output layer run on the ragged
  tokens. Its empty cells (a row feeding ``k`` tokens in a forward where another feeds ``2k``) are attention-only
  padding, counted as ``attention_cells`` in :class:`sbd_core.decoding.engine.decoder.EngineStats`. torch 2.13's compiled CPU
  FlexAttention cannot take a mask built inside the graph ("no choices"), nor dynamic shapes (a C++ compile error),
  so the CPU compiles this plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, flex_attention

Q_BLOCK, KV_BLOCK = 16, 128  # the flex block mask's tiles: 16 queries (a block of 16 is one row's) by 128 keys
FLEX_KERNEL = {"BACKEND": "TRITON", "BLOCK_M": Q_BLOCK, "BLOCK_N": 64}  # the flex kernel (not flex-decoding), its tiles


@dataclass
class Ragged:
    """One forward's tokens, flat ``[T]``: id, cache row (``slots``), position, last visible key (``limits``), and
    the cell ``(rows, columns)`` of the dense rectangle it sits in."""

    ids: torch.Tensor
    slots: torch.Tensor
    positions: torch.Tensor
    limits: torch.Tensor
    rows: torch.Tensor
    columns: torch.Tensor


class DensePlan:
    """SDPA per rectangle row. ``key_rows`` [R]: the cache row of each rectangle row (None: rectangle row ``r`` is
    cache row ``r``, all of them); ``width`` [W] and ``span`` [K] carry the rectangle's width and the keys' span in
    their lengths (shapes that a compiled step takes as dynamic sizes)."""

    def __init__(self, tokens: Ragged, key_rows: torch.Tensor | None, n_rows: int, width: torch.Tensor,
                 span: torch.Tensor):
        self.key_rows, self.n_rows, self.width, self.span = key_rows, n_rows, width.shape[0], span.shape[0]
        self.cells = tokens.rows * self.width + tokens.columns
        limit = torch.zeros(n_rows * self.width, dtype=torch.long, device=self.cells.device)  # empty cells see key 0
        limit.index_copy_(0, self.cells, tokens.limits)
        self.mask = (span[None, None] <= limit.view(n_rows, self.width, 1))[:, None]  # [R, 1, W, span]

    def __call__(self, q, keys, values, scale):
        """``q`` [T, heads, D] against the cache ``keys``/``values`` [rows + 1, max_len, kv_heads, D]."""
        if self.key_rows is None:
            keys, values = keys[:self.n_rows, :self.span], values[:self.n_rows, :self.span]
        else:
            keys, values = keys[self.key_rows, :self.span], values[self.key_rows, :self.span]
        cells = q.new_zeros(self.n_rows * self.width, *q.shape[1:]).index_copy_(0, self.cells, q)
        cells = cells.view(self.n_rows, self.width, *q.shape[1:]).transpose(1, 2)
        out = F.scaled_dot_product_attention(cells, keys.transpose(1, 2), values.transpose(1, 2), attn_mask=self.mask,
                                             scale=scale, enable_gqa=True)
        return out.transpose(1, 2).reshape(-1, *q.shape[1:])[self.cells]


class FlexPlan:
    """FlexAttention over the flattened cache; the block mask is built from the tokens (no host sync)."""

    def __init__(self, tokens: Ragged, max_len: int, cache_rows: int):
        slots, limits = tokens.slots, tokens.limits
        n_tokens, n_keys = slots.shape[0], cache_rows * max_len
        blocks = torch.arange(n_keys // KV_BLOCK, device=slots.device)
        per_row = max_len // KV_BLOCK
        needed = (blocks // per_row == slots[:, None]) & ((blocks % per_row) * KV_BLOCK <= limits[:, None])
        q_blocks = n_tokens // Q_BLOCK + 1  # >= 2 for a compiled forward (>= 16 tokens): no size-1 specialisation
        needed = F.pad(needed, (0, 0, 0, q_blocks * Q_BLOCK - n_tokens)).view(q_blocks, Q_BLOCK, -1).any(1)
        count = needed.sum(-1, dtype=torch.int32)
        order = torch.argsort((~needed).to(torch.int8), dim=-1, stable=True).to(torch.int32)  # needed blocks first

        def visible(b, h, q_idx, kv_idx):
            return (slots[q_idx] == kv_idx // max_len) & (kv_idx % max_len <= limits[q_idx])

        self.block_mask = BlockMask.from_kv_blocks(count[None, None], order[None, None], BLOCK_SIZE=(Q_BLOCK, KV_BLOCK),
                                                   mask_mod=visible, seq_lengths=(n_tokens, n_keys),
                                                   compute_q_blocks=False)

    def __call__(self, q, keys, values, scale):
        shape = (1, -1, *keys.shape[2:])
        out = flex_attention(q[None].transpose(1, 2), keys.view(shape).transpose(1, 2),
                             values.view(shape).transpose(1, 2), block_mask=self.block_mask, scale=scale,
                             enable_gqa=True, kernel_options=FLEX_KERNEL)
        return out[0].transpose(0, 1)
