"""scripts/dev_seeds.sh: a user's mistake is one line naming what is wrong, before any decode (the decoding itself is
the decode and score stages', tested with them; the script's measured runs: docs/claim-study.md)."""

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "dev_seeds.sh"


def run(args, cwd):
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True)


def test_missing_arguments_print_the_usage(tmp_path):
    out = run(["claim"], tmp_path)
    assert out.returncode != 0 and "usage: scripts/dev_seeds.sh RUN OUT SEEDS SAMPLERS [PROBLEMS]" in out.stderr


def test_a_run_without_models_is_named(tmp_path):
    out = run(["nope", str(tmp_path / "out"), "0", "[]"], tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip() == "error: results/nope/models/tiny-llama not found: run the workflow for nope first"
    assert not (tmp_path / "out").exists()  # nothing written
