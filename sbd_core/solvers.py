"""Block solvers: decide which masked block positions to reveal after one forward pass.

A solver is a pure, batched tensor function with no model inside::

    solver = get_solver("eb", gamma=0.1)
    reveal, tokens = solver(logits, masked)   # logits [B,k,V] float, masked [B,k] bool

``reveal`` [B,k] bool marks the positions to unmask now: at least one still-masked position in
every row that has one, never a position where ``masked`` is False, nothing in rows with no mask.
``tokens`` [B,k] long holds the chosen token at revealed positions (the argmax elsewhere).

Every solver follows one scheme: sort the still-masked positions ascending by an error proxy
(stable, so ties go to the lower position index), then reveal a prefix of that order whose length
is set by the solver's rule, clamped to [1, number masked] (SBD_SPEC.md sections 2.5-2.7).

Selection vs. sampling: *which* positions are revealed is always decided on the temperature-1
distribution p = softmax(logits) (entropies in float32, natural log), so a solver's reveal schedule
does not depend on ``temperature``. ``temperature`` only changes *which token* is written:
0 means greedy argmax, > 0 samples from softmax(logits / temperature) with a torch.Generator owned
by the solver and seeded with ``seed`` (its stream continues across calls).
"""

from __future__ import annotations

import math

import torch

PROXIES = ("entropy", "confidence", "margin")
_COMMON = {"temperature": 0.0, "seed": 0}
_DEFAULTS = {
    "eb": {"gamma": 0.1, "proxy": "entropy"},
    "entropy_threshold": {"threshold": 0.5},
    "confidence_threshold": {"threshold": 0.9},
    "factor": {"f": 1.0},
    "topk": {"n": 1, "proxy": "confidence"},
}
_SUMMARY = {
    "eb": "EB-Sampler: largest proxy-ordered prefix with sum(H) - max(H) <= gamma (gamma >= 0, may be inf)",
    "entropy_threshold": "reveal every masked position with entropy < threshold (> 0), else the lowest-entropy one",
    "confidence_threshold": "reveal every masked position with max p > threshold (in [0, 1]), else the most confident",
    "factor": "Fast-dLLM factor rule: n-th most confident accepted iff c_n >= 1 - f/(n+1) (f > 0)",
    "topk": "reveal the n (int >= 1) lowest-error-proxy masked positions",
}
SOLVER_NAMES = tuple(_DEFAULTS)
_ORDER = {"entropy_threshold": "entropy", "confidence_threshold": "confidence", "factor": "confidence"}


def describe_solvers() -> dict[str, dict]:
    """Return ``{name: {"summary": str, "params": {param: default}}}`` for every solver (common params included)."""
    return {n: {"summary": _SUMMARY[n], "params": {**_DEFAULTS[n], **_COMMON}} for n in SOLVER_NAMES}


def _real(key: str, value, low: float, high: float = math.inf, low_open: bool = False) -> float:
    """Validate a real number in [low, high] (or (low, high] if ``low_open``) and return it as float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{key} must be a real number, got {value!r}")
    if value < low or (low_open and value == low) or value > high:
        allowed = f"{'(' if low_open else '['}{low:g}, {high:g}]"
        raise ValueError(f"{key}={value!r} is out of range; allowed: {allowed}")
    return float(value)


def _check_param(name: str, key: str, value):
    """Validate one parameter of solver ``name`` and return its resolved value."""
    if key == "proxy":
        if value not in PROXIES:
            raise ValueError(f"proxy={value!r} is not valid; allowed: {PROXIES}")
        return value
    if key in ("n", "seed"):
        if isinstance(value, bool) or not isinstance(value, int) or (key == "n" and value < 1):
            need = "an int >= 1" if key == "n" else "an int"
            raise ValueError(f"{key} must be {need}, got {value!r}")
        return value
    if key == "threshold" and name == "confidence_threshold":
        return _real(key, value, 0.0, 1.0)
    if key == "temperature" and value == math.inf:
        raise ValueError("temperature must be finite (0 = greedy argmax), got inf")
    return _real(key, value, 0.0, low_open=key in ("threshold", "f"))  # gamma, temperature >= 0; threshold, f > 0


def _stats(logits: torch.Tensor):
    """Return float32 (entropy, confidence, margin) [B,k] of softmax(logits); zero-probability terms add 0."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    ent = (-torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(-1)).clamp_min(0.0)
    top = p.topk(min(2, p.shape[-1]), dim=-1).values
    conf = top[..., 0]
    second = top[..., 1] if top.shape[-1] > 1 else torch.zeros_like(conf)
    return ent, conf, conf - second


def _leading_true(ok: torch.Tensor) -> torch.Tensor:
    """Count the leading True values of each row of a [B,k] bool tensor."""
    return ok.long().cumprod(dim=1).sum(dim=1)


class Solver:
    """A configured solver; call it as ``solver(logits, masked) -> (reveal, tokens)``."""

    def __init__(self, name: str, params: dict):
        self.name = name
        self._params = params
        self._generators: dict[str, torch.Generator] = {}

    @property
    def params(self) -> dict:
        """Resolved parameters, defaults included (a copy)."""
        return dict(self._params)

    @property
    def tag(self) -> str:
        """Short filesystem-safe run name, e.g. ``eb-entropy-g0.1`` or ``topk-2``."""
        p = self._params
        fmt = {k: format(v, "g") for k, v in p.items() if isinstance(v, float)}
        base = {
            "eb": f"eb-{p.get('proxy')}-g{fmt.get('gamma')}",
            "entropy_threshold": f"entropy-thr-{fmt.get('threshold')}",
            "confidence_threshold": f"conf-thr-{fmt.get('threshold')}",
            "factor": f"factor-f{fmt.get('f')}",
            "topk": f"topk-{p.get('n')}" + ("" if p.get("proxy") == "confidence" else f"-{p.get('proxy')}"),
        }[self.name]
        if p["temperature"] > 0:
            base += f"-t{fmt['temperature']}-s{p['seed']}"
        return base

    def __repr__(self) -> str:
        return f"Solver({self.name!r}, {self._params})"

    def _count(self, ent, conf, masked, order) -> torch.Tensor:
        """Number of positions (before clamping) to reveal from the front of ``order``, per row."""
        p, name = self._params, self.name
        if name == "eb":
            h = ent.gather(1, order).masked_fill(~masked.gather(1, order), 0.0)
            bound = h.cumsum(dim=1) - torch.cummax(h, dim=1).values
            return _leading_true(bound <= p["gamma"])
        if name == "entropy_threshold":
            return (masked & (ent < p["threshold"])).sum(dim=1)
        if name == "confidence_threshold":
            return (masked & (conf > p["threshold"])).sum(dim=1)
        if name == "factor":
            rank = torch.arange(1, conf.shape[1] + 1, device=conf.device, dtype=conf.dtype)
            return _leading_true(conf.gather(1, order) >= 1.0 - p["f"] / (rank + 1.0))
        return torch.full_like(masked[:, 0], p["n"], dtype=torch.long)

    def _tokens(self, logits32: torch.Tensor) -> torch.Tensor:
        """Greedy argmax at temperature 0, else samples from softmax(logits / temperature)."""
        temp = self._params["temperature"]
        if temp == 0 or logits32.numel() == 0:
            return logits32.argmax(dim=-1)
        dev = str(logits32.device)
        if dev not in self._generators:
            self._generators[dev] = torch.Generator(device=logits32.device).manual_seed(self._params["seed"])
        probs = torch.softmax(logits32 / temp, dim=-1).reshape(-1, logits32.shape[-1])
        draws = torch.multinomial(probs, 1, generator=self._generators[dev])
        return draws.view(logits32.shape[:-1])

    def __call__(self, logits: torch.Tensor, masked: torch.Tensor):
        """Return (reveal [B,k] bool, tokens [B,k] long) for one forward's block logits."""
        if not torch.is_tensor(logits) or logits.dim() != 3 or logits.shape[-1] < 1:
            raise ValueError(f"logits must be a [B,k,V] tensor with V >= 1, got {getattr(logits, 'shape', logits)!r}")
        if not torch.is_tensor(masked) or masked.dtype != torch.bool:
            raise ValueError(f"masked must be a bool tensor, got {getattr(masked, 'dtype', type(masked))}")
        if masked.shape != logits.shape[:2]:
            raise ValueError(f"masked shape {tuple(masked.shape)} must equal logits[:2] {tuple(logits.shape[:2])}")
        masked = masked.to(logits.device)
        ent, conf, margin = _stats(logits)
        proxy = self._params.get("proxy", _ORDER.get(self.name))
        key = {"entropy": ent, "confidence": -conf, "margin": -margin}[proxy].masked_fill(~masked, math.inf)
        order = torch.sort(key, dim=1, stable=True).indices
        n_masked = masked.sum(dim=1)
        count = torch.minimum(self._count(ent, conf, masked, order).clamp_min(1), n_masked)
        ranks = torch.arange(order.shape[1], device=order.device).expand_as(order)
        rank_of_pos = torch.empty_like(order).scatter_(1, order, ranks)
        reveal = (rank_of_pos < count[:, None]) & masked
        return reveal, self._tokens(logits.float())


def get_solver(name: str, **params) -> Solver:
    """Build solver ``name`` (one of SOLVER_NAMES) with validated ``params`` merged over its defaults."""
    if name not in _DEFAULTS:
        raise ValueError(f"unknown solver {name!r}; valid names: {SOLVER_NAMES}")
    allowed = {**_DEFAULTS[name], **_COMMON}
    for key in params:
        if key not in allowed:
            raise ValueError(f"unknown parameter {key!r} for solver {name!r}; allowed: {sorted(allowed)}")
    resolved = {key: _check_param(name, key, params.get(key, default)) for key, default in allowed.items()}
    return Solver(name, resolved)
