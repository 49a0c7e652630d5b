"""Where a decoder's time goes: synchronised timers around its phases, for one instrumented run of bench_decode.py.

Kept out of the decoders' hot paths: the timers wrap methods from outside, for one run, and are removed after it.
On a GPU every timer synchronises before and after its phase, so the phases' sum is the time the host waited for
them; the instrumented run is therefore slower than the timed ones and is reported beside them, never instead of
them. Phases (seconds, summed over the run):

* ``model``: the model's forward of the decode steps (the engine's ``CachedForward.__call__`` and ``.logits``
  outside a prefill; the reference's and ``generate``'s ``model.forward`` calls after each batch's first);
* ``prefill``: the prompts' forwards (the engine's ``CachedForward.prefill``; the first forward of each batch);
* ``solver``: the solver's calls (``(logits, masked) -> (reveal, tokens)``);
* ``state``: the engine's device bookkeeping around the solver (``Slots.update`` minus the solver: block state,
  EOS / length checks, status); the reference does its bookkeeping on the host;
* ``host``: everything else of the run's wall time (inputs, masks, cache crops, status reads, Python).
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict

import torch

from sbd_core.decoding.engine.forward import CachedForward
from sbd_core.decoding.engine.slots import Slots

PHASES = ("model", "prefill", "solver", "state", "host")


class PhaseTimer:
    """Synchronised seconds per phase."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.seconds: dict[str, float] = defaultdict(float)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def timed(self, phase, fn):
        """``fn`` wrapped: its synchronised duration added to ``phase`` (a name, or a function of the call's
        arguments that returns one, or None: not timed)."""
        def wrapper(*args, **kwargs):
            name = phase(*args, **kwargs) if callable(phase) else phase
            if name is None:  # a call inside another timed phase
                return fn(*args, **kwargs)
            self.sync()
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            self.sync()
            self.seconds[name] += time.perf_counter() - start
            return out

        return wrapper

    def split(self, wall_s: float, forwards: int) -> dict:
        """ms per forward of each phase (``host``: the rest of ``wall_s``), and the instrumented run's own total."""
        spent = dict(self.seconds)
        if "update" in spent:  # the engine's Slots.update holds its solver calls
            spent["state"] = spent.pop("update") - spent.get("solver", 0.0)
        spent["host"] = wall_s - sum(spent.get(p, 0.0) for p in PHASES if p != "host")
        per = 1000 / max(forwards, 1)
        return {**{f"{p}_ms": spent.get(p, 0.0) * per for p in PHASES}, "instrumented_ms_per_fwd": wall_s * per}


@contextlib.contextmanager
def engine_phases(timer: PhaseTimer):
    """Time the fast engine's phases (its classes' methods wrapped for the duration; the engine must run eagerly:
    a compiled step has no phases to wrap)."""
    saved = {(cls, name): getattr(cls, name) for cls, name in
             ((CachedForward, "__call__"), (CachedForward, "logits"), (CachedForward, "prefill"), (Slots, "update"))}
    prefilling = []  # non-empty while a prefill runs: its forward is the prefill's time, not the model's
    model = lambda *args, **kwargs: None if prefilling else "model"  # noqa: E731
    phase = {"__call__": model, "logits": "model", "prefill": "prefill", "update": "update"}

    def flagged(fn):
        def wrapper(*args, **kwargs):
            prefilling.append(True)
            try:
                return fn(*args, **kwargs)
            finally:
                prefilling.pop()
        return wrapper

    try:
        for (cls, name), fn in saved.items():
            setattr(cls, name, timer.timed(phase[name], flagged(fn) if name == "prefill" else fn))
        yield
    finally:
        for (cls, name), fn in saved.items():
            setattr(cls, name, fn)


@contextlib.contextmanager
def model_forward_phases(timer: PhaseTimer, model, batch_starts):
    """Time ``model.forward``: the first call after each ``batch_starts()`` increment is the batch's prefill, the
    others are decode steps."""
    state = {"seen": None}

    def phase(*args, **kwargs):
        starts = batch_starts()
        first = state["seen"] != starts
        state["seen"] = starts
        return "prefill" if first else "model"

    with wrapped_forward(model, lambda forward: timer.timed(phase, forward)):
        yield


class CallCounter:
    """Counts calls of a wrapped function (a batch's start, a forward); no synchronisation."""

    def __init__(self):
        self.calls = 0

    def wrap(self, fn):
        def wrapper(*args, **kwargs):
            self.calls += 1
            return fn(*args, **kwargs)

        return wrapper


@contextlib.contextmanager
def counted_forwards(model):
    """Count ``model.forward`` calls for the duration (the reference decoder's forwards)."""
    counter = CallCounter()
    with wrapped_forward(model, counter.wrap):
        yield counter


@contextlib.contextmanager
def wrapped_forward(model, wrap):
    """``model.forward`` replaced by ``wrap(model.forward)`` (an instance attribute) for the duration; nests."""
    before = model.__dict__.get("forward")
    model.forward = wrap(model.forward)
    try:
        yield
    finally:
        if before is None:
            del model.forward
        else:
            model.forward = before
