"""Chat formatting of the training data: system prompts, the default template, response-only labels.

System prompt convention, shared with the evaluation side (:mod:`sbd_core.benchmarks.chat`, the same constants):
reasoning data train under ``"detailed thinking on"``, instruction data under ``"detailed thinking off"`` (both
configurable). A conversation that has its own system message keeps it after ours.

Templates: a tokenizer's own chat template is used when it has one; a base model without one (Llama-3.1 8B base) gets
:data:`DEFAULT_TEMPLATE`, the Tulu-3 format (``<|system|>``/``<|user|>``/``<|assistant|>`` lines, the turn closed by the
tokenizer's EOS token, so decoding stops at EOS), set on the tokenizer so it is saved with every checkpoint and the
evaluation side renders prompts identically with ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``.

Response-only labels: :func:`tokenize_chat` marks the tokens of each assistant turn (its text and the end-of-turn
marker the template adds) by rendering the conversation up to each turn and mapping those character spans to tokens,
so it works for any template that renders a conversation's prefix as a prefix of the whole (checked; an error otherwise).
"""

from __future__ import annotations

from .benchmarks.chat import THINKING_OFF, THINKING_ON

SYSTEM_PROMPTS = {"reasoning": THINKING_ON, "instruct": THINKING_OFF}

DEFAULT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>\n' + message['content'] + '\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\n' + message['content'] + '\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)


def ensure_chat_template(tokenizer, template: str = "auto") -> str:
    """Set the chat template (``"auto"``: keep the tokenizer's own, else the default; ``"default"``: always the
    default; any other string: that Jinja template) and return it. Saving the tokenizer saves the template."""
    if template == "auto":
        template = tokenizer.chat_template or DEFAULT_TEMPLATE
    elif template == "default":
        template = DEFAULT_TEMPLATE
    tokenizer.chat_template = template
    return template


def with_system_prompt(messages: list[dict], system_prompt: str | None) -> list[dict]:
    """``messages`` with ``system_prompt`` as the system message (before any system text the conversation brings)."""
    if not system_prompt:
        return list(messages)
    if messages and messages[0]["role"] == "system":
        merged = f"{system_prompt}\n{messages[0]['content']}"
        return [{"role": "system", "content": merged}, *messages[1:]]
    return [{"role": "system", "content": system_prompt}, *messages]


def _render(tokenizer, messages: list[dict], generation_prompt: bool = False) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def response_spans(tokenizer, messages: list[dict]) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its assistant turns (text + end-of-turn marker)."""
    text = _render(tokenizer, messages)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        start = len(_render(tokenizer, messages[:i], generation_prompt=True))
        through = _render(tokenizer, messages[: i + 1])
        if not text.startswith(through) or start > len(through):
            raise ValueError("the chat template does not render a conversation's prefix as a prefix of the whole "
                             "conversation, so response tokens cannot be located; use chat_template: default")
        spans.append((start, len(through)))
    return text, spans


def tokenize_chat(tokenizer, messages: list[dict]) -> dict:
    """Token ids of the rendered conversation and a target mask (1 on assistant turns, 0 elsewhere).

    The template supplies special tokens (BOS, EOS); none are added on top.
    """
    text, spans = response_spans(tokenizer, messages)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    target = [int(any(a <= begin < b for a, b in spans)) for begin, _ in enc["offset_mapping"]]
    return {"input_ids": enc["input_ids"], "target": target}
