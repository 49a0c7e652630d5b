"""AIME 2025 (I and II, 30 problems with integer answers 0-999), the paper's hardest reasoning benchmark.

Protocol: the one of :mod:`sbd_core.benchmarks.math500` (zero-shot, ``"detailed thinking on"``, the OpenMathReasoning
user prompt, 32,768 new tokens, greedy, math-verify on the answer after the thinking block). One problem is 3.3
points. Protocol in ``lm_eval_tasks/sbd_aime25.yaml``.

Data: ``math-ai/aime25`` (split ``test``, the data of lm-eval's own ``aime25`` task) at a pinned revision; offline,
``data`` takes a JSON-lines file in that schema (``problem``, ``answer``). Problem ids: the 0-based row index.
"""

from .lm_eval_hooks import math_answer
from .lm_eval_task import LmEvalBenchmark

BENCHMARK = LmEvalBenchmark(name="aime25", paper_column="aime25", group="reasoning", task="sbd_aime25",
                            headline="math_verify,none", answer_of=math_answer, required_fields=("problem", "answer"))
