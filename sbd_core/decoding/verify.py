"""Lossless SBD (``verify``): the verify loop both decoders run (:class:`VerifyLoop`: check each finished block against
the same network's NTP mode in the forward that re-feeds it, keep the agreeing prefix and the correction, the adaptive
block length, the final check) and NTP's verdict (:class:`Verifier`, greedy or speculative sampling). The rule and its
NFE bound are written in docs/verify.md."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .setup import DecodeSetup, Row
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
class Drafting:
    """One row's verify state beside its record (:class:`.setup.Row`: committed tokens, NFE, widths, stop, counts)."""

    record: Row
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
    """The verified decoding loop, one forward at a time, over ``self.rows`` (one :class:`Drafting` per row still
    decoding), for both decoders.

    Rows advance on their own (accepted lengths differ). What a decoder supplies: :meth:`_forward` (every row's fed
    tokens and block in one forward, its logits laid out as ``[pad | fed | block | pad]`` per row),
    :meth:`_drop_rejected` (the cache after a rejection) and the loop that admits and drops rows
    (:class:`sbd_core.decoding.reference.ReferenceVerify`, :class:`sbd_core.decoding.engine.verified.EngineVerify`)."""

    def __init__(self, solver, setup: DecodeSetup, device):
        if setup.shifted:  # its drafts are read off the paper's layout (block position j at the mask at j)
            raise ValueError("verify decodes models trained with the paper's MATP labels only; this model was "
                             "trained with matp_shift")
        self.solver, self.setup, self.rows = solver, setup, []
        self.verifier = Verifier(solver, device)

    def _forward(self, fed: list[list[int]], width: int) -> torch.Tensor:
        """[rows, width + longest block, V] logits (excluded ids at -inf): row ``s``'s fed tokens end at column
        ``width``, its block starts there; the fed tokens' keys/values stay in the cache, the blocks' do not."""
        raise NotImplementedError

    def _drop_rejected(self, s: int, fed: int, kept: int) -> None:
        """Row ``s`` fed ``fed`` tokens in this forward and keeps the first ``kept``: the rest are never read again."""
        raise NotImplementedError

    def new_row(self, record: Row, next_logits: torch.Tensor) -> Drafting:
        """A row's verify state after its prefill (``next_logits`` [V]: its last causal logits)."""
        return Drafting(record, exclude_tokens(next_logits.float(), self.setup.excluded_ids))

    # ------------------------------------------------------------------------------------------- one forward
    def _step(self) -> None:
        for row in self.rows:
            self._start_block(row)
        fed = [row.record.tokens[row.fed:] + row.draft for row in self.rows]
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
        reveal, tokens = self.solver(block_logits, masked)
        for s, row in enumerate(self.rows):
            if row.block is not None:
                self._reveal(row, reveal[s], tokens[s], block_logits[s])

    def _start_block(self, row: Drafting) -> None:
        """Give a row without a block a new one (unless its draft met a stop or no room is left)."""
        if row.block is not None or row.final:
            return
        record = row.record
        tokens = len(record.tokens) + len(row.draft)
        room = record.room - tokens
        if room <= 0:
            return
        b = block_length(self.setup.config.block_size, record.nfe, tokens, room)
        row.block, row.masked = [self.setup.mask_id] * b, [True] * b
        row.drawn_at, row.probs, row.forwards, row.checked = [math.inf] * b, [None] * b, 0, 0

    # ------------------------------------------------------------------------------------------- per row
    def _verify(self, s: int, row: Drafting, preds: torch.Tensor, width: int) -> None:
        """Check the row's draft, commit what NTP mode keeps (and its correction), count the forward (``width``: the
        tokens the row fed in it), apply the stop rule; set the new block's first position, or drop the block when the
        draft was rejected."""
        record = row.record
        unfed, size = len(record.tokens) - row.fed, len(row.draft)
        kept, correction = 0, None
        if size:  # the draft's first token is NTP's own choice: check the rest
            kept, correction = self.verifier.check(row.draft[1:], row.props[1:], preds[unfed + 1 : unfed + size])
            if size > 1:
                record.accepted.append(kept)
                record.drafted.append(size - 1)
            kept += 1
        self._drop_rejected(s, unfed + size, unfed + kept)
        new = row.draft[:kept] + ([] if correction is None else [correction])
        row.fed += unfed + kept
        row.next_logits = preds[unfed + kept]  # predicts the correction, or the token after the draft
        row.draft, row.props, row.final = [], [], False
        record.count(width)
        if record.commit(new, self.setup):
            row.block = None
        elif correction is not None:
            row.block = None  # drafted on dropped tokens
        elif row.block is not None:
            row.forwards += 1
            if row.forwards == 1:  # the block's first position: NTP's own choice, for free
                row.block[0], row.probs[0] = self.verifier.choose(row.next_logits)
                row.masked[0], row.drawn_at[0] = False, 1

    def _reveal(self, row: Drafting, reveal, tokens, logits) -> None:
        """Write the solver's reveals into the block; a block that is complete or whose revealed prefix meets a stop
        becomes the draft the next forward verifies."""
        for i in torch.nonzero(reveal).flatten().tolist():
            row.block[i], row.masked[i], row.drawn_at[i] = int(tokens[i]), False, row.forwards
            if self.verifier.sampling:
                row.probs[i] = self.solver.token_probs(logits[i])
        prefix = row.block[: (row.masked + [True]).index(True)]
        committed = row.record.tokens
        stop = self.setup.stop(committed + prefix, len(committed) + row.checked, row.record.room)
        row.checked = len(prefix)
        if stop is None and any(row.masked):
            return
        end = len(prefix) if stop is None else stop[0] - len(committed)
        row.draft, row.props = row.block[:end], proposals(row.drawn_at, row.probs)[:end]
        row.final, row.block = stop is not None, None
        if row.final and end == 1:  # the stop is the block's first token, NTP's own: nothing to verify
            row.record.commit(row.draft, self.setup)
