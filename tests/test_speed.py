"""The speed stage on tiny models: rounds interleave every row (and the A/A control) at both batch sizes, the timed
tokens are the decode job's, and the speed file reads back as speedups with intervals over rounds."""

import json
from collections import Counter

import pytest
import torch
from conftest import char_tokenizer, tiny_model
from oracles import RecordingSolver, decisions_are_stable
from sbd_core import checkpoint, pipeline
from sbd_core.cli import main
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_block_decoder
from sbd_core.io_utils import read_jsonl, write_jsonl_atomic
from sbd_core.mask_token import setup_mask_token
from sbd_core.pipeline.speed import TokenMismatch, run_speed
from sbd_core.records.generations import forward_widths
from sbd_core.report.speed import row_speedups, speed_table
from sbd_core.decoding.factory import make_solver
from sbd_core.samplers import sampler_spec

SETTINGS = {"limit": 3, "max_new_tokens": 6}
DECODE = {"block_size": 2, "batch_size": 3}
SAMPLERS = {"ntp": sampler_spec("ntp"), "left_to_right-n2": sampler_spec("left_to_right", n=2)}
RUNS = [("ntp", "ntp"), ("sbd", "ntp"), ("sbd", "left_to_right-n2")]


def peaked(tokenizer, seed):
    """A tiny model with a mask token whose output layer is scaled up: its greedy decisions have margins."""
    model = tiny_model("llama", len(tokenizer), seed=seed)
    setup_mask_token(tokenizer, model)
    with torch.no_grad():
        model.lm_head.weight.mul_(12.0)
    return model


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    """Two arms (different weights), their decode jobs on 3 math problems, and the speed stage's --rows."""
    tmp = tmp_path_factory.mktemp("speed")
    tok = char_tokenizer()
    models = {arm: checkpoint.save(peaked(tok, seed), tok, tmp / "models" / arm)
              for seed, arm in enumerate(("ntp", "sbd"))}
    test_file = pipeline.run_benchmark("math", SETTINGS, tmp / "bench")
    rows = []
    for arm, sampler in RUNS:
        out = tmp / "generations" / arm / sampler / "math.jsonl"
        pipeline.run_decode(models[arm], "math", SETTINGS, test_file, SAMPLERS[sampler], DECODE, out, progress=False)
        rows.append({"arm": arm, "model": str(models[arm]), "objective": arm, "train_seed": 0, "train_steps": 10,
                     "sampler": sampler, "sampler_spec": SAMPLERS[sampler], "generations": str(out)})
    return tmp, test_file, rows


def test_the_models_decide_with_margins(decoded):
    """The precondition of comparing a batch-1 decode's tokens with the decode job's batch-3 ones: no near-tie."""
    _, test_file, rows = decoded
    from sbd_core.benchmarks import get_benchmark

    bench = get_benchmark("math")
    for row in rows:
        model, tok = checkpoint.load(row["model"])
        prompts = [bench.prompt(p, tok, bench.settings(SETTINGS)) for p in bench.load(test_file)]
        recorder = RecordingSolver(make_solver(row["sampler_spec"]))
        mode = row["sampler_spec"]["mode"]
        config = DecodeConfig(mode=mode, block_size=2, max_new_tokens=6, batch_size=1, engine="reference")
        make_block_decoder(model, tok, config, recorder).generate(prompts)
        assert decisions_are_stable(make_solver(row["sampler_spec"]), recorder.calls), row["sampler"]


@pytest.fixture(scope="module")
def timed(decoded):
    tmp, test_file, rows = decoded
    out = tmp / "speed" / "math.json"
    result = run_speed(rows, "tiny", "math", SETTINGS, test_file, DECODE, {"problems": 3, "rounds": 2, "warmup": 1},
                       out, progress=False)
    return result, out


def test_rounds_interleave_every_row_and_the_aa_control_at_both_batch_sizes(timed):
    result, out = timed
    assert json.loads(out.read_text())["runs"] == result["runs"]
    names = [r["name"] for r in result["rows"]]
    assert names == ["ntp/ntp", "sbd/ntp", "sbd/left_to_right-n2", "ntp/ntp (A/A)"]
    control = result["rows"][-1]
    assert control["control"] and control["reference"] == "ntp/ntp" and control["objective"] == "ntp"
    assert all(r["reference"] == "ntp/ntp" for r in result["rows"])
    units = {(name, batch) for name in names for batch in (1, 3)}
    orders = []
    for r in range(2):
        this = sorted((run for run in result["runs"] if run["round"] == r), key=lambda run: run["position"])
        order = [(run["row"], run["batch"]) for run in this]
        assert Counter(order) == Counter(units)  # every row once per round at each batch size
        assert all(run["wall_s"] > 0 for run in this)
        orders.append(order)
    assert orders[0] != orders[1]  # a fresh order per round
    assert result["settings"] == {"enabled": True, "problems": 3, "rounds": 2, "warmup": 1, "seed": 0, "batch": 3}


def test_the_file_records_each_rows_costs_and_reads_back_as_paired_speedups(timed, decoded):
    result, _ = timed
    scored = {r["id"]: r for r in read_jsonl(decoded[2][2]["generations"])}
    sbd = result["rows"][2]
    assert [p["id"] for p in sbd["problems"]] == result["problem_ids"] and len(result["problem_ids"]) == 3
    for p in sbd["problems"]:
        assert (p["nfe"], p["num_tokens"]) == (scored[p["id"]]["nfe"], scored[p["id"]]["num_tokens"])
        assert sum(p["widths"].values()) == p["nfe"] and set(p["widths"]) <= {"2", "4"}
    speedups = row_speedups(result)
    assert set(speedups) == {r["name"] for r in result["rows"]}
    ntp = speedups["ntp/ntp"]["wall"][1]
    assert ntp.median == ntp.lo == ntp.hi == 1.0 and ntp.rounds == 2  # the reference against itself, round by round
    table = speed_table([result])
    assert table["control"].tolist() == [False, False, False, True] and (table["speed_rounds"] == 2).all()
    assert (table["wall_speedup"] > 0).all() and (table["wall_speedup_lo"] <= table["wall_speedup"]).all()


def test_a_timed_decode_whose_tokens_differ_from_the_decode_jobs_is_an_error_naming_row_and_problem(decoded, tmp_path):
    _, test_file, rows = decoded
    records = read_jsonl(rows[2]["generations"])
    records[1]["token_ids"] = records[1]["token_ids"][:-1] + [records[1]["token_ids"][-1] + 1]
    tampered = tmp_path / "tampered.jsonl"
    write_jsonl_atomic(records, tampered)
    changed = [*rows[:2], {**rows[2], "generations": str(tampered)}]
    with pytest.raises(TokenMismatch, match=rf"row sbd/left_to_right-n2 at batch 1 .* problem {records[1]['id']}: "):
        run_speed(changed, "tiny", "math", SETTINGS, test_file, DECODE, {"problems": 3, "rounds": 2, "warmup": 0},
                  tmp_path / "speed.json", progress=False)
    assert not (tmp_path / "speed.json").exists()


def test_rows_without_an_ntp_arm_are_a_one_line_error(decoded, tmp_path, capsys):
    _, test_file, rows = decoded
    argv = ["speed", "--rows", json.dumps(rows[1:]), "--model-name", "tiny", "--benchmark", "math", "--test-file",
            str(test_file), "--out", str(tmp_path / "s.json")]
    assert main(argv) == 1
    assert "no NTP arm decoded with ntp" in capsys.readouterr().err


def test_widths_are_derived_where_the_record_has_none():
    assert forward_widths({"nfe": 5, "num_tokens": 5}, 4, "ntp") == ({1: 5}, "derived")
    # 10 tokens in blocks of 4: 3 blocks, the first forward of blocks 2 and 3 re-feeds (8 tokens)
    assert forward_widths({"nfe": 6, "num_tokens": 10}, 4, "sbd") == ({4: 4, 8: 2}, "derived")
    assert forward_widths({"nfe": 3, "num_tokens": 2, "widths": [4, 4, 8]}, 4, "sbd") == ({4: 2, 8: 1}, "recorded")


def test_the_decode_stage_no_longer_takes_timing_keys(decoded, tmp_path):
    _, test_file, rows = decoded
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['timing_repeats'\].*wall-clock is the speed stage's"):
        pipeline.run_decode(rows[0]["model"], "math", SETTINGS, test_file, SAMPLERS["ntp"], {"timing_repeats": 2},
                            tmp_path / "out.jsonl")


def test_a_row_without_the_ntp_arm_of_its_seed_is_named_before_anything_is_timed(decoded):
    from sbd_core.errors import UserError
    from sbd_core.pipeline.speed import plan_rows

    _, _, rows = decoded
    with pytest.raises(UserError, match=r"row sbd/ntp has no NTP arm of fine-tune seed 1 after 10 steps"):
        plan_rows([rows[0], {**rows[1], "train_seed": 1}])
    assert [r.name for r in plan_rows(rows)][-1] == "ntp/ntp (A/A)"
