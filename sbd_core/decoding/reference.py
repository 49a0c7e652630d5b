"""The reference block decoder: the paper's inference procedure written to be read, on a Hugging Face cache (SBD mode
with a solver, NTP mode, and the verify loop's adapter :class:`ReferenceVerify`). It is the oracle the engine is tested
against. The rules it implements (the re-feed rule, stopping, NFE, tokens never written) are written in
docs/engine.md ("The decoding rule"); verify's in docs/verify.md."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm
from transformers import DynamicCache

from ..decode_config import DecodeConfig
from ..masking import backend_mask
from ..train_config import SHIFT_REVEALED
from .setup import SHIFT_FIRST, DecodeSetup, Generation, Row
from .solvers import exclude_tokens, get_solver
from .verify import VerifyLoop


@dataclass
class Batch:
    """One batch of the reference decoder: its rows' records (input order) and the slots still decoding."""

    rows: list[Row]  # per prompt of the batch
    live: list[Row]  # slot -> the row it decodes (rows leave at block boundaries)
    prompt_len: torch.Tensor  # [slots]
    prompt_valid: torch.Tensor  # [slots, P] False on left padding
    gen_len: int = 0  # tokens of the generation committed so far (same for all slots)
    padded: torch.Tensor | None = field(default=None, repr=False)  # [rows, P] the left-padded prompts


class BlockDecoder:
    """Decode prompts with a Hugging Face causal LM in SBD mode (block + solver) or NTP mode."""

    def __init__(self, model, tokenizer, config: DecodeConfig | None = None, solver=None):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.config = config or DecodeConfig()
        self.solver = solver or get_solver("topk", n=1)
        self.verify = self.config.mode == "sbd" and getattr(self.solver, "verify", "none") != "none"
        self.setup = DecodeSetup.of(model, tokenizer, self.config, self.solver)
        self.cache = None

    # ----------------------------------------------------------------------------------------------- public API
    def generate(self, prompts, progress: bool = False) -> list[Generation]:
        """Decode ``prompts`` (strings or lists of token ids) in batches; results keep the input order."""
        ids = [self.setup.encode(p) for p in prompts]
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
        if self.verify:
            return ReferenceVerify(self, prompt_ids).run()
        st = self.start(prompt_ids)
        if self.config.mode == "ntp":
            self._decode_ntp(st)
        else:
            head = self.prefill(st, st.padded)
            self._decode_sbd(st, head)
        return [row.generation(self.setup) for row in st.rows]

    def start(self, prompt_ids: list[list[int]]) -> Batch:
        """A new batch of left-padded prompts over an empty cache; every row's room is the longest prompt's."""
        device, n = self.model.device, len(prompt_ids)
        width = max(len(p) for p in prompt_ids)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        padded = torch.full((n, width), pad, dtype=torch.long, device=device)
        valid = torch.zeros((n, width), dtype=torch.bool, device=device)
        for r, p in enumerate(prompt_ids):
            padded[r, width - len(p) :] = torch.tensor(p, device=device)
            valid[r, width - len(p) :] = True
        self.cache = DynamicCache(config=self.model.config)
        room = self.setup.room(width)
        rows = [Row(room) for _ in prompt_ids]
        return Batch(rows, list(rows), torch.tensor([len(p) for p in prompt_ids], device=device), valid,
                     padded=padded)

    # ----------------------------------------------------------------------------------------------- forwards
    def forward(self, ids, positions, allowed, keep_logits: int) -> torch.Tensor:
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

    def crop(self, tokens: int) -> None:
        """Drop the last ``tokens`` columns of the cache (a block's keys, computed bidirectionally)."""
        self.cache.crop(-tokens)

    def select_rows(self, index: torch.Tensor) -> None:
        """Keep only the cache rows ``index`` (finished rows leave)."""
        self.cache.batch_select_indices(index)

    @staticmethod
    def _keys_valid(st: Batch, kv_len: int) -> torch.Tensor:
        """[slots, kv_len] bool: False on the prompts' left padding, True elsewhere."""
        valid = torch.ones(len(st.live), kv_len, dtype=torch.bool, device=st.prompt_valid.device)
        width = min(kv_len, st.prompt_valid.shape[1])
        valid[:, :width] = st.prompt_valid[:, :width]
        return valid

    def prefill(self, st: Batch, padded: torch.Tensor) -> torch.Tensor | None:
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
        return self.forward(padded, positions, allowed, keep_logits=1)

    def _block_forward(self, st: Batch, block, prev):
        """Feed ``[prev (causal) | block (bidirectional)]``; crop the block off the cache; return the block's logits
        (for shifted decoding, with ``prev``: also the logits of its last token in front)."""
        fed = block if prev is None else torch.cat([prev, block], dim=1)
        n_prev, q = fed.shape[1] - block.shape[1], fed.shape[1]
        cached = self.cache.get_seq_length()
        offset = st.gen_len - n_prev  # generation index of the first fed token
        positions = st.prompt_len[:, None] + offset + torch.arange(q, device=fed.device)[None]
        cols = torch.arange(cached + q, device=fed.device)
        allowed = cols[None, :] <= (cached + torch.arange(q, device=fed.device))[:, None]
        allowed[n_prev:] = True  # block queries see every key: cache, re-fed block and the whole block
        allowed = allowed[None] & self._keys_valid(st, cached + q)[:, None, :]
        keep = block.shape[1] + (1 if self.setup.shifted and prev is not None else 0)
        logits = self.forward(fed, positions, allowed, keep_logits=keep)
        self.crop(block.shape[1])
        return logits

    def _shift(self, logits, head, refed, masked):
        """The block logits of shifted decoding: position 0 at the token before the block (its NTP logit ``head``,
        [slots, 1, V], which only the prefix decides: it stays the same for the whole block); position j at j - 1 for
        a model trained with ``matp_shift`` (with ``matp_shift: revealed``, at j itself where position j - 1 is still
        ``masked``), at j itself with ``first_token: ntp`` (:data:`SHIFT_FIRST`). Returns ``(block logits, head)``."""
        if refed is not None:  # this forward fed the token before the block: its logit is the new head
            head, logits = logits[:, :1], logits[:, 1:]
        if head is None:
            raise ValueError("a block's first token is read off the NTP logit of the token before it here: the prompt "
                             "must not be empty")
        later = logits[:, 1:] if self.setup.shift == SHIFT_FIRST else logits[:, :-1]
        if self.setup.shift == SHIFT_REVEALED:
            later = torch.where(masked[:, :-1, None], logits[:, 1:], later)
        return torch.cat([head, later], dim=1), head

    # ----------------------------------------------------------------------------------------------- loops
    def _decode_sbd(self, st: Batch, head=None) -> None:
        """SBD mode; ``head``: the prefill's last logits (shifted decoding's prediction of the first token)."""
        prev, max_new = None, st.rows[0].room
        while st.live and st.gen_len < max_new:
            length = min(self.config.block_size, max_new - st.gen_len)
            block = torch.full((len(st.live), length), self.setup.mask_id, dtype=torch.long, device=self.model.device)
            masked = torch.ones_like(block, dtype=torch.bool)
            first = True
            while masked.any():
                refed = prev if first else None
                logits = self._block_forward(st, block, refed)
                if self.setup.shifted:
                    logits, head = self._shift(logits, head, refed, masked)
                active = masked.any(dim=1).tolist()
                reveal, tokens = self._solve(logits, masked)
                block = torch.where(reveal, tokens, block)
                masked &= ~reveal
                width = length + (0 if refed is None else refed.shape[1])
                self._after_forward(st, block, masked, active, width)
                first = False
            st.gen_len += length
            prev = self._drop_finished(st, block)

    def _decode_ntp(self, st: Batch) -> None:
        padded, max_new = st.padded, st.rows[0].room
        self.prefill(st, padded[:, :-1])
        token = padded[:, -1:]
        while st.live and st.gen_len < max_new:
            cached = self.cache.get_seq_length()
            positions = st.prompt_len[:, None] - 1 + st.gen_len
            allowed = self._keys_valid(st, cached + 1)[:, None, :]
            logits = self.forward(token, positions, allowed, keep_logits=1)
            masked = torch.ones(len(st.live), 1, dtype=torch.bool, device=padded.device)
            _, token = self._solve(logits, masked)
            # the single new position is revealed in every row: nothing stays masked
            self._after_forward(st, token, ~masked, [True] * len(st.live), 1)
            st.gen_len += 1
            token = self._drop_finished(st, token)

    def _solve(self, logits, masked):
        """The solver's (reveal, tokens) on ``logits`` without the excluded ids: the one place both modes decide."""
        return self.solver(exclude_tokens(logits, self.setup.excluded_ids), masked)

    # ----------------------------------------------------------------------------------------------- bookkeeping
    def _after_forward(self, st: Batch, block, masked, active, width: int) -> None:
        """Count the forward (its ``width`` tokens per row) for active rows, extend revealed prefixes, apply the stop
        rule."""
        first_masked = torch.where(masked.any(1), masked.int().argmax(1), masked.shape[1]).tolist()
        block_rows = block.tolist()
        for slot, row in enumerate(st.live):
            if row.done or not active[slot]:
                continue
            row.count(width)
            new = block_rows[slot][len(row.tokens) - st.gen_len : first_masked[slot]]
            if row.commit(new, self.setup):
                masked[slot] = False

    def _drop_finished(self, st: Batch, last: torch.Tensor) -> torch.Tensor:
        """Remove finished rows from the batch and the cache (at most once per block)."""
        keep = [slot for slot, row in enumerate(st.live) if not row.done]
        if len(keep) == len(st.live):
            return last
        index = torch.tensor(keep, dtype=torch.long, device=last.device)
        if keep:
            self.select_rows(index)
        st.live = [st.live[s] for s in keep]
        st.prompt_len, st.prompt_valid = st.prompt_len[index], st.prompt_valid[index]
        return last[index]


class ReferenceVerify(VerifyLoop):
    """The verify loop on the reference decoder over one batch. Each forward feeds every row ``[pad | fed tokens
    (causal) | block (bidirectional) | pad]`` at its own positions; the fed columns stay in the Hugging Face cache, the
    block is cropped off; ``key_valid`` [rows, cache columns] marks the columns a row may attend to (not padding, not
    a rejected token)."""

    def __init__(self, decoder: BlockDecoder, prompt_ids: list[list[int]]):
        super().__init__(decoder.solver, decoder.setup, decoder.model.device)
        self.dec = decoder
        self.st = decoder.start(prompt_ids)
        self.key_valid = self.st.prompt_valid.clone()

    def run(self) -> list[Generation]:
        """Prefill, decode every row to its stop, and return the generations."""
        prefill_logits = self.dec.prefill(self.st, self.st.padded)
        self.rows = [self.new_row(record, prefill_logits[s, -1]) for s, record in enumerate(self.st.rows)]
        while self.rows:
            self._step()
            self._drop_finished()
        return [row.generation(self.setup, verified=True) for row in self.st.rows]

    def _forward(self, fed: list[list[int]], width: int) -> torch.Tensor:
        """One forward of every row's fed tokens (left-padded to ``width``) and block; returns the logits of all
        columns with the excluded ids at -inf, and leaves the fed columns (not the blocks) in the cache."""
        dev, pad = self.dec.model.device, self.setup.mask_id
        blocks = [row.block or [] for row in self.rows]
        k = max(len(b) for b in blocks)
        ids = torch.full((len(self.rows), width + k), pad, dtype=torch.long, device=dev)
        valid = torch.zeros(ids.shape, dtype=torch.bool, device=dev)
        positions = torch.zeros(ids.shape, dtype=torch.long, device=dev)
        for s, (row, f, b) in enumerate(zip(self.rows, fed, blocks)):
            cols = list(range(width - len(f), width)) + list(range(width, width + len(b)))
            ids[s, cols] = torch.tensor(f + b, dtype=torch.long, device=dev)
            valid[s, cols] = True
            positions[s, cols] = self.st.prompt_len[s] + row.fed + torch.arange(len(cols), device=dev)
        q = width + k
        idx = torch.arange(q, device=dev)
        sees = idx[None, :] <= idx[:, None]
        sees[width:] = True  # block queries see every fed token and the whole block
        new = (sees[None] & valid[:, None, :]) | torch.eye(q, dtype=torch.bool, device=dev)[None]  # pads: themselves
        cached = self.key_valid[:, None, :].expand(-1, q, -1)
        logits = self.dec.forward(ids, positions, torch.cat([cached, new], dim=2), keep_logits=q)
        if k:
            self.dec.crop(k)
        self.key_valid = torch.cat([self.key_valid, valid[:, :width]], dim=1)
        return exclude_tokens(logits.float(), self.setup.excluded_ids)

    def _drop_rejected(self, s: int, fed: int, kept: int) -> None:
        self.key_valid[s, self.key_valid.shape[1] - fed + kept :] = False

    def _drop_finished(self) -> None:
        """Remove stopped rows from the batch, the cache and ``key_valid``."""
        keep = [s for s, row in enumerate(self.rows) if not row.record.done]
        if len(keep) == len(self.rows):
            return
        if keep:
            index = torch.tensor(keep, dtype=torch.long, device=self.key_valid.device)
            self.dec.select_rows(index)
            self.key_valid = self.key_valid[index]
            self.st.prompt_len = self.st.prompt_len[index]
        self.rows = [self.rows[s] for s in keep]
        self.st.live = [self.st.live[s] for s in keep]
