"""Samplers: one vocabulary (``ntp``, the solver registry, the training-free peers) for the config, lm-eval's
model_args and the report."""

from dataclasses import FrozenInstanceError

import pytest

from sbd_core.decoding.factory import make_solver
from sbd_core.samplers import (
    NTP, PEER_NAMES, SAMPLER_NAMES, Sampler, as_sampler, checked_sampler, decode_mode, describe_samplers,
    expand_samplers, make_sampler, sampler_label, sampler_name, sampler_spec,
)
from sbd_core.errors import UserError
from sbd_core.solver_rules import SOLVER_NAMES


def test_specs_carry_mode_solver_params_family_and_tag():
    assert sampler_spec("ntp") == {"mode": "ntp", "solver": "ntp", "params": {"temperature": 0.0, "seed": 0},
                                   "family": "ntp", "tag": "ntp"}
    assert sampler_spec("ntp", temperature=0.7, seed=2)["tag"] == "ntp-t0.7-s2"
    eb = sampler_spec("eb", gamma=0.35, proxy="confidence")
    assert eb == {"mode": "sbd", "solver": "eb", "family": "eb-confidence", "tag": "eb-confidence-g0.35",
                  "params": {"gamma": 0.35, "proxy": "confidence", "verify": "none", "temperature": 0.0, "seed": 0}}
    assert sampler_spec("left_to_right")["family"] == "left_to_right"
    assert SAMPLER_NAMES == (NTP,) + SOLVER_NAMES + PEER_NAMES and tuple(describe_samplers()) == SAMPLER_NAMES
    assert describe_samplers()["ntp"]["params"] == {"temperature": 0.0, "seed": 0}


def test_peer_specs_validate_their_parameters():
    assert sampler_spec("hf_generate") == {"mode": "hf", "solver": "hf_generate", "params": {},
                                           "family": "hf-generate", "tag": "hf-generate"}
    assert sampler_spec("prompt_lookup") == {"mode": "hf", "solver": "prompt_lookup", "family": "prompt-lookup",
                                             "params": {"tokens": 10, "max_matching_ngram_size": 2},
                                             "tag": "prompt-lookup-10"}
    assert sampler_spec("prompt_lookup", tokens=4, max_matching_ngram_size=3)["tag"] == "prompt-lookup-4-ng3"
    assert describe_samplers()["prompt_lookup"]["params"] == {"tokens": 10, "max_matching_ngram_size": 2}
    assert checked_sampler(sampler_spec("prompt_lookup", tokens=4)) == sampler_spec("prompt_lookup", tokens=4)
    assert [decode_mode(sampler_spec(n)) for n in ("ntp", "eb", "hf_generate", "prompt_lookup")] == [
        "ntp", "sbd", "ntp", "ntp"]
    with pytest.raises(ValueError, match="training-free peer"):
        make_solver(sampler_spec("hf_generate"))  # a peer is decoded by generate (make_decoder), not a solver
    with pytest.raises(UserError, match="contradict"):
        checked_sampler({**sampler_spec("prompt_lookup"), "mode": "sbd"})


@pytest.mark.parametrize("entry, match", [
    ({"solver": "prompt_lookup", "tokens": 0}, r"tokens must be an int >= 1, got 0"),
    ({"solver": "prompt_lookup", "tokens": 2.5}, r"tokens must be an int >= 1, got 2.5"),
    ({"solver": "prompt_lookup", "tokens": True}, r"tokens must be an int >= 1, got True"),
    ({"solver": "prompt_lookup", "max_matching_ngram_size": 0}, r"max_matching_ngram_size must be an int >= 1"),
    ({"solver": "prompt_lookup", "gamma": 0.1}, r"takes only \['tokens', 'max_matching_ngram_size'\], got \['gamma'\]"),
    ({"solver": "hf_generate", "temperature": 0.7},
     r"\(hf_generate\): .*greedy\) takes only \[\], got \['temperature'\]"),
])
def test_peer_entries_are_checked(entry, match):
    with pytest.raises(ValueError, match=match):
        expand_samplers([entry])


def test_labels_name_samplers_in_words():
    specs = expand_samplers([{"solver": "ntp"}, {"solver": "ntp", "temperature": 0.7}, {"solver": "eb", "gamma": 0.1},
                             {"solver": "eb", "proxy": "confidence", "gamma": 0.35}, {"solver": "topk", "n": 4},
                             {"solver": "hf_generate"}, {"solver": "prompt_lookup", "tokens": [10, 4]},
                             {"solver": "prompt_lookup", "max_matching_ngram_size": 3},
                             {"solver": "eb", "gamma": [0.3, 1.0], "verify": "greedy"},
                             {"solver": "topk", "n": 2, "verify": "greedy"}])
    assert [sampler_label(s) for s in specs.values()] == [
        "NTP", "NTP (t0.7-s0)", "EB \u03b3=0.1", "EB \u03b3=0.35 (confidence)", "topk-4", "HF generate",
        "prompt lookup (10)", "prompt lookup (4)", "prompt lookup (10, 3-grams)", "EB \u03b3=0.3 + verify",
        "EB \u03b3=1 + verify", "topk-2-verify"]


def test_expand_sweeps_every_setting():
    samplers = expand_samplers([{"solver": "ntp"}, {"solver": "eb", "gamma": [0, 0.1]},
                                {"solver": "confidence_threshold", "threshold": 0.9}, {"solver": "left_to_right"}])
    assert list(samplers) == ["ntp", "eb-entropy-g0", "eb-entropy-g0.1", "conf-thr-0.9", "l2r-1"]
    peers = expand_samplers([{"solver": "hf_generate"}, {"solver": "prompt_lookup", "tokens": [4, 10]}])
    assert list(peers) == ["hf-generate", "prompt-lookup-4", "prompt-lookup-10"]
    assert all(spec["tag"] == tag for tag, spec in samplers.items())
    assert samplers["eb-entropy-g0"]["params"]["gamma"] == 0.0


@pytest.mark.parametrize("entries, match", [
    ([{"gamma": 0.1}], r"decode.samplers\[0\] has no 'solver' key"),
    ([{"solver": "greedy"}], "unknown sampler 'greedy'"),
    ([{"solver": "ntp", "gamma": 0.1}], r"decode.samplers\[0\] \(ntp\):.*takes only \['temperature', 'seed'\]"),
    ([{"solver": "ntp", "verify": "greedy"}], r"decode.samplers\[0\] \(ntp\):.*takes only \['temperature', 'seed'\]"),
    ([{"solver": "eb", "verify": "greedy", "temperature": 0.7}], r"decode.samplers\[0\] \(eb\): verify='greedy'"),
    ([{"solver": "eb", "gamma": [0.1, -1]}], r"\(eb\): gamma=-1"),
    ([{"solver": "eb", "gamma": 0.1}, {"solver": "eb", "gamma": 0.1}], "repeats sampler 'eb-entropy-g0.1'"),
])
def test_expand_rejects_bad_entries(entries, match):
    with pytest.raises(ValueError, match=match):
        expand_samplers(entries)


def test_make_solver_for_ntp_and_sbd_specs():
    assert make_solver(sampler_spec("ntp", temperature=0.5)).params == {"n": 1, "verify": "none", "temperature": 0.5,
                                                                         "seed": 0}
    assert make_solver({"mode": "ntp", "solver": "ntp", "params": {}}).tag == "l2r-1"  # records from older runs
    assert make_solver(sampler_spec("topk", n=2)).tag == "topk-2"


@pytest.mark.parametrize("mode, solver, expected", [
    (None, None, "eb"), (None, "ntp", "ntp"), ("ntp", None, "ntp"), ("ntp", "ntp", "ntp"), ("sbd", None, "eb"),
    ("sbd", "factor", "factor"), (None, "topk", "topk"), ("hf", None, "hf_generate"), (None, "prompt_lookup",
                                                                                       "prompt_lookup"),
    ("hf", "prompt_lookup", "prompt_lookup"),
])
def test_sampler_name_reads_mode_and_solver(mode, solver, expected):
    assert sampler_name(mode, solver) == expected


@pytest.mark.parametrize("mode, solver, match", [
    ("sbd", "ntp", "mode='sbd' contradicts solver='ntp'"),
    ("ntp", "eb", "mode='ntp' contradicts solver='eb'"),
    ("sbd", "hf_generate", "mode='sbd' contradicts solver='hf_generate'"),
    ("hf", "eb", "mode='hf' contradicts solver='eb'"),
    ("ntp", "prompt_lookup", "mode='ntp' contradicts solver='prompt_lookup'"),
    ("diffusion", None, "mode must be 'sbd', 'ntp' or 'hf'"),
])
def test_sampler_name_rejects_contradictions(mode, solver, match):
    with pytest.raises(ValueError, match=match):
        sampler_name(mode, solver)


def test_sampler_is_frozen_and_a_dict_only_at_the_json_boundary():
    eb = make_sampler("eb", gamma=0.1, verify="greedy")
    assert (eb.is_peer, eb.decoder, eb.decode_mode, eb.rule_name, eb.label) == (False, "block", "sbd", "eb",
                                                                                 "EB \u03b3=0.1 + verify")
    assert Sampler.from_dict(eb.to_dict()) == eb and eb.to_dict() == sampler_spec("eb", gamma=0.1, verify="greedy")
    with pytest.raises(FrozenInstanceError):
        eb.tag = "x"
    peer, ntp = make_sampler("prompt_lookup", tokens=4), make_sampler("ntp", temperature=0.5)
    assert (peer.is_peer, peer.decoder, peer.decode_mode, peer.label) == (True, "peer", "ntp", "prompt lookup (4)")
    assert (ntp.is_peer, ntp.decode_mode, ntp.rule_name, ntp.label) == (False, "ntp", "left_to_right", "NTP (t0.5-s0)")
    assert as_sampler({"solver": "ntp", "params": {}}) == make_sampler("ntp")  # an older record: resolved again
