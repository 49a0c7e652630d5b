"""The fast decoding engine (:class:`FastDecoder`): rows advance on their own, a finished row's slot takes the next prompt
(continuous batching), each forward feeds every row only its own tokens (a ragged batch), and the solver and stop checks
run on the device; compiled on CUDA. What it runs, how it is set up and compiled, and where it differs from the reference
decoder are written in docs/engine.md."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ...decode_config import DecodeConfig
from ..setup import DecodeSetup, Generation, Row
from ..solvers import excluded_index, get_solver
from .attention import Ragged
from .forward import CachedForward
from .slots import Shape, Slots, read_status, token_table
from .verified import EngineVerify

ROUND_POSITIONS = 256  # a cache set up from the prompts covers their need rounded up to this many positions


def bucket(tokens: int, rows: int = 0) -> int:
    """The token count a compiled forward of ``tokens`` tokens runs at: a multiple of 16 up to 256, then of 1/16 of
    the power of two below ``tokens`` (padding under 1/16 of the tokens; 16 buckets per doubling); or ``rows``, the
    slots, where that is closer (NTP mode's full batch, one token per row, runs unpadded)."""
    step = max(16, 1 << max(0, tokens.bit_length() - 5))
    grid = -(-max(tokens, 1) // step) * step
    return rows if tokens <= rows < grid else grid


def buckets(max_tokens: int, rows: int = 0) -> list[int]:
    """Every token count :func:`bucket` gives up to ``max_tokens`` tokens: at most this many graphs per step."""
    return sorted({bucket(t, rows) for t in range(1, max_tokens + 1)})


@dataclass
class EngineStats:
    """What one ``generate`` call fed (batch forwards after admission; prefills apart)."""

    forwards: int = 0  # decode forwards (what a benchmark divides by)
    fed_tokens: int = 0  # tokens those forwards fed, padding to a bucket included
    row_tokens: int = 0  # the rows' own tokens among them (the sum of every row's widths)
    attention_cells: int = 0  # dense plan: query cells its rectangles held (rows x the widest row)
    prefills: int = 0  # prefill forwards (one per step that freed slots)
    prefill_tokens: int = 0  # prompt tokens they fed (padding excluded)
    waiting_rows: int = 0  # decoding rows that waited during a prefill, summed over prefills


class FastDecoder:
    """Decode prompts with a Llama- or Qwen-3-class model in SBD mode (block + solver) or NTP mode: the engine.

    ``attention`` ("flex" or "dense"; default: flex when compiled on CUDA) and ``backend`` (torch.compile's; default
    inductor) exist to trace the CUDA configuration on the CPU (tests, ``scripts/gpu_check.sh --dry-run``)."""

    def __init__(self, model, tokenizer, config: DecodeConfig | None = None, solver=None, *,
                 attention: str | None = None, backend: str = "inductor"):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.config = config or DecodeConfig()
        self.solver = solver or get_solver("topk", n=1)
        self.mode = self.config.mode
        self.block_size = self.config.block_size if self.mode == "sbd" else 1
        self.setup = DecodeSetup.of(model, tokenizer, self.config, self.solver)
        self.verify = self.mode == "sbd" and getattr(self.solver, "verify", "none") != "none"
        if self.verify and self.solver.verify == "sample":
            raise ValueError("verify: sample does not run on decode.engine 'fast' (its speculative-sampling rule is "
                             "tested on the reference decoder); use decode.engine: reference (make_decoder picks it)")
        self.compile = _compile_setting(self.config.compile, model.device, self.solver, self.verify)
        cuda = model.device.type == "cuda"
        self.attention = attention or ("flex" if self.compile and cuda else "dense")
        self.backend = backend
        self.forward: CachedForward | None = None  # the cache (set up by the first generate call)
        self.state: Slots | None = None
        self.stats = EngineStats()  # the last generate call's

    # ------------------------------------------------------------------------------------------------ public API
    @torch.no_grad()
    def generate(self, prompts, progress: bool = False) -> list[Generation]:
        """Decode ``prompts`` (strings or token-id lists); results keep the input order."""
        ids = [self.setup.encode(p) for p in prompts]
        if not ids:
            return []
        rooms = [self.setup.room(len(p)) for p in ids]
        self._setup(max(len(p) + r for p, r in zip(ids, rooms)))
        run = DecodeRun(self, ids, rooms, progress)
        results = EngineVerify(self, run).loop() if self.verify else run.loop()
        self.stats = run.stats
        return results

    @property
    def forwards(self) -> int:
        """The last generate call's decode forwards (prefills not counted)."""
        return self.stats.forwards

    # ------------------------------------------------------------------------------------------------ setup
    def _setup(self, need: int) -> None:
        """Allocate the cache and state for ``need`` positions per row unless the current ones hold them."""
        cap = self.config.max_len
        if cap is not None and need > cap:
            raise ValueError(f"a prompt plus its new tokens need {need} positions, more than decode.max_len={cap}; "
                             f"raise decode.max_len or lower max_new_tokens")
        if self.forward is not None and need <= self.forward.max_len:
            return
        max_len = cap or -(-need // ROUND_POSITIONS) * ROUND_POSITIONS
        if self.setup.context is not None:
            max_len = min(max_len, self.setup.context)
        self.forward = self.state = None  # the old cache goes before the new one comes
        rows, device = self.config.batch_size, self.model.device
        _check_memory(self.model, rows, max_len)
        self.forward = CachedForward(self.model, rows, max_len)
        vocab = self.model.get_output_embeddings().weight.shape[0]
        eos = torch.zeros(vocab, dtype=torch.bool)
        eos[[t for t in self.setup.eos if t < vocab]] = True
        self.state = Slots(rows, self.block_size, self.config.max_new_tokens + self.block_size, self.mode,
                           self.setup.mask_id, eos.to(device), token_table(self.tokenizer, vocab, self.config.stop_strings,
                                                                     device),
                           excluded_index(self.setup.excluded_ids, vocab, device), self.solver, device,
                           self.setup.shift)
        self.stepper = Stepper(self.state, self.forward, self.compile, self.attention, self.backend)


def _compile_setting(setting, device, solver, verify: bool) -> bool:
    """Whether to compile: ``decode.compile``, or on CUDA for greedy solvers without ``verify``; refused for a
    sampling solver (its generator and ``multinomial`` cannot be traced into one graph) and for ``verify`` (the host
    runs its rule between forwards: :mod:`.verified`)."""
    if setting and verify:
        raise ValueError("decode.compile: true cannot run a solver with verify (the engine verifies eagerly, the host "
                         "checking each draft); set decode.compile: false (or null: eager with verify)")
    sampling = getattr(getattr(solver, "rule", None), "temperature", 0) > 0 or verify
    if setting and sampling:
        raise ValueError("decode.compile: true cannot sample (the solver's temperature > 0) inside the compiled step; "
                         "set decode.compile: false (or null: eager when sampling)")
    return device.type == "cuda" and not sampling if setting is None else setting


def _check_memory(model, rows: int, max_len: int) -> None:
    """ValueError naming ``decode.max_len`` when the cache would not fit in the GPU's free memory."""
    if model.device.type != "cuda":
        return
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    size = 2 * config.num_hidden_layers * (rows + 1) * max_len * config.num_key_value_heads * head_dim * \
        model.dtype.itemsize
    free, _ = torch.cuda.mem_get_info(model.device)
    if size > free:
        raise ValueError(f"the KV cache for {rows} rows of {max_len} positions needs {size / 2**30:.1f} GiB, more "
                         f"than the GPU's {free / 2**30:.1f} GiB free; set decode.max_len (positions per row: prompt "
                         f"plus new tokens) or a smaller decode.batch_size")


class Stepper:
    """Runs the state's step over the cache, eager or compiled: the token count (a bucket when compiled) and the
    dense plan's shapes go in as the lengths of ``arange`` slices ("carriers"), marked dynamic, so a compiled step is
    traced once for every shape.

    Compiled: the step and the prefill through ``torch.compile(fullgraph=True)``. On CUDA the step runs as CUDA graphs
    (``reduce-overhead``), whose replays need every buffer it reads or writes at a fixed address: the cache and the
    state are such buffers (updated in place, never reallocated); the prefill runs without CUDA graphs (its token
    count is anything up to every row's prompt)."""

    def __init__(self, state: Slots, forward: CachedForward, compiled: bool, attention: str,
                 backend: str = "inductor"):
        self.state, self.forward, self.compiled, self.dense = state, forward, compiled, attention == "dense"
        device = forward.keys[0].device
        self.arange = torch.arange(max(forward.max_len, bucket(state.n * 2 * state.k)) + 1, device=device)
        self.step, self.prefill_step = state.step, forward.prefill
        if compiled:
            if device.type == "cuda":
                for tensor in [*forward.buffers(), *state.buffers()]:
                    torch._dynamo.mark_static_address(tensor)
            mode = "reduce-overhead" if device.type == "cuda" else None
            self.step = torch.compile(state.step, fullgraph=True, backend=backend, mode=mode)
            self.prefill_step = torch.compile(forward.prefill, fullgraph=True, backend=backend)

    def tokens(self, count: int) -> int:
        """The token count a forward of ``count`` tokens runs at."""
        return bucket(count, self.state.n) if self.compiled else count

    def carrier(self, length: int) -> torch.Tensor:
        """``arange(length)``; compiled, at least 2 long (dynamo specialises a size of 1: a second graph)."""
        return self.arange[:max(length, 2) if self.compiled else length]

    def __call__(self, shape: Shape) -> list[int]:
        """One step of the rows' next forward (``shape``: :meth:`Slots.next_shape`); the host's one read."""
        dense = (self.carrier(shape.width), self.carrier(shape.span)) if self.dense else ()
        return self.step(self.forward, *_dynamic(self.carrier(self.tokens(shape.tokens)), *dense)).tolist()

    def prefill(self, batch: Ragged, key_rows: torch.Tensor, width: int) -> torch.Tensor:
        """One causal forward of the prompts in ``batch`` (padded to :meth:`tokens`; ``width``: its longest) into the
        cache rows ``key_rows`` (the last: the scratch row); returns its hidden states [tokens, hidden]."""
        dense = (self.carrier(width), self.carrier(width)) if self.dense else ()
        _dynamic(*vars(batch).values(), key_rows, *dense)
        return self.prefill_step(batch, key_rows, *dense)


def _dynamic(*carriers):
    """Mark the carriers' lengths dynamic: a compiled forward is traced once for every token count."""
    for carrier in carriers:
        torch._dynamo.maybe_mark_dynamic(carrier, 0)
    return carriers


class DecodeRun:
    """One ``generate`` call: the queue, the slots' rows, the host's view of the results."""

    def __init__(self, engine: FastDecoder, ids, rooms, progress):
        self.engine, self.ids, self.rooms, self.setup = engine, ids, rooms, engine.setup
        self.forward, self.state, self.n = engine.forward, engine.state, engine.state.n
        self.queue = deque(range(len(ids)))
        self.row_of: list[int | None] = [None] * self.n  # slot -> the prompt it decodes
        self.records: list[Row | None] = [None] * len(ids)  # per prompt, from its admission
        self.results: list[Generation | None] = [None] * len(ids)
        self.bar = tqdm(total=len(ids), disable=not progress, desc=f"decode[{engine.mode}, fast]", unit="prob")
        self.nfe_total = self.tok_total = 0
        self.stats = EngineStats()

    def loop(self):
        self.state.active.fill_(False)  # a new call: no row of the last one is left
        self._admit(list(range(self.n)))
        shape = Shape(*self.state.next_shape().tolist())
        while any(r is not None for r in self.row_of):
            statuses, next_shape = read_status(self._step(shape), self.n)  # the one host read of the forward
            freed = self._collect(statuses)
            if freed:
                self._admit(freed)
                shape = Shape(*self.state.next_shape().tolist())
            else:
                shape = next_shape
        self.bar.close()
        return self.results

    def _step(self, shape: Shape) -> list[int]:
        stepper, stats = self.engine.stepper, self.stats
        stats.forwards, stats.fed_tokens, stats.row_tokens = (stats.forwards + 1,
                                                               stats.fed_tokens + stepper.tokens(shape.tokens),
                                                               stats.row_tokens + shape.tokens)
        stats.attention_cells += (self.n + 1) * shape.width if stepper.dense else 0
        return stepper(shape)

    # ------------------------------------------------------------------------------------------------ rows
    def start_row(self, slot: int, row: int, start: float, prefill_s: float) -> Row:
        """Prompt ``row`` decodes in ``slot`` from ``start`` (its admission); its record."""
        record = self.records[row] = Row(self.rooms[row], start, prefill_s)
        self.row_of[slot] = row
        return record

    def _admit(self, free: list[int]) -> None:
        """Prefill the next prompts into the ``free`` slots, all in one forward, and start them."""
        take = [(slot, self.queue.popleft()) for slot in free if self.queue]
        if not take:
            return
        engine, device = self.engine, self.engine.model.device
        fed = [self.ids[row][:-1] if engine.mode == "ntp" else self.ids[row] for _, row in take]  # NTP: all but one
        now = time.perf_counter()
        hidden = self.prefill_prompts([slot for slot, _ in take], fed) if any(fed) else None
        slots = torch.tensor([slot for slot, _ in take], device=device)
        lengths = torch.tensor([len(f) for f in fed], device=device)
        if self.state.shifted:  # block position 0 of shifted decoding: the NTP logits of the prompt's last token (SBD
            # mode prefills every prompt token, and encode_prompt refuses an empty prompt)
            self.state.head[slots] = self.forward.logits(hidden[lengths.cumsum(0) - 1])
        rooms = torch.tensor([self.rooms[row] for _, row in take], device=device)
        last = torch.tensor([self.ids[row][-1] for _, row in take], device=device)
        self.state.admit(slots, lengths, rooms, last)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        prefill = (time.perf_counter() - now) / len(take)  # rows admitted together share the prefill forward
        for slot, row in take:
            self.start_row(slot, row, now, prefill)

    def prefill_prompts(self, slots: list[int], fed: list[list[int]]) -> torch.Tensor:
        """One causal forward over the prompts ``fed`` into cache rows ``slots`` (the rows start empty); returns its
        hidden states, the prompts' tokens in order first."""
        engine, stats = self.engine, self.stats
        count = sum(map(len, fed))
        padding = engine.stepper.tokens(count) - count
        width = max(map(len, fed))
        rows = [i for i, f in enumerate(fed) for _ in f] + [len(fed)] * padding  # dense rectangle row per token
        positions = [p for f in fed for p in range(len(f))] + [j % width for j in range(padding)]
        cache_rows = [s for s, f in zip(slots, fed) for _ in f] + [self.n] * padding  # padding: the scratch row
        device = engine.model.device
        as_tensor = lambda values: torch.tensor(values, dtype=torch.long, device=device)  # noqa: E731
        positions = as_tensor(positions)
        batch = Ragged(ids=as_tensor([t for f in fed for t in f] + [0] * padding), slots=as_tensor(cache_rows),
                       positions=positions, limits=positions, rows=as_tensor(rows), columns=positions)
        hidden = engine.stepper.prefill(batch, as_tensor(slots + [self.n]), width)
        running = sum(r is not None for r in self.row_of)
        stats.prefills, stats.prefill_tokens, stats.waiting_rows = (stats.prefills + 1, stats.prefill_tokens + count,
                                                                    stats.waiting_rows + running)
        return hidden

    def _collect(self, statuses) -> list[int]:
        """Finish the rows that stopped in this forward (:meth:`.setup.DecodeSetup.stop` says where and why); return
        their slots (now free)."""
        events = [s for s in range(self.n) if self.row_of[s] is not None and (statuses[s].stopped or
                                                                               statuses[s].candidate)]
        if not events:
            return []
        index = torch.tensor(events, device=self.state.gen.device)
        capacity = self.state.gen.shape[1]
        reads = torch.cat([self.state.gen[index], self.state.widths[index]], 1).tolist()
        freed, released = [], []
        for slot, read in zip(events, reads):
            status, record = statuses[slot], self.records[self.row_of[slot]]
            record.tokens = read[:status.prefix]
            stopped = record.stop_at(self.setup.stop(record.tokens, status.seen, record.room))
            assert stopped or not status.stopped, "the device stopped a row the host does not stop"
            if not stopped:
                continue
            if not status.stopped:
                released.append(slot)  # a stop string: the device still runs the row
            record.nfe, record.widths = status.nfe, read[capacity: capacity + status.nfe]
            self.finish_row(slot)
            freed.append(slot)
        if released:
            self.state.release(released)
        return freed

    def finish_row(self, slot: int, verified: bool = False) -> None:
        """Record the row in ``slot`` (``verified``: with its ``accepted`` and ``drafted`` counts) and free the slot."""
        row = self.row_of[slot]
        self.row_of[slot] = None
        record = self.records[row]
        record.finish_time = time.perf_counter() - record.start
        gen = self.results[row] = record.generation(self.setup, verified)
        self.nfe_total, self.tok_total = self.nfe_total + gen.nfe, self.tok_total + gen.num_tokens
        self.bar.update(1)
        self.bar.set_postfix(nfe=self.nfe_total, tok_per_fwd=f"{self.tok_total / max(self.nfe_total, 1):.2f}")
