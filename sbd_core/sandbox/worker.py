"""Sandbox worker: runs one program on a list of inputs per request, each in a fresh forked child.

Started by ``pool.py`` as ``python -s -B worker.py '<json config>'`` (inside the namespaces when jailed; see
``jail.py``). It imports what children need, enters the jail, prints one *ready* line (JSON, with the results of
its self-checks) and then serves requests from stdin, one at a time:

request (one JSON line)::

    {"id", "program", "entry_point", "inputs": plain_data-encoded list of argument lists,
     "time_limits": per-input seconds or null, "deadline_s", "memory_bytes": int or null,
     "output_mode": "plain" | "is_not_none" | "bool_or_not_none", "record_time": bool,
     "guard": "evalplus" | "lcb" | null, "kind": "function" (the default) | "lcb_call" | "stdin"}

``kind`` "lcb_call" and "stdin" are LiveCodeBench's call-based and stdin programs (``lcb_child.py``; both add
``test_timeout_s``, "stdin" replaces ``inputs`` with ``stdin``, a list of input texts); their child is also killed
when one test takes longer than its limit + 1 s (the first test: twice its limit + 1 s, loading included).

response: a header line ``{"id", "outcome", "nbytes"}`` followed by ``nbytes`` bytes of the child's report, where
``outcome`` is ``done`` (the child closed its pipe), ``killed`` (``deadline_s`` passed) or ``too_large`` (the
report exceeded ``output_cap`` bytes). The report is JSON lines written by the child: one per input, in order, an
``encode_output`` record (plus ``"t"``: seconds, when ``record_time``), or an error record ``{"error": "sandbox" |
"program" | "exception" | "timeout" | "unserialisable", "detail"}`` after which the child stops (evalplus's fast
check; "sandbox": the child could not be confined, before the program ran).

The "function" child mirrors ``evalplus.eval.unsafe_execute``: evalplus's ``reliability_guard`` (memory limit,
disabled destructive calls) when ``guard`` is "evalplus" (lcb_runner's when "lcb"), ``exec`` of the program and every
call under evalplus's ``swallow_io``, each call under evalplus's ``time_limit`` (SIGALRM) when time limits are given;
with ``record_time`` each call gets a deep copy of its arguments and is timed (as ``evalplus.gen.util.trusted_exec``
does for the ground truth). The child never sees expected outputs: it only reports what the program returned. After every run the worker kills every other
process of the sandbox (it is process 1 of its PID namespace) and empties the scratch directories.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import gc
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jail  # noqa: E402  (sibling modules, loaded before the jail hides the host file system)
import lcb_child  # noqa: E402
import plain_data  # noqa: E402
from evalplus.eval.utils import TimeoutException, reliability_guard, swallow_io, time_limit  # noqa: E402

_BLOCKED_POSIX = ("fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "system", "kill", "killpg",
                  "remove", "unlink", "rmdir", "rename", "replace", "truncate", "chmod", "chown", "symlink", "link")
_BLOCKED_SOCKET = ("socket", "SocketType", "socketpair", "create_connection", "create_server", "fromfd")
PR_SET_DUMPABLE = 4
CHILD_REPORT_FD = 3
# a child's files (tmpfs, or the host's disk without the jail) and descriptors: with memfd and System V memory refused
# (jail.forbid_new_processes) and the jail's tmpfs mounts size-limited, these bound what a program holds outside its
# address space (pipes and sockets: a bounded number of bounded buffers)
FILE_SIZE_LIMIT = 64 << 20
OPEN_FILES_LIMIT = 256
_exit = os._exit  # the child exits through this even if the program replaced os._exit


def _extra_guard() -> None:
    """Null the raw ``posix``/``socket`` twins of what evalplus's guard blocks (defence in depth only)."""
    import _socket
    import posix

    for module, names in ((posix, _BLOCKED_POSIX), (os, _BLOCKED_POSIX), (socket, _BLOCKED_SOCKET),
                          (_socket, _BLOCKED_SOCKET)):
        for name in names:
            if hasattr(module, name):
                setattr(module, name, None)
    import _posixsubprocess

    _posixsubprocess.fork_exec = None


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:300]
    except BaseException:
        return type(exc).__name__


def _reduce(value, mode: str):
    """evalplus's output rules for MBPP's 'output not None' tasks (trusted_exec / unsafe_execute)."""
    if mode == "is_not_none":
        return value is not None
    if mode == "bool_or_not_none":
        return value if isinstance(value, bool) else value is not None
    return value


def _emit(record: dict, write=os.write) -> None:
    """Write one report line to the child's report descriptor (``write`` bound before any program runs)."""
    data = (plain_data.dumps(record) + "\n").encode()
    while data:
        data = data[write(CHILD_REPORT_FD, data):]


def _run_inputs(request: dict, inline_limit: int) -> None:
    """The child's work: exec the program, call it on every input, report each result (see module doc)."""
    inputs = plain_data.decode(request["inputs"])
    limits, timing = request["time_limits"], request["record_time"]
    namespace: dict = {}
    try:
        with swallow_io():
            exec(request["program"], namespace)
            function = namespace[request["entry_point"]]
    except BaseException as exc:
        return _emit({"error": "program", "detail": _describe(exc)})
    for index, args in enumerate(inputs):
        try:
            args = copy.deepcopy(args) if timing else args
            start = time.perf_counter()
            with time_limit(limits[index]) if limits else contextlib.nullcontext():
                with swallow_io():
                    value = function(*args)
            elapsed = time.perf_counter() - start
        except BaseException as exc:
            kind = "timeout" if isinstance(exc, TimeoutException) else "exception"
            return _emit({"error": kind, "detail": _describe(exc)})
        try:
            record = plain_data.encode_output(_reduce(value, request["output_mode"]), inline_limit)
        except BaseException as exc:
            return _emit({"error": "unserialisable", "detail": _describe(exc)})
        _emit({**record, "t": elapsed} if timing else record)


def _confine(request: dict) -> None:
    """The child's own directory, no new processes (nor memory outside its address space: ``jail``), bounded files
    and descriptors, then the memory limit and the request's guard."""
    os.chdir(tempfile.mkdtemp())
    jail.forbid_new_processes()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the file-size limit fails (EFBIG) instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES_LIMIT, OPEN_FILES_LIMIT))
    memory, guard = request["memory_bytes"], request["guard"]
    if guard == "evalplus":
        reliability_guard(maximum_memory_bytes=memory)
    elif memory is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if guard == "lcb":
        lcb_child.guard()
    if guard:
        _extra_guard()


def _child(request: dict, report_fd: int, body, args: tuple) -> None:
    """Forked child: private descriptors (standard input and output on /dev/null), ``_confine``, then
    ``body(*args)`` (called directly: the program's calls start few frames deep, as in lcb_runner); never returns."""
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDWR)
        for fd, source in ((0, null), (1, null), (2, null), (CHILD_REPORT_FD, report_fd)):
            os.dup2(source, fd)
        os.closerange(CHILD_REPORT_FD + 1, 1 << 16)
        try:
            _confine(request)
        except BaseException as exc:  # a sandbox defect, not the program's: say so (a reference run then raises)
            _emit({"error": "sandbox", "detail": _describe(exc)})
            return
        body(*args)
    finally:
        _exit(0)


def _collect(read_fd: int, deadline_s: float, cap: int, per_line_s: tuple[float, float] | None = None
             ) -> tuple[str, bytes]:
    """Read the child's report until EOF, the deadline or the size cap. ``per_line_s`` (first, next): the child is
    also killed when its first report line takes longer than ``first`` seconds, or a later one longer than ``next``
    after the line before (one line per test)."""
    start = time.monotonic()
    chunks, total, end = [], 0, start + deadline_s
    line_end = start + per_line_s[0] if per_line_s else end
    outcome = "done"
    while True:
        remaining = min(end, line_end) - time.monotonic()
        if remaining <= 0 or not select.select([read_fd], [], [], remaining)[0]:
            outcome = "killed"
            break
        data = os.read(read_fd, 1 << 20)
        if not data:
            break
        total += len(data)
        if total > cap:
            outcome = "too_large"
            break
        chunks.append(data)
        if per_line_s and b"\n" in data:
            line_end = time.monotonic() + per_line_s[1]
    os.close(read_fd)
    return outcome, b"".join(chunks) if outcome != "too_large" else b""


def _kill_leftovers(child: int) -> None:
    """Kill everything the run started and reap it; as PID 1 of the sandbox that is every other process."""
    as_init = os.getpid() == 1
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL) if as_init else os.killpg(child, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        while True:
            os.waitpid(-1 if as_init else child, 0)
            if not as_init:
                break


def _wipe_scratch() -> None:
    """Empty $HOME, $TMPDIR (and the jail's /dev/shm) so no run sees files of the previous one."""
    jailed = os.getpid() == 1
    for directory in (os.environ["HOME"], os.environ["TMPDIR"]) + (("/dev/shm",) if jailed else ()):
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o1777)  # a run may have locked it (same user: no capability needed)
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)


def _run_child(request: dict, config: dict, body, args: tuple, per_line_s: tuple[float, float] | None
               ) -> tuple[str, bytes]:
    """Fork a child that runs ``body(*args)`` (see ``_child``), collect its report until the request's
    ``deadline_s`` (and ``per_line_s``, see ``_collect``), kill whatever it left; return (outcome, report bytes)."""
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_fd)
        _child(request, write_fd, body, args)
    os.close(write_fd)
    with contextlib.suppress(OSError):
        os.setpgid(child, child)
    outcome, report = _collect(read_fd, request["deadline_s"], config["output_cap"], per_line_s)
    _kill_leftovers(child)
    return outcome, report


def run_request(request: dict, config: dict) -> tuple[str, bytes]:
    """Run ``request`` in a forked child, clean up; return (outcome, report bytes)."""
    kind, inline_limit = request.get("kind", "function"), config["inline_limit"]
    if kind == "stdin":
        body, args = lcb_child.run_stdin_tests, (request, _emit, _describe)
    elif kind == "lcb_call":
        body, args = lcb_child.run_call_based, (request, inline_limit, _emit, _describe)
    else:
        body, args = _run_inputs, (request, inline_limit)
    per_line_s = lcb_child.per_test_deadlines(request) if kind in ("stdin", "lcb_call") else None
    result = _run_child(request, config, body, args, per_line_s)
    _wipe_scratch()
    return result


def self_checks() -> dict[str, bool]:
    """What the parent verifies before trusting a jailed worker (each True when the property holds)."""
    def fails(action) -> bool:
        try:
            action()
        except OSError:
            return True
        return False

    def write_file(path):
        with open(path, "w") as handle:
            handle.write("x")

    with open("/dev/null", "w") as handle:
        handle.write("x")
    return {
        "capabilities_dropped": not any(jail.capabilities().values()),
        "root_read_only": fails(lambda: write_file("/probe")),
        "dev_read_only": fails(lambda: write_file("/dev/probe")),
        "usr_read_only": fails(lambda: write_file(sys.base_prefix + "/probe")),
        "dev_shm_private": os.listdir("/dev/shm") == [],
        "no_network": [name for _, name in socket.if_nameindex()] == ["lo"],
        "only_own_processes": [p for p in os.listdir("/proc") if p.isdigit()] == ["1"],
        "cannot_remount": fails(lambda: jail._mount(None, "/", None, jail.MS_REMOUNT | jail.MS_BIND)),
    }


def main() -> None:
    config = json.loads(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    checks = {}
    if config["jail"]:
        jail.enter_jail(config["root"], config["scratch_bytes"])
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        checks = self_checks()
    gc.freeze()  # keep the objects made so far out of the children's garbage collections (fewer page copies)
    out = sys.stdout.buffer
    out.write((json.dumps({"ready": True, "pid": os.getpid(), "checks": checks}) + "\n").encode())
    out.flush()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        outcome, report = run_request(request, config)
        out.write((json.dumps({"id": request["id"], "outcome": outcome, "nbytes": len(report)}) + "\n").encode())
        out.write(report)
        out.flush()


if __name__ == "__main__":
    main()
