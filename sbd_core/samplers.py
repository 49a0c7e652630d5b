"""Decoding setups ("samplers"): the one vocabulary of the workflow config, lm-eval's ``model_args`` and the report.

A sampler is ``ntp`` (next-token decoding: one causal token per forward, greedy unless it samples), one of the block
solvers of :data:`sbd_core.solvers.SOLVERS` used in SBD mode, or a training-free peer of :data:`PEERS` (Hugging Face
``generate``, greedy or with prompt lookup; :mod:`sbd_core.peers`), which the workflow decodes on the NTP arm only.
Its spec is a plain dict::

    {"mode": "ntp" | "sbd" | "hf", "solver": "ntp" | solver name | peer name,
     "params": {...resolved, defaults included},
     "family": report family ("ntp", "eb-entropy", "confidence_threshold", "hf-generate", "prompt-lookup", ...),
     "tag": run name ("ntp", "eb-entropy-g0.1", "eb-entropy-g0.1-verify", "hf-generate", "prompt-lookup-10", ...)}

``ntp`` takes only the sampling parameters every solver has (``temperature``, ``seed``); a block solver also takes
``verify`` (``greedy`` / ``sample``: every block checked against NTP mode, :mod:`sbd_core.verify`); the peers are greedy
and take only their own parameters. The workflow config lists samplers with one value or a list of values per
parameter; :func:`expand_samplers` turns that into one entry per setting, keyed by tag, so each setting is its own
decode job (changing one threshold reruns only it). :func:`build_decoder` is the one place a spec picks its decoder.
"""

from __future__ import annotations

import itertools

from .errors import UserError, user_input
from .solver_rules import COMMON_PARAMS, SOLVER_NAMES, describe_solvers, make_rule

NTP = "ntp"
PEER_MODE = "hf"  # the training-free peers: Hugging Face generate on the NTP arm (sbd_core.peers)
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


def sampler_spec(name: str, **params) -> dict:
    """The spec of sampler ``name`` (``ntp`` or a solver name) with validated ``params`` over its defaults."""
    if name == NTP:
        extra = sorted(set(params) - set(COMMON_PARAMS))
        if extra:
            raise ValueError(f"the ntp sampler (NTP decoding) uses no block solver; it takes only "
                             f"{list(COMMON_PARAMS)}, got {extra}")
        rule = make_rule(_NTP_SOLVER, **params)
        resolved = {key: rule.params[key] for key in COMMON_PARAMS}
        tag = NTP + rule.sampling_tag  # "ntp", or "ntp-t0.7-s1" when sampling
        return {"mode": "ntp", "solver": NTP, "params": resolved, "family": NTP, "tag": tag}
    if name in PEERS:
        return _peer_spec(name, params)
    if name not in SOLVER_NAMES:
        raise ValueError(f"unknown sampler {name!r}; valid names: {SAMPLER_NAMES}")
    rule = make_rule(name, **params)
    return {"mode": "sbd", "solver": name, "params": rule.params, "family": rule.family, "tag": rule.tag}


def _peer_spec(name: str, params: dict) -> dict:
    """The spec of a training-free peer: its integer parameters (>= 1) over the defaults of :data:`PEERS`."""
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
    return {"mode": PEER_MODE, "solver": name, "params": resolved, "family": family, "tag": tag}


def sampler_label(spec: dict) -> str:
    """A reader's name for a sampler spec: ``NTP``, ``EB γ=0.1``, ``EB γ=0.1 + verify``, ``HF generate``, ``prompt
    lookup (10)``; other solvers (and settings it has no words for) by their tag."""
    params, tag, solver = spec.get("params") or {}, spec["tag"], spec["solver"]
    if solver == NTP:
        return "NTP" + (f" ({tag[len(NTP) + 1:]})" if tag != NTP else "")
    if solver == "hf_generate":
        return "HF generate"
    if solver == "prompt_lookup":
        defaults = PEERS["prompt_lookup"]["params"]
        tokens, ngram = (params.get(key, defaults[key]) for key in ("tokens", "max_matching_ngram_size"))
        return f"prompt lookup ({tokens}" + ("" if ngram == defaults["max_matching_ngram_size"] else
                                              f", {ngram}-grams") + ")"
    gamma, proxy = params.get("gamma"), params.get("proxy")
    verified = params.get("verify", "none") != "none"
    suffix = " + verify" if verified else ""
    if solver == "eb" and gamma is not None and tag == f"eb-{proxy}-g{gamma:g}{suffix and '-verify'}":
        return f"EB \u03b3={gamma:g}" + ("" if proxy == "entropy" else f" ({proxy})") + suffix
    return tag


def decode_mode(spec: dict) -> str:
    """The :class:`sbd_core.generation.DecodeConfig` mode a spec decodes in: ``sbd`` for the block solvers, ``ntp`` for
    NTP decoding and the peers (one causal stream, no mask token)."""
    return "sbd" if spec["mode"] == "sbd" else NTP


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
        resolved = sampler_spec(name, **params)
    wrong = {key: value for key, value in stated.items() if resolved[key] != value}
    if wrong:
        expected = {key: resolved[key] for key in wrong}
        raise UserError(f"sampler spec: {wrong} contradict solver {name!r} with params {params}, which give {expected}")
    return resolved


def build_solver(spec: dict):
    """The solver callable for a sampler spec (NTP decoding: the next token, greedy or sampled); the peers have none.
    (:mod:`sbd_core.solvers` is imported here: it loads torch, and the workflow reads this module without it.)"""
    if spec["mode"] == PEER_MODE:
        raise ValueError(f"sampler {spec['tag']!r} is a training-free peer (Hugging Face generate): it has no block "
                         "solver; build_decoder gives its decoder")
    from .solvers import get_solver

    if spec["mode"] == NTP:
        return get_solver(_NTP_SOLVER, **spec["params"])
    return get_solver(spec["solver"], **spec["params"])


def build_decoder(model, tokenizer, config, spec: dict):
    """The decoder of a sampler spec: :class:`sbd_core.peers.PeerDecoder` for a peer, else
    :class:`sbd_core.decode.BlockDecoder` with the spec's solver; ``config`` is a DecodeConfig in the spec's
    :func:`decode_mode`. (Imported here, not at the top: the workflow and the report read this module without
    loading torch or transformers.)"""
    if spec["mode"] == PEER_MODE:
        from .peers import PeerDecoder

        return PeerDecoder(model, tokenizer, config, spec)
    from .decode import BlockDecoder

    return BlockDecoder(model, tokenizer, config, build_solver(spec))
