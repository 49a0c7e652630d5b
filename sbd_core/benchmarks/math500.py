"""MATH-500 (Lightman et al. 2023), the paper's reasoning benchmark of 500 MATH competition problems.

Protocol (the paper names "reasoning", thinking mode, up to 32k new tokens, greedy; the rest is our reading):
zero-shot, the checkpoint's chat template with the system prompt ``"detailed thinking on"``, the user prompt of the
paper's math training data (NVIDIA OpenMathReasoning: "Solve the following math problem. Make sure to put the answer
(and only answer) inside \\boxed{}."), 32,768 new tokens. The answer after the thinking block (``</think>``) is judged
against the dataset's ``answer`` with math-verify; a thinking block that never closes counts as no answer. Protocol
in ``lm_eval_tasks/sbd_math500.yaml``; judge in :mod:`sbd_core.benchmarks.lm_eval_hooks`.

Data: ``HuggingFaceH4/MATH-500`` (split ``test``) at a pinned revision; offline, ``data`` takes a JSON-lines file in
that schema (``problem``, ``solution``, ``answer``, ``subject``, ``level``, ``unique_id``). Problem ids: the 0-based
row index.
"""

from .lm_eval_hooks import math_answer
from .lm_eval_task import LmEvalBenchmark

BENCHMARK = LmEvalBenchmark(name="math500", paper_column="math500", group="reasoning", task="sbd_math500",
                            headline="math_verify,none", answer_of=math_answer, required_fields=("problem", "answer"))
