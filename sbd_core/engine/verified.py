"""The engine's verified decoding (lossless SBD, a solver with ``verify``; the algorithm: :mod:`sbd_core.verify`).

The per-row rule is the reference decoder's own (:class:`sbd_core.verify.VerifyLoop`: the draft's check, the
correction, the adaptive block length, the final check, the accepted/drafted counts, the stop rule on the host); this
module gives it the engine's forward and its continuous batching:

* One forward feeds each row its own tokens (a ragged batch, :mod:`.attention`): the committed tokens not yet in the
  cache and the finished draft, causally (``0..k+1`` tokens: its width varies row by row), then its new block with the
  block's last position as every block token's limit; one logit per fed token.
* The cache needs no masking: a row's keys sit at their positions, and a rejected draft's entries are overwritten by
  the row's next forward, which writes every position from the row's first unfed token on before it attends (a token
  sees positions up to its limit only). So the cache length of a row is its prompt plus its accepted tokens.
* A finished row's slot takes the next prompt at once (its prefill's last logit is the new row's first NTP logit).

Eager only, with the dense attention plan: the host runs the rule between forwards (the draft lengths are data), so
the compiled, synchronisation-free step of :class:`.slots.Slots` cannot take it. Results equal the reference
decoder's (tokens, NFE, widths, accepted, drafted, stop reasons; ``tests/test_engine_verify.py``)."""

from __future__ import annotations

import time

import torch

from ..generation import Batch
from ..solvers import exclude_tokens
from ..verify import VerifyLoop
from .attention import DensePlan, Ragged


class EngineVerify(VerifyLoop):
    """One ``generate`` call of the engine with a verifying solver; ``run`` is its :class:`.decoder.DecodeRun` (queue,
    slots' rows, results, stats). ``self.rows[s]`` is decoded in cache row ``self.cache_rows[s]``."""

    def __init__(self, engine, run):
        super().__init__(engine, Batch.new(torch.tensor([len(p) for p in run.ids]), None))
        self.run, self.forward = run, engine.forward
        self.st.rows, self.cache_rows, self.prompt_lens = [], [], []

    def loop(self) -> list:
        self._admit(list(range(self.run.n)))
        while self.rows:
            self._step()
            self._drop_finished()
        self.run.bar.close()
        return self.run.results

    def room(self, r: int) -> int:
        return self.run.rooms[r]

    def _drop_rejected(self, s: int, fed: int, kept: int) -> None:
        """Nothing to do: the row's next forward overwrites the rejected positions before anything reads them."""

    # ------------------------------------------------------------------------------------------------ rows
    def _admit(self, free: list[int]) -> None:
        """Prefill the next prompts into the ``free`` cache rows (one forward) and start their rows."""
        run = self.run
        take = [(slot, run.queue.popleft()) for slot in free if run.queue]
        if not take:
            return
        now = time.perf_counter()
        fed = [run.ids[row] for _, row in take]
        hidden = run.prefill_prompts([slot for slot, _ in take], fed)
        last = torch.tensor([len(f) for f in fed], device=hidden.device).cumsum(0) - 1
        logits = self.forward.logits(hidden[last])
        prefill = (time.perf_counter() - now) / len(take)
        for (slot, row), first in zip(take, logits):
            self.rows.append(self.new_row(first))
            self.st.rows.append(row)
            self.cache_rows.append(slot)
            self.prompt_lens.append(len(run.ids[row]))
            run.row_of[slot], run.started[row], run.prefill[row] = row, now, prefill

    def _drop_finished(self) -> None:
        """Finish the rows that stopped; their cache rows take the next prompts."""
        st, freed = self.st, []
        for s in reversed(range(len(self.rows))):
            r = st.rows[s]
            if not st.done[r]:
                continue
            freed.append(self.cache_rows[s])
            self.run.finish_row(self.cache_rows[s], st.tokens[r][: st.keep[r]], st.nfe[r], st.reason[r], st.widths[r],
                             accepted=st.accepted[r], drafted=st.drafted[r])
            for held in (self.rows, st.rows, self.cache_rows, self.prompt_lens):
                del held[s]
        self._admit(sorted(freed))

    # ------------------------------------------------------------------------------------------------ one forward
    def _forward(self, fed: list[list[int]], width: int) -> torch.Tensor:
        blocks = [row.block or [] for row in self.rows]
        k = max(map(len, blocks))
        cols, tokens = [], {name: [] for name in ("ids", "slots", "positions", "limits", "rows", "columns")}
        for s, (row, f, b) in enumerate(zip(self.rows, fed, blocks)):
            n, start = len(f) + len(b), self.prompt_lens[s] + row.fed
            positions = list(range(start, start + n))
            for name, values in zip(tokens, (f + b, [self.cache_rows[s]] * n, positions,
                                             positions[: len(f)] + [start + n - 1] * len(b), [s] * n, range(n))):
                tokens[name].extend(values)
            cols.extend(range(width - len(f), width + len(b)))
        device = self.dec.model.device
        batch = Ragged(**{name: torch.tensor(v, dtype=torch.long, device=device) for name, v in tokens.items()})
        span, widest = int(batch.positions.max()) + 1, int(batch.columns.max()) + 1
        arange = torch.arange(max(span, widest), device=device)
        plan = DensePlan(batch, torch.tensor(self.cache_rows, device=device), len(self.rows), arange[:widest],
                         arange[:span])
        logits = exclude_tokens(self.forward.logits(self.forward(batch, plan)), self.dec.excluded_ids)
        out = logits.new_zeros(len(self.rows), width + k, logits.shape[-1])
        out[batch.rows, torch.tensor(cols, device=device)] = logits
        self._count(len(batch.ids), widest)
        return out

    def _count(self, tokens: int, widest: int) -> None:
        """The forward in the run's :class:`.decoder.EngineStats` (every token is a row's own: eager, no padding)."""
        stats = self.run.stats
        stats.forwards, stats.fed_tokens, stats.row_tokens = (stats.forwards + 1, stats.fed_tokens + tokens,
                                                               stats.row_tokens + tokens)
        stats.attention_cells += len(self.rows) * widest
