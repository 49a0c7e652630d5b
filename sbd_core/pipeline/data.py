"""The data stage: each source's training documents (a hub source downloaded at its pinned revision, a synthetic task's
training problems generated, a local path checked), and the synthetic rows a scratch base model pretrains on.

Torch-free, so a data job does not pay torch's start-up (:mod:`.training` holds the stages that train).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..io_utils import read_jsonl, write_json_atomic
from ..provenance import provenance
from ..tasks import TASKS
from ..training_data import MixSpec, fetch


def run_data(spec: dict, out_dir: Path) -> None:
    """Each source's training documents in ``out_dir/<name>/``, with its provenance: a hub source downloaded at its
    pinned revision, a synthetic task's training problems generated, a local ``path`` checked and read in place later
    (``spec``: the config's ``data`` section or part of it; the workflow runs one job per source)."""
    mix = MixSpec.from_dict(spec)
    files = fetch(mix, out_dir)
    for entry in mix.sources:
        settings = {**entry, "seed": mix.seed, "files": files[entry["name"]]}
        write_json_atomic(provenance("data", settings, mix.seed), Path(out_dir) / entry["name"] / "provenance.json")


def synthetic_files(data_dir: Path) -> list[Path]:
    """The training rows of the synthetic tasks the data stage generated, in the task registry's order."""
    return [f for f in (Path(data_dir) / name / "train.jsonl" for name in TASKS) if f.is_file()]


def synthetic_pairs(data_dir: Path) -> list[tuple[str, str]]:
    """The (prompt, target) rows of the synthetic tasks the data stage generated, in the task registry's order."""
    pairs = [(r["prompt"], r["target"]) for f in synthetic_files(data_dir) for r in read_jsonl(f)]
    if not pairs:
        raise UserError(f"a scratch base model is pretrained on the synthetic tasks, but {data_dir} holds none: add "
                        "{name: math, problems: N} and/or {name: code, problems: N} to data.sources")
    return pairs
