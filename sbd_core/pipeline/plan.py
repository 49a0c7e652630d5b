"""What the workflow checks before any job runs, from the config alone: the fine-tuning settings
(:func:`train_config`) and whether they can be laid out on the launch's processes (:func:`check_layout`). No torch
import: Snakemake calls these while it parses the rules, and :mod:`.training`'s stages call them too.
"""

from __future__ import annotations

from dataclasses import fields

from ..errors import UserError, user_input
from ..launch import LaunchSettings
from ..settings import check_types
from ..train_config import TrainConfig, micro_batches_per_step


def train_config(objective: str, spec: dict, where: str = "finetune"):
    """A :class:`TrainConfig` from a config section (``where``: its name in messages); UserError naming an unknown
    key, a value of the wrong type or out of range."""
    allowed = {f.name for f in fields(TrainConfig)} - {"objective"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise UserError(f"unknown training setting(s) {unknown} in {where}; allowed: {sorted(allowed)}")
    check_types(TrainConfig, {"objective": objective, **spec}, where)
    with user_input(where):
        return TrainConfig(objective=objective, **spec)


def check_layout(objectives: list[str], spec: dict, layout: LaunchSettings) -> None:
    """Fail before any job runs when the training settings cannot be laid out on ``layout``'s processes (e.g.
    ``tokens_per_step`` not a multiple of batch_size x max_length x processes)."""
    spec = {k: v for k, v in spec.items() if k != "allow_resize"}
    for objective in objectives:
        config = train_config(objective, spec)
        with user_input("finetune"):
            micro_batches_per_step(config, layout.processes)
