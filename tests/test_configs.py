"""Every shipped config plans exactly what its file says (no merging with the default), the workflow lints clean, and
the SLURM profile plans the paper's fine-tunes on several GPU nodes, needs an account and a partition, and keeps the
downloads on the submitting node, and every study config of docs/claim-study.md (and the overlay a shipped
RUN.md runs) still meets the schema."""

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from sbd_core.pipeline.arms import plan_arms, trained_arms
from sbd_core.samplers import expand_samplers
from sbd_core.settings import TimingSettings, from_section
from snakemake_runs import snakemake

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "config").glob("*.yaml"))
# the default tier plans the default, the seeds stacked on it and the paper config; the slow tier every shipped one
# (config/claim.yaml's keys are checked in the default tier without a dry run)
DEFAULT_TIER = ("config.yaml", "seeds.yaml", "paper.yaml")
SHIPPED_CASES = [pytest.param(path, id=path.name, marks=() if path.name in DEFAULT_TIER else pytest.mark.slow)
                 for path in SHIPPED]


def stand_in_local_models(workdir: Path, config: dict) -> None:
    """Empty folders where a config's local models live (config/figures.yaml's is the default run's base model): the
    workflow checks they exist before it plans anything."""
    for model in config.get("models", {}).values():
        if model["source"] == "local":
            (workdir / model["path"]).mkdir(parents=True, exist_ok=True)


def dry_run_in_checkout(workdir: Path, *args) -> str:
    """A dry run (``-n -p``) in ``workdir``, which holds a copy of config/ as a user's checkout does (so a default
    config that merged into --configfile would show up in its plan)."""
    shutil.copytree(ROOT / "config", workdir / "config")
    for path in sorted((workdir / "config").glob("*.yaml")):
        stand_in_local_models(workdir, yaml.safe_load(path.read_text()))
    out = snakemake(workdir, "-n", "-p", *args)
    return out.stdout


def wildcard_values(dry_run: str) -> dict[str, set[str]]:
    """Each wildcard's values over all jobs of a dry run."""
    values: dict[str, set[str]] = {}
    for line in re.findall(r"^\s*wildcards: (.*)$", dry_run, re.M):
        job = dict(pair.split("=", 1) for pair in line.split(", "))
        for key, value in job.items():
            values.setdefault(key, set()).add(value)
        if "likelihood_task" in job and "arm" in job:  # a likelihood job: which arm on which task
            arm = f"{job['model']}/{job['arm']}/{job['likelihood_task']}"
            values.setdefault("likelihood_job", set()).add(arm)
    return values


def planned(workdir: Path, *args) -> dict[str, set[str]]:
    """Each wildcard's values over all jobs of a dry run in a copy of the checkout."""
    return wildcard_values(dry_run_in_checkout(workdir, *args))


@pytest.fixture(scope="module")
def shipped_plan(tmp_path_factory):
    """The dry run of a shipped config (``-n -p --cores 3``, as :func:`shipped` runs it), made once per config and
    read by every test of its plan."""
    runs: dict[Path, str] = {}

    def plan(path: Path) -> str:
        if path not in runs:
            args, _ = shipped(path)
            runs[path] = dry_run_in_checkout(tmp_path_factory.mktemp(path.stem), *args, "--cores", "3")
        return runs[path]
    return plan


def expected(config: dict) -> dict[str, set[str]]:
    planned = {"source": {s["name"] for s in config["data"]["sources"]}, "model": set(config["models"]),
               "arm": set(plan_arms(config["finetune"])),
               "benchmark": set(config["benchmarks"]), "sampler": set(expand_samplers(config["decode"]["samplers"]))}
    section = config.get("likelihood", {})
    likelihood = set(section.get("tasks", {})) if section.get("enabled", True) else set()
    if not likelihood:
        return planned
    trained = set(trained_arms(plan_arms(config["finetune"])))
    jobs = {f"{m}/{a}/{t}" for m in planned["model"] for a in trained for t in likelihood}
    return {**planned, "likelihood_task": likelihood, "likelihood_job": jobs}  # every trained arm on every task


def stacked(base: dict, extra: dict) -> dict:
    """``extra`` merged into ``base`` key by key, as Snakemake merges several --configfile files."""
    out = dict(base)
    for key, value in extra.items():
        out[key] = stacked(base.get(key, {}), value) if isinstance(value, dict) else value
    return out


def shipped(path: Path) -> tuple[list[str], dict]:
    """The --configfile arguments of a shipped config and the config they give: a whole config alone, a partial one
    (no ``run``: config/seeds.yaml) stacked on the default, as its comment says to run it."""
    config = yaml.safe_load(path.read_text())
    if "run" in config:
        return ["--configfile", str(path)], config
    default = ROOT / "config" / "config.yaml"
    return ["--configfile", str(default), str(path)], stacked(yaml.safe_load(default.read_text()), config)


@pytest.mark.parametrize("path", SHIPPED_CASES)
def test_dry_run_plans_only_what_the_config_says(shipped_plan, path):
    assert wildcard_values(shipped_plan(path)) == expected(shipped(path)[1])


def test_the_claim_config_tests_plain_sbd_on_held_out_problems():
    """Issue 26's claim run: 1,000 test problems a task, both arms one recipe, the SBD rows plain (no verify), and the
    checkpoints its training curve needs; stacked with config/seeds.yaml it trains three seeds an arm."""
    _, config = shipped(ROOT / "config" / "claim.yaml")
    assert {name: (b["split"], b["limit"]) for name, b in config["benchmarks"].items()} == {
        "math_graded": ("test", 1000), "code_graded": ("test", 1000)}
    assert config["finetune"]["objectives"] == ["ntp", "sbd"] and "seeds" not in config["finetune"]
    assert len(config["finetune"]["eval_at_steps"]) >= 3
    assert all(spec.get("verify", "none") == "none" for spec in config["decode"]["samplers"])
    with_seeds = stacked(config, yaml.safe_load((ROOT / "config" / "seeds.yaml").read_text()))
    assert sorted(trained_arms(plan_arms(with_seeds["finetune"]))) == ["ntp", "ntp-s1", "ntp-s2", "sbd", "sbd-s1",
                                                                       "sbd-s2"]


def test_the_seeds_config_trains_three_seeds_per_arm():
    _, config = shipped(ROOT / "config" / "seeds.yaml")
    assert sorted(trained_arms(plan_arms(config["finetune"]))) == ["ntp", "ntp-s1", "ntp-s2", "sbd", "sbd-s1",
                                                                   "sbd-s2"]
    assert config["run"] == "embedded"  # seed 0 is the default run's own


def test_default_run_uses_config_yaml(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert planned(tmp_path) == expected(config)


def test_seeds_and_training_budgets_are_wildcards_of_the_dag(tmp_path):
    """finetune.seeds and finetune.eval_at_steps: one fine-tune per (objective, seed), each keeping its step-2 model;
    every model decoded with its objective's samplers and scored with its seed and budget."""
    config = yaml.safe_load((ROOT / "tests" / "smoke.yaml").read_text())
    config["finetune"].update(seeds=[0, 1], eval_at_steps=[2])
    path = tmp_path / "seeds.yaml"
    path.write_text(yaml.safe_dump(config))
    arms = {"ntp", "sbd", "ntp-step2", "sbd-step2", "ntp-s1", "sbd-s1", "ntp-s1-step2", "sbd-s1-step2"}
    dry_run = dry_run_in_checkout(tmp_path, "--configfile", str(path))
    assert wildcard_values(dry_run)["arm"] == arms
    planned_jobs = jobs(dry_run)
    counts = {rule: sum(j["rule"] == rule for j in planned_jobs) for rule in ("finetune", "decode", "score")}
    assert counts == {"finetune": 4, "decode": 24, "score": 24}  # 2 seeds x 2 budgets x (1 + 2 samplers) x 2 tasks
    finetunes = {re.search(r"--out \S+/(\S+) ", j["command"]).group(1): j["command"] for j in planned_jobs
                 if j["rule"] == "finetune"}
    assert set(finetunes) == {"ntp", "sbd", "ntp-s1", "sbd-s1"}
    assert '"seed": 1' in finetunes["sbd-s1"] and '"seed"' not in finetunes["sbd"]  # seed 0: the unseeded job
    assert '--exports \'{"2": "results/smoke/models/tiny-llama/sbd-s1-step2"}\'' in finetunes["sbd-s1"]
    scores = [j["command"] for j in planned_jobs
              if j["rule"] == "score" and "/sbd-s1-step2/topk-4/math" in j["command"]]
    assert len(scores) == 1 and '"train_seed": 1, "train_steps": 2' in scores[0]


@pytest.mark.slow
def test_the_peers_decode_the_ntp_arm_only(tmp_path):
    """hf_generate and prompt_lookup are planned on the NTP arm (beside its NTP decoding), the block solvers on the
    SBD arm (beside its NTP decoding), never the other way round."""
    config = yaml.safe_load((ROOT / "tests" / "smoke.yaml").read_text())
    config["decode"]["samplers"] += [{"solver": "hf_generate"}, {"solver": "prompt_lookup", "tokens": 10}]
    path = tmp_path / "peers.yaml"
    path.write_text(yaml.safe_dump(config))
    out = snakemake(tmp_path, "-n", "-p", "--configfile", str(path))
    pairs = set()
    for line in re.findall(r"^\s*wildcards: (.*)$", out.stdout, re.M):
        job = dict(pair.split("=", 1) for pair in line.split(", "))
        if "sampler" in job:
            pairs.add((job["arm"], job["sampler"]))
    assert pairs == {("ntp", "ntp"), ("ntp", "hf-generate"), ("ntp", "prompt-lookup-10"), ("sbd", "ntp"),
                     ("sbd", "topk-4")}


@pytest.mark.slow
def test_the_ablation_arm_gets_its_likelihood_jobs(tmp_path):
    values = planned(tmp_path, "--config", "finetune={objectives: [ntp, sbd, sbd_no_ntp_grad]}")
    assert {f"tiny-llama/{arm}/{task}" for arm in ("ntp", "sbd", "sbd_no_ntp_grad")
            for task in ("math_mc", "code_mc")} == values["likelihood_job"]


def test_an_overlay_turns_the_likelihood_stage_off(tmp_path):
    """A file stacked on the default cannot remove the default's likelihood tasks (mappings merge); ``enabled: false``
    plans none of their jobs, and the rest of the plan is the stacked config's (the study's overlay, dev500.yaml)."""
    default, overlay = ROOT / "config" / "config.yaml", ROOT / "config" / "tune" / "study" / "dev500.yaml"
    config = stacked(yaml.safe_load(default.read_text()), yaml.safe_load(overlay.read_text()))
    assert config["likelihood"]["tasks"] and config["likelihood"]["enabled"] is False
    values = planned(tmp_path, "--configfile", str(default), str(overlay))
    assert "likelihood_task" not in values and values == expected(config)


# ------------------------------------------------------------------------------------------------ config mistakes
def error_lines(out: subprocess.CompletedProcess) -> list[str]:
    """What a failed run printed, without Snakemake's note on the profile it found."""
    return [line for line in (out.stdout + out.stderr).splitlines()
            if line.strip() and not line.startswith("Using workflow specific profile")]


def readme_stacking_example() -> str:
    """The override file of the README's "stack a config" example (``echo '...' > my.yaml``)."""
    return re.search(r"echo '([^']*)' > my\.yaml", (ROOT / "README.md").read_text()).group(1)


def test_a_partial_configfile_alone_says_how_to_stack_it(tmp_path):
    (tmp_path / "my.yaml").write_text(readme_stacking_example())
    out = snakemake(tmp_path, "-n", "--configfile", "my.yaml", check=False)
    assert out.returncode != 0 and error_lines(out) == [
        "config error: my.yaml lacks run, data, benchmarks, models, finetune: a --configfile replaces "
        "config/config.yaml; to change a few keys of the default, stack your file on it: snakemake --configfile "
        "config/config.yaml my.yaml"]


def test_a_stacked_configfile_changes_only_its_keys(tmp_path):
    """The README's example: the default with decode.block_size 8 on top, every other setting (the samplers, the
    decode batch) the default's."""
    shutil.copytree(ROOT / "config", tmp_path / "config")
    (tmp_path / "my.yaml").write_text(readme_stacking_example())
    out = snakemake(tmp_path, "-n", "-p", "--configfile", "config/config.yaml", "my.yaml")
    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    decodes = [j["command"] for j in jobs(out.stdout) if j["rule"] == "decode"]
    tags = {re.search(r"/generations/[^/]+/[^/]+/([^/]+)/", command).group(1) for command in decodes}
    assert tags == set(expand_samplers(default["decode"]["samplers"]))
    for command in decodes:
        spec = json.loads(re.search(r"--decode-spec '([^']*)'", command).group(1))
        assert spec["block_size"] == 8 and spec["batch_size"] == default["decode"]["batch_size"]
        assert "results/embedded/" in command


def test_figures_config_before_the_default_names_the_run_to_do_first(tmp_path):
    shutil.copytree(ROOT / "config", tmp_path / "config")
    out = snakemake(tmp_path, "-n", "--configfile", "config/figures.yaml", check=False)
    assert out.returncode != 0 and error_lines(out) == [
        "config error: models.tiny-llama.path: results/embedded/models/tiny-llama/base does not exist yet: it is made "
        "by the run 'embedded' (config/config.yaml); run that first: snakemake --cores all --configfile "
        "config/config.yaml"]
    assert not (tmp_path / "results").exists()


def test_use_conda_is_refused_in_one_line(tmp_path):
    out = snakemake(tmp_path, "-n", "--use-conda", "--configfile", str(ROOT / "tests" / "smoke.yaml"),
                    check=False)
    assert out.returncode != 0 and error_lines(out) == [
        "config error: --use-conda is not supported: run snakemake from the environment of scripts/setup.sh or of "
        "`conda env create -f environment.yml` (docs/install.md)"]


def test_workflow_lints_clean(tmp_path):
    out = snakemake(tmp_path, "--lint")
    assert "Lints for" not in out.stdout + out.stderr


def _keys(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _keys(value)


def test_schema_holds_no_defaults():
    """Defaults live in the stages' typed settings only (one home), never also in the schema."""
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert "default" not in set(_keys(schema))


# ------------------------------------------------------------------------------------------------ SLURM profile
SLURM = ["--profile", str(ROOT / "profiles" / "slurm")]
SITE = {"SBD_SLURM_ACCOUNT": "proj42", "SBD_SLURM_PARTITION": "gpu-h100"}


def jobs(dry_run: str) -> list[dict]:
    """Every job of a dry run (``-n -p``) as {"rule", "resources": {...}, "command"}."""
    found = []
    for m in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)(?:Shell command: (.*))?", dry_run, re.M):
        fields = dict(re.findall(r"^    (\w+): (.*)$", m.group(2), re.M))
        resources = dict(pair.split("=", 1) for pair in fields.get("resources", "").split(", ") if "=" in pair)
        found.append({"rule": m.group(1), "resources": resources, "command": m.group(3) or "",
                      "threads": int(fields.get("threads", 1)), "input": fields.get("input", "").split(", ")})
    return found


def test_paper_profile_plans_multi_node_finetunes_through_the_launcher(tmp_path):
    out = snakemake(tmp_path, "-n", "-p", "--configfile", str(ROOT / "config" / "paper.yaml"), *SLURM, env=SITE)
    planned = jobs(out.stdout)
    finetunes = [j for j in planned if j["rule"] == "finetune"]
    assert len(finetunes) == 4  # 2 models x 2 objectives
    for job in finetunes:  # 8 nodes x 8 GPUs: one task per node, whose command starts srun + torchrun itself
        res = job["resources"]
        assert (res["nodes"], res["tasks"], res["mpi"]) == ("8", "8", "srun")
        assert res["slurm_extra"] == "--ntasks-per-node=1 --gpus-per-node=8"
        assert (res["slurm_account"], res["slurm_partition"], res["runtime"]) == ("proj42", "gpu-h100", "2880")
        assert "-m sbd_core" in job["command"] and " finetune " in job["command"]
        assert "--nodes 8 --processes 8" in job["command"]
    decodes = [j for j in planned if j["rule"] == "decode"]
    assert decodes and all(j["resources"]["gpu"] == "1" for j in decodes)
    downloads = [j for j in planned if j["rule"] in ("data", "fetch_base", "benchmark")]
    assert len(downloads) == 3 + 2 + 6 and not any("gpu" in j["resources"] for j in downloads)


def test_slurm_profile_names_the_missing_account_and_partition(tmp_path):
    env = {"SBD_SLURM_ACCOUNT": "", "SBD_SLURM_PARTITION": ""}
    out = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config" / "paper.yaml"), *SLURM, env=env, check=False)
    assert out.returncode != 0
    message = out.stdout + out.stderr
    assert "SLURM settings unset" in message and "slurm_account" in message and "slurm_partition" in message
    assert "export SBD_SLURM_ACCOUNT=" in message and not (tmp_path / "results").exists()


@pytest.mark.slow
def test_downloads_run_on_the_submitting_node(tmp_path):
    """Under the SLURM profile, the download jobs run here (no sbatch; they fail offline with our message) while
    compute jobs would be submitted: fake SLURM tools record every call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sbatch", "sacct", "squeue", "sacctmgr", "sinfo", "scontrol", "srun", "scancel"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/calls.log\nexit 1\n')
        (bin_dir / tool).chmod(0o755)
    targets = ["results/paper-8b/data/tulu3", "results/paper-8b/models/qwen-3-8b/base"]
    out = snakemake(tmp_path, "--configfile", str(ROOT / "config" / "paper.yaml"), *SLURM, "--keep-going",
                    "--slurm-init-seconds-before-status-checks", "1", *targets,
                    env={**SITE, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, check=False)
    log = out.stdout + out.stderr
    assert "localrule data:" in log and "localrule fetch_base:" in log
    calls = (tmp_path / "calls.log").read_text() if (tmp_path / "calls.log").exists() else ""
    assert "sbatch" not in calls
    assert "download it on a connected machine" in (tmp_path / "results/paper-8b/logs/base/qwen-3-8b.log").read_text()


@pytest.mark.parametrize("path", SHIPPED_CASES)
def test_timing_stage_measures_each_model_once_and_feeds_the_report(shipped_plan, path):
    """One time(k) job per model (its SBD arm's checkpoint, the decode block size and its batch sizes), on the whole
    machine like a decode job, and the report reads every time(k) file; none where the config turns it off
    (config/claim.yaml)."""
    config = shipped(path)[1]
    planned_jobs = jobs(shipped_plan(path))
    timed = sorted(config["models"]) if from_section(TimingSettings, config.get("timing"), "timing").enabled else []
    timing = [j["command"] for j in planned_jobs if j["rule"] == "timing"]
    assert sorted(re.search(r"--out \S+/timing/(\S+)\.json", c).group(1) for c in timing) == timed
    block = config["decode"].get("block_size", 16)
    batch = config["decode"].get("batch_size", 8)
    for command in timing:
        assert f"--block-size {block} " in command and "/sbd " in command + " "
        assert f"--batch {' '.join(str(b) for b in sorted({1, batch}))} " in command
    report = next(j["command"] for j in planned_jobs if j["rule"] == "report")
    for model in config["models"]:
        assert (f"/timing/{model}.json" in report) == (model in timed)


@pytest.mark.parametrize("decode_threads, cores, torch_threads",
                         [(1, 1, 1), pytest.param(None, 3, 2, marks=pytest.mark.slow)])  # (1, 1, 1): the default's
def test_decode_threads_set_the_cores_of_decodes_and_timed_jobs_claim_the_machine(tmp_path, shipped_plan,
                                                                                 decode_threads, cores, torch_threads):
    """runtime.decode_threads: a decode job claims that many cores and runs that many threads; null: every core of the
    run with runtime.threads threads. The timed jobs (speed, timing) claim every core whatever it says. On 3 cores:
    the default config (decode_threads 1) and the default with null."""
    default = ROOT / "config" / "config.yaml"
    config = yaml.safe_load(default.read_text())
    if config["runtime"]["decode_threads"] == decode_threads:
        planned_jobs = jobs(shipped_plan(default))
    else:
        config["runtime"]["decode_threads"] = decode_threads
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        out = snakemake(tmp_path, "-n", "-p", "--configfile", str(path), "--cores", "3")
        planned_jobs = jobs(out.stdout)
    decodes = [j for j in planned_jobs if j["rule"] == "decode"]
    assert decodes and all(j["threads"] == cores for j in decodes)
    assert all(f"--threads {torch_threads} " in j["command"] for j in decodes)
    timed = [j for j in planned_jobs if j["rule"] in ("speed", "timing")]
    assert len(timed) == 3 and all(j["threads"] == 3 and "--threads 2 " in j["command"] for j in timed)


def test_one_speed_job_per_model_and_benchmark_times_every_decode_run_after_it(shipped_plan):
    """The speed stage: one job per (model, benchmark), whose inputs are every arm's model and every decode run's
    generations of that model and benchmark (seeds included: config/seeds.yaml), with those runs in its --rows; the
    report reads it."""
    path = ROOT / "config" / "seeds.yaml"
    config = shipped(path)[1]
    planned_jobs = jobs(shipped_plan(path))
    speed = {re.search(r"--out \S+/speed/(\S+)\.json", j["command"]).group(1): j for j in planned_jobs
             if j["rule"] == "speed"}
    assert sorted(speed) == sorted(f"{m}/{b}" for m in config["models"] for b in config["benchmarks"])
    decodes = [j for j in planned_jobs if j["rule"] == "decode"]
    for name, job in speed.items():
        model, bench = name.split("/")
        outs = [re.search(r"--out (\S+)", d["command"]).group(1) for d in decodes]
        generations = sorted(o for o in outs if f"/generations/{model}/" in o and o.endswith(f"/{bench}.jsonl"))
        assert len(generations) == len(decodes) // len(config["benchmarks"])  # every decode run of the benchmark
        assert sorted(i for i in job["input"] if i.endswith(".jsonl") and "/generations/" in i) == generations
        seeded = [(f"{arm}-s{seed}" if seed else arm, seed) for seed in config["finetune"]["seeds"]
                  for arm in ("ntp", "sbd")]
        assert {f"results/embedded/models/{model}/{arm}" for arm, _ in seeded} <= set(job["input"])
        rows = json.loads(shlex.split(job["command"].split("--rows ", 1)[1])[0])
        assert sorted(r["generations"] for r in rows) == generations
        assert {(r["arm"], r["train_seed"]) for r in rows} == set(seeded)
    report = next(j["command"] for j in planned_jobs if j["rule"] == "report")
    assert all(f"/speed/{name}.json" in report for name in speed)


# the study configs, the overlays a shipped run's RUN.md names in its command, and the shipped configs (the slow tier
# dry-runs most of those, so their schema check is here too)
SCHEMA_CHECKED = sorted([*(ROOT / "config" / "tune").rglob("*.yaml"), *(ROOT / "results" / "reference").rglob("*.yaml"),
                        *SHIPPED])
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())


@pytest.mark.parametrize("path", SCHEMA_CHECKED, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_study_and_shipped_config_still_meets_the_schema(path):
    """docs/claim-study.md repeats each run with its config: a whole config, or an overlay stacked on the default
    (:func:`stacked`; study overlays name their own run, so :func:`shipped`'s test for ``run`` cannot tell them), must
    still pass the workflow's schema check (a renamed key would otherwise break a documented command unnoticed). The
    check is workflow/rules/config.smk's ``check_schema`` (jsonschema against the same file), which a test cannot
    import from a rule file. The shipped configs go through it in their dry runs above too, most of them in the slow
    tier only, so they are here as well."""
    config = yaml.safe_load(path.read_text()) or {}
    if not all(key in config for key in SCHEMA["required"]):
        config = stacked(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()), config)
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(config)]
    assert errors == []
