"""Block solvers on tensors: after one forward, which masked block positions to reveal and their tokens
(``get_solver(name, **params)(logits, masked) -> (reveal, tokens)``), and the exclusion of ids never written
(:func:`exclude_tokens`). The rules come from :mod:`sbd_core.solver_rules`; the interface and the scheme are written in
docs/api.md ("Samplers and solvers, the rules")."""

from __future__ import annotations

import math

import torch

from ..solver_rules import Rule, make_rule


# ------------------------------------------------------------------------------------------- statistics
class _memo:
    """``functools.cached_property`` without its lock: on Python 3.11 its ``__get__`` takes an RLock, which
    ``torch.compile`` cannot trace (a graph break per statistic in the engine's compiled step)."""

    def __init__(self, compute):
        self.compute, self.name = compute, compute.__name__

    def __get__(self, stats, owner=None):
        if stats is None:
            return self
        value = stats.__dict__[self.name] = self.compute(stats)  # the instance attribute now shadows the descriptor
        return value


class BlockStats:
    """Per-position float32 statistics [B,k] of p = softmax(logits), each computed when first asked for (a rule
    reads only what its proxy and count need); zero-probability terms add 0 to the entropy."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    @classmethod
    def of(cls, logits: torch.Tensor) -> "BlockStats":
        return cls(logits)

    @_memo
    def _logp(self) -> torch.Tensor:
        return torch.log_softmax(self.logits.float(), dim=-1)

    @_memo
    def entropy(self) -> torch.Tensor:
        logp = self._logp
        p = logp.exp()
        return (-torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(-1)).clamp_min(0.0)

    @_memo
    def _top2(self) -> torch.Tensor:
        return self._logp.exp().topk(min(2, self.logits.shape[-1]), dim=-1).values

    @_memo
    def confidence(self) -> torch.Tensor:  # max_v p(v)
        return self._top2[..., 0]

    @_memo
    def margin(self) -> torch.Tensor:  # p(top1) - p(top2)
        top = self._top2
        return top[..., 0] - (top[..., 1] if top.shape[-1] > 1 else torch.zeros_like(top[..., 0]))

    def error(self, proxy: str) -> torch.Tensor:
        """The ascending sort key of ``proxy``; ``position`` (left to right) needs no statistic."""
        if proxy == "position":
            k = self.logits.shape[1]
            return torch.arange(k, device=self.logits.device, dtype=torch.float32).expand(self.logits.shape[:2])
        return {"entropy": lambda: self.entropy, "confidence": lambda: -self.confidence,
                "margin": lambda: -self.margin}[proxy]()



# ------------------------------------------------------------------------------------------- applying a rule
def exclude_tokens(logits: torch.Tensor, token_ids) -> torch.Tensor:
    """``logits`` with ``token_ids`` set to -inf (a copy; unchanged when there are none).

    softmax then gives those ids probability 0 and renormalises over the rest, so no solver statistic counts them and
    neither argmax nor sampling can choose them. At least one id must stay allowed.
    """
    if not torch.is_tensor(token_ids):
        token_ids = excluded_index(token_ids, logits.shape[-1], logits.device)
    return logits.index_fill(-1, token_ids, -math.inf) if token_ids.numel() else logits


def excluded_index(token_ids, vocab_size: int, device) -> torch.Tensor:
    """The ids :func:`exclude_tokens` takes, as a long tensor on ``device``: build it once where a loop excludes the
    same ids every forward (a tensor built from a list is a host-to-device copy each time)."""
    ids = sorted({int(t) for t in token_ids})
    if len(ids) >= vocab_size:
        raise ValueError(f"cannot exclude token ids {ids}: the vocabulary has only {vocab_size} ids")
    return torch.tensor(ids, dtype=torch.long, device=device)


class Solver:
    """A configured rule; call it as ``solver(logits, masked) -> (reveal, tokens)``."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self._generators: dict[str, torch.Generator] = {}

    @property
    def name(self) -> str:
        return self.rule.name

    @property
    def params(self) -> dict:
        """Resolved parameters, defaults included (a copy)."""
        return self.rule.params

    @property
    def tag(self) -> str:
        return self.rule.tag

    @property
    def family(self) -> str:
        return self.rule.family

    @property
    def verify(self) -> str:
        """The rule's ``verify`` mode (``none``, ``greedy`` or ``sample``)."""
        return self.rule.verify

    @property
    def first_token(self) -> str:
        """Where a block's first token is read: ``mask`` (the paper) or ``ntp`` (the NTP logit before the block)."""
        return self.rule.first_token

    def __repr__(self) -> str:
        return f"Solver({self.name!r}, {self.params})"

    def token_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The distribution a token is sampled from at temperature > 0: softmax(logits / temperature), float32."""
        return torch.softmax(logits.float() / self.rule.temperature, dim=-1)

    def _tokens(self, logits32: torch.Tensor) -> torch.Tensor:
        """Greedy argmax at temperature 0, else samples from :meth:`token_probs`."""
        temp = self.rule.temperature
        if temp == 0 or logits32.numel() == 0:
            return logits32.argmax(dim=-1)
        dev = str(logits32.device)
        if dev not in self._generators:
            self._generators[dev] = torch.Generator(device=logits32.device).manual_seed(self.rule.seed)
        probs = self.token_probs(logits32).reshape(-1, logits32.shape[-1])
        draws = torch.multinomial(probs, 1, generator=self._generators[dev])
        return draws.view(logits32.shape[:-1])

    def __call__(self, logits: torch.Tensor, masked: torch.Tensor):
        """Return (reveal [B,k] bool, tokens [B,k] long) for one forward's block logits."""
        _check_inputs(logits, masked)
        masked = masked.to(logits.device)
        if logits.shape[1] == 1:  # one position (NTP): every rule reveals it when masked; no statistic needed
            return masked.clone(), self._tokens(logits.float())
        stats = BlockStats.of(logits)
        key = stats.error(self.rule.proxy).masked_fill(~masked, math.inf)
        order = torch.sort(key, dim=1, stable=True).indices
        count = torch.minimum(self.rule.count(stats, masked, order).clamp_min(1), masked.sum(dim=1))
        ranks = torch.arange(order.shape[1], device=order.device).expand_as(order)
        rank_of_pos = torch.empty_like(order).scatter_(1, order, ranks)
        reveal = (rank_of_pos < count[:, None]) & masked
        if self.rule.order == "prefix":
            reveal = leading_reveals(reveal, masked)
        return reveal, self._tokens(logits.float())


def leading_reveals(reveal: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """``order: prefix``: of a forward's ``reveal`` [B,k], the positions with every masked position left of them
    revealed too; a row left with none reveals its leftmost masked position (rows with nothing masked reveal nothing)."""
    lead = (reveal | ~masked).long().cumprod(dim=1).bool() & reveal
    leftmost = masked & (masked.long().cumsum(dim=1) == 1)
    return torch.where(lead.any(dim=1, keepdim=True), lead, leftmost)


def _check_inputs(logits, masked) -> None:
    if not torch.is_tensor(logits) or logits.dim() != 3 or logits.shape[-1] < 1:
        raise ValueError(f"logits must be a [B,k,V] tensor with V >= 1, got {getattr(logits, 'shape', logits)!r}")
    if not torch.is_tensor(masked) or masked.dtype != torch.bool:
        raise ValueError(f"masked must be a bool tensor, got {getattr(masked, 'dtype', type(masked))}")
    if masked.shape != logits.shape[:2]:
        raise ValueError(f"masked shape {tuple(masked.shape)} must equal logits[:2] {tuple(logits.shape[:2])}")


def get_solver(name: str, **params) -> Solver:
    """Build solver ``name`` (one of SOLVER_NAMES) with validated ``params`` merged over its defaults."""
    return Solver(make_rule(name, **params))
