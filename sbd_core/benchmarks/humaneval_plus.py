"""HumanEval+ (Liu et al. 2023; evalplus release v0.1.10), the paper's "chat" code benchmark: 164 problems, each run
on the original HumanEval inputs (base) and evalplus's extra inputs (plus).

Protocol (the paper names "chat", greedy, 1,024 new tokens, pass@1; the rest is our reading): evalplus's own
instruction-model prompt with the system prompt ``"detailed thinking off"`` and its code extraction
(:mod:`sbd_core.benchmarks.code`); the accuracy is pass@1 on base and plus inputs together, pass@1 on the base inputs
is reported beside it.

Data: the pinned evalplus release, downloaded by evalplus's own helpers from GitHub; offline, ``data`` takes a
JSON-lines file (``.gz`` allowed) in evalplus's schema (``task_id``, ``prompt``, ``entry_point``,
``canonical_solution``, ``base_input``, ``plus_input``, ``atol``, ``contract``). Problem ids: ``task_id``
(``HumanEval/0`` ...).
"""

from .chat import THINKING_OFF
from .code import CodeBenchmark
from .settings import CodeSettings

BENCHMARK = CodeBenchmark(
    name="humaneval_plus", paper_column="humaneval_plus", group="chat", dataset="humaneval",
    release=("HumanEvalPlus", "v0.1.10"),
    source={"dataset": "evalplus HumanEval+", "release": "v0.1.10"},
    defaults=CodeSettings(max_new_tokens=1024, system_prompt=THINKING_OFF))
