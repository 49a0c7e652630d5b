"""The evaluation stages: benchmark (test problems), decode (one model, one sampler, one benchmark) and score.

Every benchmark is reached through :mod:`sbd_core.benchmarks` only (its settings, prompt, generation limits and scorer),
so adding one touches its module and a config entry, nothing here.

Files (one per line / object):

* decode writes ``<benchmark>.jsonl``, one record per problem with its cost (widths and blocks included), and
  ``<benchmark>.jsonl.provenance.json`` beside it with the sampler spec, the decode and benchmark settings, the model's
  training recipe and ``total_wall_time_s`` (this job's decode, model loading excluded: a record, not a measurement
  the report compares; wall-clock is the speed stage's, :mod:`.speed`); the format is
  :mod:`sbd_core.records.generations`'s;
* score writes one JSON object (:mod:`sbd_core.records.score`'s format): the benchmark's metrics, the NFE and token totals the report derives NFE speedups
  from, the sampler spec, the recipe and the per-problem verdicts, each with its problem's ``nfe`` and ``num_tokens``
  (the report's intervals resample problems), the digest of its tokens (``tokens_sha``: the report checks verified runs
  against NTP mode with it) and a verified run's ``accepted`` / ``drafted`` lengths.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, fields
from pathlib import Path

from .. import checkpoint
from ..benchmarks import ID_KEY, add_special_tokens_for, get_benchmark
from ..errors import UserError, user_input
from ..io_utils import write_json_atomic
from ..provenance import provenance
from ..records.generations import decode_settings, generation_record, read_records, write_generations
from ..records.score import add_decode_cost, write_score
from ..settings import RuntimeSettings

log = logging.getLogger("sbd_core")


def run_benchmark(name: str, settings: dict | None, out_dir: Path) -> Path:
    """Write benchmark ``name``'s test problems (download, local file or generation) into ``out_dir``."""
    bench = get_benchmark(name)
    return bench.fetch(bench.settings(settings), out_dir)


def model_recipe(model_dir: Path) -> dict:
    """What the model's own provenance says about how it was trained (objective and departures from the paper)."""
    path = Path(model_dir) / "provenance.json"
    settings = json.loads(path.read_text()).get("settings", {}) if path.exists() else {}
    return {key: settings[key] for key in ("objective", "departures") if key in settings}


_SET_BY_THE_STAGE = ("mode", "max_new_tokens", "stop_strings", "add_special_tokens")  # DecodeConfig keys decode sets


def decode_options(decode_spec: dict | None) -> dict:
    """The decode spec (the config's ``decode`` section without the samplers) as DecodeConfig keys, checked:
    UserError naming an unknown key (with the allowed ones) or a bad value."""
    from ..decode_config import DecodeConfig

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
    from ..decode_config import DecodeConfig
    from ..samplers import decode_mode

    max_new_tokens, stops = bench.generation(settings)
    return DecodeConfig(mode=decode_mode(sampler_spec), max_new_tokens=max_new_tokens, stop_strings=stops,
                        add_special_tokens=add_special_tokens_for(prompts[0], tokenizer), **options)


def checked_decoder(model, tokenizer, config, sampler_spec: dict, model_dir: Path):
    """The sampler's decoder on a loaded model; UserError naming the model where it cannot decode that way (SBD
    decoding of a checkpoint without a mask token)."""
    from ..decoding.factory import make_decoder

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
    from ..samplers import checked_sampler

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


def score_generations(benchmark: str, generations: Path, data: Path | None = None, settings: dict | None = None,
                      work_dir: Path | None = None) -> dict:
    """The benchmark's verdict on a generations file (``{"id", "completion"}`` per line), plus what the decode stage
    recorded about its cost when the file came from it (``nfe`` in the records, a provenance sidecar beside it).

    ``data`` is the test file the generations answer (the benchmark stage's output, or a file in the source dataset's
    own schema); without it the benchmark's own test set is fetched.
    """
    from ..benchmarks import score_generations as benchmark_verdict

    result = benchmark_verdict(benchmark, generations, data=data, settings=settings, work_dir=work_dir)
    return add_decode_cost(result, read_records(generations), decode_settings(generations))


def run_score(benchmark: str, generations: Path, out_path: Path, data: Path | None = None,
              settings: dict | None = None, names: dict | None = None, work_dir: Path | None = None) -> dict:
    """Score stored generations (never decodes again) and write the result, with ``names`` (model, objective,
    sampler) when the DAG runs it; print one summary line. A benchmark's ``sidecars`` (``{name: JSON content}``,
    e.g. LiveCodeBench's ``eval_all.json``) are written beside it as ``<out stem>_<name>``, their paths recorded."""
    result = {**(names or {}), **score_generations(benchmark, generations, data, settings, work_dir)}
    result["provenance"] = provenance("score", {"generations": str(generations), "data": str(data), **(names or {})})
    sidecars = result.pop("sidecars", None)
    if sidecars:
        result["sidecars"] = {name: str(Path(out_path).with_name(f"{Path(out_path).stem}_{name}")) for name in sidecars}
        for name, content in sidecars.items():
            write_json_atomic(content, Path(result["sidecars"][name]))
    write_score(result, out_path)
    metrics = ", ".join(f"{k} {v:.4f}" for k, v in result["metrics"].items() if isinstance(v, float))
    print(f"{benchmark}: accuracy {result['accuracy']:.4f} on {result['n']} problems ({metrics})")
    return result
