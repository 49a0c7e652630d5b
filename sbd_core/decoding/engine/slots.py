"""The engine's per-row decoding state on the device (:class:`Slots`) and one forward's step: its ragged tokens, the
forward, the solver and the bookkeeping (SBD and NTP mode), and what the host reads back (:func:`read_status`). How the
engine runs and the rule it keeps are written in docs/engine.md."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ...train_config import SHIFT_REVEALED
from ..setup import SHIFT_FIRST
from ..solvers import exclude_tokens
from .attention import DensePlan, FlexPlan, Ragged


class RowStatus(NamedTuple):
    """One slot's outcome of a forward, as the host reads it."""

    stopped: int  # EOS or the length limit lies in its revealed prefix (the slot is free now)
    candidate: int  # a newly revealed token could end a stop string: the host checks its text
    nfe: int  # forwards counted for the row so far
    prefix: int  # generated tokens revealed so far (every earlier position revealed)
    seen: int  # the prefix before this forward


class Shape(NamedTuple):
    """What the next forward feeds: its tokens, the widest row's tokens, and the key span a dense plan reads."""

    tokens: int
    width: int
    span: int


def read_status(packed: list[int], slots: int) -> tuple[list[RowStatus], Shape]:
    """The host's read of one step (:meth:`Slots.step`'s output as a list): each slot's :class:`RowStatus`, then the
    next forward's :class:`Shape`."""
    size = len(RowStatus._fields)
    statuses = [RowStatus(*packed[s * size:(s + 1) * size]) for s in range(slots)]
    return statuses, Shape(*packed[slots * size:slots * size + len(Shape._fields)])


def token_table(tokenizer, vocab_size: int, texts: tuple[str, ...], device) -> torch.Tensor | None:
    """[V] bool: token ids whose text could end one of the stop strings ``texts`` (None without stop strings).

    A stop string ends with its last character, so the token that completes it shows that character, or is a partial
    UTF-8 sequence (decoded alone as U+FFFD), or stands for a space its text alone leaves out: a SentencePiece word
    start (``▁``), a byte-fallback space (decoded alone as nothing: the decoder strips a text's leading space)."""
    if not texts:
        return None
    last = {t[-1] for t in texts}
    space = any(c.isspace() for c in last)
    size = min(vocab_size, len(tokenizer))
    decoded = tokenizer.batch_decode([[i] for i in range(size)])
    pieces = tokenizer.convert_ids_to_tokens(list(range(size)))
    flags = [any(c in text for c in last) or "\ufffd" in text or (space and (str(piece).startswith("\u2581") or not text))
             for text, piece in zip(decoded, pieces)]
    table = torch.zeros(vocab_size, dtype=torch.bool)
    table[:size] = torch.tensor(flags, dtype=torch.bool)
    return table.to(device)


class Slots:
    """Decoding state of ``slots`` rows (mode ``sbd`` with blocks of ``block_size``, or ``ntp``), allocated once.

    ``excluded`` is the index of the ids never written (:func:`sbd_core.decoding.solvers.excluded_index`);
    ``capacity`` the most tokens a row generates. ``shift`` (SBD mode, :func:`..setup.decode_shift`): block position 0
    is read at the NTP logits ``head`` of the token before the block (set at admission from the prompt's last token,
    then by each forward that re-feeds a finished block); position j at the token before it (a model trained with
    ``matp_shift``; with ``"revealed"``, at j itself while position j - 1 is masked), or at j itself
    (:data:`..setup.SHIFT_FIRST`: ``first_token: ntp``)."""

    def __init__(self, slots: int, block_size: int, capacity: int, mode: str, mask_id: int | None, eos_table,
                 stop_table, excluded: torch.Tensor, solver, device, shift: bool | str = False):
        self.n, self.mode, self.shifted = slots, mode, bool(shift) and mode == "sbd"
        self.shift_revealed = self.shifted and shift == SHIFT_REVEALED
        self.shift_first = self.shifted and shift == SHIFT_FIRST
        self.k = block_size if mode == "sbd" else 1
        self.mask_id = mask_id if mode == "sbd" else 0
        self.eos_table, self.stop_table, self.excluded, self.solver = eos_table, stop_table, excluded, solver
        zeros = lambda *shape, dtype=torch.long: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        self.length, self.room, self.done, self.seen, self.nfe, self.block_len = (zeros(slots) for _ in range(6))
        self.active, self.pending = zeros(slots, dtype=torch.bool), zeros(slots, dtype=torch.bool)
        self.block = torch.full((slots, self.k), self.mask_id, dtype=torch.long, device=device)  # NTP: the last token
        self.prev, self.masked = zeros(slots, self.k), zeros(slots, self.k, dtype=torch.bool)
        self.gen = zeros(slots, capacity)
        self.widths = zeros(slots, capacity + 1)  # per counted forward, the tokens the row fed; column -1: a sink
        self.arange_k = torch.arange(self.k, device=device)
        if self.shifted:  # [S, V] float32: the logits that predict each slot's block position 0
            self.head = torch.zeros(slots, eos_table.shape[0], dtype=torch.float32, device=device)

    def buffers(self) -> list[torch.Tensor]:
        """Every state tensor (updated in place, never reallocated)."""
        return [v for v in vars(self).values() if torch.is_tensor(v)]

    # ------------------------------------------------------------------------------------------------ host side
    def admit(self, slots: torch.Tensor, lengths: torch.Tensor, rooms: torch.Tensor, last: torch.Tensor) -> None:
        """Start rows in ``slots`` [n]: cache ``lengths`` [n] already prefilled, ``rooms`` [n] new tokens at most,
        ``last`` [n] the token NTP mode feeds first."""
        self.length[slots], self.room[slots] = lengths, rooms
        for tensor in (self.done, self.seen, self.nfe):
            tensor[slots] = 0
        self.pending[slots], self.active[slots] = False, True
        first = rooms.clamp(max=self.k)
        self.block_len[slots] = first
        self.block[slots] = last[:, None] if self.mode == "ntp" else self.mask_id
        self.masked[slots] = self.arange_k[None] < first[:, None]

    def hold(self, length: int, room: int, refeed: bool) -> None:
        """Put every slot in one state (the timing stage's steps): ``length`` cached keys, ``room`` new tokens, a fully
        masked block of ``k``, its previous block waiting to be re-fed when ``refeed``."""
        self.length.fill_(length)
        self.room.fill_(room)
        self.active.fill_(True)
        self.block_len.fill_(self.k)
        self.masked.fill_(True)
        self.pending.fill_(refeed)

    def snapshot(self) -> dict[str, torch.Tensor]:
        """A copy of every state tensor, for :meth:`restore`."""
        return {name: value.clone() for name, value in vars(self).items() if torch.is_tensor(value)}

    def restore(self, saved: dict[str, torch.Tensor]) -> None:
        """Put the state back as :meth:`snapshot` found it (in place: the buffers keep their addresses)."""
        for name, value in saved.items():
            getattr(self, name).copy_(value)

    def release(self, slots: list[int]) -> None:
        """Stop rows the host decided on (a stop string); their slots are free."""
        index = torch.tensor(slots, dtype=torch.long, device=self.length.device)
        self.active[index], self.length[index] = False, 0
        self.masked[index] = False

    # ------------------------------------------------------------------------------------------------ one forward
    def step(self, forward, tokens: torch.Tensor, width: torch.Tensor | None = None,
             span: torch.Tensor | None = None) -> torch.Tensor:
        """One forward and its update. ``tokens`` is ``arange(T)`` (T >= the tokens the rows feed; the rest are
        padding). A dense plan (:class:`.attention.DensePlan`) takes ``width`` and ``span`` (carriers of the widest
        row's tokens and the key span); without them the forward uses FlexAttention. Returns what the host reads:
        [S, len(RowStatus)] flattened, then the next forward's :class:`Shape`."""
        batch, logit_index = self.inputs(tokens, forward.max_len, width)
        if width is None:
            plan = FlexPlan(batch, forward.max_len, self.n + 1)
        else:
            plan = DensePlan(batch, None, self.n + 1, width, span)
        hidden = forward(batch, plan)
        logits = self._shifted_logits(forward, hidden, logit_index) if self.shifted else \
            forward.logits(hidden[logit_index])
        status = self.update(logits)
        return torch.cat([status.flatten(), self.next_shape()])

    def _shifted_logits(self, forward, hidden: torch.Tensor, logit_index: torch.Tensor) -> torch.Tensor:
        """[S, k, V]: each block position's logits read one token earlier (``matp_shift: revealed``: at the position
        itself while the one before it is masked; ``first_token: ntp``: every position but 0 at itself); position 0
        from the last re-fed token where this forward re-feeds a finished block (the new ``head``), else from
        ``head``."""
        refeed, _ = self.feeds()
        source = logit_index - 1
        if self.shift_revealed:
            after_mask = torch.cat([torch.zeros_like(self.masked[:, :1]), self.masked[:, :-1]], dim=1)
            source = torch.where(after_mask, logit_index, source)
        if self.shift_first:
            source = torch.cat([source[:, :1], logit_index[:, 1:]], dim=1)
        logits = forward.logits(hidden[source.clamp(min=0)])
        head = torch.where((refeed > 0)[:, None], logits[:, 0], self.head)
        self.head.copy_(head)
        return torch.cat([head[:, None], logits[:, 1:]], dim=1)

    def feeds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per slot, the tokens re-fed causally and the tokens of its block, in the next forward."""
        return (self.pending & self.active) * self.k, self.block_len * self.active

    def inputs(self, tokens: torch.Tensor, max_len: int, width: torch.Tensor | None) -> tuple[Ragged, torch.Tensor]:
        """The ragged batch (slot by slot; when compiled, then padding in the scratch row) and ``[S, k]``: where each
        slot's block positions are among its tokens."""
        refeed, own = self.feeds()
        fed = refeed + own
        end = fed.cumsum(0)
        start = end - fed
        row = torch.searchsorted(end, tokens, right=True)  # the slot of each token; n for padding
        slot = row.clamp(max=self.n - 1)
        column = tokens - start[slot]
        index = column - refeed[slot]  # its place in the block; negative: a re-fed token
        in_block = index >= 0
        ids = torch.where(in_block, self.block[slot, index.clamp(0, self.k - 1)],
                          self.prev[slot, column.clamp(max=self.k - 1)])
        positions = self.length[slot] + column
        limits = torch.where(in_block, (self.length + refeed + self.block_len - 1)[slot], positions)
        batch = Ragged(ids, slot, positions, limits, slot, column)
        if torch.compiler.is_compiling():  # a compiled step pads the tokens to a bucket (an eager one feeds no padding)
            batch = _padded(batch, row < self.n, tokens - end[-1], self.n, max_len, width)
        logit_index = (start + refeed)[:, None] + self.arange_k[None]
        return batch, logit_index.clamp(max=tokens.shape[0] - 1)

    def update(self, logits: torch.Tensor) -> torch.Tensor:
        """Apply one forward's logits [S, k, V]: solver, bookkeeping, stop checks; returns the status tensor. Every
        state tensor is updated in place (fixed buffers, as a captured CUDA graph needs them)."""
        refeed, own = self.feeds()
        live = self.masked & self.active[:, None]
        counted = live.any(1)
        sink = self.widths.shape[1] - 1
        self.widths.scatter_(1, torch.where(counted, self.nfe, sink)[:, None], (refeed + own)[:, None])
        self.nfe.add_(counted)
        reveal, tokens = self.solver(exclude_tokens(logits, self.excluded), live)
        if self.mode == "ntp":
            return self._update_ntp(tokens[:, 0])
        return self._update_sbd(torch.where(reveal, tokens, self.block), live & ~reveal, refeed)

    def _update_sbd(self, block: torch.Tensor, masked: torch.Tensor, refeed: torch.Tensor) -> torch.Tensor:
        k, active, positions = self.k, self.active, self.arange_k[None]
        self.length.add_(refeed)  # the re-fed block's keys stay
        self.pending.logical_and_(~active)
        open_ = masked & (positions < self.block_len[:, None])
        first_masked = torch.where(open_.any(1), open_.long().argmax(1), self.block_len)
        prefix = self.done + first_masked
        self.gen.scatter_(1, self.done[:, None] + positions, block)
        fresh = (positions >= (self.seen - self.done)[:, None]) & (positions < first_masked[:, None])
        stopped = self._stops(block, fresh, prefix)
        complete = active & (first_masked == self.block_len)  # (active: not stopped now)
        self.done.add_(self.block_len * complete)
        self.prev.copy_(torch.where(complete[:, None], block, self.prev))
        self.pending.logical_or_(complete)
        next_len = torch.where(complete, (self.room - self.done).clamp(0, k), self.block_len)
        self.block.copy_(block.masked_fill(complete[:, None], self.mask_id))
        self.masked.copy_(torch.where(complete[:, None], positions < next_len[:, None], masked & active[:, None]))
        self.block_len.copy_(next_len)
        return self._status(stopped, fresh, block, prefix)

    def _update_ntp(self, token: torch.Tensor) -> torch.Tensor:
        active = self.active
        token = torch.where(active, token, self.block[:, 0])
        self.gen.scatter_(1, self.done[:, None], token[:, None])
        self.done.add_(active)
        self.length.add_(active)
        self.block[:, 0] = token
        fresh = active[:, None]
        stopped = self._stops(token[:, None], fresh, self.done)
        return self._status(stopped, fresh, token[:, None], self.done)

    def _stops(self, block, fresh, prefix) -> torch.Tensor:
        """Slots whose newly revealed tokens ``fresh`` [S, k] of ``block`` hold EOS, or whose revealed ``prefix``
        reached their room: they stop now (deactivated; the host finds where: :meth:`.setup.DecodeSetup.stop`)."""
        stopped = self.active & ((self.eos_table[block] & fresh).any(1) | (prefix >= self.room))
        self.active.logical_and_(~stopped)
        self.length.mul_(self.active.long())
        return stopped

    def _status(self, stopped, fresh, block, prefix) -> torch.Tensor:
        """The [S, len(RowStatus)] status; the seen prefix moves on."""
        if self.stop_table is None:
            candidate = torch.zeros_like(stopped)
        else:
            candidate = (stopped | self.active) & (self.stop_table[block] & fresh).any(1)
        status = torch.stack([stopped.long(), candidate.long(), self.nfe, prefix, self.seen], 1)
        self.seen.copy_(torch.where(self.active | stopped, prefix, self.seen))
        return status

    def next_shape(self) -> torch.Tensor:
        """[3]: the next forward's :class:`Shape` (tokens fed, the widest slot's tokens, keys up to the last one)."""
        refeed, own = self.feeds()
        width = refeed + own
        return torch.stack([width.sum(), width.max(), (self.length + width).max().clamp(min=1)])


def _padded(batch: Ragged, real: torch.Tensor, pad: torch.Tensor, scratch: int, max_len: int,
            width: torch.Tensor | None) -> Ragged:
    """``batch`` with its tokens past the rows' own (``real`` False; ``pad``: their count from the first) moved to the
    scratch row ``scratch``: each writes its own position there and sees itself (a query that sees no key is NaN on
    some kernels, and NaN keys would poison the queries of its block of 16)."""
    position = pad % max_len
    return Ragged(ids=torch.where(real, batch.ids, 0), slots=torch.where(real, batch.slots, scratch),
                  positions=torch.where(real, batch.positions, position),
                  limits=torch.where(real, batch.limits, position), rows=torch.where(real, batch.rows, scratch),
                  columns=batch.columns if width is None else torch.where(real, batch.columns, pad % width.shape[0]))
