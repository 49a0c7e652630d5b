"""Small file helpers: atomic bytes / text / JSON / JSON-lines writes, an atomic folder, and a JSON-lines reader
(plain or gzip).

Atomic means a reader sees either the old file or the complete new one, never a half-written file: the
data goes to a temporary file in the destination directory, is fsync'ed, and then replaces the target
with ``os.replace`` (atomic on POSIX within one file system).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator

from .errors import UserError, where

__all__ = [
    "write_bytes_atomic", "write_text_atomic", "write_json_atomic", "write_jsonl_atomic", "atomic_dir", "iter_jsonl",
    "iter_jsonl_lines", "read_jsonl",
]


def _fsync_dir(directory: Path) -> None:
    """Flush a directory entry to disk (best effort; some file systems refuse)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def _atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary handle on a temporary file beside ``path`` that replaces ``path`` when the block ends normally (and
    is removed when it raises)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def write_bytes_atomic(data: bytes, path: str | os.PathLike) -> Path:
    """Write ``data`` to ``path`` atomically; create parent directories; return the path."""
    with _atomic_file(Path(path)) as handle:
        handle.write(data)
    return Path(path)


@contextmanager
def atomic_dir(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Fill a folder atomically: yields an empty temporary sibling of ``out_dir``; when the block ends normally it
    replaces ``out_dir`` (an older one is removed), when it raises the temporary folder is removed, so ``out_dir`` is
    never seen half-written and a failure leaves nothing behind."""
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)


def write_text_atomic(text: str, path: str | os.PathLike) -> Path:
    """Write ``text`` (UTF-8, newlines as given) to ``path`` atomically; create parent directories; return the path."""
    return write_bytes_atomic(text.encode("utf-8"), path)


def write_json_atomic(obj: Any, path: str | os.PathLike, indent: int | None = 2) -> Path:
    """Serialise ``obj`` as JSON and write it to ``path`` atomically.

    Serialisation happens before anything touches the disk, so an unserialisable object raises
    ``TypeError`` and leaves any existing file untouched.
    """
    text = json.dumps(obj, indent=indent, sort_keys=False, allow_nan=True) + "\n"
    return write_text_atomic(text, path)


def write_jsonl_atomic(records: Iterable[Any], path: str | os.PathLike) -> Path:
    """Write one JSON document per line to ``path`` atomically, streaming the records into the temporary file (a
    record that cannot be serialised leaves ``path`` untouched)."""
    with _atomic_file(Path(path)) as handle:
        for record in records:
            line = json.dumps(record, ensure_ascii=False)
            if "\n" in line:  # json.dumps escapes newlines, so this only guards against future changes
                raise ValueError("a JSON-lines record serialised to more than one line")
            handle.write((line + "\n").encode("utf-8"))
    return Path(path)


def iter_jsonl(path: str | os.PathLike) -> Iterator[Any]:
    """Yield the records of a JSON-lines file (plain, or gzip-compressed when its name ends in ``.gz``), skipping
    blank lines. Raises UserError naming the file and line when a line is not UTF-8 or not valid JSON."""
    for _, record in iter_jsonl_lines(path):
        yield record


def iter_jsonl_lines(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` for each non-blank line of a JSON-lines file (see :func:`iter_jsonl`)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        try:
            for lineno, raw in enumerate(handle, start=1):
                if raw.strip():
                    yield lineno, _json_line(raw, path, lineno)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # only a .gz file raises these
            raise UserError(f"{path}: not a complete gzip file ({exc}); expected gzip-compressed JSON lines") from None


def _json_line(raw: bytes, path: Path, lineno: int) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where(path, lineno)}: byte 0x{raw[exc.start]:02x} at column {exc.start + 1} is not UTF-8; "
                        "expected UTF-8 text (one JSON object per line)") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where(path, lineno)}: invalid JSON line ({exc.msg} at column {exc.colno}); expected one "
                        "JSON object per line") from None


def read_jsonl(path: str | os.PathLike) -> list[Any]:
    """Read a whole JSON-lines file into a list (see ``iter_jsonl``)."""
    return list(iter_jsonl(path))


def read_json_object(path: str | os.PathLike, label: str, error: type[UserError] = UserError,
                     unparsable: str = "not valid JSON") -> dict:
    """The JSON object in ``path``, or ``error`` naming it as ``<label> <path>``: missing, unreadable or not JSON
    (``unparsable`` words that case), or JSON but not an object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise error(f"{label} {path}: not found") from err
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise error(f"{label} {path}: {unparsable} ({err})") from err
    if not isinstance(data, dict):
        raise error(f"{label} {path}: expected a JSON object, got {type(data).__name__}")
    return data
