"""The fast decoding engine: rows advance on their own, a finished row's slot takes the next prompt (continuous
batching), the KV cache is preallocated with one length per row, and the solver and stop checks run on the device.

Same API and results as the reference decoder (:class:`sbd_core.decode.BlockDecoder` with
``DecodeConfig(engine="reference")``; ``BlockDecoder`` hands ``engine="fast"`` to this class): per row the same tokens, NFE and stop reason (tested along its own path against a
slow no-cache recomputation, and against the reference where no decision is near-tied). Differences that are not
results: ``wall_time_s`` of a row runs from its admission (its prefill) to its stop; a row's room is
``min(max_new_tokens, context - its prompt length)`` (the reference takes the longest prompt of its batch); sampled
tokens (temperature > 0) come from the solver's stream in another order, so they differ between the two.

Per forward the host does: build nothing (inputs come from device state), one forward of a fixed shape, read one
small status tensor; only when a row stopped or may have completed a stop string does it read that row's tokens.
"""

from __future__ import annotations

import math
import time
from collections import deque

import torch
from tqdm.auto import tqdm

from ..generation import (DecodeConfig, Generation, cut_at_stop, encode_prompt, find_stop, never_generated_ids,
                          resolve_eos)
from ..mask_token import mask_token_id
from ..solvers import get_solver
from .forward import CachedForward
from .slots import EOS, STATUS, Slots, token_table

_COLUMN = {name: i for i, name in enumerate(STATUS)}
_SPAN_STEP = 64  # key spans grow in steps of this many positions (fewer distinct shapes, little wasted attention)


class FastDecoder:
    """Decode prompts with a Llama- or Qwen-3-class model in SBD mode (block + solver) or NTP mode: the engine."""

    def __init__(self, model, tokenizer, config: DecodeConfig | None = None, solver=None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.config = config or DecodeConfig()
        self.solver = solver or get_solver("topk", n=1)
        self.mode = self.config.mode
        self.block_size = self.config.block_size if self.mode == "sbd" else 1
        self.eos = resolve_eos(self.config, tokenizer)
        self.excluded_ids = never_generated_ids(model, tokenizer, self.eos)
        self.context = getattr(model.config, "max_position_embeddings", None)
        self.mask_id = mask_token_id(model) if self.mode == "sbd" else None
        vocab = model.get_output_embeddings().weight.shape[0]
        eos = torch.zeros(vocab, dtype=torch.bool)
        eos[[t for t in self.eos if t < vocab]] = True
        self.eos_table = eos.to(model.device)
        self.stop_table = token_table(tokenizer, vocab, self.config.stop_strings, model.device)
        self.stop_window = max((len(s) for s in self.config.stop_strings), default=0)
        compile_ = self.config.compile
        sampling = getattr(getattr(self.solver, "rule", None), "temperature", 0) > 0
        self.compile = (model.device.type == "cuda" and not sampling) if compile_ is None else compile_
        self.cache: CachedForward | None = None  # the last generate call's cache
        self.forwards = 0  # the last generate call's batch forwards (prefills not counted): what a benchmark divides by

    # ------------------------------------------------------------------------------------------------ public API
    @torch.no_grad()
    def generate(self, prompts, progress: bool = False) -> list[Generation]:
        """Decode ``prompts`` (strings or token-id lists); results keep the input order."""
        ids = [encode_prompt(self.tokenizer, p, self.config.add_special_tokens, self.context) for p in prompts]
        if not ids:
            return []
        slots = min(self.config.batch_size, len(ids))
        rooms = [self._room(len(p)) for p in ids]
        capacity = max(rooms) + self.block_size
        max_len = max(len(p) for p in ids) + max(rooms) + 2 * self.block_size
        forward = self.cache = CachedForward(self.model, slots, max_len)  # kept, as the reference keeps its cache
        state = Slots(slots, self.block_size, capacity, self.mode, self.mask_id, self.eos_table, self.stop_table,
                      self.excluded_ids, self.solver, self.model.device)
        run = _Run(self, forward, state, ids, rooms, progress)
        results = run.loop()
        self.forwards = run.forwards
        return results

    def _room(self, prompt_len: int) -> int:
        room = self.config.max_new_tokens
        if self.context is not None:
            room = min(room, self.context - prompt_len)
        return room


def key_span(need: int, max_len: int, compiled: bool) -> int:
    """The keys a forward attends over: ``need`` rounded up to a multiple of 64 (eager), or to a power of two (a
    compiled step has one graph per span: few of them), at most the cache's length."""
    if compiled:
        return min(max_len, max(_SPAN_STEP, 1 << (need - 1).bit_length()))
    return min(max_len, math.ceil(need / _SPAN_STEP) * _SPAN_STEP)


def compiled_step(state: Slots, forward: CachedForward):
    """``state.step`` compiled with fixed shapes: on a GPU with CUDA graphs (``reduce-overhead``), whose replays need
    every buffer the step reads or writes at a fixed address (the cache and the state are such buffers: updated in
    place, never reallocated); on the CPU with inductor. One graph per (width, key span) pair."""
    mode = "reduce-overhead" if forward.keys[0].device.type == "cuda" else None
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)  # widths x span buckets
    if mode is not None:
        for tensor in [*forward.keys, *forward.values, forward.cos, forward.sin,
                       *(v for v in vars(state).values() if torch.is_tensor(v))]:
            torch._dynamo.mark_static_address(tensor)
    return torch.compile(state.step, mode=mode, dynamic=False)


class _Run:
    """One ``generate`` call: the queue, the slots' rows, the host's view of the results."""

    def __init__(self, engine: FastDecoder, forward: CachedForward, state: Slots, ids, rooms, progress):
        self.engine, self.forward, self.state, self.ids, self.rooms = engine, forward, state, ids, rooms
        self.queue = deque(range(len(ids)))
        self.row_of: list[int | None] = [None] * state.n
        self.started, self.prefill = [0.0] * len(ids), [0.0] * len(ids)
        self.results = [None] * len(ids)
        self.stop_strings = engine.config.stop_strings
        self.bar = tqdm(total=len(ids), disable=not progress, desc=f"decode[{engine.mode}, fast]", unit="prob")
        self.nfe_total = self.tok_total = self.forwards = 0
        self.step = compiled_step(state, forward) if engine.compile else state.step

    def loop(self):
        self._admit(list(range(self.state.n)))
        need, width = self.state.next_shape().tolist()
        while any(r is not None for r in self.row_of):
            span = key_span(need, self.forward.max_len, self.engine.compile)
            packed = self.step(self.forward, span, width).tolist()  # the one host read of the forward
            self.forwards += 1
            size = len(STATUS)
            freed = self._collect([packed[i: i + size] for i in range(0, self.state.n * size, size)])
            if freed:
                self._admit(freed)
                need, width = self.state.next_shape().tolist()
            else:
                need, width = packed[-2:]
        self.bar.close()
        return self.results

    # ------------------------------------------------------------------------------------------------ rows
    def _admit(self, free: list[int]) -> None:
        """Prefill the next prompts into the ``free`` slots and start them."""
        take = [(slot, self.queue.popleft()) for slot in free if self.queue]
        if not take:
            return
        device = self.engine.model.device
        ntp = self.engine.mode == "ntp"
        fed = [self.ids[row][:-1] if ntp else self.ids[row] for _, row in take]  # NTP feeds the last prompt token
        slots = torch.tensor([slot for slot, _ in take], device=device)
        lengths = torch.tensor([len(f) for f in fed], device=device)
        width = max(len(f) for f in fed)
        now = time.perf_counter()
        if width:
            padded = torch.zeros(len(take), width, dtype=torch.long, device=device)
            for i, f in enumerate(fed):
                padded[i, :len(f)] = torch.tensor(f, device=device)
            self.forward.prefill(slots, padded, lengths)
        rooms = torch.tensor([self.rooms[row] for _, row in take], device=device)
        last = torch.tensor([self.ids[row][-1] for _, row in take], device=device)
        self.state.admit(slots, lengths, rooms, last)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        prefill = (time.perf_counter() - now) / len(take)  # rows admitted together share the prefill forward
        for slot, row in take:
            self.row_of[slot], self.started[row], self.prefill[row] = row, now, prefill

    def _collect(self, rows: list[list[int]]) -> list[int]:
        """Finish the rows that stopped in this forward; return their slots (now free)."""
        col = _COLUMN
        events = [s for s, r in enumerate(rows) if self.row_of[s] is not None and (r[col["stopped"]] or
                                                                                 r[col["candidate"]])]
        if not events:
            return []
        tokens = self.state.gen[torch.tensor(events, device=self.state.gen.device)].tolist()
        freed, released = [], []
        for slot, toks in zip(events, tokens):
            r = rows[slot]
            outcome = None
            if r[col["candidate"]]:
                scan_end = r[col["keep"]] - 1 if (r[col["stopped"]] and r[col["reason"]] == EOS) else r[col["prefix"]]
                found = self._find_stop(toks[:scan_end], r[col["seen"]])
                if found is not None:
                    outcome = (found, "stop_string")
                    if not r[col["stopped"]]:
                        released.append(slot)
            if outcome is None and r[col["stopped"]]:
                outcome = (r[col["keep"]], "eos" if r[col["reason"]] == EOS else "length")
            if outcome is not None:
                self._finish(slot, toks[:outcome[0]], r[col["nfe"]], outcome[1])
                freed.append(slot)
        if released:
            self.state.release(released)
        return freed

    def _find_stop(self, tokens: list[int], start: int) -> int | None:
        """Smallest token count whose text contains a stop string, for text that ends after ``start``."""
        return find_stop(self.engine.tokenizer, tokens, start, self.stop_strings, self.engine.stop_window)

    def _finish(self, slot: int, tokens: list[int], nfe: int, reason: str) -> None:
        row = self.row_of[slot]
        self.row_of[slot] = None
        body = tokens[:-1] if reason == "eos" else tokens
        text = cut_at_stop(self.engine.tokenizer.decode(body), self.stop_strings)
        self.results[row] = Generation(text, tokens, nfe, reason, time.perf_counter() - self.started[row],
                                       self.prefill[row])
        self.nfe_total, self.tok_total = self.nfe_total + nfe, self.tok_total + len(tokens)
        self.bar.update(1)
        self.bar.set_postfix(nfe=self.nfe_total, tok_per_fwd=f"{self.tok_total / max(self.nfe_total, 1):.2f}")
