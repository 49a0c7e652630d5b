"""Score files: load and validate the score stage's JSON files, and summarize them (one row per run, speedups).

A score file (``python -m sbd_core score``) names its run (``model``, ``objective``, ``sampler``, ``benchmark``; from
the DAG also ``train_seed`` and ``train_steps``), the ``split`` its problems come from (``test``, or a synthetic task's
``dev``) and holds the benchmark's ``accuracy`` and ``metrics``, the decode cost
(``n_problems``, ``total_nfe``, ``total_tokens``), the ``sampler_spec`` (``{mode, solver, params,
family, tag}``), the model's ``recipe`` and ``per_problem`` verdicts and costs (the intervals: :mod:`.intervals`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..errors import UserError
from ..io_utils import read_json_object
from ..settings import StatsSettings
from .intervals import INTERVAL_COLUMNS, PAIR_COLUMNS, PairingError, add_intervals, problems_of
from .lossless import LOSSLESS_COLUMNS, NotLossless, acceptance, digests, lossless_labels
from .prediction import PREDICTION_COLUMNS, add_prediction_columns, prediction_table
from .speed import SPEED_COLUMNS, add_wall_columns, speed_table

logger = logging.getLogger(__package__)  # "sbd_core.report": one logger for the whole package

#: Keys every score file must have.
REQUIRED_KEYS = ("model", "objective", "sampler", "benchmark", "accuracy", "n_problems", "total_nfe", "total_tokens",
                 "sampler_spec")
#: Identity of one score row (``train_seed``: the fine-tune seed, 0 when the file has none; ``train_steps``: the
#: evaluated model's optimizer steps, 0 when the file does not say: older files, a model of unknown budget).
KEY_COLUMNS = ["model", "objective", "train_seed", "train_steps", "sampler", "benchmark"]
#: Columns of ``summarize`` output, in order (then one column per sampler parameter, then metric_* columns).
SUMMARY_COLUMNS = [
    "model", "objective", "train_seed", "train_steps", "sampler", "label", "family", "benchmark", "split", "accuracy",
    "nfe_speedup", "wall_speedup",
    "tokens_per_forward", "mean_tokens_per_forward", "mean_nfe", "total_nfe", "total_tokens",
    "n_problems", "block_size", "batch_size", "solver", "departures", "mode", "total_blocks", "mean_prompt_tokens",
    "engine",
    # verified runs (sbd_core.report.lossless)
    *LOSSLESS_COLUMNS,
]


#: A reader's name for each fine-tuning arm (the ``label`` column: "<arm> / <sampler>").
OBJECTIVE_LABELS = {"ntp": "NTP", "sbd": "SBD", "sbd_no_ntp_grad": "SBD without NTP gradient (ablation)"}


class ScoreFileError(UserError):
    """A score file is missing, unreadable or does not follow the score schema."""


# ----------------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------------


def _read_score(path: Path) -> dict:
    """Read and validate one score JSON file; raise ScoreFileError naming the file on any problem."""
    data = read_json_object(path, "score file", ScoreFileError, unparsable="cannot parse JSON")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise ScoreFileError(f"score file {path}: missing required key(s) {missing} (is it a score of the DAG's "
                             "score stage? a score of a bare generations file carries no decode cost)")
    _validate_score(path, data)
    return data


def _validate_score(path: Path, data: dict) -> None:
    """Check types and ranges of the fields the report relies on."""
    for key in ("model", "objective", "sampler", "benchmark"):
        if not isinstance(data[key], str) or not data[key]:
            raise ScoreFileError(f"score file {path}: {key!r} must be a non-empty string")
    acc = data["accuracy"]
    if not isinstance(acc, (int, float)) or isinstance(acc, bool) or not 0.0 <= acc <= 1.0:
        raise ScoreFileError(f"score file {path}: accuracy must be a fraction in [0, 1], got {acc!r}")
    for key in ("total_nfe", "total_tokens", "n_problems"):
        val = data[key]
        if not isinstance(val, (int, float)) or isinstance(val, bool) or val < 0:
            raise ScoreFileError(f"score file {path}: {key!r} must be a non-negative number, got {val!r}")
    if data["total_nfe"] <= 0:
        raise ScoreFileError(f"score file {path}: total_nfe must be positive, got {data['total_nfe']!r}")
    for key, low in (("train_seed", 0), ("train_steps", 1)):
        val = data.get(key)
        if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < low):
            raise ScoreFileError(f"score file {path}: {key!r} must be an integer >= {low}, got {val!r}")
    spec = data["sampler_spec"]
    if not isinstance(spec, dict) or not all(isinstance(spec.get(k), str) for k in ("solver", "family")):
        raise ScoreFileError(f"score file {path}: 'sampler_spec' must be an object with string 'solver' and 'family'")


def _num(value) -> float:
    """Return value as float, or NaN when it is None/missing."""
    return float("nan") if value is None else float(value)


def departures_text(recipe: dict | None) -> str:
    """The recipe's departures from the paper as ``key=value; ...`` (empty: the paper's recipe)."""
    departures = (recipe or {}).get("departures") or {}
    return "; ".join(f"{k}={v}" for k, v in sorted(departures.items()))


def run_label(objective: str, sampler: str, spec: dict) -> str:
    """``"<arm> / <sampler>"`` in words: ``NTP / HF generate``, ``SBD / EB γ=0.1``, ``NTP / prompt lookup (10)``."""
    from ..samplers import sampler_label

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
        total_tokens=int(data["total_tokens"]), mean_nfe=data["total_nfe"] / max(data["n_problems"], 1),
        tokens_per_forward=data["total_tokens"] / data["total_nfe"],
        mean_tokens_per_forward=_num(data.get("mean_tokens_per_forward")), block_size=_num(data.get("block_size")),
        batch_size=_num(data.get("batch_size")), family=spec["family"],
        solver=spec["solver"], params=dict(spec.get("params") or {}), departures=departures_text(data.get("recipe")),
        metrics=dict(data.get("metrics") or {}), path=str(path), lcb=data.get("lcb"),
        total_blocks=_num(data.get("total_blocks")), mean_prompt_tokens=_num(data.get("mean_prompt_tokens")),
        engine=data.get("engine") or "", digests=digests(data.get("per_problem")),
        **acceptance(data.get("per_problem")),
    )
    return row


def load_scores(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Load score JSON files into a DataFrame with one row per file.

    Raises ScoreFileError naming the file when one is unreadable or misses required keys, and when two files share
    the same (model, objective, sampler, benchmark).
    """
    rows = [_score_row(Path(p), _read_score(Path(p))) for p in paths]
    if not rows:
        raise ScoreFileError("no score files given")
    df = pd.DataFrame(rows)
    dup = df[df.duplicated(KEY_COLUMNS, keep=False)]
    if not dup.empty:
        groups = dup.groupby(KEY_COLUMNS)["path"].apply(list).tolist()
        raise ScoreFileError(f"duplicate ({', '.join(KEY_COLUMNS)}) in score files: {groups}")
    return df


# ----------------------------------------------------------------------------------------------------------------------
# Summary
# ----------------------------------------------------------------------------------------------------------------------


def is_baseline(df: pd.DataFrame) -> pd.Series:
    """Boolean mask of NTP-baseline rows (objective ntp decoded with sampler ntp)."""
    return (df["objective"] == "ntp") & (df["sampler"] == "ntp")


def _speedups(out: pd.DataFrame) -> pd.DataFrame:
    """Add nfe_speedup against the NTP arm of the same model, fine-tune seed, budget and benchmark."""
    base = out.loc[is_baseline(out), PAIR_COLUMNS + ["total_nfe"]].rename(columns={"total_nfe": "_base_nfe"})
    out = out.merge(base, on=PAIR_COLUMNS, how="left")
    out["nfe_speedup"] = out["_base_nfe"] / out["total_nfe"]
    for model, seed, steps, bench in sorted(out.loc[out["_base_nfe"].isna(), PAIR_COLUMNS].drop_duplicates()
                                            .itertuples(index=False)):
        logger.warning("no NTP baseline (objective=ntp, sampler=ntp) for model=%r train_seed=%d train_steps=%d "
                       "benchmark=%r: speedups are NaN", model, seed, steps, bench)
    return out


def summarize(df: pd.DataFrame, speed_docs: list[dict] = (), timings: dict | None = None,
              stats: StatsSettings = StatsSettings()) -> pd.DataFrame:
    """One row per score file (:data:`KEY_COLUMNS`): accuracy (fraction), speedups, cost, the intervals and paired
    differences of :mod:`.intervals`, the wall-clock of the speed stage, the sampler's parameters as columns
    (``gamma``, ``proxy``, ``threshold``, ...) and the benchmark's metrics as ``metric_*``.

    ``nfe_speedup`` = the NTP arm's total NFE / the row's total NFE (NaN, with a logged warning, without that arm);
    ScoreFileError when a row and its NTP arm do not hold the same problems, or a verified run's tokens differ from its
    arm's NTP decoding (:mod:`.lossless`, which adds the ``lossless`` and acceptance columns). ``speed_docs``: the
    speed stage's files (``wall_speedup`` and the columns of :mod:`.speed`: NaN for a run they do not time);
    ``timings`` (``{model: time(k)}``) gives the eq. 16 predictions on their problems (:mod:`.prediction`); ``stats``:
    how the intervals are made.
    """
    try:
        out = add_intervals(_speedups(df.copy()), stats)
        out["lossless"] = lossless_labels(out)
    except (PairingError, NotLossless) as err:
        raise ScoreFileError(str(err)) from None
    out.loc[out["lossless"] == "yes", "label"] += " (lossless)"
    out = add_wall_columns(out, speed_table(list(speed_docs), stats.confidence))
    out = add_prediction_columns(out, prediction_table(list(speed_docs), timings or {}, stats.confidence))
    param_names = sorted({k for p in out["params"] for k in p})
    for name in param_names:
        out[name] = [p.get(name) for p in out["params"]]
    metric_names = sorted({k for m in out["metrics"] for k in m if _is_number(m[k])})
    for name in metric_names:
        out[f"metric_{name}"] = [_num(m.get(name)) if _is_number(m.get(name)) else float("nan") for m in out["metrics"]]
    cols = (SUMMARY_COLUMNS + INTERVAL_COLUMNS + SPEED_COLUMNS + PREDICTION_COLUMNS + param_names
            + [f"metric_{n}" for n in metric_names])
    return out[cols].sort_values(KEY_COLUMNS, kind="stable").reset_index(drop=True)


def _is_number(value) -> bool:
    """True for int/float values (not bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
