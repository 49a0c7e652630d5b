"""Training-free peers of SBD: Hugging Face ``generate`` on the NTP arm, greedy (the baseline a user would pick) or with
prompt-lookup decoding (transformers' ``prompt_lookup_num_tokens``), in the decoders' API and results:
``PeerDecoder(model, tokenizer, DecodeConfig, spec).generate(prompts) -> list[Generation]``.

* Tokens: greedy ``model.generate`` with the ids our decoders never write suppressed (``suppress_tokens``,
  :func:`sbd_core.generation.never_generated_ids`), so ``hf_generate`` writes the tokens of our NTP mode. Prompt lookup
  verifies its drafts greedily (it keeps a draft token only where it is the model's argmax), so its tokens are greedy
  decoding's too, up to near-ties that a multi-token forward can round differently.
* Stop: our decoders' rule (:func:`sbd_core.generation.stop_point`) as a stopping criterion over each row's generated
  tokens: a row stops at its first EOS, the end of its first stop string or ``max_new_tokens``; ``token_ids`` end with
  the token that met the stop, ``text`` is cut before the EOS / stop string. Not transformers' ``stop_strings``: its
  ``StopStringCriteria`` reads the prompt too (a stop string that straddles the prompt's end, "\\n```\\n" after a code
  prompt ending in "```python\\n", would stop a generation that our decoders continue) and only the sequence's end (a
  stop string completed inside an accepted prompt-lookup draft is missed, and generation runs on).
* NFE: forwards of the model (counted with a forward pre-hook) up to and including the one that met the row's stop.
  generate's first forward prefills the prompt and decides the first token; our NTP mode prefills all but the last
  prompt token (not counted) and counts the forward over the last one, so the same tokens cost the same NFE
  (``hf_generate``: NFE = tokens). A prompt-lookup forward verifies up to ``tokens`` draft tokens and keeps the agreeing
  prefix plus the model's next token: tokens per forward = 1 + the draft tokens accepted per forward; a forward
  without a draft (no n-gram match) counts too.
* Batching: ``hf_generate`` decodes ``batch_size`` left-padded prompts per ``generate`` call (similar lengths together;
  a row that stopped is padded until the batch's last row stops, as generate does); prompt lookup decodes one prompt
  per call (transformers 5.24: "assisted generate is only supported for batch_size = 1"), and its ``config`` says so
  (``batch_size`` 1).
* ``wall_time_s``: from the start of the row's ``generate`` call to its stop; ``prefill_time_s``: the call's first
  forward (prefill and the first decision).
``block_size``, ``engine`` and ``compile`` of the config do not apply.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch
from tqdm.auto import tqdm
from transformers import StoppingCriteria, StoppingCriteriaList

from .errors import UserError
from .generation import (DecodeConfig, Generation, cut_at_stop, encode_prompt, never_generated_ids, resolve_eos,
                         stop_point)
from .samplers import PEER_MODE, sampler_spec

# generate fills the options it is not given from the checkpoint's generation_config: these are given their neutral
# values, so nothing there changes a greedy token; the options below without one are refused when a checkpoint sets them
_PLAIN_GREEDY = {"do_sample": False, "num_beams": 1, "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0,
                 "no_repeat_ngram_size": 0, "min_new_tokens": 0}  # min_new_tokens overrides a min_length
_REFUSED = ("bad_words_ids", "sequence_bias", "forced_bos_token_id", "forced_eos_token_id", "begin_suppress_tokens",
            "exponential_decay_length_penalty")


class PeerDecoder:
    """Decode prompts with ``model.generate``: a training-free peer (``spec``: a sampler spec of mode ``hf``)."""

    def __init__(self, model, tokenizer, config: DecodeConfig | None = None, spec: dict | None = None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.spec = spec or sampler_spec("hf_generate")
        if self.spec["mode"] != PEER_MODE:
            raise ValueError(f"PeerDecoder decodes the training-free peers (mode {PEER_MODE!r}), got {self.spec!r}")
        self.lookup = self.spec["solver"] == "prompt_lookup"
        config = config or DecodeConfig(mode="ntp")
        self.config = replace(config, batch_size=1) if self.lookup else config  # transformers: batch 1 only
        self.eos = resolve_eos(self.config, tokenizer)
        self.excluded_ids = never_generated_ids(model, tokenizer, self.eos)
        self.context = getattr(model.config, "max_position_embeddings", None)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.stop_window = max((len(s) for s in self.config.stop_strings), default=0)
        self.options = self._options()

    def _options(self) -> dict:
        """generate's keyword arguments besides the inputs, the length and the stopping criterion."""
        stated = getattr(self.model, "generation_config", None)
        refused = {key: getattr(stated, key) for key in _REFUSED if getattr(stated, key, None) not in (None, [], {})}
        if refused:
            raise UserError(f"the model's generation_config sets {refused}, which change greedy tokens; the "
                            f"{self.spec['tag']} peer decodes plain greedy: remove them from generation_config.json")
        options = {**_PLAIN_GREEDY, "eos_token_id": sorted(self.eos) or None, "pad_token_id": self.pad_id,
                   "suppress_tokens": list(self.excluded_ids) or None}
        if self.lookup:
            options.update(prompt_lookup_num_tokens=self.spec["params"]["tokens"],
                           max_matching_ngram_size=self.spec["params"]["max_matching_ngram_size"])
        return options

    # ------------------------------------------------------------------------------------------------ public API
    def generate(self, prompts, progress: bool = False) -> list[Generation]:
        """Decode ``prompts`` (strings or token-id lists); results keep the input order."""
        ids = [encode_prompt(self.tokenizer, p, self.config.add_special_tokens, self.context) for p in prompts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch: less padding
        results: list[Generation | None] = [None] * len(ids)
        bar = tqdm(total=len(ids), disable=not progress, desc=f"decode[{self.spec['tag']}]", unit="prob")
        for lo in range(0, len(order), self.config.batch_size):
            chunk = order[lo:lo + self.config.batch_size]
            for i, gen in zip(chunk, self.decode_batch([ids[i] for i in chunk])):
                results[i] = gen
            bar.update(len(chunk))
        bar.close()
        return results

    @torch.no_grad()
    def decode_batch(self, prompt_ids: list[list[int]]) -> list[Generation]:
        """One ``generate`` call over left-padded prompts."""
        width = max(len(p) for p in prompt_ids)
        inputs = torch.full((len(prompt_ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(inputs)
        for r, p in enumerate(prompt_ids):
            inputs[r, width - len(p):], mask[r, width - len(p):] = torch.tensor(p), 1
        room = self.config.max_new_tokens if self.context is None else min(self.config.max_new_tokens,
                                                                            self.context - width)
        with _Forwards(self.model) as forwards:
            rule = _StopRule(self, len(prompt_ids), width, room, forwards)
            self.model.generate(input_ids=inputs.to(self.model.device), attention_mask=mask.to(self.model.device),
                                max_new_tokens=room, stopping_criteria=StoppingCriteriaList([rule]), **self.options)
        return [rule.generation(r, forwards.first_s) for r in range(len(prompt_ids))]


class _Forwards:
    """Counts the model's forwards while open (a forward pre-hook) and times the first one."""

    def __init__(self, model):
        self.model, self.count, self.first_s, self._start = model, 0, 0.0, 0.0

    def __enter__(self) -> "_Forwards":
        self.handles = [self.model.register_forward_pre_hook(self._before),
                        self.model.register_forward_hook(self._after)]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()

    def _before(self, module, args) -> None:
        self.count += 1
        if self.count == 1:
            self._start = time.perf_counter()

    def _after(self, module, args, output) -> None:
        if self.count == 1 and not self.first_s:
            self.first_s = time.perf_counter() - self._start


class _StopRule(StoppingCriteria):
    """Our decoders' stop rule over each row's generated tokens, called by generate after every forward; records
    where each row stopped, the forwards it took and when."""

    def __init__(self, decoder: PeerDecoder, rows: int, width: int, room: int, forwards: _Forwards):
        self.decoder, self.width, self.room, self.forwards = decoder, width, room, forwards
        self.tokens: list[list[int]] = [[] for _ in range(rows)]
        self.stops: list[tuple[int, str] | None] = [None] * rows
        self.nfe, self.times = [0] * rows, [0.0] * rows
        self.start = time.perf_counter()

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        new = input_ids[:, self.width + len(self.tokens[0]):].tolist()  # every row grows by the same count
        d = self.decoder
        for r, tokens in enumerate(self.tokens):
            seen = len(tokens)
            tokens.extend(new[r])
            if self.stops[r] is None:
                self.stops[r] = stop_point(d.tokenizer, tokens, seen, d.eos, d.config.stop_strings, d.stop_window,
                                           self.room)
                self.nfe[r], self.times[r] = self.forwards.count, time.perf_counter() - self.start
        return torch.tensor([stop is not None for stop in self.stops], device=input_ids.device)

    def generation(self, row: int, prefill_s: float) -> Generation:
        keep, reason = self.stops[row] or (len(self.tokens[row]), "length")  # generate stopped it first (max_length)
        ids = self.tokens[row][:keep]
        body = ids[:-1] if reason == "eos" else ids
        text = cut_at_stop(self.decoder.tokenizer.decode(body), self.decoder.config.stop_strings)
        return Generation(text, ids, self.nfe[row], reason, self.times[row], prefill_s)
