"""LiveCodeBench v6 (release_v6: 1,055 problems, May 2023 - April 2025), the paper's reasoning code benchmark.

Not available yet; the registry keeps the entry so the report shows an empty column with :data:`REASON`. We looked at
the only packaged official scorer, ``nvidia-livecodebench`` 26.3 on PyPI, and did not wire it in because:

* its loader reads ``livecodebench/code_generation_lite`` through a dataset loading script
  (``trust_remote_code=True``), which the pinned ``datasets`` 5.x no longer runs, so the release files need a loader
  of our own;
* its checker (``livecodebench.evaluation.testing_util.run_test``) executes each program and compares its outputs in
  the program's own process, guarded only by an in-process ``reliability_guard``: a wrong program can make itself
  pass, and nothing contains it. Scoring it as the project scores HumanEval+/MBPP+ means running that checker's
  test logic inside the project's code sandbox (:mod:`sbd_core.evaluation.code`, which keeps
  expected outputs out of the candidate's process), which is not a thin wrapper;
* it pulls in 23 more packages (nemo-evaluator, Flask, cohere, mistralai 0.4.2, google-genai, ...), for one column.

Writing a scorer of our own is not an option: the column must be the official scorer's number.
"""

from .base import Benchmark
from .chat import THINKING_ON
from .settings import Settings

REASON = ("LiveCodeBench v6 is not wired in yet: the official scorer (nvidia-livecodebench 26.3) loads its data "
          "through a dataset loading script that datasets 5.x refuses, and checks programs in their own process "
          "without a sandbox; see sbd_core/benchmarks/lcbv6.py")


class UnavailableBenchmark(Benchmark):
    """A registered benchmark that cannot run; every data or scoring call raises ``BenchmarkUnavailable``."""

    available = False

    def __init__(self, *, reason: str, **kwargs):
        super().__init__(**kwargs)
        self.reason = reason

    def load(self, path):
        self._check_available()

    def prompt(self, problem, tokenizer, settings):
        self._check_available()

    def score(self, problems, completions, work_dir, settings):
        self._check_available()


BENCHMARK = UnavailableBenchmark(
    name="lcbv6", paper_column="lcbv6", group="reasoning", reason=REASON, required_fields=(),
    source={"dataset": "livecodebench/code_generation_lite", "release": "release_v6"},
    defaults=Settings(max_new_tokens=32768, system_prompt=THINKING_ON))
