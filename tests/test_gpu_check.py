"""scripts/gpu_check.sh on its CPU dry path (tiny shapes, the pilot as a snakemake dry run): every step runs and
leaves its files, with provenance, under the folder given; its argument errors are one line. The GPU path itself
needs a CUDA machine (the script refuses to start without one)."""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
STEPS = ["tests", "timing", "bench_decode", "bench_train", "pilot"]


def run(*args, timeout=300):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "PYTHON": sys.executable})


def test_dry_run_runs_every_step_and_writes_its_files_with_provenance(tmp_path):
    done = run("--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "5/5 steps passed" in done.stdout.splitlines()[-1]
    provenance = json.loads((tmp_path / "provenance.json").read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", provenance["git_commit"]) and provenance["dry_run"] is True
    assert provenance["torch"] == torch.__version__ and provenance["device"] and "--dry-run" in provenance["command"]
    steps = json.loads((tmp_path / "steps.json").read_text())["steps"]
    assert [s["step"] for s in steps] == STEPS and all(s["exit_status"] == 0 and not s["timed_out"] for s in steps)
    assert all((tmp_path / f"{s}.log").is_file() for s in STEPS)
    suite = ET.parse(tmp_path / "tests.xml").getroot().find("testsuite")
    assert suite.get("errors") == suite.get("failures") == "0"
    if not torch.cuda.is_available():  # every GPU test collected and skipped cleanly; the compiled path's checks ran
        cases = suite.findall("testcase")
        gpu = [c for c in cases if c.get("classname", "").endswith("test_gpu")]
        assert len(gpu) >= 4 and all(c.find("skipped") is not None for c in gpu)
        compiled = [c for c in cases if "test_engine_compile" in c.get("classname", "")]
        assert any("traces_into_one_graph" in c.get("name") for c in compiled)
        assert compiled and all(c.find("skipped") is None for c in compiled)
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["kind"] == "sbd_timing" and timing["model"]["name"] == "tiny-llama" and timing["rows"]
    decode = json.loads((tmp_path / "bench_decode.json").read_text())
    assert decode["benchmark"] == "bench_decode" and {r["decoder"] for r in decode["rows"]} == {"generate", "engine"}
    assert [s["json"] for s in steps] == [None, "timing.json", "bench_decode.json", "bench_train.json", None]
    assert json.loads((tmp_path / "bench_train.json").read_text())  # the benchmark's last-line document
    pilot = yaml.safe_load((tmp_path / "pilot" / "pilot_short.yaml").read_text())
    assert pilot["run"] == "pilot" and pilot["finetune"]["max_steps"] == 4 and pilot["runtime"]["device"] == "cpu"
    assert Path(pilot["data"]["sources"][0]["path"]).is_file() and Path(pilot["benchmarks"]["gsm8k"]["data"]).is_file()
    assert "This was a dry-run" in (tmp_path / "pilot.log").read_text()


def test_argument_errors_are_one_line(tmp_path):
    done = run("--bogus")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "--bogus" in done.stderr
    done = run("--dry-run", "--deadline-s", "soon")
    assert done.returncode == 2 and "--deadline-s soon" in done.stderr and done.stderr.strip().count("\n") == 0
    done = run("--dry-run", "--pilot-model", str(tmp_path))
    assert done.returncode == 2 and "no config.json" in done.stderr and done.stderr.strip().count("\n") == 0
    if not torch.cuda.is_available():
        done = run("--out", str(tmp_path / "gpu"), timeout=60)
        assert done.returncode == 2 and "no CUDA device" in done.stderr and not (tmp_path / "gpu").exists()
