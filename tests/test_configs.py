"""Every shipped config plans exactly what its file says (no merging with the default), and the workflow lints clean."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sbd_core.samplers import expand_samplers

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]
SHIPPED = sorted((ROOT / "config").glob("*.yaml"))


def snakemake(workdir: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(SNAKEMAKE + ["--directory", str(workdir), *args], capture_output=True, text=True,
                          env=env, timeout=300)


def planned(workdir: Path, *args) -> dict[str, set[str]]:
    """Each wildcard's values over all jobs of a dry run in ``workdir``, which holds a copy of config/ as a user's
    checkout does (so a default config that merged into --configfile would show up here)."""
    shutil.copytree(ROOT / "config", workdir / "config")
    out = snakemake(workdir, "-n", "-p", *args)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    values: dict[str, set[str]] = {}
    for line in re.findall(r"^\s*wildcards: (.*)$", out.stdout, re.M):
        for pair in line.split(", "):
            key, value = pair.split("=", 1)
            values.setdefault(key, set()).add(value)
    return values


def expected(config: dict) -> dict[str, set[str]]:
    return {"model": set(config["models"]), "objective": set(config["finetune"]["objectives"]),
            "benchmark": set(config["benchmarks"]), "sampler": set(expand_samplers(config["decode"]["samplers"]))}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_dry_run_plans_only_what_the_config_says(tmp_path, path):
    config = yaml.safe_load(path.read_text())
    assert planned(tmp_path, "--configfile", str(path)) == expected(config)


def test_default_run_uses_config_yaml(tmp_path):
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert planned(tmp_path) == expected(config)


def test_workflow_lints_clean(tmp_path):
    out = snakemake(tmp_path, "--lint")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
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
