"""The engine's per-row decoding state on the device, and one forward's update of it (SBD and NTP mode).

Every row ("slot") moves on its own; each forward feeds every active slot its own step at one static width:

* SBD (width ``2k``): a slot whose last block is finished but not yet in the cache feeds ``[that block (causal) |
  its current block]``; any other slot feeds ``[its current block | padding]``. Block queries see the slot's cache
  and the whole block; causal and padding queries see the keys up to their own position. After the forward the
  re-fed block's keys are exact causal keys and the slot's cache length grows by ``k``; the block's own keys are
  overwritten by the next write at the same positions.
* NTP (width 1): the slot's last token, whose logits give the next token.

The solver, the EOS and length checks, the NFE count and the block bookkeeping all run on the device; one small
status tensor per forward goes to the host, which checks stop strings only for slots whose newly revealed tokens
could end one (:func:`token_table`), collects finished rows and refills their slots.

Stop rule (the reference decoder's, :mod:`sbd_core.decode`): a slot stops once EOS, the end of a stop string or its
room lies inside the revealed prefix of its generation; NFE counts the forwards in which the slot still had masked
positions, up to and including the one that met the stop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..solvers import exclude_tokens

EOS, LENGTH = 1, 2  # stop reasons decided on the device (stop strings are decided on the host)
STATUS = ("stopped", "reason", "keep", "nfe", "candidate", "prefix", "seen")  # columns of the status tensor


@dataclass
class Status:
    """One forward's outcome for the host: per slot the columns of :data:`STATUS`, and the key span (cached keys
    every slot will need plus the next forward's width) of the next forward."""

    rows: list[list[int]]
    need: int


def token_table(tokenizer, vocab_size: int, texts: tuple[str, ...], device) -> torch.Tensor | None:
    """[V] bool: token ids whose text could end one of the stop strings ``texts`` (None without stop strings).

    A stop string ends with its last character, so the token that completes it shows that character, or is a partial
    UTF-8 sequence (decoded alone as U+FFFD), or a SentencePiece word start standing for a space."""
    if not texts:
        return None
    last = {t[-1] for t in texts}
    space = any(c.isspace() for c in last)
    size = min(vocab_size, len(tokenizer))
    decoded = tokenizer.batch_decode([[i] for i in range(size)])
    pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
    flags = [any(c in text for c in last) or "\ufffd" in text or (space and str(piece).startswith("\u2581"))
             for text, piece in zip(decoded, pieces)]
    table = torch.zeros(vocab_size, dtype=torch.bool)
    table[:size] = torch.tensor(flags, dtype=torch.bool)
    return table.to(device)


class Slots:
    """Decoding state of ``slots`` rows (mode ``sbd`` with blocks of ``block_size``, or ``ntp``)."""

    def __init__(self, slots: int, block_size: int, capacity: int, mode: str, mask_id: int | None, eos_table,
                 stop_table, excluded: tuple[int, ...], solver, device):
        self.n, self.mode, self.mask_id = slots, mode, mask_id if mask_id is not None else 0
        self.k = block_size if mode == "sbd" else 1
        self.width = 2 * self.k if mode == "sbd" else 1
        self.eos_table, self.stop_table, self.excluded, self.solver = eos_table, stop_table, excluded, solver
        zeros = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        self.length, self.room, self.done, self.seen, self.nfe = (zeros(slots) for _ in range(5))
        self.block_len, self.last = zeros(slots), zeros(slots)
        self.active, self.pending = zeros(slots, dtype=torch.bool), zeros(slots, dtype=torch.bool)
        self.block = torch.full((slots, self.k), self.mask_id, dtype=torch.long, device=device)
        self.prev, self.masked = zeros(slots, self.k), zeros(slots, self.k, dtype=torch.bool)
        self.gen = zeros(slots, capacity)
        self.arange_k = torch.arange(self.k, device=device)
        self.arange_w = torch.arange(self.width, device=device)

    # ------------------------------------------------------------------------------------------------ host side
    def admit(self, slots: torch.Tensor, lengths: torch.Tensor, rooms: torch.Tensor, last: torch.Tensor) -> None:
        """Start rows in ``slots`` [n]: cache ``lengths`` [n] already prefilled, ``rooms`` [n] new tokens at most,
        ``last`` [n] the token NTP mode feeds first."""
        self.length[slots], self.room[slots], self.last[slots] = lengths, rooms, last
        for tensor in (self.done, self.seen, self.nfe):
            tensor[slots] = 0
        self.pending[slots], self.active[slots] = False, True
        first = rooms.clamp(max=self.k)
        self.block_len[slots] = first
        self.block[slots] = self.mask_id
        self.masked[slots] = self.arange_k[None] < first[:, None]

    def release(self, slots: list[int]) -> None:
        """Stop rows the host decided on (a stop string); their slots are free."""
        index = torch.tensor(slots, dtype=torch.long, device=self.length.device)
        self.active[index], self.length[index] = False, 0
        self.masked[index] = False

    # ------------------------------------------------------------------------------------------------ one forward
    def step(self, forward, span: int, width: int) -> torch.Tensor:
        """One forward of ``width`` tokens per slot over keys ``[0, span)`` and its update. Returns what the host
        reads: the status [S, len(STATUS)] flattened, then the key span and the width the next forward needs."""
        ids, positions, allowed, offset = self.inputs(span, width)
        hidden = forward.step(ids, positions, allowed, span)
        index = (offset[:, None] + self.arange_k[None])[..., None].expand(-1, -1, hidden.shape[-1])
        status = self.update(forward.logits(hidden.gather(1, index)))
        return torch.cat([status.flatten(), self.next_shape()])

    def inputs(self, span: int, width: int):
        """``(ids [S, W], positions [S, W], allowed [S, W, span], offset [S])`` of a forward of ``width`` tokens per
        slot (SBD: ``2k`` when a slot re-feeds its finished block, else ``k``); ``offset`` is where each slot's
        logits positions start in its fed tokens."""
        keys = torch.arange(span, device=self.length.device)[None, None]
        if self.mode == "ntp":
            positions = self.length[:, None]
            return self.last[:, None], positions, keys <= positions[:, :, None], torch.zeros_like(self.length)
        k = self.k
        if width == 2 * k:
            pending = self.pending[:, None]
            pad = torch.full_like(self.block, self.mask_id)
            ids = torch.where(pending, torch.cat([self.prev, self.block], 1), torch.cat([self.block, pad], 1))
            offset = torch.where(self.pending, k, 0)
        else:  # no slot re-feeds: the blocks alone
            ids, offset = self.block, torch.zeros_like(self.length)
        positions = self.length[:, None] + self.arange_w[None, :width]
        relative = self.arange_w[None, :width] - offset[:, None]  # index inside the current block
        in_block = (relative >= 0) & (relative < self.block_len[:, None])
        block_end = self.length + offset + self.block_len - 1  # last position of the current block
        limit = torch.where(in_block, block_end[:, None], positions)
        return ids, positions, keys <= limit[:, :, None], offset

    def update(self, logits: torch.Tensor) -> torch.Tensor:
        """Apply one forward's logits [S, k, V]: solver, bookkeeping, stop checks; returns the status tensor. Every
        state tensor is updated in place (fixed buffers, as a captured CUDA graph needs them)."""
        logits = exclude_tokens(logits, self.excluded)
        if self.mode == "ntp":
            return self._update_ntp(logits)
        return self._update_sbd(logits)

    def _update_sbd(self, logits: torch.Tensor) -> torch.Tensor:
        k, active, positions = self.k, self.active, self.arange_k[None]
        live = self.masked & active[:, None]
        reveal, tokens = self.solver(logits, live)
        block = torch.where(reveal, tokens, self.block)
        masked = live & ~reveal
        self.nfe.add_(live.any(1).long())
        self.length.add_(torch.where(self.pending & active, k, 0))
        self.pending.logical_and_(~active)
        open_ = masked & (positions < self.block_len[:, None])
        first_masked = torch.where(open_.any(1), open_.long().argmax(1), self.block_len)
        prefix = self.done + first_masked
        self.gen.scatter_(1, self.done[:, None] + positions, block)
        fresh = (positions >= (self.seen - self.done)[:, None]) & (positions < first_masked[:, None])
        status = self._stops(block, fresh, prefix, first_masked)
        stopped = status[:, 0].bool()
        complete = active & ~stopped & (first_masked == self.block_len)
        self.done.add_(torch.where(complete, self.block_len, 0))
        self.prev.copy_(torch.where(complete[:, None], block, self.prev))
        self.pending.logical_or_(complete)
        next_len = torch.where(complete, (self.room - self.done).clamp(0, k), self.block_len)
        self.block.copy_(torch.where(complete[:, None], self.mask_id, block))
        self.masked.copy_(torch.where(complete[:, None], positions < next_len[:, None], masked) & ~stopped[:, None])
        self.block_len.copy_(next_len)
        return status

    def _update_ntp(self, logits: torch.Tensor) -> torch.Tensor:
        active = self.active
        _, tokens = self.solver(logits, active[:, None])
        token = torch.where(active, tokens[:, 0], self.last)
        self.gen.scatter_(1, self.done[:, None], token[:, None])
        for counter in (self.done, self.nfe, self.length):
            counter.add_(active.long())
        self.last.copy_(token)
        return self._stops(token[:, None], active[:, None], self.done, torch.ones_like(self.done))

    def _stops(self, block, fresh, prefix, first_masked) -> torch.Tensor:
        """EOS / length stop of every slot from its newly revealed tokens ``fresh`` [S, k] of ``block``; marks stop
        string candidates; deactivates stopped slots. Returns the [S, len(STATUS)] status."""
        eos = self.eos_table[block] & fresh
        has_eos = eos.any(1)
        eos_keep = prefix - first_masked + eos.long().argmax(1) + 1  # block start + first EOS index + 1
        stopped = self.active & (has_eos | (prefix >= self.room))
        reason = torch.where(has_eos, EOS, LENGTH)
        keep = torch.where(has_eos, eos_keep, self.room)
        if self.stop_table is None:
            candidate = torch.zeros_like(stopped)
        else:
            candidate = self.active & (self.stop_table[block] & fresh).any(1)
        status = torch.stack([stopped.long(), reason, keep, self.nfe, candidate.long(), prefix, self.seen], 1)
        self.seen.copy_(torch.where(self.active, prefix, self.seen))
        self.active.logical_and_(~stopped)
        self.length.mul_(self.active.long())
        return status

    def next_shape(self) -> torch.Tensor:
        """[2]: the key span the next forward needs (the largest active cache length plus the widest step) and its
        width (SBD: ``2k`` while an active slot re-feeds its finished block, else ``k``)."""
        pending = (self.pending & self.active).any()
        width = torch.where(pending, 2 * self.k, self.k) if self.mode == "sbd" else torch.ones_like(pending).long()
        return torch.stack([(self.length + self.width).max(), width])
