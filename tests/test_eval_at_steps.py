"""finetune.eval_at_steps and finetune.seeds: the trainer keeps the model of a named step as a loadable checkpoint
folder (the model after exactly that many steps, also across a resume), and the workflow's arm names and settings."""

import json
import shutil

import pytest
import torch
from conftest import char_tokenizer, tiny_model
from training_fixtures import packed_base
from sbd_core import checkpoint, launch, pipeline
from sbd_core.mask_token import setup_mask_token
from sbd_core.pipeline.arms import Arm, plan_arms, seeds_of, trained_arms, trainer_spec
from sbd_core.train import tokenize_examples, train
from sbd_core.train_config import TrainConfig

PAIRS = [(f"{a}*{b}=", str(a * b)) for a in range(2, 30) for b in range(2, 6)]
TRAIN = {"max_steps": 5, "batch_size": 8, "learning_rate": 2e-3, "warmup_steps": 1, "save_steps": 3,
         "logging_steps": 1, "seed": 7, "max_length": 24}


def fresh_model():
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok), seed=0)
    setup_mask_token(tok, model)
    return model.train(), tok


def rows_of(tok):
    return tokenize_examples(tok, PAIRS, 24)


def weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_export_is_the_model_after_that_step_and_comes_before_its_checkpoint(tmp_path):
    model, tok = fresh_model()
    seen = {}

    def export(step):
        seen[step] = (weights(model), (tmp_path / "a" / f"checkpoint-{step}").exists())

    train(model, tok, rows_of(tok), TrainConfig(objective="sbd", **TRAIN), tmp_path / "a", tmp_path / "a.jsonl",
          progress=False, export_steps={2, 3}, export=export)
    assert sorted(seen) == [2, 3]
    assert seen[3][1] is False  # step 3 is a save step: the export is written first, so a resume cannot skip it
    short, tok = fresh_model()
    train(short, tok, rows_of(tok), TrainConfig(objective="sbd", **TRAIN), tmp_path / "b", tmp_path / "b.jsonl",
          progress=False, stop_at=3)  # the same run stopped after 3 steps
    for key, value in weights(short).items():
        assert torch.allclose(seen[3][0][key], value, atol=1e-6), key
    assert any(not torch.allclose(seen[2][0][k], v, atol=1e-6) for k, v in weights(short).items())


@pytest.fixture()
def request_for(tmp_path, monkeypatch):
    model, tok = fresh_model()
    base = checkpoint.save(model.eval(), tok, tmp_path / "base")
    monkeypatch.setattr(launch, "load_training_rows", lambda data, tokenizer, max_length: rows_of(tokenizer))

    def make(**extra):
        return {"base": str(base), "data": str(tmp_path / "packed"), "objective": "sbd", "train": TRAIN,
                "out": str(tmp_path / "sbd"), "checkpoints": str(tmp_path / "ckpt"),
                "exports": {"2": str(tmp_path / "sbd-step2"), "4": str(tmp_path / "sbd-step4")}, **extra}

    return make


def test_worker_writes_loadable_exports_beside_the_final_model(tmp_path, request_for):
    launch.worker(launch.check_request(request_for()))
    assert not (tmp_path / "ckpt").exists()  # the resume state is gone, the exports moved out of it
    for step in (2, 4):
        folder = tmp_path / f"sbd-step{step}"
        model, tok = checkpoint.load(folder)
        assert json.loads((folder / "train_summary.json").read_text())["steps"] == step
        assert json.loads((folder / "config.json").read_text())["sbd_mask_token_id"] == tok.convert_tokens_to_ids(
            "<|reserved_special_token_0|>")
    final, _ = checkpoint.load(tmp_path / "sbd")
    early, _ = checkpoint.load(tmp_path / "sbd-step2")
    assert not torch.equal(final.model.embed_tokens.weight, early.model.embed_tokens.weight)


def test_a_resumed_fine_tune_still_delivers_an_export_made_before_the_kill(tmp_path, request_for):
    launch.worker(launch.check_request(request_for(stop_after_steps=3)))  # a time limit after step 3
    staged = tmp_path / "ckpt" / "exports" / "step-2"
    assert (staged / "config.json").is_file() and not (tmp_path / "sbd-step2").exists()
    staged_bytes = (staged / "model.safetensors").read_bytes()
    launch.worker(launch.check_request(request_for()))  # resumes from checkpoint-3: step 2 is not trained again
    assert (tmp_path / "sbd-step2" / "model.safetensors").read_bytes() == staged_bytes
    assert (tmp_path / "sbd-step4" / "config.json").is_file() and (tmp_path / "sbd" / "config.json").is_file()


def test_a_lost_export_is_an_error_not_a_missing_model(tmp_path, request_for):
    launch.worker(launch.check_request(request_for(stop_after_steps=3)))
    shutil.rmtree(tmp_path / "ckpt" / "exports" / "step-2")
    with pytest.raises(RuntimeError, match=r"exports at steps \[2\] are missing"):
        launch.worker(launch.check_request(request_for()))


def test_exports_outside_the_run_are_refused(request_for):
    with pytest.raises(ValueError, match=r"exports at steps \['5'\]"):
        launch.check_request(request_for(exports={"5": "x"}))


def test_finetune_stage_passes_exports_and_restarts_when_they_change(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline.training, "launch", lambda request, processes, nodes: calls.append(request))
    base = packed_base(tmp_path)
    spec = {"max_steps": 5, "max_length": 512, "allow_resize": True}
    run = lambda exports: pipeline.run_finetune(base, tmp_path / "packed", "sbd", spec, tmp_path / "out",
                                                tmp_path / "ckpt", exports=exports)
    run({2: tmp_path / "e2"})
    assert calls[-1]["exports"] == {"2": str(tmp_path / "e2")}
    stamp = (tmp_path / "ckpt" / "settings.sha256").read_text()
    run({2: tmp_path / "e2", 4: tmp_path / "e4"})  # other exports: the resume state of the old run is not reused
    assert (tmp_path / "ckpt" / "settings.sha256").read_text() != stamp
    run(None)
    assert "exports" not in calls[-1]


# ------------------------------------------------------------------------------------------------ arm names
def test_arm_names_seeds_and_budgets():
    arms = plan_arms({"objectives": ["ntp", "sbd"], "seeds": [1, 0], "eval_at_steps": [300, 100], "max_steps": 900})
    assert list(arms) == ["ntp", "ntp-step100", "ntp-step300", "sbd", "sbd-step100", "sbd-step300",
                          "ntp-s1", "ntp-s1-step100", "ntp-s1-step300", "sbd-s1", "sbd-s1-step100", "sbd-s1-step300"]
    assert arms["sbd-s1-step300"] == Arm("sbd", 1, 300) and arms["sbd-s1-step300"].trained == "sbd-s1"
    assert arms["sbd-s1"].train_steps(900) == 900 and arms["ntp-step100"].train_steps(900) == 100
    assert list(trained_arms(arms)) == ["ntp", "sbd", "ntp-s1", "sbd-s1"]
    assert list(plan_arms({"objectives": ["ntp", "sbd"], "max_steps": 9})) == ["ntp", "sbd"]  # plain paths
    assert list(plan_arms({"objectives": ["sbd"], "seed": 3, "max_steps": 9})) == ["sbd-s3"]
    assert seeds_of({}) == [0]


def test_seed_zero_of_a_seed_list_is_the_job_of_a_config_without_seeds():
    spec = {"max_steps": 9, "batch_size": 4}
    assert trainer_spec(Arm("sbd", 0), spec) == spec  # the same settings: Snakemake reuses the job
    assert trainer_spec(Arm("sbd", 2), spec) == {**spec, "seed": 2}


@pytest.mark.parametrize("finetune, words", [
    ({"seeds": [0, 1], "seed": 1}, ["seed or seeds"]),
    ({"seeds": [0, 0]}, ["seeds", "repeats"]),
    ({"seeds": [-1]}, ["seeds", ">= 0"]),
    ({"eval_at_steps": [9]}, ["eval_at_steps", "below max_steps=9"]),
    ({"eval_at_steps": [0]}, ["eval_at_steps", ">= 1"]),
])
def test_bad_seeds_and_budgets_are_named(finetune, words):
    with pytest.raises(ValueError) as err:
        plan_arms({"objectives": ["ntp", "sbd"], "max_steps": 9, **finetune})
    for word in words:
        assert word in str(err.value)
