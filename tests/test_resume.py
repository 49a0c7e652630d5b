"""A fine-tune killed mid-run resumes from its last checkpoint and reaches the same final loss; no half-written outputs."""

import json

import pytest
import torch
from conftest import char_tokenizer, tiny_model
from sbd_core import pipeline
from sbd_core.mask_token import setup_mask_token
from sbd_core.samplers import sampler_spec
from sbd_core.train import tokenize_examples, train
from sbd_core.train_config import TrainConfig


class Killed(Exception):
    pass


class KillAt:
    def __init__(self, step):
        self.step = step

    def __call__(self, step, record):
        if step == self.step:
            raise Killed(f"killed at step {step}")


def fresh_model():
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok), seed=0)
    setup_mask_token(tok, model)
    return model.train(), tok


def run(tmp_path, name, callbacks=()):
    model, tok = fresh_model()
    rows = tokenize_examples(tok, [(f"{a}*{b}=", str(a * b)) for a in range(2, 30) for b in range(2, 6)], 24)
    config = TrainConfig(objective="sbd", max_steps=8, batch_size=8, learning_rate=2e-3, warmup_steps=1,
                         save_steps=3, logging_steps=1, seed=7)
    return train(model, tok, rows, config, tmp_path / name, tmp_path / f"{name}.jsonl", progress=False,
                 callbacks=list(callbacks))


def losses(path):
    return [json.loads(line)["loss"] for line in path.read_text().splitlines()]


def test_killed_finetune_resumes_to_the_same_final_loss(tmp_path):
    straight = run(tmp_path, "straight")
    with pytest.raises(Killed):
        run(tmp_path, "resumed", callbacks=[KillAt(5)])
    assert (tmp_path / "resumed" / "checkpoint-3").is_dir()
    resumed = run(tmp_path, "resumed")
    assert resumed["resumed_from"].endswith("checkpoint-3") and resumed["steps"] == 8
    assert losses(tmp_path / "resumed.jsonl") == pytest.approx(losses(tmp_path / "straight.jsonl"), abs=1e-6)
    assert resumed["final"]["loss"] == pytest.approx(straight["final"]["loss"], abs=1e-6)


def test_failed_decode_leaves_no_output(tmp_path, monkeypatch):
    from sbd_core import checkpoint
    from sbd_core.decoding.engine import FastDecoder

    model, tok = fresh_model()
    model_dir = checkpoint.save(model, tok, tmp_path / "model")
    test_file = pipeline.run_benchmark("math", {"limit": 3, "max_new_tokens": 4}, tmp_path / "bench")

    def crash(self, prompts, progress=False):
        raise RuntimeError("out of memory (simulated)")

    monkeypatch.setattr(FastDecoder, "generate", crash)  # the decoder of the default decode.engine
    out = tmp_path / "gen" / "math.jsonl"
    with pytest.raises(RuntimeError, match="simulated"):
        pipeline.run_decode(model_dir, "math", {"limit": 3, "max_new_tokens": 4}, test_file, sampler_spec("ntp"), {},
                            out)
    assert not out.exists()
    assert not (tmp_path / "gen").exists() or not any((tmp_path / "gen").iterdir())


def test_failed_save_leaves_no_checkpoint_folder(tmp_path, monkeypatch):
    from sbd_core import checkpoint

    model, tok = fresh_model()
    monkeypatch.setattr(type(tok), "save_pretrained", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(model, tok, tmp_path / "model")
    assert not any(tmp_path.iterdir())  # neither the folder nor its temporary sibling
