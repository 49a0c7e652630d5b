"""Unit tests of the sandbox boundary format (plain_data) and evalplus's comparison rules (oracle); in-process."""

from __future__ import annotations

import collections
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("evalplus")

from sbd_core.sandbox.oracle import RunReport, input_set_status, output_matches  # noqa: E402
from sbd_core.sandbox.plain_data import (  # noqa: E402
    Digest, Unserialisable, decode, decode_output, dumps, encode, encode_output, loads,
)

PLAIN_VALUES = [
    None, True, False, 0, -7, 2**63, -(2**200) + 1, 1.5, -0.0, math.inf, -math.inf, "", "naïve \udc80", [1, [2.0]],
    (1, "a", (None,)), {1, 2, (3, 4)}, frozenset({"x"}), {1: "a", "b": [1], (2, 3): {4.5}}, b"\x00\xff", 3 - 4j,
    complex(math.inf, -0.0), np.float64(0.1), np.int32(-5), np.bool_(True), np.float32(2.5), [], (), {},
]


def roundtrip(value):
    return decode(loads(dumps(encode(value))))


@pytest.mark.parametrize("value", PLAIN_VALUES, ids=repr)
def test_plain_values_roundtrip_with_their_exact_types(value):
    back = roundtrip(value)
    assert type(back) is type(value)
    assert back == value or (isinstance(value, float) and math.copysign(1, back) == math.copysign(1, value))
    assert repr(back) == repr(value)


def test_nan_roundtrips_and_stdlib_dicts_become_dicts():
    assert math.isnan(roundtrip(math.nan))
    for mapping in (collections.Counter("abca"), collections.OrderedDict(a=1), collections.defaultdict(int, a=2)):
        back = roundtrip(mapping)
        assert type(back) is dict and back == dict(mapping)


class RiggedInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class AlwaysEqual:
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [RiggedInt(3), AlwaysEqual(), [1, AlwaysEqual()], (i for i in range(2)),
                                   bytearray(b"x"), np.array([1.0]), range(3), {"k": object()}, print],
                         ids=lambda v: type(v).__name__)
def test_anything_else_is_unserialisable(value):
    with pytest.raises(Unserialisable):
        encode(value)
    with pytest.raises((Unserialisable, ValueError)):
        encode_output(value, inline_limit=1 << 20)


@pytest.mark.parametrize("value", [Fraction(-7, 3), Decimal("2.50"), Decimal("-0"), Decimal("NaN"), Decimal("1E+400"),
                                   np.array([2.5]), np.arange(6, dtype=np.uint8).reshape(2, 3), np.array(True),
                                   np.array([], dtype=np.complex64), [np.array([1, 2**62]), {Fraction(1, 2): None}]],
                         ids=repr)
def test_extended_values_roundtrip_with_their_exact_types(value):
    back = decode(loads(dumps(encode(value, extended=True))))
    assert repr(back) == repr(value) and type(back) is type(value)
    with pytest.raises(Unserialisable):  # without extended (evalplus's scorer): not plain data
        encode(value)


def test_extended_values_compare_as_lcb_runner_compares_them():
    assert roundtrip_extended(np.array([2.5])) == 2.5 and roundtrip_extended(Fraction(5, 2)) == 2.5
    assert roundtrip_extended(Decimal(3) / 2) == 1.5
    with pytest.raises(ValueError):  # the truth value of two comparisons: lcb_runner's runtime error
        bool(roundtrip_extended(np.array([1, 3])) == [1, 3])
    for subclass in (type("F", (Fraction,), {})(1, 2), type("D", (Decimal,), {})("1"), np.ma.array([1]),
                     np.array(["a"]), np.array([object()])):
        with pytest.raises(Unserialisable):
            encode(subclass, extended=True)


def roundtrip_extended(value):
    return decode(loads(dumps(encode(value, extended=True))))


@pytest.mark.parametrize("text", [
    '{"$": "fraction", "v": [1, 0]}', '{"$": "fraction", "v": [1.5, 2]}', '{"$": "decimal", "v": "1.2.3"}',
    '{"$": "ndarray", "dtype": "<i8", "shape": [2], "v": [1]}',
    '{"$": "ndarray", "dtype": "O", "shape": [1], "v": [1]}',
    '{"$": "ndarray", "dtype": "<f8", "shape": [-1], "v": []}',
    '{"$": "ndarray", "dtype": "<f8", "shape": [1], "v": ["a"]}',
    '{"$": "eval", "v": "1"}', '{"$": "tuple", "v": [1], "x": 2}', '{"a": 1}', "NaN", '{"$": "set", "v": [[1]]}',
    '{"$": "dict", "v": [[[1], 2]]}', '{"$": "numpy", "dtype": "O", "v": 1}', '{"$": "bytes", "v": "!!"}',
    '{"$": "float", "v": "1e5"}', '{"$": "int", "v": 5}',
])
def test_decoding_is_strict(text):
    with pytest.raises((ValueError, TypeError)):
        decode(loads(text))


def test_large_outputs_travel_as_digests_of_their_exact_serialisation():
    big = [("a", i) for i in range(50_000)]
    record = encode_output(big, inline_limit=1 << 16)
    assert set(record) == {"digest", "nbytes"} and record["nbytes"] > 1 << 16
    assert decode_output(record) == decode_output(encode_output([("a", i) for i in range(50_000)], 1 << 16))
    assert decode_output(encode_output([["a", i] for i in range(50_000)], 1 << 16)) != decode_output(record)
    assert decode_output(encode_output(big[:3], 1 << 16)) == big[:3]
    with pytest.raises(ValueError):
        decode_output({"digest": "x", "nbytes": "1"})


def match(out, exp, inp=(), dataset="humaneval", entry_point="f", atol=0):
    return output_matches(dataset, entry_point, list(inp), exp, out, atol)[0]


def test_exact_and_float_rules_follow_evalplus():
    assert match(3, 3) and match(3.0, 3) and not match("3", 3)
    assert match(0.1 + 0.2, 0.3)  # is_floats(exp) -> atol 1e-6
    assert match([1.0, 2.0000001], [1.0, 2.0]) and not match((1.0, 2.0000001), [1.0, 2.0])  # same type required
    assert not match([1.0], [1.0, 2.0]) and not match(np.array([1.0, 2.0]), [1.0, 2.0])
    assert match(np.float64(0.5), 0.5) and match(1.00001, 1.0, atol=1e-4) and not match(1.1, 1.0, atol=1e-4)


def test_atol_set_by_a_float_output_carries_over_like_in_evalplus():
    # unsafe_execute assigns atol = 1e-6 inside its loop; later inputs of the set keep it
    assert not output_matches("humaneval", "f", [], 10**17, 10**17 + 1, 0)[0]
    passed, atol = output_matches("humaneval", "f", [], 0.5, 0.5, 0)
    assert passed and atol == 1e-6
    assert output_matches("humaneval", "f", [], 10**17, 10**17 + 1, atol)[0]


def test_special_oracles():
    assert match(-0.5, None, inp=[[1, 2]], entry_point="find_zero", atol=1e-6)
    assert not match(0.5, -0.5, inp=[[1, 2]], entry_point="find_zero", atol=1e-6)
    assert match([5, 4], (4, 5), dataset="mbpp", entry_point="similar_elements")  # MBPP_OUTPUT_SET_EQ_TASKS
    assert not match([5, 4], (4, 5), dataset="mbpp", entry_point="other")
    assert match(0, 7, dataset="mbpp", entry_point="sum_div")
    assert match("x", 7, dataset="mbpp", entry_point="are_equivalent")
    assert match(7, 99, inp=[123, 256], dataset="mbpp", entry_point="digit_distance_nums")  # |1-2|+|2-5|+|3-6|
    assert not match(6, 99, inp=[123, 256], dataset="mbpp", entry_point="digit_distance_nums")
    assert not match("oops", 2, dataset="mbpp", entry_point="surface_Area", inp=[3, 4])  # exceptions fail


def test_digests_only_match_identical_digests():
    assert match(Digest("a" * 64, 10), Digest("a" * 64, 10))
    assert not match(Digest("a" * 64, 10), Digest("b" * 64, 10)) and not match([1], Digest("a" * 64, 10))


def test_input_set_status_mirrors_untrusted_check():
    same = lambda i, out, atol: (out == i, atol)  # noqa: E731 - output i must equal i
    assert input_set_status(RunReport("done", [0, 1, 2]), 3, same, 0) == "pass"
    assert input_set_status(RunReport("done", [0, 5, 2]), 3, same, 0) == "fail"
    assert input_set_status(RunReport("done", [0], error="exception"), 3, same, 0) == "fail"
    assert input_set_status(RunReport("killed", [0, 1]), 3, same, 0) == "timeout"
    assert input_set_status(RunReport("killed", [0, 9]), 3, same, 0) == "fail"
    assert input_set_status(RunReport("crashed", []), 3, same, 0) == "timeout"
    assert input_set_status(RunReport("too_large", []), 3, same, 0) == "fail"
    assert input_set_status(RunReport("done", []), 0, same, 0) == "pass"
