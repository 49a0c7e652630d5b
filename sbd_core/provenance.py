"""Provenance recorded beside every output: resolved settings, package versions, git commit, hardware, seed."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

PACKAGES = ("sbd-core", "torch", "transformers", "accelerate", "tokenizers", "lm_eval", "evalplus", "snakemake",
            "math-verify", "datasets", "gguf", "numpy", "pandas", "matplotlib")


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages results depend on (None when absent)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    """The commit of the source tree this package runs from (with '-dirty' if modified), or None."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def hardware() -> dict:
    """CPU, thread count and accelerator of this process."""
    import torch

    info = {"platform": platform.platform(), "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "machine": platform.machine(), "cuda": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def provenance(stage: str, settings: dict, seed: int | None = None) -> dict:
    """The provenance block for one stage's output."""
    return {"stage": stage, "settings": settings, "seed": seed, "versions": package_versions(),
            "git_commit": git_commit(), "hardware": hardware(), "command": sys.argv,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
