# Shared helpers: paths, the sampler grid, JSON arguments and the job environment. Functions only (Snakemake's
# linter wants them apart from the steps); config errors surface here, before any job runs.
import json
import sys
from pathlib import Path

from snakemake_interface_executor_plugins.settings import DeploymentMethod

from sbd_core.samplers import NTP, expand_samplers
from sbd_core.settings import RuntimeSettings, from_section

RUN = f"results/{config['run']}"
TASKS = config["tasks"]
MODELS = list(config["models"])
OBJECTIVES = config["finetune"]["objectives"]
try:
    SAMPLERS = expand_samplers(config["decode"]["samplers"])
except ValueError as err:
    raise WorkflowError(f"config error: {err}") from None
if NTP not in SAMPLERS:
    raise WorkflowError(
        "config error: decode.samplers must include {solver: ntp} (the NTP baseline every speedup is measured against)"
    )
try:
    RUNTIME = from_section(RuntimeSettings, config.get("runtime"), "runtime")
except ValueError as err:
    raise WorkflowError(f"config error: {err}") from None
PAPER_TABLE = Path(config.get("report", {}).get("paper_table", "results/paper/table1.csv"))
if not PAPER_TABLE.is_absolute() and not PAPER_TABLE.exists():
    PAPER_TABLE = Path(workflow.basedir) / PAPER_TABLE  # shipped with the workflow, whatever the working directory
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


def runs():
    """(model, objective, sampler) of every decode run: the NTP arm with NTP decoding, the SBD arm with every sampler."""
    out = []
    for model in MODELS:
        for objective in OBJECTIVES:
            samplers = [NTP] if objective == "ntp" else list(SAMPLERS)
            out += [(model, objective, sampler) for sampler in samplers]
    return out


SCORE_FILES = [f"{RUN}/scores/{m}/{o}/{s}/{t}.json" for m, o, s in runs() for t in TASKS]
REPORT_DIR = f"{RUN}/report"
REPORT_TABLES = ["summary.csv", "table1.csv", "table1.md", "table1.tex", "report.md", "provenance.json"]
REPORT_FILES = [f"{REPORT_DIR}/{name}" for name in REPORT_TABLES] + [
    f"{REPORT_DIR}/speedup_{t}.{ext}" for t in TASKS for ext in ("png", "pdf")
]


wildcard_constraints:
    model="|".join(MODELS),
    objective="|".join(OBJECTIVES),
    sampler="[A-Za-z0-9._+-]+",
    task="|".join(TASKS),
