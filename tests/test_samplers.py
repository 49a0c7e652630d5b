"""Samplers: one vocabulary (``ntp`` + the solver registry) for the config, lm-eval's model_args and the report."""

import pytest

from sbd_core.samplers import (
    NTP, SAMPLER_NAMES, build_solver, describe_samplers, expand_samplers, sampler_name, sampler_spec,
)
from sbd_core.solvers import SOLVER_NAMES


def test_specs_carry_mode_solver_params_family_and_tag():
    assert sampler_spec("ntp") == {"mode": "ntp", "solver": "ntp", "params": {"temperature": 0.0, "seed": 0},
                                   "family": "ntp", "tag": "ntp"}
    assert sampler_spec("ntp", temperature=0.7, seed=2)["tag"] == "ntp-t0.7-s2"
    eb = sampler_spec("eb", gamma=0.35, proxy="confidence")
    assert eb == {"mode": "sbd", "solver": "eb", "family": "eb-confidence", "tag": "eb-confidence-g0.35",
                  "params": {"gamma": 0.35, "proxy": "confidence", "temperature": 0.0, "seed": 0}}
    assert sampler_spec("left_to_right")["family"] == "left_to_right"
    assert SAMPLER_NAMES == (NTP,) + SOLVER_NAMES and tuple(describe_samplers()) == SAMPLER_NAMES
    assert describe_samplers()["ntp"]["params"] == {"temperature": 0.0, "seed": 0}


def test_expand_sweeps_every_setting():
    samplers = expand_samplers([{"solver": "ntp"}, {"solver": "eb", "gamma": [0, 0.1]},
                                {"solver": "confidence_threshold", "threshold": 0.9}, {"solver": "left_to_right"}])
    assert list(samplers) == ["ntp", "eb-entropy-g0", "eb-entropy-g0.1", "conf-thr-0.9", "l2r-1"]
    assert all(spec["tag"] == tag for tag, spec in samplers.items())
    assert samplers["eb-entropy-g0"]["params"]["gamma"] == 0.0


@pytest.mark.parametrize("entries, match", [
    ([{"gamma": 0.1}], r"decode.samplers\[0\] has no 'solver' key"),
    ([{"solver": "greedy"}], "unknown sampler 'greedy'"),
    ([{"solver": "ntp", "gamma": 0.1}], r"decode.samplers\[0\] \(ntp\):.*takes only \['temperature', 'seed'\]"),
    ([{"solver": "eb", "gamma": [0.1, -1]}], r"\(eb\): gamma=-1"),
    ([{"solver": "eb", "gamma": 0.1}, {"solver": "eb", "gamma": 0.1}], "repeats sampler 'eb-entropy-g0.1'"),
])
def test_expand_rejects_bad_entries(entries, match):
    with pytest.raises(ValueError, match=match):
        expand_samplers(entries)


def test_build_solver_for_ntp_and_sbd_specs():
    assert build_solver(sampler_spec("ntp", temperature=0.5)).params == {"n": 1, "temperature": 0.5, "seed": 0}
    assert build_solver({"mode": "ntp", "solver": "ntp", "params": {}}).tag == "l2r-1"  # records from older runs
    assert build_solver(sampler_spec("topk", n=2)).tag == "topk-2"


@pytest.mark.parametrize("mode, solver, expected", [
    (None, None, "eb"), (None, "ntp", "ntp"), ("ntp", None, "ntp"), ("ntp", "ntp", "ntp"), ("sbd", None, "eb"),
    ("sbd", "factor", "factor"), (None, "topk", "topk"),
])
def test_sampler_name_reads_mode_and_solver(mode, solver, expected):
    assert sampler_name(mode, solver) == expected


@pytest.mark.parametrize("mode, solver, match", [
    ("sbd", "ntp", "mode='sbd' contradicts solver='ntp'"),
    ("ntp", "eb", "mode='ntp' contradicts solver='eb'"),
    ("diffusion", None, "mode must be 'sbd' or 'ntp'"),
])
def test_sampler_name_rejects_contradictions(mode, solver, match):
    with pytest.raises(ValueError, match=match):
        sampler_name(mode, solver)
