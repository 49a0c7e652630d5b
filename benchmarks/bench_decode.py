"""The decode benchmark: the reference decoder, the fast engine and Hugging Face generate on the same prompts.

On a random model of a named shape (``--shape``: ``tiny-llama``, the embedded default's model; ``llama-3.1-8b``,
``qwen-3-8b``, with ``--layers`` to cut the depth) or a checkpoint (``--model``), at every ``--batch`` size:

* ``generate``: ``model.generate``, greedy, its dynamic cache; ``generate-static``: the same with
  ``cache_implementation="static"`` (on an accelerator transformers compiles the forward for a static cache);
* ``reference``: the readable decoder (``sbd_core.decoding.reference``, ``engine="reference"``), NTP and SBD;
* ``engine``: the fast engine (``sbd_core.decoding.engine.FastDecoder``), NTP and SBD; compiled on GPUs unless ``--compile`` /
  ``--no-compile`` says otherwise (``DecodeConfig.compile``);

The prompts are random non-special tokens (for a checkpoint too: its tokens per forward on them are not its task's).
SBD mode runs EB at every ``--gamma`` (0: one token per forward; inf: the whole block in one forward). EOS is off,
so every row generates ``--max-new-tokens`` tokens. On a random model every position's distribution is nearly
uniform, so any small gamma reveals one token per forward, as gamma 0 does; ``--logit-scale`` sharpens the random
output layer so that intermediate gammas reveal more (the cost of a forward does not change).

Per configuration: tokens/s, forwards/s (batch forwards after the prefills), ms per forward (wall / forwards, prefill
included), mean tokens per forward (tokens / row NFE), prefill forwards; for the engine what it fed: tokens per
forward and their padding share (tokens fed that are no row's own: a compiled step's bucket padding), the dense
attention's cells per forward and their padding share, the rows that waited during prefills, graphs compiled in the
first run and recompiles in the timed ones (dynamo's graph count); after the timed runs one more run, eager, with synchronised
timers around its phases (``decode_phases.py``) says where a forward's time goes. Then the token checks (engine ==
reference, engine NTP == generate) and the ratios: engine / reference, engine NTP / generate (tokens/s), and SBD
against NTP per decoder (wall speedup beside NFE speedup). Timing: ``--warmup`` runs, then the median of
``--repeats`` synchronised runs. Last output line: one JSON document.

    python benchmarks/bench_decode.py                                  # CPU, tiny-llama, batch 1 and 4 (a few minutes)
    python benchmarks/bench_decode.py --device cuda --shape llama-3.1-8b --batch 1 --decoders engine generate
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import platform
import statistics
import string
import sys
import time
from dataclasses import dataclass

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from torch._dynamo.utils import counters
from transformers import GenerationConfig, PreTrainedTokenizerFast

from decode_checks import jsonable, label, print_rows, print_summary, ratios, token_checks
from decode_phases import CallCounter, PhaseTimer, counted_forwards, engine_phases, model_forward_phases
from sbd_core import checkpoint
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.setup import never_generated_ids
from sbd_core.mask_token import mask_token_id, setup_mask_token
from sbd_core.decoding.solvers import get_solver
from sbd_core.timing import device_name, random_model

DECODERS = ("generate", "generate-static", "reference", "engine")
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|reserved_special_token_0|>"]  # bos, eos, pad, mask


@dataclass
class Settings:
    """Every setting of the benchmark, with its default."""

    shape: str = "tiny-llama"  # a named shape with random weights (sbd_core.roofline.MODELS) ...
    model: str | None = None  # ... or a checkpoint folder
    layers: int | None = None  # with shape: this many layers (default: all)
    device: str = "cpu"
    dtype: str | None = None  # None: float32 on the CPU, bfloat16 on an accelerator
    batch: tuple[int, ...] = (1, 4)
    prompts: int = 4  # the same prompts for every configuration
    prompt_lengths: tuple[int, ...] = (16, 48)  # prompt i has length prompt_lengths[i % len]
    max_new_tokens: int = 32
    block_size: int = 16
    gammas: tuple[float, ...] = (0.0, math.inf)
    decoders: tuple[str, ...] = DECODERS
    modes: tuple[str, ...] = ("ntp", "sbd")
    compile: bool | None = None  # the engine's DecodeConfig.compile (None: on GPUs)
    warmup: int = 1  # >= 1: the first run also gives the tokens and the forward count
    repeats: int = 3
    breakdown: bool = True
    logit_scale: float = 1.0
    seed: int = 0
    threads: int = 0  # 0: all CPUs

    def __post_init__(self):
        unknown = set(self.decoders) - set(DECODERS)
        if unknown or not set(self.modes) <= {"ntp", "sbd"}:
            raise SystemExit(f"error: --decoders must be among {DECODERS} and --modes among ntp, sbd")
        if self.warmup < 1 or self.repeats < 1 or min(self.prompt_lengths) < 2:
            raise SystemExit("error: --warmup and --repeats must be >= 1 and every prompt length >= 2")
        self.dtype = self.dtype or ("float32" if self.device == "cpu" else "bfloat16")


@dataclass
class Config:
    """One measured configuration."""

    decoder: str
    mode: str
    batch: int
    gamma: float | None = None  # SBD only

    @property
    def label(self) -> str:
        return label(self.mode, self.gamma)


@dataclass
class Outcome:
    """One run: per row its tokens and NFE, and the batch forwards after the prefills; what they fed, where known."""

    tokens: list[list[int]]
    nfe: list[int]
    forwards: int
    fed: dict | None = None  # tokens fed, the rows' own (their widths), prefill forwards, rows waiting on them


# ------------------------------------------------------------------------------------------------- model, prompts
def vocab_tokenizer(size: int) -> PreTrainedTokenizerFast:
    """A word-level tokenizer of ``size`` ids: the specials, printable characters, then ``<i>`` fillers."""
    names = (SPECIALS + list(string.printable) + [f"<{i}>" for i in range(size)])[:size]
    core = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(names)}, unk_token="?"))
    core.pre_tokenizer, core.decoder = pre_tokenizers.Split("", "isolated"), decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="?")
    tok.add_special_tokens({"additional_special_tokens": SPECIALS})
    tok.bos_token, tok.eos_token, tok.pad_token = SPECIALS[:3]
    return tok


def build_model(s: Settings):
    """``(model, tokenizer, description)``: the checkpoint, or a random model of the named shape."""
    torch.manual_seed(s.seed)
    if s.model is not None:
        model, tok = checkpoint.load(s.model, s.device, s.dtype)
        if "sbd" in s.modes and mask_token_id(model, required=False) is None:
            raise SystemExit(f"error: {s.model} records no SBD mask token; decode it with --modes ntp")
        return model, tok, f"checkpoint {s.model}"
    context = max(s.prompt_lengths) + s.max_new_tokens + 2 * s.block_size + 64
    model = random_model(s.shape, s.layers, s.device, checkpoint.torch_dtype(s.dtype), context)
    model.set_attn_implementation("sdpa")
    tok = vocab_tokenizer(model.get_output_embeddings().weight.shape[0])
    setup_mask_token(tok, model)  # the reserved special token
    if s.logit_scale != 1.0:
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(s.logit_scale)
    return model, tok, f"random {s.shape}" + (f" ({s.layers} layers)" if s.layers else "")


def make_prompts(s: Settings, tok) -> list[list[int]]:
    """``s.prompts`` random prompts of non-special tokens, lengths cycling through ``s.prompt_lengths``."""
    allowed = torch.tensor(sorted(set(range(len(tok))) - set(tok.all_special_ids)))
    gen = torch.Generator().manual_seed(s.seed)
    return [allowed[torch.randint(len(allowed), (s.prompt_lengths[i % len(s.prompt_lengths)],), generator=gen)]
            .tolist() for i in range(s.prompts)]


# ------------------------------------------------------------------------------------------------- runners
def solver_of(config: Config):
    return get_solver("topk", n=1) if config.mode == "ntp" else get_solver("eb", gamma=config.gamma)


def decode_config(config: Config, s: Settings, engine: str, compile_: bool | None = None) -> DecodeConfig:
    return DecodeConfig(mode=config.mode, block_size=s.block_size, max_new_tokens=s.max_new_tokens, eos_token_ids=(),
                        batch_size=config.batch, engine=engine, compile=compile_)


def timed_solver(timer: PhaseTimer | None, solver):
    if timer is None:
        return solver
    wrapped = timer.timed("solver", solver)
    wrapped.rule = solver.rule  # what the decoders read off a solver
    return wrapped


def engine_run(model, tok, config: Config, s: Settings, timer: PhaseTimer | None = None):
    """The engine, compiled as ``s.compile`` says; with a ``timer``, eager and with its phases timed."""
    compile_ = False if timer is not None else s.compile
    engine = FastDecoder(model, tok, decode_config(config, s, "fast", compile_), timed_solver(timer, solver_of(config)))

    def run(prompts):
        with engine_phases(timer) if timer is not None else contextlib.nullcontext():
            gens = engine.generate(prompts)
        stats = engine.stats
        fed = {"tokens_fed": stats.fed_tokens, "row_tokens": sum(sum(g.widths) for g in gens),
               "prefill_forwards": stats.prefills, "rows_waiting_on_prefill": stats.waiting_rows,
               "attention_cells": stats.attention_cells}
        return Outcome([g.token_ids for g in gens], [g.nfe for g in gens], engine.forwards, fed)

    return run, engine.compile


def reference_run(model, tok, config: Config, s: Settings, timer: PhaseTimer | None = None):
    """The reference decoder; its forwards are counted (a call counter, no synchronisation), one prefill per batch."""
    decoder = BlockDecoder(model, tok, decode_config(config, s, "reference"), timed_solver(timer, solver_of(config)))
    batches = CallCounter()
    decoder.decode_batch = batches.wrap(decoder.decode_batch)

    def run(prompts):
        start = batches.calls
        with contextlib.ExitStack() as stack:
            if timer is not None:
                stack.enter_context(model_forward_phases(timer, model, lambda: batches.calls))
            calls = stack.enter_context(counted_forwards(model))
            gens = decoder.generate(prompts)
        prefills = batches.calls - start
        return Outcome([g.token_ids for g in gens], [g.nfe for g in gens], calls.calls - prefills,
                       {"prefill_forwards": prefills})

    return run, False


def generate_run(model, tok, config: Config, s: Settings, excluded, static: bool, timer: PhaseTimer | None = None):
    """``model.generate`` greedy over chunks of ``config.batch`` left-padded prompts. With EOS off every chunk makes
    ``max_new_tokens - 1`` forwards after its prefill (the prefill gives the first token)."""
    model.generation_config.eos_token_id = None  # else a None in the call's config falls back to the model's EOS
    gen_config = GenerationConfig(max_new_tokens=s.max_new_tokens, do_sample=False, eos_token_id=None,
                                  pad_token_id=tok.pad_token_id, suppress_tokens=list(excluded) or None,
                                  cache_implementation="static" if static else None)
    starts = CallCounter()

    def run(prompts):
        tokens = []
        with model_forward_phases(timer, model, lambda: starts.calls) if timer else contextlib.nullcontext():
            for lo in range(0, len(prompts), config.batch):
                chunk = prompts[lo: lo + config.batch]
                width = max(len(p) for p in chunk)
                ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in chunk], device=model.device)
                mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=model.device)
                starts.calls += 1
                tokens += model.generate(ids, attention_mask=mask, generation_config=gen_config)[:, width:].tolist()
        if any(len(t) != s.max_new_tokens for t in tokens):
            raise RuntimeError("generate stopped early: EOS was not disabled")
        steps = s.max_new_tokens - 1
        return Outcome(tokens, [steps] * len(prompts), math.ceil(len(prompts) / config.batch) * steps)

    compiled = static and model.device.type != "cpu"  # transformers compiles a static-cache forward off the CPU
    return run, compiled


def make_run(config: Config, model, tok, s: Settings, excluded, timer=None):
    """``(run, compiled)``: the configuration's ``run(prompts) -> Outcome`` and whether its forward is compiled."""
    if config.decoder == "engine":
        return engine_run(model, tok, config, s, timer)
    if config.decoder == "reference":
        return reference_run(model, tok, config, s, timer)
    return generate_run(model, tok, config, s, excluded, config.decoder == "generate-static", timer)


# ------------------------------------------------------------------------------------------------- measuring
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def fed_columns(outcome: Outcome) -> dict:
    """What a run fed per forward: tokens and their padding share, the dense attention's cells and theirs, prefill
    forwards and the rows that waited during them (None where the decoder does not say)."""
    fed = outcome.fed or {}
    out = {"prefill_forwards": fed.get("prefill_forwards"), "rows_waiting_on_prefill": fed.get("rows_waiting_on_prefill")}
    if "tokens_fed" in fed:
        row_tokens, forwards = fed["row_tokens"], max(outcome.forwards, 1)
        out.update(tokens_fed_per_fwd=fed["tokens_fed"] / forwards,
                   padding_share=1 - row_tokens / max(fed["tokens_fed"], 1),
                   attention_cells_per_fwd=fed["attention_cells"] / forwards,
                   attention_padding_share=1 - row_tokens / fed["attention_cells"] if fed["attention_cells"] else None)
    return out


def configs_of(s: Settings) -> list[Config]:
    """Every configuration, batch by batch: generate (NTP only), then the reference and the engine per mode."""
    out = []
    for batch in s.batch:
        out += [Config(d, "ntp", batch) for d in ("generate", "generate-static") if d in s.decoders and "ntp" in s.modes]
        for mode in [m for m in ("ntp", "sbd") if m in s.modes]:
            for gamma in ([None] if mode == "ntp" else s.gammas):
                out += [Config(d, mode, batch, gamma) for d in ("reference", "engine") if d in s.decoders]
    return out


def measure(config: Config, model, tok, s: Settings, prompts, excluded) -> tuple[dict, dict]:
    """The configuration's row (median of the timed runs, and the instrumented run's split) and its outcomes: the
    first run's and, when instrumented, the eager instrumented run's."""
    run, compiled = make_run(config, model, tok, s, excluded)
    graphs = counters["stats"]["unique_graphs"]
    first = run(prompts)  # the first warm-up: compiles where compiled, gives the tokens and the forward count
    for _ in range(s.warmup - 1):
        run(prompts)
    warm = counters["stats"]["unique_graphs"]
    times = []
    for _ in range(s.repeats):
        sync(model.device)
        start = time.perf_counter()
        run(prompts)
        sync(model.device)
        times.append(time.perf_counter() - start)
    wall, tokens = statistics.median(times), sum(len(t) for t in first.tokens)
    row = {"decoder": config.decoder, "mode": config.mode, "gamma": config.gamma, "batch": config.batch,
           "compiled": compiled, "wall_s": wall, "tok_per_s": tokens / wall, "fwd_per_s": first.forwards / wall,
           "ms_per_fwd": 1000 * wall / first.forwards, "tok_per_fwd": tokens / sum(first.nfe),
           "forwards": first.forwards, "tokens": tokens, "times_s": times, **fed_columns(first),
           "graphs_warmup": warm - graphs, "recompiles_after_warmup": counters["stats"]["unique_graphs"] - warm}
    outcomes = {"first": first}
    if s.breakdown and (config.decoder == "engine" or not compiled):  # a compiled generate has no phases to time
        timer = PhaseTimer(model.device)
        instrumented, _ = make_run(config, model, tok, s, excluded, timer)
        sync(model.device)
        start = time.perf_counter()
        outcomes["instrumented"] = instrumented(prompts)
        sync(model.device)
        row.update(timer.split(time.perf_counter() - start, outcomes["instrumented"].forwards))
    return row, outcomes


# ------------------------------------------------------------------------------------------------- main
def parse(argv=None) -> tuple[Settings, str | None]:
    d = Settings()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default=d.shape, help="a named shape with random weights (sbd_core.roofline.MODELS)")
    p.add_argument("--model", default=d.model, help="a checkpoint folder instead of --shape")
    p.add_argument("--layers", type=int, default=d.layers, help="with --shape: this many layers")
    p.add_argument("--device", default=d.device)
    p.add_argument("--dtype", default=d.dtype, help="default: float32 on the CPU, bfloat16 on an accelerator")
    p.add_argument("--batch", type=int, nargs="+", default=list(d.batch))
    p.add_argument("--prompts", type=int, default=d.prompts)
    p.add_argument("--prompt-lengths", type=int, nargs="+", default=list(d.prompt_lengths))
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--block-size", type=int, default=d.block_size)
    p.add_argument("--gamma", type=float, nargs="+", default=list(d.gammas), help="EB's gamma (inf: whole blocks)")
    p.add_argument("--decoders", nargs="+", default=list(d.decoders), choices=DECODERS)
    p.add_argument("--modes", nargs="+", default=list(d.modes), choices=("ntp", "sbd"))
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=d.compile,
                   help="compile the engine's step (default: on GPUs only)")
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--repeats", type=int, default=d.repeats)
    p.add_argument("--no-breakdown", action="store_true", help="skip the instrumented run of each configuration")
    p.add_argument("--logit-scale", type=float, default=d.logit_scale)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--threads", type=int, default=d.threads, help="0: all CPUs")
    p.add_argument("--json", help="also write the JSON document to this file")
    a = p.parse_args(argv)
    settings = Settings(shape=a.shape, model=a.model, layers=a.layers, device=a.device, dtype=a.dtype,
                        batch=tuple(a.batch), prompts=a.prompts, prompt_lengths=tuple(a.prompt_lengths),
                        max_new_tokens=a.max_new_tokens, block_size=a.block_size, gammas=tuple(a.gamma),
                        decoders=tuple(a.decoders), modes=tuple(a.modes), compile=a.compile, warmup=a.warmup,
                        repeats=a.repeats, breakdown=not a.no_breakdown, logit_scale=a.logit_scale, seed=a.seed,
                        threads=a.threads)
    return settings, a.json


def main(argv=None) -> None:
    s, json_path = parse(argv)
    torch.set_num_threads(s.threads or os.cpu_count())
    load_start = os.getloadavg()[0]
    model, tok, what = build_model(s)
    device = model.device
    prompts = make_prompts(s, tok)
    excluded = never_generated_ids(model, tok, frozenset())
    params = sum(p.numel() for p in model.parameters())
    print(f"{what}: {type(model).__name__}, {params / 1e6:.1f}M parameters, {s.dtype}, {device_name(s.device)}, "
          f"{torch.get_num_threads()} threads; {len(prompts)} prompts of {sorted(set(map(len, prompts)))} tokens, "
          f"{s.max_new_tokens} new tokens each (EOS off), blocks of {s.block_size}", flush=True)
    results = {}
    for config in configs_of(s):
        row, outcomes = measure(config, model, tok, s, prompts, excluded)
        results[config.decoder, config.mode, config.gamma, config.batch] = (row, outcomes)
        print(f"  {config.decoder} {config.label} batch {config.batch}: {row['tok_per_s']:.1f} tok/s, "
              f"{row['ms_per_fwd']:.2f} ms/fwd", flush=True)
    rows = [row for row, _ in results.values()]
    print_rows(rows)
    checks, found = token_checks(results), ratios(rows)
    print_summary(checks, found)
    load_end = os.getloadavg()[0]
    cpus = os.cpu_count()
    print(f"load average (1 min) {load_start:.1f} at the start, {load_end:.1f} at the end, on {cpus} CPUs"
          + ("; other processes shared the cores: timings are noisy" if max(load_start, load_end) > 0.5 * cpus else ""))
    doc = {"benchmark": "bench_decode", "settings": dataclasses.asdict(s), "command": sys.argv,
           "model": {"source": what, "class": type(model).__name__, "params": params, "vocab": len(tok)},
           "env": {"torch": torch.__version__, "transformers": transformers.__version__,
                   "python": platform.python_version(), "device": device_name(s.device), "cpu_count": cpus,
                   "threads": torch.get_num_threads(), "load_avg_start": load_start, "load_avg_end": load_end},
           "rows": rows, "checks": checks, "ratios": found}
    text = json.dumps(jsonable(doc))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
