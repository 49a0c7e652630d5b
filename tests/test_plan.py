"""The workflow's plan (sbd_core.pipeline.plan), on hand-made configs: which samplers decode each arm, the decode runs,
a score file's run names and the speed job's rows, each against the list written out by hand."""

import pytest

from sbd_core.errors import UserError
from sbd_core.pipeline.arms import Arm
from sbd_core.pipeline.plan import run_names, runs, samplers_of, speed_rows

SAMPLERS = ["ntp", "eb-entropy-g0.1", "hf-generate", "conf-thr-0.9"]
PEERS = ["hf-generate"]
ARMS = {"ntp": Arm("ntp"), "sbd": Arm("sbd"), "sbd-step450": Arm("sbd", step=450), "sbd-s1": Arm("sbd", seed=1)}


def test_the_ntp_arm_gets_ntp_and_the_peers_every_other_arm_ntp_and_the_block_solvers():
    assert samplers_of("ntp", SAMPLERS, PEERS, {}) == ["ntp", "hf-generate"]
    assert samplers_of("sbd", SAMPLERS, PEERS, {}) == ["ntp", "eb-entropy-g0.1", "conf-thr-0.9"]


def test_restrict_names_a_sublist_per_objective():
    restrict = {"sbd": ["conf-thr-0.9"], "ntp": ["ntp"]}
    assert samplers_of("sbd", SAMPLERS, PEERS, restrict) == ["conf-thr-0.9"]
    assert samplers_of("ntp", SAMPLERS, PEERS, restrict) == ["ntp"]
    assert samplers_of("sbd_no_ntp_grad", SAMPLERS, PEERS, restrict) == ["ntp", "eb-entropy-g0.1", "conf-thr-0.9"]


@pytest.mark.parametrize("objective, chosen, message", [
    ("sbd", ["eb-x"], "decode.restrict.sbd names ['eb-x'], not among decode.samplers"),
    ("sbd", ["hf-generate"], "decode.restrict.sbd names ['hf-generate']: the peers (['hf-generate']) decode the NTP"),
    ("ntp", ["eb-entropy-g0.1"], "decode.restrict.ntp names ['eb-entropy-g0.1']: the peers"),
    ("ntp", ["hf-generate"], "decode.restrict.ntp must include ntp"),
])
def test_a_wrong_restrict_is_a_user_error_naming_the_key(objective, chosen, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        samplers_of(objective, SAMPLERS, PEERS, {objective: chosen})


def test_runs_are_every_model_arm_and_its_samplers_in_order():
    arms = {"ntp": Arm("ntp"), "sbd": Arm("sbd")}
    samplers_for = {"ntp": ["ntp", "hf-generate"], "sbd": ["ntp", "eb"]}.get
    assert runs(["a", "b"], arms, samplers_for) == [
        ("a", "ntp", "ntp"), ("a", "ntp", "hf-generate"), ("a", "sbd", "ntp"), ("a", "sbd", "eb"),
        ("b", "ntp", "ntp"), ("b", "ntp", "hf-generate"), ("b", "sbd", "ntp"), ("b", "sbd", "eb")]


def test_run_names_give_the_checkpoints_steps_and_the_final_models_max_steps():
    assert run_names("m", ARMS["sbd-step450"], "eb", 1800) == {
        "model": "m", "objective": "sbd", "sampler": "eb", "train_seed": 0, "train_steps": 450}
    assert run_names("m", ARMS["sbd-s1"], "ntp", 1800) == {
        "model": "m", "objective": "sbd", "sampler": "ntp", "train_seed": 1, "train_steps": 1800}


def test_speed_rows_are_the_models_runs_with_their_folders_identity_and_generations():
    decode_runs = [("m", "ntp", "ntp"), ("other", "ntp", "ntp"), ("m", "sbd-s1", "eb")]
    specs = {"ntp": {"mode": "ntp"}, "eb": {"mode": "sbd", "solver": "eb"}}
    assert speed_rows("results/r", "m", "math", decode_runs, ARMS, specs, 1800) == [
        {"arm": "ntp", "model": "results/r/models/m/ntp", "objective": "ntp", "train_seed": 0, "train_steps": 1800,
         "sampler": "ntp", "sampler_spec": {"mode": "ntp"}, "generations": "results/r/generations/m/ntp/ntp/math.jsonl"},
        {"arm": "sbd-s1", "model": "results/r/models/m/sbd-s1", "objective": "sbd", "train_seed": 1,
         "train_steps": 1800, "sampler": "eb", "sampler_spec": {"mode": "sbd", "solver": "eb"},
         "generations": "results/r/generations/m/sbd-s1/eb/math.jsonl"}]
