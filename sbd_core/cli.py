"""``python -m sbd_core <stage> ...``: run one pipeline stage by hand, with the options the Snakemake rules use.

Settings that are whole config sections are passed as JSON (``--spec '{"max_steps": 10}'`` or ``--spec @file.json``).

A user's mistake gets one line on stderr, ``error: <what is wrong with which input, and what is expected>``, and a
non-zero exit status (2 for a bad command line, 1 for a bad input file or setting); ``--debug`` (or ``SBD_DEBUG=1``)
shows its traceback. User errors are exactly:

* :class:`sbd_core.errors.UserError` (a ``ValueError``), which every stage raises where it reads an input file or a
  setting, naming the file and line or the key;
* ``FileNotFoundError``, ``IsADirectoryError``, ``NotADirectoryError``, ``PermissionError``: an input path that is
  missing or cannot be read;
* a command line argparse rejects (a missing option, a JSON argument that does not parse or is not an object).

Any other exception is a bug and keeps its full traceback. Snakemake's rules run this same command, so a bad input in
a DAG run shows the same line in the job's log.

Each stage is registered with :func:`stage`: one function adds its arguments and returns its handler, which calls the
stage's function with keywords.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable

from . import pipeline, report, roofline
from .errors import UserError, user_input
from .launch import LaunchSettings
from .settings import RuntimeSettings, StatsSettings, TimingSettings, from_section

USER_ERRORS = (UserError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)
DEBUG_ENV = "SBD_DEBUG"


class UsageError(UserError):
    """A command line argparse rejects."""


class _Parser(argparse.ArgumentParser):
    """argparse, with a rejected command line raised as :class:`UsageError` (one line from :func:`main`, exit 2)
    instead of a usage block."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _json_value(text: str, kind: type, shape: str):
    """A JSON argument of type ``kind`` (``shape`` names it in the message), inline or ``@path``."""
    try:
        value = json.loads(Path(text[1:]).read_text(encoding="utf-8") if text.startswith("@") else text)
    except OSError as err:
        raise argparse.ArgumentTypeError(f"cannot read {text[1:]} ({err.strerror}); expected @<path of a JSON file>")
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise argparse.ArgumentTypeError(f"not valid JSON ({err}): {text[:80]!r}")
    if not isinstance(value, kind):
        raise argparse.ArgumentTypeError(f"expected a JSON {shape}, got {type(value).__name__}: {text[:80]!r}")
    return value


def _json(text: str) -> dict:
    """A JSON object argument, inline or ``@path``."""
    return _json_value(text, dict, "object {...}")


def _json_list(text: str) -> list:
    """A JSON list argument, inline or ``@path``."""
    return _json_value(text, list, "list [...]")


#: The stages: {name: (help, register)}; ``register(parser)`` adds the stage's arguments to its subparser and returns
#: its handler, ``handler(args, progress)``, which calls the stage with keywords. Filled by :func:`stage`.
STAGES: dict[str, tuple[str, Callable]] = {}


def stage(name: str, help: str):
    """Register a stage of ``python -m sbd_core``: the decorated function adds the stage's arguments and returns its
    handler."""
    def register(add_arguments: Callable):
        STAGES[name] = (help, add_arguments)
        return add_arguments
    return register


def _parser() -> argparse.ArgumentParser:
    """The command line: the global options, then one subparser per registered stage (its handler as ``run``)."""
    p = _Parser(prog="python -m sbd_core", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--debug", action="store_true", help=f"show the traceback of a user error too (or {DEBUG_ENV}=1)")
    sub = p.add_subparsers(dest="stage", required=True, parser_class=_Parser)
    for name, (help_text, add_arguments) in STAGES.items():
        s = sub.add_parser(name, help=help_text)
        s.set_defaults(run=add_arguments(s))
    return p


def _runtime(args) -> RuntimeSettings:
    return from_section(RuntimeSettings, args.runtime, "runtime")


@stage("data", "training documents: hub sources downloaded, synthetic tasks generated")
def _data(s):
    s.add_argument("--spec", type=_json, required=True,
                   help='the data section, e.g. {"sources": [{"name": "gsm8k"}, {"name": "math", "problems": 100}]}')
    s.add_argument("--out", type=Path, required=True)
    return lambda a, progress: pipeline.run_data(spec=a.spec, out_dir=a.out)


@stage("base", "base checkpoint: hub snapshot, local folder, GGUF file or a tiny model pretrained")
def _base(s):
    s.add_argument("--model-spec", type=_json, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--data", type=Path, default=None, help="scratch models: the data stage's folder")
    s.add_argument("--checkpoints", type=Path, default=None, help="scratch models: resume state of the pretraining")
    return lambda a, progress: pipeline.run_base(model_spec=a.model_spec, out_dir=a.out, data_dir=a.data,
                                                 checkpoint_dir=a.checkpoints, progress=progress)


@stage("pack", "tokenise and pack the training documents for one base model")
def _pack(s):
    s.add_argument("--spec", type=_json, required=True, help="the config's data section plus max_length")
    s.add_argument("--base", type=Path, required=True, help="the base checkpoint (its tokenizer decides the tokens)")
    s.add_argument("--data", type=Path, required=True, help="the data stage's folder")
    s.add_argument("--out", type=Path, required=True)
    return lambda a, progress: pipeline.run_pack(spec=a.spec, base_dir=a.base, data_dir=a.data, out_dir=a.out)


@stage("finetune", "NTP or SBD fine-tuning of a base checkpoint, through the torchrun launcher")
def _finetune(s):
    s.add_argument("--base", type=Path, required=True)
    s.add_argument("--data", type=Path, required=True, help="the pack stage's folder")
    s.add_argument("--objective", required=True, help="ntp, sbd, ... (sbd_core.train_config.TrainConfig)")
    s.add_argument("--spec", type=_json, required=True)
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--nodes", type=int, default=1, help="nodes (more than one: inside a SLURM allocation)")
    s.add_argument("--processes", type=int, default=1, help="processes per node (one per GPU)")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--checkpoints", type=Path, required=True)
    s.add_argument("--exports", type=_json, default=None,
                   help='the model after some steps as folders of their own, e.g. {"1500": "models/m/sbd-step1500"}')

    def run(a, progress):
        with user_input("--nodes/--processes"):
            layout = LaunchSettings(nodes=a.nodes, processes_per_node=a.processes)
        pipeline.run_finetune(base_dir=a.base, data_dir=a.data, objective=a.objective, spec=a.spec, out_dir=a.out,
                              checkpoint_dir=a.checkpoints, runtime=a.runtime, layout=layout, threads=a.threads,
                              exports=a.exports)
    return run


@stage("benchmark", "a benchmark's test problems: download, local file or generation")
def _benchmark(s):
    s.add_argument("--name", required=True, help="a registered benchmark (sbd_core.benchmarks.BENCHMARKS)")
    s.add_argument("--settings", type=_json, default=None, help="its config section, e.g. '{\"limit\": 200}'")
    s.add_argument("--out", type=Path, required=True, help="folder for <name>_test.jsonl")
    return lambda a, progress: pipeline.run_benchmark(name=a.name, settings=a.settings, out_dir=a.out)


@stage("decode", "decode a benchmark's test problems with one sampler")
def _decode(s):
    s.add_argument("--model", type=Path, required=True)
    s.add_argument("--benchmark", required=True)
    s.add_argument("--settings", type=_json, default=None, help="the benchmark's config section")
    s.add_argument("--test-file", type=Path, required=True, help="the benchmark stage's <name>_test.jsonl")
    s.add_argument("--sampler-spec", type=_json, required=True, help="a spec of sbd_core.samplers.sampler_spec")
    s.add_argument("--decode-spec", type=_json, default={}, help='e.g. {"block_size": 16, "batch_size": 8}')
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--out", type=Path, required=True)
    return lambda a, progress: pipeline.run_decode(
        model_dir=a.model, benchmark=a.benchmark, benchmark_settings=a.settings, test_file=a.test_file,
        sampler_spec=a.sampler_spec, decode_spec=a.decode_spec, out_path=a.out, runtime=_runtime(a), progress=progress)


@stage("speed", "wall-clock of every decode run of one model and benchmark: paired rounds, A/A control (run it alone "
       "on the machine)")
def _speed(s):
    s.add_argument("--rows", type=_json_list, required=True,
                   help='the decode runs, a JSON list: [{"arm", "model", "objective", "train_seed", "train_steps", '
                        '"sampler", "sampler_spec", "generations"}, ...] (or @file.json)')
    s.add_argument("--model-name", required=True, help="the model's name in the run (the report's model column)")
    s.add_argument("--benchmark", required=True)
    s.add_argument("--settings", type=_json, default=None, help="the benchmark's config section")
    s.add_argument("--test-file", type=Path, required=True, help="the benchmark stage's <name>_test.jsonl")
    s.add_argument("--decode-spec", type=_json, default={}, help="the decode section (as the decode stage's)")
    s.add_argument("--speed-spec", type=_json, default={}, help='the speed section, e.g. {"problems": 16, "rounds": 5}')
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--out", type=Path, required=True, help="the speed file (JSON)")

    def run(a, progress):
        # pipeline.speed loads on first use (the pipeline package's lazy stages), as every stage here does
        pipeline.speed.run_speed(entries=a.rows, model_name=a.model_name, benchmark=a.benchmark,
                                 benchmark_settings=a.settings, test_file=a.test_file, decode_spec=a.decode_spec,
                                 speed_spec=a.speed_spec, out=a.out, runtime=_runtime(a), progress=progress)
    return run


@stage("speed-compare", "a rerun of the speed stage against the first run: is each median inside the first run's "
       "interval?")
def _speed_compare(s):
    s.add_argument("--first", type=Path, required=True, help="the first run's speed folder (results/<run>/speed copy)")
    s.add_argument("--second", type=Path, required=True, help="the rerun's speed folder")

    def run(a, progress):
        from .report.speed import compare_reruns  # imported here: it loads pandas, which no other stage's job needs

        lines, inside, compared = compare_reruns(first=a.first, second=a.second)
        print("\n".join(lines))
        print(f"{inside} of {compared} rerun medians inside the first run's interval ({100 * inside / compared:.0f}%)")
    return run


@stage("score", "score a generations file ({\"id\", \"completion\"} per line); prints the metric")
def _score(s):
    s.add_argument("--benchmark", required=True)
    s.add_argument("--generations", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True, help="JSON result with per-problem verdicts")
    s.add_argument("--data", type=Path, default=None,
                   help="the test file the generations answer: the benchmark stage's <name>_test.jsonl (the problem "
                        "set, never cut again) or a file in the source dataset's own schema (every row, unless "
                        "--settings states a limit); default: fetch the benchmark's test set (its limit applies)")
    s.add_argument("--settings", type=_json, default=None, help="the benchmark's config section")
    s.add_argument("--names", type=_json, default=None, help='{"model": .., "objective": .., "sampler": ..}')
    s.add_argument("--work-dir", type=Path, default=None, help="scratch folder of the scorer (default: a temporary one)")
    return lambda a, progress: pipeline.run_score(
        benchmark=a.benchmark, generations=a.generations, out_path=a.out, data=a.data, settings=a.settings,
        names=a.names, work_dir=a.work_dir)


@stage("likelihood-data", "a likelihood task's data: hub snapshot, local copy or generated MC")
def _likelihood_data(s):
    s.add_argument("--task", required=True, help="a likelihood task (sbd_core.likelihood.TASKS)")
    s.add_argument("--settings", type=_json, default=None, help="its config section, e.g. '{\"data\": \"DIR\"}'")
    s.add_argument("--out", type=Path, required=True, help="folder for dataset/ and provenance.json")
    return lambda a, progress: pipeline.run_likelihood_data(name=a.task, settings_mapping=a.settings, out_dir=a.out)


@stage("likelihood", "score one model on a likelihood task (lm-eval, NTP log-likelihoods)")
def _likelihood(s):
    s.add_argument("--model", type=Path, required=True)
    s.add_argument("--task", required=True, help="a likelihood task (sbd_core.likelihood.TASKS)")
    s.add_argument("--settings", type=_json, default=None, help="its config section")
    s.add_argument("--data", type=Path, required=True, help="the likelihood-data stage's folder")
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--names", type=_json, default=None, help='{"model": .., "objective": ..}')
    s.add_argument("--out", type=Path, required=True, help="JSON score file")
    return lambda a, progress: pipeline.run_likelihood(
        model_dir=a.model, name=a.task, settings_mapping=a.settings, data_dir=a.data, out_path=a.out,
        runtime=_runtime(a), names=a.names)


@stage("report", "tables and figures from score files")
def _report(s):
    s.add_argument("--scores", type=Path, nargs="+", required=True)
    s.add_argument("--likelihood", type=Path, nargs="*", default=[], help="the likelihood stage's scores (Table 2)")
    s.add_argument("--paper-table", type=Path, default=report.DEFAULT_PAPER_TABLE)
    s.add_argument("--paper-bases", type=_json, default=None,
                   help='which of our models stand for which row of the paper, e.g. {"llama-3.1-8b": "Llama-3.1 8B"}')
    s.add_argument("--timing", type=Path, nargs="*", default=[],
                   help="time(k) files of the timing stage (<model>.json): eq. 16 predictions beside the measurement")
    s.add_argument("--speed", type=Path, nargs="*", default=[], help="the speed stage's files (wall-clock)")
    s.add_argument("--stats", type=_json, default=None,
                   help='the config\'s report.stats (confidence, equivalence margins, resamples): {"margin_pts": 2}')
    s.add_argument("--out", type=Path, required=True)
    return lambda a, progress: pipeline.run_report(
        scores=a.scores, out_dir=a.out, paper_table=a.paper_table, paper_bases=a.paper_bases, timings=a.timing,
        likelihood=a.likelihood, stats=from_section(StatsSettings, a.stats, "report.stats"), speeds=a.speed)


@stage("roofline", "the paper's roofline (Tables 3-4, eq. 16): analytic, or from a time(k) file")
def _roofline(s):
    s.add_argument("--table", type=int, choices=(3, 4), required=True, help="3: slowdown T(k)/T(1); 4: eq. 16")
    s.add_argument("--preset", help=f"one of {sorted(roofline.PRESETS)} (paper: the appendix's shapes and constants)")
    s.add_argument("--model", help=f"a model shape, one of {sorted(roofline.MODELS)}")
    s.add_argument("--device", help=f"a device's peaks, one of {sorted(roofline.DEVICES)}")
    s.add_argument("--dtype", help=f"weights and KV cache, one of {sorted(roofline.BYTES_PER_ELEMENT)} "
                                   f"(default {roofline.DEFAULT_DTYPE})")
    s.add_argument("--measured", type=Path, help="a time(k) file (python -m sbd_core timing) instead of the model")
    s.add_argument("--batch", type=int, nargs="+", help="batch sizes (default: the paper's, or the file's)")
    s.add_argument("--kv-len", type=int, nargs="+", help="cached tokens (default: the paper's, or the file's)")
    s.add_argument("--block-size", type=int, nargs="+", help="block sizes (default: the paper's)")
    s.add_argument("--out", type=Path, default=None, help="CSV file (default: standard output)")

    def run(a, progress):
        text = roofline.run_table(table=a.table, out=a.out, preset=a.preset, model=a.model, device=a.device,
                                  dtype=a.dtype, measured=a.measured, batches=a.batch, kv_lens=a.kv_len,
                                  block_sizes=a.block_size)
        if a.out is None:
            print(text, end="")
    return run


@stage("timing", "time(k): latency of the fast engine's steps on this machine (JSON file)")
def _timing(s):
    s.add_argument("--model", type=Path, default=None, help="a checkpoint folder")
    s.add_argument("--shape", default=None, help="or a named model shape with random weights, one of "
                   f"{sorted(n for n, m in roofline.MODELS.items() if not m.as_printed)}")
    s.add_argument("--layers", type=int, default=None, help="with --shape: this many layers (default: all)")
    s.add_argument("--device", default="cpu")
    s.add_argument("--dtype", default="float32", help="float32, bfloat16 or float16")
    s.add_argument("--batch", type=int, nargs="+", default=[1], help="rows per forward")
    s.add_argument("--width", type=int, nargs="+", default=list(TimingSettings.widths),
                   help="tokens per row (1: the NTP step; wider: SBD block steps)")
    s.add_argument("--block-size", type=int, nargs="+", default=[], help="block sizes k: adds the 2k re-feed steps")
    s.add_argument("--kv-len", type=int, nargs="+", default=[128], help="cached tokens per row")
    s.add_argument("--warmup", type=int, default=TimingSettings.warmup, help="untimed calls per point and round")
    s.add_argument("--repeats", type=int, default=TimingSettings.repeats,
                   help="timed calls per point and round (their median is the round's value)")
    s.add_argument("--rounds", type=int, default=TimingSettings.rounds,
                   help="rounds, every point once per round in a fresh random order")
    s.add_argument("--seed", type=int, default=TimingSettings.seed, help="the rounds' orders")
    s.add_argument("--compile", action="store_true", help="time the step compiled with torch.compile")
    s.add_argument("--budget-s", type=float, default=None,
                   help="start no row after this many seconds; the file keeps the rows measured (complete: false)")
    s.add_argument("--out", type=Path, required=True, help="the time(k) JSON file")

    def run(a, progress):
        # imported here, not at the top: the engine and transformers' model classes take seconds to import, and
        # every other stage's job (a DAG runs dozens) would pay for them at start-up
        from . import timing

        result = timing.run_timing(
            out=a.out, model_dir=a.model, shape=a.shape, layers=a.layers, device=a.device, dtype=a.dtype,
            batches=a.batch, widths=a.width, block_sizes=a.block_size, kv_lens=a.kv_len, warmup=a.warmup,
            repeats=a.repeats, compile_step=a.compile, progress=progress, budget_s=a.budget_s, rounds=a.rounds,
            seed=a.seed)
        print(json.dumps(result))
    return run


def main(argv=None) -> int:
    """Run one stage; a user error is one ``error: ...`` line on stderr and exit status 1 (2 for the command line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        _run(_parser().parse_args([a for a in argv if a != "--debug"]))
    except USER_ERRORS as err:
        if debug:
            raise
        print(f"error: {error_line(err)}", file=sys.stderr)
        return 2 if isinstance(err, UsageError) else 1
    return 0


def error_line(err: BaseException) -> str:
    """The one-line message of a user error; an OSError raised by the system names its file."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    return " ".join(line.strip() for line in str(err).splitlines() if line.strip())


def _run(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.threads:
        # imported here, not at the top: the stages that only read and write files (data, benchmark, score,
        # likelihood-data, report) load no torch, and their jobs are most of a DAG's; the rules pass --threads only to
        # the stages that compute
        import torch

        torch.set_num_threads(args.threads)
    args.run(args, progress=not args.no_progress)


if __name__ == "__main__":
    sys.exit(main())
