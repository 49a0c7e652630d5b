"""The paper profile's code path end to end on CPU: config/paper.yaml with local stand-ins for what a real run
downloads (tiny random Llama-3.1- and Qwen-3-class checkpoints, a few records in each training set's own schema, a few
GSM8K test problems) and tiny budgets; everything else (sources, weights, chat template, optimizer, objectives,
samplers) as shipped. Data, base, pack, both fine-tunes of both models through the torchrun launcher, decode, score
and report. (Two sharded processes against one: tests/test_train_distributed.py; the launch layout the DAG passes:
tests/test_training_stages.py.)"""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from transformers import AutoTokenizer

from conftest import SPECIALS, char_tokenizer, tiny_model
from sbd_core import checkpoint
from sbd_core.chat import DEFAULT_TEMPLATE
from sbd_core.mask_token import NEW_MASK_TOKEN
from test_training_data import RECORDS

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
GSM8K_TEST = [{"question": f"Ann has {n} pens and buys {n} more. How many pens?",
               "answer": f"{n}+{n}={2 * n}\n#### {2 * n}"} for n in (3, 5)]


def stand_ins(root: Path) -> dict:
    """Local copies of what the paper run downloads: two base checkpoints, the training sets, the GSM8K test set."""
    tok = char_tokenizer()
    checkpoint.save(tiny_model("llama", len(tok), seed=1, context=1024), tok, root / "llama")  # a free reserved token
    tok = char_tokenizer(SPECIALS[:3])  # no reserved token, but spare embedding rows (as Qwen-3)
    checkpoint.save(tiny_model("qwen3", len(tok) + 8, seed=2, context=1024), tok, root / "qwen")
    for name, (path, records) in RECORDS.items():
        (root / "raw" / name / path).parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(records), root / "raw" / name / path)
    (root / "gsm8k_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GSM8K_TEST))
    return {"llama-3.1-8b": root / "llama", "qwen-3-8b": root / "qwen"}


def paper_on_cpu(root: Path, checkpoints: dict) -> Path:
    """config/paper.yaml with the stand-ins, the CPU and tiny budgets."""
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    config["runtime"] = {"device": "cpu", "dtype": "float32", "threads": 2}
    for name, path in checkpoints.items():
        config["models"][name] = {"source": "local", "path": str(path),
                                  "paper_base": config["models"][name]["paper_base"]}
    for source in config["data"]["sources"]:
        source["path"] = str(root / "raw" / source["name"])
    config["data"].update(budget_tokens=4000, num_proc=1, pack_batch=1000)
    config["benchmarks"] = {"gsm8k": {"data": str(root / "gsm8k_test.jsonl"), "limit": 2, "max_new_tokens": 8}}
    config["finetune"].update(nodes=1, processes_per_node=1, resubmit=0, max_steps=2, tokens_per_step=1024,
                              batch_size=2, max_length=256, warmup_steps=1, save_steps=1, logging_steps=1)
    config["decode"] = {"block_size": 4, "batch_size": 2, "restrict": {"sbd": ["eb-entropy-g0.1"]},
                        "samplers": [{"solver": "ntp"}, {"solver": "eb", "gamma": 0.1}]}
    path = root / "paper_cpu.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper")
    config = paper_on_cpu(root, stand_ins(root))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(root), "--cores", "2",
           "--configfile", str(config)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "results" / "paper-8b", done.stdout + done.stderr


def test_every_stage_of_the_paper_path_runs(paper_run):
    run, log = paper_run
    table = log.split("Job stats:")[1]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    assert counts == {"data": 3, "fetch_base": 2, "benchmark": 1, "pack": 2, "finetune": 4, "decode": 4, "score": 4,
                      "report": 1, "all": 1, "total": 22}
    rows = list(csv.DictReader(open(run / "report" / "summary.csv")))
    assert {(r["model"], r["objective"], r["sampler"]) for r in rows} == {
        (m, o, s) for m in ("llama-3.1-8b", "qwen-3-8b") for o, s in (("ntp", "ntp"), ("sbd", "eb-entropy-g0.1"))}
    assert all(0.0 <= float(r["accuracy"]) <= 1.0 and float(r["mean_nfe"]) > 0 for r in rows)


def test_each_model_packs_the_mix_with_its_own_tokenizer(paper_run):
    run, _ = paper_run
    manifests = {m: json.loads((run / "packed" / m / "manifest.json").read_text())
                 for m in ("llama-3.1-8b", "qwen-3-8b")}
    assert manifests["llama-3.1-8b"]["tokenizer"]["fingerprint"] != manifests["qwen-3-8b"]["tokenizer"]["fingerprint"]
    for manifest in manifests.values():
        assert set(manifest["sources"]) == {"openmathreasoning", "opencodereasoning", "tulu3"}
        shares = {name: info["share_tokens"] for name, info in manifest["sources"].items()}
        assert shares == {"openmathreasoning": 1800, "opencodereasoning": 1800, "tulu3": 400}  # weights 45/45/10
        assert manifest["chat_template"] == DEFAULT_TEMPLATE and manifest["fill"] > 0.5


def test_finetunes_ran_through_the_launcher(paper_run):
    run, _ = paper_run
    launched = (run / "logs" / "finetune" / "qwen-3-8b" / "sbd.log").read_text()
    assert "launching 1 x 1 fine-tune processes" in launched and "-m torch.distributed.run" in launched
    for model in ("llama-3.1-8b", "qwen-3-8b"):
        for objective in ("ntp", "sbd"):
            out = run / "models" / model / objective
            summary = json.loads((out / "train_summary.json").read_text())
            assert summary["finished"] and summary["steps"] == 2 and summary["rows_per_step"] == 4  # 1024 tokens
            provenance = json.loads((out / "provenance.json").read_text())["settings"]
            assert provenance["objective"] == objective and provenance["finetune"]["tokens_per_step"] == 1024
            assert AutoTokenizer.from_pretrained(out).chat_template == DEFAULT_TEMPLATE  # saved with the model
            assert not (run / "checkpoints" / model / objective).exists()
    llama = json.loads((run / "models" / "llama-3.1-8b" / "sbd" / "config.json").read_text())
    assert llama["sbd_mask_token_id"] == 3  # <|reserved_special_token_0|>
    qwen_dir = run / "models" / "qwen-3-8b" / "sbd"
    added = json.loads((qwen_dir / "tokenizer.json").read_text())["added_tokens"]
    mask = next(t["id"] for t in added if t["content"] == NEW_MASK_TOKEN)
    assert json.loads((qwen_dir / "config.json").read_text())["sbd_mask_token_id"] == mask  # a spare embedding row
