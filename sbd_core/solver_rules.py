"""The solver registry: each block solver's settings and decision rule, with no torch import.

Each solver is one small frozen dataclass (a :class:`Rule`) that carries its parameters with their defaults and
validation, its run tag, its report family, its ordering proxy and its count rule. ``SOLVERS`` maps names to these
classes; it is the only list of solvers. :func:`make_rule` checks a name and its parameters and builds the rule.

The count rules use tensor methods only, so this module never imports torch: the workflow (Snakemake parsing the
rules, :mod:`sbd_core.samplers`) reads names, parameters, tags and families from it without loading torch.
:mod:`sbd_core.decoding.solvers` applies a rule to a forward's logits (statistics, ordering, token choice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from torch import Tensor

    from .decoding.solvers import BlockStats


PROXIES = ("entropy", "confidence", "margin")  # the error proxies a user may choose (EB paper, eq. 1)
COMMON_PARAMS = ("temperature", "seed")  # parameters every solver takes (token choice, not selection)
VERIFY_MODES = ("none", "greedy", "sample")  # verify: off, against NTP's greedy choice, against NTP sampling
#: Where a block's first token is read: ``mask``, the mask query at block position 0 (the paper's inference), or
#: ``ntp``, the NTP logit of the token before the block (a departure; docs/definitions.md).
FIRST_TOKEN_SOURCES = ("mask", "ntp")
#: Which of a rule's reveals a forward keeps: ``any``, all of them, in any order of the block (the paper's inference),
#: or ``prefix``, their leading run (a departure; docs/definitions.md).
REVEAL_ORDERS = ("any", "prefix")
#: The solver parameters that depart from the paper's inference away from their default, with what that means: a
#: sampler's spec lists them only when set (so the spec of a run with the paper's inference, and of one written before
#: the parameter existed, is unchanged), and the report names the samplers that set them.
INFERENCE_DEPARTURES = {
    "first_token": "a block's first token from the NTP logit of the token before it, not from the mask query",
    "order": "reveals in position order: a masked position only with every one left of it in the block, a forward's "
             "one forced reveal the leftmost",
}


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


# ------------------------------------------------------------------------------------------- statistics helper
def _leading_true(ok: Tensor) -> Tensor:
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
    first_token: str = param("mask", _choice(FIRST_TOKEN_SOURCES))
    order: str = param("any", _choice(REVEAL_ORDERS))

    def __post_init__(self):
        for f in fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))
        if self.verify == "greedy" and self.temperature > 0:
            raise ValueError(f"verify='greedy' checks drafts against NTP's argmax and needs temperature 0, got "
                             f"temperature={self.temperature:g}; use verify='sample' to match NTP sampling")
        if self.verify == "sample" and self.temperature == 0:
            raise ValueError("verify='sample' matches NTP sampling and needs a temperature > 0; use verify='greedy' "
                             "at temperature 0")
        defaults = self.defaults()
        for key in INFERENCE_DEPARTURES:  # each changes what plain decoding writes; verify writes NTP mode's tokens
            if self.verify != "none" and getattr(self, key) != defaults[key]:
                raise ValueError(f"{key}={getattr(self, key)!r} is a setting of plain decoding; verify already makes "
                                 "every block NTP mode's own (docs/verify.md): drop one of them")

    @classmethod
    def param_names(cls) -> tuple[str, ...]:
        """The rule's own parameters first, then ``verify``, ``first_token`` and ``order``, then the common ones."""
        shared = ("verify", "first_token", "order")
        own = [f.name for f in fields(cls) if f.name not in COMMON_PARAMS + shared]
        return tuple(own) + shared + COMMON_PARAMS

    @classmethod
    def defaults(cls) -> dict:
        """Every parameter with its default, in :meth:`param_names` order."""
        default = {f.name: f.default for f in fields(cls)}
        return {name: default[name] for name in cls.param_names()}

    @property
    def params(self) -> dict:
        """Resolved parameters, defaults included (those of :data:`INFERENCE_DEPARTURES` only when set away from their
        default)."""
        defaults = self.defaults()
        return {key: getattr(self, key) for key in self.param_names()
                if key not in INFERENCE_DEPARTURES or getattr(self, key) != defaults[key]}

    @property
    def family(self) -> str:
        """The curve a run belongs to in reports (settings of one family differ only in a threshold); verified runs
        form a family of their own (``eb-entropy-verify``), and so do runs with the first token from the NTP logit
        (``eb-entropy-first-ntp``), and so do runs that reveal in position order (``eb-entropy-prefix``)."""
        return self._family() + self.first_tag + self.order_tag + self.verify_tag

    def _family(self) -> str:
        return self.name

    @property
    def tag(self) -> str:
        """Short filesystem-safe run name, e.g. ``eb-entropy-g0.1``, ``eb-entropy-g0.1-verify``,
        ``conf-thr-0.999-first-ntp``, ``topk-2-t0.7-s3`` when sampling."""
        return self._tag() + self.first_tag + self.order_tag + self.verify_tag + self.sampling_tag

    @property
    def first_tag(self) -> str:
        """``-first-ntp`` when a block's first token is read off the NTP logit (``first_token='ntp'``), else empty."""
        return "" if self.first_token == "mask" else f"-first-{self.first_token}"

    @property
    def order_tag(self) -> str:
        """``-prefix`` when a forward keeps only the leading run of its reveals (``order='prefix'``), else empty."""
        return "" if self.order == "any" else f"-{self.order}"

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

    def count(self, stats: BlockStats, masked: Tensor, order: Tensor) -> Tensor:
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
        bound = h.cumsum(dim=1) - h.cummax(dim=1).values
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
        rank = conf.new_ones(conf.shape[1]).cumsum(dim=0)  # 1, 2, ..., k in conf's dtype (exact below 2**24)
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
        return order.new_full(order.shape[:1], self.n)  # [B] long, like the sort indices


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
        return order.new_full(order.shape[:1], self.n)  # [B] long, like the sort indices


SOLVERS: dict[str, type[Rule]] = {rule.name: rule for rule in
                                  (EB, EntropyThreshold, ConfidenceThreshold, Factor, TopK, LeftToRight)}
SOLVER_NAMES = tuple(SOLVERS)


def describe_solvers() -> dict[str, dict]:
    """Return ``{name: {"summary": str, "params": {param: default}}}`` for every solver (common params included)."""
    return {name: {"summary": rule.summary, "params": rule.defaults()} for name, rule in SOLVERS.items()}


def make_rule(name: str, **params) -> Rule:
    """The rule of solver ``name`` (one of SOLVER_NAMES) with validated ``params`` merged over its defaults."""
    if name not in SOLVERS:
        raise ValueError(f"unknown solver {name!r}; valid names: {SOLVER_NAMES}")
    rule = SOLVERS[name]
    allowed = rule.param_names()
    for key in params:
        if key not in allowed:
            raise ValueError(f"unknown parameter {key!r} for solver {name!r}; allowed: {sorted(allowed)}")
    return rule(**params)
