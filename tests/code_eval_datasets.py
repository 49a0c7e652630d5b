"""Test fixture: real HumanEval and MBPP+ problems in evalplus's schema, from the offline copies in ../shared.

* MBPP+: ``mbppplus_prerelease.jsonl`` is already in evalplus's schema (a pre-release of MBPP+ v0.2.0).
* HumanEval: ``humaneval_test.jsonl.gz`` is the original HumanEval (no ``+`` fields). ``humaneval_plus_like``
  builds evalplus-schema records from it: the inputs are the literal arguments of every ``candidate(...)`` call in
  the ``test`` field (found with ``ast``, never executed); the first half are ``base_input``, the rest
  ``plus_input``. Three tests call the candidate only with computed arguments (32, 38, 50): their inputs are
  written out below. ``atol`` is 1e-6 for ``find_zero`` (HumanEval/32, checked by evaluating the polynomial) and 0
  elsewhere; ``contract`` is empty.

Used by tests and ``benchmarks/bench_code_eval.py`` only; the project never needs these files at run time.
"""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]
# ../shared/benchmarks next to the checkout (main checkout) or next to its parent (a git worktree under wt/)
SHARED_CANDIDATES = (_REPO.parent / "shared" / "benchmarks", _REPO.parent.parent / "shared" / "benchmarks")
HUMANEVAL_FILE = "humaneval_test.jsonl.gz"
MBPP_FILE = "mbppplus_prerelease.jsonl"

COMPUTED_ARGUMENT_INPUTS = {  # tests that build their arguments at run time
    "HumanEval/32": [[[1, 2]], [[-6, 11, -6, 1]], [[-10, -2]], [[3, -4, 1, 7]], [[5, 1, -3, 2, 8, 1]], [[1, 1, 1, 1]]],
    "HumanEval/38": [["abc"], ["uzfplzjfzcltmdly"], ["nzyegaghrzqwrdzxckn"], [""], ["ab"], ["hello world"]],
    "HumanEval/50": [["abc"], ["uzfplzjfzcltmdly"], ["nzyegaghrzqwrdzxckn"], [""], ["ab"], ["hello world"]],
}


def benchmarks_dir() -> Path | None:
    """The shared benchmarks folder, or None where this checkout has none."""
    for candidate in SHARED_CANDIDATES:
        if (candidate / HUMANEVAL_FILE).is_file() and (candidate / MBPP_FILE).is_file():
            return candidate.resolve()
    return None


def _literal_calls(test_source: str) -> list[list]:
    """Literal argument lists of every ``candidate(...)`` call in a HumanEval ``test`` field."""
    calls = []
    for node in ast.walk(ast.parse(test_source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate":
            try:
                calls.append((node.lineno, node.col_offset, [ast.literal_eval(arg) for arg in node.args]))
            except ValueError:
                continue
    return [args for _, _, args in sorted(calls, key=lambda call: call[:2])]


def humaneval_plus_like(folder: Path) -> list[dict]:
    """The 164 HumanEval problems as evalplus-schema records (see the module docstring)."""
    with gzip.open(folder / HUMANEVAL_FILE, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    problems = []
    for row in rows:
        inputs = COMPUTED_ARGUMENT_INPUTS.get(row["task_id"]) or _literal_calls(row["test"])
        half = (len(inputs) + 1) // 2
        problems.append({
            "task_id": row["task_id"], "prompt": row["prompt"], "entry_point": row["entry_point"],
            "canonical_solution": row["canonical_solution"], "base_input": inputs[:half],
            "plus_input": inputs[half:], "atol": 1e-6 if row["entry_point"] == "find_zero" else 0, "contract": "",
        })
    return problems


def mbpp_plus(folder: Path) -> list[dict]:
    """The MBPP+ pre-release records, as released (inputs still JSON)."""
    with open(folder / MBPP_FILE, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
