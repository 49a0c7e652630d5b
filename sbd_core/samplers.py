"""Decoding setups ("samplers"): the one vocabulary of the workflow config, lm-eval's ``model_args`` and the report.

A sampler is ``ntp`` (next-token decoding: one causal token per forward, greedy unless it samples) or one of the block
solvers of :data:`sbd_core.solvers.SOLVERS` used in SBD mode. Its spec is a plain dict::

    {"mode": "ntp" | "sbd", "solver": "ntp" | solver name, "params": {...resolved, defaults included},
     "family": report family ("ntp", "eb-entropy", "eb-confidence", "confidence_threshold", ...),
     "tag": run name ("ntp", "eb-entropy-g0.1", ...)}

``ntp`` takes only the sampling parameters every solver has (``temperature``, ``seed``). The workflow config lists
samplers with one value or a list of values per parameter; :func:`expand_samplers` turns that into one entry per
setting, keyed by tag, so each setting is its own decode job (changing one threshold reruns only it).
"""

from __future__ import annotations

import itertools

from .errors import UserError, user_input
from .solvers import COMMON_PARAMS, SOLVER_NAMES, describe_solvers, get_solver

NTP = "ntp"
SAMPLER_NAMES = (NTP,) + SOLVER_NAMES
DEFAULT_SBD_SOLVER = "eb"
_NTP_SOLVER = "left_to_right"  # NTP feeds a one-position block: the rule only picks that position's token


def describe_samplers() -> dict[str, dict]:
    """``{name: {"summary", "params": {param: default}}}`` for ``ntp`` and every solver (for schemas and docs)."""
    solvers = describe_solvers()
    ntp_params = {key: solvers[_NTP_SOLVER]["params"][key] for key in COMMON_PARAMS}
    ntp = {"summary": "next-token decoding: one token per forward, greedy at temperature 0", "params": ntp_params}
    return {NTP: ntp, **solvers}


def sampler_spec(name: str, **params) -> dict:
    """The spec of sampler ``name`` (``ntp`` or a solver name) with validated ``params`` over its defaults."""
    if name == NTP:
        extra = sorted(set(params) - set(COMMON_PARAMS))
        if extra:
            raise ValueError(f"the ntp sampler (NTP decoding) uses no block solver; it takes only "
                             f"{list(COMMON_PARAMS)}, got {extra}")
        solver = get_solver(_NTP_SOLVER, **params)
        resolved = {key: solver.params[key] for key in COMMON_PARAMS}
        tag = NTP + solver.rule.sampling_tag  # "ntp", or "ntp-t0.7-s1" when sampling
        return {"mode": "ntp", "solver": NTP, "params": resolved, "family": NTP, "tag": tag}
    if name not in SOLVER_NAMES:
        raise ValueError(f"unknown sampler {name!r}; valid names: {SAMPLER_NAMES}")
    solver = get_solver(name, **params)
    return {"mode": "sbd", "solver": name, "params": solver.params, "family": solver.family, "tag": solver.tag}


def sampler_name(mode: str | None = None, solver: str | None = None) -> str:
    """The sampler named by lm-eval style arguments: ``solver=ntp`` and ``mode=ntp`` both mean NTP decoding,
    ``mode=sbd`` (or no mode) with ``solver=NAME`` a block solver (default ``eb``); contradictions are errors."""
    if mode not in (None, "sbd", NTP):
        raise ValueError(f"mode must be 'sbd' or 'ntp', got {mode!r}")
    if mode == NTP and solver not in (None, NTP):
        raise ValueError(f"mode='ntp' contradicts solver={solver!r}: NTP decoding uses no block solver "
                         "(drop solver, or use solver=ntp alone)")
    if mode == "sbd" and solver == NTP:
        raise ValueError("mode='sbd' contradicts solver='ntp' (NTP decoding); use mode=ntp or a block solver, "
                         f"one of {SOLVER_NAMES}")
    return NTP if mode == NTP else solver or DEFAULT_SBD_SOLVER


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
    """The solver callable for a sampler spec (NTP decoding: the next token, greedy or sampled)."""
    if spec["mode"] == NTP:
        return get_solver(_NTP_SOLVER, **spec["params"])
    return get_solver(spec["solver"], **spec["params"])
