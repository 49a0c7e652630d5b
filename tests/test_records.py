"""The files the stages exchange (sbd_core.records): each format written and read back by its one module, with
hand-computed expectations, and an older file still read."""

import json
from types import SimpleNamespace

import pytest

from sbd_core.records.generations import (blocks_of, decode_settings, forward_widths, generation_record,
                                          read_records, record_blocks, write_generations)
from sbd_core.records.speed import SpeedFileError, read_speed, speed_document, timed_run, write_speed
from sbd_core.records.timing import TimingFileError, block_of, read_timing, timing_document, timing_row, write_timing
from sbd_core.rounds import RoundInterval


def test_blocks_are_blocks_of_k_for_sbd_and_one_per_token_otherwise():
    assert blocks_of(10, 4, "sbd") == 3  # 4 + 4 + 2
    assert blocks_of(8, 4, "sbd") == 2
    assert blocks_of(10, 4, "ntp") == 10
    assert blocks_of(7, 4, "hf") == 7
    assert blocks_of(0, 4, "sbd") == 1  # a row that stopped at once still started a block


def test_a_generation_record_carries_its_widths_and_blocks_and_is_read_back(tmp_path):
    gen = SimpleNamespace(text="12", token_ids=[5, 6, 7, 8, 9], num_tokens=5, nfe=3, tokens_per_forward=5 / 3,
                          stop_reason="eos", wall_time_s=0.5, widths=[4, 8, 4], accepted=None, drafted=None)
    record = generation_record("p0", "1+1=", gen, 4, block_size=4, mode="sbd")
    assert record["blocks"] == 2 and record["widths"] == [4, 8, 4] and "accepted" not in record
    out = tmp_path / "math.jsonl"
    write_generations([record], {"stage": "decode", "settings": {"block_size": 4}}, out)
    assert read_records(out) == [record]
    assert decode_settings(out) == {"block_size": 4}
    assert record_blocks({**record, "blocks": 7}, 4, "sbd") == 7  # the recorded count, not the formula
    assert forward_widths(record, 4, "sbd") == ({4: 2, 8: 1}, "recorded")


def test_a_record_from_before_blocks_and_widths_were_written_is_still_read(tmp_path):
    old = {"id": "0", "completion": "x", "num_tokens": 10, "nfe": 6}
    assert record_blocks(old, 4, "sbd") == 3
    assert forward_widths(old, 4, "sbd") == ({4: 4, 8: 2}, "derived")  # 2 re-feeds (3 blocks), 6 - 2 block steps
    assert forward_widths(old, 4, "ntp") == ({1: 6}, "derived")
    assert decode_settings(tmp_path / "none.jsonl") is None
    (tmp_path / "bad.jsonl.provenance.json").write_text("[]")
    with pytest.raises(ValueError, match="bad.jsonl.provenance.json: not the decode stage's provenance record"):
        decode_settings(tmp_path / "bad.jsonl")


def test_the_timing_file_is_written_and_read_back(tmp_path):
    assert [block_of("ntp", 1), block_of("block", 8), block_of("refeed", 8)] == [1, 8, 4]
    rows = [timing_row("ntp", 1, 1, 128, RoundInterval(2.0, 1.0, 3.0, 0.9, 3), [1.0, 2.0, 3.0]),
            timing_row("refeed", 8, 1, 128, RoundInterval(4.0, 4.0, 4.0, 0.9, 1), [4.0])]
    assert rows[1]["block_size"] == 4
    doc = timing_document(device="cpu", device_name="x86", dtype="float32", warmup=1, repeats=2, rounds=3, seed=0,
                          compiled=False, model={"name": "m"}, threads=2, complete=True, unmeasured=0, rows=rows,
                          orders=[])
    assert list(doc)[:2] == ["kind", "version"] and doc["kind"] == "sbd_timing" and doc["engine"] == "fast"
    out = tmp_path / "m.json"
    write_timing(doc, {"stage": "timing"}, out)
    assert json.loads(out.read_text())["provenance"] == {"stage": "timing"}
    timing = read_timing(out)
    assert timing.by_step == {"ntp": {1: {1: {128: 0.002}}}, "refeed": {1: {8: {128: 0.004}}}}
    assert timing.rounds[("ntp", 1, 1, 128)] == (0.001, 0.002, 0.003)
    out.write_text(json.dumps({**doc, "version": 2}))
    with pytest.raises(TimingFileError, match="m.json: field 'version' must be 1, got 2"):
        read_timing(out)


def test_the_speed_file_is_written_and_read_back(tmp_path):
    runs = [timed_run(round=0, position=0, row="ntp/ntp", batch=1, wall_s=1.5, prefill_s=0.1)]
    assert runs[0] == {"round": 0, "position": 0, "row": "ntp/ntp", "batch": 1, "wall_s": 1.5, "prefill_s": 0.1}
    doc = speed_document(model="m", benchmark="math", device="cpu", device_name="x86", dtype="float32", threads=2,
                         settings={"rounds": 1}, problem_ids=["0"], rows=[], runs=runs)
    out = tmp_path / "math.json"
    write_speed(doc, {"stage": "speed"}, out)
    read = read_speed(out)
    assert read["kind"] == "sbd_speed" and read["runs"] == runs and read["path"] == str(out)
    out.write_text(json.dumps({**doc, "kind": "sbd_timing"}))
    with pytest.raises(SpeedFileError, match="math.json: not a file of the speed stage"):
        read_speed(out)
