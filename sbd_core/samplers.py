"""Samplers, the torch-free vocabulary of the workflow config, lm-eval's ``model_args`` and the report: ``ntp``, the
block solvers of :data:`sbd_core.solver_rules.SOLVERS` and the training-free peers of :data:`PEERS`. A sampler is a
frozen :class:`Sampler`; its dict form (:meth:`Sampler.to_dict`, :func:`sampler_spec`) is what crosses JSON files and
the workflow. Which decoder a sampler runs on is :mod:`sbd_core.decoding.factory`'s; the rules are in
docs/definitions.md and docs/peers.md."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .errors import UserError, user_input
from .solver_rules import COMMON_PARAMS, SOLVER_NAMES, describe_solvers, make_rule

NTP = "ntp"
PEER_MODE = "hf"  # the training-free peers: Hugging Face generate on the NTP arm (sbd_core.decoding.peers)
#: The training-free peers: {name: {"summary", "params": {param: default}}} (every peer default lives here).
PEERS = {
    "hf_generate": {"summary": "Hugging Face generate, greedy: the baseline a user would pick (the tokens of ntp)",
                    "params": {}},
    "prompt_lookup": {"summary": "prompt-lookup decoding (transformers' prompt_lookup_num_tokens), greedy, batch 1: "
                                 "each forward verifies up to `tokens` draft tokens copied from the text after an "
                                 "earlier match of the last n-gram (n <= max_matching_ngram_size)",
                      "params": {"tokens": 10, "max_matching_ngram_size": 2}},
}
PEER_NAMES = tuple(PEERS)
SAMPLER_NAMES = (NTP,) + SOLVER_NAMES + PEER_NAMES
DEFAULT_SBD_SOLVER = "eb"
_NTP_SOLVER = "left_to_right"  # NTP feeds a one-position block: the rule only picks that position's token


def describe_samplers() -> dict[str, dict]:
    """``{name: {"summary", "params": {param: default}}}`` for ``ntp`` and every solver (for schemas and docs)."""
    solvers = describe_solvers()
    ntp_params = {key: solvers[_NTP_SOLVER]["params"][key] for key in COMMON_PARAMS}
    ntp = {"summary": "next-token decoding: one token per forward, greedy at temperature 0", "params": ntp_params}
    return {NTP: ntp, **solvers, **{name: {**peer, "params": dict(peer["params"])} for name, peer in PEERS.items()}}


@dataclass(frozen=True)
class Sampler:
    """One decoding setting: its name (``ntp``, a solver or a peer), its mode, its resolved parameters (defaults
    included), its report family and its run tag."""

    name: str
    mode: str  # "ntp", "sbd" (a block solver) or PEER_MODE (a training-free peer)
    params: dict = field(hash=False)
    family: str
    tag: str

    @property
    def is_peer(self) -> bool:
        """A training-free peer (Hugging Face generate on the NTP arm): no block solver, its own decoder."""
        return self.mode == PEER_MODE

    @property
    def decoder(self) -> str:
        """The kind of decoder it runs on: ``peer`` (:mod:`sbd_core.decoding.peers`) or ``block`` (NTP and the block
        solvers: the reference decoder or the engine, as ``DecodeConfig.engine`` says)."""
        return "peer" if self.is_peer else "block"

    @property
    def decode_mode(self) -> str:
        """The :class:`sbd_core.decode_config.DecodeConfig` mode it decodes in: ``sbd`` for the block solvers, ``ntp``
        for NTP decoding and the peers (one causal stream, no mask token)."""
        return "sbd" if self.mode == "sbd" else NTP

    @property
    def verify(self) -> str:
        """Its verify mode: ``none`` (plain), ``greedy`` or ``sample`` (lossless SBD, docs/verify.md)."""
        return self.params.get("verify", "none")

    @property
    def rule_name(self) -> str:
        """The solver rule it decides with (NTP decoding: a one-position rule that only picks the token)."""
        return _NTP_SOLVER if self.mode == NTP else self.name

    @property
    def label(self) -> str:
        """A reader's name: ``NTP``, ``EB γ=0.1``, ``EB γ=0.1 + verify``, ``HF generate``, ``prompt lookup (10)``."""
        return _label(self.name, self.params, self.tag)

    def to_dict(self) -> dict:
        """The JSON form: ``{"mode", "solver", "params", "family", "tag"}``."""
        return {"mode": self.mode, "solver": self.name, "params": dict(self.params), "family": self.family,
                "tag": self.tag}

    @classmethod
    def from_dict(cls, spec: dict) -> "Sampler":
        """A sampler from its JSON form (as :meth:`to_dict` writes it)."""
        return cls(spec["solver"], spec["mode"], dict(spec["params"]), spec["family"], spec["tag"])


def as_sampler(sampler: "Sampler | dict") -> Sampler:
    """``sampler`` as a :class:`Sampler`; a dict (its JSON form, from a file or the workflow; a record of an older run
    may lack the derived keys) is resolved again from its ``solver`` and ``params``."""
    return sampler if isinstance(sampler, Sampler) else make_sampler(sampler["solver"], **sampler["params"])


def make_sampler(name: str, **params) -> Sampler:
    """Sampler ``name`` (``ntp``, a solver or a peer) with validated ``params`` over its defaults."""
    if name == NTP:
        extra = sorted(set(params) - set(COMMON_PARAMS))
        if extra:
            raise ValueError(f"the ntp sampler (NTP decoding) uses no block solver; it takes only "
                             f"{list(COMMON_PARAMS)}, got {extra}")
        rule = make_rule(_NTP_SOLVER, **params)
        resolved = {key: rule.params[key] for key in COMMON_PARAMS}
        return Sampler(NTP, NTP, resolved, NTP, NTP + rule.sampling_tag)  # "ntp", or "ntp-t0.7-s1" when sampling
    if name in PEERS:
        return _peer(name, params)
    if name not in SOLVER_NAMES:
        raise ValueError(f"unknown sampler {name!r}; valid names: {SAMPLER_NAMES}")
    rule = make_rule(name, **params)
    return Sampler(name, "sbd", rule.params, rule.family, rule.tag)


def sampler_spec(name: str, **params) -> dict:
    """The JSON form of :func:`make_sampler` (what the workflow and the stages' files carry)."""
    return make_sampler(name, **params).to_dict()


def _peer(name: str, params: dict) -> Sampler:
    """A training-free peer: its integer parameters (>= 1) over the defaults of :data:`PEERS`."""
    defaults = PEERS[name]["params"]
    extra = sorted(set(params) - set(defaults))
    if extra:
        raise ValueError(f"the {name} sampler (a training-free peer, greedy) takes only {list(defaults)}, got {extra}")
    resolved = {**defaults, **params}
    for key, value in resolved.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be an int >= 1, got {value!r}")
    if name == "hf_generate":
        family = tag = "hf-generate"
    else:
        family, ngram = "prompt-lookup", resolved["max_matching_ngram_size"]
        tag = f"prompt-lookup-{resolved['tokens']}" + ("" if ngram == defaults["max_matching_ngram_size"] else
                                                        f"-ng{ngram}")
    return Sampler(name, PEER_MODE, resolved, family, tag)


def sampler_label(spec: dict) -> str:
    """:attr:`Sampler.label` of a sampler's JSON form (``params`` may be missing: then the tag names it)."""
    return _label(spec["solver"], spec.get("params") or {}, spec["tag"])


def _label(name: str, params: dict, tag: str) -> str:
    """A reader's name from a sampler's name and parameters; other solvers (and settings it has no words for, such as
    a sampling EB run) by their ``tag``."""
    sampling = (params.get("temperature") or 0) > 0
    if name == NTP:
        return "NTP" + (f" (t{params['temperature']:g}-s{params.get('seed', 0)})" if sampling else "")
    if name == "hf_generate":
        return "HF generate"
    if name == "prompt_lookup":
        defaults = PEERS["prompt_lookup"]["params"]
        tokens, ngram = (params.get(key, defaults[key]) for key in ("tokens", "max_matching_ngram_size"))
        return f"prompt lookup ({tokens}" + ("" if ngram == defaults["max_matching_ngram_size"] else
                                              f", {ngram}-grams") + ")"
    gamma, proxy = params.get("gamma"), params.get("proxy")
    if name == "eb" and gamma is not None and proxy is not None and not sampling:
        suffix = ("" if params.get("first_token", "mask") == "mask" else " (first token: NTP)") + \
            ("" if params.get("order", "any") == "any" else " (in position order)") + \
            ("" if params.get("verify", "none") == "none" else " + verify")
        return f"EB \u03b3={gamma:g}" + ("" if proxy == "entropy" else f" ({proxy})") + suffix
    return tag


def decode_mode(spec: "Sampler | dict") -> str:
    """:attr:`Sampler.decode_mode` of a sampler or its JSON form."""
    return as_sampler(spec).decode_mode


def sampler_name(mode: str | None = None, solver: str | None = None) -> str:
    """The sampler named by lm-eval style arguments: ``solver=ntp`` and ``mode=ntp`` both mean NTP decoding,
    ``mode=sbd`` (or no mode) with ``solver=NAME`` a block solver (default ``eb``), ``mode=hf`` (or no mode) with a
    peer (default ``hf_generate``); contradictions are errors."""
    if mode not in (None, "sbd", NTP, PEER_MODE):
        raise ValueError(f"mode must be 'sbd', 'ntp' or 'hf', got {mode!r}")
    if mode == NTP and solver not in (None, NTP):
        raise ValueError(f"mode='ntp' contradicts solver={solver!r}: NTP decoding uses no block solver "
                         "(drop solver, or use solver=ntp alone)")
    if mode == "sbd" and solver in (NTP, *PEER_NAMES):
        raise ValueError(f"mode='sbd' contradicts solver={solver!r}; use a block solver, one of {SOLVER_NAMES}")
    if mode == PEER_MODE and solver not in (None, *PEER_NAMES):
        raise ValueError(f"mode='hf' contradicts solver={solver!r}; use a training-free peer, one of {PEER_NAMES}")
    if mode == NTP:
        return NTP
    return solver or (PEER_NAMES[0] if mode == PEER_MODE else DEFAULT_SBD_SOLVER)


def expand_samplers(entries: list[dict]) -> dict[str, dict]:
    """``[{"solver": "eb", "gamma": [0, 0.1]}, {"solver": "ntp"}]`` -> ``{tag: spec}``, one per setting."""
    samplers: dict[str, dict] = {}
    for i, entry in enumerate(entries):
        entry = dict(entry)
        name = entry.pop("solver", None)
        if name is None:
            raise ValueError(f"decode.samplers[{i}] has no 'solver' key (use one of {SAMPLER_NAMES})")
        keys = sorted(entry)
        values = [v if isinstance(v, list) else [v] for v in (entry[k] for k in keys)]
        for combo in itertools.product(*values):
            params = dict(zip(keys, combo))
            try:
                spec = sampler_spec(name, **params)
            except ValueError as err:
                raise ValueError(f"decode.samplers[{i}] ({name}): {err}") from err
            if spec["tag"] in samplers:
                raise ValueError(f"decode.samplers[{i}]: setting {params} repeats sampler {spec['tag']!r}")
            samplers[spec["tag"]] = spec
    return samplers


_DERIVED = ("mode", "family", "tag")  # the keys of a full spec that its solver and params determine


def checked_sampler(spec: dict) -> dict:
    """The sampler spec a stage is given, checked and resolved: a full spec (as :func:`sampler_spec` returns it and the
    workflow passes it) or a config entry (``{"solver": "eb", "gamma": 0.1}``); UserError naming what is wrong."""
    if not isinstance(spec, dict) or "solver" not in spec:
        raise UserError(f"sampler spec needs a 'solver' (one of {list(SAMPLER_NAMES)}), got {spec!r}")
    entry = dict(spec)
    name = entry.pop("solver")
    stated, params = {}, entry  # a config entry: every other key is a parameter
    if "params" in entry:  # a full spec
        stated = {key: entry.pop(key) for key in _DERIVED if key in entry}
        params = entry.pop("params")
        if entry:
            raise UserError(f"sampler spec: unknown key(s) {sorted(entry)} beside 'params'; a full spec has "
                            f"{['solver', 'params', *_DERIVED]}")
    with user_input("sampler spec"):
        resolved = make_sampler(name, **params)
    resolved = resolved.to_dict()
    wrong = {key: value for key, value in stated.items() if resolved[key] != value}
    if wrong:
        expected = {key: resolved[key] for key in wrong}
        raise UserError(f"sampler spec: {wrong} contradict solver {name!r} with params {params}, which give {expected}")
    return resolved
