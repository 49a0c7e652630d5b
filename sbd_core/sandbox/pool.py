"""Host side of the sandbox: find the strongest isolation, run a pool of sandboxed workers, parse their reports.

Each worker (``worker.py``) is one sandbox: a process started under ``unshare`` in new user, mount, PID, network,
IPC and UTS namespaces, inside the minimal read-only tree that ``jail.py`` builds (no network, no writable host
path, private /dev/shm, only its own processes visible, no capabilities) and serving many runs one after the other,
each in a forked child. ``run_requests`` feeds a queue of runs to ``parallel`` such workers; when a worker dies
(it never should: it is PID 1 of its namespace, which ignores signals from inside), the run in flight is reported
as "crashed" and a fresh worker takes the next one. Killing a worker kills its whole namespace.

Without a working ``unshare`` (no user namespaces, e.g. in some containers) workers run unjailed, with only the
in-process guard and the seccomp filter: ``Isolation.jailed`` is then False, and the scorer says so.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from . import jail
from .oracle import RunReport
from .plain_data import decode_output, loads

__all__ = ["Isolation", "detect_isolation", "SandboxSettings", "run_requests", "parse_report"]

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
_NAMESPACES = ("--mount", "--pid", "--fork", "--kill-child", "--net", "--ipc", "--uts")
_CANDIDATE_PREFIXES = (("--user", "--map-root-user") + _NAMESPACES, _NAMESPACES)  # the second one needs root
_ENV_ALLOW = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")
_LOG_TAIL_CHARS = 4000
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Isolation:
    """How workers are wrapped: the ``unshare`` command prefix, empty when they run unjailed."""

    prefix: tuple[str, ...] = ()

    @property
    def jailed(self) -> bool:
        return bool(self.prefix)


@dataclass(frozen=True)
class SandboxSettings:
    """Per-evaluation worker settings.

    ``run_dir``: the throwaway host directory (the jail's mount point is inside); ``scratch_bytes``: size of the
    jail's tmpfs for $HOME and $TMPDIR; ``inline_limit``: outputs larger than this (exact serialisation) travel
    as digests (``plain_data``); ``output_cap``: a run reporting more bytes fails ("too_large")."""

    run_dir: Path
    isolation: Isolation
    scratch_bytes: int = 256 << 20
    inline_limit: int = 1 << 20
    output_cap: int = 256 << 20

    def worker_config(self) -> dict:
        return {"jail": self.isolation.jailed, "root": str(self.run_dir / "root"), "scratch_bytes": self.scratch_bytes,
                "inline_limit": self.inline_limit, "output_cap": self.output_cap}

    def worker_env(self, slot: int) -> dict[str, str]:
        """A fresh environment: nothing of the caller's besides locale settings; $HOME and $TMPDIR of its own
        (in the jail's scratch tmpfs, or, unjailed, in ``run_dir/scratch-<slot>``: workers wipe them after runs)."""
        env = {key: os.environ[key] for key in _ENV_ALLOW if key in os.environ}
        if self.isolation.jailed:
            home, tmp = jail.JAIL_HOME, jail.JAIL_TMP
        else:
            home, tmp = (self.run_dir / f"scratch-{slot}" / name for name in ("home", "tmp"))
            for folder in (home, tmp):
                folder.mkdir(parents=True, exist_ok=True)
        env.update(PATH="/usr/bin:/bin", HOME=str(home), TMPDIR=str(tmp), PYTHONHASHSEED="0",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
        return env

    def prepare(self) -> None:
        """Create the jail's mount point (an empty directory) in ``run_dir``."""
        (self.run_dir / "root").mkdir(mode=0o755, exist_ok=True)


class WorkerDied(RuntimeError):
    """The worker process ended or broke the protocol."""


class _Worker:
    """One sandboxed worker process and its request/response protocol (see ``worker.py``)."""

    def __init__(self, settings: SandboxSettings, slot: int) -> None:
        """Start the worker process for pool slot ``slot``; ``wait_ready`` completes the start."""
        cmd = [*settings.isolation.prefix, sys.executable, "-s", "-B", str(WORKER_SCRIPT),
               json.dumps(settings.worker_config())]
        self.log_path, self.jailed = settings.run_dir / f"worker-{slot}.log", settings.isolation.jailed
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         env=settings.worker_env(slot), cwd=settings.run_dir, start_new_session=True)

    def wait_ready(self) -> None:
        """Read the ready line; raise RuntimeError unless every self-check of a jailed worker passed."""
        ready = self._read_json()
        failed = [name for name, ok in ready.get("checks", {}).items() if not ok]
        if ready.get("ready") is not True or failed or (self.jailed and not ready.get("checks")):
            self.kill()
            raise RuntimeError(f"sandbox worker failed its self-checks {failed}: {ready}")

    def _read_json(self) -> dict:
        line = self.proc.stdout.readline()
        try:
            return json.loads(line)
        except ValueError:
            self.kill()
            raise WorkerDied(f"sandbox worker exited (status {self.proc.poll()}). Log tail:\n{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-_LOG_TAIL_CHARS:]
        except OSError:
            return ""

    def run(self, request: dict) -> tuple[str, bytes]:
        """Send one run, return (outcome, report bytes); raise WorkerDied if the worker is gone."""
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied("sandbox worker closed its input") from exc
        header = self._read_json()
        report = self.proc.stdout.read(header["nbytes"])
        if header.get("id") != request["id"] or len(report) != header["nbytes"]:
            raise WorkerDied(f"sandbox worker broke the protocol: {header}")
        return header["outcome"], report

    def kill(self) -> None:
        """Kill the worker's process group (``unshare --kill-child`` takes its namespace down with it).

        Safe from another thread: a read blocked on the worker then sees the end of its output."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def close(self) -> None:
        """Kill the worker and close its pipes (only from the thread that talks to it)."""
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class _Pending:
    """The requests still to run, handed out one at a time to the pool threads (built lazily if an iterator)."""

    def __init__(self, requests: Iterable[dict]) -> None:
        self._requests, self._lock = iter(requests), threading.Lock()

    def take(self) -> dict | None:
        with self._lock:
            return next(self._requests, None)


def _serve(pending: _Pending, results: dict, settings: SandboxSettings, slot: int, live: set,
           stop: threading.Event, handle) -> None:
    """One pool thread: run requests on its worker until none are left; replace a dead worker."""
    worker = None
    try:
        while not stop.is_set():
            request = pending.take()
            if request is None:
                return
            if worker is None:
                worker = _Worker(settings, slot)
                live.add(worker)
                if stop.is_set():  # the pool was stopped while this worker started: it may have missed the kill
                    return
                worker.wait_ready()
            try:
                outcome, report = worker.run(request)
            except WorkerDied:
                outcome, report = "crashed", b""
                live.discard(worker)
                worker.close()
                worker = None
            results[request["id"]] = (outcome, report) if handle is None else handle(request, outcome, report)
    finally:
        if worker is not None:
            live.discard(worker)
            worker.close()


def run_requests(requests: Iterable[dict], settings: SandboxSettings, parallel: int, timeout_s: float,
                 handle: Callable[[dict, str, bytes], Any] | None = None) -> dict[int, Any]:
    """Run every request (each with a unique ``id``) on ``parallel`` sandboxed workers; id -> (outcome, report), or
    id -> ``handle(request, outcome, report)`` (called in a pool thread as each run ends, so the reports need not
    all be kept). ``requests`` may be a generator: each request is built when a worker is free for it.

    Raises RuntimeError (and kills every worker) if the whole batch is not done within ``timeout_s``."""
    pending = _Pending(requests)
    results: dict[int, Any] = {}
    live: set = set()
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = [pool.submit(_serve, pending, results, settings, slot, live, stop, handle)
                   for slot in range(parallel)]
        done, not_done = wait(futures, timeout=timeout_s, return_when=FIRST_EXCEPTION)
        failure = next((future.exception() for future in done if future.exception() is not None), None)
        if not_done or failure is not None:
            stop.set()
            for worker in list(live):
                worker.kill()
    if failure is not None:
        raise failure  # e.g. a worker that could not start
    if not_done:
        raise RuntimeError(f"code evaluation did not finish within timeout_s (this phase had {timeout_s:.1f} s "
                           f"left); its workers were killed and no result was written")
    return results


def parse_report(outcome: str, report: bytes, n_inputs: int) -> RunReport:
    """Decode a child's JSON-lines report strictly; anything unexpected ends it with error "malformed"."""
    parsed = RunReport(outcome)
    for line in report.splitlines():
        try:
            record = loads(line)
            if set(record) == {"error", "detail"}:
                parsed.error, parsed.detail = str(record["error"]), str(record["detail"])
                break
            if len(parsed.outputs) == n_inputs:
                raise ValueError("more outputs than inputs")
            elapsed = record.pop("t", 0.0)
            parsed.outputs.append(decode_output(record))
            parsed.times.append(float(elapsed))
        except Exception as exc:  # noqa: BLE001 - untrusted bytes: any defect is the program's failure
            parsed.error, parsed.detail = "malformed", f"{type(exc).__name__}: {exc}"[:300]
            break
    return parsed


def _probe(isolation: Isolation) -> bool:
    """Start one jailed worker with ``isolation`` in a scratch directory; True if it passes its self-checks."""
    run_dir = Path(tempfile.mkdtemp(prefix="code_eval_probe_")).resolve()
    try:
        settings = SandboxSettings(run_dir, isolation)
        settings.prepare()
        worker = _Worker(settings, slot=0)
        watchdog = threading.Timer(PROBE_TIMEOUT_S, worker.kill)
        watchdog.start()
        try:
            worker.wait_ready()
        finally:
            watchdog.cancel()
            worker.close()
        return True
    except (OSError, RuntimeError, ValueError):
        return False
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def detect_isolation() -> Isolation:
    """The strongest working sandbox on this machine (probed once per process); unjailed if none works."""
    unshare = shutil.which("unshare")
    if unshare is not None and sys.platform == "linux":
        for flags in _CANDIDATE_PREFIXES:
            candidate = Isolation((unshare, *flags))
            if _probe(candidate):
                return candidate
    return Isolation()
