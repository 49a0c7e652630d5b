"""The speed file (``kind: sbd_speed``, ``version: 1``): written by the speed stage (:mod:`sbd_core.pipeline.speed`),
read by the report (:mod:`sbd_core.report.speed`). This module owns its fields.

Header: ``model``, ``benchmark``, ``device``, ``device_name``, ``dtype``, ``threads``, ``settings`` (the speed section
and the decode batch size), ``problem_ids`` (the timed subset). ``rows`` (:func:`speed_row`): per timed row its
identity, its ``reference`` row and per problem the cost its decode job recorded (``widths``: ``{tokens fed:
forwards}``, with ``widths_source``). ``runs`` (:func:`timed_run`): every timed decode.
"""

from __future__ import annotations

from ..errors import UserError
from ..io_utils import read_json_object, write_json_atomic

KIND, VERSION = "sbd_speed", 1


class SpeedFileError(UserError):
    """A speed file is unreadable or does not follow the ``sbd_speed`` format."""


def speed_problem(pid: str, record: dict, widths: dict[int, int]) -> dict:
    """A row's problem: the cost its decode record gives (``record``: a generations record) and its forwards by
    tokens fed."""
    return {"id": pid, "prompt_tokens": record.get("prompt_tokens"), "num_tokens": record["num_tokens"],
            "nfe": record["nfe"], "widths": {str(w): n for w, n in sorted(widths.items())}}


def speed_row(*, name: str, arm: str, objective: str, train_seed: int, train_steps: int, sampler: str, mode: str,
              sampler_spec: dict, control: bool, reference: str, block_size: int, batch_size: int, checked: bool,
              generations: str, widths_source: str, problems: list[dict]) -> dict:
    """A timed row, its keys in the file's order."""
    return {"name": name, "arm": arm, "objective": objective, "train_seed": train_seed, "train_steps": train_steps,
            "sampler": sampler, "mode": mode, "sampler_spec": sampler_spec, "control": control, "reference": reference,
            "block_size": block_size, "batch_size": batch_size, "checked": checked, "generations": generations,
            "widths_source": widths_source, "problems": problems}


def timed_run(*, round: int, position: int, row: str, batch: int, wall_s: float, prefill_s: float) -> dict:
    """One timed decode: its round, its place in the round, its row and batch size, wall and prefill seconds."""
    return {"round": round, "position": position, "row": row, "batch": batch, "wall_s": wall_s, "prefill_s": prefill_s}


def speed_document(*, model: str, benchmark: str, device: str, device_name: str, dtype: str, threads: int,
                   settings: dict, problem_ids: list[str], rows: list[dict], runs: list[dict]) -> dict:
    """The file's contents (without provenance), its keys in the file's order."""
    return {"kind": KIND, "version": VERSION, "model": model, "benchmark": benchmark, "device": device,
            "device_name": device_name, "dtype": dtype, "threads": threads, "settings": settings,
            "problem_ids": problem_ids, "rows": rows, "runs": runs}


def write_speed(document: dict, provenance: dict, out) -> None:
    """Write the file atomically, its provenance record beside the contents."""
    write_json_atomic({**document, "provenance": provenance}, out)


def read_speed(path) -> dict:
    """A speed file's contents (with its ``path``), checked for the kind and the fields the report reads;
    SpeedFileError naming the file otherwise."""
    doc = read_json_object(path, "speed file", SpeedFileError)
    if doc.get("kind") != KIND or not isinstance(doc.get("rows"), list) or not isinstance(doc.get("runs"), list):
        raise SpeedFileError(f"speed file {path}: not a file of the speed stage (kind {KIND} with rows and runs)")
    return {**doc, "path": str(path)}
