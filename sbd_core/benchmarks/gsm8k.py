"""GSM8K (Cobbe et al. 2021), the paper's "chat" math benchmark: 1,319 grade-school word problems.

Protocol (the paper names only "chat", greedy, 1,024 new tokens; the rest is our reading): zero-shot, the checkpoint's
chat template with the system prompt ``"detailed thinking off"``, lm-eval's chat-model instruction from
``gsm8k_cot_llama`` ("... Your response should end with "The final answer is [answer]" ..."), and its two answer
filters; the accuracy is ``exact_match`` of the last number in the response (``flexible-extract``), which also reads
``#### N`` and ``\\boxed{N}``; ``strict-match`` ("The final answer is N") is reported beside it. The task YAML,
``lm_eval_tasks/sbd_gsm8k.yaml``, holds the protocol and says what it changes from lm-eval's task and why.

Data: ``openai/gsm8k`` (config ``main``, split ``test``) at a pinned revision; offline, ``data`` takes a JSON-lines
file in that schema (``question``, ``answer`` ending in ``#### N``). Problem ids: the 0-based row index.
"""

from .lm_eval_task import LmEvalBenchmark

BENCHMARK = LmEvalBenchmark(name="gsm8k", paper_column="gsm8k", group="chat", task="sbd_gsm8k",
                            headline="exact_match,flexible-extract", required_fields=("question", "answer"))
