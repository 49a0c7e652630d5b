"""Checkpoints: atomic safetensors round trip, pinned hub revisions, clear offline errors; the data stage's counts."""

import os
import subprocess
import sys

import pytest
import torch

from conftest import char_tokenizer, tiny_model
from sbd_core import checkpoint, pipeline
from sbd_core.io_utils import read_jsonl


def test_save_and_load_round_trip(tmp_path):
    tok = char_tokenizer()
    model = tiny_model("qwen3", len(tok))
    out = checkpoint.save(model, tok, tmp_path / "ckpt", {"provenance.json": {"stage": "test"}})
    assert (out / "model.safetensors").exists() and not list(out.glob("*.bin"))
    loaded, loaded_tok = checkpoint.load(out)
    ids = torch.tensor([tok("round trip")["input_ids"]])
    assert torch.allclose(loaded(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-6)
    assert loaded_tok.decode(ids[0], skip_special_tokens=True) == "round trip"
    with pytest.raises(FileNotFoundError, match="not a checkpoint"):
        checkpoint.load(tmp_path)


def test_hub_download_needs_a_pinned_revision(tmp_path):
    with pytest.raises(ValueError, match="pin a revision"):
        checkpoint.download("meta-llama/Llama-3.1-8B", "main", tmp_path / "m")


def test_hub_download_offline_says_what_to_do(tmp_path):
    code = ("from sbd_core import checkpoint; checkpoint.download('meta-llama/Llama-3.1-8B', "
            f"'d04e592bb4f6aa9cfee91e2e20afa771667e1d4b', {str(tmp_path / 'm')!r})")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0
    assert "offline" in out.stderr and "--revision d04e592bb4f6aa9cfee91e2e20afa771667e1d4b" in out.stderr
    assert not (tmp_path / "m").exists()


def test_data_stage_counts_per_task(tmp_path):
    pipeline.run_data(pipeline.DataSpec(["math", "code"], {"math": 7, "code": 3}, valid_per_task=2), tmp_path)
    train = read_jsonl(tmp_path / "train.jsonl")
    assert [r["task"] for r in train].count("math") == 7 and [r["task"] for r in train].count("code") == 3
    assert len(read_jsonl(tmp_path / "valid.jsonl")) == 4
    test_file = pipeline.run_benchmark("code", {"limit": 4}, tmp_path / "bench")
    test_prompts = {p["prompt"] for p in read_jsonl(test_file)}
    assert len(test_prompts) == 4 and not test_prompts & {r["prompt"] for r in train}
    with pytest.raises(ValueError, match="no count for task"):
        pipeline.run_data(pipeline.DataSpec(["math", "code"], {"math": 7}), tmp_path / "bad")
