"""The models a config evaluates: one fine-tune per (objective, seed), and of each its final model plus the checkpoints
kept at ``finetune.eval_at_steps`` (the training budgets of the paper's Figure 5).

Config keys (the ``finetune`` section; the workflow consumes them, the trainer never sees them):

* ``seeds: [0, 1, ...]``: each objective is fine-tuned once per seed (:class:`sbd_core.train_config.TrainConfig` ``seed``);
  without it, one fine-tune per objective with ``finetune.seed`` (default 0). Not both.
* ``eval_at_steps: [K, ...]``: every fine-tune also exports its model after K optimizer steps (1 <= K < max_steps),
  and each export is decoded and scored like a final model.

An arm's name is its folder under ``models/<model>/`` (and ``generations/``, ``scores/``)::

    <objective>              seed 0, the final model (a single-seed config keeps its plain paths)
    <objective>-s<N>         seed N > 0
    <objective>[-s<N>]-step<K>   the checkpoint after K steps

Adding a seed to a config that ran seed 0 therefore reuses everything of seed 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..train_config import TrainConfig

#: finetune keys the workflow consumes (not trainer settings).
ARM_KEYS = ("objectives", "seeds", "eval_at_steps")


@dataclass(frozen=True)
class Arm:
    """One evaluated model: the fine-tune of ``objective`` with ``seed``, after ``step`` steps (None: the final one)."""

    objective: str
    seed: int = 0
    step: int | None = None

    @property
    def trained(self) -> str:
        """The name of the fine-tune this model comes from (its final model's name)."""
        return self.objective + (f"-s{self.seed}" if self.seed else "")

    @property
    def name(self) -> str:
        return self.trained + ("" if self.step is None else f"-step{self.step}")

    def train_steps(self, max_steps: int) -> int:
        """The optimizer steps the model was trained for."""
        return max_steps if self.step is None else self.step


def _integers(finetune: dict, key: str, low: int) -> list[int]:
    values = finetune.get(key)
    if values is None:
        return []
    if (not isinstance(values, list) or not values
            or any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in values)):
        raise ValueError(f"finetune.{key} must be a non-empty list of integers >= {low}, got {values!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"finetune.{key} repeats a value: {values!r}")
    return sorted(values)


def seeds_of(finetune: dict) -> list[int]:
    """The fine-tune seeds of a ``finetune`` section (``seeds``, else ``[seed]``, else ``[0]``)."""
    seeds = _integers(finetune, "seeds", 0)
    if seeds and "seed" in finetune:
        raise ValueError("finetune: give either seed or seeds, not both (seeds: [0, 1, ...] trains each objective "
                         "once per seed)")
    return seeds or [int(finetune.get("seed", 0))]


def plan_arms(finetune: dict) -> dict[str, Arm]:
    """Every evaluated model of a ``finetune`` section by name, each fine-tune's final model before its checkpoints;
    ValueError naming the key for a bad ``seeds`` or ``eval_at_steps``."""
    steps = _integers(finetune, "eval_at_steps", 1)
    max_steps = finetune["max_steps"]
    late = [k for k in steps if k >= max_steps]
    if late:
        raise ValueError(f"finetune.eval_at_steps {late} must lie below max_steps={max_steps} (the final model is "
                         "evaluated anyway)")
    arms = [Arm(objective, seed, step) for seed in seeds_of(finetune) for objective in finetune["objectives"]
            for step in [None, *steps]]
    return {arm.name: arm for arm in arms}


def trainer_spec(arm: Arm, spec: dict) -> dict:
    """The trainer settings of ``arm``'s fine-tune: ``spec`` (the finetune section without :data:`ARM_KEYS`) with the
    arm's seed, left out where it is the seed ``spec`` already means (so seed 0 of ``seeds: [0, 1]`` is the very job
    of a config without ``seeds``)."""
    if arm.seed == spec.get("seed", TrainConfig.seed):
        return spec
    return {**spec, "seed": arm.seed}


def trained_arms(arms: dict[str, Arm]) -> dict[str, Arm]:
    """The fine-tunes: the final model of each (objective, seed), by name."""
    return {name: arm for name, arm in arms.items() if arm.step is None}
