# Shared helpers: paths, the training layout, the benchmark and sampler grids, JSON arguments and the job environment.
# Functions only (Snakemake's linter wants them apart from the steps); config errors surface here, before any job runs.
import json
import os
import re
import sys
from pathlib import Path

from sbd_core.benchmarks import get_benchmark
from sbd_core.decode_config import DecodeConfig
from sbd_core.launch import LaunchSettings
from sbd_core.pipeline.arms import ARM_KEYS, plan_arms, trained_arms, trainer_spec
from sbd_core.pipeline import plan
from sbd_core.pipeline.plan import check_layout, train_config
from sbd_core.report.outputs import (TABLE2, FIGURE1_BENCHMARK, figure1_stem, figure_files, planned_figures,
                                     report_files, speedup_stem)
from sbd_core.samplers import NTP, Sampler, expand_samplers
from sbd_core.settings import RuntimeSettings, SpeedSettings, StatsSettings, TimingSettings, from_section
from sbd_core.training_data import MixSpec, get_source


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
# every evaluated model by name (sbd_core.pipeline.arms): one fine-tune per objective and seed (TRAINED), each with its
# final model and its checkpoints at finetune.eval_at_steps
ARMS = _checked(plan_arms, config["finetune"])
TRAINED = trained_arms(ARMS)
EVAL_STEPS = sorted({arm.step for arm in ARMS.values() if arm.step is not None})
SAMPLERS = _checked(expand_samplers, config["decode"]["samplers"])
PEERS = [tag for tag, spec in SAMPLERS.items() if Sampler.from_dict(spec).is_peer]  # training-free: the NTP arm's only
if NTP not in SAMPLERS:
    raise WorkflowError(
        "config error: decode.samplers must include {solver: ntp} (the NTP baseline every speedup is measured against)"
    )
RUNTIME = _checked(from_section, RuntimeSettings, config.get("runtime"), "runtime")
# On the CPU a decode job claims runtime.decode_threads cores and runs that many threads (the embedded default: two side
# by side on 2 cores); by default (null) it claims every core the run has (--cores) and runs runtime.threads threads. On
# GPUs each has a device of its own. Decode jobs are not timed: the timed jobs (speed, timing) claim every core the run
# has (TIMED_THREADS: on a GPU too), so nothing runs beside them, and run runtime.threads threads.
CORES = workflow.resource_settings.cores or 1
if RUNTIME.device == "cpu" and RUNTIME.decode_threads:
    DECODE_THREADS = DECODE_TORCH_THREADS = min(RUNTIME.decode_threads, CORES)
else:
    DECODE_THREADS, DECODE_TORCH_THREADS = (CORES if RUNTIME.device == "cpu" else 1), RUNTIME.threads
TIMED_THREADS = CORES
PAPER_TABLE = Path(config.get("report", {}).get("paper_table", "results/paper/table1.csv"))
if not PAPER_TABLE.is_absolute() and not PAPER_TABLE.exists():
    PAPER_TABLE = Path(workflow.basedir) / PAPER_TABLE  # shipped with the workflow, whatever the working directory
PAPER_BASES = {name: m["paper_base"] for name, m in config["models"].items() if "paper_base" in m}
# the report's confidence, equivalence margins and resamples, checked here (sbd_core.settings.StatsSettings)
STATS = config.get("report", {}).get("stats") or {}
_checked(from_section, StatsSettings, STATS, "report.stats")
# Every rule names the environment snakemake must run in (conda env create -f environment.yml, or scripts/setup.sh);
# --use-conda itself is refused (config.smk)
CONDA_ENV = "../../environment.yml"

# Jobs call `python -m sbd_core ...` with the Python running Snakemake (e.g. .venv/bin/python, even when the venv is
# not activated).
shell.prefix(f'export PATH="{Path(sys.executable).parent}:$PATH"; ')


def arg(obj):
    """A JSON command-line argument (shell-quoted in the command with :q)."""
    return json.dumps(obj, sort_keys=True)


def section(name, drop=()):
    """A config section (empty when absent) without the keys the workflow itself consumes."""
    return {k: v for k, v in config.get(name, {}).items() if k not in drop}


# ------------------------------------------------------------------------------------------------ training
def models_from(sources):
    """A wildcard pattern matching the models whose ``source`` is in ``sources`` (or nothing)."""
    names = [m for m, spec in config["models"].items() if spec["source"] in sources]
    return "|".join(re.escape(m) for m in names) or "(?!)"


def _layout(finetune):
    """The fine-tune's processes (finetune.nodes / processes_per_node / resubmit), checked against its settings."""
    layout = from_section(LaunchSettings, {k: finetune[k] for k in LAUNCH_KEYS if k in finetune}, "finetune")
    if layout.nodes > 1 and RUNTIME.gpus == 0:
        raise ValueError(f"finetune.nodes={layout.nodes} needs runtime.device: cuda (several nodes run on GPUs)")
    check_layout(OBJECTIVES, section("finetune", drop=ARM_KEYS + LAUNCH_KEYS), layout)
    return layout


def _mix(data, finetune):
    """The pack stage's settings: the data section plus the fine-tune's row length (validated)."""
    spec = {**data, "max_length": train_config("ntp", {k: v for k, v in finetune.items() if k != "allow_resize"})
            .max_length}
    mix = MixSpec.from_dict(spec)
    scratch = [m for m, model in config["models"].items() if model["source"] == "scratch"]
    if scratch and not any(get_source(e["name"]).generated for e in mix.sources):
        raise ValueError(f"models {scratch} (source: scratch) are pretrained on the synthetic tasks: add "
                         "{name: math, problems: N} or {name: code, problems: N} to data.sources")
    return spec


def fetch_spec(entry):
    """The data job's settings for one source (the seed only matters to the generated ones)."""
    spec = {"sources": [{k: v for k, v in entry.items() if k != "weight"}]}
    if get_source(entry["name"]).generated and "seed" in config["data"]:
        spec["seed"] = config["data"]["seed"]
    return spec


def finetune_resources():
    """A fine-tune job's resources: no GPU on the CPU; its GPUs on one node; or (several nodes) one SLURM task per
    node, the job's command running on the first node and starting the others itself (``mpi``: the slurm executor
    then does not wrap the command in srun; sbd_core.launch.slurm_command does)."""
    if RUNTIME.gpus == 0:
        return {"gpu": 0}
    if LAUNCH.nodes == 1:
        return {"gpu": LAUNCH.processes_per_node}
    return {"nodes": LAUNCH.nodes, "tasks": LAUNCH.nodes, "mpi": "srun",
            "slurm_extra": f"--ntasks-per-node=1 --gpus-per-node={LAUNCH.processes_per_node}"}


LAUNCH_KEYS = ("nodes", "processes_per_node", "resubmit")
LAUNCH = _checked(_layout, config["finetune"])
FINETUNE_SPEC = section("finetune", drop=ARM_KEYS + LAUNCH_KEYS)
PACK_SPEC = _checked(_mix, config["data"], FINETUNE_SPEC)
DATA_DIR = f"{RUN}/data"
# one data job per source, with only the keys that decide its files (a new weight or budget must not download again)
FETCH_SPECS = {e["name"]: fetch_spec(e) for e in config["data"]["sources"]}
SYNTHETIC_SOURCES = [name for name in FETCH_SPECS if get_source(name).generated]
def export_dirs(wildcards):
    """{step: folder} of the checkpoints one fine-tune keeps (finetune.eval_at_steps)."""
    return {str(k): f"{RUN}/models/{wildcards.model}/{wildcards.arm}-step{k}" for k in EVAL_STEPS}


# On the CPU the arms train side by side and share the run's threads; a GPU job's threads feed its processes.
FINETUNE_THREADS = max(1, RUNTIME.threads // len(OBJECTIVES)) if RUNTIME.gpus == 0 else RUNTIME.threads


# ------------------------------------------------------------------------------------------------ cluster
def unset_cluster_settings():
    """The SLURM account / partition a profile names but leaves unset: an unexpanded ``$VARIABLE`` or empty."""
    defaults = workflow.resource_settings.default_resources
    unset = []
    for name in ("slurm_account", "slurm_partition"):
        resource = defaults.get(name) if defaults is not None else None
        if resource is not None:
            value = os.path.expandvars(str(resource.raw)).strip("'\" ")
            if not value or "$" in value:
                unset.append(f"{name} ({resource.raw})")
    return unset


UNSET_CLUSTER_SETTINGS = unset_cluster_settings()
if UNSET_CLUSTER_SETTINGS:
    raise WorkflowError(
        f"SLURM settings unset: {', '.join(UNSET_CLUSTER_SETTINGS)}. Set them before submitting: export "
        "SBD_SLURM_ACCOUNT=<your account> SBD_SLURM_PARTITION=<a GPU partition> (`sacctmgr show associations "
        "user=$USER` lists your accounts, `sinfo -s` the partitions), or write both into "
        "profiles/slurm/config.yaml")


def samplers_of(objective):
    """The samplers an arm is decoded with (sbd_core.pipeline.plan.samplers_of; decode.restrict checked there)."""
    return _checked(plan.samplers_of, objective, list(SAMPLERS), PEERS, config["decode"].get("restrict", {}))


_checked(plan.check_shifted_samplers, OBJECTIVES, config["finetune"], SAMPLERS, samplers_of)


def runs():
    """(model, arm, sampler) of every decode run."""
    return plan.runs(MODELS, ARMS, samplers_of)


def speed_rows(wildcards):
    """The decode runs one speed job times (sbd_core.pipeline.plan.speed_rows)."""
    return plan.speed_rows(RUN, wildcards.model, wildcards.benchmark, runs(), ARMS, SAMPLERS,
                           config["finetune"]["max_steps"])


def score_names(wildcards):
    """What a score file says about its run (sbd_core.pipeline.plan.run_names)."""
    return plan.run_names(wildcards.model, ARMS[wildcards.arm], wildcards.sampler, config["finetune"]["max_steps"])


SCORE_FILES = [f"{RUN}/scores/{m}/{a}/{s}/{b}.json" for m, a, s in runs() for b in BENCHMARKS]
# the timing stage: time(k) of one trained arm per model (the SBD arm where there is one; the weights do not matter)
TIMING = _checked(from_section, TimingSettings, config.get("timing"), "timing")
TIMING_ARM = "sbd" if "sbd" in OBJECTIVES else OBJECTIVES[0]
DECODE_BLOCK_SIZE = config["decode"].get("block_size", DecodeConfig.block_size)
TIMING_BATCHES = TIMING.batches or sorted({1, config["decode"].get("batch_size", DecodeConfig.batch_size)})
TIMING_FILES = [f"{RUN}/timing/{m}.json" for m in MODELS] if TIMING.enabled else []
# the speed stage: wall-clock of every decode run, one job per (model, benchmark)
SPEED = _checked(from_section, SpeedSettings, config.get("speed"), "speed")
SPEED_FILES = [f"{RUN}/speed/{m}/{b}.json" for m in MODELS for b in BENCHMARKS] if SPEED.enabled else []
REPORT_DIR = f"{RUN}/report"
# the paper's Figure 1, one per model, when its benchmark (LiveCodeBench) is run
FIGURE1_FILES = [f"{REPORT_DIR}/{name}" for m in MODELS for name in figure_files(figure1_stem(m))
                 if FIGURE1_BENCHMARK in BENCHMARKS]
# Figures 5, 12, 13: those whose solver families the SBD arm is decoded with, and the training curve where it has
# checkpoints (the report draws the same ones)
PAPER_FIGURES = (planned_figures((SAMPLERS[s]["family"] for s in samplers_of("sbd")), budgets=1 + len(EVAL_STEPS))
                 if "sbd" in OBJECTIVES else [])
REPORT_FILES = [f"{REPORT_DIR}/{name}" for name in report_files(MODELS, BENCHMARKS, PAPER_FIGURES)]


wildcard_constraints:
    model="|".join(MODELS),
    objective="|".join(OBJECTIVES),
    arm="|".join(re.escape(name) for name in ARMS),
    sampler="[A-Za-z0-9._+-]+",
    benchmark="|".join(BENCHMARKS),
