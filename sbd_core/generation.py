"""What both decoders share: the decoding settings, the result of one row, and the rules for prompts, stop strings
and tokens that are never written (:mod:`sbd_core.decode` is the readable reference decoder, :mod:`sbd_core.engine`
the fast engine; ``DecodeConfig.engine`` chooses)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .decode_config import DecodeConfig  # the decoders import it from here too
from .mask_token import mask_token_id


@dataclass
class Generation:
    """One decoded completion with its cost."""

    text: str  # completion, cut before the stop string / EOS
    token_ids: list[int]  # generated tokens up to and including the one that met the stop condition
    nfe: int  # forward passes after prefill
    stop_reason: str  # "eos", "stop_string" or "length"
    wall_time_s: float  # until this row stopped, from the start of its batch (reference) or its admission (fast)
    prefill_time_s: float = 0.0  # the share of wall_time_s spent prefilling its prompt (fast engine; 0: not measured)
    accepted: list[int] | None = None  # verify (sbd_core.verify): per verified draft, the tokens NTP mode kept
    drafted: list[int] | None = None  # verify: per verified draft, its tokens (a whole block, or up to its stop)
    widths: list[int] = field(default_factory=list)  # per forward counted in nfe, the tokens the row fed in it

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tokens_per_forward(self) -> float:
        return self.num_tokens / self.nfe if self.nfe else 0.0


@dataclass
class Batch:
    """Decoding state of one batch; tensors are indexed by slot (rows still decoding), lists by original row."""

    rows: list[int]  # slot -> original row
    prompt_len: torch.Tensor  # [slots]
    prompt_valid: torch.Tensor  # [slots, P] False on left padding
    tokens: list[list[int]]  # revealed prefix of each row's generation
    nfe: list[int]
    widths: list[list[int]]  # per counted forward, the tokens the row fed
    done: list[bool]
    keep: list[int]
    reason: list[str]
    finish_time: list[float]
    accepted: list[list[int]]  # verify: per verified draft, the tokens NTP mode kept
    drafted: list[list[int]]  # verify: per verified draft, its tokens
    gen_len: int = 0  # tokens of the generation committed so far (same for all slots)
    start: float = field(default_factory=time.perf_counter)

    @classmethod
    def new(cls, prompt_len: torch.Tensor, prompt_valid: torch.Tensor) -> "Batch":
        n = len(prompt_len)
        return cls(list(range(n)), prompt_len, prompt_valid, [[] for _ in range(n)], [0] * n, [[] for _ in range(n)],
                   [False] * n, [0] * n, [""] * n, [0.0] * n, [[] for _ in range(n)], [[] for _ in range(n)])

    def commit(self, row: int, new: list[int], tokenizer, eos, stop_strings, max_new: int) -> bool:
        """Extend the row's revealed prefix by ``new``; stop at the first stop string, EOS or the length cap."""
        tokens = self.tokens[row]
        start = len(tokens)
        tokens.extend(new)
        stop = stop_point(tokenizer, tokens, start, eos, stop_strings, stop_window(stop_strings), max_new)
        if stop is None:
            return False
        self.done[row] = True
        self.keep[row], self.reason[row] = stop
        return True


def stop_window(stop_strings) -> int:
    """How many trailing characters a stop-string check reads: the longest stop string."""
    return max((len(s) for s in stop_strings), default=0)



def resolve_eos(config: DecodeConfig, tokenizer) -> frozenset[int]:
    """The EOS ids a decoder stops at: ``config.eos_token_ids``, else the tokenizer's EOS (none if it has none)."""
    eos = config.eos_token_ids
    if eos is None:
        eos = () if tokenizer.eos_token_id is None else (tokenizer.eos_token_id,)
    return frozenset(int(t) for t in eos)


def never_generated_ids(model, tokenizer, eos_ids) -> tuple[int, ...]:
    """Token ids no decoder may write: the SBD mask token (when ``model`` records one; also in NTP mode) and the pad
    token when it is a token of its own.

    A revealed mask token would leave a hole that looks filled. A pad token marks where there is no text, so writing it
    is never right; but tokenizers often reuse EOS (Qwen-3) or BOS as their pad token, and then that id has a real job
    (ending a generation, starting a document) and stays allowed.
    """
    out = set()
    mask_id = mask_token_id(model, required=False)
    if mask_id is not None:
        out.add(mask_id)
    pad, bos = tokenizer.pad_token_id, tokenizer.bos_token_id
    if pad is not None and pad not in eos_ids and pad != bos and pad != tokenizer.eos_token_id:
        out.add(int(pad))
    return tuple(sorted(out))


def cut_at_stop(text: str, stop_strings) -> str:
    """``text`` up to (not including) the first occurrence of any stop string."""
    for stop in stop_strings:
        text = text.split(stop, 1)[0]
    return text


def encode_prompt(tokenizer, prompt, add_special_tokens: bool, context: int | None) -> list[int]:
    """A prompt (string or token ids) as token ids; ValueError when empty or too long for the model's ``context``."""
    if isinstance(prompt, str):
        ids = tokenizer(prompt, add_special_tokens=add_special_tokens)["input_ids"]
    else:
        ids = [int(t) for t in prompt]
    if not ids:
        raise ValueError("empty prompt: give at least one token (e.g. the tokenizer's BOS)")
    if context is not None and len(ids) >= context:
        raise ValueError(
            f"prompt of {len(ids)} tokens does not fit the model's context of {context} tokens "
            "(max_position_embeddings); shorten it or use a model with a longer context"
        )
    return ids


def stop_point(tokenizer, tokens: list[int], start: int, eos_ids, stop_strings, window: int,
               max_new: int) -> tuple[int, str] | None:
    """Where a generation stops once its tokens grew from ``start`` to ``len(tokens)``: ``(tokens kept, reason)`` at the
    end of the first stop string (``stop_string``; one ending before the first new EOS wins), else at the first new EOS
    (``eos``, kept), else at ``max_new`` tokens (``length``); None while it goes on. ``window`` as :func:`find_stop`
    (0: no stop strings)."""
    eos = next((i for i in range(start, len(tokens)) if tokens[i] in eos_ids), None)
    scan_end = len(tokens) if eos is None else eos
    found = find_stop(tokenizer, tokens[:scan_end], start, stop_strings, window) if window else None
    if found is not None:
        return found, "stop_string"
    if eos is not None:
        return eos + 1, "eos"
    if len(tokens) >= max_new:
        return max_new, "length"
    return None


def find_stop(tokenizer, tokens: list[int], start: int, stop_strings, window: int) -> int | None:
    """Smallest token count whose text contains one of ``stop_strings``, looking only at text that ends after token
    ``start``; ``window`` is the longest stop string's length (a token decodes to >= 1 character, so the last
    ``window`` tokens before ``start`` cover any stop string that straddles it)."""
    lo = max(0, start - window)
    text = tokenizer.decode(tokens[lo:])
    if not any(s in text for s in stop_strings):
        return None
    for end in range(max(start, lo) + 1, len(tokens) + 1):
        text = tokenizer.decode(tokens[lo:end])
        if any(s in text for s in stop_strings):
            return end
    return None
