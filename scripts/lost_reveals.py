"""Where plain SBD leaves its own NTP mode: re-decode the problems a sampler loses against the same model's NTP mode
on the reference decoder, logging every forward's reveals, and print for each the block position of the first token
that differs, the block as each decode wrote it, and the forward that revealed that token: which positions were still
masked, the mask queries' confidence, and (for a threshold rule) whether the token passed the threshold or was the
forward's one forced reveal (docs/claim-study.md, lever D).

    python scripts/lost_reveals.py results/claim/models/tiny-llama/sbd-s1 \\
        results/claim-dev/scores/sbd-s1/ntp/code_graded.json \\
        results/claim-dev/scores/sbd-s1/conf-thr-0.999-first-ntp/code_graded.json

Each score file gives the verdicts (as the report reads them) and names its generations file; the sampler, block size
and token budget come from the plain decode's provenance.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import torch

from sbd_core.checkpoint import load
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_solver
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.solvers import BlockStats
from sbd_core.records.generations import decode_settings, read_records
from sbd_core.records.score import read_score
from sbd_core.report.stats.intervals import problems_of


class LoggingSolver:
    """The solver, recording each call's (masked, reveal, confidence) for the first row."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __call__(self, logits, masked):
        reveal, tokens = self.inner(logits, masked)
        conf = BlockStats.of(logits).confidence  # the statistic a confidence rule reads
        self.calls.append((masked[0].tolist(), reveal[0].tolist(), conf[0].tolist()))
        return reveal, tokens


def scored_generations(score: Path) -> tuple[dict[str, bool], dict[str, dict], Path]:
    """A score file's verdict per problem (the report's reading), its generations file's records by id, and that
    file's path."""
    data = read_score(score)
    problems = problems_of(score, data)
    if problems is None:
        raise SystemExit(f"error: {score}: no per_problem records")
    generations = Path(data["generations"])
    return (dict(zip(problems.ids, problems.correct.astype(bool).tolist())),
            {str(row["id"]): row for row in read_records(generations)}, generations)


def revealing_call(calls, block: int, pos: int):
    """The call that revealed position ``pos`` of block ``block`` (a block ends when nothing in it stays masked)."""
    current = 0
    for masked, reveal, conf in calls:
        if current == block and reveal[pos]:
            return masked, reveal, conf
        if not any(m and not r for m, r in zip(masked, reveal)):
            current += 1
    raise ValueError(f"no forward revealed position {pos} of block {block}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("ntp_score", type=Path, help="the score file of the model's NTP mode")
    ap.add_argument("plain_score", type=Path, help="the score file of its plain SBD decode")
    ap.add_argument("--limit", type=int, default=None, help="at most this many lost problems")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ntp_ok, ntp, _ = scored_generations(args.ntp_score)
    plain_ok, plain, plain_generations = scored_generations(args.plain_score)
    lost = [pid for pid in ntp if ntp_ok[pid] and not plain_ok[pid]]
    gained = sum(1 for pid in ntp if plain_ok[pid] and not ntp_ok[pid])
    print(f"{len(lost)} problems lost against the NTP mode, {gained} gained")
    settings = decode_settings(plain_generations)
    if settings is None:
        raise SystemExit(f"error: {plain_generations}: no decode provenance beside it (the sampler and block size)")
    spec, k = settings["sampler_spec"], settings["block_size"]
    threshold = spec["params"].get("threshold")
    model, tokenizer = load(args.model)
    solver = LoggingSolver(make_solver(spec))
    config = DecodeConfig(block_size=k, max_new_tokens=settings["benchmark_settings"]["max_new_tokens"],
                          batch_size=1, engine="reference")
    decoder = BlockDecoder(model, tokenizer, config, solver)
    counts = Counter()
    for pid in lost[: args.limit]:
        solver.calls.clear()
        again = decoder.generate([ntp[pid]["prompt"]])[0].token_ids
        a, b = ntp[pid]["token_ids"], plain[pid]["token_ids"]
        first = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        block, pos = divmod(first, k)
        masked, reveal, conf = revealing_call(solver.calls, block, pos)
        forced = threshold is not None and conf[pos] <= threshold  # a rule without a threshold: never "forced"
        right_first = not all(masked[pos + 1:])
        counts.update({f"position {pos}": 1, "forced": forced, "a position to its right revealed first": right_first,
                       "longer than the NTP mode's": len(b) > len(a), "reference == file": list(again) == b})
        words = [[tokenizer.decode([t]) for t in ids[block * k:(block + 1) * k]] for ids in (a, b)]
        print(f"{pid}: position {pos}; NTP mode {words[0]}, plain {words[1]}; masked {masked}, "
              f"confidence {[round(c, 4) for c in conf]}"
              + ("" if threshold is None else f", {'forced' if forced else 'passed'}"))
    print(dict(sorted(counts.items())))


if __name__ == "__main__":
    main()
