"""LiveCodeBench test cases from a downloaded row, decoded without trusting the data.

A row of ``livecodebench/code_generation_lite`` carries ``public_test_cases`` (a JSON string), ``private_test_cases``
(a JSON string, or base64 -> zlib -> pickle of a JSON *string*) and ``metadata`` (a JSON string; ``func_name`` for
functional problems). lcb_runner decodes the private tests with ``pickle.loads``, which runs whatever the pickle says.
Here the pickle is never unpickled: :func:`pickled_string` walks its opcodes with ``pickletools.genops`` (a parser
that executes nothing) and accepts exactly the shape a pickled string has -- a protocol header, optional framing, one
unicode string, an optional memo store, STOP -- and reads the string from the parsed argument. Any other opcode
(GLOBAL, STACK_GLOBAL, REDUCE, BUILD, ...) is refused with an error naming it. The decompressed size is capped
(``max_bytes``), so a zlib bomb stops at the cap instead of filling memory.

The tests are then checked field by field (:func:`load_tests`): ``input`` and ``output`` strings, ``testtype``
``stdin`` or ``functional``, and a function name for functional problems. As in lcb_runner
(``CodeGenerationProblem.get_evaluation_sample``) the public tests come first, then the private ones, and the
problem is call-based exactly when ``metadata`` names a ``func_name``.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickletools
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from sbd_core.sandbox.limits import LCB_MAX_TESTS_BYTES

__all__ = ["LcbDataError", "LcbTests", "TEST_TYPES", "pickled_string", "inflate", "load_tests"]

TEST_TYPES = ("stdin", "functional")
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"}
_MEMO_OPS = {"MEMOIZE", "BINPUT", "LONG_BINPUT"}
_ALLOWED = {"PROTO", "FRAME", "string", "memo", "STOP"}
# the opcode sequences of one pickled string (FRAME and the memo store are optional)
_SHAPES = [["PROTO", *frame, "string", *memo, "STOP"] for frame in ([], ["FRAME"]) for memo in ([], ["memo"])]


class LcbDataError(ValueError):
    """A row's test data is not what LiveCodeBench publishes (malformed, hostile or too large)."""


@dataclass(frozen=True)
class LcbTests:
    """One problem's tests in grading order (public, then private): ``fn_name`` set for call-based problems."""

    fn_name: str | None
    inputs: list[str]
    outputs: list[str]

    @property
    def functional(self) -> bool:
        return self.fn_name is not None


def _opcodes(data: bytes) -> list[tuple[str, object, int]]:
    """(kind, argument, byte offset) of every opcode, parsed by ``pickletools.genops`` (which executes nothing)."""
    try:
        return [("string" if op.name in _STRING_OPS else "memo" if op.name in _MEMO_OPS else op.name, arg, pos)
                for op, arg, pos in pickletools.genops(io.BytesIO(data))]
    except ValueError as err:  # truncated data, unknown opcodes
        raise LcbDataError(f"the pickle cannot be parsed ({err})") from None


def pickled_string(data: bytes) -> str:
    """The string a pickle of one ``str`` holds, read from its parsed opcodes (nothing is unpickled).

    Accepted: ``PROTO``, optional ``FRAME``, one of ``SHORT_BINUNICODE``/``BINUNICODE``/``BINUNICODE8``, an optional
    memo store, ``STOP``, and nothing after it. Raises LcbDataError naming the first other opcode (``GLOBAL``,
    ``STACK_GLOBAL``, ``REDUCE``, ...: what would import or call something when unpickled) or the defect.
    """
    ops = _opcodes(data)
    other = next(((kind, pos) for kind, _, pos in ops if kind not in _ALLOWED), None)
    if other is not None:
        raise LcbDataError(f"the pickle holds opcode {other[0]} at byte {other[1]}; only a protocol header, framing, "
                           "one string, a memo store and STOP are accepted (the data is never unpickled)")
    kinds = [kind for kind, _, _ in ops]
    if kinds not in _SHAPES:
        raise LcbDataError(f"the pickle's opcodes {kinds} are not one pickled string (PROTO, FRAME?, string, "
                           "memo?, STOP)")
    if ops[-1][2] + 1 != len(data):
        raise LcbDataError(f"{len(data) - ops[-1][2] - 1} bytes follow the pickle's STOP")
    return next(arg for kind, arg, _ in ops if kind == "string")


def inflate(data: bytes, max_bytes: int) -> bytes:
    """zlib-decompress ``data``, refusing more than ``max_bytes`` of output, a truncated stream or trailing bytes."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as err:
        raise LcbDataError(f"the private tests are not zlib data ({err})") from None
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise LcbDataError(f"the private tests decompress to more than {max_bytes} bytes (the cap, "
                           "benchmarks.lcbv6.max_tests_bytes); refused as a possible zlib bomb")
    if not inflater.eof or inflater.unused_data:
        raise LcbDataError("the private tests' zlib stream is truncated or followed by other bytes")
    return out


def _private_tests(blob: Any, max_bytes: int) -> Any:
    """lcb_runner's decoding of ``private_test_cases`` (plain JSON, else base64 -> zlib -> pickled JSON string)."""
    if not isinstance(blob, str):
        raise LcbDataError(f"private_test_cases must be a string, got {type(blob).__name__}")
    try:
        return json.loads(blob)
    except ValueError:
        pass
    try:
        compressed = base64.b64decode(blob.encode("utf-8"))
    except (binascii.Error, ValueError) as err:
        raise LcbDataError(f"private_test_cases is neither JSON nor base64 ({err})") from None
    try:
        return json.loads(pickled_string(inflate(compressed, max_bytes)))
    except ValueError as err:
        if isinstance(err, LcbDataError):
            raise
        raise LcbDataError(f"the pickled private tests are not JSON ({err})") from None


def _json_field(row: Mapping, key: str) -> Any:
    value = row.get(key)
    if not isinstance(value, str):
        raise LcbDataError(f"{key} must be a JSON string, got {type(value).__name__}")
    try:
        return json.loads(value)
    except ValueError as err:
        raise LcbDataError(f"{key} is not valid JSON ({err})") from None


def _checked(tests: Any, where: str) -> list[dict]:
    if not isinstance(tests, list):
        raise LcbDataError(f"{where} must be a JSON list of tests, got {type(tests).__name__}")
    for n, test in enumerate(tests):
        if not isinstance(test, dict) or not all(isinstance(test.get(k), str) for k in ("input", "output")):
            raise LcbDataError(f"{where}[{n}] must be an object with string 'input' and 'output'")
        if test.get("testtype") not in TEST_TYPES:
            raise LcbDataError(f"{where}[{n}] has testtype {test.get('testtype')!r}; expected one of {TEST_TYPES}")
    return tests


def load_tests(row: Mapping, max_bytes: int = LCB_MAX_TESTS_BYTES) -> LcbTests:
    """The checked tests of one LiveCodeBench row; LcbDataError naming the field and the defect otherwise."""
    public = _checked(_json_field(row, "public_test_cases"), "public_test_cases")
    private = _checked(_private_tests(row.get("private_test_cases"), max_bytes), "private_test_cases")
    metadata = _json_field(row, "metadata")
    if not isinstance(metadata, dict):
        raise LcbDataError(f"metadata must be a JSON object, got {type(metadata).__name__}")
    fn_name = metadata.get("func_name")
    tests = public + private
    if not tests:
        raise LcbDataError("the problem has no tests")
    if fn_name is not None and not (isinstance(fn_name, str) and fn_name.isidentifier()):
        raise LcbDataError(f"metadata.func_name {fn_name!r} is not a function name")
    if fn_name is None and any(t["testtype"] == "functional" for t in tests):
        raise LcbDataError("functional tests need metadata.func_name (the function they call)")
    return LcbTests(fn_name, [t["input"] for t in tests], [t["output"] for t in tests])
