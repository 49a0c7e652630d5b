"""The one exception type for a user's mistake: a bad input file, command-line argument or config key.

:class:`UserError` is raised where an input is read, with a message that names the input (the file and line, or the
key) and says what is expected. It is a ``ValueError``, so code that catches ``ValueError`` (the workflow's config
checks, tests) still does. ``python -m sbd_core`` prints it as one line ``error: <message>`` and exits with status 1;
any other exception is a bug and keeps its traceback (:mod:`sbd_core.cli` has the whole rule).

General-purpose classes (``DecodeConfig``, ``TrainConfig``, the solvers' parameters) validate with plain ``ValueError``:
they are also an API, where a bad value is the caller's bug. A stage that builds one from the user's input does so
inside :func:`user_input`, which names that input and turns the class's ``ValueError`` (or ``TypeError``, a wrong
type in the section) into a UserError.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["UserError", "user_input", "where"]


class UserError(ValueError):
    """A mistake in the user's input; the message names the input and what is expected."""


def where(path: str | Path, line: int | None = None) -> str:
    """``path`` or ``path:line``, the prefix of a message about a file."""
    return f"{path}:{line}" if line is not None else str(path)


@contextmanager
def user_input(what: str) -> Iterator[None]:
    """Validate the user's input ``what`` (e.g. ``"decode spec"``) inside the block: a ValueError or TypeError raised
    there is re-raised as UserError ``"<what>: <message>"``. Keep the block to the validating call only."""
    try:
        yield
    except UserError:
        raise
    except (ValueError, TypeError) as err:
        raise UserError(f"{what}: {err}") from err
