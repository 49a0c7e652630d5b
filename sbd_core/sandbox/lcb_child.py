"""LiveCodeBench programs inside the sandbox: lcb_runner's harness (``testing_util.py`` of the ``nvidia-livecodebench``
26.3 wheel), run in forked children of a sandbox worker (sandbox side, standard library only; the worker imports it
before entering the jail).

Two request kinds (see ``worker.py`` for the protocol; both report JSON lines, one per test, as ``plain_data``):

* ``lcb_call`` (functional problems), as ``grade_call_based``: one child ``exec``s :data:`PRELUDE` + the program in a
  fresh module ``tmp_sol`` under the time limit, takes ``Solution().<entry_point>`` when the program contains
  ``class Solution`` (else the module-level function), calls it on every test's arguments in order, each under the
  per-test limit, turns a returned tuple into a list and reports the value (``plain_data`` with ``extended`` types:
  a ``Fraction``, ``Decimal`` or numeric ndarray travels too); the first exception or timeout ends the run. The same
  ``Solution`` instance serves every test.
* ``stdin`` (stdin problems), as ``grade_stdio``: the program is made a function body (:func:`as_function`: a last
  ``if __name__ == '__main__':`` block unwrapped, top-level imports hoisted, every other statement in
  ``def wrapped_function():`` after the prelude), so its top-level names are fast locals, as in lcb_runner; one child
  loads it as module ``tmp_sol`` and calls it once per test with lcb_runner's mocks of standard input
  (:func:`_lcb_stdio`: ``sys.stdin`` a ``StringIO`` of the input, the ``read``/``readline``/``readlines`` of the
  process's own ``sys.stdin`` patched, ``builtins.open`` a ``mock_open``) and ``sys.stdout`` captured in a
  ``StringIO``; a ``SystemExit`` ends a test normally, and the captured text is reported. The process's own
  descriptors 0 and 1 are ``/dev/null`` (what a program reads or writes there directly is not the test's, as in
  lcb_runner), and what a test changes in the interpreter stays for the next one, as in lcb_runner.

Every child gets lcb_runner's ``reliability_guard`` (:func:`guard`) on top of the jail, and the int-to-string digit
limit lcb_runner's evaluation sets (50,000). The per-test limit is wall-clock time raised as ``TimeoutException``
inside the program (lcb_runner's ``signal.alarm``, here ``setitimer`` so fractions of a second work); an exception
whose ``repr`` names ``TimeoutException`` counts as a timeout, as in lcb_runner (while loading, any exception is a
runtime error, its "Error during testing"). The worker kills a child whose test has not ended 1 s after its limit
(:func:`per_test_deadlines`; loading has a limit of its own).

The child's own code (encoding and reporting a result) never runs in the interpreter state the program left: the
recursion limit, the int digit limit, ``builtins``, the standard streams of ``sys`` and the trace and profile hooks
are put back first (:func:`_swap`), and the program's state is reinstated before its next call, so a correct program
that lowers the recursion limit or patches ``builtins`` gets the verdict lcb_runner gives it.
"""

from __future__ import annotations

import ast
import builtins
import faulthandler
import io
import os
import resource
import signal
import sys
import time
import types
from contextlib import ExitStack
from unittest import mock

# the prelude's modules, imported before the jail so that a child's prelude imports nothing new
import bisect, collections, copy, datetime, functools, heapq, itertools, json  # noqa: E401,F401
import math, operator, random, re, shutil, statistics, string, subprocess, typing  # noqa: E401,F401

if __package__:
    from . import plain_data
else:  # loaded by worker.py as a top-level module
    import plain_data

__all__ = ["PRELUDE", "INT_MAX_STR_DIGITS", "TimeoutException", "as_function", "guard", "run_call_based",
           "run_stdin_tests", "per_test_deadlines"]

# lcb_runner/evaluation/testing_util.py's import_string, verbatim
PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\nfrom heapq import *\n"
    "from bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\nfrom statistics import *\n"
    "from itertools import *\nfrom functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\nimport datetime\n"
    "import collections\nimport heapq\nimport bisect\nimport copy\nimport math\nimport random\nimport statistics\n"
    "import itertools\nimport functools\nimport operator\nimport io\nimport sys\nimport json\n"
    "sys.setrecursionlimit(50000)\n")
RECURSION_LIMIT = 50000  # the prelude's; the child's own code runs under it
INT_MAX_STR_DIGITS = 50000  # lcb_runner's compute_code_generation_metrics: sys.set_int_max_str_digits(50000)
KILL_GRACE_S = 1.0  # the worker kills a child this long after a test's time limit (lcb_runner: limit + 1 per test)
_GUARDED_OS = ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
               "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
               "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir")
_GUARDED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")
_STREAMS = ("stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__")
_IMPORTS = (ast.Import, ast.ImportFrom)


class TimeoutException(Exception):
    """Raised in the program when a test's time is up (lcb_runner's own exception name)."""


def _raise_timeout(signum, frame):
    raise TimeoutException


def guard() -> None:
    """lcb_runner's ``reliability_guard`` without its memory limit (the worker sets ``RLIMIT_AS``): ``quit``,
    ``help``, destructive ``os``/``shutil`` functions and ``subprocess.Popen`` disabled, some modules hidden."""
    faulthandler.disable()
    builtins.quit = None
    builtins.help = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in _GUARDED_OS:
        setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    for name in _GUARDED_MODULES:
        sys.modules[name] = None


# ------------------------------------------------------------------------------------------------ interpreter state
def _state() -> tuple:
    """The interpreter state a program can change and the child's own code depends on (the recursion limit aside:
    callers reset it inline, before any call). Reads no builtin by name: the program may have replaced them."""
    return (builtins.__dict__.copy(), {name: sys.__dict__[name] for name in _STREAMS}, sys.gettrace(),
            sys.getprofile(), sys.get_int_max_str_digits())


def _swap(state: tuple) -> tuple:
    """Install ``state`` (from :func:`_state`) and return the one it replaces."""
    replaced = _state()
    names, streams, trace, profile, digits = state
    builtins.__dict__.clear()
    builtins.__dict__.update(names)
    sys.__dict__.update(streams)
    sys.settrace(trace)
    sys.setprofile(profile)
    sys.set_int_max_str_digits(digits)
    return replaced


def _error(exc: BaseException, describe, during_load: bool = False) -> dict:
    """lcb_runner's classification: while loading, any exception ("Error during testing"); then a timeout when the
    exception's repr names TimeoutException, else an exception."""
    kind = "program" if during_load else "timeout" if "timeoutexception" in repr(exc).lower() else "exception"
    return {"error": kind, "detail": describe(exc)}


def _load(code: str, limit: float):
    """lcb_runner's ``compile_code``: ``code`` executed as module ``tmp_sol`` under the time limit; the module, or a
    ``Solution()`` instance when the code contains ``class Solution``. Sets the timer's handler for the tests too
    (they only start and stop the timer, with C calls: a low recursion limit cannot stop them)."""
    signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        module = types.ModuleType("tmp_sol", "")
        exec(code, module.__dict__)
        return module.Solution() if "class Solution" in code else module
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


# ------------------------------------------------------------------------------------------------ functional
def run_call_based(request: dict, inline_limit: int, emit, describe) -> None:
    """The child of an ``lcb_call`` request (see the module doc); ``emit`` writes one report record."""
    sys.set_int_max_str_digits(INT_MAX_STR_DIGITS)
    own = _state()
    limit, inputs = request["test_timeout_s"], plain_data.decode(request["inputs"])
    try:
        method = getattr(_load(PRELUDE + "\n\n" + request["program"], limit), request["entry_point"])
    except BaseException as exc:
        sys.setrecursionlimit(RECURSION_LIMIT)
        _swap(own)
        return emit(_error(exc, describe, during_load=True))
    for args in inputs:
        try:
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                value = method(*args)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException as exc:
            sys.setrecursionlimit(RECURSION_LIMIT)
            _swap(own)
            return emit(_error(exc, describe))
        program_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(RECURSION_LIMIT)
        program_state = _swap(own)
        if isinstance(value, tuple):  # lcb_runner: "don't penalize model if it produces tuples instead of lists"
            value = list(value)
        try:
            record = plain_data.encode_output(value, inline_limit, extended=True)
        except BaseException as exc:
            return emit({"error": "unserialisable", "detail": describe(exc)})
        emit(record)
        _swap(program_state)
        sys.setrecursionlimit(program_limit)


# ------------------------------------------------------------------------------------------------ stdin
def _unwrap_main(program: str) -> str:
    """lcb_runner's ``clean_if_name``: a last top-level ``if __name__ == '__main__':`` replaced by its body."""
    try:
        tree = ast.parse(program)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)
    except Exception:  # noqa: BLE001 - as lcb_runner: anything that does not parse stays as it is
        pass
    return program


def as_function(program: str) -> str:
    """lcb_runner's ``clean_if_name`` + ``make_function``: the prelude, the program's top-level imports, then every
    other top-level statement as the body of ``wrapped_function()``; the program unchanged when it does not
    parse (it then fails to load)."""
    program = _unwrap_main(program)
    try:
        tree = ast.parse(program)
        function = ast.parse("def wrapped_function():\n    pass").body[0]
        function.body = [statement for statement in tree.body if not isinstance(statement, _IMPORTS)]
        imports = [statement for statement in tree.body if isinstance(statement, _IMPORTS)]
        return PRELUDE + "\n" + ast.unparse(imports) + "\n" + ast.unparse(function)
    except Exception:  # noqa: BLE001 - as lcb_runner
        return program


def _lcb_stdio(text: str, stack: ExitStack) -> io.StringIO:
    """Enter lcb_runner's standard-input mocks for ``text`` on ``stack``, in the order its stacked ``patch``
    decorators start (``read``, ``readlines``, ``readline`` of the process's own ``sys.stdin``, then ``sys.stdin``,
    then ``builtins.open``), and its stdout capture; return the capture (whose ``close`` takes one argument, as
    lcb_runner's)."""
    capture = io.StringIO()
    capture.close = lambda x: 1
    stack.enter_context(mock.patch("sys.stdout", capture))
    lines = iter(text.split("\n"))
    for target, value in (("sys.stdin.read", lambda *args: text),
                          ("sys.stdin.readlines", lambda *args: text.split("\n")),
                          ("sys.stdin.readline", lambda *args: next(lines)), ("sys.stdin", io.StringIO(text)),
                          ("builtins.open", mock.mock_open(read_data=text))):
        stack.enter_context(mock.patch(target, value))
    return capture


def run_stdin_tests(request: dict, emit, describe) -> None:
    """The child of a ``stdin`` request (see the module doc): one record per test, ``{"v": captured output, "t":
    seconds}``, until the first error."""
    sys.set_int_max_str_digits(INT_MAX_STR_DIGITS)
    sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", closefd=False)
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)
    own, limit = _state(), request["test_timeout_s"]
    try:
        function = _load(as_function(request["program"]), limit).wrapped_function
    except BaseException as exc:
        sys.setrecursionlimit(RECURSION_LIMIT)
        _swap(own)
        return emit(_error(exc, describe, during_load=True))
    for text in request["stdin"]:
        failure, start = None, time.perf_counter()
        try:
            with ExitStack() as mocks:  # entered and left in the program's state, as lcb_runner's patches
                capture = _lcb_stdio(text, mocks)
                signal.setitimer(signal.ITIMER_REAL, limit)
                try:
                    function()
                except SystemExit:
                    pass
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException as exc:
            failure = exc
        elapsed, program_limit = time.perf_counter() - start, sys.getrecursionlimit()
        sys.setrecursionlimit(RECURSION_LIMIT)
        program_state = _swap(own)
        if failure is not None:
            return emit(_error(failure, describe))
        emit({"v": capture.getvalue(), "t": elapsed})
        _swap(program_state)
        sys.setrecursionlimit(program_limit)


def per_test_deadlines(request: dict) -> tuple[float, float]:
    """(first, next): the worker kills the child of an LCB request when its first test has not ended ``first`` s
    after it started (loading has its own limit), or a later one ``next`` s after the test before."""
    limit = request["test_timeout_s"]
    return 2 * limit + KILL_GRACE_S, limit + KILL_GRACE_S
