"""The pipeline stages as plain functions; each reads the previous stages' files only (never their internals), writes
its outputs atomically with a provenance record, and is what both the Snakemake rules and ``python -m sbd_core <stage>``
call. Training: :mod:`.data` (data), :mod:`.training` (base, pack, finetune); evaluation: :mod:`.evaluation`
(benchmark, score), :mod:`.decode` (decode); :mod:`.likelihood` (likelihood-data, likelihood: the paper's Table 2);
:mod:`.speed` (wall-clock of every decode run, paired and repeated; imported where it runs: it loads torch);
:func:`run_report` (tables and figures from score files). Importing the package loads no torch, and neither do the
stages that only read and write files (data, benchmark, score, likelihood-data, report: a DAG runs dozens of their
jobs, each would pay torch's start-up); every stage is imported on first use (:data:`_STAGES`).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import asdict
from pathlib import Path

from ..io_utils import write_json_atomic
from ..provenance import provenance
from ..settings import StatsSettings
from .plan import check_layout, train_config

#: The stages, imported on first use (``pipeline.run_decode``, ``from sbd_core.pipeline import run_decode``), so that
#: the workflow can import this package's torch-free parts (:mod:`.plan`, :mod:`.arms`) while Snakemake parses the
#: rules, and a job loads only its own stage's module: {name: the submodule that defines it}.
_STAGES = {**dict.fromkeys(("run_benchmark", "run_score", "score_generations"), "evaluation"),
           "run_decode": "decode",
           **dict.fromkeys(("run_data", "synthetic_pairs"), "data"),
           **dict.fromkeys(("LikelihoodDataError", "run_likelihood", "run_likelihood_data"), "likelihood"),
           **dict.fromkeys(("build_scratch_model", "run_base", "run_finetune", "run_pack"), "training")}

__all__ = ["LikelihoodDataError", "build_scratch_model", "check_layout", "run_base",
           "run_benchmark", "run_data", "run_decode", "run_finetune", "run_likelihood", "run_likelihood_data",
           "run_pack", "run_report", "run_score", "score_generations", "synthetic_pairs", "train_config"]


def __getattr__(name: str):
    """A stage of :data:`_STAGES` from its submodule, or a submodule itself (``pipeline.training``), on first use."""
    if name in _STAGES:
        value = getattr(importlib.import_module(f".{_STAGES[name]}", __name__), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def run_report(scores: list[Path], out_dir: Path, paper_table: Path | None, paper_bases: dict | None = None,
               timings: list[Path] = (), likelihood: list[Path] = (), stats: StatsSettings = StatsSettings(),
               speeds: list[Path] = ()) -> None:
    """Tables and figures from score files (the timing stage's time(k) files; ``likelihood``: the likelihood stage's
    score files, Table 2; ``stats``: the config's ``report.stats``; ``speeds``: the speed stage's files, wall-clock)
    only (never recomputes), with the run's provenance beside them."""
    from ..report import write_report

    write_report(scores, out_dir, paper_table=paper_table, paper_bases=paper_bases, timing_paths=timings,
                 likelihood_paths=likelihood, stats=stats, speed_paths=speeds)
    settings = {"scores": [str(p) for p in scores], "paper_table": str(paper_table), "paper_bases": paper_bases,
                "timings": [str(p) for p in timings], "likelihood": [str(p) for p in likelihood],
                "stats": asdict(stats), "speeds": [str(p) for p in speeds]}
    write_json_atomic(provenance("report", settings), Path(out_dir) / "provenance.json")
