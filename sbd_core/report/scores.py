"""Score files: load and validate the score stage's JSON files, and summarize them (one row per run, speedups).

The score file's format and its reader: :mod:`sbd_core.records.score`; the per-problem verdicts and costs are read by
:mod:`.stats.intervals`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..records.score import REQUIRED_KEYS, ScoreFileError, read_score  # noqa: F401 (the package exports them)
from ..samplers import sampler_label
from .keys import PAIR_KEY, RUN_KEY, is_baseline
from .lossless import LOSSLESS_COLUMNS, acceptance, digests
from .section import Context, Section
from .stats.intervals import problems_of

logger = logging.getLogger(__package__)  # "sbd_core.report": one logger for the whole package

#: Identity of one score row (``train_seed``: the fine-tune seed, 0 when the file has none; ``train_steps``: the
#: evaluated model's optimizer steps, 0 when the file does not say: older files, a model of unknown budget).
KEY_COLUMNS = list(RUN_KEY)
#: The leading columns of the summary, in order (then the other sections' columns, one column per sampler parameter,
#: then metric_* columns: :func:`.build.summarize`).
SUMMARY_COLUMNS = [
    "model", "objective", "train_seed", "train_steps", "sampler", "label", "family", "benchmark", "split", "accuracy",
    "nfe_speedup", "wall_speedup",
    "tokens_per_forward", "mean_tokens_per_forward", "mean_nfe", "total_nfe", "total_tokens",
    "n_problems", "block_size", "batch_size", "solver", "departures", "trained_on", "mode", "total_blocks",
    "mean_prompt_tokens", "engine",
    # verified runs (sbd_core.report.lossless)
    *LOSSLESS_COLUMNS,
]


#: A reader's name for each fine-tuning arm (the ``label`` column: "<arm> / <sampler>").
OBJECTIVE_LABELS = {"ntp": "NTP", "sbd": "SBD", "sbd_no_ntp_grad": "SBD without NTP gradient (ablation)"}


def departures_text(recipe: dict | None) -> str:
    """The recipe's departures from the paper as ``key=value; ...`` (empty: the paper's recipe)."""
    departures = (recipe or {}).get("departures") or {}
    return "; ".join(f"{k}={v}" for k, v in sorted(departures.items()))


def trained_on_text(recipe: dict | None) -> str:
    """Where the model was fine-tuned, from its recipe: ``"<cpu>, torch CPU kernels <capability>[, GPU <gpu>]"``
    (empty: not recorded, an older run)."""
    where = (recipe or {}).get("trained_on") or {}
    parts = [where.get("cpu") or "CPU not recorded"] if where else []
    if where.get("cpu_capability"):
        parts.append(f"torch CPU kernels {where['cpu_capability']}")
    if where.get("gpu"):
        parts.append(f"GPU {where['gpu']}")
    return ", ".join(parts)


def run_label(objective: str, sampler: str, spec: dict) -> str:
    """``"<arm> / <sampler>"`` in words: ``NTP / HF generate``, ``SBD / EB γ=0.1``, ``NTP / prompt lookup (10)``."""
    return f"{OBJECTIVE_LABELS.get(objective, objective)} / {sampler_label({**spec, 'tag': sampler})}"


def _score_row(path: Path, data: dict) -> dict:
    """Flatten one validated score dict into a DataFrame row (``mode``: sbd for block solvers, ntp, or hf for the
    training-free peers; a spec of an older run without one says ntp for NTP decoding, else sbd)."""
    spec = data["sampler_spec"]
    try:
        problems = problems_of(path, data)
    except ValueError as err:
        raise ScoreFileError(str(err)) from None
    row = {key: data[key] for key in ("model", "objective", "sampler", "benchmark")}
    row["split"] = data.get("split", "test")  # a score file without one: a real benchmark's test set, or an older run
    row.update(train_seed=int(data.get("train_seed") or 0), train_steps=int(data.get("train_steps") or 0),
               problems=problems)
    row.update(
        label=run_label(data["objective"], data["sampler"], spec),
        mode=spec.get("mode") or ("ntp" if spec["solver"] == "ntp" else "sbd"),
        accuracy=float(data["accuracy"]), n_problems=int(data["n_problems"]), total_nfe=int(data["total_nfe"]),
        total_tokens=int(data["total_tokens"]), mean_nfe=float(data["mean_nfe"]),
        tokens_per_forward=float(data["tokens_per_forward"]),
        mean_tokens_per_forward=number_or_nan(data.get("mean_tokens_per_forward")),
        block_size=number_or_nan(data.get("block_size")), batch_size=number_or_nan(data.get("batch_size")),
        family=spec["family"],
        solver=spec["solver"], params=dict(spec.get("params") or {}), departures=departures_text(data.get("recipe")),
        trained_on=trained_on_text(data.get("recipe")),
        metrics=dict(data.get("metrics") or {}), path=str(path), lcb=data.get("lcb"),
        total_blocks=number_or_nan(data.get("total_blocks")),
        mean_prompt_tokens=number_or_nan(data.get("mean_prompt_tokens")),
        engine=data.get("engine") or "", digests=digests(data.get("per_problem")),
        **acceptance(data.get("per_problem")),
    )
    return row


def load_scores(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Load score JSON files into a DataFrame with one row per file.

    Raises ScoreFileError naming the file when one is unreadable or misses required keys, and when two files share
    the same (model, objective, sampler, benchmark).
    """
    rows = [_score_row(Path(p), read_score(Path(p))) for p in paths]
    if not rows:
        raise ScoreFileError("no score files given")
    df = pd.DataFrame(rows)
    dup = df[df.duplicated(KEY_COLUMNS, keep=False)]
    if not dup.empty:
        groups = dup.groupby(KEY_COLUMNS)["path"].apply(list).tolist()
        raise ScoreFileError(f"duplicate ({', '.join(KEY_COLUMNS)}) in score files: {groups}")
    return df


class Speedups(Section):
    """``nfe_speedup``: the NTP arm's total NFE / the row's, against the NTP arm of the same model, fine-tune seed,
    budget and benchmark (NaN, with a logged warning, without that arm)."""

    column_names = ("nfe_speedup",)

    def columns(self, frame: pd.DataFrame, ctx: Context) -> pd.DataFrame:
        base = frame.loc[is_baseline(frame), PAIR_KEY + ["total_nfe"]].rename(columns={"total_nfe": "_base_nfe"})
        out = frame.merge(base, on=PAIR_KEY, how="left")
        out["nfe_speedup"] = out["_base_nfe"] / out["total_nfe"]
        for model, seed, steps, bench in sorted(out.loc[out["_base_nfe"].isna(), PAIR_KEY].drop_duplicates()
                                                .itertuples(index=False)):
            logger.warning("no NTP baseline (objective=ntp, sampler=ntp) for model=%r train_seed=%d train_steps=%d "
                           "benchmark=%r: speedups are NaN", model, seed, steps, bench)
        return out


def is_number(value) -> bool:
    """True for int/float values (not bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def number_or_nan(value) -> float:
    """Return value as float, or NaN when it is None/missing."""
    return float("nan") if value is None else float(value)
