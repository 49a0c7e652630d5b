"""Block solvers: decide which masked block positions to reveal after one forward pass.

A solver is a pure, batched tensor function with no model inside::

    solver = get_solver("eb", gamma=0.1)
    reveal, tokens = solver(logits, masked)   # logits [B,k,V] float, masked [B,k] bool

``reveal`` [B,k] bool marks the positions to unmask now: at least one still-masked position in
every row that has one, never a position where ``masked`` is False, nothing in rows with no mask.
``tokens`` [B,k] long holds the chosen token at revealed positions (the argmax elsewhere).

Every solver follows one scheme: sort the still-masked positions ascending by an error proxy
(stable, so ties go to the lower position index), then reveal a prefix of that order whose length
is set by the solver's count rule, clamped to [1, number masked].

Selection vs. sampling: *which* positions are revealed is always decided on the temperature-1
distribution p = softmax(logits) (entropies in float32, natural log), so a solver's reveal schedule
does not depend on ``temperature``. ``temperature`` only changes *which token* is written:
0 means greedy argmax, > 0 samples from softmax(logits / temperature) with a torch.Generator owned
by the solver and seeded with ``seed`` (its stream continues across calls).

Verification (``verify``, every rule; :mod:`sbd_core.verify`): ``none`` decodes SBD as the paper does; ``greedy``
(temperature 0) and ``sample`` (temperature > 0) check every finished block against the same model's NTP mode, so the
output is NTP decoding's, greedy or sampled. It is a decoding-loop option, not a reveal rule: the rule's decisions do
not read it, but its tag (``-verify``) and family (``<family>-verify``) do, so a verified run is a run of its own.

Tokens that must never be written (the mask token, padding): a caller passes logits through
:func:`exclude_tokens` first. Those ids then have probability 0, every statistic above is computed on
the distribution renormalised over the remaining ids, and neither argmax nor sampling can pick them.
The decoder does this in one place for every solver and both decoding modes.

The registry: each solver is one small frozen dataclass below (a :class:`Rule`) that carries its
parameters with their defaults and validation, its run tag, its report family, its ordering proxy and
its count rule. ``SOLVERS`` maps names to these classes; it is the only list of solvers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import ClassVar

import torch

PROXIES = ("entropy", "confidence", "margin")  # the error proxies a user may choose (EB paper, eq. 1)
COMMON_PARAMS = ("temperature", "seed")  # parameters every solver takes (token choice, not selection)
VERIFY_MODES = ("none", "greedy", "sample")  # verify: off, against NTP's greedy choice, against NTP sampling


# ------------------------------------------------------------------------------------------- parameter checks
def _real(low: float, high: float = math.inf, low_open: bool = False, finite: bool = False):
    """Check for a real number in [low, high] (``(low, high]`` if ``low_open``); returns it as a float."""

    def check(key: str, value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise ValueError(f"{key} must be a real number, got {value!r}")
        if finite and math.isinf(value):
            raise ValueError(f"{key} must be finite, got {value!r}")
        if value < low or (low_open and value == low) or value > high:
            allowed = f"{'(' if low_open else '['}{low:g}, {high:g}]"
            raise ValueError(f"{key}={value!r} is out of range; allowed: {allowed}")
        return float(value)

    return check


def _integer(low: int | None = None):
    """Check for an int (not a bool), at least ``low`` when given."""

    def check(key: str, value) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
            raise ValueError(f"{key} must be an int{'' if low is None else f' >= {low}'}, got {value!r}")
        return value

    return check


def _choice(options: tuple[str, ...]):
    """Check for one of ``options``."""

    def check(key: str, value) -> str:
        if value not in options:
            raise ValueError(f"{key}={value!r} is not valid; allowed: {options}")
        return value

    return check


def param(default, check):
    """A solver parameter: its default and its check ``(key, value) -> resolved value`` (raises ValueError)."""
    return field(default=default, metadata={"check": check})


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


def _leading_true(ok: torch.Tensor) -> torch.Tensor:
    """Count the leading True values of each row of a [B,k] bool tensor."""
    return ok.long().cumprod(dim=1).sum(dim=1)


# ------------------------------------------------------------------------------------------- the rules
@dataclass(frozen=True, kw_only=True)
class Rule:
    """A solver's settings and decision rule. Subclasses define ``name``, ``summary``, ``proxy`` (a class constant or a
    parameter; the sort order of masked positions), ``_tag()`` and ``count()``; they may override ``_family()``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    temperature: float = param(0.0, _real(0.0, finite=True))
    seed: int = param(0, _integer())
    verify: str = param("none", _choice(VERIFY_MODES))

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
        if self.verify == "greedy" and self.temperature > 0:
            raise ValueError(f"verify='greedy' checks drafts against NTP's argmax and needs temperature 0, got "
                             f"temperature={self.temperature:g}; use verify='sample' to match NTP sampling")
        if self.verify == "sample" and self.temperature == 0:
            raise ValueError("verify='sample' matches NTP sampling and needs a temperature > 0; use verify='greedy' "
                             "at temperature 0")

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The rule's own parameters first, then ``verify``, then the common ones."""
        own = [f.name for f in fields(cls) if f.name not in COMMON_PARAMS + ("verify",)]
        return tuple(own) + ("verify",) + COMMON_PARAMS

    @property
    def params(self) -> dict:
        """Resolved parameters, defaults included."""
        return {key: getattr(self, key) for key in self.param_names()}

    @property
    def family(self) -> str:
        """The curve a run belongs to in reports (settings of one family differ only in a threshold); verified runs
        form a family of their own (``eb-entropy-verify``)."""
        return self._family() + self.verify_tag

    def _family(self) -> str:
        return self.name

    @property
    def tag(self) -> str:
        """Short filesystem-safe run name, e.g. ``eb-entropy-g0.1``, ``eb-entropy-g0.1-verify``, ``topk-2-t0.7-s3``
        when sampling."""
        return self._tag() + self.verify_tag + self.sampling_tag

    @property
    def verify_tag(self) -> str:
        """``-verify`` when the blocks are verified (greedy or sampled: the sampling tag tells which), else empty."""
        return "" if self.verify == "none" else "-verify"

    @property
    def sampling_tag(self) -> str:
        """The tag's suffix for the common parameters: empty when greedy, ``-t<temperature>-s<seed>`` when sampling."""
        return f"-t{self.temperature:g}-s{self.seed}" if self.temperature > 0 else ""

    def _tag(self) -> str:
        raise NotImplementedError

    def count(self, stats: BlockStats, masked: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
        """[B] number of positions to reveal from the front of ``order`` (clamped to [1, masked] by the caller)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class EB(Rule):
    """EB-Sampler: the largest proxy-ordered prefix U with sum(H over U) - max(H over U) <= gamma. With the entropy
    proxy the max is the last element (SBD eq. 8); with another proxy it need not be (SBD eq. 18)."""

    name: ClassVar[str] = "eb"
    summary: ClassVar[str] = ("EB-Sampler: largest proxy-ordered prefix with sum(H) - max(H) <= gamma "
                              "(gamma >= 0, may be inf)")
    gamma: float = param(0.1, _real(0.0))
    proxy: str = param("entropy", _choice(PROXIES))

    def _family(self) -> str:
        return f"eb-{self.proxy}"

    def _tag(self) -> str:
        return f"eb-{self.proxy}-g{self.gamma:g}"

    def count(self, stats, masked, order):
        h = stats.entropy.gather(1, order).masked_fill(~masked.gather(1, order), 0.0)
        bound = h.cumsum(dim=1) - torch.cummax(h, dim=1).values
        return _leading_true(bound <= self.gamma)


@dataclass(frozen=True, kw_only=True)
class EntropyThreshold(Rule):
    """Reveal every masked position whose entropy is below ``threshold``."""

    name: ClassVar[str] = "entropy_threshold"
    summary: ClassVar[str] = "reveal every masked position with entropy < threshold (> 0), else the lowest-entropy one"
    proxy: ClassVar[str] = "entropy"
    threshold: float = param(0.5, _real(0.0, low_open=True))

    def _tag(self) -> str:
        return f"entropy-thr-{self.threshold:g}"

    def count(self, stats, masked, order):
        return (masked & (stats.entropy < self.threshold)).sum(dim=1)


@dataclass(frozen=True, kw_only=True)
class ConfidenceThreshold(Rule):
    """Reveal every masked position whose confidence max_v p(v) exceeds ``threshold``."""

    name: ClassVar[str] = "confidence_threshold"
    summary: ClassVar[str] = ("reveal every masked position with max p > threshold (in [0, 1]), "
                              "else the most confident")
    proxy: ClassVar[str] = "confidence"
    threshold: float = param(0.9, _real(0.0, 1.0))

    def _tag(self) -> str:
        return f"conf-thr-{self.threshold:g}"

    def count(self, stats, masked, order):
        return (masked & (stats.confidence > self.threshold)).sum(dim=1)


@dataclass(frozen=True, kw_only=True)
class Factor(Rule):
    """Fast-dLLM factor rule (as in its code): in descending confidence, the n-th is accepted iff c_n >= 1 - f/(n+1);
    stop at the first rejection."""

    name: ClassVar[str] = "factor"
    summary: ClassVar[str] = "Fast-dLLM factor rule: n-th most confident accepted iff c_n >= 1 - f/(n+1) (f > 0)"
    proxy: ClassVar[str] = "confidence"
    f: float = param(1.0, _real(0.0, low_open=True))

    def _tag(self) -> str:
        return f"factor-f{self.f:g}"

    def count(self, stats, masked, order):
        conf = stats.confidence.gather(1, order)
        rank = torch.arange(1, conf.shape[1] + 1, device=conf.device, dtype=conf.dtype)
        return _leading_true(conf >= 1.0 - self.f / (rank + 1.0))


@dataclass(frozen=True, kw_only=True)
class TopK(Rule):
    """Reveal the ``n`` masked positions with the lowest error proxy."""

    name: ClassVar[str] = "topk"
    summary: ClassVar[str] = "reveal the n (int >= 1) lowest-error-proxy masked positions"
    n: int = param(1, _integer(1))
    proxy: str = param("confidence", _choice(PROXIES))

    def _tag(self) -> str:
        return f"topk-{self.n}" + ("" if self.proxy == "confidence" else f"-{self.proxy}")

    def count(self, stats, masked, order):
        return torch.full_like(masked[:, 0], self.n, dtype=torch.long)


@dataclass(frozen=True, kw_only=True)
class LeftToRight(Rule):
    """Reveal the ``n`` leftmost masked positions. A diagnostic: with n=1 it decodes the masked mode strictly left to
    right, one token per forward, which separates the masked mode's per-token accuracy from the solver's choices."""

    name: ClassVar[str] = "left_to_right"
    summary: ClassVar[str] = "reveal the n (int >= 1) leftmost masked positions (diagnostic: n=1 is one per forward)"
    proxy: ClassVar[str] = "position"
    n: int = param(1, _integer(1))

    def _tag(self) -> str:
        return f"l2r-{self.n}"

    def count(self, stats, masked, order):
        return torch.full_like(masked[:, 0], self.n, dtype=torch.long)


SOLVERS: dict[str, type[Rule]] = {rule.name: rule for rule in
                                  (EB, EntropyThreshold, ConfidenceThreshold, Factor, TopK, LeftToRight)}
SOLVER_NAMES = tuple(SOLVERS)


def describe_solvers() -> dict[str, dict]:
    """Return ``{name: {"summary": str, "params": {param: default}}}`` for every solver (common params included)."""
    return {name: {"summary": rule.summary, "params": rule().params} for name, rule in SOLVERS.items()}


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
        return reveal, self._tokens(logits.float())


def _check_inputs(logits, masked) -> None:
    if not torch.is_tensor(logits) or logits.dim() != 3 or logits.shape[-1] < 1:
        raise ValueError(f"logits must be a [B,k,V] tensor with V >= 1, got {getattr(logits, 'shape', logits)!r}")
    if not torch.is_tensor(masked) or masked.dtype != torch.bool:
        raise ValueError(f"masked must be a bool tensor, got {getattr(masked, 'dtype', type(masked))}")
    if masked.shape != logits.shape[:2]:
        raise ValueError(f"masked shape {tuple(masked.shape)} must equal logits[:2] {tuple(logits.shape[:2])}")


def get_solver(name: str, **params) -> Solver:
    """Build solver ``name`` (one of SOLVER_NAMES) with validated ``params`` merged over its defaults."""
    if name not in SOLVERS:
        raise ValueError(f"unknown solver {name!r}; valid names: {SOLVER_NAMES}")
    rule = SOLVERS[name]
    allowed = rule.param_names()
    for key in params:
        if key not in allowed:
            raise ValueError(f"unknown parameter {key!r} for solver {name!r}; allowed: {sorted(allowed)}")
    return Solver(rule(**params))
