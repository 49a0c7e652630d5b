"""The engine's overhead per forward: one eager engine step against a bare Hugging Face forward of the same tokens.

On a random model of a named shape (default ``tiny-llama``, the embedded default's model), ``--batch`` rows with
``--kv-len`` cached keys each:

* ``engine``: :class:`sbd_core.decoding.engine.decoder.Stepper` running one step from a fixed state: the ragged batch, the
  forward (dense attention plan), the logits, the solver (EB, gamma 0.1), the bookkeeping and the host's one read;
* ``hf``: ``model(input_ids [batch, width], cache=DynamicCache with the same keys)`` and its logits (the cache is
  cropped back outside the timed call), the cheapest forward transformers offers for the same tokens;
* ``hf (A/A)``: the same HF forward again, timed as a second arm: the spread of a null comparison.

Per mode (``ntp``: one token per row; ``block``: an SBD block of ``--block-size``; ``refeed``: the block and the finished
one re-fed, 2k) the arms run interleaved (``engine, hf, hf``, rotated round by round; ``--rounds`` rounds of
``--calls`` calls each, after a warm-up); a round's time per call is its median. It prints per arm the median over rounds, the per-round ratios
``engine / hf`` and ``hf (A/A) / hf`` (median and range), and the aten operations of one call of each. Last output
line: one JSON document. A loaded machine widens the ranges: run with ``--threads 1`` beside nothing else if you can,
else with ``--clock thread`` (CPU time of the calling thread: the time other processes held the core left out).

    python benchmarks/bench_step.py --threads 1                  # tiny-llama, batch 4, kv 64, k 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import DynamicCache

from sbd_core.decoding.engine.decoder import Stepper
from sbd_core.decoding.engine.forward import CachedForward
from sbd_core.decoding.engine.slots import Shape, Slots
from sbd_core.decoding.solvers import excluded_index, get_solver
from sbd_core.timing import random_model


class OpCounter(TorchDispatchMode):
    """Counts the aten operations dispatched while active."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def engine_arm(model, batch: int, kv_len: int, k: int, mode: str):
    """``(prepare, call)``: restore the state (untimed), run one step (timed)."""
    vocab = model.get_output_embeddings().weight.shape[0]
    block = 1 if mode == "ntp" else k
    forward = CachedForward(model, batch, kv_len + 2 * block)
    state = Slots(batch, block, 4 * block + 8, "ntp" if mode == "ntp" else "sbd", vocab - 1,
                  torch.zeros(vocab, dtype=torch.bool), None, excluded_index([vocab - 1], vocab, "cpu"),
                  get_solver("eb", gamma=0.1), "cpu")
    state.admit(torch.arange(batch), torch.full((batch,), kv_len), torch.full((batch,), 4 * block),
                torch.zeros(batch, dtype=torch.long))
    state.pending.fill_(mode == "refeed")
    saved = state.snapshot()
    shape, stepper = Shape(*state.next_shape().tolist()), Stepper(state, forward, False, "dense")

    def prepare():
        state.restore(saved)

    return prepare, lambda: stepper(shape)


def hf_arm(model, batch: int, kv_len: int, width: int):
    """``(prepare, call)``: crop the cache back (untimed), one forward of ``width`` tokens per row (timed)."""
    vocab = model.get_output_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.randint(4, vocab, (batch, kv_len), generator=gen), cache=cache, use_cache=True)
    ids = torch.randint(4, vocab, (batch, width), generator=gen)

    def prepare():
        if cache.get_seq_length() > kv_len:
            cache.crop(kv_len - cache.get_seq_length())

    return prepare, lambda: model(input_ids=ids, cache=cache, use_cache=True).logits


def measure(arms: dict, rounds: int, calls: int, clock) -> dict[str, list[float]]:
    """Per arm, each round's median ms per call; arms interleaved within every round, in an order rotated round by
    round (no arm always runs first)."""
    per_round = {name: [] for name in arms}
    names = list(arms)
    for i in range(rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            prepare, call = arms[name]
            times = []
            for _ in range(calls):
                prepare()
                start = clock()
                call()
                times.append(clock() - start)
            per_round[name].append(1000 * statistics.median(times))
    return per_round


def ops_of(prepare, call) -> Counter:
    prepare()
    with OpCounter() as counter:
        call()
    return counter.ops


def ratio_summary(numerator: list[float], denominator: list[float]) -> dict:
    ratios = [a / b for a, b in zip(numerator, denominator)]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="tiny-llama")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--kv-len", type=int, default=64)
    p.add_argument("--block-size", type=int, default=6)
    p.add_argument("--modes", nargs="+", default=["ntp", "block", "refeed"], choices=("ntp", "block", "refeed"))
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--clock", choices=("wall", "thread"), default="wall",
                   help="thread: the calling thread's CPU time (with --threads 1 on a shared machine: excludes the time "
                        "other processes held the core)")
    a = p.parse_args(argv)
    clock = time.perf_counter if a.clock == "wall" else time.thread_time
    torch.set_num_threads(a.threads)
    model = random_model(a.shape, None, "cpu", torch.float32, a.kv_len + 4 * a.block_size + 128)
    model.set_attn_implementation("sdpa")
    load = os.getloadavg()[0]
    results = []
    with torch.no_grad():
        for mode in a.modes:
            width = {"ntp": 1, "block": a.block_size, "refeed": 2 * a.block_size}[mode]
            arms = {"engine": engine_arm(model, a.batch, a.kv_len, a.block_size, mode),
                    "hf": hf_arm(model, a.batch, a.kv_len, width), "hf (A/A)": hf_arm(model, a.batch, a.kv_len, width)}
            measure(arms, 1, a.calls, clock)  # warm-up
            times = measure(arms, a.rounds, a.calls, clock)
            ops = {name: sum(ops_of(*arm).values()) for name, arm in arms.items()}
            row = {"mode": mode, "width": width, "ms": {n: statistics.median(t) for n, t in times.items()},
                   "engine_over_hf": ratio_summary(times["engine"], times["hf"]),
                   "aa_over_hf": ratio_summary(times["hf (A/A)"], times["hf"]), "aten_ops": ops}
            results.append(row)
            e, aa = row["engine_over_hf"], row["aa_over_hf"]
            print(f"{mode} ({width} tokens per row): engine {row['ms']['engine']:.3f} ms, hf {row['ms']['hf']:.3f} ms; "
                  f"engine / hf {e['median']:.3f} [{e['min']:.3f}, {e['max']:.3f}], A/A {aa['median']:.3f} "
                  f"[{aa['min']:.3f}, {aa['max']:.3f}]; aten ops engine {ops['engine']}, hf {ops['hf']}", flush=True)
    load_end = os.getloadavg()[0]
    print(f"load average (1 min) {load:.1f} at the start, {load_end:.1f} at the end, on {os.cpu_count()} CPUs")
    print(json.dumps({"benchmark": "bench_step", "settings": vars(a), "command": sys.argv, "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "load_avg": [load, load_end], "rows": results}))


if __name__ == "__main__":
    main()
