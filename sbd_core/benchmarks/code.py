"""Execution-scored benchmarks in evalplus's problem schema (HumanEval+, MBPP+, the synthetic code task).

Prompts follow evalplus 0.3.1's own generation convention (``evalplus/codegen.py``, ``provider/utility.py``):

* chat (the fine-tuned arms): the user asks for "a self-contained Python script ... in a markdown code block" around
  the problem's prompt, and the assistant turn is pre-filled with evalplus's response prefix up to an opening
  ```` ```python ```` fence (``make_raw_chat_prompt``), so the model writes the code; generation stops at the closing
  fence. Added here: the system message (``"detailed thinking off"`` by default), which evalplus does not write.
* plain text (base models): the problem's prompt itself (``prompt.strip() + "\\n"``), completed directly, with
  evalplus's stop strings for direct completion.

The program that is executed is what evalplus's ``codegen`` writes as a sample's ``solution``: the completion (chat)
or prompt + completion (plain text), passed through ``evalplus.sanitize.sanitize`` (tree-sitter: keeps the entry
point and what it uses, drops chatter and tests). Scoring is delegated to the project's code scorer
(:func:`sbd_core.sandbox.evaluate_code`), which receives these full programs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from sbd_core.errors import UserError

from .base import ID_KEY, Benchmark
from .chat import chat_messages, render_chat
from .settings import CodeSettings

__all__ = ["EVALPLUS_FIELDS", "CodeBenchmark", "evalplus_chat_prompt"]

EVALPLUS_FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "base_input", "plus_input", "atol",
                   "contract")
# evalplus 0.3.1 codegen.run_codegen's instruction/response prefixes (the non-"perf" ones)
INSTRUCTION_PREFIX = ("Please provide a self-contained Python script that solves the following problem in a "
                      "markdown code block:")
RESPONSE_PREFIX = ("Below is a Python script with a self-contained function that solves the problem and passes "
                   "corresponding tests:")


def evalplus_chat_prompt(task_prompt: str, tokenizer, system_prompt: str | None) -> str:
    """evalplus's ``make_raw_chat_prompt`` with an optional system message: the chat up to the pre-filled
    ```` ```python\\n```` of the assistant turn."""
    from evalplus.provider.utility import _MAGIC_SPLITTER_

    user = f"{INSTRUCTION_PREFIX}\n```\n{task_prompt.strip()}\n```\n"
    response = f"{RESPONSE_PREFIX}\n```python\n{_MAGIC_SPLITTER_}\n```\n"
    messages = chat_messages(user, system_prompt) + [{"role": "assistant", "content": response}]
    text = render_chat(tokenizer, messages, add_generation_prompt=False, continue_final_message=False)
    return text.split(_MAGIC_SPLITTER_)[0]


class CodeBenchmark(Benchmark):
    """An evalplus dataset (``dataset`` is ``"humaneval"`` or ``"mbpp"``, the scorer's dataset name; ``release`` the
    pinned evalplus release, e.g. ``("HumanEvalPlus", "v0.1.10")``)."""

    def __init__(self, *, dataset: str, release: tuple[str, str] | None, **kwargs):
        super().__init__(required_fields=EVALPLUS_FIELDS, **kwargs)
        self.dataset, self.release = dataset, release

    def _source_rows(self, settings: CodeSettings) -> list[dict]:
        """The pinned evalplus release, downloaded (once, into evalplus's cache) by evalplus's own helpers; the rows
        are kept exactly as released (``get_mbpp_plus`` would deserialize MBPP+ inputs)."""
        from evalplus.data.utils import get_dataset_metadata, make_cache, stream_jsonl

        name, version = self.release
        url, path = get_dataset_metadata(name, version, mini=False)
        try:
            make_cache(url, path)
        except Exception as err:  # noqa: BLE001 (any download failure gets the same hint)
            raise UserError(f"{self.name}: could not download {url} ({err}); offline, set "
                            f"benchmarks.{self.name}.data to a local copy in evalplus's schema") from err
        return list(stream_jsonl(path))

    def default_stops(self, chat: bool) -> tuple[str, ...]:
        """evalplus's stop strings: its EOS list plus the end of the code block (chat) or its direct-completion
        stops for the dataset (plain text)."""
        from evalplus.provider.utility import EOS, extra_eos_for_direct_completion

        return tuple(EOS) + (("\n```\n",) if chat else tuple(extra_eos_for_direct_completion(self.dataset)))

    def prompt(self, problem: dict, tokenizer, settings: CodeSettings) -> str:
        """evalplus's prompt for ``problem`` (see the module doc)."""
        task_prompt = problem["prompt"].strip() + "\n"
        return evalplus_chat_prompt(task_prompt, tokenizer, settings.system_prompt) if settings.chat else task_prompt

    def program(self, problem: dict, completion: str, settings: CodeSettings) -> str:
        """The program executed for ``completion``: evalplus's sanitized ``solution``."""
        from evalplus.sanitize import sanitize

        text = completion if settings.chat else self.prompt(problem, None, settings) + completion
        return sanitize(text, entrypoint=problem["entry_point"])

    def score(self, problems: list[dict], completions: Mapping[str, str], work_dir, settings: CodeSettings) -> dict:
        """pass@1 on the base and the plus inputs (accuracy: plus, i.e. passing both) from the code scorer."""
        from sbd_core.sandbox.scorer import evaluate_code

        self.check_completions(problems, completions)
        programs = {p[ID_KEY]: self.program(p, completions[p[ID_KEY]], settings) for p in problems}  # by task_id
        rows = [{k: v for k, v in p.items() if k != ID_KEY} for p in problems]
        result = evaluate_code(rows, programs, Path(work_dir), dataset=self.dataset, completion_format="program",
                               parallel=settings.parallel, max_memory_bytes=settings.max_memory_bytes,
                               timeout_s=settings.timeout_s)
        metrics = {k: result[k] for k in ("pass@1_base", "pass@1_plus", "network_isolated", "filesystem_readonly")}
        per_problem = {i: {**r, "program": programs[i]} for i, r in result["per_problem"].items()}
        return {"accuracy": result["pass@1_plus"], "metrics": metrics, "n": result["n"], "per_problem": per_problem,
                "evalplus_version": result.get("evalplus_version")}
