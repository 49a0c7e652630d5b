"""Provenance recorded beside every output: resolved settings, package versions, git commit, hardware, seed."""

from __future__ import annotations

import json
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


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's model name with its family, model and stepping numbers (Linux), which tell apart CPU generations that
    a virtual machine reports under one name ("AMD EPYC"); elsewhere ``platform.processor()``, or None."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return platform.processor() or None
    fields = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first processor's block is enough
            continue
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return platform.processor() or None
    numbers = ", ".join(f"{key} {fields[key]}" for key in ("cpu family", "model", "stepping") if key in fields)
    return f"{fields['model name']} ({numbers})" if numbers else fields["model name"]


def hardware() -> dict:
    """CPU and platform of this process, and its torch threads, CPU kernels and accelerator where the stage loaded
    torch. A stage that only reads and writes files (data, benchmark, score, likelihood-data, report) loads none and
    records none: importing torch here would cost each of its jobs, most of a DAG's, torch's start-up. torch picks its
    CPU kernels by ``torch.backends.cpu.get_cpu_capability`` (AVX2, AVX512, ...), so runs on CPUs of two capabilities
    need not agree to the bit."""
    info = {"platform": platform.platform(), "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
            "machine": platform.machine(), "cpu": cpu_model()}
    torch = sys.modules.get("torch")
    if torch is not None:
        info.update(torch_threads=torch.get_num_threads(), cpu_capability=torch.backends.cpu.get_cpu_capability(),
                    cuda=torch.cuda.is_available())
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


def provenance(stage: str, settings: dict, seed: int | None = None) -> dict:
    """The provenance block for one stage's output."""
    return {"stage": stage, "settings": settings, "seed": seed, "versions": package_versions(),
            "git_commit": git_commit(), "hardware": hardware(), "command": sys.argv,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def model_recipe(model_dir: Path) -> dict:
    """What the model's own provenance says about how it was trained: objective, departures from the paper, and
    ``trained_on``, the CPU, torch's CPU kernels and GPU of its fine-tune (the floats, and so the fine-tune's path,
    follow them: a report names them beside its numbers)."""
    path = Path(model_dir) / "provenance.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    settings, hardware_used = record.get("settings", {}), record.get("hardware") or {}
    recipe = {key: settings[key] for key in ("objective", "departures") if key in settings}
    trained_on = {key: hardware_used[key] for key in ("cpu", "cpu_capability", "gpu") if hardware_used.get(key)}
    return {**recipe, "trained_on": trained_on} if trained_on else recipe
