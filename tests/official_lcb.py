"""The official LiveCodeBench code (lcb_runner as shipped in the ``nvidia-livecodebench`` wheel on PyPI) on OUR fixture
rows and programs only, in a subprocess: its row decoding, chat prompts, code extraction, date filter and ``run_test``
verdicts.

As a module: :func:`official_results` fetches the wheel once (``pip download --no-deps``; its runtime dependencies,
API clients for hosted models, are not needed for these files) into sbd_core's cache, checks the grader file's
sha256, and runs this file as a script. The script loads only the modules it needs (package ``__init__`` files,
which import those clients, are bypassed; ``datasets`` and ``anthropic`` are stubbed: nothing is downloaded) and
writes one record per case: ``{"chat", "reasoning"}`` (the message lists of ``format_prompt_generation`` for
``LMStyle.OpenAIChat`` and ``LMStyle.OpenAIReasonPreview``), ``code`` (``extract_code``), ``results`` and
``metadata`` (``run_test``, in a forked process per case as lcb_runner runs it) and ``passed`` (lcb_runner's pass
rule: every result > 0); per requested window the question ids ``filter_dataset_by_date`` keeps; and what
``compute_scores`` prints for requested ``eval_all.json`` files.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

WHEEL = "nvidia-livecodebench==26.3"
GRADER = "livecodebench/evaluation/testing_util.py"
GRADER_SHA256 = "cebe038290966d7f74392086efc034f952a40bd1632ad8b335f2b0590c95e36a"


def wheel_dir() -> Path:
    """The wheel's ``livecodebench`` tree, fetched and extracted once; RuntimeError when PyPI is unreachable."""
    from sbd_core.checkpoint import cache_dir

    dest = cache_dir() / "wheels" / WHEEL.replace("==", "-")
    if not (dest / GRADER).is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--dest", tmp,
                   "--quiet", WHEEL]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"pip could not download {WHEEL}: {done.stderr[-500:]}")
            with zipfile.ZipFile(next(Path(tmp).glob("*.whl"))) as wheel:
                members = [m for m in wheel.namelist() if m.startswith("livecodebench/")]
                wheel.extractall(Path(tmp) / "tree", members)
            (Path(tmp) / "tree").rename(dest)
    digest = hashlib.sha256((dest / GRADER).read_bytes()).hexdigest()
    if digest != GRADER_SHA256:
        raise RuntimeError(f"{dest / GRADER} has sha256 {digest}, not the pinned grader's {GRADER_SHA256}")
    return dest


def official_results(cases: list[dict], work: Path, timeout: int = 6, windows: list = (), scores: list = ()) -> dict:
    """Run the official code on ``cases`` (each ``{"row", "completion"}``: our fixture rows and answers):
    ``{"cases": [record per case], "windows": [question ids its date filter keeps of the cases' rows, per
    (start_date, end_date) in windows], "scores": [what compute_scores prints, per (eval_all file, start_date,
    end_date, platform) in scores]}`` (see :func:`_scores`)."""
    root = wheel_dir()
    work.mkdir(parents=True, exist_ok=True)
    (work / "cases.json").write_text(json.dumps({"cases": cases, "windows": list(windows), "scores": list(scores)}))
    cmd = [sys.executable, __file__, str(root), str(work / "cases.json"), str(work / "official.json"), str(timeout)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120 + 4 * timeout * len(cases),
                          stdin=subprocess.DEVNULL, cwd=work)
    if done.returncode != 0:
        raise RuntimeError(f"the official grader failed: {done.stderr[-3000:]}")
    return json.loads((work / "official.json").read_text())


def _load_official(root: str):
    import types

    sys.path.insert(0, root)
    sys.modules["datasets"] = types.SimpleNamespace(load_dataset=None, Dataset=list)  # imported, not called
    sys.modules["anthropic"] = None  # its prompts import it inside try/except ImportError (8 s to import)
    for name in ("livecodebench.prompts", "livecodebench.evaluation", "livecodebench.benchmarks"):
        package = types.ModuleType(name)
        package.__path__ = [str(Path(root, *name.split(".")))]
        sys.modules[name] = package
    from livecodebench.benchmarks.code_generation import CodeGenerationProblem
    from livecodebench.benchmarks.utils import filter_dataset_by_date
    from livecodebench.evaluation.testing_util import run_test
    from livecodebench.lm_styles import LMStyle
    from livecodebench.prompts.code_generation import format_prompt_generation
    from livecodebench.utils.extraction_utils import extract_code

    return CodeGenerationProblem, run_test, LMStyle, format_prompt_generation, extract_code, filter_dataset_by_date


def _scores(eval_all: str, start: str | None, end: str | None, platform: str | None) -> dict:
    """What lcb_runner's ``compute_scores`` prints for an ``eval_all.json`` file and filters: ``{"problems": n,
    "Pass@1": .., "Easy Pass@1": .., ..., "Pass@5": .., ...}`` (its ``Pass@k = `` lines and ``Pass@1: `` lines)."""
    import contextlib
    import io
    import types
    import warnings

    from livecodebench.evaluation.compute_scores import compute_scores

    printed = io.StringIO()
    args = types.SimpleNamespace(eval_all_file=eval_all, start_date=start, end_date=end, platform=platform)
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the mean of an empty group
        compute_scores(args)
    lines = printed.getvalue().splitlines()
    values = {"problems": int(lines[0])}
    for line in lines[1:]:
        name, _, value = line.replace(" = ", ": ").partition(": ")
        values[name.strip()] = float(value)
    return values


class _Rows(list):
    """What ``filter_dataset_by_date`` needs of a hub Dataset: ``filter``."""

    def filter(self, keep):
        return _Rows(r for r in self if keep(r))


def _graded(run_test, sample: dict, code: str, timeout: int, path: Path) -> dict:
    """``run_test`` in a forked process, as lcb_runner's ``check_correctness`` runs it (its guard disables ``os``
    functions for good, so each run needs a fresh process), with that function's global timeout: past it, every
    test counts as failed (-1)."""
    n_tests = len(json.loads(sample["input_output"])["inputs"])
    pid = os.fork()
    if pid == 0:
        try:
            import numpy as np

            results, metadata = run_test(sample, test=code, timeout=timeout)
            # evaluate_generations_by_problem: a numpy array result (a returned array compared with ==) is its first
            # item, a numpy bool a bool
            results = [r.item(0) if isinstance(r, np.ndarray) else r for r in results]
            record = {"results": [bool(r) if isinstance(r, (bool, np.bool_)) else int(r) for r in results],
                      "metadata": {k: str(v) for k, v in metadata.items()}}
            with open(path, "w") as handle:
                json.dump(record, handle)
        finally:
            os._exit(0)
    deadline = time.monotonic() + (timeout + 1) * n_tests + 5
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
        time.sleep(0.01)
    if not path.is_file():
        return {"results": [-1] * n_tests, "metadata": {"error": "global timeout"}}
    return json.loads(path.read_text())


def _main(root: str, cases_path: str, out_path: str, timeout: str) -> None:
    import numpy as np

    problem_class, run_test, style, format_prompt, extract_code, date_filter = _load_official(root)
    exec(sys.modules[run_test.__module__].import_string, {})  # its prelude's modules, loaded once before the forks
    given, out = json.loads(Path(cases_path).read_text()), []
    rows = _Rows({r["row"]["question_id"]: r["row"] for r in given["cases"]}.values())
    windows = [[r["question_id"] for r in date_filter(rows, start, end)] for start, end in given["windows"]]
    scores = [_scores(*request) for request in given["scores"]]
    for index, case in enumerate(given["cases"]):
        problem = problem_class(**case["row"])
        code = extract_code(case["completion"], style.OpenAIChat)
        graded = _graded(run_test, problem.get_evaluation_sample(), code, int(timeout),
                         Path(out_path).with_name(f"case-{index}.json"))
        out.append({"chat": format_prompt(problem, style.OpenAIChat),
                    "reasoning": format_prompt(problem, style.OpenAIReasonPreview), "code": code, **graded,
                    "passed": bool(np.all(np.array(graded["results"]) > 0))})
    Path(out_path).write_text(json.dumps({"cases": out, "windows": windows, "scores": scores}))


if __name__ == "__main__":
    _main(*sys.argv[1:])
