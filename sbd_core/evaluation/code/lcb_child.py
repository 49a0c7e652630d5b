"""LiveCodeBench programs inside the sandbox: lcb_runner's prelude, guard and time limit (sandbox side, standard
library only; the worker imports it before entering the jail).

Two request kinds (see ``worker.py`` for the protocol; both report JSON lines, one per test, as ``plain_data``):

* ``lcb_call`` (functional problems) mirrors ``testing_util.grade_call_based``: one child ``exec``s
  :data:`PRELUDE` + the program in a fresh module under a time limit, takes ``Solution().<entry_point>`` when the
  program contains ``class Solution`` (else the module-level function), calls it on every test's arguments in order,
  each under the per-test limit, turns a returned tuple into a list and reports the value; the first exception or
  timeout ends the run. The same ``Solution`` instance serves every test, as in lcb_runner.
* ``stdin`` (stdin problems): each test runs as its own process, a child of the worker, with the test's input as its
  real standard input and a memory file as its standard output; it runs PRELUDE + the program as ``__main__``
  (so ``if __name__ == "__main__":`` blocks run), a ``SystemExit`` ends it normally (as lcb_runner treats it), and the
  worker reports the captured output text. lcb_runner instead wraps the program in a function and runs it in its
  own process with mocked ``sys.stdin`` and captured ``sys.stdout``.

Every child gets lcb_runner's ``reliability_guard`` (:func:`guard`) on top of the jail, and the int-to-string digit
limit lcb_runner's evaluation sets (50,000). The per-test limit is wall-clock time raised as ``TimeoutException``
inside the program (lcb_runner's ``signal.alarm``, here ``setitimer`` so fractions of a second work); the worker
kills a child one second after it.
"""

from __future__ import annotations

import builtins
import contextlib
import faulthandler
import os
import resource
import signal
import sys
import time
import types

# the prelude's modules, imported before the jail so that a child's prelude imports nothing new
import bisect, collections, copy, datetime, functools, heapq, io, itertools, json  # noqa: E401,F401
import math, operator, random, re, shutil, statistics, string, subprocess, typing  # noqa: E401,F401

if __package__:
    from . import plain_data
else:  # loaded by worker.py as a top-level module
    import plain_data

__all__ = ["PRELUDE", "INT_MAX_STR_DIGITS", "TimeoutException", "guard", "run_call_based", "run_stdin_tests"]

# lcb_runner/evaluation/testing_util.py's import_string, verbatim
PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\nfrom heapq import *\n"
    "from bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\nfrom statistics import *\n"
    "from itertools import *\nfrom functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\nimport datetime\n"
    "import collections\nimport heapq\nimport bisect\nimport copy\nimport math\nimport random\nimport statistics\n"
    "import itertools\nimport functools\nimport operator\nimport io\nimport sys\nimport json\n"
    "sys.setrecursionlimit(50000)\n")
INT_MAX_STR_DIGITS = 50000  # lcb_runner's compute_code_generation_metrics: sys.set_int_max_str_digits(50000)
KILL_GRACE_S = 1.0  # the worker kills a child this long after its time limit (lcb_runner: timeout + 1 per test)
_GUARDED_OS = ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
               "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
               "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir")
_GUARDED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")


class TimeoutException(Exception):
    """Raised in the program when a test's time is up (lcb_runner's own exception name)."""


def _raise_timeout(signum, frame):
    raise TimeoutException


@contextlib.contextmanager
def _time_limit(seconds: float):
    signal.signal(signal.SIGALRM, _raise_timeout)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


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


def _error(kind: str, exc: BaseException, describe) -> dict:
    return {"error": kind, "detail": describe(exc)}


def run_call_based(request: dict, inline_limit: int, emit, describe) -> None:
    """The child of an ``lcb_call`` request (see the module doc); ``emit`` writes one report record."""
    sys.set_int_max_str_digits(INT_MAX_STR_DIGITS)
    limit, inputs = request["test_timeout_s"], plain_data.decode(request["inputs"])
    code = PRELUDE + "\n\n" + request["program"]
    try:
        with _time_limit(limit):
            module = types.ModuleType("tmp_sol", "")
            exec(code, module.__dict__)
            target = module.Solution() if "class Solution" in code else module
        method = getattr(target, request["entry_point"])
    except BaseException as exc:
        return emit(_error("program", exc, describe))
    for args in inputs:
        try:
            with _time_limit(limit):
                value = method(*args)
            if isinstance(value, tuple):  # lcb_runner: "don't penalize model if it produces tuples instead of lists"
                value = list(value)
        except BaseException as exc:
            return emit(_error("timeout" if isinstance(exc, TimeoutException) else "exception", exc, describe))
        try:
            record = plain_data.encode_output(value, inline_limit)
        except BaseException as exc:
            return emit(_error("unserialisable", exc, describe))
        emit(record)


def _run_stdin_program(request: dict, output_cap: int, emit, describe) -> None:
    """The child of one stdin test: fd 0 holds the input, fd 1 the output file (see the module doc)."""
    sys.set_int_max_str_digits(INT_MAX_STR_DIGITS)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # output past the cap: the write fails (EFBIG), the program errs
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_cap, output_cap))
    sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", newline="\n", closefd=False)
    sys.stdout = sys.__stdout__ = out = open(1, "w", encoding="utf-8", newline="\n", closefd=False)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        with _time_limit(request["test_timeout_s"]):
            try:
                exec(compile(PRELUDE + "\n" + request["program"], "<solution>", "exec"), namespace)
            except SystemExit:
                pass
            if not out.closed:  # a program may close its standard output when done, as any process may
                out.flush()
    except BaseException as exc:
        return emit(_error("timeout" if isinstance(exc, TimeoutException) else "exception", exc, describe))
    emit({"done": True})


def _memory_file(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _test_record(outcome: str, report: bytes, stdout_fd: int, output_cap: int, elapsed: float, limit: float) -> dict:
    """The host's record of one stdin test: ``{"v": output text, "t": seconds}`` or an error record."""
    if outcome == "killed":
        return {"error": "timeout", "detail": f"still running {limit + KILL_GRACE_S:.1f} s after it started"}
    try:
        status = plain_data.loads(report) if outcome == "done" and report.count(b"\n") == 1 else None
    except ValueError:
        status = None
    if status == {"done": True}:
        size = os.fstat(stdout_fd).st_size
        if size > output_cap:
            return {"error": "exception", "detail": f"wrote {size} bytes of output (the cap is {output_cap})"}
        return {"v": os.pread(stdout_fd, size, 0).decode("utf-8", errors="replace"), "t": elapsed}
    if isinstance(status, dict) and set(status) == {"error", "detail"} \
            and status["error"] in ("timeout", "exception", "sandbox"):
        return {"error": status["error"], "detail": str(status["detail"])[:300]}
    return {"error": "exception", "detail": f"the program ended without finishing ({outcome}, "
                                            f"{len(report)} report bytes): killed by a signal or exited early?"}


def run_stdin_tests(request: dict, config: dict, run_child, emit, describe) -> tuple[str, bytes]:
    """A ``stdin`` request, run by the worker: one child per test (``run_child(body, (stdin_fd, stdout_fd),
    deadline_s)`` forks, confines and collects it), stopping at the first error; returns ("done", report)."""
    lines, limit, cap = [], request["test_timeout_s"], config["output_cap"]
    for text in request["stdin"]:
        stdin_fd, stdout_fd = _memory_file("stdin", text.encode("utf-8")), _memory_file("stdout")
        try:
            start = time.perf_counter()
            outcome, report = run_child(lambda: _run_stdin_program(request, cap, emit, describe),
                                        (stdin_fd, stdout_fd), limit + KILL_GRACE_S)
            record = _test_record(outcome, report, stdout_fd, cap, time.perf_counter() - start, limit)
        finally:
            os.close(stdin_fd)
            os.close(stdout_fd)
        lines.append(plain_data.dumps(record) + "\n")
        if "error" in record:
            break
    return "done", "".join(lines).encode()
