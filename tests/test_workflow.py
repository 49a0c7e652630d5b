"""The whole DAG through Snakemake on the smoke config, partial reruns (the README's commands as printed), the HTML report
(config errors: tests/test_bad_configs.py)."""

import csv
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sbd_core import cli
from sbd_core.benchmarks import get_benchmark
from sbd_core.provenance import cpu_model
from snakemake_runs import job_counts, snakemake

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("smoke")
    config = workdir / "smoke.yaml"
    shutil.copy(ROOT / "tests" / "smoke.yaml", config)
    run = snakemake(workdir, "--cores", "2", "--configfile", str(config))
    return workdir, config, run.stdout + run.stderr


def test_whole_dag_produces_report_and_sane_summary(smoke):
    workdir, _, log = smoke
    counts = job_counts(log)
    assert counts == {"data": 2, "benchmark": 2, "pretrain_base": 1, "pack": 1, "finetune": 2, "decode": 6, "score": 6,
                      "likelihood_data": 1, "likelihood": 2, "timing": 1, "speed": 2, "report": 1, "all": 1}
    report = workdir / "results" / "smoke" / "report"
    for name in ("summary.csv", "table1.md", "table1.tex", "table1.csv", "report.md", "speedup_math.png",
                 "speedup_code.pdf", "paper_table1.md"):
        assert (report / name).stat().st_size > 0, name
    rows = list(csv.DictReader(open(report / "summary.csv")))
    assert {(r["objective"], r["sampler"], r["benchmark"]) for r in rows} == {
        (o, s, t) for o, s in (("ntp", "ntp"), ("sbd", "ntp"), ("sbd", "topk-4")) for t in ("math", "code")}
    assert {(r["benchmark"], r["split"]) for r in rows} == {("math", "test"), ("code", "dev")}  # smoke.yaml's splits
    assert "benchmarks: code (dev split), math (test split)." in (report / "report.md").read_text()
    for r in rows:
        assert 0.0 <= float(r["accuracy"]) <= 1.0
        assert float(r["mean_nfe"]) > 0 and float(r["wall_speedup"]) > 0 and int(r["speed_rounds"]) == 2
        if r["sampler"] == "ntp":
            assert float(r["tokens_per_forward"]) == 1.0
        else:  # four tokens per forward unless a stop lands inside a block
            assert 1.0 < float(r["tokens_per_forward"]) <= 4.0 and float(r["nfe_speedup"]) > 1.0
    assert "Llama-3.1 8B" in (report / "paper_table1.md").read_text()
    assert len(json.loads((report / "provenance.json").read_text())["settings"]["scores"]) == 6


def test_likelihood_stage_scores_every_arm_on_the_same_questions(smoke):
    """The embedded analogue of Table 2: each arm scored on the same generated questions (paired by document), and
    the report's Table 2 with a row per arm."""
    workdir, _, _ = smoke
    run = workdir / "results" / "smoke"
    arms = {o: json.loads((run / "likelihood" / "tiny-llama" / o / "math_mc.json").read_text()) for o in ("ntp", "sbd")}
    docs = {o: score["per_doc"]["sbd_synth_math_mc"] for o, score in arms.items()}
    assert [d["doc_hash"] for d in docs["ntp"]] == [d["doc_hash"] for d in docs["sbd"]] and len(docs["ntp"]) == 8
    assert [d["loglikelihoods"] for d in docs["ntp"]] != [d["loglikelihoods"] for d in docs["sbd"]]  # two models
    for score in arms.values():
        assert score["n"] == 8 and 0.0 <= score["accuracy"] <= 1.0 and score["stderr"] is not None
        assert score["recipe"]["objective"] == score["objective"]
    rows = list(csv.DictReader(open(run / "report" / "table2.csv")))
    assert [(r["model"], r["objective"]) for r in rows] == [("tiny-llama", "ntp"), ("tiny-llama", "sbd")]
    sbd = rows[1]
    assert float(sbd["math_mc_delta_pts"]) == pytest.approx(float(sbd["math_mc_pct"]) - float(rows[0]["math_mc_pct"]))
    assert "Table 2 layout" in (run / "report" / "report.md").read_text()


@pytest.mark.slow  # the default tier reruns only what a changed setting reaches in the solver's case
def test_changing_a_likelihood_setting_reruns_only_its_jobs(smoke):
    workdir, config, _ = smoke
    changed = yaml.safe_load(config.read_text())
    changed["likelihood"]["tasks"]["math_mc"]["problems"] = 6
    path = workdir / "changed_likelihood.yaml"
    path.write_text(yaml.safe_dump(changed))
    dry = snakemake(workdir, "-n", "--configfile", str(path))
    assert job_counts(dry.stdout) == {"likelihood_data": 1, "likelihood": 2, "report": 1, "all": 1}
    changed["likelihood"]["tasks"]["math_mc"] = {"problems": 8, "batch_size": 3}  # scoring only: same data
    path.write_text(yaml.safe_dump(changed))
    dry = snakemake(workdir, "-n", "--configfile", str(path))
    assert job_counts(dry.stdout) == {"likelihood": 2, "report": 1, "all": 1}


def test_outputs_record_provenance(smoke):
    workdir, _, _ = smoke
    score = json.loads((workdir / "results/smoke/scores/tiny-llama/sbd/topk-4/code.json").read_text())
    prov = score["provenance"]
    for package in ("torch", "transformers", "lm_eval", "evalplus"):
        assert prov["versions"][package], package
    assert "git_commit" in prov and prov["hardware"]["cpu_count"] >= 1
    model = workdir / "results/smoke/models/tiny-llama/sbd"
    finetune = json.loads((model / "provenance.json").read_text())
    assert finetune["settings"]["objective"] == "sbd" and finetune["seed"] == 0
    # the fine-tune loaded torch: its record names the CPU capability torch picked its kernels by
    assert finetune["hardware"]["cpu_capability"] and finetune["hardware"]["cpu"] == cpu_model()
    # ...and the score record carries it on to the report, which names where each arm was fine-tuned
    kernels = finetune["hardware"]["cpu_capability"]
    assert score["recipe"]["trained_on"] == {"cpu": cpu_model(), "cpu_capability": kernels}
    report = (workdir / "results/smoke/report/report.md").read_text()
    assert f"- tiny-llama / sbd: {cpu_model()}, torch CPU kernels {kernels}" in report
    assert json.loads((model / "config.json").read_text())["sbd_mask_token_id"] == 3
    log_lines = (model / "train_log.jsonl").read_text().splitlines()
    assert "matp_loss" in json.loads(log_lines[-1])
    data = json.loads((workdir / "results/smoke/data/code/provenance.json").read_text())
    assert data["seed"] == 0 and data["settings"]["problems"] == 64
    packed = json.loads((workdir / "results/smoke/packed/tiny-llama/manifest.json").read_text())
    assert packed["settings"]["packing"] is False and packed["chat_template"] is None
    assert packed["rows"] == sum(s["selected_documents"] for s in packed["sources"].values())
    test = json.loads((workdir / "results/smoke/benchmarks/math_test.jsonl.provenance.json").read_text())
    assert test["n"] == 4 and test["settings"]["seed"] == 0
    decoded = json.loads((workdir / "results/smoke/generations/tiny-llama/sbd/topk-4/code.jsonl.provenance.json")
                         .read_text())["settings"]
    assert decoded["sampler_spec"]["tag"] == "topk-4" and decoded["total_wall_time_s"] > 0


def test_every_generations_file_scores_to_the_dags_number_through_the_cli(smoke, tmp_path, monkeypatch):
    """The README's `python -m sbd_core score` with only --benchmark --generations --data --out, on each of the DAG's
    generations files, gives its score file's number and summary.csv's. The benchmarks' default limit is set below
    the run's 4 problems first, as the shipped default (100) is below the embedded run's 200: a scorer that cut the
    benchmark stage's test file again would fail here."""
    run = smoke[0] / "results" / "smoke"
    for name in ("math", "code"):
        bench = get_benchmark(name)
        monkeypatch.setattr(bench, "defaults", dataclasses.replace(bench.defaults, limit=2))
    summary = {tuple(r[k] for k in ("model", "objective", "sampler", "benchmark")): float(r["accuracy"])
               for r in csv.DictReader(open(run / "report" / "summary.csv"))}
    generations = sorted((run / "generations").glob("*/*/*/*.jsonl"))
    assert len(generations) == len(summary) == 6
    for path in generations:
        key = (*path.parts[-4:-1], path.stem)
        out = tmp_path / ("-".join(key) + ".json")
        argv = ["score", "--benchmark", path.stem, "--generations", str(path),
                "--data", str(run / "benchmarks" / f"{path.stem}_test.jsonl"), "--out", str(out)]
        assert cli.main(argv) == 0
        ours, dags = json.loads(out.read_text()), json.loads((run / "scores" / Path(*key)).with_suffix(".json")
                                                             .read_text())
        assert ours["accuracy"] == dags["accuracy"] == summary[key], key
        assert ours["n"] == dags["n"] == 4 and ours["per_problem"] == dags["per_problem"], key
        assert ours["limit_applied"] == dags["limit_applied"] == {"limit": 4, "by": "benchmark stage"}, key


def test_a_bad_input_in_a_dag_job_is_one_line_in_its_log(smoke, tmp_path):
    """A rule runs `python -m sbd_core <stage>` with its output in the job's log: a bad generations file (a Latin-1
    byte on line 2) fails the score job with the CLI's one line as the whole log, in a copy of the smoke run."""
    workdir = tmp_path / "run"
    shutil.copytree(smoke[0], workdir, symlinks=True)
    gens = Path("results/smoke/generations/tiny-llama/sbd/topk-4/math.jsonl")
    lines = (workdir / gens).read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"completion": "', b'"completion": "\xff', 1)
    (workdir / gens).write_bytes(b"".join(lines))
    target = "results/smoke/scores/tiny-llama/sbd/topk-4/math.json"
    out = snakemake(workdir, target, "--forcerun", "score", "--rerun-triggers", "mtime", "--cores", "1",
                    "--configfile", str(workdir / "smoke.yaml"), check=False)
    assert out.returncode != 0 and job_counts(out.stdout + out.stderr) == {"score": 1}
    log = (workdir / "results/smoke/logs/score/tiny-llama/sbd/topk-4/math.log").read_text()
    assert "Traceback" not in log
    assert re.fullmatch(rf"error: {re.escape(str(gens))}:2: byte 0xff at column \d+ is not UTF-8; expected UTF-8 "
                        r"text \(one JSON object per line\)", log.strip().splitlines()[-1]), log
    assert not (workdir / target).exists()


def test_changing_one_solver_setting_reruns_only_its_jobs(smoke):
    workdir, config, _ = smoke
    changed = yaml.safe_load(config.read_text())
    changed["decode"]["samplers"][1]["n"] = 2
    path = workdir / "changed.yaml"
    path.write_text(yaml.safe_dump(changed))
    dry = snakemake(workdir, "-n", "--configfile", str(path))
    assert job_counts(dry.stdout) == {"decode": 2, "score": 2, "speed": 2, "report": 1, "all": 1}


def test_a_stacked_override_reruns_only_what_it_reaches(smoke):
    """A small file stacked on the run's config (--configfile A B, the README's way): another decode block size reruns
    the decodes, their scores, the speed jobs (they time every decode), the timing job (it times the block) and the
    report, nothing before them."""
    workdir, config, _ = smoke
    (workdir / "blocks.yaml").write_text("decode: {block_size: 4}\n")
    dry = snakemake(workdir, "-n", "--configfile", str(config), str(workdir / "blocks.yaml"))
    assert job_counts(dry.stdout) == {"decode": 6, "score": 6, "speed": 2, "timing": 1, "report": 1, "all": 1}


def test_a_second_seed_reuses_everything_of_the_first(smoke):
    workdir, config, _ = smoke
    seeded = yaml.safe_load(config.read_text())
    seeded["finetune"]["seeds"] = [0, 1]
    path = workdir / "seeded.yaml"
    path.write_text(yaml.safe_dump(seeded))
    dry = snakemake(workdir, "-n", "--configfile", str(path))
    # seed 1 only: its two fine-tunes, their decodes and scores, their likelihood job each (one task); the speed jobs
    # again (they time every decode run of the model)
    assert job_counts(dry.stdout) == {"finetune": 2, "decode": 6, "score": 6, "likelihood": 2, "speed": 2, "report": 1,
                                      "all": 1}


def readme_rerun_commands() -> list[str]:
    """The rerun and redraw commands of the README's quick reference, exactly as printed (comments cut)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quick reference", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [c for c in commands if "--forcerun" in c or c.endswith("&& snakemake")]


def fresh_clone(dest: Path) -> Path:
    """The checkout's files as a clone would have them (tracked and new, nothing git ignores: no results/, no
    .snakemake/), from the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def clone_with_smoke_results(smoke, dest: Path, runs=("embedded",)) -> Path:
    """A fresh clone whose default config (and figures config) is the smoke config, holding the smoke run's results
    under the README's paths (results/embedded/, results/figures/)."""
    clone = fresh_clone(dest)
    config = yaml.safe_load((ROOT / "tests" / "smoke.yaml").read_text())
    for run in runs:
        name = "config.yaml" if run == "embedded" else f"{run}.yaml"
        (clone / "config" / name).write_text(yaml.safe_dump({**config, "run": run}))
        shutil.copytree(smoke[0] / "results" / "smoke", clone / "results" / run, symlinks=True)
    return clone


def run_as_printed(command: str, clone: Path) -> dict[str, int]:
    """A README command line run by bash in the clone, with the environment's bin first on PATH (as after `source
    .venv/bin/activate`): its job counts."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PYTHONPATH": str(clone),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, f"{command}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return job_counts(out.stdout + out.stderr)


# What each of the README's rerun and redraw commands runs, and the run whose report it rewrites.
README_RERUNS = {
    "snakemake --forcerun report": ("embedded", {"report": 1, "all": 1}),
    "rm results/embedded/report/speedup_math.png && snakemake": ("embedded", {"report": 1, "all": 1}),
    "snakemake --forcerun report --configfile config/figures.yaml": ("figures", {"report": 1, "all": 1}),
    "snakemake --forcerun score": ("embedded", {"score": 6, "report": 1, "all": 1}),
}


def test_readme_redraws_a_figure_as_printed_in_a_fresh_clone(smoke, tmp_path):
    """The README's figure redraw, as printed: no --cores (profiles/default gives it), only the report job runs.
    (Every rerun and redraw command of the README: the slow test below.)"""
    assert readme_rerun_commands() == list(README_RERUNS)
    clone = clone_with_smoke_results(smoke, tmp_path / "clone")
    command = "rm results/embedded/report/speedup_math.png && snakemake"
    assert run_as_printed(command, clone) == README_RERUNS[command][1]
    assert (clone / "results" / "embedded" / "report" / "speedup_math.png").stat().st_size > 0


@pytest.mark.slow
def test_readme_rerun_and_redraw_commands_work_as_printed_in_a_fresh_clone(smoke, tmp_path):
    """Each rerun and redraw command of the README, as printed, reruns just the jobs it names and rewrites its run's
    report (slow: four snakemake runs, six score jobs and four report jobs beyond the smoke run)."""
    clone = clone_with_smoke_results(smoke, tmp_path / "clone", runs=("embedded", "figures"))
    for command in readme_rerun_commands():
        run, jobs = README_RERUNS[command]
        report = clone / "results" / run / "report" / "report.md"
        before = report.stat().st_mtime_ns
        assert run_as_printed(command, clone) == jobs, command
        assert report.stat().st_mtime_ns > before, command


def test_html_report_is_self_contained(smoke):
    workdir, config, _ = smoke
    snakemake(workdir, "--configfile", str(config), "--report", "report.html")
    html = (workdir / "report.html").read_text(errors="ignore")
    assert len(html) > 100_000 and "summary.csv" in html


def test_every_rule_has_a_log():
    for rules in (ROOT / "workflow" / "rules").glob("*.smk"):
        text = rules.read_text()
        assert len(re.findall(r"^rule \w+:", text, re.M)) == text.count("\n    log:"), rules.name
