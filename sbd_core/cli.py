"""``python -m sbd_core <stage> ...``: run one pipeline stage by hand, with the options the Snakemake rules use.

Settings that are whole config sections are passed as JSON (``--spec '{"max_steps": 10}'`` or ``--spec @file.json``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import torch

from . import pipeline, report
from .launch import LaunchSettings
from .settings import RuntimeSettings, from_section


def _json(text: str):
    """A JSON argument, inline or ``@path``."""
    try:
        return json.loads(Path(text[1:]).read_text() if text.startswith("@") else text)
    except (OSError, json.JSONDecodeError) as err:
        raise argparse.ArgumentTypeError(f"not valid JSON ({err}): {text[:80]!r}") from err


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sbd_core", description=__doc__)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    sub = p.add_subparsers(dest="stage", required=True)

    s = sub.add_parser("data", help="training documents: hub sources downloaded, synthetic tasks generated")
    s.add_argument("--spec", type=_json, required=True,
                   help='the data section, e.g. {"sources": [{"name": "gsm8k"}, {"name": "math", "problems": 100}]}')
    s.add_argument("--out", type=Path, required=True)

    s = sub.add_parser("base", help="base checkpoint: hub snapshot, local folder, GGUF file or a tiny model pretrained")
    s.add_argument("--model-spec", type=_json, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--data", type=Path, default=None, help="scratch models: the data stage's folder")
    s.add_argument("--checkpoints", type=Path, default=None, help="scratch models: resume state of the pretraining")

    s = sub.add_parser("pack", help="tokenise and pack the training documents for one base model")
    s.add_argument("--spec", type=_json, required=True, help="the config's data section plus max_length")
    s.add_argument("--base", type=Path, required=True, help="the base checkpoint (its tokenizer decides the tokens)")
    s.add_argument("--data", type=Path, required=True, help="the data stage's folder")
    s.add_argument("--out", type=Path, required=True)

    s = sub.add_parser("finetune", help="NTP or SBD fine-tuning of a base checkpoint, through the torchrun launcher")
    s.add_argument("--base", type=Path, required=True)
    s.add_argument("--data", type=Path, required=True, help="the pack stage's folder")
    s.add_argument("--objective", required=True, help="ntp, sbd, ... (sbd_core.train.TrainConfig)")
    s.add_argument("--spec", type=_json, required=True)
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--nodes", type=int, default=1, help="nodes (more than one: inside a SLURM allocation)")
    s.add_argument("--processes", type=int, default=1, help="processes per node (one per GPU)")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--checkpoints", type=Path, required=True)

    s = sub.add_parser("benchmark", help="a benchmark's test problems: download, local file or generation")
    s.add_argument("--name", required=True, help="a registered benchmark (sbd_core.benchmarks.BENCHMARKS)")
    s.add_argument("--settings", type=_json, default=None, help="its config section, e.g. '{\"limit\": 200}'")
    s.add_argument("--out", type=Path, required=True, help="folder for <name>_test.jsonl")

    s = sub.add_parser("decode", help="decode a benchmark's test problems with one sampler")
    s.add_argument("--model", type=Path, required=True)
    s.add_argument("--benchmark", required=True)
    s.add_argument("--settings", type=_json, default=None, help="the benchmark's config section")
    s.add_argument("--test-file", type=Path, required=True, help="the benchmark stage's <name>_test.jsonl")
    s.add_argument("--sampler-spec", type=_json, required=True, help="a spec of sbd_core.samplers.sampler_spec")
    s.add_argument("--decode-spec", type=_json, default={}, help='e.g. {"block_size": 16, "batch_size": 8}')
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--out", type=Path, required=True)

    s = sub.add_parser("score", help="score a generations file ({\"id\", \"completion\"} per line); prints the metric")
    s.add_argument("--benchmark", required=True)
    s.add_argument("--generations", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True, help="JSON result with per-problem verdicts")
    s.add_argument("--data", type=Path, default=None,
                   help="the test file the generations answer, in the source dataset's own schema (default: fetch it)")
    s.add_argument("--settings", type=_json, default=None, help="the benchmark's config section")
    s.add_argument("--names", type=_json, default=None, help='{"model": .., "objective": .., "sampler": ..}')
    s.add_argument("--work-dir", type=Path, default=None, help="scratch folder of the scorer (default: a temporary one)")

    s = sub.add_parser("likelihood-data", help="a likelihood task's data: hub snapshot, local copy or generated MC")
    s.add_argument("--task", required=True, help="a likelihood task (sbd_core.likelihood.TASKS)")
    s.add_argument("--settings", type=_json, default=None, help="its config section, e.g. '{\"data\": \"DIR\"}'")
    s.add_argument("--out", type=Path, required=True, help="folder for dataset/ and provenance.json")

    s = sub.add_parser("likelihood", help="score one model on a likelihood task (lm-eval, NTP log-likelihoods)")
    s.add_argument("--model", type=Path, required=True)
    s.add_argument("--task", required=True, help="a likelihood task (sbd_core.likelihood.TASKS)")
    s.add_argument("--settings", type=_json, default=None, help="its config section")
    s.add_argument("--data", type=Path, required=True, help="the likelihood-data stage's folder")
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--names", type=_json, default=None, help='{"model": .., "objective": ..}')
    s.add_argument("--out", type=Path, required=True, help="JSON score file")

    s = sub.add_parser("report", help="tables and figures from score files")
    s.add_argument("--scores", type=Path, nargs="+", required=True)
    s.add_argument("--likelihood", type=Path, nargs="*", default=[], help="the likelihood stage's scores (Table 2)")
    s.add_argument("--paper-table", type=Path, default=report.DEFAULT_PAPER_TABLE)
    s.add_argument("--paper-bases", type=_json, default=None,
                   help='which of our models stand for which row of the paper, e.g. {"llama-3.1-8b": "Llama-3.1 8B"}')
    s.add_argument("--out", type=Path, required=True)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    progress = not args.no_progress
    if args.stage == "data":
        pipeline.run_data(args.spec, args.out)
    elif args.stage == "base":
        pipeline.run_base(args.model_spec, args.out, args.data, args.checkpoints, progress)
    elif args.stage == "pack":
        pipeline.run_pack(args.spec, args.base, args.data, args.out)
    elif args.stage == "finetune":
        layout = LaunchSettings(nodes=args.nodes, processes_per_node=args.processes)
        pipeline.run_finetune(args.base, args.data, args.objective, args.spec, args.out, args.checkpoints,
                              args.runtime, layout, args.threads)
    elif args.stage == "benchmark":
        pipeline.run_benchmark(args.name, args.settings, args.out)
    elif args.stage == "decode":
        pipeline.run_decode(args.model, args.benchmark, args.settings, args.test_file, args.sampler_spec,
                            args.decode_spec, args.out, from_section(RuntimeSettings, args.runtime, "runtime"), progress)
    elif args.stage == "score":
        pipeline.run_score(args.benchmark, args.generations, args.out, args.data, args.settings, args.names,
                           args.work_dir)
    elif args.stage in ("likelihood-data", "likelihood"):
        return _likelihood(args)
    elif args.stage == "report":
        pipeline.run_report(args.scores, args.out, args.paper_table, args.paper_bases, args.likelihood)
    return 0


def _likelihood(args) -> int:
    """The likelihood stages; missing or unusable data is one error line, not a traceback."""
    try:
        if args.stage == "likelihood-data":
            pipeline.run_likelihood_data(args.task, args.settings, args.out)
        else:
            runtime = from_section(RuntimeSettings, args.runtime, "runtime")
            pipeline.run_likelihood(args.model, args.task, args.settings, args.data, args.out, runtime, args.names)
    except pipeline.LikelihoodDataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
