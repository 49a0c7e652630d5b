"""The workflow's plan, from the config alone: the fine-tuning settings (:func:`train_config`) and whether they can be
laid out on the launch's processes (:func:`check_layout`); which samplers decode each arm (:func:`samplers_of`), the
decode runs (:func:`runs`), what a score file says about its run (:func:`run_names`) and the rows a speed job times
(:func:`speed_rows`). No torch import: Snakemake calls these while it parses the rules (workflow/rules/common.smk wraps
them with the config's values; :mod:`.training` re-exports the first two for its stages).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Mapping, Sequence

from ..errors import UserError, user_input
from ..launch import LaunchSettings
from ..samplers import NTP, as_sampler
from ..settings import check_types
from ..train_config import OBJECTIVES, TrainConfig, micro_batches_per_step
from .arms import Arm


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


def samplers_of(objective: str, samplers: Sequence[str], peers: Sequence[str],
                restrict: Mapping[str, list]) -> list[str]:
    """The samplers (tags, in ``samplers``' order) an arm of ``objective`` is decoded with: the NTP arm with NTP
    decoding and the training-free ``peers`` (they generate on the NTP model); every other arm with NTP decoding and
    every block solver, never a peer. ``restrict`` (decode.restrict) names a sublist per objective instead; the NTP
    arm's must keep ``ntp`` (the NTP decoding), its baseline. UserError naming decode.restrict otherwise."""
    own = [t for t in samplers if t == NTP or (t in peers) == (objective == "ntp")]
    chosen = restrict.get(objective, own)
    unknown = sorted(set(chosen) - set(samplers))
    if unknown:
        raise UserError(f"decode.restrict.{objective} names {unknown}, not among decode.samplers ({sorted(samplers)})")
    foreign = sorted(set(chosen) - set(own))
    if foreign:
        raise UserError(f"decode.restrict.{objective} names {foreign}: the peers ({list(peers)}) decode the NTP arm "
                        "only, the block solvers every other arm")
    if objective == "ntp" and NTP not in chosen:
        raise UserError("decode.restrict.ntp must include ntp (the baseline every speedup is measured against)")
    return list(chosen)


def check_shifted_samplers(objectives: Sequence[str], spec: Mapping, sampler_specs: Mapping[str, dict],
                           samplers_for) -> None:
    """UserError when ``finetune.matp_shift`` is on and an SBD arm would be decoded with ``verify``, which reads the
    paper's MATP layout only (the decoders refuse it too, but only after the fine-tune)."""
    if not spec.get("matp_shift"):
        return
    verified = sorted({tag for objective in objectives if OBJECTIVES.get(objective) == "sbd"
                       for tag in samplers_for(objective)
                       if as_sampler(sampler_specs[tag]).verify != "none"})
    if verified:
        raise UserError(f"finetune.matp_shift: {spec['matp_shift']} cannot be decoded with verify (decode.samplers "
                        f"{verified}): verify reads the paper's MATP layout only; drop those samplers or matp_shift")


def runs(models: Sequence[str], arms: Mapping[str, Arm], samplers_for) -> list[tuple[str, str, str]]:
    """(model, arm, sampler) of every decode run: each model's arms, each with ``samplers_for(arm.objective)``."""
    return [(m, name, s) for m in models for name, arm in arms.items() for s in samplers_for(arm.objective)]


def run_names(model: str, arm: Arm, sampler: str, max_steps: int) -> dict:
    """What a score file says about its run: model, objective, fine-tune seed, training steps and sampler."""
    return {"model": model, "objective": arm.objective, "sampler": sampler, "train_seed": arm.seed,
            "train_steps": arm.train_steps(max_steps)}


def speed_rows(run_dir: str, model: str, benchmark: str, decode_runs: Sequence[tuple[str, str, str]],
               arms: Mapping[str, Arm], samplers: Mapping[str, dict], max_steps: int) -> list[dict]:
    """The decode runs one speed job times (:mod:`sbd_core.pipeline.speed`): every (arm, sampler) of ``model`` among
    ``decode_runs``, with its model folder, identity, sampler spec and generations file on ``benchmark``."""
    return [_speed_row(run_dir, benchmark, run_names(m, arms[a], s, max_steps), a, samplers[s])
            for m, a, s in decode_runs if m == model]


def _speed_row(run_dir: str, benchmark: str, names: dict, arm: str, sampler_spec: dict) -> dict:
    """One speed row: the arm's model folder, its identity (no model name: the speed job has one model) and the
    generations it decoded."""
    model, sampler = names["model"], names["sampler"]
    return {"arm": arm, "model": f"{run_dir}/models/{model}/{arm}", "objective": names["objective"],
            "train_seed": names["train_seed"], "train_steps": names["train_steps"], "sampler": sampler,
            "sampler_spec": sampler_spec,
            "generations": f"{run_dir}/generations/{model}/{arm}/{sampler}/{benchmark}.jsonl"}
