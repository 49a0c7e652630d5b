"""time(k): the engine's steps timed on this machine in interleaved rounds, written in the format the roofline's measured
mode reads."""

import json

import pytest

from sbd_core import roofline
from sbd_core.cli import main
from sbd_core.timing import random_model, steps_for


def test_steps_cover_ntp_blocks_and_refeeds():
    assert steps_for([1, 2, 4], [3]) == [("ntp", 1), ("block", 2), ("block", 3), ("block", 4), ("refeed", 6)]


def test_named_shapes_build_their_own_class(tiny_shape):
    import torch

    llama = random_model(tiny_shape, None, "cpu", torch.float32, 64)
    qwen = random_model("qwen-" + tiny_shape, 1, "cpu", torch.float32, 64)
    assert type(llama).__name__ == "LlamaForCausalLM" and llama.config.num_hidden_layers == 2
    assert type(qwen).__name__ == "Qwen3ForCausalLM" and qwen.config.num_hidden_layers == 1
    assert qwen.config.hidden_size == 32 and qwen.config.num_key_value_heads == 2


@pytest.fixture(scope="module")
def tiny_shape(monkeypatch_module):
    shape = roofline.ModelShape("tiny", hidden=32, intermediate=64, layers=2, heads=4, kv_heads=2, head_dim=8,
                                vocab=64)
    monkeypatch_module.setitem(roofline.MODELS, "tiny-test", shape)
    monkeypatch_module.setitem(roofline.MODELS, "qwen-tiny-test", shape)
    return "tiny-test"


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_the_command_writes_a_file_the_roofline_reads(tmp_path, tiny_shape, capsys):
    out = tmp_path / "timing.json"
    argv = ["--threads", "1", "--no-progress", "timing", "--shape", tiny_shape, "--batch", "1", "2", "--width", "1",
            "2", "4", "--block-size", "2", "--kv-len", "16", "48", "--warmup", "1", "--repeats", "3", "--rounds", "2",
            "--out", str(out)]
    assert main(argv) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    document = json.loads(out.read_text())
    assert json.loads(last)["rows"] == document["rows"]  # the last line is the whole document
    timing = roofline.load_timing(out)
    rows = document["rows"]
    assert {(r["step"], r["width"]) for r in rows} == {("ntp", 1), ("block", 2), ("block", 4), ("refeed", 4)}
    assert len(rows) == 4 * 2 * 2 and all(r["lo_ms"] <= r["median_ms"] <= r["hi_ms"] for r in rows)
    assert all(len(r["rounds_ms"]) == 2 and r["lo_ms"] == min(r["rounds_ms"]) for r in rows)
    points = [tuple(p) for p in document["orders"][0]]  # every point once per round, a fresh order in the second
    assert sorted(points) == sorted(tuple(p) for p in document["orders"][1]) and len(set(points)) == len(rows)
    assert document["orders"][0] != document["orders"][1] and timing.n_rounds == 2
    assert timing.refeeds and sorted(timing.grids[1]) == [1, 2, 4]
    assert roofline.measured_time(timing, 2, 4, 32) > 0  # interpolated between the two cache lengths
    speedup = roofline.predicted_speedup(lambda b, w, n: roofline.measured_time(timing, b, w, n), 2, 1.5, 1, 16,
                                         lambda b, w, n: roofline.measured_time(timing, b, w, n, refeed=True))
    assert 0 < speedup < 2 * 10


def test_bad_requests_are_one_line_errors(tmp_path, capsys):
    assert main(["timing", "--shape", "no-such-model", "--out", str(tmp_path / "t.json")]) == 1
    assert "unknown model shape 'no-such-model'" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


def test_a_budget_keeps_the_rows_measured_before_it_ran_out(tmp_path, tiny_shape):
    from sbd_core.timing import run_timing

    out = tmp_path / "timing.json"
    result = run_timing(out, shape=tiny_shape, widths=(1, 2, 4), kv_lens=(16,), warmup=0, repeats=1,
                        progress=False, budget_s=1e-9, rounds=2)  # spent before the second measurement
    assert len(result["rows"]) == 1 and not result["complete"] and result["unmeasured"] == 5
    (row,) = result["rows"]
    grid = roofline.load_timing(out).refeeds if row["step"] == "refeed" else roofline.load_timing(out).grids
    assert grid[1] == {row["width"]: {16: pytest.approx(row["median_ms"] / 1000)}}
    full = run_timing(out, shape=tiny_shape, widths=(1, 2), kv_lens=(16,), warmup=0, repeats=1, progress=False,
                      rounds=2)
    assert full["complete"] and full["unmeasured"] == 0 and len(full["rows"]) == 2
