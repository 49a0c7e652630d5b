"""Training-free peers of SBD: Hugging Face ``generate`` on the NTP arm, greedy (``hf_generate``) or with prompt-lookup
decoding (``prompt_lookup``), in the decoders' API and results (:class:`PeerDecoder`). Their rule (tokens, stop, NFE,
batching, times) is written in docs/peers.md."""

from __future__ import annotations

import time
from dataclasses import replace

import torch
from tqdm.auto import tqdm
from transformers import StoppingCriteria, StoppingCriteriaList

from ..decode_config import DecodeConfig
from ..errors import UserError
from .setup import DecodeSetup, Generation, Row
from ..samplers import Sampler, as_sampler, make_sampler

# generate fills the options it is not given from the checkpoint's generation_config: these are given their neutral
# values, so nothing there changes a greedy token; the options below without one are refused when a checkpoint sets them
_PLAIN_GREEDY = {"do_sample": False, "num_beams": 1, "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0,
                 "no_repeat_ngram_size": 0, "min_new_tokens": 0}  # min_new_tokens overrides a min_length
_REFUSED = ("bad_words_ids", "sequence_bias", "forced_bos_token_id", "forced_eos_token_id", "begin_suppress_tokens",
            "exponential_decay_length_penalty")


class PeerDecoder:
    """Decode prompts with ``model.generate``: a training-free peer (``sampler``: a peer :class:`Sampler`)."""

    def __init__(self, model, tokenizer, config: DecodeConfig | None = None, sampler: Sampler | dict | None = None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.sampler = as_sampler(sampler or make_sampler("hf_generate"))
        if not self.sampler.is_peer:
            raise ValueError(f"PeerDecoder decodes the training-free peers, got {self.sampler!r}")
        self.lookup = self.sampler.name == "prompt_lookup"
        config = config or DecodeConfig(mode="ntp")
        self.config = replace(config, batch_size=1) if self.lookup else config  # transformers: batch 1 only
        self.setup = DecodeSetup.of(model, tokenizer, self.config)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.options = self._options()

    def _options(self) -> dict:
        """generate's keyword arguments besides the inputs, the length and the stopping criterion."""
        stated = getattr(self.model, "generation_config", None)
        refused = {key: getattr(stated, key) for key in _REFUSED if getattr(stated, key, None) not in (None, [], {})}
        if refused:
            raise UserError(f"the model's generation_config sets {refused}, which change greedy tokens; the "
                            f"{self.sampler.tag} peer decodes plain greedy: remove them from generation_config.json")
        options = {**_PLAIN_GREEDY, "eos_token_id": sorted(self.setup.eos) or None, "pad_token_id": self.pad_id,
                   "suppress_tokens": list(self.setup.excluded_ids) or None}
        if self.lookup:
            options.update(prompt_lookup_num_tokens=self.sampler.params["tokens"],
                           max_matching_ngram_size=self.sampler.params["max_matching_ngram_size"])
        return options

    # ------------------------------------------------------------------------------------------------ public API
    def generate(self, prompts, progress: bool = False) -> list[Generation]:
        """Decode ``prompts`` (strings or token-id lists); results keep the input order."""
        ids = [self.setup.encode(p) for p in prompts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch: less padding
        results: list[Generation | None] = [None] * len(ids)
        bar = tqdm(total=len(ids), disable=not progress, desc=f"decode[{self.sampler.tag}]", unit="prob")
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
        room = self.setup.room(width)
        with _Forwards(self.model) as forwards:
            rule = _StopRule(self, len(prompt_ids), width, room, forwards)
            self.model.generate(input_ids=inputs.to(self.model.device), attention_mask=mask.to(self.model.device),
                                max_new_tokens=room, stopping_criteria=StoppingCriteriaList([rule]), **self.options)
        return [row.generation(self.setup) for row in rule.finished(forwards.first_s)]


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
        self.setup, self.width, self.forwards = decoder.setup, width, forwards
        self.rows = [Row(room) for _ in range(rows)]
        self.seen = 0  # tokens generated so far (every row grows by the same count)

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        new = input_ids[:, self.width + self.seen:].tolist()
        self.seen = input_ids.shape[1] - self.width
        for row, tokens in zip(self.rows, new):
            if not row.done:
                row.commit(tokens, self.setup)
                row.nfe = self.forwards.count
        return torch.tensor([row.done for row in self.rows], device=input_ids.device)

    def finished(self, prefill_s: float) -> list[Row]:
        """The rows once generate returned (a row it stopped first, at max_length, ran out of room: ``length``)."""
        for row in self.rows:
            row.prefill_s = prefill_s
        return self.rows
