"""Oracle checks for the decoder that never compare two code paths' choices on near-tied scores.

Why: a tiny random model's scores nearly tie (the block positions all hold the mask token; their entropies measured
4.6341782 / 4.6341791 / 4.6341767), and rounding differs between a left-padded batch and a lone row, so "same tokens as
the slow reference" failed on one machine while the decoder was right. Two checks replace it, neither weaker:

* :func:`check_sbd_path` follows the decoder's *own* path. Every forward's logits, as the solver saw them, must equal
  (within ``ATOL``) a slow recomputation from scratch with no cache; what the decoder feeds, what stays masked, the
  stop, the tokens it returns and its NFE are rebuilt from the solver's answers alone. A wrong position, a stale cache
  entry or a bookkeeping slip changes logits by far more than ``ATOL`` (checked by planting such bugs).
* :func:`check_greedy_path` compares NTP decoding with ``model.generate``: logits must agree at every step and tokens
  must be equal until a step where generate's own top-2 gap is below ``TIE_BOUND``; after such a step the two
  paths condition on different prefixes, so the rest is not compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.solvers import exclude_tokens, get_solver

ATOL = 1e-4  # float32 logits of two code paths differ by ~1e-6 on the tiny models; planted bugs move them by > 1e-3
TIE_BOUND = 1e-3  # a top-2 logit gap below this may flip between code paths; above it, tokens must agree


@dataclass
class Call:
    """One solver call: its inputs and answer, on the CPU."""

    logits: torch.Tensor  # [B,k,V] float32, excluded ids at -inf
    masked: torch.Tensor  # [B,k] bool
    reveal: torch.Tensor  # [B,k] bool
    tokens: torch.Tensor  # [B,k] long


class RecordingSolver:
    """Wraps a solver and keeps every call; its settings (``verify``, ``first_token``, ...) are the solver's."""

    def __init__(self, solver):
        self.solver, self.calls = solver, []

    def __getattr__(self, name):
        return getattr(self.solver, name)

    def __call__(self, logits, masked):
        reveal, tokens = self.solver(logits, masked)
        self.calls.append(Call(logits.detach().float().cpu(), masked.cpu().clone(), reveal.cpu(), tokens.cpu()))
        return reveal, tokens


def check_blocks_of_one_read_ntp_logits(model, tokenizer, prompts, sbd_solver, steps: int = 6) -> None:
    """SBD mode with blocks of one token where block position 0 is read off the NTP logit (a model trained with
    ``matp_shift``, or ``sbd_solver`` with ``first_token: ntp``): every prediction is then an NTP logit, so each step's
    logits equal NTP mode's (within ``ATOL``) and the tokens are NTP mode's, up to the first step where the two paths'
    float sums straddle a near tie (then the paths condition on different prefixes and the rest is not compared)."""
    ids = [tokenizer(p)["input_ids"] for p in prompts]
    runs = {}
    for mode, solver in (("sbd", sbd_solver), ("ntp", get_solver("topk", n=1))):
        recorder = RecordingSolver(solver)
        config = DecodeConfig(mode=mode, block_size=1, max_new_tokens=steps, eos_token_ids=())
        gens = BlockDecoder(model, tokenizer, config, recorder).decode_batch(ids)
        runs[mode] = (gens, recorder.calls)
    (sbd_gens, sbd_calls), (ntp_gens, ntp_calls) = runs["sbd"], runs["ntp"]
    assert len(sbd_calls) == len(ntp_calls) == steps
    for step, (a, b) in enumerate(zip(sbd_calls, ntp_calls)):
        if not torch.equal(a.tokens, b.tokens):
            top = b.logits.topk(2, dim=-1).values
            assert (top[..., 0] - top[..., 1]).min() < ATOL, f"step {step}: tokens differ"
            return
        _close(a.logits, b.logits, ATOL, f"step {step}")
    assert [g.token_ids for g in sbd_gens] == [g.token_ids for g in ntp_gens]


def top2_gap(scores: torch.Tensor) -> float:
    """Gap between the two largest entries of a 1-d score vector."""
    top = scores.float().topk(2).values
    return float(top[0] - top[1])


@torch.no_grad()
def eos_splitting(gens, block_size) -> int:
    """A token that, as EOS, stops some rows at other blocks than others (found in an EOS-free decode ``gens``)."""
    for token in sorted({t for g in gens for t in g.token_ids}):
        blocks = {next((i // block_size for i, t in enumerate(g.token_ids) if t == token), None) for g in gens}
        if len(blocks) > 1:
            return token
    raise AssertionError("no token stops rows at different blocks; pick other prompts")


def reference_logits(model, context: list[int], block: list[int], excluded, shifted: bool | str = False,
                     masked: list[bool] | None = None) -> torch.Tensor:
    """[len(block), V] logits of ``block`` after ``context``, one forward with no cache: causal over the context, the
    block bidirectional and seeing the whole context; ``excluded`` ids at -inf as the decoder's solver sees them.
    ``shifted`` (a model trained with ``matp_shift``): each block position's logits are read one position earlier, the
    first one's at the context's last token; ``"revealed"``: at the position itself where the one before it is
    ``masked`` (the block's masked positions); ``"first"`` (``first_token: ntp``): only the first one's."""
    n, c = len(context) + len(block), len(context)
    allowed = torch.ones(n, n, dtype=torch.bool).tril()
    allowed[c:] = True
    device = model.device
    out = model(input_ids=torch.tensor([context + block], device=device), attention_mask=allowed[None, None].to(device))
    rows = [c + j - 1 if shifted else c + j for j in range(len(block))]
    if shifted == "revealed":
        rows = [c + j if j and masked[j - 1] else row for j, row in enumerate(rows)]
    if shifted == "first":
        rows = [c + j if j else row for j, row in enumerate(rows)]
    return exclude_tokens(out.logits[0, rows].float().cpu(), excluded)


def _close(ours: torch.Tensor, ref: torch.Tensor, atol: float, where: str) -> None:
    diff = (ours - ref).nan_to_num(0.0, 0.0, 0.0).abs().max().item()  # equal infinities (excluded ids) give nan
    assert torch.equal(ours.isinf(), ref.isinf()) and diff <= atol, f"{where}: logits differ by {diff:.2e} > {atol}"


def check_sbd_path(model, prompts, gens, calls, block_size, max_new, eos, excluded, atol=ATOL, shifted=False) -> None:
    """Check one ``BlockDecoder.decode_batch(prompts)`` in SBD mode (no stop strings) against the slow reference.

    ``calls`` are its solver calls (:class:`RecordingSolver`), ``gens`` its results, ``eos`` its EOS ids, ``excluded``
    the ids it must never write. The reference rebuilds every row's block from the recorded reveals and tokens and
    checks, per forward: the masked set the solver got, and the logits of every row that still had masks. Per row: the
    stop (first EOS, else ``max_new`` tokens), the returned tokens, the stop reason and the NFE. ``shifted``: the
    model's ``matp_shift`` (:func:`reference_logits`).
    """
    mask_id = model.config.sbd_mask_token_id
    seqs, final, nfe = [list(p) for p in prompts], [None] * len(prompts), [0] * len(prompts)
    rows, pending, gen_len = list(range(len(prompts))), list(calls), 0
    while rows and gen_len < max_new:
        length = min(block_size, max_new - gen_len)
        block = {r: [mask_id] * length for r in rows}
        masked = {r: [True] * length for r in rows}
        while any(any(masked[r]) for r in rows):
            assert pending, "the decoder stopped calling the solver while positions were masked"
            call = pending.pop(0)
            assert call.masked.tolist() == [masked[r] for r in rows], f"masked set at generation index {gen_len}"
            for slot, r in enumerate(rows):
                if not any(masked[r]):
                    continue
                nfe[r] += 1
                ref = reference_logits(model, seqs[r], block[r], excluded, shifted, masked[r])
                _close(call.logits[slot], ref, atol, f"row {r}, block at {gen_len}, forward {nfe[r]}")
                for i in torch.nonzero(call.reveal[slot]).flatten().tolist():
                    assert masked[r][i], f"row {r}: position {i} revealed twice"
                    block[r][i], masked[r][i] = int(call.tokens[slot, i]), False
                prefix = (seqs[r] + block[r][: (masked[r] + [True]).index(True)])[len(prompts[r]):]
                if _stop_index(prefix, eos, max_new) is not None:
                    final[r], masked[r] = prefix, [False] * length
        for r in rows:
            seqs[r] += block[r]
        gen_len += length
        rows = [r for r in rows if final[r] is None]
    assert not pending, f"{len(pending)} solver calls after the last block"
    for r, gen in enumerate(gens):
        assert final[r] is not None, f"row {r} never met the stop rule"
        stop = _stop_index(final[r], eos, max_new)
        assert gen.token_ids == final[r][:stop], f"row {r}: returned tokens"
        assert gen.nfe == nfe[r], f"row {r}: NFE {gen.nfe}, reference {nfe[r]}"
        assert gen.stop_reason == ("eos" if final[r][stop - 1] in eos else "length"), f"row {r}: stop reason"


def _stop_index(prefix: list[int], eos, max_new: int) -> int | None:
    """Tokens kept when ``prefix`` (the revealed prefix of a generation) meets the stop rule, else None."""
    first_eos = next((i + 1 for i, t in enumerate(prefix) if t in eos), None)
    if first_eos is not None:
        return first_eos
    return max_new if len(prefix) >= max_new else None


def check_greedy_path(ours: list[int], our_logits: torch.Tensor, ref: list[int], ref_scores: torch.Tensor,
                      atol: float = ATOL, bound: float = TIE_BOUND) -> None:
    """Check greedy NTP tokens and per-step logits [T,V] against ``model.generate`` (its processed ``scores``): equal
    at every step, or up to a first differing token where generate's top-2 gap is below ``bound``."""
    for t, (a, b) in enumerate(zip(ours, ref)):
        _close(our_logits[t], ref_scores[t].float().cpu(), atol, f"step {t}")
        if a != b:
            gap = top2_gap(ref_scores[t])
            assert gap < bound, f"step {t}: token {a}, generate chose {b} with a top-2 gap of {gap:.2e} >= {bound}"
            return
    assert len(ours) == len(ref), f"{len(ours)} tokens, generate gave {len(ref)}"


def check_engine_refilling_slots(model, tokenizer, prompts, solver, slots: int, shifted=False) -> None:
    """:func:`check_engine_path` on a decode in which rows stop at different blocks (an EOS :func:`eos_splitting`
    picks), so ``slots`` rows at a time are refilled mid-run: a new row's first block reads its prompt while the other
    slots re-feed their finished blocks. Blocks of 4, 13 new tokens."""
    ids = [tokenizer(p)["input_ids"] for p in prompts]
    free = FastDecoder(model, tokenizer, DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=()), solver)
    eos = (eos_splitting(free.generate(ids), 4),)
    recorder = RecordingSolver(solver)
    config = DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=eos, batch_size=slots)
    engine = FastDecoder(model, tokenizer, config, recorder)
    gens = engine.generate(ids)
    check_engine_path(model, ids, gens, recorder.calls, slots, 4, 13, eos, excluded=engine.setup.excluded_ids,
                      shifted=shifted)


def check_engine_path(model, prompts, gens, calls, slots, block_size, max_new, eos, excluded, atol=ATOL,
                      shifted=False) -> None:
    """Check one fast-engine decode (SBD mode, no stop strings) of ``prompts`` with ``slots`` rows at a time.

    The engine's scheduling is part of what is checked: slot ``s`` starts with prompt ``s``; a slot freed by a stop
    takes the next prompt in input order (freed slots in increasing order). Per forward (one solver call over all
    slots): a slot without a row has nothing masked; a slot's masked set is its row's, padded with False to the
    block size; every masked row's logits equal :func:`reference_logits`; reveals and stops are rebuilt from the
    solver's answers. Per row: tokens, stop reason and NFE, as :func:`check_sbd_path`. ``shifted``: the model's
    ``matp_shift`` (:func:`reference_logits`).
    """
    mask_id = model.config.sbd_mask_token_id
    queue = list(range(len(prompts)))[::-1]
    slot_row: list[int | None] = [None] * slots
    seqs = [list(p) for p in prompts]
    block: dict[int, list[int]] = {}
    masked: dict[int, list[bool]] = {}
    gen_len, nfe, final = [0] * len(prompts), [0] * len(prompts), [None] * len(prompts)

    def start_block(r):
        length = min(block_size, max_new - gen_len[r])
        block[r], masked[r] = [mask_id] * length, [True] * length

    def admit(free):
        for s in free:
            if queue:
                slot_row[s] = queue.pop()
                start_block(slot_row[s])

    admit(range(slots))
    pending = list(calls)
    while any(r is not None for r in slot_row):
        assert pending, "the engine stopped calling the solver while rows were decoding"
        call = pending.pop(0)
        freed = []
        for s, r in enumerate(slot_row):
            if r is None:
                assert not call.masked[s].any(), f"slot {s} has no row but masked positions"
                continue
            length = len(block[r])
            assert call.masked[s].tolist() == masked[r] + [False] * (block_size - length), f"row {r}: masked set"
            nfe[r] += 1
            ref = reference_logits(model, seqs[r], block[r], excluded, shifted, masked[r])
            _close(call.logits[s, :length], ref, atol, f"row {r} (slot {s}), block at {gen_len[r]}, forward {nfe[r]}")
            assert not call.reveal[s, length:].any(), f"row {r}: revealed a position past its block"
            for i in torch.nonzero(call.reveal[s]).flatten().tolist():
                assert masked[r][i], f"row {r}: position {i} revealed twice"
                block[r][i], masked[r][i] = int(call.tokens[s, i]), False
            prefix = (seqs[r] + block[r][: (masked[r] + [True]).index(True)])[len(prompts[r]):]
            if _stop_index(prefix, eos, max_new) is not None:
                final[r], slot_row[s] = prefix, None
                freed.append(s)
            elif not any(masked[r]):
                seqs[r] += block[r]
                gen_len[r] += length
                start_block(r)
        admit(freed)
    assert not pending, f"{len(pending)} solver calls after the last row stopped"
    for r, gen in enumerate(gens):
        stop = _stop_index(final[r], eos, max_new)
        assert gen.token_ids == final[r][:stop], f"row {r}: returned tokens"
        assert gen.nfe == nfe[r], f"row {r}: NFE {gen.nfe}, reference {nfe[r]}"
        assert gen.stop_reason == ("eos" if final[r][stop - 1] in eos else "length"), f"row {r}: stop reason"


def engine_ntp_logits(calls, slots, n_rows, max_new, eos) -> list[torch.Tensor]:
    """Per row, the logits [T, V] its NTP-mode engine forwards gave, in order (scheduling as in
    :func:`check_engine_path`: a row stops at its first EOS or after ``max_new`` tokens)."""
    queue = list(range(n_rows))[::-1]
    slot_row = [queue.pop() if queue else None for _ in range(slots)]
    logits: list[list[torch.Tensor]] = [[] for _ in range(n_rows)]
    for call in calls:
        freed = []
        for s, r in enumerate(slot_row):
            if r is None:
                continue
            logits[r].append(call.logits[s, 0])
            token = int(call.tokens[s, 0])
            if token in eos or len(logits[r]) >= max_new:
                slot_row[s] = None
                freed.append(s)
        for s in freed:
            slot_row[s] = queue.pop() if queue else None
    return [torch.stack(rows) for rows in logits]


def decisions_are_stable(solver, calls, eps: float = 1e-4, draws: int = 4) -> bool:
    """Whether every recorded call's decision (reveal and tokens) survives random logit perturbations of size
    ``eps``: then it is not near-tied, and two code paths whose logits differ by ~1e-6 must decide alike."""
    gen = torch.Generator().manual_seed(0)
    for call in calls:
        finite = torch.isfinite(call.logits)
        for _ in range(draws):
            noise = (torch.rand(call.logits.shape, generator=gen) * 2 - 1) * eps
            reveal, tokens = solver(torch.where(finite, call.logits + noise, call.logits), call.masked)
            if not torch.equal(reveal, call.reveal) or not torch.equal(tokens[call.reveal], call.tokens[call.reveal]):
                return False
    return True
