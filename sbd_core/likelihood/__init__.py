"""The likelihood tasks: the paper's Table 2 (MMLU, GPQA, HellaSwag, Winogrande, ARC-E, ARC-C) and an embedded analogue.

The paper scores its Table 2 tasks with the NTP logits (its eq. 9a) and names neither the harness, the shot counts,
the GPQA subset nor acc vs acc_norm. We run **lm-eval 0.4.13's own tasks** (its YAMLs, prompts, data sets and
metrics, read from its installed ``lm_eval/tasks/<folder>``) through the ``sbd`` model's ``loglikelihood``; what the
paper leaves open is a setting whose default lives in :data:`TASKS` below (docs/likelihood.md):

* ``mmlu``: the ``mmlu`` group, 5-shot (the convention of base-model reports since the MMLU paper; lm-eval's
  default is 0), ``acc`` (choices are letters, so length normalisation changes nothing);
* ``gpqa``: ``gpqa_main_zeroshot`` (``subset``: main | diamond | extended; with ``num_fewshot`` > 0 lm-eval's
  ``gpqa_<subset>_n_shot`` task), ``acc`` (letter choices);
* ``hellaswag``, ``arc_easy``, ``arc_challenge``: 0-shot, ``acc_norm`` (sentence continuations of different lengths);
* ``winogrande``: 0-shot, ``acc`` (partial scoring; lm-eval reports nothing else).

The embedded analogue (``math_mc``, ``code_mc``) is a multiple-choice task built from the synthetic tasks' held-out
problems (:mod:`.multiple_choice`), written as an lm-eval task in ``sbd_core/benchmarks/lm_eval_tasks/``.

Settings (config ``likelihood: {tasks: {<name>: {...}}}``; each key validated here, defaults only here):

* every task: ``metric`` (the number Table 2 shows), ``batch_size`` (requests per forward);
* hub tasks: ``num_fewshot``, ``limit`` (score the first N documents of each lm-eval task; None: all), ``data`` (a
  local copy of the hub data set in the hub repository's own layout, e.g. ``hf download <dataset> --repo-type dataset
  --local-dir DIR``, instead of the download), ``revision`` (the hub commit to download; None: the current ``main``,
  resolved to its commit and recorded); ``gpqa`` adds ``subset``;
* synthetic tasks: ``problems`` (held-out problems turned into questions), ``seed``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..benchmarks.lm_eval_task import TASKS_DIR
from ..settings import from_section
from . import multiple_choice

__all__ = ["TASKS", "PAPER_TASKS", "LikelihoodTask", "Settings", "HubSettings", "GPQASettings", "SyntheticSettings",
           "SCORING_ONLY", "StageSwitch", "get_task", "lm_eval_tasks_dir", "planned_tasks"]


def lm_eval_tasks_dir(folder: str) -> Path:
    """A folder of lm-eval's own task YAMLs (``lm_eval/tasks/<folder>``)."""
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).resolve().parent / folder


# ------------------------------------------------------------------------------------------------ settings
def _count(minimum: int) -> Callable[[Any], int]:
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"must be an integer >= {minimum}")
        return value
    return check


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


def _path(value):
    if not isinstance(value, str) or not value:
        raise ValueError("must be a folder path")
    return value


def _commit(value):
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{40}", value):
        raise ValueError("must be a 40-character commit hash")
    return value


#: Settings that change the scoring but not the data (the data job neither needs nor sees them).
SCORING_ONLY = ("metric", "batch_size", "limit")


def _setting(check, default=dataclasses.MISSING):
    return field(default=default, metadata={"check": check})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every task: the metric Table 2 shows (one of the task's ``metrics``) and the requests per forward."""

    metric: str = _setting(None)  # checked against the task's metrics
    batch_size: int = _setting(_count(1), 32)


@dataclass(frozen=True, kw_only=True)
class HubSettings(Settings):
    """An lm-eval task on a hub data set (see the module doc)."""

    num_fewshot: int = _setting(_count(0))
    limit: int | None = _setting(_optional(_count(1)), None)
    data: str | None = _setting(_optional(_path), None)
    revision: str | None = _setting(_optional(_commit), None)


GPQA_SUBSETS = ("main", "diamond", "extended")


def _subset(value):
    if value not in GPQA_SUBSETS:
        raise ValueError(f"must be one of {list(GPQA_SUBSETS)}")
    return value


@dataclass(frozen=True, kw_only=True)
class GPQASettings(HubSettings):
    subset: str = _setting(_subset, "main")


@dataclass(frozen=True, kw_only=True)
class SyntheticSettings(Settings):
    """A multiple-choice task built from a synthetic task's held-out problems."""

    problems: int = _setting(_count(1))
    seed: int = _setting(_count(0), 0)


# ------------------------------------------------------------------------------------------------ tasks
@dataclass(frozen=True)
class LikelihoodTask:
    """One column of Table 2 (or of its embedded analogue) and how lm-eval runs it.

    ``lm_eval_dir`` is the folder whose task YAMLs lm-eval indexes (its own folder for the paper's tasks, ours for the
    synthetic ones); ``lm_eval_name`` the task run there (``group``: a group of tasks); ``metrics`` those it reports
    (a group: those it aggregates); ``dataset`` the hub data set its YAMLs load (checked against them in tests);
    ``build_docs`` makes a synthetic task's documents from (problems, seed).
    """

    name: str
    column: str
    lm_eval_dir: Callable[[], Path]
    lm_eval_name: str | Callable[[Settings], str]
    metrics: tuple[str, ...]
    defaults: Settings
    group: bool = False
    paper: bool = True
    dataset: str | None = None
    build_docs: Callable[[int, int], list[dict]] | None = None

    @property
    def synthetic(self) -> bool:
        return self.build_docs is not None

    def settings(self, mapping: Mapping[str, Any] | None = None) -> Settings:
        """The defaults with one config section applied; ValueError naming ``likelihood.tasks.<name>.<key>``."""
        if mapping is None:
            return self.defaults
        where = f"likelihood.tasks.{self.name}"
        if not isinstance(mapping, Mapping):
            raise ValueError(f"{where} must be a mapping of settings, got {mapping!r}")
        known = {f.name: f for f in dataclasses.fields(self.defaults)}
        unknown = sorted(set(mapping) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown setting(s) {unknown}; allowed: {sorted(known)}")
        values = {}
        for key, value in mapping.items():
            check = known[key].metadata["check"] or self._check_metric
            try:
                values[key] = check(value)
            except ValueError as err:
                raise ValueError(f"{where}.{key} {err}, got {value!r}") from None
        return dataclasses.replace(self.defaults, **values)

    def _check_metric(self, value):
        if value not in self.metrics:
            raise ValueError(f"must be one of {list(self.metrics)} (what lm-eval reports for this task)")
        return value

    def lm_eval_task(self, settings: Settings) -> str:
        """The lm-eval task or group these settings run."""
        return self.lm_eval_name if isinstance(self.lm_eval_name, str) else self.lm_eval_name(settings)


def _gpqa_task(settings: GPQASettings) -> str:
    return f"gpqa_{settings.subset}_{'zeroshot' if settings.num_fewshot == 0 else 'n_shot'}"


def _lm_eval(folder: str) -> Callable[[], Path]:
    return lambda: lm_eval_tasks_dir(folder)


def _ours() -> Path:
    return TASKS_DIR


_ALL = (
    LikelihoodTask("mmlu", "MMLU", _lm_eval("mmlu"), "mmlu", ("acc",), HubSettings(num_fewshot=5, metric="acc"),
                   group=True, dataset="cais/mmlu"),
    LikelihoodTask("gpqa", "GPQA", _lm_eval("gpqa"), _gpqa_task, ("acc", "acc_norm"),
                   GPQASettings(num_fewshot=0, metric="acc"), dataset="Idavidrein/gpqa"),
    LikelihoodTask("hellaswag", "HellaSwag", _lm_eval("hellaswag"), "hellaswag", ("acc", "acc_norm"),
                   HubSettings(num_fewshot=0, metric="acc_norm"), dataset="Rowan/hellaswag"),
    LikelihoodTask("winogrande", "Winogrande", _lm_eval("winogrande"), "winogrande", ("acc",),
                   HubSettings(num_fewshot=0, metric="acc"), dataset="allenai/winogrande"),
    LikelihoodTask("arc_easy", "ARC-E", _lm_eval("arc"), "arc_easy", ("acc", "acc_norm"),
                   HubSettings(num_fewshot=0, metric="acc_norm"), dataset="allenai/ai2_arc"),
    LikelihoodTask("arc_challenge", "ARC-C", _lm_eval("arc"), "arc_challenge", ("acc", "acc_norm"),
                   HubSettings(num_fewshot=0, metric="acc_norm"), dataset="allenai/ai2_arc"),
    LikelihoodTask("math_mc", "math (MC)", _ours, "sbd_synth_math_mc", ("acc", "acc_norm"),
                   SyntheticSettings(metric="acc", problems=500), paper=False, build_docs=multiple_choice.math_docs),
    LikelihoodTask("code_mc", "code (MC)", _ours, "sbd_synth_code_mc", ("acc", "acc_norm"),
                   SyntheticSettings(metric="acc", problems=240), paper=False, build_docs=multiple_choice.code_docs),
)
TASKS: dict[str, LikelihoodTask] = {t.name: t for t in _ALL}
#: Table 2's columns, in the paper's order
PAPER_TASKS: tuple[str, ...] = tuple(t.name for t in _ALL if t.paper)


def get_task(name: str) -> LikelihoodTask:
    """The registered likelihood task ``name``; ValueError naming the registered ones otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown likelihood task {name!r}; registered: {sorted(TASKS)}")
    return TASKS[name]


@dataclass(frozen=True)
class StageSwitch:
    """The ``likelihood`` section's own keys besides its tasks: ``enabled`` false plans no likelihood job (how a config
    stacked on another turns the stage off: merged mappings cannot drop the tasks below them)."""

    enabled: bool = True


def planned_tasks(section: Mapping[str, Any] | None) -> dict[str, dict]:
    """The tasks of a config's ``likelihood`` section, each name and setting checked: ``{name: settings mapping}``
    (empty without the section or with ``enabled: false``). ValueError naming the key otherwise."""
    section = dict(section or {})
    tasks = section.pop("tasks", None) or {}
    if not from_section(StageSwitch, section, "likelihood").enabled:
        return {}
    for name, mapping in tasks.items():
        get_task(name).settings(mapping)
    return {name: dict(mapping or {}) for name, mapping in tasks.items()}
