"""``evaluate_lcb``: LiveCodeBench pass@1 of one program per problem, graded as lcb_runner grades, judged here.

The rules are lcb_runner's ``lcb_runner/evaluation/testing_util.py`` (``run_test``, ``grade_stdio``,
``grade_call_based``) as shipped in ``nvidia-livecodebench`` 26.3: the tests run in order (public, then private), the
first failing one ends the problem, and a problem passes when every test passed. (Several samples of a problem are
several programs: ``sbd_core.benchmarks.lcbv6`` grades each and computes pass@k.)

* stdin problems (:func:`stdin_output_matches`): the whole output and the expected one are stripped and split into
  lines, each line stripped; the line counts must match, and each line must be equal or, token by token, equal as
  ``decimal.Decimal`` numbers ("1.0" matches "1"; there is no float tolerance).
* functional problems: the arguments are the test input's lines, each JSON-decoded; the returned value (a tuple
  counted as a list; a ``Fraction``, ``Decimal`` or numeric numpy array rebuilt here) passes when ``value ==
  expected`` is true; a value that is not plain data is a wrong answer (lcb_runner's ``==`` is false for it), a
  comparison that raises a runtime error.
* each test has ``test_timeout_s`` (lcb_runner: 6 s) of wall time; a program that does not load, raises or times
  out fails.

The programs run in the code sandbox (``pool.py``; the sandbox side, lcb_runner's harness, is ``lcb_child.py``):
each problem is one request to a sandboxed worker, the candidate's process never sees an expected output, and what it
printed or returned comes back as plain data and is compared here. Problems are prepared one at a time as workers free
up and judged as their runs end, so the decompressed tests of only a few problems are in memory at once.

Statuses (``per_problem[question_id]["status"]``, lcb_runner's error codes in brackets): ``passed``, ``wrong_answer``
(-2), ``time_limit_exceeded`` (-3), ``runtime_error`` (-4: the program did not load or raised, or the comparison
raised), ``no_code`` (no program was extracted; lcb_runner runs the empty program), ``test_error`` (a test of the
problem cannot be decoded, which fails every program, as lcb_runner's "Error during testing", -4).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Mapping, Sequence

from sbd_core.sandbox import limits

from .lcb_child import INT_MAX_STR_DIGITS
from .lcb_tests import LcbDataError, load_tests
from .plain_data import Digest, encode
from .pool import SandboxSettings, detect_isolation, parse_report, run_requests

__all__ = ["evaluate_lcb", "stdin_output_matches", "PASSED", "WRONG_ANSWER",
           "TIME_LIMIT_EXCEEDED", "RUNTIME_ERROR", "NO_CODE", "TEST_ERROR"]

PASSED, WRONG_ANSWER, TIME_LIMIT_EXCEEDED = "passed", "wrong_answer", "time_limit_exceeded"
RUNTIME_ERROR, NO_CODE, TEST_ERROR = "runtime_error", "no_code", "test_error"
_DETAIL_CHARS = 300


# ------------------------------------------------------------------------------------------------ comparison rules
def _stripped_lines(text: str) -> list[str]:
    """lcb_runner's ``get_stripped_lines``."""
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    """lcb_runner's ``convert_line_to_decimals``: every whitespace token as a Decimal, or None."""
    try:
        return [Decimal(token) for token in line.split()]
    except Exception:  # noqa: BLE001 - as lcb_runner: any token that is not a number
        return None


def _line_mismatch(prediction: str, expected: str) -> str | None:
    """Why a stdin program's output fails lcb_runner's comparison, or None when it passes."""
    got, want = _stripped_lines(prediction), _stripped_lines(expected)
    if len(got) != len(want):
        return f"wrong answer: {len(got)} output lines, expected {len(want)}"
    for index, (line, target) in enumerate(zip(got, want)):
        if line == target:
            continue
        numbers, target_numbers = _decimals(line), _decimals(target)
        if numbers is None or target_numbers is None or numbers != target_numbers:
            return f"wrong answer at output line {index}: {line[:100]!r} != {target[:100]!r}"
    return None


def stdin_output_matches(prediction: str, expected: str) -> bool:
    """Whether a stdin program's whole output passes one test (see the module doc)."""
    return _line_mismatch(prediction, expected) is None


def _value_mismatch(value: Any, expected: Any) -> str | None:
    """Why a functional program's returned value fails (lcb_runner: ``not (prediction == gt_out)``), or None; raises
    what the comparison raises (a numpy array of several items), which lcb_runner counts as a runtime error."""
    if not isinstance(value, Digest) and (value == expected):  # its truth value, as lcb_runner's ``if not``
        return None
    return f"wrong answer: returned {str(value)[:100]}, expected {str(expected)[:100]}"


# ------------------------------------------------------------------------------------------------ requests, verdicts
def _verdict(status: str, failed_test: int | None = None, detail: str = "") -> dict:
    return {"passed": status == PASSED, "status": status, "failed_test": failed_test,
            "detail": str(detail)[:_DETAIL_CHARS]}


def _prepared(problem: Mapping, max_tests_bytes: int) -> tuple[dict, list]:
    """(request fields without id, expected outputs) of one problem; ValueError when a test cannot be decoded
    (LcbDataError when the row is not in LiveCodeBench's schema)."""
    tests = load_tests(problem, max_tests_bytes)
    if not tests.functional:
        return {"kind": "stdin", "stdin": tests.inputs}, tests.outputs
    arguments = [[json.loads(line) for line in text.split("\n")] for text in tests.inputs]
    return ({"kind": "lcb_call", "entry_point": tests.fn_name, "inputs": encode(arguments)},
            [json.loads(text) for text in tests.outputs])


def _judge(request: dict, outcome: str, raw: bytes, expected: list) -> dict:
    """The verdict on one run: its outputs compared in order, then how it ended."""
    report = parse_report(outcome, raw, len(expected))
    stdin = request["kind"] == "stdin"
    for index, out in enumerate(report.outputs):
        try:
            why = _line_mismatch(out, expected[index]) if stdin else _value_mismatch(out, expected[index])
        except Exception as exc:  # noqa: BLE001 - lcb_runner counts a comparison that raises as an error (-4)
            return _verdict(RUNTIME_ERROR, index, f"the comparison raised {type(exc).__name__}: {exc}")
        if why is not None:
            return _verdict(WRONG_ANSWER, index, why)
    failed = len(report.outputs)
    if report.error == "sandbox":
        raise RuntimeError(f"the sandbox could not confine a LiveCodeBench program: {report.detail}")
    if report.error == "timeout" or outcome == "killed":
        return _verdict(TIME_LIMIT_EXCEEDED, failed, report.detail or "the run passed its deadline")
    if report.error == "unserialisable":  # not plain data: lcb_runner's == with a list or number is False
        return _verdict(WRONG_ANSWER, failed, f"returned something that is not plain data ({report.detail})")
    if report.error is not None:
        return _verdict(RUNTIME_ERROR, failed, f"{report.error}: {report.detail}")
    if failed < len(expected):
        return _verdict(RUNTIME_ERROR, failed, f"the run ended after {failed} of {len(expected)} tests ({outcome})")
    return _verdict(PASSED)


def _check_call(problems: Sequence[Mapping], programs: Mapping[str, str | None], parallel: Any,
                max_memory_bytes: Any, timeout_s: Any, test_timeout_s: Any) -> list[str]:
    ids = [str(p.get("question_id")) if isinstance(p, Mapping) else None for p in problems]
    if not ids or None in ids or len(set(ids)) != len(ids):
        raise ValueError("problems must be a non-empty list of LiveCodeBench rows with distinct question_id")
    if set(programs) != set(ids) or not all(p is None or isinstance(p, str) for p in programs.values()):
        raise ValueError("programs must map every question_id (and no other) to a program string or None")
    for name, value, low in (("parallel", parallel, 1), ("max_memory_bytes", max_memory_bytes, 16 << 20)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    for name, value in (("timeout_s", timeout_s), ("test_timeout_s", test_timeout_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a number > 0, got {value!r}")
    return ids


def evaluate_lcb(problems: Sequence[Mapping[str, Any]], programs: Mapping[str, str | None], work_dir: Path, *,
                 test_timeout_s: float = limits.LCB_TEST_TIMEOUT_S, max_tests_bytes: int = limits.LCB_MAX_TESTS_BYTES,
                 parallel: int = limits.PARALLEL, max_memory_bytes: int = limits.MAX_MEMORY_BYTES,
                 timeout_s: float = limits.LCB_TIMEOUT_S) -> dict:
    """Grade one program per problem; ``{"pass@1", "n", "statuses", "per_problem", "network_isolated",
    "filesystem_readonly"}``.

    ``problems`` are rows in LiveCodeBench's schema; ``programs`` maps each ``question_id`` to the program to run
    (None: no code was extracted). ``per_problem[question_id]``: ``passed``, ``status`` (module doc),
    ``failed_test`` (0-based index of the first failing test, public tests first) and ``detail``. A row whose tests
    are not in LiveCodeBench's schema (or are refused: a hostile pickle, a zlib bomb past ``max_tests_bytes``) raises
    LcbDataError naming it; past ``timeout_s`` for the whole run, RuntimeError and no result.
    """
    ids = _check_call(problems, programs, parallel, max_memory_bytes, timeout_s, test_timeout_s)
    deadline = time.monotonic() + timeout_s
    verdicts: dict[str, dict] = {}
    expected: dict[int, list] = {}

    def requests():
        for index, (qid, problem) in enumerate(zip(ids, problems)):
            if programs[qid] is None:
                verdicts[qid] = _verdict(NO_CODE, detail="no fenced code block in the answer")
                continue
            try:
                fields, expected[index] = _prepared(problem, max_tests_bytes)
            except LcbDataError as err:
                raise LcbDataError(f"question_id {qid}: {err}") from None
            except (ValueError, RecursionError) as err:  # a test input or output that is not JSON
                verdicts[qid] = _verdict(TEST_ERROR, detail=f"a test cannot be decoded ({err})")
                continue
            n = len(expected[index])
            yield {"id": index, "program": programs[qid], "test_timeout_s": float(test_timeout_s), "guard": "lcb",
                   "memory_bytes": max_memory_bytes, "deadline_s": (test_timeout_s + 1) * (n + 1) + 5, **fields}

    def handle(request: dict, outcome: str, raw: bytes) -> None:
        verdicts[ids[request["id"]]] = _judge(request, outcome, raw, expected.pop(request["id"]))

    previous_digits = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0 if previous_digits == 0 else max(previous_digits, INT_MAX_STR_DIGITS))
    isolation = detect_isolation()
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="lcb_eval_", dir=work_dir)).resolve()
    try:
        settings = SandboxSettings(run_dir, isolation)
        settings = replace(settings, inline_limit=settings.output_cap)  # returned values travel whole, never hashed
        settings.prepare()
        run_requests(requests(), settings, parallel, max(deadline - time.monotonic(), 1e-3), handle)
    finally:
        sys.set_int_max_str_digits(previous_digits)
        shutil.rmtree(run_dir, ignore_errors=True)
    per_problem = {qid: verdicts[qid] for qid in ids}
    return {"pass@1": sum(v["passed"] for v in per_problem.values()) / len(ids), "n": len(ids),
            "statuses": dict(Counter(v["status"] for v in per_problem.values())), "per_problem": per_problem,
            "network_isolated": isolation.jailed, "filesystem_readonly": isolation.jailed}
