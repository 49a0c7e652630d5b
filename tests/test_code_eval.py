"""Tests for sbd_core.evaluation.code_eval (evalplus in an isolated subprocess) and sbd_core.io_utils.

All scoring cases, benign and hostile, share ONE evalplus run (module-scoped fixture) to stay fast.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

pytest.importorskip("evalplus")

from sbd_core.evaluation.code_eval import MISSING_STATUS, evaluate_code  # noqa: E402
from sbd_core.io_utils import read_jsonl, write_json_atomic, write_jsonl_atomic  # noqa: E402


def _problem(num: int, prompt: str, entry: str, canonical: str, base, plus) -> dict:
    """One evalplus HumanEval+ record."""
    return {
        "task_id": f"HumanEval/{num}",
        "prompt": prompt,
        "entry_point": entry,
        "canonical_solution": canonical,
        "base_input": base,
        "plus_input": plus,
        "atol": 0,
        "contract": "",
    }


def _inc_problem(num: int) -> dict:
    """`inc(x) = x + 1`: the target of every hostile completion."""
    return _problem(num, "def inc(x):\n", "inc", "    return x + 1\n", [[1], [2]], [[10]])


ADD = 'def add(a, b):\n    """Return a + b."""\n'
ABS = "def my_abs(x):\n"
NOOP = 'def noop(x):\n    """Return None."""\n'

# Hostile bodies for inc(x). Each returns the right answer only if the attack worked.
INFINITE_LOOP = "    while True:\n        pass\n"
FORK = """\
    import os, subprocess
    worked = 0
    for _ in range(3):
        try:
            pid = os.fork()
        except Exception:
            continue
        if pid == 0:
            os._exit(0)
        worked += 1
    for _ in range(3):
        try:
            subprocess.run(["true"], check=True)
            worked += 1
        except Exception:
            pass
    return x + 1 if worked else -1
"""
DELETE = """\
    import os, shutil, pathlib, posix
    deleted = 0
    for attempt in (lambda: os.remove({file!r}), lambda: os.unlink({file!r}),
                    lambda: posix.unlink({file!r}), lambda: pathlib.Path({file!r}).unlink(),
                    lambda: shutil.rmtree({dir!r}), lambda: os.rmdir({dir!r})):
        try:
            attempt()
            deleted += 1
        except Exception:
            pass
    return x + 1 if deleted else -1
"""
# Raw libc calls through ctypes bypass every in-process guard; only the read-only mount stops them.
DELETE_LIBC = """\
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    results = [libc.unlink({file!r}.encode()), libc.unlink({inner!r}.encode()), libc.rmdir({dir!r}.encode())]
    return x + 1 if 0 in results else -1
"""
UNBOUNDED_ALLOC = """\
    chunks = []
    while len(chunks) < 128:  # 4 GiB cap so a broken limit cannot take the machine down
        chunks.append(bytearray(32 << 20))
    return x + 1
"""
MEMORY_PROBE = """\
    chunks = []
    try:
        while len(chunks) < 128:
            chunks.append(bytearray(32 << 20))
    except MemoryError:
        return x + 1 if len(chunks) * (32 << 20) < (2 << 30) else -1  # stopped well below 2 GiB
    return -1
"""
# Tries Python sockets, then raw libc through ctypes (bypasses any in-process guard).
NETWORK = """\
    import socket
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
        return x + 1
    except Exception:
        pass
    try:
        import ctypes, struct
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(2, 1, 0)
        addr = struct.pack("!HH4s8x", 2, {port}, bytes([127, 0, 0, 1]))
        addr = struct.pack("H", 2) + addr[2:]  # sa_family is host order
        if fd >= 0 and libc.connect(fd, addr, len(addr)) == 0:
            return x + 1
    except Exception:
        pass
    return -1
"""


class _CountingServer:
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


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One evalplus run over benign and hostile cases; returns (result, context)."""
    outside = tmp_path_factory.mktemp("outside")  # not inside work_dir
    sentinel_file = outside / "sentinel.txt"
    sentinel_file.write_text("keep me")
    sentinel_dir = outside / "sentinel_dir"
    sentinel_dir.mkdir()
    (sentinel_dir / "inner.txt").write_text("keep me too")
    libc_file = outside / "libc_sentinel.txt"
    libc_file.write_text("keep")
    libc_dir = outside / "libc_dir"
    libc_dir.mkdir()
    (libc_dir / "inner.txt").write_text("keep")
    work_dir = tmp_path_factory.mktemp("work")
    server = _CountingServer()
    problems = [
        _problem(0, ADD, "add", "    return a + b\n", [[1, 2], [3, 4]], [[-1, 1], [10**9, 10**9]]),
        _problem(1, ADD, "add", "    return a + b\n", [[1, 2]], [[5, 5]]),
        _problem(2, ABS, "my_abs", "    return abs(x)\n", [[1], [2]], [[-3]]),
        _problem(3, ABS, "my_abs", "    return abs(x)\n", [[-1]], [[4]]),
        _problem(4, NOOP, "noop", "    return None\n", [[1]], [[2]]),
    ] + [_inc_problem(n) for n in range(10, 17)]
    completions = {
        "HumanEval/0": "    return a + b\n",  # correct
        "HumanEval/1": "    return a - b\n",  # wrong
        "HumanEval/2": "    return x\n",  # passes base (positive inputs), fails plus
        "HumanEval/3": "    return x\n",  # fails base, passes plus inputs
        # HumanEval/4 missing: an empty body returns None, which the canonical solution also does
        "HumanEval/10": INFINITE_LOOP,
        "HumanEval/11": FORK,
        "HumanEval/12": DELETE.format(file=str(sentinel_file), dir=str(sentinel_dir)),
        "HumanEval/13": UNBOUNDED_ALLOC,
        "HumanEval/14": MEMORY_PROBE,
        "HumanEval/15": NETWORK.format(port=server.port),
        "HumanEval/16": DELETE_LIBC.format(file=str(libc_file), inner=str(libc_dir / "inner.txt"),
                                           dir=str(libc_dir)),
    }
    out = work_dir / "result.json"
    try:
        result = evaluate_code(problems, completions, work_dir, parallel=2, max_memory_bytes=1 << 30,
                               timeout_s=120, output_path=out)
    finally:
        server.close()
    context = {"sentinel_file": sentinel_file, "sentinel_dir": sentinel_dir, "server": server,
               "libc_file": libc_file, "libc_dir": libc_dir,
               "work_dir": work_dir, "out": out}
    return result, context


def test_result_schema_and_pass_rates(scored):
    result, ctx = scored
    assert set(result) == {"pass@1_base", "pass@1_plus", "n", "per_problem", "network_isolated",
                           "filesystem_readonly", "evalplus_version"}
    assert result["n"] == 12 and len(result["per_problem"]) == 12
    assert result["evalplus_version"] == "0.3.1"
    # HumanEval/15 and /16 pass only where the sandbox is missing; those cases have their own tests.
    per = {t: r for t, r in result["per_problem"].items() if t not in ("HumanEval/15", "HumanEval/16")}
    passed_base = sorted(t for t, r in per.items() if r["passed_base"])
    passed_plus = sorted(t for t, r in per.items() if r["passed_plus"])
    assert passed_base == ["HumanEval/0", "HumanEval/14", "HumanEval/2"]
    assert passed_plus == ["HumanEval/0", "HumanEval/14"]
    if result["network_isolated"] and result["filesystem_readonly"]:
        assert result["pass@1_base"] == pytest.approx(3 / 12)
        assert result["pass@1_plus"] == pytest.approx(2 / 12)
    assert json.loads(ctx["out"].read_text()) == result  # written atomically on request
    assert sorted(p.name for p in ctx["work_dir"].iterdir()) == ["result.json"]  # throwaway dir removed


def test_correct_wrong_and_plus_only_failures(scored):
    per = scored[0]["per_problem"]
    assert per["HumanEval/0"] == {"base_status": "pass", "plus_status": "pass",
                                  "passed_base": True, "passed_plus": True}
    assert per["HumanEval/1"]["base_status"] == "fail" and not per["HumanEval/1"]["passed_plus"]
    assert per["HumanEval/2"]["base_status"] == "pass" and per["HumanEval/2"]["plus_status"] == "fail"
    assert per["HumanEval/2"]["passed_base"] and not per["HumanEval/2"]["passed_plus"]
    # evalplus reports plus_status independently of base; plus pass requires both.
    assert per["HumanEval/3"]["base_status"] == "fail" and per["HumanEval/3"]["plus_status"] == "pass"
    assert not per["HumanEval/3"]["passed_plus"]


def test_missing_completion_is_a_failure(scored):
    record = scored[0]["per_problem"]["HumanEval/4"]
    assert record["base_status"] == record["plus_status"] == MISSING_STATUS
    assert not record["passed_base"] and not record["passed_plus"]


def test_hostile_programs_fail(scored):
    per = scored[0]["per_problem"]
    for task in ("HumanEval/10", "HumanEval/11", "HumanEval/12", "HumanEval/13"):
        assert not per[task]["passed_base"], f"{task} should be scored as a failure: {per[task]}"


def test_deletion_outside_work_dir_blocked(scored):
    ctx = scored[1]
    assert ctx["sentinel_file"].read_text() == "keep me"
    assert (ctx["sentinel_dir"] / "inner.txt").read_text() == "keep me too"


def test_libc_deletion_blocked_by_readonly_mounts(scored):
    result, ctx = scored
    if not result["filesystem_readonly"]:
        pytest.skip("no private mount namespace here; ctypes unlink would bypass evalplus's guard")
    assert not result["per_problem"]["HumanEval/16"]["passed_base"]
    assert ctx["libc_file"].read_text() == "keep"
    assert (ctx["libc_dir"] / "inner.txt").read_text() == "keep"


def test_memory_limit_hit_below_two_gib(scored):
    # The probe passes only if MemoryError came before 2 GiB, i.e. the 1 GiB limit was enforced.
    assert scored[0]["per_problem"]["HumanEval/14"]["passed_base"]


def test_network_blocked(scored):
    result, ctx = scored
    if not result["network_isolated"]:
        pytest.skip("unshare --net is unavailable here; the libc socket bypass would reach the server")
    assert not result["per_problem"]["HumanEval/15"]["passed_base"]
    assert ctx["server"].connections == 0


def test_whole_evaluation_timeout(tmp_path):
    problems = [_inc_problem(0)]
    out = tmp_path / "result.json"
    with pytest.raises(RuntimeError, match="timeout_s"):
        evaluate_code(problems, {"HumanEval/0": INFINITE_LOOP}, tmp_path / "work", timeout_s=0.3,
                      output_path=out)
    assert not out.exists()
    assert list((tmp_path / "work").iterdir()) == []


def test_runner_failure_raises_with_log(tmp_path):
    broken = {**_inc_problem(0), "canonical_solution": "    raise ValueError('bad oracle')\n"}
    out = tmp_path / "result.json"
    with pytest.raises(RuntimeError, match="(?s)exited with status 1.*bad oracle"):
        evaluate_code([broken], {"HumanEval/0": "    return x + 1\n"}, tmp_path / "work", output_path=out)
    assert not out.exists()


def test_invalid_inputs_raise(tmp_path):
    good = _inc_problem(0)
    with pytest.raises(ValueError, match="HumanEval/<int>"):
        evaluate_code([{**good, "task_id": "Mbpp/1"}], {}, tmp_path)
    with pytest.raises(ValueError, match="lacks required keys"):
        evaluate_code([{k: v for k, v in good.items() if k != "plus_input"}], {}, tmp_path)
    with pytest.raises(ValueError, match="not in problems"):
        evaluate_code([good], {"HumanEval/7": "    return 1\n"}, tmp_path)
    with pytest.raises(ValueError, match="duplicate"):
        evaluate_code([good, good], {}, tmp_path)


def test_io_utils_roundtrip_and_atomicity(tmp_path):
    path = tmp_path / "sub" / "a.jsonl"
    write_jsonl_atomic([{"x": 1}, {"y": "line\nbreak"}], path)
    assert read_jsonl(path) == [{"x": 1}, {"y": "line\nbreak"}]
    target = tmp_path / "r.json"
    write_json_atomic({"ok": True}, target)
    with pytest.raises(TypeError):
        write_json_atomic({"bad": object()}, target)  # fails before touching the file
    assert json.loads(target.read_text()) == {"ok": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "sub"]  # no temp files left
    (tmp_path / "broken.jsonl").write_text('{"a": 1}\nnot json\n')
    with pytest.raises(ValueError, match="broken.jsonl:2"):
        read_jsonl(tmp_path / "broken.jsonl")
