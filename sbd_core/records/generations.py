"""The generations file (``<benchmark>.jsonl``, one record per problem) and its provenance sidecar
(``<benchmark>.jsonl.provenance.json``): written by the decode stage (:mod:`sbd_core.pipeline.decode`), read by
the score stage, the speed stage and the benchmarks' scorers. This module owns its fields.

A record: ``{"id", "prompt", "completion", "token_ids", "num_tokens", "nfe", "tokens_per_forward", "stop_reason",
"wall_time_s", "prompt_tokens", "widths", "blocks"}`` (``widths``: per forward counted in ``nfe``, the tokens the row
fed, :attr:`sbd_core.decoding.setup.Generation.widths`; ``blocks``: the blocks the decoder started, :func:`blocks_of`); a
verified run adds ``accepted`` and ``drafted`` (per draft, the tokens NTP mode kept and the tokens checked,
:mod:`sbd_core.decoding.verify`). A file for scoring only needs ``{"id": <problem id>, "completion": "<text after the
prompt>"}`` (``task_id`` is accepted for ``id``), each id once; a benchmark that scores several samples per problem
(LiveCodeBench) also accepts ``{"id": ..., "completions": ["...", ...]}``. Files written before ``blocks`` (or
``widths``) was recorded are still read: :func:`record_blocks` and :func:`forward_widths` derive them.

The sidecar: the decode stage's provenance record, whose ``settings`` hold the sampler spec, the model's training
recipe, the block and batch size, the engine and ``mean_prompt_tokens`` (:data:`DECODE_KEYS`, what score copies), the
benchmark settings, the runtime and ``total_wall_time_s``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..errors import UserError, where
from ..io_utils import iter_jsonl_lines, read_jsonl, write_json_atomic, write_jsonl_atomic

#: What the score stage copies from the decode stage's provenance settings.
DECODE_KEYS = ("sampler_spec", "recipe", "block_size", "batch_size", "engine", "mean_prompt_tokens")


def blocks_of(num_tokens: int, block_size: int, mode: str) -> int:
    """Blocks a decoder started for ``num_tokens`` tokens: blocks of ``block_size`` for SBD decoding (mode ``sbd``);
    NTP decoding and the peers (generate) start one block per token. At least one."""
    size = block_size if mode == "sbd" else 1
    return max(1, -(-num_tokens // size))


def generation_record(problem_id, prompt: str, generation, prompt_tokens: int, block_size: int, mode: str) -> dict:
    """The record of one decoded problem (``generation``: a :class:`sbd_core.decoding.setup.Generation`)."""
    verified = {} if generation.accepted is None else {"accepted": generation.accepted, "drafted": generation.drafted}
    return {"id": problem_id, "prompt": prompt, "completion": generation.text, "token_ids": generation.token_ids,
            "num_tokens": generation.num_tokens, "nfe": generation.nfe,
            "tokens_per_forward": generation.tokens_per_forward, "stop_reason": generation.stop_reason,
            "wall_time_s": generation.wall_time_s, "prompt_tokens": prompt_tokens, "widths": generation.widths,
            "blocks": blocks_of(generation.num_tokens, block_size, mode), **verified}


def sidecar_path(generations) -> Path:
    """The provenance sidecar of a generations file."""
    return Path(str(generations) + ".provenance.json")


def write_generations(records: list[dict], provenance: dict, out_path) -> None:
    """Write the records and, beside them, the decode stage's provenance record."""
    write_jsonl_atomic(records, out_path)
    write_json_atomic(provenance, sidecar_path(out_path))


def read_records(path) -> list[dict]:
    """Every record of a generations file, as written (the decode stage's: with their cost)."""
    return read_jsonl(path)


def decode_settings(generations) -> dict | None:
    """The decode stage's settings from the sidecar of ``generations`` (None when there is none: a file written by
    hand); UserError naming the sidecar when it is not the decode stage's record."""
    sidecar = sidecar_path(generations)
    if not sidecar.exists():
        return None
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))["settings"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"{sidecar}: not the decode stage's provenance record ({type(err).__name__}: {err}); "
                        "remove it, or decode again") from None


def record_blocks(record: dict, block_size: int, mode: str) -> int:
    """The blocks a record's decoder started: its ``blocks``, or (a file from before it was recorded)
    :func:`blocks_of` its tokens."""
    if "blocks" in record:
        return int(record["blocks"])
    return blocks_of(int(record["num_tokens"]), block_size, mode)


def forward_widths(record: dict, block_size: int, mode: str) -> tuple[dict[int, int], str]:
    """``{tokens fed: forwards}`` of one record and where it comes from: the record's ``widths`` (one per forward of
    the row, ``recorded``), else derived (``derived``, records without widths): NTP decoding and the peers one token
    per forward; SBD k per forward, and 2k in the first forward of every block after the first (it re-feeds the
    finished block)."""
    if isinstance(record.get("widths"), list):
        return dict(Counter(int(w) for w in record["widths"])), "recorded"
    if mode != "sbd":
        return {1: int(record["nfe"])}, "derived"
    blocks = record_blocks(record, block_size, mode)
    refeeds = min(blocks - 1, int(record["nfe"]) - 1)
    widths = {block_size: int(record["nfe"]) - refeeds, 2 * block_size: refeeds}
    return {w: n for w, n in widths.items() if n}, "derived"


def _texts(record: Any, samples: bool) -> list[str] | None:
    """The completions of one generations record: ``[completion]``, or (``samples``) its ``completions`` list."""
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("completion"), str):
        return [record["completion"]]
    texts = record.get("completions") if samples else None
    if isinstance(texts, list) and texts and all(isinstance(text, str) for text in texts):
        return texts
    return None


def read_generations(path: str | Path, samples: bool = False) -> dict[str, str] | dict[str, list[str]]:
    """``{problem id: completion}`` from a generations file; with ``samples``, ``{problem id: [completions]}`` (a
    record may then hold ``"completions"``, a list of samples, instead of ``"completion"``). UserError naming the file
    and line on a malformed record or a repeated id, and on a file without records."""
    completions: dict[str, list[str]] = {}
    lines: dict[str, int] = {}
    for line, record in iter_jsonl_lines(path):
        key = record.get("id", record.get("task_id")) if isinstance(record, dict) else None
        texts = _texts(record, samples)
        if key is not None and texts is None and not samples and "completions" in record:
            raise UserError(f"{where(path, line)}: 'completions' (several samples) is for a benchmark that scores "
                            "several samples per problem (LiveCodeBench); this one scores one 'completion' per problem")
        if key is None or texts is None:
            several = ' or "completions": ["...", ...]' if samples else ""
            raise UserError(f"{where(path, line)}: a generations record needs an 'id' and a string 'completion', "
                            f'e.g. {{"id": "0", "completion": "..."{several}}}')
        key = str(key)
        if key in lines:
            raise UserError(f"{where(path, line)}: id {key!r} repeats (lines {lines[key]} and {line}); each problem "
                            "has one record")
        completions[key], lines[key] = texts, line
    if not completions:
        raise UserError(f"{path}: no generations; expected one {{\"id\": ..., \"completion\": ...}} per line")
    return completions if samples else {key: texts[0] for key, texts in completions.items()}
