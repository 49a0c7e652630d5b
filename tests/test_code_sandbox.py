"""Hostile samples against evaluate_code: exploits of evalplus's in-process judging, and escape attempts.

ONE evaluation (module fixture) scores every hostile sample next to a correct control; the tests then check the
verdicts and the host: sentinel files intact, nothing created in /dev/shm, /dev, /tmp or $HOME, no connection
received, no process left. Exploits that only fail because the sandbox hides things are checked only where the
machine provides the sandbox (``network_isolated``/``filesystem_readonly``), and shown to work without it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid
from pathlib import Path

import pytest

pytest.importorskip("evalplus")

from sbd_core.sandbox.pool import detect_isolation  # noqa: E402
from sbd_core.sandbox.scorer import evaluate_code  # noqa: E402

MARKER = f"sbdtest{uuid.uuid4().hex[:10]}"
SALT = uuid.uuid4().hex


def inc_problem(num: int) -> dict:
    """``inc(x) = x + 1``: the target of most hostile samples (they return x + 1 only if their attack worked)."""
    return {"task_id": f"HumanEval/{num}", "prompt": "def inc(x):\n", "entry_point": "inc",
            "canonical_solution": "    return x + 1\n", "base_input": [[1], [2]], "plus_input": [[10]], "atol": 0,
            "contract": ""}


def secret_problem(num: int) -> dict:
    """Expected outputs nobody can compute without the salt, which only the reference solution knows."""
    canonical = ("    import hashlib\n"
                 f"    return 'SECRET-' + hashlib.sha256(b'{SALT}' + str(x).encode()).hexdigest()[:16]\n")
    return {**inc_problem(num), "prompt": "def secret(x):\n", "entry_point": "secret",
            "canonical_solution": canonical, "base_input": [[3]], "plus_input": [[4]]}


def area_problem(num: int) -> dict:
    return {**inc_problem(num), "prompt": "def area(r):\n", "entry_point": "area",
            "canonical_solution": "    return 3.14159 * r * r\n", "base_input": [[1.0], [2.0]],
            "plus_input": [[3.5]], "atol": 1e-6}


def expected_secret(x: int) -> str:
    import hashlib

    return "SECRET-" + hashlib.sha256(SALT.encode() + str(x).encode()).hexdigest()[:16]


# -- exploits of evalplus's in-process comparison, adapted to a scorer that compares outside ---------------------
RIGGED_EQ = """\
    class AlwaysEqual:
        def __eq__(self, other):
            return True
        __hash__ = object.__hash__
    class RiggedInt(int):
        def __eq__(self, other):
            return True
        __hash__ = int.__hash__
    return AlwaysEqual() if x % 2 else RiggedInt(-1)
"""
PATCHED_CHECKS = """\
    import builtins, numpy, evalplus.eval
    evalplus.eval.is_floats = lambda value: True
    numpy.allclose = lambda *args, **kwargs: True
    numpy.isclose = lambda *args, **kwargs: True
    builtins.type = lambda *args: float
    return 0.0
"""
FORGED_REPORT = """\
    import os, sys, json
    line = (json.dumps({"v": 0}) + "\\n").encode()
    for fd in range(1, 64):  # every descriptor this process might share with its judge
        for payload in (line * 8, b'{"id": 0, "outcome": "done", "nbytes": 8}\\n' + line):
            try:
                os.write(fd, payload)
            except Exception:
                pass
    frame = sys._getframe()
    while frame is not None:  # evalplus kept its pass/fail flags in the caller's frame
        for name, value in list(frame.f_locals.items()):
            if hasattr(value, "value"):
                try:
                    value.value = 0
                except Exception:
                    pass
        frame = frame.f_back
    os._exit(0)
"""
READ_EXPECTED = """\
    import gc, io, json, os, re, sys
    pattern = re.compile("SECR" + "ET-[0-9a-f]{{16}}")
    found = []
    def scan(text):
        found.extend(pattern.findall(text))
    for path in {files!r}:  # where the test keeps the expected outputs on the host
        try:
            return json.loads(io.open(path).read())[str(x)]
        except Exception:
            pass
    try:
        return json.loads(os.environ["{env}"])[str(x)]
    except Exception:
        pass
    for pid in os.listdir("/proc"):
        for name in ("environ", "cmdline"):
            try:
                scan(io.open(f"/proc/{{pid}}/{{name}}", "rb").read().decode("latin-1"))
            except Exception:
                pass
    frame = sys._getframe()
    while frame is not None:
        scan(repr(frame.f_locals))
        frame = frame.f_back
    for obj in gc.get_objects():
        try:
            items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
            scan(" ".join(item for item in items if isinstance(item, str)))
        except Exception:
            pass
    return found[0] if found else None
"""
KILL_THE_JUDGE = """\
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in (1, -1, os.getppid()):  # the worker, and every process it may signal
        for sig in (9, 15, 2):
            libc.kill(pid, sig)
    return x + 1
"""
# -- containment ----------------------------------------------------------------------------------------------
INFINITE_LOOP = "    while True:\n        pass\n"
PROCESSES = """\
    import ctypes, os, subprocess
    libc = ctypes.CDLL(None, use_errno=True)
    started = 0
    for attempt in (lambda: os.fork(), lambda: libc.fork(), lambda: subprocess.Popen(["sleep", "30"]).pid,
                    lambda: os.posix_spawn("/bin/sleep", ["sleep", "30"], {{}})):
        try:
            pid = attempt()
        except Exception:
            continue
        if pid == 0:  # a child: name itself for the leftover check and wait to be found
            libc.prctl(15, b"{marker}", 0, 0, 0)
            while True:
                pass
        started += pid > 0
    return x + 1 if started else -1
"""
DELETE = """\
    import ctypes, os, pathlib, shutil
    libc = ctypes.CDLL(None, use_errno=True)
    deleted = 0
    for attempt in (lambda: os.remove({file!r}), lambda: pathlib.Path({file!r}).unlink(),
                    lambda: shutil.rmtree({dir!r}), lambda: libc.unlink({file!r}.encode()) == 0 or 1 / 0,
                    lambda: libc.unlink({inner!r}.encode()) == 0 or 1 / 0,
                    lambda: libc.rmdir({dir!r}.encode()) == 0 or 1 / 0):
        try:
            attempt()
            deleted += 1
        except Exception:
            pass
    return x + 1 if deleted else -1
"""
WRITE_HOST = """\
    import ctypes, io, os
    libc = ctypes.CDLL(None, use_errno=True)
    written = 0
    for path in {paths!r}:
        try:
            io.open(path, "w").write("escaped")
            written += 1
        except Exception:
            pass
        if libc.open(path.encode(), 0o101, 0o644) >= 0:  # O_WRONLY | O_CREAT
            written += 1
    return x + 1 if written else -1
"""
WRITE_PRIVATE = """\
    import ctypes, io, os
    libc = ctypes.CDLL(None, use_errno=True)
    for path in ("/dev/shm/{marker}", os.path.join(os.environ["HOME"], "{marker}"),
                 os.path.join(os.environ["TMPDIR"], "{marker}")):
        try:
            io.open(path, "w").write("mine")
        except Exception:
            pass
    libc.mq_open(b"/{marker}", 0o102, 0o600, None)  # O_RDWR | O_CREAT: a POSIX message queue
    return x + 1
"""
UNBOUNDED_ALLOC = """\
    chunks = []
    while len(chunks) < 128:  # 4 GiB cap so a broken limit cannot take the machine down
        chunks.append(bytes(32 << 20))  # calloc: address space without touching pages
    return x + 1
"""
MEMORY_PROBE = """\
    chunks = []
    try:
        while len(chunks) < 128:
            chunks.append(bytes(32 << 20))  # calloc: address space without touching pages
    except MemoryError:
        return x + 1 if len(chunks) * (32 << 20) < (2 << 30) else -1  # stopped well below 2 GiB
    return -1
"""
# memory outside the address space: 16 anonymous files (memfd) or /dev/shm files of 8 MiB, 128 MiB at most, so a
# broken bound cannot harm the machine; each returns x + 1 only if it held it all (the attack worked)
FILL_MEMFD = """\
    import os
    held = []
    for _ in range(16):
        held.append(os.memfd_create("fill"))
        for _ in range(8):
            os.write(held[-1], bytes(1 << 20))
    return x + 1
"""
FILL_SHM = """\
    import io
    for n in range(16):
        with io.open(f"/dev/shm/{marker}-{{n}}", "wb") as handle:
            for _ in range(8):
                handle.write(bytes(1 << 20))
    return x + 1
"""
# ... and x + 1 only if it was stopped as it should be: memfd_create and shmget refused (EPERM), /dev/shm full (ENOSPC)
# at its 16 MiB
MEMFD_PROBE = """\
    import ctypes, errno, os
    try:
        os.memfd_create("probe")
        return -1
    except PermissionError:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    refused = libc.syscall(319 if os.uname().machine == "x86_64" else 279, b"probe", 0) == -1  # raw memfd_create
    refused &= ctypes.get_errno() == errno.EPERM
    refused &= libc.shmget(0, 64 << 20, 0o1600) == -1 and ctypes.get_errno() == errno.EPERM  # IPC_PRIVATE, IPC_CREAT
    return x + 1 if refused else -1
"""
SHM_PROBE = """\
    import errno, io
    written = 0
    try:
        for n in range(16):
            with io.open(f"/dev/shm/{marker}-probe-{{n}}", "wb") as handle:
                for _ in range(8):
                    written += handle.write(bytes(1 << 20))
    except OSError as err:
        return x + 1 if err.errno == errno.ENOSPC and written <= 16 << 20 else -1
    return -1
"""
NETWORK = """\
    import socket, ctypes, struct
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
        return x + 1
    except Exception:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(2, 1, 0)
    address = struct.pack("=H", 2) + struct.pack("!H4s8x", {port}, bytes([127, 0, 0, 1]))
    return x + 1 if fd >= 0 and libc.connect(fd, address, len(address)) == 0 else -1
"""


class CountingServer:
    """TCP server on 127.0.0.1 that counts accepted connections."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


def host_paths_to_stay_absent(outside: Path) -> list[Path]:
    return [Path("/dev/shm") / MARKER, Path("/dev") / MARKER, Path("/tmp") / MARKER,
            Path(os.path.expanduser("~")) / MARKER, outside / MARKER, Path("/dev/mqueue") / MARKER]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """One evaluation of every hostile sample; returns (result, context)."""
    outside = tmp_path_factory.mktemp("outside")  # a host directory outside work_dir
    (outside / "dir").mkdir()
    for path in (outside / "file.txt", outside / "dir" / "inner.txt"):
        path.write_text("keep me")
    answers = {str(x): expected_secret(x) for x in (3, 4)}
    (outside / "expected.json").write_text(json.dumps(answers))
    env_name = f"SBD_TEST_EXPECTED_{MARKER}"
    os.environ[env_name] = json.dumps(answers)
    work_dir = tmp_path_factory.mktemp("work")
    server = CountingServer()
    samples = {
        "rigged_eq": RIGGED_EQ, "patched_checks": PATCHED_CHECKS, "forged_report": FORGED_REPORT,
        "read_expected": READ_EXPECTED.format(files=[str(outside / "expected.json")], env=env_name),
        "kill_the_judge": KILL_THE_JUDGE, "infinite_loop": INFINITE_LOOP,
        "processes": PROCESSES.format(marker=MARKER),
        "delete": DELETE.format(file=str(outside / "file.txt"), dir=str(outside / "dir"),
                                inner=str(outside / "dir" / "inner.txt")),
        "write_host": WRITE_HOST.format(paths=[str(p) for p in host_paths_to_stay_absent(outside)
                                               if not str(p).startswith("/dev/shm")]),
        "write_private": WRITE_PRIVATE.format(marker=MARKER), "unbounded_alloc": UNBOUNDED_ALLOC,
        "memory_probe": MEMORY_PROBE, "network": NETWORK.format(port=server.port), "control": "    return x + 1\n",
        "fill_memfd": FILL_MEMFD, "memfd_probe": MEMFD_PROBE, "fill_shm": FILL_SHM.format(marker=MARKER),
        "shm_probe": SHM_PROBE.format(marker=MARKER),
    }
    if not detect_isolation().jailed:  # these would really delete, write, kill or fill /dev/shm on the host
        for name in ("kill_the_judge", "delete", "write_host", "write_private", "fill_shm", "shm_probe"):
            del samples[name]
    problem_of = {"read_expected": secret_problem, "patched_checks": area_problem}
    problems, completions, task_of = [], {}, {}
    for num, (name, body) in enumerate(samples.items()):
        problems.append(problem_of.get(name, inc_problem)(num))
        completions[f"HumanEval/{num}"] = body
        task_of[name] = f"HumanEval/{num}"
    try:
        result = evaluate_code(problems, completions, work_dir, parallel=2, max_memory_bytes=1 << 30, timeout_s=120)
    finally:
        server.close()
        del os.environ[env_name]
    verdicts = {name: result["per_problem"][task] for name, task in task_of.items()}
    return result, verdicts, {"outside": outside, "server": server, "work_dir": work_dir, "samples": samples}


def sandboxed(result) -> bool:
    return result["network_isolated"] and result["filesystem_readonly"]


def test_control_passes_and_the_judge_survives(hostile):
    result, verdicts, _ = hostile
    assert verdicts["control"]["passed_plus"], verdicts["control"]
    assert not any(verdicts[name]["passed_base"] for name in (
        "rigged_eq", "patched_checks", "forged_report", "infinite_loop", "processes", "unbounded_alloc")), verdicts
    if sandboxed(result):
        assert verdicts["kill_the_judge"]["passed_plus"]  # the worker is PID 1 of its namespace: immune to signals


@pytest.mark.parametrize("name", ["rigged_eq", "patched_checks", "forged_report"])
def test_evalplus_in_process_exploits_fail(hostile, name):
    verdict = hostile[1][name]
    assert verdict["base_status"] in ("fail", "timeout") and verdict["plus_status"] in ("fail", "timeout"), verdict


def test_reading_expected_outputs_fails_in_the_sandbox(hostile):
    result, verdicts, _ = hostile
    if not sandboxed(result):
        pytest.skip("no sandbox on this machine: host files and environment are readable")
    assert not verdicts["read_expected"]["passed_base"] and not verdicts["read_expected"]["passed_plus"]


def test_the_reading_exploit_works_where_the_data_is_visible(hostile):
    # the same program, run in this process with the expected outputs on disk and in the environment, passes
    samples, outside = hostile[2]["samples"], hostile[2]["outside"]
    namespace: dict = {}
    exec(secret_problem(0)["prompt"] + samples["read_expected"], namespace)
    assert namespace["secret"](3) == expected_secret(3)
    assert (outside / "expected.json").is_file()


def test_processes_are_refused_and_none_survive(hostile):
    assert hostile[1]["processes"]["base_status"] == "fail"
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if comm == MARKER[:15] or str(hostile[2]["work_dir"]) in cmdline:
            survivors.append((pid, comm, cmdline))
    assert survivors == []


def test_host_files_are_neither_deleted_nor_created(hostile):
    result, verdicts, context = hostile
    assert list(context["work_dir"].iterdir()) == []  # the throwaway directory is gone
    if not sandboxed(result):
        pytest.skip("no sandbox on this machine: the delete/write attempts were not run")
    outside = context["outside"]
    assert (outside / "file.txt").read_text() == "keep me"
    assert (outside / "dir" / "inner.txt").read_text() == "keep me"
    assert [p for p in host_paths_to_stay_absent(outside) if p.exists()] == []
    assert not verdicts["write_host"]["passed_base"] and not verdicts["delete"]["passed_base"]
    assert verdicts["write_private"]["passed_plus"]  # its own /dev/shm, $HOME, $TMPDIR: private, gone afterwards


def test_limits_time_and_memory(hostile):
    verdicts = hostile[1]
    assert verdicts["infinite_loop"]["base_status"] == "fail"  # evalplus: a per-input timeout is a failure
    assert verdicts["unbounded_alloc"]["base_status"] == "fail"
    assert verdicts["memory_probe"]["passed_plus"], verdicts  # MemoryError came below 2 GiB: the 1 GiB limit holds


def test_memory_outside_the_address_space_is_bounded(hostile):
    """Anonymous files and System V segments are refused; /dev/shm holds 16 MiB (the jail's private tmpfs, emptied
    after each run: nothing of it on the host)."""
    result, verdicts, context = hostile
    assert verdicts["fill_memfd"]["base_status"] == "fail" and verdicts["memfd_probe"]["passed_plus"], verdicts
    if not sandboxed(result):
        pytest.skip("no sandbox on this machine: /dev/shm is the host's (the /dev/shm programs were not run)")
    assert verdicts["fill_shm"]["base_status"] == "fail" and verdicts["shm_probe"]["passed_plus"], verdicts
    assert [p for p in Path("/dev/shm").iterdir() if p.name.startswith(MARKER)] == []


def test_no_network(hostile):
    result, verdicts, context = hostile
    if not result["network_isolated"]:
        pytest.skip("no network namespace here: the raw libc socket would reach the server")
    assert not verdicts["network"]["passed_base"]
    assert context["server"].connections == 0
