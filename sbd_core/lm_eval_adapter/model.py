"""lm-eval 0.4.13 model adapters: ``sbd`` (decode with :func:`~sbd_core.decoding.factory.make_decoder`) and
``sbd-replay``.

* ``SBDLM`` (registered as ``"sbd"``) loads a checkpoint and answers ``generate_until`` requests with SBD block
  decoding, NTP decoding with ``solver=ntp`` (``mode=ntp`` says the same), or a training-free peer with
  ``solver=hf_generate`` / ``solver=prompt_lookup`` (Hugging Face ``generate``, :mod:`sbd_core.decoding.peers`). Sampler parameters come through
  lm-eval's ``model_args`` string, e.g. ``"pretrained=/ckpt,solver=eb,gamma=0.1,block_size=4"``; they are converted to
  the types of the sampler's defaults (``describe_samplers()``, the vocabulary of the workflow config).
  ``loglikelihood`` / ``loglikelihood_rolling`` score with the plain causal NTP logits (SBD eq. 9a): one
  teacher-forced forward, no mask tokens.
  ``--apply_chat_template`` renders lm-eval's messages with the checkpoint's chat template through
  :func:`sbd_core.benchmarks.chat.render_chat`, the function the benchmarks' ``prompt()`` uses, so lm-eval and the
  DAG's decode stage hand the model byte-identical prompts; a context that already starts with the BOS token (a
  rendered chat) is encoded without adding another, as lm-eval's HF model does.
* ``ReplayLM`` (registered as ``"sbd-replay"``, :mod:`sbd_core.benchmarks.replay`, imported here) answers
  ``generate_until`` from stored completions looked up by problem id, so stored generations are scored by lm-eval
  without decoding again.

Importing this module registers both names and imports ``lm_eval.models`` first: lm-eval's ``get_model`` only loads
its built-in model table when the registry is empty, so registering ours first would otherwise hide ``hf`` & co.
lm-eval 0.4.13 does not read the ``lm_eval.models`` entry-point group; import this module to register the models.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict

import lm_eval.models  # noqa: F401  (see module doc: keeps lm-eval's built-in models registered)
import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from sbd_core import checkpoint
from sbd_core.benchmarks.chat import add_special_tokens_for, render_chat
from sbd_core.benchmarks.replay import MissingGenerationError, ReplayLM, request_id, stop_strings
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_decoder, make_solver
from sbd_core.mask_token import mask_token_id
from sbd_core.samplers import describe_samplers, make_sampler, sampler_name

__all__ = ["SBDLM", "ReplayLM", "MissingGenerationError", "coerce_solver_params", "request_id"]

log = logging.getLogger(__name__)
_HANDLED_GEN_KWARGS = ("until", "max_gen_toks", "do_sample", "temperature")


# --------------------------------------------------------------------------------------------- argument parsing
def _to_int(key: str, value) -> int:
    """``value`` (int, integral float or numeric string) as an int; ValueError naming ``key`` otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"{key} must be an integer, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int):
        return value
    raise ValueError(f"{key} must be an integer, got {value!r}")


def _to_float(key: str, value) -> float:
    """``value`` (int, float or numeric string such as ``"0.1"`` or ``"inf"``) as a float."""
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a number, got {value!r}")
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise ValueError(f"{key} must be a number, got {value!r}") from None
    if isinstance(value, (int, float)):
        return float(value)
    raise ValueError(f"{key} must be a number, got {value!r}")


def _to_str(key: str, value) -> str:
    """``value`` as a string (lm-eval turns ``"None"``/``"true"`` into None/bool, which are rejected)."""
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    return value.strip()


def coerce_solver_params(solver: str, params: dict) -> dict:
    """Convert sampler parameters (often strings from ``model_args``) to the types of the sampler's defaults.

    ``solver`` is ``ntp`` or a solver name. Raises ValueError for an unknown name, an unknown parameter (naming the
    allowed ones) or a value that does not convert. Range checks are left to :func:`sbd_core.samplers.sampler_spec`.
    """
    table = describe_samplers()
    if solver not in table:
        raise ValueError(f"unknown solver {solver!r}; valid names: {sorted(table)}")
    defaults = table[solver]["params"]
    out = {}
    for key, value in params.items():
        if key not in defaults:
            raise ValueError(f"unknown parameter {key!r} for solver {solver!r}; allowed: {sorted(defaults)}")
        kind = type(defaults[key])
        convert = _to_int if kind is int else _to_float if kind is float else _to_str
        out[key] = convert(key, value)
    return out


def _resolve_dtype(dtype):
    """A torch dtype from a name of :data:`sbd_core.checkpoint.DTYPES` (``"auto"`` and torch dtypes pass through)."""
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    return checkpoint.torch_dtype(str(dtype))


def _available_device(device) -> str:
    """``device``, or the CPU (with a warning) when lm-eval's CLI default ``cuda`` names a device this host lacks."""
    device = str(device or "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        logging.getLogger(__name__).warning("device %r requested but CUDA is not available; using the CPU", device)
        return "cpu"
    return device


# --------------------------------------------------------------------------------------------- SBD model
@register_model("sbd")
class SBDLM(LM):
    """lm-eval model that decodes with :class:`BlockDecoder` (SBD or NTP) and scores with causal NTP logits."""

    def __init__(
        self,
        pretrained: str,
        mode: str | None = None,
        solver: str | None = None,
        block_size: int = 16,
        batch_size: int = 8,
        max_gen_toks: int = 256,
        device: str = "cpu",
        dtype: str = "float32",
        trust_remote_code: bool = False,
        max_length: int | None = None,
        add_special_tokens: bool = True,
        max_batch_size: int | None = None,  # passed by simple_evaluate; unused
        **solver_params,
    ):
        """Load ``pretrained`` and build the sampler: ``solver`` is ``ntp`` or a block solver (default ``eb``; ``mode``
        may say ``ntp`` or ``sbd`` too, see :func:`sbd_core.samplers.sampler_name`); ``solver_params`` are its (string
        or typed) settings."""
        super().__init__()
        name = sampler_name(mode, solver)
        self.sampler = make_sampler(name, **coerce_solver_params(name, solver_params))
        self.mode = self.sampler.decode_mode  # a peer (mode hf) decodes one causal stream, as NTP decoding does
        self.solver = None if self.sampler.is_peer else make_solver(self.sampler)  # peers: generate
        self.block_size = _to_int("block_size", block_size)
        self.batch_size = _to_int("batch_size", batch_size)
        self.max_gen_toks = _to_int("max_gen_toks", max_gen_toks)
        self.add_special_tokens = bool(add_special_tokens)
        DecodeConfig(mode=self.mode, block_size=self.block_size, max_new_tokens=self.max_gen_toks,
                     batch_size=self.batch_size)  # validates the numbers before the (slow) model load
        self.model, self.tokenizer = self._load(pretrained, device, dtype, bool(trust_remote_code))
        if self.mode == "sbd":
            mask_token_id(self.model)  # fail now, not at the first request, when the checkpoint has no mask token
        self._device = self.model.device
        self._max_length = None if max_length is None else _to_int("max_length", max_length)
        self.last_stats: list[dict] = []
        self._warned: set[tuple] = set()  # ignored gen_kwargs already reported

    @staticmethod
    def _load(pretrained, device, dtype, trust_remote_code):
        """Load the causal LM (SDPA attention, ``dtype``) and its tokenizer from a local folder or hub id."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = os.fspath(pretrained)
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=_resolve_dtype(dtype), attn_implementation="sdpa", trust_remote_code=trust_remote_code
        )
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        return model.to(_available_device(device)).eval(), tokenizer

    # ------------------------------------------------------------------------------------------ properties
    @property
    def max_length(self) -> int:
        """Context window used for scoring: ``max_length`` if given, else the model's max_position_embeddings."""
        if self._max_length is not None:
            return self._max_length
        value = getattr(self.model.config, "max_position_embeddings", None)
        return int(value) if value else int(self.tokenizer.model_max_length)

    @property
    def prefix_token_id(self) -> int:
        """Token that conditions the first prediction when there is no context (BOS, else EOS)."""
        tok = self.tokenizer
        value = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        if value is None:
            raise ValueError("the tokenizer has neither a BOS nor an EOS token to condition on an empty context")
        return int(value)

    @property
    def eot_token_id(self):
        """EOS id (logged by lm-eval)."""
        return self.tokenizer.eos_token_id

    # ------------------------------------------------------------------------------------------ chat template
    @property
    def tokenizer_name(self) -> str:
        """Fingerprint of the tokenizer for lm-eval's request cache (as lm-eval's HF model names it)."""
        return self.tokenizer.name_or_path.replace("/", "__")

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        """The checkpoint's chat template (logged by lm-eval); named alternative templates are not supported."""
        if isinstance(chat_template, str):
            raise ValueError(f"SBDLM uses the checkpoint's own chat template; got a template name {chat_template!r}")
        return self.tokenizer.chat_template if chat_template else None

    def apply_chat_template(self, chat_history: list[dict], add_generation_prompt: bool = True) -> str:
        """lm-eval's messages rendered with the checkpoint's chat template (ValueError when it has none)."""
        return render_chat(self.tokenizer, chat_history, add_generation_prompt=add_generation_prompt)

    # ------------------------------------------------------------------------------------------ generation
    def _gen_settings(self, gen_kwargs: dict) -> tuple[tuple[str, ...], int]:
        """(stop strings, max new tokens) of one request; sampling must be configured in model_args instead."""
        gen_kwargs = dict(gen_kwargs or {})
        if gen_kwargs.get("do_sample") or _to_float("temperature", gen_kwargs.get("temperature") or 0.0) > 0:
            raise ValueError(
                "sampling through gen_kwargs is not supported; set temperature/seed in model_args "
                f"(e.g. 'temperature=0.7,seed=1'), got {gen_kwargs}"
            )
        unused = tuple(sorted(k for k in gen_kwargs if k not in _HANDLED_GEN_KWARGS))
        if unused and unused not in self._warned:
            self._warned.add(unused)
            log.warning("SBDLM ignores generation kwargs %s", list(unused))
        max_new = _to_int("max_gen_toks", gen_kwargs.get("max_gen_toks", self.max_gen_toks))
        return stop_strings(gen_kwargs.get("until")), max_new

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Decode every request's context; cut at its ``until`` strings and ``max_gen_toks``.

        Requests with identical settings are decoded together in batches of ``batch_size``. Per-request cost
        (nfe, num_tokens, tokens_per_forward, stop_reason, wall_time_s) is left in ``self.last_stats``.
        """
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, req in enumerate(requests):
            special = self.add_special_tokens and add_special_tokens_for(req.args[0], self.tokenizer)
            groups[(*self._gen_settings(req.args[1]), special)].append(i)
        texts: list[str | None] = [None] * len(requests)
        stats: list[dict | None] = [None] * len(requests)
        for (stops, max_new, special), rows in groups.items():
            config = DecodeConfig(mode=self.mode, block_size=self.block_size, max_new_tokens=max_new,
                                  stop_strings=stops, batch_size=self.batch_size, add_special_tokens=special)
            decoder = make_decoder(self.model, self.tokenizer, config, self.sampler)
            gens = decoder.generate([requests[i].args[0] for i in rows], progress=not disable_tqdm)
            for i, gen in zip(rows, gens):
                texts[i] = gen.text
                stats[i] = {"nfe": gen.nfe, "num_tokens": gen.num_tokens, "tokens_per_forward": gen.tokens_per_forward,
                            "stop_reason": gen.stop_reason, "wall_time_s": gen.wall_time_s}
                self.cache_hook.add_partial("generate_until", requests[i].args, gen.text)
        self.last_stats = stats
        return texts

    # ------------------------------------------------------------------------------------------ scoring
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids of (context, continuation) as lm-eval's HF model makes them (``TemplateLM.loglikelihood`` and
        ``_encode_pair``; tests/test_likelihood_adapter.py checks the scores against it): an empty context is the
        prefix token (BOS, else EOS) unless the continuation starts with it; otherwise trailing context whitespace
        moves to the continuation, the whole text is encoded once and split after the context's tokens, and a
        context that already starts with the BOS text (a rendered chat) gets no second BOS."""
        tok = self.tokenizer
        if context == "":
            cont = tok(continuation, add_special_tokens=False)["input_ids"]
            prefix = self.prefix_token_id
            return ([prefix], cont) if cont[:1] != [prefix] else (cont[:1], cont[1:])
        spaces = len(context) - len(context.rstrip())
        if spaces:  # trailing context whitespace belongs to the continuation (tokenizers attach it to the next word)
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        special = self.add_special_tokens and add_special_tokens_for(context, tok)
        whole = tok(context + continuation, add_special_tokens=special)["input_ids"]
        ctx = tok(context, add_special_tokens=special)["input_ids"]
        return ctx, whole[len(ctx):]

    @torch.no_grad()
    def _score(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
        """(sum of continuation log-probs, all-greedy flag) per (context ids, continuation ids) pair.

        One causal forward per sequence (batched, right-padded: with causal attention real tokens never see the
        padding, so no attention mask is needed); the context is cut from the left to fit ``max_length``.
        """
        inputs = []
        for ctx, cont in pairs:
            if not cont:
                raise ValueError("the continuation is empty after tokenization; nothing to score")
            if len(cont) > self.max_length:
                raise ValueError(f"continuation of {len(cont)} tokens exceeds the context of {self.max_length} tokens")
            inputs.append((ctx + cont)[-(self.max_length + 1):][:-1])
        order = sorted(range(len(pairs)), key=lambda i: -len(inputs[i]))
        out: list[tuple[float, bool] | None] = [None] * len(pairs)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        for lo in range(0, len(order), self.batch_size):
            chunk = order[lo:lo + self.batch_size]
            width = len(inputs[chunk[0]])
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            for r, i in enumerate(chunk):
                ids[r, :len(inputs[i])] = torch.tensor(inputs[i])
            logp = torch.log_softmax(self.model(input_ids=ids.to(self.device)).logits.float(), dim=-1)
            for r, i in enumerate(chunk):
                cont, n = pairs[i][1], len(inputs[i])
                rows = logp[r, n - len(cont):n]
                target = torch.tensor(cont, device=rows.device)
                total = rows.gather(1, target[:, None]).sum().item()
                out[i] = (float(total), bool((rows.argmax(-1) == target).all()))
        return out

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """log P(continuation | context) and whether greedy decoding would produce it, per request."""
        results = self._score([self._encode_pair(*req.args) for req in requests])
        for req, res in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood", req.args, res)
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """log P(string) given the prefix token, over disjoint rolling windows of ``max_length`` tokens."""
        windows, owner = [], []
        for i, req in enumerate(requests):
            tokens = self.tokenizer(req.args[0], add_special_tokens=False)["input_ids"]
            for window in get_rolling_token_windows(tokens, self.prefix_token_id, self.max_length, 1):
                windows.append(make_disjoint_window(window))
                owner.append(i)
        totals = [0.0] * len(requests)
        for i, (logprob, _) in zip(owner, self._score(windows)):
            totals[i] += logprob
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return totals
