"""The engine's verified decoding (a solver with ``verify: greedy``): :class:`EngineVerify` gives the verify loop
(:class:`sbd_core.decoding.verify.VerifyLoop`) the engine's ragged forward and its continuous batching, eagerly. How it
feeds and keeps the cache is written in docs/engine.md ("Verify"); the rule in docs/verify.md."""

from __future__ import annotations

import time

import torch

from ..solvers import exclude_tokens
from ..verify import VerifyLoop
from .attention import DensePlan, Ragged


class EngineVerify(VerifyLoop):
    """One ``generate`` call of the engine with a verifying solver; ``run`` is its :class:`.decoder.DecodeRun` (queue,
    slots' rows, results, stats). ``self.rows[s]`` is decoded in cache row ``self.cache_rows[s]``."""

    def __init__(self, engine, run):
        super().__init__(engine.solver, engine.setup, engine.model.device)
        self.run, self.forward, self.device = run, engine.forward, engine.model.device
        self.cache_rows, self.prompt_lens = [], []

    def loop(self) -> list:
        self._admit(list(range(self.run.n)))
        while self.rows:
            self._step()
            self._drop_finished()
        self.run.bar.close()
        return self.run.results

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
            self.rows.append(self.new_row(run.start_row(slot, row, now, prefill), first))
            self.cache_rows.append(slot)
            self.prompt_lens.append(len(run.ids[row]))

    def _drop_finished(self) -> None:
        """Finish the rows that stopped; their cache rows take the next prompts."""
        freed = []
        for s in reversed(range(len(self.rows))):
            if not self.rows[s].record.done:
                continue
            freed.append(self.cache_rows[s])
            self.run.finish_row(self.cache_rows[s], verified=True)
            for held in (self.rows, self.cache_rows, self.prompt_lens):
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
        device = self.device
        batch = Ragged(**{name: torch.tensor(v, dtype=torch.long, device=device) for name, v in tokens.items()})
        span, widest = int(batch.positions.max()) + 1, int(batch.columns.max()) + 1
        arange = torch.arange(max(span, widest), device=device)
        plan = DensePlan(batch, torch.tensor(self.cache_rows, device=device), len(self.rows), arange[:widest],
                         arange[:span])
        logits = exclude_tokens(self.forward.logits(self.forward(batch, plan)), self.setup.excluded_ids)
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
