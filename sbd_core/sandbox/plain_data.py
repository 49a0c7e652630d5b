"""Plain data as type-tagged JSON: how program inputs enter the sandbox and program outputs leave it.

Only data crosses the sandbox boundary, never objects: the parent decodes with ``json.loads`` plus a small tag
interpreter, so nothing a sandboxed program returns is executed, imported or compared by its own ``__eq__``.

Encoding (``encode``/``decode``), by exact type (``type(x) is T``; subclasses are rejected, so a result object
with a rigged ``__eq__`` cannot be mistaken for the right value):

* ``None``, ``bool``, ``str``, ``list`` and finite ``float`` are native JSON; ``int`` too when |x| < 2**63;
* ``{"$": "int", "v": hex}`` larger ints; ``{"$": "float", "v": "nan"|"inf"|"-inf"}``;
* ``{"$": "tuple"|"set"|"frozenset", "v": [...]}``; ``{"$": "dict", "v": [[key, value], ...]}``;
* ``{"$": "bytes", "v": base64}``; ``{"$": "complex", "v": [real, imag]}``;
* ``{"$": "numpy", "dtype": "<f8", "v": value}``: numpy scalars of bool/int/uint/float/complex dtype (decoded back to
  the same numpy type, so comparisons behave as they do in evalplus's own process).

``collections.OrderedDict``, ``defaultdict`` and ``Counter`` are encoded as ``dict`` (their equality with a dict is
dict equality). With ``extended=True`` (LiveCodeBench, whose grader compares a returned value with ``==``, under which
these can equal plain data) three more exact types are encoded and decoded back to the same type:

* ``{"$": "fraction", "v": [numerator, denominator]}`` (``fractions.Fraction``), ``{"$": "decimal", "v": str}``
  (``decimal.Decimal``, exact);
* ``{"$": "ndarray", "dtype": "<i8", "shape": [...], "v": [items in C order]}``: numpy arrays of bool/int/uint/
  float/complex dtype.

Every other type (custom classes, generators, ``bytearray``, ndarrays without ``extended``...) raises
``Unserialisable``. ``decode`` accepts every tag (it only ever builds these standard types).

One program output travels as one JSON line (``encode_output``/``decode_output``): ``{"v": encoded}`` or, when
its exact serialisation (``marshal`` version 0, no sharing or interning) is larger than ``inline_limit`` bytes,
``{"digest": sha256, "nbytes": n}``. Two digests are equal only for values of identical types and contents in
identical order (sets and dicts included), which is stricter than ``==``: large outputs are compared exactly.

This module runs inside the sandbox too, so it imports only the standard library (numpy only if already loaded).
"""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import marshal
import math
import sys
from dataclasses import dataclass
from fractions import Fraction
from decimal import Decimal
from typing import Any, Iterator

__all__ = ["Digest", "Unserialisable", "encode", "decode", "encode_output", "decode_output", "dumps", "loads"]

_TAG = "$"
_INT_LIMIT = 1 << 63
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_DICT_TYPES = (dict, collections.OrderedDict, collections.defaultdict, collections.Counter)
_SEQUENCE_TAGS = {"tuple": tuple, "set": set, "frozenset": frozenset}
_NUMPY_KINDS = "biufc"
_EXTRA_KEYS = {"numpy": ("dtype",), "ndarray": ("dtype", "shape")}


class Unserialisable(TypeError):
    """The value is not plain data (see the module docstring); the message names the offending type."""


@dataclass(frozen=True)
class Digest:
    """Stand-in for an output too large to ship: sha256 of its exact serialisation and its size in bytes."""

    sha256: str
    nbytes: int


def _encode_float(x: float) -> Any:
    return x if math.isfinite(x) else {_TAG: "float", "v": repr(x)}


def _encode_numpy(x: Any) -> dict:
    """numpy scalar of a numeric/bool dtype -> tagged value; anything else from numpy is Unserialisable."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(x, numpy.generic) or type(x) is not numpy.dtype(type(x)).type \
            or x.dtype.kind not in _NUMPY_KINDS:
        raise Unserialisable(f"{type(x).__module__}.{type(x).__qualname__} is not plain data")
    return {_TAG: "numpy", "dtype": x.dtype.str, "v": encode(x.item())}


def _encode_extended(x: Any) -> dict:
    """A Fraction, Decimal or numeric ndarray (exact types) -> tagged value; anything else is Unserialisable."""
    kind, numpy = type(x), sys.modules.get("numpy")
    if kind is Fraction:
        return {_TAG: "fraction", "v": [encode(x.numerator), encode(x.denominator)]}
    if kind is Decimal:
        return {_TAG: "decimal", "v": str(x)}
    if numpy is not None and kind is numpy.ndarray and x.dtype.kind in _NUMPY_KINDS:
        return {_TAG: "ndarray", "dtype": x.dtype.str, "shape": list(x.shape),
                "v": [encode(item) for item in x.ravel().tolist()]}
    raise Unserialisable(f"{kind.__module__}.{kind.__qualname__} is not plain data")


def encode(x: Any, extended: bool = False) -> Any:
    """Plain value -> JSON-ready structure (exact types only; ``extended``: Fraction, Decimal and numeric ndarrays
    too); raise Unserialisable otherwise."""
    kind = type(x)
    if x is None or kind is bool or kind is str:
        return x
    if kind is int:
        return x if -_INT_LIMIT < x < _INT_LIMIT else {_TAG: "int", "v": hex(x)}
    if kind is float:
        return _encode_float(x)
    if kind is list:
        return [encode(item, extended) for item in x]
    if kind in (tuple, set, frozenset):
        return {_TAG: kind.__name__, "v": [encode(item, extended) for item in x]}
    if kind in _DICT_TYPES:
        return {_TAG: "dict", "v": [[encode(key, extended), encode(value, extended)] for key, value in dict.items(x)]}
    if kind is bytes:
        return {_TAG: "bytes", "v": base64.b64encode(x).decode("ascii")}
    if kind is complex:
        return {_TAG: "complex", "v": [_encode_float(x.real), _encode_float(x.imag)]}
    if extended and (kind in (Fraction, Decimal) or kind.__name__ == "ndarray"):
        return _encode_extended(x)
    if kind.__module__ == "numpy":
        return _encode_numpy(x)
    raise Unserialisable(f"{kind.__module__}.{kind.__qualname__} is not plain data")


def _decode_tagged(obj: dict) -> Any:
    tag, value = obj.get(_TAG), obj.get("v")
    keys = {_TAG, "v", *_EXTRA_KEYS.get(tag, ())}
    if set(obj) != keys:
        raise ValueError(f"tagged value {tag!r} has keys {sorted(obj)}, expected {sorted(keys)}")
    if tag == "int" and type(value) is str:
        return int(value, 16)
    if tag == "float" and value in _NON_FINITE:
        return _NON_FINITE[value]
    if tag in _SEQUENCE_TAGS and type(value) is list:
        return _SEQUENCE_TAGS[tag](decode(item) for item in value)
    if tag == "dict" and type(value) is list and all(type(p) is list and len(p) == 2 for p in value):
        return {decode(key): decode(item) for key, item in value}
    if tag == "bytes" and type(value) is str:
        return base64.b64decode(value, validate=True)
    if tag == "complex" and type(value) is list and len(value) == 2:
        return complex(*(decode(part) for part in value))
    if tag == "numpy" and type(obj["dtype"]) is str:
        return _decode_numpy(obj["dtype"], decode(value))
    if tag == "fraction" and type(value) is list and len(value) == 2:
        numerator, denominator = (decode(part) for part in value)
        if type(numerator) is int and type(denominator) is int and denominator > 0:
            return Fraction(numerator, denominator)
    if tag == "decimal" and type(value) is str:
        return _decode_decimal(value)
    if tag == "ndarray" and type(value) is list and type(obj["dtype"]) is str and type(obj["shape"]) is list:
        return _decode_ndarray(obj["dtype"], obj["shape"], [decode(item) for item in value])
    raise ValueError(f"malformed tagged value {tag!r}")


def _decode_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except ArithmeticError:  # decimal.InvalidOperation: not a number literal
        raise ValueError(f"{text[:40]!r} is not a decimal number") from None


def _decode_ndarray(dtype: str, shape: list, values: list) -> Any:
    import numpy

    kind = numpy.dtype(dtype)
    if kind.kind not in _NUMPY_KINDS or not all(type(n) is int and n >= 0 for n in shape) \
            or math.prod(shape) != len(values) or not all(type(v) in (bool, int, float, complex) for v in values):
        raise ValueError(f"ndarray of dtype {dtype!r} and shape {shape} does not hold {len(values)} plain scalars")
    return numpy.array(values, dtype=kind).reshape(shape)


def _decode_numpy(dtype: str, value: Any) -> Any:
    import numpy

    kind = numpy.dtype(dtype)
    if kind.kind not in _NUMPY_KINDS or type(value) not in (bool, int, float, complex):
        raise ValueError(f"numpy value of dtype {dtype!r} is not a plain scalar")
    return kind.type(value)


def decode(obj: Any) -> Any:
    """Inverse of ``encode`` on parsed JSON; raise ValueError/TypeError on anything it did not produce."""
    kind = type(obj)
    if obj is None or kind in (bool, str, int):
        return obj
    if kind is float:
        if not math.isfinite(obj):
            raise ValueError("non-finite floats must be tagged")
        return obj
    if kind is list:
        return [decode(item) for item in obj]
    if kind is dict:
        return _decode_tagged(obj)
    raise ValueError(f"unexpected JSON type {kind.__name__}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"bare JSON constant {name} (non-finite floats are tagged)")


def dumps(obj: Any) -> str:
    """Strict JSON text of an already-encoded structure (no NaN/Infinity literals)."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """Parse strict JSON (NaN/Infinity literals are an error)."""
    return json.loads(text, parse_constant=_reject_constant)


def _marshal_chunks(value: Any) -> Iterator[bytes]:
    """Exact serialisation of ``value`` in pieces (one per item of a top-level list/tuple) to bound memory."""
    if type(value) in (list, tuple):
        yield (b"L" if type(value) is list else b"T") + len(value).to_bytes(8, "little")
        for item in value:
            yield marshal.dumps(item, 0)
    else:
        yield b"V" + marshal.dumps(value, 0)


def encode_output(value: Any, inline_limit: int, extended: bool = False) -> dict:
    """One program output -> ``{"v": encoded}`` or ``{"digest", "nbytes"}`` when larger than ``inline_limit``
    (``extended``: see ``encode``).

    Raises Unserialisable (or ValueError for nesting too deep) when the value is not plain data."""
    hasher, nbytes = hashlib.sha256(), 0
    try:
        for chunk in _marshal_chunks(value):
            hasher.update(chunk)
            nbytes += len(chunk)
    except ValueError:  # marshal refuses exotic types; encode() below names the culprit
        return {"v": encode(value, extended)}
    if nbytes > inline_limit:
        return {"digest": hasher.hexdigest(), "nbytes": nbytes}
    return {"v": encode(value, extended)}


def decode_output(obj: dict) -> Any:
    """Inverse of ``encode_output``: the value, or a ``Digest``."""
    if set(obj) == {"v"}:
        return decode(obj["v"])
    if set(obj) == {"digest", "nbytes"} and type(obj["digest"]) is str and type(obj["nbytes"]) is int:
        return Digest(obj["digest"], obj["nbytes"])
    raise ValueError(f"malformed output record with keys {sorted(obj)}")
