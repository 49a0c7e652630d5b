"""Score files: load and validate the scoring stage's JSON files, and summarize them (one row per run, NFE speedup).

Speedup conventions are described in ``sbd_core.report``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Iterable

import pandas as pd

logger = logging.getLogger(__package__)  # "sbd_core.report": one logger for the whole package

#: Keys every score file must have (the rest of the schema is optional or derivable).
REQUIRED_KEYS = (
    "model", "objective", "sampler", "task", "accuracy", "n_problems", "total_nfe", "total_tokens", "solver",
)
#: Allowed training objectives.
OBJECTIVES = ("ntp", "sbd")
#: Identity of one score row.
KEY_COLUMNS = ["model", "objective", "sampler", "task"]
#: Columns of ``summarize`` output, in order (metric_* columns are appended).
SUMMARY_COLUMNS = [
    "model", "objective", "sampler", "solver_family", "task", "accuracy", "nfe_speedup", "tokens_per_forward",
    "mean_tokens_per_forward", "mean_nfe", "total_nfe", "total_tokens", "wall_time_s", "n_problems", "block_size",
    "solver_name", "solver_params",
]


class ScoreFileError(ValueError):
    """A score file is missing, unreadable or does not follow the score schema."""


# ----------------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------------


def _read_score(path: Path) -> dict:
    """Read and validate one score JSON file; raise ScoreFileError naming the file on any problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ScoreFileError(f"score file {path}: not found") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScoreFileError(f"score file {path}: cannot parse JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ScoreFileError(f"score file {path}: expected a JSON object, got {type(data).__name__}")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise ScoreFileError(f"score file {path}: missing required key(s) {missing}")
    _validate_score(path, data)
    return data


def _validate_score(path: Path, data: dict) -> None:
    """Check types and ranges of the fields the report relies on."""
    if data["objective"] not in OBJECTIVES:
        raise ScoreFileError(f"score file {path}: objective must be one of {OBJECTIVES}, got {data['objective']!r}")
    for key in ("model", "sampler", "task"):
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
    solver = data["solver"]
    if not isinstance(solver, dict) or not isinstance(solver.get("name"), str):
        raise ScoreFileError(f"score file {path}: 'solver' must be an object with a string 'name'")


def _num(value) -> float:
    """Return value as float, or NaN when it is None/missing."""
    return float("nan") if value is None else float(value)


def _score_row(path: Path, data: dict) -> dict:
    """Flatten one validated score dict into a DataFrame row (derived fields filled when absent)."""
    n = data["n_problems"]
    row = {key: data[key] for key in KEY_COLUMNS}
    row.update(
        accuracy=float(data["accuracy"]),
        n_problems=int(n),
        total_nfe=int(data["total_nfe"]),
        total_tokens=int(data["total_tokens"]),
        mean_nfe=_num(data.get("mean_nfe", data["total_nfe"] / n if n else None)),
        tokens_per_forward=_num(data.get("tokens_per_forward", data["total_tokens"] / data["total_nfe"])),
        mean_tokens_per_forward=_num(data.get("mean_tokens_per_forward")),
        wall_time_s=_num(data.get("wall_time_s")),
        block_size=_num(data.get("block_size")),
        solver_name=data["solver"]["name"],
        solver_params=dict(data["solver"].get("params") or {}),
        metrics=dict(data.get("metrics") or {}),
        provenance=data.get("provenance"),
        path=str(path),
    )
    return row


def load_scores(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Load score JSON files into a DataFrame with one row per file.

    Raises ScoreFileError naming the file when one is unreadable or misses required keys, and when two files share
    the same (model, objective, sampler, task).
    """
    rows = [_score_row(Path(p), _read_score(Path(p))) for p in paths]
    if not rows:
        raise ScoreFileError("no score files given")
    df = pd.DataFrame(rows)
    dup = df[df.duplicated(KEY_COLUMNS, keep=False)]
    if not dup.empty:
        groups = dup.groupby(KEY_COLUMNS)["path"].apply(list).tolist()
        raise ScoreFileError(f"duplicate (model, objective, sampler, task) in score files: {groups}")
    return df


# ----------------------------------------------------------------------------------------------------------------------
# Summary
# ----------------------------------------------------------------------------------------------------------------------


def solver_family(sampler: str, solver_name: str, params: dict | None = None) -> str:
    """Name the solver family: 'ntp' for NTP decoding, 'eb-<proxy>' for EB (proxy from params or sampler), else the
    solver name."""
    if solver_name == "ntp" or (sampler == "ntp" and not solver_name):
        return "ntp"
    if solver_name == "eb":
        params = params or {}
        proxy = params.get("proxy") or params.get("error_proxy") or params.get("proxy_name")
        if not proxy:
            match = re.match(r"eb-([a-z]+)", sampler)
            proxy = match.group(1) if match else None
        return f"eb-{proxy}" if proxy else "eb"
    return solver_name


def _is_baseline(df: pd.DataFrame) -> pd.Series:
    """Boolean mask of NTP-baseline rows (objective ntp decoded with sampler ntp)."""
    return (df["objective"] == "ntp") & (df["sampler"] == "ntp")


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, objective, sampler, task) with accuracy (fraction), nfe_speedup and solver_family.

    nfe_speedup = baseline total_nfe / row total_nfe, baseline = (same model, same task, objective ntp, sampler ntp);
    NaN with a logged warning where the baseline is missing.
    """
    out = df.copy()
    out["solver_family"] = [
        solver_family(s, n, p) for s, n, p in zip(out["sampler"], out["solver_name"], out["solver_params"])
    ]
    base = out.loc[_is_baseline(out), ["model", "task", "total_nfe"]].rename(columns={"total_nfe": "_base_nfe"})
    out = out.merge(base, on=["model", "task"], how="left")
    out["nfe_speedup"] = out["_base_nfe"] / out["total_nfe"]
    no_base = out.loc[out["_base_nfe"].isna(), ["model", "task"]].drop_duplicates()
    for model, task in sorted(no_base.itertuples(index=False)):
        logger.warning(
            "no NTP baseline (objective=ntp, sampler=ntp) for model=%r task=%r: nfe_speedup is NaN", model, task
        )
    out["solver_params"] = [json.dumps(p, sort_keys=True) for p in out["solver_params"]]
    metric_names = sorted({k for m in out["metrics"] for k in m})
    for name in metric_names:
        out[f"metric_{name}"] = [_num(m.get(name)) if _is_number(m.get(name)) else float("nan") for m in out["metrics"]]
    cols = SUMMARY_COLUMNS + [f"metric_{n}" for n in metric_names]
    return out[cols].sort_values(KEY_COLUMNS, kind="stable").reset_index(drop=True)


def _is_number(value) -> bool:
    """True for int/float values (not bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
