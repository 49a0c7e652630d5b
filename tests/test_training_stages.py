"""The training stages' wiring, without training: the data stage's sources, the synthetic tasks through the pack stage
(unchanged rows for the embedded default), the fine-tune's launch layout, the SLURM multi-node command, model sources
copied and GGUF conversions cached."""

import json

import pytest
import torch

from conftest import char_tokenizer, tiny_model
from training_fixtures import packed_base
from sbd_core import checkpoint, launch, pipeline
from sbd_core.io_utils import read_jsonl
from sbd_core.launch import LaunchSettings, slurm_command
from sbd_core.train import tokenize_examples
from sbd_core.training_data import MixSpec, build, load_packed


def test_data_stage_generates_synthetic_problems_and_reads_local_sources_in_place(tmp_path):
    (tmp_path / "gsm.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "#### 2"}) + "\n")
    spec = {"sources": [{"name": "math", "problems": 7}, {"name": "code", "problems": 3},
                        {"name": "gsm8k", "path": str(tmp_path / "gsm.jsonl")}]}
    pipeline.run_data(spec, tmp_path / "data")
    math, code = (read_jsonl(tmp_path / "data" / name / "train.jsonl") for name in ("math", "code"))
    assert (len(math), len(code)) == (7, 3)
    local = json.loads((tmp_path / "data" / "gsm8k" / "provenance.json").read_text())["settings"]
    assert local["files"] == [str(tmp_path / "gsm.jsonl")]  # read in place, not copied
    assert json.loads((tmp_path / "data" / "math" / "provenance.json").read_text())["settings"]["problems"] == 7
    with pytest.raises(FileNotFoundError, match="check the source's path"):
        pipeline.run_data({"sources": [{"name": "tulu3", "path": str(tmp_path / "missing")}]}, tmp_path / "data")
    test_prompts = {p["prompt"] for p in read_jsonl(pipeline.run_benchmark("code", {"limit": 4}, tmp_path / "bench"))}
    assert len(test_prompts) == 4 and not test_prompts & {r["prompt"] for r in code}  # disjoint splits
    assert pipeline.synthetic_pairs(tmp_path / "data") == [(r["prompt"], r["target"]) for r in math + code]


@pytest.mark.parametrize("sources, words", [
    ([{"name": "math"}], ["'math' is generated here", "problems"]),
    ([{"name": "math", "problems": 5, "path": "x.jsonl"}], ["no path or revision"]),
    ([{"name": "gsm8k", "problems": 5}], ["synthetic tasks only", "budget_tokens"]),
    ([{"name": "gsm8k"}, {"name": "gsm8k"}], ["listed once"]),
])
def test_bad_sources_are_named(sources, words):
    with pytest.raises(ValueError) as err:
        MixSpec.from_dict({"sources": sources})
    for word in words:
        assert word in str(err.value)


def test_synthetic_rows_unpacked_are_the_rows_the_trainer_always_had(tmp_path):
    """The embedded default (packing: false) trains on exactly bos + prompt + target + eos per problem, in order."""
    sources = [{"name": "math", "problems": 12}, {"name": "code", "problems": 6}]
    pipeline.run_data({"sources": sources}, tmp_path / "data")
    tok = char_tokenizer()
    mix = MixSpec.from_dict({"sources": sources, "packing": False, "max_length": 4096})
    manifest = build(mix, tok, tmp_path / "data", tmp_path / "packed")
    rows, _ = load_packed(tmp_path / "packed", tok, 4096)
    expected = tokenize_examples(tok, pipeline.synthetic_pairs(tmp_path / "data"), 4096)
    assert [list(r["input_ids"]) for r in rows] == [r["input_ids"] for r in expected]
    assert [list(r["target"]) for r in rows] == [r["target"] for r in expected]
    assert [list(r["doc_lengths"]) for r in rows] == [[len(r["input_ids"])] for r in expected]
    assert manifest["chat_template"] is None and tok.chat_template is None  # plain text: no template imposed


def test_finetune_stage_goes_through_the_launcher_with_its_layout(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline.training, "launch", lambda request, processes, nodes: calls.append(
        (request, processes, nodes)))
    base = packed_base(tmp_path)
    spec = {"max_steps": 3, "max_length": 512, "allow_resize": True}
    pipeline.run_finetune(base, tmp_path / "packed", "sbd", spec, tmp_path / "out", tmp_path / "ckpt",
                          {"device": "cuda"}, LaunchSettings(nodes=2, processes_per_node=4), threads=16)
    (request, processes, nodes), = calls
    assert (processes, nodes) == (4, 2)
    assert request["train"] == {"max_steps": 3, "max_length": 512} and request["allow_resize"] is True
    assert request["device"] == "cuda" and request["threads"] == 4 and request["objective"] == "sbd"
    assert request["extra_files"]["provenance.json"]["settings"]["objective"] == "sbd"
    launch.check_request(request)
    with pytest.raises(ValueError, match="unknown training setting"):
        pipeline.run_finetune(base, tmp_path / "packed", "sbd", {"max_step": 3}, tmp_path / "out", tmp_path / "ckpt")
    with pytest.raises(ValueError, match="packed to max_length=512 but the fine-tune asks for max_length=256"):
        pipeline.run_finetune(base, tmp_path / "packed", "sbd", {"max_length": 256}, tmp_path / "out",
                              tmp_path / "ckpt")
    assert len(calls) == 1  # both refused before any process starts


def test_layout_is_checked_before_any_job():
    with pytest.raises(ValueError, match="tokens_per_step=1000 is not a multiple"):
        pipeline.check_layout(["ntp", "sbd"], {"tokens_per_step": 1000, "max_length": 100}, LaunchSettings())
    pipeline.check_layout(["sbd"], {"tokens_per_step": 2097152, "max_length": 32768, "batch_size": 1},
                          LaunchSettings(nodes=8, processes_per_node=8))
    with pytest.raises(ValueError, match="finetune.nodes must be an integer >= 1"):
        LaunchSettings(nodes=0)


def test_several_nodes_run_one_torchrun_per_node_under_slurm(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(RuntimeError, match="inside a SLURM allocation of 2 nodes"):
        slurm_command(tmp_path / "request.json", 8, 2, "cuda")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setattr(launch.socket, "gethostname", lambda: "node017")
    cmd = slurm_command(tmp_path / "request.json", 8, 2, "cuda")
    srun, torchrun = cmd[:cmd.index("-m")], cmd[cmd.index("-m"):]
    assert srun[0] == "srun" and {"--nodes=2", "--ntasks-per-node=1", "--gpus-per-node=8"} <= set(srun)
    assert {"--nproc-per-node=8", "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=node017:29500",
            "--rdzv-id=sbd-4242"} <= set(cmd)
    assert torchrun[:2] == ["-m", "torch.distributed.run"] and cmd[-3:] == ["--worker", "--request",
                                                                             str(tmp_path / "request.json")]


def test_local_source_is_copied_in_its_own_dtype(tmp_path):
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok)).to(torch.bfloat16)
    checkpoint.save(model, tok, tmp_path / "src", dtype="bfloat16")
    pipeline.run_base({"source": "local", "path": str(tmp_path / "src")}, tmp_path / "base")
    loaded, _ = checkpoint.load(tmp_path / "base", dtype="bfloat16")
    assert json.loads((tmp_path / "base" / "config.json").read_text())["dtype"] == "bfloat16"
    assert torch.equal(loaded.model.embed_tokens.weight, model.model.embed_tokens.weight)
    assert json.loads((tmp_path / "base" / "provenance.json").read_text())["stage"] == "base"


def test_gguf_conversion_is_cached_by_the_file_hash(tmp_path, monkeypatch):
    conversions = []

    def fake_from_gguf(path, out_dir):
        conversions.append(path)
        checkpoint.save(tiny_model("llama", len(char_tokenizer())), char_tokenizer(), out_dir)

    monkeypatch.setattr(checkpoint, "from_gguf", fake_from_gguf)
    (tmp_path / "m.gguf").write_bytes(b"GGUF one")
    spec = {"source": "gguf", "path": str(tmp_path / "m.gguf")}
    checkpoint.fetch(spec, tmp_path / "a", cache=tmp_path / "cache")
    checkpoint.fetch(spec, tmp_path / "b", cache=tmp_path / "cache")
    assert len(conversions) == 1 and (tmp_path / "b" / "model.safetensors").is_file()
    (tmp_path / "m.gguf").write_bytes(b"GGUF two")  # another file: converted again
    checkpoint.fetch(spec, tmp_path / "c", cache=tmp_path / "cache")
    assert len(conversions) == 2
