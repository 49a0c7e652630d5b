"""Execution-based scoring of HumanEval-style completions with evalplus 0.3.1, in an isolated subprocess.

``evaluate_code`` writes the problems (evalplus HumanEval+ schema) and one greedy completion per problem
into a fresh throwaway directory inside ``work_dir`` and runs ``evalplus.evaluate.evaluate`` there in a
child process:

* ``HUMANEVAL_OVERRIDE_PATH`` points at the problems file (evalplus reads it at import time, offline);
  ``HOME``, ``XDG_CACHE_HOME`` (evalplus's ground-truth cache) and ``TMPDIR`` (per-sample temp dirs) all
  point inside the throwaway directory; the environment is otherwise reduced to a short allow-list, so
  tokens in the caller's environment are not visible to generated code.
* ``EVALPLUS_MAX_MEMORY_BYTES`` sets the address-space limit of every sample process.
  ``EVALPLUS_TIMEOUT_PER_TASK`` is removed (evalplus 0.3.1 crashes when it is set).
* The child runs inside new network, PID and mount namespaces when ``unshare`` allows it (the strongest
  working variant is probed once, see ``detect_isolation``): generated programs then have no network
  at all (not even loopback), everything they spawn dies with the child, and every file system except
  the throwaway directory (and /proc, /sys, /dev) is remounted read-only. The result reports
  ``network_isolated`` and ``filesystem_readonly``; both are False where ``unshare`` is unavailable.
* evalplus's ``reliability_guard`` is extended in the child to also null the raw ``posix`` twins of the
  calls it blocks (``posix.unlink``, ``posix.fork``...), ``posix_spawn``/``exec*`` and socket creation.
  That in-process guard is bypassable (ctypes); only the namespaces above are real barriers, and even
  they are not a full sandbox: run untrusted code in a container or VM as well.
* The child ends with ``os._exit`` so evalplus's 20 s "stucking checker" thread cannot delay it; the
  parent kills the child's whole process group after ``timeout_s`` and raises ``RuntimeError``.

pass@1 is the fraction of problems whose single sample passes. Following evalplus, "plus" means passing
the base AND the plus inputs: evalplus runs both input sets independently and reports ``plus_status``
even when the base inputs fail, so ``passed_plus = base_status == plus_status == "pass"``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from sbd_core.io_utils import write_json_atomic, write_jsonl_atomic

__all__ = ["evaluate_code", "detect_isolation", "Isolation", "REQUIRED_PROBLEM_KEYS", "MISSING_STATUS"]

REQUIRED_PROBLEM_KEYS = (
    "task_id",
    "prompt",
    "entry_point",
    "canonical_solution",
    "base_input",
    "plus_input",
    "atol",
    "contract",
)
MISSING_STATUS = "missing"  # status reported for problems that had no completion
_TASK_ID_RE = re.compile(r"^HumanEval/\d+$")
_SAMPLES_NAME = "samples.jsonl"
_RESULTS_NAME = "samples_eval_results.json"  # evalplus derives it from the samples path
_ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
_LOG_TAIL_CHARS = 4000

# Candidate wrappers, strongest first. --pid --fork --kill-child: all descendants die with the runner.
# readonly: the runner (inside its own mount namespace) remounts every file system read-only except the
# throwaway directory, /proc, /sys and /dev, so even libc calls through ctypes cannot delete files.
_ISOLATION_CANDIDATES = (
    (("unshare", "--net", "--pid", "--fork", "--kill-child", "--mount", "--map-root-user"), True),
    (("unshare", "--net", "--pid", "--fork", "--kill-child", "--mount"), True),
    (("unshare", "--net", "--pid", "--fork", "--kill-child", "--map-root-user"), False),
    (("unshare", "--net", "--pid", "--fork", "--kill-child"), False),
    (("unshare", "--net", "--map-root-user"), False),
    (("unshare", "--net"), False),
)

# Runs in the child as `python -I -B -c _RUNNER_SOURCE '<json config>'`.
_RUNNER_SOURCE = r"""
import json, os, sys, traceback

_BLOCKED_POSIX = (
    "fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve", "system", "kill", "killpg",
    "remove", "unlink", "rmdir", "rename", "replace", "truncate", "chmod", "fchmod", "lchmod",
    "chown", "fchown", "lchown", "chroot", "setuid", "setgid", "setsid", "setpgid", "symlink", "link",
)
_BLOCKED_SOCKET = ("socket", "SocketType", "socketpair", "create_connection", "create_server", "fromfd")
_LOCKED_OPTIONS = {"nosuid", "nodev", "noexec", "relatime", "noatime", "nodiratime", "strictatime"}
_WRITABLE_TREES = ("/proc", "/sys", "/dev")


def _mounts():
    # (mount point, options) from /proc/self/mountinfo; octal escapes such as \040 decoded.
    with open("/proc/self/mountinfo", "rb") as handle:
        for line in handle:
            fields = line.split()
            point = fields[4].decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
            yield point, fields[5].decode().split(",")


def _lock_down_filesystem(run_dir, host_mnt_ns):
    # Remount everything read-only except run_dir, /proc, /sys, /dev. Only in a private mount namespace.
    import subprocess
    if os.stat("/proc/self/ns/mnt").st_ino == host_mnt_ns:
        raise RuntimeError("refusing to remount: not inside a private mount namespace")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(["mount", "--bind", run_dir, run_dir], check=True)
    for point, options in list(_mounts()):
        if point == run_dir or any(point == t or point.startswith(t + "/") for t in _WRITABLE_TREES):
            continue
        keep = [o for o in options if o in _LOCKED_OPTIONS]
        done = subprocess.run(["mount", "-o", ",".join(["remount", "bind", "ro"] + keep), point],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0 and point == "/":
            raise RuntimeError("could not remount / read-only")


def _probe(config):
    # Check that the sandbox works: multiprocessing locks, run_dir writable, outside read-only.
    import multiprocessing
    multiprocessing.Lock()
    with open(os.path.join(config["run_dir"], "probe.txt"), "w") as handle:
        handle.write("ok")
    if config["host_mnt_ns"] is not None:
        try:
            with open(os.path.join(os.path.dirname(config["run_dir"]), "must_fail.txt"), "w"):
                pass
        except OSError:
            return
        raise RuntimeError("file system outside run_dir is still writable")


def _extra_guard():
    # Null raw posix/socket entry points that evalplus's reliability_guard leaves reachable.
    import posix, socket, _socket
    for name in _BLOCKED_POSIX:
        for module in (posix, os):
            if hasattr(module, name):
                setattr(module, name, None)
    for module in (socket, _socket):
        for name in _BLOCKED_SOCKET:
            if hasattr(module, name):
                setattr(module, name, None)
    try:
        import _posixsubprocess
        _posixsubprocess.fork_exec = None
    except ImportError:
        pass


def _install_guard():
    # Wrap evalplus.eval.reliability_guard (looked up at call time by unsafe_execute).
    import evalplus.eval as ev
    original = ev.reliability_guard

    def guard(maximum_memory_bytes=None):
        original(maximum_memory_bytes=maximum_memory_bytes)
        _extra_guard()

    ev.reliability_guard = guard


def main():
    config = json.loads(sys.argv[1])
    if config["host_mnt_ns"] is not None:
        _lock_down_filesystem(config["run_dir"], config["host_mnt_ns"])
    if config["mode"] == "probe":
        _probe(config)
        return
    import multiprocessing
    multiprocessing.set_start_method("fork", force=True)  # workers must inherit the patched guard
    from evalplus.evaluate import evaluate
    _install_guard()
    evaluate(dataset="humaneval", samples=config["samples"], parallel=config["parallel"])


if __name__ == "__main__":
    code = 0
    try:
        main()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
"""


@dataclass(frozen=True)
class Isolation:
    """How the runner is wrapped: the command prefix and whether the file system is made read-only."""

    prefix: tuple[str, ...] = ()
    readonly_fs: bool = False

    @property
    def network(self) -> bool:
        """True when the runner gets its own (empty) network namespace."""
        return "--net" in self.prefix

    def command(self, run_dir: Path, mode: str, **extra: Any) -> list[str]:
        """Full command line running the runner in ``mode`` ('run' or 'probe') for ``run_dir``."""
        config = {
            "mode": mode,
            "run_dir": str(run_dir),
            "host_mnt_ns": os.stat("/proc/self/ns/mnt").st_ino if self.readonly_fs else None,
            **extra,
        }
        return [*self.prefix, sys.executable, "-I", "-B", "-c", _RUNNER_SOURCE, json.dumps(config)]


def _probe_ok(isolation: Isolation) -> bool:
    """Run the runner's probe mode under ``isolation``; True if it exits cleanly."""
    probe_root = Path(tempfile.mkdtemp(prefix="code_eval_probe_")).resolve()
    run_dir = probe_root / "run"  # the probe's read-only check writes next to it, inside probe_root
    run_dir.mkdir()
    try:
        done = subprocess.run(
            isolation.command(run_dir, "probe"), cwd=run_dir, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, start_new_session=True,
        )
        return done.returncode == 0 and (run_dir / "probe.txt").is_file()
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(probe_root, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def detect_isolation() -> Isolation:
    """Strongest working sandbox wrapper on this machine (probed once per process)."""
    if shutil.which("unshare") is not None and os.path.exists("/proc/self/ns/mnt"):
        for prefix, readonly in _ISOLATION_CANDIDATES:
            candidate = Isolation(prefix, readonly)
            if _probe_ok(candidate):
                return candidate
    return Isolation()


def _evalplus_version() -> str:
    """Installed evalplus version; raise RuntimeError with an install hint when it is missing."""
    try:
        return importlib.metadata.version("evalplus")
    except importlib.metadata.PackageNotFoundError as exc:
        raise RuntimeError(
            "evalplus is not installed: pip install 'sbd-core[eval]' (evalplus==0.3.1)"
        ) from exc


def _validate_problems(problems: Sequence[Mapping[str, Any]]) -> None:
    """Check the evalplus HumanEval+ schema and unique ``HumanEval/<int>`` ids; raise ValueError."""
    if not isinstance(problems, Sequence) or isinstance(problems, (str, bytes)) or not problems:
        raise ValueError("problems must be a non-empty list of evalplus HumanEval+ records")
    seen: set[str] = set()
    for index, problem in enumerate(problems):
        if not isinstance(problem, Mapping):
            raise ValueError(f"problems[{index}] is {type(problem).__name__}, expected a dict")
        missing = [key for key in REQUIRED_PROBLEM_KEYS if key not in problem]
        if missing:
            raise ValueError(f"problems[{index}] lacks required keys {missing}")
        task_id = problem["task_id"]
        if not isinstance(task_id, str) or not _TASK_ID_RE.match(task_id):
            raise ValueError(f"problems[{index}] task_id {task_id!r} is not of the form 'HumanEval/<int>'")
        if task_id in seen:
            raise ValueError(f"duplicate task_id {task_id!r} in problems")
        seen.add(task_id)


def _validate_completions(completions: Mapping[str, str], task_ids: set[str]) -> None:
    """Completions must map known task ids to strings; raise ValueError otherwise."""
    if not isinstance(completions, Mapping):
        raise ValueError("completions must be a dict task_id -> completion text")
    unknown = sorted(set(completions) - task_ids)
    if unknown:
        raise ValueError(f"completions for task ids not in problems: {unknown[:5]}")
    for task_id, text in completions.items():
        if not isinstance(text, str):
            raise ValueError(f"completion for {task_id!r} is {type(text).__name__}, expected str")


def _validate_limits(parallel: int, max_memory_bytes: int, timeout_s: float) -> None:
    """Reject non-positive worker counts, memory limits and timeouts."""
    if not isinstance(parallel, int) or parallel < 1:
        raise ValueError(f"parallel must be an int >= 1, got {parallel!r}")
    if not isinstance(max_memory_bytes, int) or max_memory_bytes <= 0:
        raise ValueError(f"max_memory_bytes must be a positive int, got {max_memory_bytes!r}")
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")


def _prepare_run_dir(run_dir: Path, problems, completions) -> dict[str, Path]:
    """Write the problems/samples files and the HOME/cache/tmp dirs; return the paths."""
    paths = {
        "problems": run_dir / "humaneval_override.jsonl",
        "samples": run_dir / _SAMPLES_NAME,
        "results": run_dir / _RESULTS_NAME,
        "log": run_dir / "evalplus.log",
        "home": run_dir / "home",
        "cache": run_dir / "cache",
        "tmp": run_dir / "tmp",
    }
    for key in ("home", "cache", "tmp"):
        paths[key].mkdir()
    write_jsonl_atomic([dict(problem) for problem in problems], paths["problems"])
    samples = [
        {"task_id": p["task_id"], "completion": completions.get(p["task_id"], "")} for p in problems
    ]
    write_jsonl_atomic(samples, paths["samples"])
    paths["results"].unlink(missing_ok=True)  # evalplus would silently reuse a stale results file
    return paths


def _runner_env(paths: Mapping[str, Path], max_memory_bytes: int) -> dict[str, str]:
    """Minimal environment for the runner: allow-listed variables plus the evalplus settings."""
    env = {key: os.environ[key] for key in _ENV_ALLOW if key in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(
        HOME=str(paths["home"]),
        XDG_CACHE_HOME=str(paths["cache"]),
        TMPDIR=str(paths["tmp"]),
        HUMANEVAL_OVERRIDE_PATH=str(paths["problems"]),
        EVALPLUS_MAX_MEMORY_BYTES=str(max_memory_bytes),
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def _log_tail(log_path: Path) -> str:
    """Last few thousand characters of the runner log (empty string if unreadable)."""
    try:
        return log_path.read_text(encoding="utf-8", errors="replace")[-_LOG_TAIL_CHARS:]
    except OSError:
        return ""


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the child's process group (it is a session leader) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _run_runner(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path, timeout_s: float) -> None:
    """Run the evalplus runner; kill its group and raise RuntimeError on timeout or failure."""
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise RuntimeError(
                f"evalplus evaluation did not finish within timeout_s={timeout_s} s and was killed; "
                f"no results were written. Log tail:\n{_log_tail(log_path)}"
            ) from None
        except BaseException:
            _kill_group(proc)
            raise
        _kill_group(proc)  # the runner exited; remove anything it left behind in its group
    if returncode != 0:
        raise RuntimeError(
            f"evalplus runner exited with status {returncode}. Log tail:\n{_log_tail(log_path)}"
        )


def _read_statuses(results_path: Path, task_ids: list[str], log_path: Path) -> dict[str, tuple[str, str]]:
    """Parse evalplus's results json into task_id -> (base_status, plus_status)."""
    if not results_path.is_file():
        raise RuntimeError(f"evalplus wrote no results file. Log tail:\n{_log_tail(log_path)}")
    with results_path.open(encoding="utf-8") as handle:
        evals = json.load(handle).get("eval", {})
    statuses = {}
    for task_id in task_ids:
        records = evals.get(task_id) or []
        if len(records) != 1:
            raise RuntimeError(f"evalplus results hold {len(records)} samples for {task_id}, expected 1")
        statuses[task_id] = (str(records[0]["base_status"]), str(records[0]["plus_status"]))
    return statuses


def _summarise(task_ids, statuses, completions, isolation: Isolation, version: str) -> dict:
    """Build the result dict; problems without a completion are failures with status 'missing'."""
    per_problem = {}
    for task_id in task_ids:
        base, plus = statuses[task_id]
        if task_id not in completions:
            base = plus = MISSING_STATUS
        passed_base = base == "pass"
        per_problem[task_id] = {
            "base_status": base,
            "plus_status": plus,
            "passed_base": passed_base,
            "passed_plus": passed_base and plus == "pass",
        }
    n = len(task_ids)
    return {
        "pass@1_base": sum(r["passed_base"] for r in per_problem.values()) / n,
        "pass@1_plus": sum(r["passed_plus"] for r in per_problem.values()) / n,
        "n": n,
        "per_problem": per_problem,
        "network_isolated": isolation.network,
        "filesystem_readonly": isolation.readonly_fs,
        "evalplus_version": version,
    }


def evaluate_code(
    problems: list[dict],
    completions: dict[str, str],
    work_dir: Path,
    parallel: int = 2,
    max_memory_bytes: int = 1 << 30,
    timeout_s: float = 300,
    *,
    output_path: Path | None = None,
) -> dict:
    """Score one completion per problem with evalplus (base and plus inputs) in an isolated subprocess.

    Args:
        problems: evalplus HumanEval+ records (see ``REQUIRED_PROBLEM_KEYS``; ids ``HumanEval/<int>``).
        completions: task_id -> text appended to the prompt. Missing ids are scored as failures.
        work_dir: a throwaway directory is created (and removed afterwards) inside it.
        parallel: evalplus worker processes.
        max_memory_bytes: address-space limit of each sample process.
        timeout_s: wall-clock limit of the whole evaluation; exceeding it raises RuntimeError.
        output_path: if given, the result is also written there atomically (only on success).

    Returns:
        ``{"pass@1_base", "pass@1_plus", "n", "per_problem", "network_isolated", "filesystem_readonly",
        "evalplus_version"}``; ``per_problem[task_id]`` holds ``base_status``, ``plus_status`` (evalplus's
        "pass"/"fail"/"timeout", or "missing" without a completion), ``passed_base``, ``passed_plus``.
    """
    _validate_problems(problems)
    task_ids = [p["task_id"] for p in problems]
    _validate_completions(completions, set(task_ids))
    _validate_limits(parallel, max_memory_bytes, timeout_s)
    version = _evalplus_version()
    isolation = detect_isolation()

    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="code_eval_", dir=work_dir)).resolve()
    try:
        paths = _prepare_run_dir(run_dir, problems, completions)
        cmd = isolation.command(run_dir, "run", samples=str(paths["samples"]), parallel=parallel)
        _run_runner(cmd, run_dir, _runner_env(paths, max_memory_bytes), paths["log"], timeout_s)
        statuses = _read_statuses(paths["results"], task_ids, paths["log"])
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)

    result = _summarise(task_ids, statuses, completions, isolation, version)
    if output_path is not None:
        write_json_atomic(result, output_path)
    return result
