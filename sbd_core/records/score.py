"""The score file (``scores/<model>/<arm>/<sampler>/<benchmark>.json``, one JSON object): written by the score stage
(:mod:`sbd_core.pipeline.evaluation`), read by the report (:mod:`sbd_core.report.scores`, its per-problem verdicts by
:mod:`sbd_core.report.stats.intervals`). This module owns its fields; what each means: docs/pipeline.md (the score
stage).

The object: the names the DAG gives the run (``model``, ``objective``, ``sampler``, ``train_seed``, ``train_steps``),
the benchmark's verdict (``benchmark``, ``accuracy``, ``n``, ``metrics``, ``per_problem``), the cost totals of a
decode-stage file (:func:`cost_aggregates`, and ``total_blocks``), what it copies from the decode stage's settings
(:data:`sbd_core.records.generations.DECODE_KEYS`) and the score stage's ``provenance``. Each per-problem verdict carries
its generation's ``nfe``, ``num_tokens``, the digest of its tokens (``tokens_sha``) and a verified run's
``accepted`` / ``drafted`` lengths (:func:`per_problem_costs`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import UserError
from ..io_utils import read_json_object, write_json_atomic
from .generations import DECODE_KEYS, record_blocks

#: Keys every score file must have.
REQUIRED_KEYS = ("model", "objective", "sampler", "benchmark", "accuracy", "n_problems", "total_nfe", "total_tokens",
                 "mean_nfe", "tokens_per_forward", "sampler_spec")


class ScoreFileError(UserError):
    """A score file is missing, unreadable or does not follow the score schema."""


def cost_aggregates(records: list[dict]) -> dict:
    """NFE and token totals of a generations file (speedups are relative, so the report derives them)."""
    total_nfe = sum(r["nfe"] for r in records)
    total_tokens = sum(r["num_tokens"] for r in records)
    per_problem = [r["num_tokens"] / r["nfe"] for r in records if r["nfe"]]
    return {"n_problems": len(records), "total_nfe": total_nfe, "total_tokens": total_tokens,
            "mean_nfe": total_nfe / max(len(records), 1), "tokens_per_forward": total_tokens / max(total_nfe, 1),
            "mean_tokens_per_forward": sum(per_problem) / max(len(per_problem), 1)}


def tokens_digest(token_ids: list[int]) -> str:
    """A short digest of a generation's tokens: two runs wrote the same tokens iff their digests are equal (up to a
    collision of 64-bit hashes)."""
    return hashlib.sha256(json.dumps(token_ids).encode()).hexdigest()[:16]


def per_problem_costs(per_problem: dict, records: list[dict]) -> dict:
    """Each problem's verdict with its generation's cost (``nfe``, ``num_tokens``), the digest of its tokens
    (``tokens_sha``) and, from a verified run, its per-draft ``accepted`` and ``drafted`` lengths; by problem id."""
    costs = {str(r["id"]): {**{key: r.get(key) for key in ("nfe", "num_tokens")},
                            **({"tokens_sha": tokens_digest(r["token_ids"])} if "token_ids" in r else {}),
                            **{key: r[key] for key in ("accepted", "drafted") if key in r}} for r in records}
    return {pid: {**verdict, **costs.get(str(pid), {})} for pid, verdict in per_problem.items()}


def add_decode_cost(result: dict, records: list[dict], decoded: dict | None) -> dict:
    """``result`` (a benchmark's verdict) with what the decode stage recorded: the cost totals and per-problem costs
    when every record has its ``nfe``, the decode settings the score copies (``decoded``: the sidecar's settings, None
    for a file written by hand) and the blocks its decoder started."""
    costed = bool(records) and all("nfe" in r for r in records)
    if costed:
        result.update(cost_aggregates(records))
        result["per_problem"] = per_problem_costs(result["per_problem"], records)
    if decoded is not None:
        result.update({key: decoded.get(key) for key in DECODE_KEYS})
        if costed and decoded.get("block_size"):
            mode = decoded["sampler_spec"]["mode"]
            result["total_blocks"] = sum(record_blocks(r, decoded["block_size"], mode) for r in records)
    return result


def write_score(result: dict, out_path) -> None:
    """Write one score file."""
    write_json_atomic(result, Path(out_path))


def read_score(path) -> dict:
    """Read and validate one score file; ScoreFileError naming the file on any problem."""
    data = read_json_object(path, "score file", ScoreFileError, unparsable="cannot parse JSON")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise ScoreFileError(f"score file {path}: missing required key(s) {missing} (is it a score of the DAG's "
                             "score stage? a score of a bare generations file carries no decode cost)")
    _validate(path, data)
    return data


def _validate(path, data: dict) -> None:
    """Check types and ranges of the fields the report relies on."""
    for key in ("model", "objective", "sampler", "benchmark"):
        if not isinstance(data[key], str) or not data[key]:
            raise ScoreFileError(f"score file {path}: {key!r} must be a non-empty string")
    acc = data["accuracy"]
    if not isinstance(acc, (int, float)) or isinstance(acc, bool) or not 0.0 <= acc <= 1.0:
        raise ScoreFileError(f"score file {path}: accuracy must be a fraction in [0, 1], got {acc!r}")
    for key in ("total_nfe", "total_tokens", "n_problems", "mean_nfe", "tokens_per_forward"):
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
