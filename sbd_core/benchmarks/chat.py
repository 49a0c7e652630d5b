"""Prompt rendering shared by the benchmarks, the lm-eval model and the decode stage.

Convention (shared with the fine-tuning data): the fine-tuned arms see the checkpoint's own chat template with a system
message, ``"detailed thinking on"`` for the reasoning benchmarks and ``"detailed thinking off"`` for the chat
benchmarks (the convention of NVIDIA's OpenMathReasoning / OpenCodeReasoning / Nemotron data that the paper's training
mix uses). Plain-text prompts (base models, synthetic tasks) use no template and no system message.

:func:`render_chat` is the one place a message list becomes text: ``SBDLM.apply_chat_template`` (lm-eval's
``--apply_chat_template``) and every benchmark's ``prompt()`` call it, so both build byte-identical prompts.
"""

from __future__ import annotations

from sbd_core.errors import UserError

__all__ = ["THINKING_ON", "THINKING_OFF", "render_chat", "chat_messages", "add_special_tokens_for"]

THINKING_ON = "detailed thinking on"
THINKING_OFF = "detailed thinking off"


def render_chat(tokenizer, messages: list[dict], add_generation_prompt: bool = True,
                continue_final_message: bool | None = None) -> str:
    """``messages`` rendered by the tokenizer's chat template, as lm-eval's HF model does.

    ``add_generation_prompt=False`` continues the final (assistant) message instead of opening a new turn, unless
    ``continue_final_message`` says otherwise (evalplus renders the whole chat and cuts it itself).
    Raises UserError (a ValueError) when the tokenizer has no chat template; a template error (e.g. a template that rejects a system
    message) propagates instead of being papered over by dropping the message.
    """
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise UserError(
            f"tokenizer {name!r} has no chat template, so chat prompts cannot be built; set the benchmark's "
            "'chat: false' for plain-text prompts (base models), or use a checkpoint that carries a chat template")
    if continue_final_message is None:
        continue_final_message = not add_generation_prompt
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt,
                                         continue_final_message=continue_final_message)


def chat_messages(user: str, system_prompt: str | None) -> list[dict]:
    """``[system?, user]`` in the shape lm-eval builds for a zero-shot request (system message only when given)."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return system + [{"role": "user", "content": user}]


def add_special_tokens_for(prompt: str, tokenizer) -> bool:
    """Whether encoding ``prompt`` should add the tokenizer's special tokens: not when the text already starts with the
    BOS token (chat templates write it themselves), as lm-eval's HF model decides; a second BOS would shift the
    model off its training distribution."""
    bos = getattr(tokenizer, "bos_token", None)
    return not (bos and prompt.startswith(bos))
