"""What every decoder shares: the setup of a decoding run (:class:`DecodeSetup`: EOS, the ids never written, the
context, a row's room, the stop rule, the final text), the record of one row while it decodes (:class:`Row`) and its
result (:class:`Generation`). The rules are written in docs/engine.md ("Stopping", "Tokens never written")."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..decode_config import DecodeConfig
from ..mask_token import mask_token_id
from ..train_config import SHIFT_CONFIG_KEY


@dataclass
class Generation:
    """One decoded completion with its cost."""

    text: str  # completion, cut before the stop string / EOS
    token_ids: list[int]  # generated tokens up to and including the one that met the stop condition
    nfe: int  # forward passes after prefill
    stop_reason: str  # "eos", "stop_string" or "length"
    wall_time_s: float  # until this row stopped, from the start of its batch (reference) or its admission (the engine)
    prefill_time_s: float = 0.0  # the share of wall_time_s spent prefilling its prompt (fast engine; 0: not measured)
    accepted: list[int] | None = None  # verify (sbd_core.decoding.verify): per verified draft, the tokens NTP mode kept
    drafted: list[int] | None = None  # verify: per verified draft, its tokens (a whole block, or up to its stop)
    widths: list[int] = field(default_factory=list)  # per forward counted in nfe, the tokens the row fed in it

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tokens_per_forward(self) -> float:
        return self.num_tokens / self.nfe if self.nfe else 0.0


#: The ``shift`` of SBD decoding with ``first_token='ntp'`` on a model trained with the paper's labels: block
#: position 0 is read off the NTP logit of the token before the block, every other position at its own mask.
SHIFT_FIRST = "first"


def shifted_matp(model) -> bool | str:
    """How ``model`` was fine-tuned with shifted MATP labels (training option ``matp_shift``): ``False`` (the paper's
    labels), ``True`` (the logits of block position j are those the model gives at position j - 1; for j = 0 the NTP
    logit of the token before the block) or ``"revealed"`` (at j - 1 only where that position is revealed, else at
    j)."""
    return getattr(model.config, SHIFT_CONFIG_KEY, False)


def decode_shift(model, config: DecodeConfig, solver=None) -> bool | str:
    """Which block positions SBD decoding reads one token earlier: a shifted model's ``matp_shift``
    (:func:`shifted_matp`, whose block position 0 is already the NTP logit), else :data:`SHIFT_FIRST` when ``solver``
    takes the first token from the NTP logit (``first_token='ntp'``), else ``False``; NTP mode: ``False``."""
    if config.mode != "sbd":
        return False
    return shifted_matp(model) or (SHIFT_FIRST if getattr(solver, "first_token", "mask") == "ntp" else False)


@dataclass(frozen=True)
class DecodeSetup:
    """What a decoder derives once from its model, tokenizer and settings."""

    tokenizer: object
    config: DecodeConfig
    eos: frozenset[int]  # the ids a row stops at (resolve_eos)
    excluded_ids: tuple[int, ...]  # the ids no row writes (never_generated_ids)
    context: int | None  # the model's positions (max_position_embeddings); None: unbounded
    mask_id: int | None  # SBD mode's mask token; None in NTP mode
    # SBD mode: which block positions are read one token earlier. A model trained with shifted MATP labels: its
    # matp_shift (shifted_matp); else SHIFT_FIRST where the solver reads the first token off the NTP logit
    shift: bool | str = False

    @classmethod
    def of(cls, model, tokenizer, config: DecodeConfig, solver=None) -> "DecodeSetup":
        eos = resolve_eos(config, tokenizer)
        mask_id = mask_token_id(model) if config.mode == "sbd" else None
        return cls(tokenizer, config, eos, never_generated_ids(model, tokenizer, eos),
                   getattr(model.config, "max_position_embeddings", None), mask_id, decode_shift(model, config, solver))

    @property
    def shifted(self) -> bool:
        """Whether block position 0 is read at the token before the block (and, for a model trained with shifted
        labels, position j at j - 1): :func:`decode_shift`."""
        return bool(self.shift)

    @property
    def stop_strings(self) -> tuple[str, ...]:
        return self.config.stop_strings

    @property
    def window(self) -> int:
        """The stop window: how many trailing characters a stop-string check reads (the longest stop string)."""
        return max((len(s) for s in self.stop_strings), default=0)

    def encode(self, prompt) -> list[int]:
        """A prompt (string or token ids) as token ids (:func:`encode_prompt`)."""
        return encode_prompt(self.tokenizer, prompt, self.config.add_special_tokens, self.context)

    def room(self, prompt_len: int) -> int:
        """The most new tokens a row after a prompt of ``prompt_len`` tokens writes: ``max_new_tokens``, less where the
        context ends first."""
        room = self.config.max_new_tokens
        if self.context is not None:
            room = min(room, self.context - prompt_len)
        return room

    def stop(self, tokens: list[int], start: int, room: int) -> tuple[int, str] | None:
        """:func:`stop_point` of a row whose ``tokens`` grew from ``start``, with ``room`` new tokens at most."""
        return stop_point(self.tokenizer, tokens, start, self.eos, self.stop_strings, self.window, room)

    def text(self, ids: list[int], reason: str) -> str:
        """The final text of a row's kept ``ids``: without the EOS it stopped at, cut before the first stop string."""
        body = ids[:-1] if reason == "eos" else ids
        return cut_at_stop(self.tokenizer.decode(body), self.stop_strings)


@dataclass
class Row:
    """One row while it decodes (every decoder, and the verify loop): its committed tokens, cost and stop."""

    room: int  # the most new tokens it writes (DecodeSetup.room)
    start: float = field(default_factory=time.perf_counter)  # its wall_time_s runs from here
    prefill_s: float = 0.0  # the share of its wall time spent prefilling (the engine; 0: not measured)
    tokens: list[int] = field(default_factory=list)  # revealed (committed) prefix of its generation
    nfe: int = 0
    widths: list[int] = field(default_factory=list)  # per counted forward, the tokens the row fed
    done: bool = False
    keep: int = 0  # tokens kept once it stopped (up to and including the one that met the stop)
    reason: str = ""  # "eos", "stop_string" or "length"
    finish_time: float = 0.0  # seconds from start to its stop
    accepted: list[int] = field(default_factory=list)  # verify: per verified draft, the tokens NTP mode kept
    drafted: list[int] = field(default_factory=list)  # verify: per verified draft, its tokens

    def count(self, width: int) -> None:
        """Count one forward in which the row fed ``width`` tokens."""
        self.nfe += 1
        self.widths.append(width)

    def commit(self, new: list[int], setup: DecodeSetup) -> bool:
        """Extend the revealed prefix by ``new``; stop at the first stop string, EOS or the room (True: it stopped)."""
        start = len(self.tokens)
        self.tokens.extend(new)
        return self.stop_at(setup.stop(self.tokens, start, self.room))

    def stop_at(self, stop: tuple[int, str] | None) -> bool:
        """Record ``stop`` (``(tokens kept, reason)``; None: it goes on) and when it came."""
        if stop is None:
            return False
        self.done, (self.keep, self.reason) = True, stop
        self.finish_time = time.perf_counter() - self.start
        return True

    def generation(self, setup: DecodeSetup, verified: bool = False) -> Generation:
        """The row's result (a row that never stopped ran out of room: ``length``)."""
        if not self.done:
            self.stop_at((len(self.tokens), "length"))
        ids = self.tokens[: self.keep]
        counts = {"accepted": self.accepted, "drafted": self.drafted} if verified else {}
        return Generation(setup.text(ids, self.reason), ids, self.nfe, self.reason, self.finish_time, self.prefill_s,
                          widths=self.widths, **counts)


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
