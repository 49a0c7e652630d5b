"""The decode stage's wall time: the fastest of ``timing_repeats`` decodes of the same problems, first run's output kept."""

import json

import pytest
from conftest import char_tokenizer, tiny_model
from sbd_core import checkpoint, pipeline
from sbd_core.decode import BlockDecoder
from sbd_core.io_utils import read_jsonl
from sbd_core.mask_token import setup_mask_token
from sbd_core.samplers import sampler_spec

SETTINGS = {"limit": 3, "max_new_tokens": 6}


@pytest.fixture(scope="module")
def stage_inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("decode")
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok), seed=0)
    setup_mask_token(tok, model)
    return checkpoint.save(model, tok, tmp / "model"), pipeline.run_benchmark("math", SETTINGS, tmp / "bench")


def test_timing_repeats_keep_the_fastest_run_and_the_first_runs_generations(stage_inputs, tmp_path, monkeypatch):
    model_dir, test_file = stage_inputs
    calls, real = [], BlockDecoder.generate

    def counted(self, prompts, progress=False):
        calls.append(len(prompts))
        return real(self, prompts, progress=progress)

    monkeypatch.setattr(BlockDecoder, "generate", counted)
    once, thrice = tmp_path / "once.jsonl", tmp_path / "thrice.jsonl"
    spec = sampler_spec("eb", gamma=0.5)
    pipeline.run_decode(model_dir, "math", SETTINGS, test_file, spec, {"block_size": 4}, once)
    pipeline.run_decode(model_dir, "math", SETTINGS, test_file, spec, {"block_size": 4, "timing_repeats": 3}, thrice)
    assert calls == [3, 3, 3, 3]
    decoded = json.loads((tmp_path / "thrice.jsonl.provenance.json").read_text())["settings"]
    assert len(decoded["wall_times_s"]) == 3 and decoded["total_wall_time_s"] == min(decoded["wall_times_s"]) > 0
    assert [r["token_ids"] for r in read_jsonl(thrice)] == [r["token_ids"] for r in read_jsonl(once)]


def test_timing_repeats_below_one_are_refused(stage_inputs, tmp_path):
    model_dir, test_file = stage_inputs
    with pytest.raises(ValueError, match="timing_repeats"):
        pipeline.run_decode(model_dir, "math", SETTINGS, test_file, sampler_spec("ntp"), {"timing_repeats": 0},
                            tmp_path / "out.jsonl")
