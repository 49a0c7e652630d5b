"""The decode stage: one model, one sampler, one benchmark's test problems -> completions and their cost.

It writes ``<benchmark>.jsonl``, one record per problem with its cost (widths and blocks included), and
``<benchmark>.jsonl.provenance.json`` beside it with the sampler spec, the decode and benchmark settings, the model's
training recipe and ``total_wall_time_s`` (this job's decode, model loading excluded: a record, not a measurement the
report compares; wall-clock is the speed stage's, :mod:`.speed`); the format is :mod:`sbd_core.records.generations`'s.
The benchmark is reached through :mod:`sbd_core.benchmarks` only; the speed stage decodes with this module's config.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, fields
from pathlib import Path

from .. import checkpoint
from ..benchmarks import ID_KEY, add_special_tokens_for, get_benchmark
from ..decode_config import DecodeConfig
from ..decoding.factory import make_decoder
from ..errors import UserError, user_input
from ..provenance import model_recipe, provenance
from ..records.generations import generation_record, write_generations
from ..samplers import checked_sampler, decode_mode
from ..settings import RuntimeSettings

log = logging.getLogger("sbd_core")


_SET_BY_THE_STAGE = ("mode", "max_new_tokens", "stop_strings", "add_special_tokens")  # DecodeConfig keys decode sets


def decode_options(decode_spec: dict | None) -> dict:
    """The decode spec (the config's ``decode`` section without the samplers) as DecodeConfig keys, checked:
    UserError naming an unknown key (with the allowed ones) or a bad value."""
    options = dict(decode_spec or {})
    allowed = sorted({f.name for f in fields(DecodeConfig)} - set(_SET_BY_THE_STAGE))
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(f"decode spec: unknown key(s) {unknown}; allowed: {allowed} (the sampler and the benchmark's "
                        f"settings set {list(_SET_BY_THE_STAGE)}; wall-clock is the speed stage's)")
    with user_input("decode spec"):
        DecodeConfig(**options)
    return options


def decode_config(bench, settings, sampler_spec: dict, options: dict, prompts: list[str], tokenizer):
    """The DecodeConfig a sampler decodes a benchmark's ``prompts`` with (the decode and the speed stage: the same)."""
    max_new_tokens, stops = bench.generation(settings)
    return DecodeConfig(mode=decode_mode(sampler_spec), max_new_tokens=max_new_tokens, stop_strings=stops,
                        add_special_tokens=add_special_tokens_for(prompts[0], tokenizer), **options)


def checked_decoder(model, tokenizer, config, sampler_spec: dict, model_dir: Path):
    """The sampler's decoder on a loaded model; UserError naming the model where it cannot decode that way (SBD
    decoding of a checkpoint without a mask token)."""
    with user_input(f"model {model_dir}"):
        return make_decoder(model, tokenizer, config, sampler_spec)  # the spec's mode picks it (a peer: generate)


def run_decode(model_dir: Path, benchmark: str, benchmark_settings: dict | None, test_file: Path, sampler_spec: dict,
               decode_spec: dict, out_path: Path, runtime: RuntimeSettings = RuntimeSettings(),
               progress: bool = True) -> None:
    """Decode the benchmark's test problems with one sampler; one JSON line per problem with completion and cost.

    ``sampler_spec``: a spec of :func:`sbd_core.samplers.sampler_spec`, or a config entry ``{"solver": .., param: ..}``.
    ``decode_spec``: DecodeConfig keys. Accuracy and forwards only: wall-clock is measured by the speed stage
    (:mod:`.speed`), paired and repeated; ``total_wall_time_s`` is this job's decode time, recorded, not compared.
    Every input is checked before the model loads."""
    bench = get_benchmark(benchmark)
    settings = bench.settings(benchmark_settings)
    problems = bench.load(test_file)
    sampler_spec = checked_sampler(sampler_spec)
    options = decode_options(decode_spec)
    model, tokenizer = checkpoint.load(model_dir, runtime.device, runtime.dtype)
    prompts = [bench.prompt(p, tokenizer, settings) for p in problems]
    config = decode_config(bench, settings, sampler_spec, options, prompts, tokenizer)
    decoder = checked_decoder(model, tokenizer, config, sampler_spec, model_dir)
    start = time.perf_counter()
    generations = decoder.generate(prompts, progress=progress)
    elapsed = time.perf_counter() - start
    prompt_tokens = [len(tokenizer(p, add_special_tokens=config.add_special_tokens)["input_ids"]) for p in prompts]
    records = [generation_record(p[ID_KEY], prompt, g, n, config.block_size, sampler_spec["mode"])
               for p, prompt, g, n in zip(problems, prompts, generations, prompt_tokens)]
    record = {"model": str(model_dir), "recipe": model_recipe(model_dir), "benchmark": benchmark,
              "benchmark_settings": asdict(settings),
              "sampler_spec": sampler_spec, "block_size": config.block_size, "batch_size": decoder.config.batch_size,
              "engine": decoder.config.engine, "runtime": asdict(runtime), "total_wall_time_s": elapsed,
              "mean_prompt_tokens": sum(prompt_tokens) / max(len(prompt_tokens), 1)}
    write_generations(records, provenance("decode", record), out_path)
    log.info("decoded %d problems in %.1f s", len(records), elapsed)
