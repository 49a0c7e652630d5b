"""The training data sets: where each comes from (a pinned hub revision, or generated here), which files, and how a
record becomes a conversation.

The paper fine-tunes on "mitigated" OpenMathReasoning and OpenCodeReasoning plus "a publicly available mix, similar to
the one used for training Llama-3.1 Instruct". Our reading:
- ``openmathreasoning``: nvidia/OpenMathReasoning, split ``cot`` (3.2M long chain-of-thought solutions by DeepSeek-R1 /
  QwQ-32B); ``problem`` -> user, ``generated_solution`` (``<think>...</think>`` then the answer) -> assistant. The TIR
  split needs a code-execution turn format and GenSelect is another task, so both are left out.
- ``opencodereasoning``: nvidia/OpenCodeReasoning, config ``split_0`` (567,850 R1 solutions whose questions are in the
  data; ``split_1`` points into other data sets); ``input`` -> user, ``output`` -> assistant.
- ``tulu3``: allenai/tulu-3-sft-mixture (939k conversations; ``messages`` as given). The instruction mix: Tulu 3 was built
  as an open replication of Llama-3.1-Instruct-style post-training on the Llama-3.1 base, which is what the paper
  describes. ODC-BY; some subsets are non-commercial.
- ``gsm8k``: openai/gsm8k ``main`` train (7,473), for the one-GPU pilot; ``question`` -> user, ``answer`` -> assistant
  with the calculator annotations ``<<48/2=24>>`` removed (they are tool markup, not text), ending ``#### N``.
- ``math`` and ``code``: the embedded default's synthetic tasks (:mod:`sbd_core.tasks`), generated from a seed (their
  ``train`` split; the benchmarks use the disjoint ``test`` split); ``prompt`` and ``target`` as plain text.
Reasoning sets train under the "thinking on" system prompt, instruction sets under "thinking off"
(:mod:`sbd_core.chat`); plain sets are ``bos + prompt + target + eos`` with the target mask on ``target + eos``.
The paper's mitigations (bias and cybersecurity filtering) are not public; the sets are used as released.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from ..errors import UserError

_CALCULATOR = re.compile(r"<<[^<>]*>>")


def _pair(user_field: str, assistant_field: str, clean: Callable[[str], str] = str):
    def convert(record: dict) -> list[dict]:
        return [{"role": "user", "content": record[user_field]},
                {"role": "assistant", "content": clean(record[assistant_field])}]
    return convert


def _messages(record: dict) -> list[dict]:
    return [{"role": m["role"], "content": m["content"]} for m in record["messages"]]


@dataclass(frozen=True)
class Source:
    """One data set: where it comes from, the files of the split we use, and how a record becomes a document.

    Hub sources name their pinned ``repo_id``/``revision`` and a record -> messages converter; generated sources (the
    synthetic tasks) have neither: the data stage writes their records itself.
    """

    name: str
    kind: str  # "reasoning" / "instruct" (chat-formatted; picks the system prompt) or "plain" (prompt + target)
    files: tuple[str, ...]  # patterns inside the repository (also matched inside a local override folder)
    fields: tuple[str, ...]  # the record fields the converter reads
    repo_id: str | None = None
    revision: str | None = None
    to_messages: Callable[[dict], list[dict]] | None = None

    @property
    def generated(self) -> bool:
        """True for the synthetic tasks (made from a seed by the data stage, never downloaded)."""
        return self.repo_id is None


SOURCES = {s.name: s for s in (
    Source("openmathreasoning", "reasoning", ("data/cot-*.parquet",), ("problem", "generated_solution"),
           "nvidia/OpenMathReasoning", "d3d08664755704f422af97d43a7ff0ded4bd95df",
           _pair("problem", "generated_solution")),
    Source("opencodereasoning", "reasoning", ("split_0/train-*.parquet",), ("input", "output"),
           "nvidia/OpenCodeReasoning", "e4073b2233876ec2a916be3a09fa3ad040f7d433", _pair("input", "output")),
    Source("tulu3", "instruct", ("data/train-*.parquet",), ("messages",),
           "allenai/tulu-3-sft-mixture", "b14afda60f1bbebe55d5d2fa1e4df5042f97f8be", _messages),
    Source("gsm8k", "instruct", ("main/train-*.parquet",), ("question", "answer"),
           "openai/gsm8k", "e53f048856ff4f594e959d75785d2c2d37b678ee",
           _pair("question", "answer", lambda text: _CALCULATOR.sub("", text))),
    Source("math", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("code", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("code_chain", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("code_affine", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("math_long", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("math_direct", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("math_graded", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("math_shorter", "plain", ("train.jsonl",), ("prompt", "target")),
    Source("code_graded", "plain", ("train.jsonl",), ("prompt", "target")),
)}


def get_source(name: str) -> Source:
    """The registered source ``name`` (clear error listing the known ones)."""
    if name not in SOURCES:
        raise UserError(f"unknown training data source {name!r}; known: {sorted(SOURCES)}")
    return SOURCES[name]
