"""Lossless SBD (``verify``): every block is checked against the same network's NTP mode, in the forward SBD already
runs, so the output is NTP decoding's (greedy: token for token; sampled: in distribution) in fewer forwards.

This is self-speculative decoding: the draft is the SBD block (the solver's reveals in the masked mode), the verifier
the same model's causal NTP head, and verification is folded into the re-feed forward: the first forward of a block
re-feeds the finished previous block causally (to write its exact keys/values), and the causal logits of those
positions, which plain SBD throws away, are exactly what the check needs. Per row and forward:

1. Feed ``[committed tokens not yet in the cache | the finished draft]`` causally and the new block (masks) in the same
   forward. Draft token ``j`` is checked against the logit that predicts it: that of the fed position before it, or,
   for the first fed position, the row's ``next_logits`` (the last causal logit of the previous forward, or of the
   prefill).
2. Greedy: keep the longest prefix that equals NTP's argmax; the first disagreeing token is replaced by NTP's choice
   and the rest of the draft is dropped (its cache entries are masked off as keys: nothing reads them again), with the
   block drafted in this forward (it was conditioned on dropped tokens); the row goes on from the corrected position.
   The accepted positions' keys/values came from the causal re-feed, so they are exact already: nothing is recomputed.
   Sampling: the speculative-sampling rule (:meth:`Verifier.check`).
3. If the draft was accepted whole, the new block goes on, and its first position is set to NTP's own choice from the
   last causal logit, for free: every block commits at least one token, and every forward that verifies commits >= 1.
4. A draft that meets a stop (EOS, a stop string, the length cap) is verified too before the row stops: one more causal
   forward with no new block, counted.

NFE bound (:func:`block_length`, per row): a block of ``b`` positions is drafted in at most ``b - 1`` forwards (its
first position is set for free, the solver reveals >= 1 of the rest per forward) and commits ``b`` tokens if accepted,
>= 2 if rejected (the first position always agrees; then the correction), at the cost of one more forward (its
successor's dropped start). So ``forwards - tokens`` grows by at most ``b - 2`` per block, and the rule gives each block
at most the room that keeps it below ``k - 2`` (``k`` = ``DecodeConfig.block_size``), at least 2 positions (a block of 2
never costs more forwards than tokens). Hence, for every generation, with any model and any solver:
``NFE <= NTP decoding's NFE (its tokens) + k - 1`` (the final verification included; ``+1`` for ``k = 1``). Blocks
that are accepted bank forwards (``tokens - forwards`` grows by >= 1 each), so the block grows back to ``k``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from .generation import stop_point, stop_window
from .solvers import exclude_tokens

VERIFY_SEED_OFFSET = 2**32  # the verifier's random stream: the solver's seed + this, apart from the draft's stream


def block_length(block_size: int, nfe: int, tokens: int, room: int) -> int:
    """The adaptive rule: a new block's length, given the row's forwards so far (``nfe``) and its tokens once the
    draft in flight is accepted (``tokens``; if it is rejected the new block is dropped and chosen again). The excess
    ``nfe - tokens`` stays <= k - 2 after every block (module docstring), so NFE <= tokens + k - 1 at the end."""
    return min(room, block_size, max(2, block_size - (nfe - tokens)))


def leading_true(flags: torch.Tensor) -> int:
    """How many leading entries of a 1-d bool tensor are True."""
    return int(flags.long().cumprod(0).sum())


def proposals(drawn_at: list[float], probs: list) -> list:
    """Per block position, the distribution a sampled token is accepted against: the one it was drawn from when it was
    drawn in order (every position left of it drawn in the same forward or before, none right of it before; ``drawn_at``
    is the forward that revealed each position, inf if none did), else None: then it is judged as a fixed guess, which
    is exact whatever the draft's order (:meth:`Verifier.check`)."""
    out = []
    for i, (at, p) in enumerate(zip(drawn_at, probs)):
        in_order = at == max(drawn_at[: i + 1]) and at == min(drawn_at[i:])
        out.append(p if in_order else None)
    return out


class Verifier:
    """NTP mode's verdict on drafted tokens: greedy (argmax) or sampled at the solver's temperature."""

    def __init__(self, solver, device):
        self.solver = solver
        self.sampling = solver.verify == "sample"
        self.generator = None
        if self.sampling:
            self.generator = torch.Generator(device=device).manual_seed(solver.rule.seed + VERIFY_SEED_OFFSET)

    def choose(self, logits: torch.Tensor) -> tuple[int, torch.Tensor | None]:
        """NTP's own token from logits [V] and the distribution it was drawn from (None when greedy)."""
        if not self.sampling:
            return int(logits.argmax()), None
        p = self.solver.token_probs(logits)
        return int(torch.multinomial(p, 1, generator=self.generator)), p

    def check(self, draft: list[int], props: list, logits: torch.Tensor) -> tuple[int, int | None]:
        """``(accepted, correction)``: how many leading draft tokens NTP mode keeps, given the logits [d, V] that
        predict them, and its token at the first rejected position (None when all are kept).

        Greedy: a token is kept iff it is the argmax. Sampling (speculative sampling): token x drawn from q is kept
        with probability min(1, p(x) / q(x)), else NTP's token is drawn from max(0, p - q), normalised; p is NTP's
        distribution at the temperature. A position without a proposal (drawn out of order: its q is not its law given
        the kept prefix) takes q = one-hot(x): kept with probability p(x), else drawn from p without x. Either way the
        kept-or-drawn token follows p exactly, for any draft (Leviathan et al. 2023, Chen et al. 2023)."""
        if not draft:
            return 0, None
        if not self.sampling:
            choice = logits.argmax(-1)
            kept = leading_true(choice == torch.tensor(draft, device=choice.device))
            return kept, (int(choice[kept]) if kept < len(draft) else None)
        for i, (token, q) in enumerate(zip(draft, props)):
            p = self.solver.token_probs(logits[i])
            q = q if q is not None else torch.nn.functional.one_hot(torch.tensor(token), p.shape[-1]).to(p)
            u = torch.rand((), generator=self.generator, device=p.device)
            if u < torch.clamp(p[token] / q[token], max=1.0):
                continue
            residual = (p - q).clamp(min=0)
            residual = residual if residual.sum() > 0 else p  # p == q: a rejection has probability 0 (rounding)
            return i, int(torch.multinomial(residual / residual.sum(), 1, generator=self.generator))
        return len(draft), None


@dataclass
class _Row:
    """One row's verify state; its committed tokens, NFE and stop live in the decoder's batch record."""

    next_logits: torch.Tensor  # [V] NTP logits of the first token not in the cache (excluded ids at -inf)
    fed: int = 0  # committed tokens whose keys/values are in the cache
    draft: list[int] = field(default_factory=list)  # a finished block awaiting verification
    props: list = field(default_factory=list)  # per draft token: what it is accepted against (sampling)
    final: bool = False  # the draft met a stop: verify it and start no block
    block: list[int] | None = None  # the block being drafted (the mask id where masked)
    masked: list[bool] = field(default_factory=list)
    drawn_at: list[float] = field(default_factory=list)  # the block forward that revealed each position (inf: none)
    probs: list = field(default_factory=list)  # per position: the distribution its token was drawn from (sampling)
    forwards: int = 0  # forwards into the current block
    checked: int = 0  # block prefix already checked for a stop


class VerifyLoop:
    """The verified decoding loop, one forward at a time, over the rows of a batch record ``st``
    (:class:`sbd_core.generation.Batch`; ``st.rows``: the original row of each of ``self.rows``), for both decoders.

    Rows advance on their own (accepted lengths differ). What a decoder supplies: :meth:`_forward` (every row's fed
    tokens and block in one forward, its logits laid out as ``[pad | fed | block | pad]`` per row),
    :meth:`_drop_rejected` (the cache after a rejection), :meth:`room` (a row's most new tokens) and the loop that
    admits and drops rows (:class:`ReferenceVerify`; the engine's: :mod:`sbd_core.engine.verified`)."""

    def __init__(self, decoder, st):
        self.dec, self.st, self.rows = decoder, st, []
        self.verifier = Verifier(decoder.solver, decoder.model.device)
        self.window = stop_window(decoder.config.stop_strings)

    def _forward(self, fed: list[list[int]], width: int) -> torch.Tensor:
        """[rows, width + longest block, V] logits (excluded ids at -inf): row ``s``'s fed tokens end at column
        ``width``, its block starts there; the fed tokens' keys/values stay in the cache, the blocks' do not."""
        raise NotImplementedError

    def _drop_rejected(self, s: int, fed: int, kept: int) -> None:
        """Row ``s`` fed ``fed`` tokens in this forward and keeps the first ``kept``: the rest are never read again."""
        raise NotImplementedError

    def room(self, r: int) -> int:
        """The most tokens original row ``r`` generates."""
        raise NotImplementedError

    def new_row(self, next_logits: torch.Tensor) -> "_Row":
        """A row's verify state after its prefill (``next_logits`` [V]: its last causal logits)."""
        return _Row(next_logits=exclude_tokens(next_logits.float(), self.dec.excluded_ids))

    # ------------------------------------------------------------------------------------------- one forward
    def _step(self) -> None:
        for s, row in enumerate(self.rows):
            self._start_block(s, row)
        fed = [self.st.tokens[self.st.rows[s]][row.fed:] + row.draft for s, row in enumerate(self.rows)]
        widths = [len(f) + len(row.block or []) for f, row in zip(fed, self.rows)]  # each row's own tokens
        width = max(len(f) for f in fed)
        logits = self._forward(fed, width)
        block_logits = logits[:, width:]
        for s, row in enumerate(self.rows):
            n = len(fed[s])
            preds = torch.cat([row.next_logits[None], logits[s, width - n : width]])  # preds[i] predicts fed[s][i]
            self._verify(s, row, preds, width=widths[s])
        masked = torch.zeros(block_logits.shape[:2], dtype=torch.bool, device=block_logits.device)
        for s, row in enumerate(self.rows):
            if row.block is not None:
                masked[s, : len(row.block)] = torch.tensor(row.masked)
        if not masked.shape[1]:
            return  # every row only verified (final drafts)
        reveal, tokens = self.dec.solver(block_logits, masked)
        for s, row in enumerate(self.rows):
            if row.block is not None:
                self._reveal(s, row, reveal[s], tokens[s], block_logits[s])

    def _start_block(self, s: int, row: _Row) -> None:
        """Give a row without a block a new one (unless its draft met a stop or no room is left)."""
        if row.block is not None or row.final:
            return
        r = self.st.rows[s]
        tokens = len(self.st.tokens[r]) + len(row.draft)
        room = self.room(r) - tokens
        if room <= 0:
            return
        b = block_length(self.dec.config.block_size, self.st.nfe[r], tokens, room)
        row.block, row.masked = [self.dec.mask_id] * b, [True] * b
        row.drawn_at, row.probs, row.forwards, row.checked = [math.inf] * b, [None] * b, 0, 0

    # ------------------------------------------------------------------------------------------- per row
    def _verify(self, s: int, row: _Row, preds: torch.Tensor, width: int) -> None:
        """Check the row's draft, commit what NTP mode keeps (and its correction), count the forward (``width``: the
        tokens the row fed in it), apply the stop rule; set the new block's first position, or drop the block when the
        draft was rejected."""
        st, r = self.st, self.st.rows[s]
        unfed, size = len(st.tokens[r]) - row.fed, len(row.draft)
        kept, correction = 0, None
        if size:  # the draft's first token is NTP's own choice: check the rest
            kept, correction = self.verifier.check(row.draft[1:], row.props[1:], preds[unfed + 1 : unfed + size])
            if size > 1:
                st.accepted[r].append(kept)
                st.drafted[r].append(size - 1)
            kept += 1
        self._drop_rejected(s, unfed + size, unfed + kept)
        new = row.draft[:kept] + ([] if correction is None else [correction])
        row.fed += unfed + kept
        row.next_logits = preds[unfed + kept]  # predicts the correction, or the token after the draft
        row.draft, row.props, row.final = [], [], False
        st.nfe[r] += 1
        st.widths[r].append(width)
        if self._commit(r, new):
            st.finish_time[r] = time.perf_counter() - st.start
            row.block = None
        elif correction is not None:
            row.block = None  # drafted on dropped tokens
        elif row.block is not None:
            row.forwards += 1
            if row.forwards == 1:  # the block's first position: NTP's own choice, for free
                row.block[0], row.probs[0] = self.verifier.choose(row.next_logits)
                row.masked[0], row.drawn_at[0] = False, 1

    def _reveal(self, s: int, row: _Row, reveal, tokens, logits) -> None:
        """Write the solver's reveals into the block; a block that is complete or whose revealed prefix meets a stop
        becomes the draft the next forward verifies."""
        for i in torch.nonzero(reveal).flatten().tolist():
            row.block[i], row.masked[i], row.drawn_at[i] = int(tokens[i]), False, row.forwards
            if self.verifier.sampling:
                row.probs[i] = self.dec.solver.token_probs(logits[i])
        prefix = row.block[: (row.masked + [True]).index(True)]
        committed = self.st.tokens[self.st.rows[s]]
        dec = self.dec
        stop = stop_point(dec.tokenizer, committed + prefix, len(committed) + row.checked, dec.eos,
                          dec.config.stop_strings, self.window, self.room(self.st.rows[s]))
        row.checked = len(prefix)
        if stop is None and any(row.masked):
            return
        end = len(prefix) if stop is None else stop[0] - len(committed)
        row.draft, row.props = row.block[:end], proposals(row.drawn_at, row.probs)[:end]
        row.final, row.block = stop is not None, None
        if row.final and end == 1:  # the stop is the block's first token, NTP's own: nothing to verify
            self._commit(self.st.rows[s], row.draft)
            self.st.finish_time[self.st.rows[s]] = time.perf_counter() - self.st.start

    def _commit(self, r: int, new: list[int]) -> bool:
        """Extend original row ``r``'s committed tokens by ``new``; True if it stops (and its stop is recorded)."""
        dec = self.dec
        return self.st.commit(r, new, dec.tokenizer, dec.eos, dec.config.stop_strings, self.room(r))


class ReferenceVerify(VerifyLoop):
    """The verified loop of :class:`sbd_core.decode.BlockDecoder` (the reference decoder) over one batch. Each forward
    feeds every row ``[pad | fed tokens (causal) | block (bidirectional) | pad]`` at its own positions; the fed columns
    stay in the Hugging Face cache, the block is cropped off; ``key_valid`` [rows, cache columns] marks the columns a
    row may attend to (not padding, not a rejected token)."""

    def __init__(self, decoder, st, max_new: int):
        super().__init__(decoder, st)
        self.max_new = max_new
        self.key_valid = st.prompt_valid.clone()

    def run(self, prefill_logits: torch.Tensor) -> None:
        self.rows = [self.new_row(prefill_logits[s, -1]) for s in range(len(self.st.rows))]
        while self.st.rows:
            self._step()
            self._drop_finished()

    def room(self, r: int) -> int:
        return self.max_new

    def _forward(self, fed: list[list[int]], width: int) -> torch.Tensor:
        """One forward of every row's fed tokens (left-padded to ``width``) and block; returns the logits of all
        columns with the excluded ids at -inf, and leaves the fed columns (not the blocks) in the cache."""
        dev, pad = self.dec.model.device, self.dec.mask_id
        blocks = [row.block or [] for row in self.rows]
        k = max(len(b) for b in blocks)
        ids = torch.full((len(self.rows), width + k), pad, dtype=torch.long, device=dev)
        valid = torch.zeros(ids.shape, dtype=torch.bool, device=dev)
        positions = torch.zeros(ids.shape, dtype=torch.long, device=dev)
        for s, (row, f, b) in enumerate(zip(self.rows, fed, blocks)):
            cols = list(range(width - len(f), width)) + list(range(width, width + len(b)))
            ids[s, cols] = torch.tensor(f + b, dtype=torch.long, device=dev)
            valid[s, cols] = True
            positions[s, cols] = self.st.prompt_len[s] + row.fed + torch.arange(len(cols), device=dev)
        q = width + k
        idx = torch.arange(q, device=dev)
        sees = idx[None, :] <= idx[:, None]
        sees[width:] = True  # block queries see every fed token and the whole block
        new = (sees[None] & valid[:, None, :]) | torch.eye(q, dtype=torch.bool, device=dev)[None]  # pads: themselves
        cached = self.key_valid[:, None, :].expand(-1, q, -1)
        logits = self.dec._forward(ids, positions, torch.cat([cached, new], dim=2), keep_logits=q)
        if k:
            self.dec.cache.crop(-k)
        self.key_valid = torch.cat([self.key_valid, valid[:, :width]], dim=1)
        return exclude_tokens(logits.float(), self.dec.excluded_ids)

    def _drop_rejected(self, s: int, fed: int, kept: int) -> None:
        self.key_valid[s, self.key_valid.shape[1] - fed + kept :] = False

    def _drop_finished(self) -> None:
        """Remove stopped rows from the batch, the cache and ``key_valid``."""
        keep = [s for s, r in enumerate(self.st.rows) if not self.st.done[r]]
        if len(keep) == len(self.rows):
            return
        if keep:
            index = torch.tensor(keep, dtype=torch.long, device=self.key_valid.device)
            self.dec.cache.batch_select_indices(index)
            self.key_valid = self.key_valid[index]
            self.st.prompt_len = self.st.prompt_len[index]
        self.st.rows = [self.st.rows[s] for s in keep]
        self.rows = [self.rows[s] for s in keep]


