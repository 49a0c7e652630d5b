"""Where a math run's problems are lost: each score file's verdicts split by what the problem asks for
(docs/claim-study.md, "Diagnostic: which easy math problems the arms lose").

The synthetic math tasks (``math``, ``math_graded``) write their reference steps in the benchmark file (``_ops``:
``[[a, "+", b], ...]``), so a problem's kind can be read off it without a model:

- ``product``: a multiplication (a graded task's hard problems, which every arm fails alike);
- ``shorter result``: a subtraction whose result has fewer digits than the number it is taken from (``1231 - 922 =
  309``: the worked answer's top column is ``1-1-0=0`` and the answer drops that zero while it reverses the column
  digits);
- ``other``: every other problem.

    python scripts/math_strata.py results/claim-dev-seeds/scores/ntp/ntp/math_graded.json \\
        results/claim-dev-seeds/scores/sbd/ntp/math_graded.json

Each score file is read with the report's reader; its benchmark file is the one the score file names (``data``),
or ``--benchmark``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sbd_core.io_utils import iter_jsonl_lines, read_json_object
from sbd_core.report.stats.intervals import problems_of
from sbd_core.tasks.math_task import shorter_result

STRATA = ("product", "shorter result", "other")


def stratum(ops: list) -> str:
    """The kind of one math problem from its reference steps (``[[a, op, b], ...]``)."""
    if any(op == "*" for _, op, _ in ops):
        return "product"
    if shorter_result(ops):
        return "shorter result"
    return "other"


def strata_of(benchmark: Path) -> dict[str, str]:
    """Problem id -> stratum for every record of a math benchmark file; ValueError naming the file and line when a
    record has no reference steps."""
    kinds = {}
    for number, record in iter_jsonl_lines(benchmark):  # a line that is not JSON: one line naming file and line
        ops = record.get("_ops") if isinstance(record, dict) else None
        if not isinstance(ops, list) or not all(isinstance(o, list) and len(o) == 3 for o in ops):
            raise ValueError(f"{benchmark}:{number}: no reference steps ('_ops': [[a, op, b], ...]); "
                             "only the synthetic math tasks write them")
        kinds[str(record.get("sbd_id", record.get("task_id")))] = stratum(ops)
    return kinds


def count(score: Path, benchmark: Path | None = None) -> dict[str, tuple[int, int]]:
    """Stratum -> (problems right, problems) for one score file."""
    data = read_json_object(score, "score file")
    problems = problems_of(score, data)
    if problems is None:
        raise ValueError(f"{score}: no per_problem records to split")
    if benchmark is None and not isinstance(data.get("data"), str):
        raise ValueError(f"{score}: names no benchmark file ('data'); pass --benchmark")
    kinds = strata_of(benchmark or Path(data["data"]))
    missing = [i for i in problems.ids if i not in kinds]
    if missing:
        raise ValueError(f"{score}: {len(missing)} problems (e.g. {missing[0]!r}) are not in its benchmark file")
    result = {}
    for name in STRATA:
        right = [c for i, c in zip(problems.ids, problems.correct) if kinds[i] == name]
        result[name] = (int(sum(right)), len(right))
    return result


def markdown(rows: list[tuple[str, dict[str, tuple[int, int]]]]) -> str:
    """One row per score file: problems right of problems, per stratum."""
    lines = ["| score file | " + " | ".join(STRATA) + " |", "|---|" + "---|" * len(STRATA)]
    for name, counts in rows:
        lines.append(f"| {name} | " + " | ".join(f"{counts[s][0]} / {counts[s][1]}" for s in STRATA) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scores", nargs="+", type=Path, help="score files of a math task")
    parser.add_argument("--benchmark", type=Path, help="the benchmark file (default: the one each score file names)")
    args = parser.parse_args(argv)
    rows = []
    for score in args.scores:
        try:
            rows.append((str(score), count(score, args.benchmark)))
        except (OSError, ValueError) as err:
            parser.error(str(err))
    print(markdown(rows))


if __name__ == "__main__":
    main()
