"""How fast a LiveCodeBench stdin program runs under our grader and under the official one: a program with a heavy
top-level loop times its own loop (``time.perf_counter``) and prints the seconds, which both graders report back as a
wrong answer's output.

* ours: ``evaluate_lcb`` (the sandboxed worker; since the program became lcb_runner's function body, its top-level
  names are fast locals there too);
* official: ``run_test`` of the ``nvidia-livecodebench`` 26.3 wheel (tests/official_lcb.py, fetched from PyPI once).

Rounds are interleaved (ours, official, ours again: the second run of ours is the A/A control). Prints a table, then
ONE JSON document as the last line. Run it on a quiet machine; nothing here is a test.

    .venv/bin/python benchmarks/bench_lcb_stdin.py [--rounds 5] [--iterations 3000000]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lcb_fixtures import row, stdin  # noqa: E402
from official_lcb import official_results  # noqa: E402

from sbd_core.sandbox.lcb_grader import evaluate_lcb  # noqa: E402

PROGRAM = ("import time\nstart = time.perf_counter()\nn = int(input())\nacc = 0\nfor i in range({iterations}):\n"
           "    acc = (acc + i * i) % 1000003\nprint(f'{{time.perf_counter() - start:.4f}}')\n")
SECONDS = re.compile(r"'(\d+\.\d{4})'")


def ours(program: str, work: Path) -> float:
    problem = row("loop", "2025-01-01", "q", [stdin("1\n", "x")], [], plain_private=True)
    verdict = evaluate_lcb([problem], {"loop": program}, work, test_timeout_s=60, parallel=1)["per_problem"]["loop"]
    return float(SECONDS.search(verdict["detail"]).group(1))


def official(program: str, work: Path) -> float:
    problem = row("loop", "2025-01-01", "q", [stdin("1\n", "x")], [], plain_private=True)
    record = official_results([{"row": problem, "completion": f"```python\n{program}```\n"}], work, timeout=60)
    return float(record["cases"][0]["metadata"]["output"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3_000_000)
    args = parser.parse_args()
    program = PROGRAM.format(iterations=args.iterations)
    times: dict[str, list[float]] = {"ours": [], "official": [], "ours_again": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for name, grade in (("ours", ours), ("official", official), ("ours_again", ours)):
                times[name].append(grade(program, Path(tmp) / f"{name}-{n}"))
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratios = [a / b for a, b in zip(times["ours"], times["official"])]
    control = [a / b for a, b in zip(times["ours"], times["ours_again"])]
    print(f"{'grader':<12} {'median s':>9}  per round")
    for name, values in times.items():
        print(f"{name:<12} {medians[name]:>9.4f}  {' '.join(f'{v:.4f}' for v in values)}")
    print(f"ours / official: median {statistics.median(ratios):.3f} (rounds {min(ratios):.3f} to {max(ratios):.3f}); "
          f"A/A ours / ours again: median {statistics.median(control):.3f}")
    print(json.dumps({"iterations": args.iterations, "seconds": times, "median_s": medians,
                      "ours_over_official": statistics.median(ratios), "aa_control": statistics.median(control)}))


if __name__ == "__main__":
    main()
