"""Block decoder with an exact KV cache (the paper's inference procedure) and an NTP decoder on the same machinery.

SBD mode, per batch of left-padded prompts:
  1. prefill the prompts causally;
  2. each block starts as ``k`` mask tokens; every forward feeds the block (bidirectional inside, attending to the whole
     cache), the solver reveals >= 1 masked position per row, and the block's keys/values are cropped off the cache again;
  3. the re-feed rule (this is its one statement; the engine, time(k) and the roofline refer here): the block's
     keys/values were computed with masks in it and bidirectionally, so they never stay in the cache; the first forward
     of the next block re-feeds the finished block as ordinary causal tokens in front of the new block (2k tokens),
     and their keys/values stay. The cache therefore only ever holds keys/values computed causally over real tokens,
     exactly what an NTP model would compute. The last block is never re-fed (nothing reads its keys).
NTP mode prefills all but the last prompt token and then feeds one token per forward (plain greedy decoding unless the
solver samples), so its NFE equals the number of generated tokens.
Verified SBD (a solver with ``verify``: :mod:`sbd_core.verify`, whose loop runs on this decoder's forward, prefill
and stop rule) checks every finished block against NTP mode in the forward that re-feeds it, so it writes NTP mode's
tokens; its rows advance on their own. It is the oracle of the engine's verify path (:mod:`sbd_core.engine.verified`),
which runs the same loop; ``verify: sample`` decodes here whatever ``config.engine`` says.

Tokens never written (both modes, every solver; :func:`never_generated_ids`): the SBD mask token and a padding token of
its own. Their logits are set to -inf before the solver sees them (:func:`sbd_core.solvers.exclude_tokens`), so the
solver's entropies and confidences are those of the distribution renormalised over the other tokens.

Stopping (our reading of the EB paper's generate-until): a row stops once the EOS token, the end of a stop
string, or ``max_new_tokens`` lies inside the revealed prefix of its generation (every earlier position revealed). Masks
after that point need not be resolved. NFE per row = forwards after prefill in which the row still had masked positions,
up to and including the forward that met the stop condition; rows of a batch move block by block together, and a row that
has finished its block or its generation waits without counting. Finished rows leave the batch at the next block boundary
(one cache row-selection then; nothing is copied per forward).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import torch
from tqdm.auto import tqdm
from transformers import DynamicCache

from .engine import FastDecoder
from .generation import (Batch, DecodeConfig, Generation, cut_at_stop, encode_prompt, never_generated_ids,
                         resolve_eos)
from .mask_token import mask_token_id
from .masking import backend_mask
from .solvers import exclude_tokens, get_solver
from .verify import ReferenceVerify

log = logging.getLogger("sbd_core")

__all__ = ["BlockDecoder", "DecodeConfig", "Generation", "cut_at_stop", "generate", "never_generated_ids"]


class BlockDecoder:
    """Decode prompts with a Hugging Face causal LM in SBD mode (block + solver) or NTP mode."""

    def __init__(self, model, tokenizer, config: DecodeConfig | None = None, solver=None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.config = config or DecodeConfig()
        self.solver = solver or get_solver("topk", n=1)
        self.verify = self.config.mode == "sbd" and getattr(self.solver, "verify", "none") != "none"
        if getattr(self.solver, "verify", None) == "sample" and self.config.engine == "fast":
            log.info("verify: sample: decoding with the reference decoder (the engine verifies greedy drafts only)")
            self.config = replace(self.config, engine="reference")
        self.eos = resolve_eos(self.config, tokenizer)
        self.mask_id = mask_token_id(model) if self.config.mode == "sbd" else None
        self.excluded_ids = never_generated_ids(model, tokenizer, self.eos)
        self.context = getattr(model.config, "max_position_embeddings", None)
        self.cache = None
        self.cache_valid = None  # verify: [rows, cache columns] the columns each row left in the cache attends to
        self.engine: FastDecoder | None = None  # engine "fast": set up by the first generate call, then reused

    # ----------------------------------------------------------------------------------------------- public API
    def generate(self, prompts, progress: bool = False) -> list[Generation]:
        """Decode ``prompts`` (strings or lists of token ids) in batches; results keep the input order. With
        ``config.engine == "fast"`` the engine (:mod:`sbd_core.engine`) decodes them instead, with the same results."""
        if self.config.engine == "fast":
            if self.engine is None:
                self.engine = FastDecoder(self.model, self.tokenizer, self.config, self.solver)
            return self.engine.generate(prompts, progress)
        ids = [self._encode(p) for p in prompts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch: less padding
        results: list[Generation | None] = [None] * len(ids)
        bar = tqdm(total=len(ids), disable=not progress, desc=f"decode[{self.config.mode}]", unit="prob")
        nfe_total = tok_total = 0
        for lo in range(0, len(order), self.config.batch_size):
            chunk = order[lo : lo + self.config.batch_size]
            for i, gen in zip(chunk, self.decode_batch([ids[i] for i in chunk])):
                results[i] = gen
                nfe_total, tok_total = nfe_total + gen.nfe, tok_total + gen.num_tokens
            bar.update(len(chunk))
            bar.set_postfix(nfe=nfe_total, tok_per_fwd=f"{tok_total / max(nfe_total, 1):.2f}")
        bar.close()
        return results

    @torch.no_grad()
    def decode_batch(self, prompt_ids: list[list[int]]) -> list[Generation]:
        """Decode one batch of tokenized prompts."""
        st, padded = self._start(prompt_ids)
        max_new = self._max_new(st)
        if self.config.mode == "ntp":
            self._decode_ntp(st, padded, max_new)
        elif self.verify:
            loop = ReferenceVerify(self, st, max_new)
            loop.run(self._prefill(st, padded))
            self.cache_valid = loop.key_valid
        else:
            self._prefill(st, padded)
            self._decode_sbd(st, max_new)
        return [self._finish(st, r) for r in range(len(prompt_ids))]

    # ----------------------------------------------------------------------------------------------- setup
    def _encode(self, prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt, self.config.add_special_tokens, self.context)

    def _start(self, prompt_ids):
        device, n = self.model.device, len(prompt_ids)
        width = max(len(p) for p in prompt_ids)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        padded = torch.full((n, width), pad, dtype=torch.long, device=device)
        valid = torch.zeros((n, width), dtype=torch.bool, device=device)
        for r, p in enumerate(prompt_ids):
            padded[r, width - len(p) :] = torch.tensor(p, device=device)
            valid[r, width - len(p) :] = True
        self.cache = DynamicCache(config=self.model.config)
        return Batch.new(torch.tensor([len(p) for p in prompt_ids], device=device), valid), padded

    def _max_new(self, st: Batch) -> int:
        room = self.config.max_new_tokens
        if self.context is not None:
            room = min(room, self.context - int(st.prompt_len.max()))
        return room

    # ----------------------------------------------------------------------------------------------- forwards
    def _forward(self, ids, positions, allowed, keep_logits: int):
        """One forward over new tokens ``ids`` on top of the cache; ``allowed`` is [slots, q, cached + q] bool."""
        allowed = allowed.unsqueeze(1)
        out = self.model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=backend_mask(self.model, allowed),
            cache=self.cache,
            use_cache=True,
            logits_to_keep=keep_logits,
        )
        return out.logits

    @staticmethod
    def _keys_valid(st: Batch, kv_len: int) -> torch.Tensor:
        """[slots, kv_len] bool: False on the prompts' left padding, True elsewhere."""
        valid = torch.ones(len(st.rows), kv_len, dtype=torch.bool, device=st.prompt_valid.device)
        width = min(kv_len, st.prompt_valid.shape[1])
        valid[:, :width] = st.prompt_valid[:, :width]
        return valid

    def _prefill(self, st: Batch, padded: torch.Tensor) -> torch.Tensor | None:
        """Causal forward over the (left-padded) prompt columns; pad queries attend to themselves only. Returns the
        logits of the last column [slots, 1, V] (NTP's prediction of the first generated token)."""
        width = padded.shape[1]
        if width == 0:
            return None
        valid = st.prompt_valid[:, :width]
        positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
        idx = torch.arange(width, device=padded.device)
        causal = (idx[None, :] <= idx[:, None])[None] & valid[:, None, :]
        # a pad query keeps itself: a fully masked row could put NaN into the cache on some kernels
        allowed = causal | torch.eye(width, dtype=torch.bool, device=padded.device)[None]
        return self._forward(padded, positions, allowed, keep_logits=1)

    def _block_forward(self, st: Batch, block, prev):
        """Feed ``[prev (causal) | block (bidirectional)]``; crop the block off the cache; return the block's logits."""
        fed = block if prev is None else torch.cat([prev, block], dim=1)
        n_prev, q = fed.shape[1] - block.shape[1], fed.shape[1]
        cached = self.cache.get_seq_length()
        offset = st.gen_len - n_prev  # generation index of the first fed token
        positions = st.prompt_len[:, None] + offset + torch.arange(q, device=fed.device)[None]
        cols = torch.arange(cached + q, device=fed.device)
        allowed = cols[None, :] <= (cached + torch.arange(q, device=fed.device))[:, None]
        allowed[n_prev:] = True  # block queries see every key: cache, re-fed block and the whole block
        allowed = allowed[None] & self._keys_valid(st, cached + q)[:, None, :]
        logits = self._forward(fed, positions, allowed, keep_logits=block.shape[1])
        self.cache.crop(-block.shape[1])
        return logits

    # ----------------------------------------------------------------------------------------------- loops
    def _decode_sbd(self, st: Batch, max_new: int) -> None:
        prev = None
        while st.rows and st.gen_len < max_new:
            length = min(self.config.block_size, max_new - st.gen_len)
            block = torch.full((len(st.rows), length), self.mask_id, dtype=torch.long, device=self.model.device)
            masked = torch.ones_like(block, dtype=torch.bool)
            first = True
            while masked.any():
                refed = prev if first else None
                logits = self._block_forward(st, block, refed)
                active = masked.any(dim=1).tolist()
                reveal, tokens = self._solve(logits, masked)
                block = torch.where(reveal, tokens, block)
                masked &= ~reveal
                width = length + (0 if refed is None else refed.shape[1])
                self._after_forward(st, block, masked, active, max_new, width)
                first = False
            st.gen_len += length
            prev = self._drop_finished(st, block)

    def _decode_ntp(self, st: Batch, padded: torch.Tensor, max_new: int) -> None:
        self._prefill(st, padded[:, :-1])
        token = padded[:, -1:]
        while st.rows and st.gen_len < max_new:
            cached = self.cache.get_seq_length()
            positions = st.prompt_len[:, None] - 1 + st.gen_len
            allowed = self._keys_valid(st, cached + 1)[:, None, :]
            logits = self._forward(token, positions, allowed, keep_logits=1)
            masked = torch.ones(len(st.rows), 1, dtype=torch.bool, device=padded.device)
            _, token = self._solve(logits, masked)
            # the single new position is revealed in every row: nothing stays masked
            self._after_forward(st, token, ~masked, [True] * len(st.rows), max_new, 1)
            st.gen_len += 1
            token = self._drop_finished(st, token)

    def _solve(self, logits, masked):
        """The solver's (reveal, tokens) on ``logits`` without the excluded ids: the one place both modes decide."""
        return self.solver(exclude_tokens(logits, self.excluded_ids), masked)

    # ----------------------------------------------------------------------------------------------- bookkeeping
    def _after_forward(self, st: Batch, block, masked, active, max_new: int, width: int) -> None:
        """Count the forward (its ``width`` tokens per row) for active rows, extend revealed prefixes, apply the stop
        rule."""
        first_masked = torch.where(masked.any(1), masked.int().argmax(1), masked.shape[1]).tolist()
        block_rows = block.tolist()
        for slot, row in enumerate(st.rows):
            if st.done[row] or not active[slot]:
                continue
            st.nfe[row] += 1
            st.widths[row].append(width)
            new = block_rows[slot][len(st.tokens[row]) - st.gen_len : first_masked[slot]]
            if self._check_stop(st, row, new, max_new):
                masked[slot] = False
                st.finish_time[row] = time.perf_counter() - st.start

    def _check_stop(self, st: Batch, row: int, new: list[int], max_new: int) -> bool:
        """Extend the row's revealed prefix by ``new``; stop at the first stop string, EOS or the length cap."""
        return st.commit(row, new, self.tokenizer, self.eos, self.config.stop_strings, max_new)

    def _drop_finished(self, st: Batch, last: torch.Tensor) -> torch.Tensor:
        """Remove finished rows from the batch and the cache (at most once per block)."""
        keep = [slot for slot, row in enumerate(st.rows) if not st.done[row]]
        if len(keep) == len(st.rows):
            return last
        index = torch.tensor(keep, dtype=torch.long, device=last.device)
        if keep:
            self.cache.batch_select_indices(index)
        st.rows = [st.rows[s] for s in keep]
        st.prompt_len, st.prompt_valid = st.prompt_len[index], st.prompt_valid[index]
        return last[index]

    def _finish(self, st: Batch, row: int) -> Generation:
        if not st.done[row]:  # ran out of room (context) before max_new_tokens
            st.keep[row], st.reason[row] = len(st.tokens[row]), "length"
            st.finish_time[row] = time.perf_counter() - st.start
        ids = st.tokens[row][: st.keep[row]]
        body = ids[:-1] if st.reason[row] == "eos" else ids
        text = cut_at_stop(self.tokenizer.decode(body), self.config.stop_strings)
        verified = {"accepted": st.accepted[row], "drafted": st.drafted[row]} if self.verify else {}
        return Generation(text, ids, st.nfe[row], st.reason[row], st.finish_time[row], widths=st.widths[row],
                          **verified)


def generate(model, tokenizer, prompts, config: DecodeConfig | None = None, solver=None, progress=False):
    """Convenience wrapper: ``BlockDecoder(model, tokenizer, config, solver).generate(prompts)``."""
    return BlockDecoder(model, tokenizer, config, solver).generate(prompts, progress=progress)
