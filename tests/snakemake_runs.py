"""Snakemake runs of the repository's workflow for the tests: a run in a work folder and its job counts."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]


def snakemake(workdir: Path, *args, check=True, env: dict | None = None):
    """Snakemake on the repository's Snakefile in ``workdir``, offline, from ``workdir`` as a user runs it (relative
    --configfile paths); ``env``: more environment variables; ``check``: an AssertionError with the output tails when
    it fails."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    # a guard against a hung run only: the smoke DAG takes about a minute, but 8-10 minutes on a 2-core machine
    # under a load of 12 (measured), so the guard is far above that
    out = subprocess.run(SNAKEMAKE + ["--directory", str(workdir), *args], capture_output=True, text=True, env=env,
                         timeout=1800, cwd=workdir)
    if check and out.returncode != 0:
        raise AssertionError(f"snakemake {args} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a snakemake run or dry run."""
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}
