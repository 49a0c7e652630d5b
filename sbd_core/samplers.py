"""Decoding setups ("samplers") named by a tag: ``ntp`` or a solver's tag such as ``eb-entropy-g0.1``.

The workflow config lists solvers with one value or a list of values per parameter; :func:`expand_samplers` turns that
into one entry per setting, keyed by tag, so each setting is its own decode job (changing one threshold reruns only it).
"""

from __future__ import annotations

import itertools

from .solvers import get_solver

NTP = "ntp"


def expand_samplers(entries: list[dict]) -> dict[str, dict]:
    """``[{"solver": "eb", "gamma": [0, 0.1]}, {"solver": "ntp"}]`` -> ``{tag: {"mode", "solver", "params"}}``."""
    samplers: dict[str, dict] = {}
    for i, entry in enumerate(entries):
        entry = dict(entry)
        name = entry.pop("solver", None)
        if name is None:
            raise ValueError(f"decode.samplers[{i}] has no 'solver' key (use 'ntp' or one of the solver names)")
        if name == NTP:
            if entry:
                raise ValueError(f"decode.samplers[{i}]: the ntp sampler takes no parameters, got {sorted(entry)}")
            samplers[NTP] = {"mode": "ntp", "solver": NTP, "params": {}}
            continue
        keys = sorted(entry)
        values = [v if isinstance(v, list) else [v] for v in (entry[k] for k in keys)]
        for combo in itertools.product(*values):
            params = dict(zip(keys, combo))
            try:
                solver = get_solver(name, **params)
            except ValueError as err:
                raise ValueError(f"decode.samplers[{i}] ({name}): {err}") from err
            if solver.tag in samplers:
                raise ValueError(f"decode.samplers[{i}]: setting {params} repeats sampler {solver.tag!r}")
            samplers[solver.tag] = {"mode": "sbd", "solver": name, "params": solver.params}
    return samplers


def build_solver(spec: dict):
    """The solver callable for a sampler spec (NTP decoding: greedy top-1)."""
    if spec["mode"] == "ntp":
        return get_solver("topk", n=1)
    return get_solver(spec["solver"], **spec["params"])
