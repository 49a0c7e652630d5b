"""The training data sets, pinned: where each lives on the hub, which files, and how a record becomes a conversation.

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
Reasoning sets train under the "thinking on" system prompt, instruction sets under "thinking off" (:mod:`sbd_core.chat`).
The paper's mitigations (bias and cybersecurity filtering) are not public; the sets are used as released.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

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
    """One data set: its pinned hub location, the files of the split we use, and its record -> messages converter."""

    name: str
    repo_id: str
    revision: str
    files: tuple[str, ...]  # patterns inside the repository (also matched inside a local override folder)
    kind: str  # "reasoning" or "instruct": picks the system prompt
    fields: tuple[str, ...]  # the record fields the converter reads
    to_messages: Callable[[dict], list[dict]]


SOURCES = {s.name: s for s in (
    Source("openmathreasoning", "nvidia/OpenMathReasoning", "d3d08664755704f422af97d43a7ff0ded4bd95df",
           ("data/cot-*.parquet",), "reasoning", ("problem", "generated_solution"),
           _pair("problem", "generated_solution")),
    Source("opencodereasoning", "nvidia/OpenCodeReasoning", "e4073b2233876ec2a916be3a09fa3ad040f7d433",
           ("split_0/train-*.parquet",), "reasoning", ("input", "output"), _pair("input", "output")),
    Source("tulu3", "allenai/tulu-3-sft-mixture", "b14afda60f1bbebe55d5d2fa1e4df5042f97f8be",
           ("data/train-*.parquet",), "instruct", ("messages",), _messages),
    Source("gsm8k", "openai/gsm8k", "e53f048856ff4f594e959d75785d2c2d37b678ee",
           ("main/train-*.parquet",), "instruct", ("question", "answer"),
           _pair("question", "answer", lambda text: _CALCULATOR.sub("", text))),
)}


def get_source(name: str) -> Source:
    """The registered source ``name`` (clear error listing the known ones)."""
    if name not in SOURCES:
        raise ValueError(f"unknown training data source {name!r}; known: {sorted(SOURCES)}")
    return SOURCES[name]
