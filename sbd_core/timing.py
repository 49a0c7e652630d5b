"""time(k): the latency of the fast engine's steps on this machine (``python -m sbd_core timing``, the ``timing`` stage).

For a checkpoint, or a named model shape with random weights (no download), and every (batch, width, cached keys):

* ``ntp``: the NTP step (one token per row, its logits, the next token, the stop checks);
* ``block``: an SBD step feeding a block of ``width`` tokens per row (its logits, the solver, the bookkeeping);
* ``refeed``: the first SBD step of a block, ``width / 2`` re-fed tokens plus the new block (the re-feed rule:
  :mod:`sbd_core.decoding.reference`; logits for the new block only).

Each is the engine's own step (:meth:`sbd_core.decoding.engine.slots.Slots.step` through
:class:`sbd_core.decoding.engine.decoder.Stepper`, the one host read included), every call from the same state. Measured as the
speed stage measures (:mod:`sbd_core.rounds`): ``rounds`` rounds, every (step, batch, width, cached keys) once per round
in a fresh random order (seeded, recorded as ``orders``); in its turn a point is set up anew, called ``warmup`` times
untimed and ``repeats`` times timed (each call between two device synchronisations), and the median of those is its
value in that round. A row of the file holds every round's value (``rounds_ms``), their median (``median_ms``) and its
order-statistic interval over rounds (``lo_ms``, ``hi_ms``). The file's format is
:mod:`sbd_core.records.timing`'s; the report predicts each run's wall speedup from it (eq. 16), one
prediction per round, and flags steps that are implausible (:func:`sbd_core.report.prediction.implausible_steps`).
"""

from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from . import checkpoint
from .decoding.engine.decoder import Stepper
from .decoding.engine.forward import CachedForward
from .decoding.engine.slots import Shape, Slots
from .decoding.solvers import excluded_index, get_solver
from .errors import UserError, user_input
from .provenance import provenance
from .records.timing import block_of, timing_document, timing_row, write_timing
from .roofline import MODELS
from .rounds import median_interval, round_orders
from .settings import TimingSettings

DEFAULT_WIDTHS = TimingSettings.widths  # 1, 2, 4, ..., 64


def random_model(shape_name: str, layers: int | None, device: str, dtype: torch.dtype, context: int):
    """A Llama- or Qwen-3-class model of a named shape (:data:`sbd_core.roofline.MODELS`) with random weights."""
    if shape_name not in MODELS or MODELS[shape_name].as_printed:
        known = sorted(n for n, s in MODELS.items() if not s.as_printed)
        raise UserError(f"unknown model shape {shape_name!r}; known: {known} (or give --model CHECKPOINT)")
    shape = MODELS[shape_name]
    common = dict(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
                  num_hidden_layers=layers or shape.layers, num_attention_heads=shape.heads,
                  num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim, max_position_embeddings=context)
    make = (Qwen3ForCausalLM, Qwen3Config) if shape_name.startswith("qwen") else (LlamaForCausalLM, LlamaConfig)
    with torch.device(device):
        model = make[0](make[1](**common)).to(dtype)
    return model.eval()


def synchronize(device) -> None:
    """Wait for the device's queued kernels (a GPU); nothing on the CPU, where every call returns when done."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def prepared_step(model, step: str, width: int, batch: int, kv_len: int, compile_step: bool = False):
    """``(reset, call)``: ``call`` runs ``step`` (ntp, block, refeed) at ``width`` tokens per row, ``batch`` rows and
    ``kv_len`` cached keys; ``reset`` puts the state back where the first call found it."""
    block = block_of(step, width)
    mode = "ntp" if step == "ntp" else "sbd"
    vocab, device = model.get_output_embeddings().weight.shape[0], model.device
    forward = CachedForward(model, batch, kv_len + 2 * block)
    state = Slots(batch, block, kv_len + 4 * block, mode, vocab - 1, torch.zeros(vocab, dtype=torch.bool,
                  device=device), None, excluded_index((), vocab, device), get_solver("eb", gamma=0.1), device)
    state.hold(kv_len, 10 * block + 10, refeed=step == "refeed")
    saved = state.snapshot()
    shape = Shape(*state.next_shape().tolist())
    if compile_step:  # every point is another engine's step: dynamo's caches start empty (a point's graphs are its own)
        torch._dynamo.reset()
    run = Stepper(state, forward, compile_step, "flex" if compile_step and device.type == "cuda" else "dense")

    def reset():
        state.restore(saved)

    def call():
        run(shape)  # the engine's one host read (synchronises)

    return reset, call


def time_calls(reset, call, device, warmup: int, repeats: int) -> float:
    """The median milliseconds of ``repeats`` synchronised calls after ``warmup`` untimed ones, each from the state
    ``reset`` restores (not timed)."""
    times = []
    for i in range(warmup + repeats):
        reset()
        synchronize(device)
        start = time.perf_counter()
        call()
        synchronize(device)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def steps_for(widths, block_sizes) -> list[tuple[str, int]]:
    """(step, width) pairs: ntp at width 1, block steps at every other width and block size, re-feeds at 2k."""
    out = [("ntp", 1)] if 1 in widths else []
    out += [("block", w) for w in sorted(set(widths) | set(block_sizes)) if w > 1]
    out += [("refeed", 2 * k) for k in sorted(set(block_sizes))]
    return out


def run_timing(out: Path, model_dir: Path | None = None, shape: str | None = None, layers: int | None = None,
               device: str = "cpu", dtype: str = "float32", batches=(1,), widths=DEFAULT_WIDTHS, block_sizes=(),
               kv_lens=(128,), warmup: int = TimingSettings.warmup, repeats: int = TimingSettings.repeats,
               compile_step: bool = False, progress: bool = True, budget_s: float | None = None,
               rounds: int = TimingSettings.rounds, seed: int = TimingSettings.seed) -> dict:
    """Measure every (step, batch, kv_len) in rounds (module docstring) and write the time(k) file; returns its
    contents. With ``budget_s``, no measurement but the first starts after that many seconds of measuring (a compiled
    point can take tens of seconds): the file then holds the rounds measured so far, with ``complete: false`` and the
    number of measurements left ``unmeasured``."""
    if (model_dir is None) == (shape is None):
        raise UserError("give exactly one of --model CHECKPOINT or --shape NAME")
    if warmup < 0 or repeats < 1 or rounds < 1:
        raise UserError(f"--warmup must be >= 0, --repeats and --rounds >= 1, got {warmup}, {repeats} and {rounds}")
    if budget_s is not None and budget_s <= 0:
        raise UserError(f"--budget-s must be > 0, got {budget_s}")
    with user_input("--dtype"):
        torch_dtype = checkpoint.torch_dtype(dtype)
    context = max(kv_lens) + 2 * max([*widths, *block_sizes])
    if model_dir is not None:
        model, _ = checkpoint.load(model_dir, device, dtype)
        name, source = Path(model_dir).name, str(model_dir)
    else:
        model, name, source = random_model(shape, layers, device, torch_dtype, context), shape, "random weights"
    plan = [(step, w, b, n) for step, w in steps_for(widths, block_sizes) for b in batches for n in kv_lens]
    orders = round_orders(plan, rounds, seed)
    measured: dict[tuple, list[float]] = {point: [] for point in plan}
    done, start = 0, time.perf_counter()
    for r, order in enumerate(orders, 1):
        for point in order:
            if done and budget_s is not None and time.perf_counter() - start > budget_s:
                break  # the first measurement always runs
            reset, call = prepared_step(model, *point, compile_step)
            measured[point].append(time_calls(reset, call, model.device, warmup, repeats))
            done += 1
        if progress:
            print(f"timing round {r}/{rounds}: {done} of {len(plan) * rounds} measurements", flush=True)
    rows = [_row(point, times) for point, times in measured.items() if times]
    config = model.config
    result = timing_document(
        device=device, device_name=device_name(device), dtype=dtype, warmup=warmup, repeats=repeats, rounds=rounds,
        seed=seed, compiled=compile_step, threads=torch.get_num_threads(), complete=done == len(plan) * rounds,
        unmeasured=len(plan) * rounds - done, rows=rows, orders=[[list(point) for point in order] for order in orders],
        model={"name": name, "source": source, "class": type(model).__name__,
               "shape": {"hidden": config.hidden_size, "layers": config.num_hidden_layers,
                         "heads": config.num_attention_heads, "kv_heads": config.num_key_value_heads,
                         "intermediate": config.intermediate_size, "vocab": config.vocab_size}})
    write_timing(result, provenance("timing", {"out": str(out)}), out)
    return result


def _row(point: tuple, times: list[float]) -> dict:
    """A time(k) row: the point, every round's value and their median with its interval over rounds (ms)."""
    step, width, batch, kv_len = point
    return timing_row(step, width, batch, kv_len, median_interval(times), times)


def device_name(device: str) -> str:
    """The accelerator's name, or the CPU's model name."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
