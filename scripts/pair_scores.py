"""Two score files of the same problems compared as the report compares a row with its NTP arm (docs/claim-study.md,
"how often two NTP arms disagree").

The report pairs every row with the NTP arm of its own run. This compares any two score files, of one run or of two
(two NTP arms that differ only in seed or schedule: an A/A test of the training itself), with the report's procedure
(:mod:`sbd_core.report.stats`): each file's accuracy, the paired difference A - B with its interval (problems of one
family clustered), whether that interval lies inside the margin, the share of problems the two decide differently,
and the interval's half-width at no difference that share would give on ``--problems`` problems.

    python scripts/pair_scores.py \\
        results/study-r28/scores/tiny-llama/ntp/ntp/math_direct.json::results/study-r29/scores/tiny-llama/ntp-step40000/ntp/math_direct.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from sbd_core.report.stats.estimates import z_value
from sbd_core.report.stats.intervals import paired_difference, problems_of
from sbd_core.settings import StatsSettings

def compare(path_a: Path, path_b: Path, margin: float = 0.02, problems: int = 1000, confidence: float = 0.95) -> dict:
    """One pair: accuracies, the paired difference A - B with its interval (the report's procedure), whether the
    interval lies inside +-``margin``, the share of problems decided differently, and the half-width at no difference
    that share gives on ``problems`` independent problems (z sqrt(share / problems)). ValueError naming the files when
    they do not hold the same problems."""
    a, b = (problems_of(Path(p), json.loads(Path(p).read_text())) for p in (path_a, path_b))
    if a is None or b is None:
        raise ValueError(f"{path_a if a is None else path_b}: no per_problem records to pair")
    if a.ids != b.ids:
        raise ValueError(f"{path_a} and {path_b} do not hold the same problems ({len(a.ids)} and {len(b.ids)} ids)")
    settings = StatsSettings(confidence=confidence, margin_pts=100 * margin)
    result, table = paired_difference(a.correct[None, :], b.correct[None, :], a.clusters, margin, settings)
    return {"a": str(path_a), "b": str(path_b), "problems": int(table.n), "accuracy_a": float(a.correct.mean()),
            "accuracy_b": float(b.correct.mean()), "diff": result.diff, "diff_lo": result.lo, "diff_hi": result.hi,
            "inside_margin": bool(-margin < result.lo and result.hi < margin), "disagree": table.discordance,
            "half_width_at": z_value(confidence) * math.sqrt(table.discordance / problems)}


def markdown(rows: list[dict], problems: int = 1000, margin_pts: float = 2.0, confidence: float = 0.95) -> str:
    """The pairs as a markdown table, in points."""
    lines = [f"| A | B | A | B | A - B [{100 * confidence:g}% interval] | inside ±{margin_pts:g} | disagree on | "
             f"half-width at {problems:,} |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['a']} | {r['b']} | {100 * r['accuracy_a']:.1f} | {100 * r['accuracy_b']:.1f} | "
                     f"{100 * r['diff']:+.1f} [{100 * r['diff_lo']:+.1f}, {100 * r['diff_hi']:+.1f}] | "
                     f"{'yes' if r['inside_margin'] else 'no'} | {100 * r['disagree']:.1f}% | "
                     f"±{100 * r['half_width_at']:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", metavar="A.json::B.json", help="two score files of the same problems")
    parser.add_argument("--margin", type=float, default=2.0, help="the equivalence margin in points (default 2)")
    parser.add_argument("--problems", type=int, default=1000,
                        help="the problem count the half-width column is for (default 1000)")
    args = parser.parse_args(argv)
    rows = []
    for pair in args.pairs:
        if pair.count("::") != 1:
            parser.error(f"{pair!r}: expected two score files joined by '::', e.g. a.json::b.json")
        try:
            rows.append(compare(*(Path(p) for p in pair.split("::")), args.margin / 100, args.problems))
        except (OSError, ValueError) as err:
            parser.error(str(err))
    print(markdown(rows, args.problems, args.margin))


if __name__ == "__main__":
    main()
