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
from .settings import from_section


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

    s = sub.add_parser("data", help="synthetic train/valid rows and held-out test problems")
    s.add_argument("--spec", type=_json, required=True,
                   help='{"tasks": [...], "train_per_task": N or {TASK: N}, "test_per_task": N, "valid_per_task": N, "seed": N}')
    s.add_argument("--out", type=Path, required=True)

    s = sub.add_parser("base", help="base checkpoint: hub snapshot, local folder or tiny model pretrained here")
    s.add_argument("--model-spec", type=_json, required=True)
    s.add_argument("--data", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--checkpoints", type=Path, required=True, help="resume state (kept until the stage succeeds)")

    s = sub.add_parser("finetune", help="NTP or SBD fine-tuning of a base checkpoint")
    s.add_argument("--base", type=Path, required=True)
    s.add_argument("--data", type=Path, required=True)
    s.add_argument("--objective", choices=["ntp", "sbd"], required=True)
    s.add_argument("--spec", type=_json, required=True)
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--checkpoints", type=Path, required=True)

    s = sub.add_parser("decode", help="decode a task's test problems with one sampler")
    s.add_argument("--model", type=Path, required=True)
    s.add_argument("--task", required=True)
    s.add_argument("--data", type=Path, required=True)
    s.add_argument("--sampler", required=True, help="the sampler's tag (names the run)")
    s.add_argument("--sampler-spec", type=_json, required=True)
    s.add_argument("--decode-spec", type=_json, required=True)
    s.add_argument("--runtime", type=_json, default={})
    s.add_argument("--out", type=Path, required=True)

    s = sub.add_parser("score", help="score stored generations (lm-eval / evalplus)")
    s.add_argument("--task", required=True)
    s.add_argument("--data", type=Path, required=True)
    s.add_argument("--generations", type=Path, required=True)
    s.add_argument("--names", type=_json, required=True, help='{"model": .., "objective": .., "sampler": ..}')
    s.add_argument("--code-settings", type=_json, default={})
    s.add_argument("--work-dir", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)

    s = sub.add_parser("report", help="tables and figures from score files")
    s.add_argument("--scores", type=Path, nargs="+", required=True)
    s.add_argument("--paper-table", type=Path, default=report.DEFAULT_PAPER_TABLE)
    s.add_argument("--out", type=Path, required=True)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    progress = not args.no_progress
    if args.stage == "data":
        pipeline.run_data(from_section(pipeline.DataSpec, args.spec, "data"), args.out)
    elif args.stage == "base":
        pipeline.run_base(args.model_spec, args.data, args.out, args.checkpoints, progress)
    elif args.stage == "finetune":
        pipeline.run_finetune(args.base, args.data, args.objective, args.spec, args.out, args.checkpoints,
                              args.runtime, progress)
    elif args.stage == "decode":
        pipeline.run_decode(args.model, args.task, args.data, args.sampler, args.sampler_spec, args.decode_spec,
                            args.out, args.runtime, progress)
    elif args.stage == "score":
        pipeline.run_score(args.task, args.data, args.generations, args.out, args.names, args.work_dir,
                           args.code_settings)
    elif args.stage == "report":
        pipeline.run_report(args.scores, args.out, args.paper_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
