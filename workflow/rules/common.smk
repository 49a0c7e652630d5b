# Shared helpers: paths, the benchmark and sampler grids, JSON arguments and the job environment. Functions only
# (Snakemake's linter wants them apart from the steps); config errors surface here, before any job runs.
import json
import sys
from pathlib import Path

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from sbd_core.benchmarks import get_benchmark
from sbd_core.samplers import NTP, expand_samplers
from sbd_core.settings import RuntimeSettings, from_section


def _checked(make, *args):
    """``make(*args)``, with a ValueError turned into a workflow error that names the config key."""
    try:
        return make(*args)
    except ValueError as err:
        raise WorkflowError(f"config error: {err}") from None


def _benchmark_settings(name, section):
    bench = get_benchmark(name)
    if not bench.available:
        raise ValueError(f"benchmarks.{name}: {name} is not available yet ({bench.reason}); remove it from the config")
    bench.settings(section)
    return section or {}


RUN = f"results/{config['run']}"
BENCHMARKS = {name: _checked(_benchmark_settings, name, s) for name, s in config["benchmarks"].items()}
MODELS = list(config["models"])
OBJECTIVES = config["finetune"]["objectives"]
SAMPLERS = _checked(expand_samplers, config["decode"]["samplers"])
if NTP not in SAMPLERS:
    raise WorkflowError(
        "config error: decode.samplers must include {solver: ntp} (the NTP baseline every speedup is measured against)"
    )
RUNTIME = _checked(from_section, RuntimeSettings, config.get("runtime"), "runtime")
# On the CPU a decode job takes every core the run has (--cores), so no other job shares the machine while it is
# timed and its wall time can be compared with the NTP arm's; on GPUs each decode job has a device of its own.
DECODE_THREADS = (workflow.resource_settings.cores or 1) if RUNTIME.device == "cpu" else 1
PAPER_TABLE = Path(config.get("report", {}).get("paper_table", "results/paper/table1.csv"))
if not PAPER_TABLE.is_absolute() and not PAPER_TABLE.exists():
    PAPER_TABLE = Path(workflow.basedir) / PAPER_TABLE  # shipped with the workflow, whatever the working directory
PAPER_BASES = {name: m["paper_base"] for name, m in config["models"].items() if "paper_base" in m}
CONDA_ENV = "../../environment.yml"  # the same environment as `conda env create -f environment.yml`

# Jobs call `python -m sbd_core ...`. Without --use-conda that is the Python running Snakemake (e.g. .venv/bin/python,
# even when the venv is not activated); with --use-conda it is the environment's own Python.
if DeploymentMethod.CONDA not in workflow.deployment_settings.deployment_method:
    shell.prefix(f'export PATH="{Path(sys.executable).parent}:$PATH"; ')


def arg(obj):
    """A JSON command-line argument (shell-quoted in the command with :q)."""
    return json.dumps(obj, sort_keys=True)


def section(name, drop=()):
    """A config section (empty when absent) without the keys the workflow itself consumes."""
    return {k: v for k, v in config.get(name, {}).items() if k not in drop}


def samplers_of(objective):
    """The samplers an arm is decoded with: the NTP arm with NTP decoding only; every other arm with every sampler,
    unless decode.restrict names its list."""
    if objective == "ntp":
        return [NTP]
    chosen = config["decode"].get("restrict", {}).get(objective, list(SAMPLERS))
    unknown = sorted(set(chosen) - set(SAMPLERS))
    if unknown:
        raise WorkflowError(f"config error: decode.restrict.{objective} names {unknown}, not among decode.samplers "
                            f"({sorted(SAMPLERS)})")
    return chosen


def runs():
    """(model, objective, sampler) of every decode run."""
    return [(m, o, s) for m in MODELS for o in OBJECTIVES for s in samplers_of(o)]


SCORE_FILES = [f"{RUN}/scores/{m}/{o}/{s}/{b}.json" for m, o, s in runs() for b in BENCHMARKS]
REPORT_DIR = f"{RUN}/report"
REPORT_TABLES = ["summary.csv", "table1.csv", "table1.md", "table1.tex", "report.md", "provenance.json"]
REPORT_FILES = [f"{REPORT_DIR}/{name}" for name in REPORT_TABLES] + [
    f"{REPORT_DIR}/speedup_{b}.{ext}" for b in BENCHMARKS for ext in ("png", "pdf")
]


wildcard_constraints:
    model="|".join(MODELS),
    objective="|".join(OBJECTIVES),
    sampler="[A-Za-z0-9._+-]+",
    benchmark="|".join(BENCHMARKS),
