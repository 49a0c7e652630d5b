"""The fine-tune on 2 CPU processes (torchrun, gloo, FSDP2-sharded) through the same launcher as on GPUs: same losses as
1 process at the same global batch, and a checkpoint written by 2 processes resumes in 1 process to the same losses.

Tolerance: 1e-5 on every logged loss. Both runs are fp32 and see the same rows, block sizes and noise; they differ
only in float summation order (sharded gradient reduction, split batches): measured differences are <= 5e-7.
"""

import json

import pytest
import torch

from conftest import char_tokenizer, tiny_model
from sbd_core import checkpoint
from sbd_core.distributed import Runtime
from sbd_core.launch import launch
from sbd_core.train import train
from sbd_core.train_config import TrainConfig
from sbd_core.training_data import MixSpec, build

pytestmark = pytest.mark.slow
TOL = 1e-5
SETTINGS = dict(max_steps=6, learning_rate=3e-3, warmup_steps=1, save_steps=3, logging_steps=1, max_length=96,
                loss_on_prompt=False, seed=3)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny base checkpoint, a packed chat mix, and the 1-process reference run (4 rows per step)."""
    root = tmp_path_factory.mktemp("dist")
    tok = char_tokenizer()
    checkpoint.save(tiny_model("llama", len(tok), seed=1), tok, root / "base")
    records = [{"question": f"What is {a} + {a}?", "answer": f"{a} + {a} = {2 * a}\n#### {2 * a}"} for a in range(60)]
    (root / "gsm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    mix = MixSpec.from_dict({"sources": [{"name": "gsm8k", "path": str(root / "gsm.jsonl")}], "max_length": 96})
    build(mix, tok, root / "raw", root / "data")
    reference = run_in_process(root, "reference")
    return root, reference


def run_in_process(root, name):
    from sbd_core.launch import load_training_rows
    from sbd_core.mask_token import setup_mask_token

    model, tok = checkpoint.load(root / "base")
    setup_mask_token(tok, model)
    rows = load_training_rows(root / "data", tok, SETTINGS["max_length"])
    config = TrainConfig(objective="sbd", batch_size=4, **SETTINGS)
    summary = train(model, tok, rows, config, root / name, root / f"{name}.jsonl", progress=False,
                    runtime=Runtime(rank=0, world_size=1, device=torch.device("cpu")))
    return {"summary": summary, "log": read_log(root / f"{name}.jsonl"), "model": model}


def read_log(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def request(root, name, **extra):
    return {"base": str(root / "base"), "data": str(root / "data"), "objective": "sbd", "device": "cpu",
            "train": {"batch_size": 2, **SETTINGS}, "out": str(root / name / "model"),
            "checkpoints": str(root / name / "checkpoints"), **extra}


def assert_same_losses(log, reference):
    assert [r["step"] for r in log] == [r["step"] for r in reference]
    for got, want in zip(log, reference):
        for key in ("loss", "ntp_loss", "matp_loss"):
            assert got[key] == pytest.approx(want[key], abs=TOL), (got["step"], key)


def test_two_sharded_processes_match_one(setup):
    root, reference = setup
    launch(request(root, "two"), processes=2, env={"CUDA_VISIBLE_DEVICES": ""}, log_file=root / "two.log")
    out = root / "two" / "model"
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["rows_per_step"] == 4
    assert_same_losses(read_log(out / "train_log.jsonl"), reference["log"])
    assert not (root / "two" / "checkpoints").exists()  # the finished model replaced the resume state
    trained, _ = checkpoint.load(out)
    for name, weight in trained.state_dict().items():
        assert torch.allclose(weight, reference["model"].state_dict()[name], atol=1e-3), name


def test_checkpoint_of_two_processes_resumes_in_one(setup):
    root, reference = setup
    launch(request(root, "cut", stop_after_steps=3), processes=2, env={"CUDA_VISIBLE_DEVICES": ""},
           log_file=root / "cut.log")
    checkpoints = root / "cut" / "checkpoints"
    assert (checkpoints / "checkpoint-3").is_dir() and not (root / "cut" / "model").exists()
    from sbd_core.launch import load_training_rows
    from sbd_core.mask_token import setup_mask_token

    model, tok = checkpoint.load(root / "base")
    setup_mask_token(tok, model)
    rows = load_training_rows(root / "data", tok, SETTINGS["max_length"])
    summary = train(model, tok, rows, TrainConfig(objective="sbd", batch_size=4, **SETTINGS), checkpoints,
                    checkpoints / "train_log.jsonl", progress=False,
                    runtime=Runtime(rank=0, world_size=1, device=torch.device("cpu")))
    assert summary["resumed_from"].endswith("checkpoint-3")
    assert_same_losses(read_log(checkpoints / "train_log.jsonl"), reference["log"])
