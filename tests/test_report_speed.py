"""The report's wall-clock from hand-made speed and time(k) files: paired speedups over rounds, the A/A floor beside
every wall-clock claim, "no measurable difference" where an interval includes 1, eq. 16 from the widths fed, and the
implausibility flag of time(k)."""

import json

import pytest
from speed_fixtures import CONTROL, speed_doc, write_speed
from test_report import score_dict

from sbd_core import roofline
from sbd_core.report import build_report, load_scores, summarize
from sbd_core.report.prediction import implausible_steps, plausibility_lines, prediction_figure
from sbd_core.report.speed import floor_line, speed_table
from sbd_core.samplers import sampler_spec

EB = sampler_spec("eb", gamma=0.1)
SPECS = {"eb-entropy-g0.1": EB}
# per round: EB clearly faster; SBD in NTP mode within the noise of the NTP arm
WALLS = {("ntp", "ntp"): [2.0, 2.0, 2.1, 2.0, 1.9], ("sbd", "ntp"): [2.1, 1.9, 2.0, 2.0, 2.0],
         ("sbd", "eb-entropy-g0.1"): [1.0, 1.1, 1.0, 0.9, 1.0]}
# CONTROL: the NTP arm timed again, a little off in rounds 2 and 4
LATENCY = {CONTROL: [2.0, 2.02, 2.1, 1.98, 1.9], ("sbd", "eb-entropy-g0.1"): [0.8, 0.8, 0.85, 0.8, 0.8]}


def scores(root):
    paths = []
    for objective, sampler, spec in (("ntp", "ntp", ("ntp", {})), ("sbd", "ntp", ("ntp", {})),
                                     ("sbd", "eb-entropy-g0.1", ("eb", {"gamma": 0.1}))):
        path = root / f"{objective}_{sampler}.json"
        path.write_text(json.dumps(score_dict(objective, sampler, *spec, "math", 0.8, 1000 if sampler == "ntp" else 400,
                                              model="tiny")))
        paths.append(path)
    return paths


def test_a_machine_that_slows_down_in_one_round_does_not_move_the_paired_speedup():
    doc = speed_doc("tiny", "math", {("ntp", "ntp"): 2.0, ("sbd", "eb-entropy-g0.1"): 1.0}, SPECS, rounds=5,
                    jitter=(1.0, 1.0, 3.0, 1.0, 1.0))
    eb = speed_table([doc]).set_index("name").loc["sbd/eb-entropy-g0.1"]
    assert eb["wall_speedup"] == eb["wall_speedup_lo"] == eb["wall_speedup_hi"] == pytest.approx(2.0)
    assert eb["wall_words"] == "faster" and eb["speed_level"] == pytest.approx(0.9375)


def test_the_report_states_the_aa_floor_beside_wall_claims_and_no_measurable_difference(tmp_path):
    doc = speed_doc("tiny", "math", WALLS, SPECS, rounds=5, latency=LATENCY)
    summary = summarize(load_scores(scores(tmp_path)), [doc])
    sbd_ntp = summary[(summary["objective"] == "sbd") & (summary["sampler"] == "ntp")].iloc[0]
    assert sbd_ntp["wall_speedup_lo"] < 1 < sbd_ntp["wall_speedup_hi"]
    assert sbd_ntp["wall_words"] == "no measurable difference"
    eb = summary[summary["sampler"] == "eb-entropy-g0.1"].iloc[0]
    assert eb["wall_speedup"] == pytest.approx(2.0) and eb["latency_speedup"] == pytest.approx(2.5)
    assert eb["wall_words"] == "faster" and eb["tokens_per_s"] == pytest.approx(100 / 1.0)
    files = build_report(scores(tmp_path), paper_table=None, speed_paths=[write_speed(tmp_path, doc)])
    md = files["report.md"].decode()
    table1, rest = md.split("## Reproduction (Table 1 layout)\n")[1].split("## Differences to the NTP arm")
    floor = floor_line(speed_table([doc]))
    assert floor.startswith("**A/A control**") and floor in table1  # beside Table 1's wall speedups
    assert "tiny / math: 1.00x [0.99, 1.01] at batch 1, 1.00x [1.00, 1.00] at batch 8" in floor
    wall = md.split("## Wall-clock (the speed stage")[1].split("\n## ")[0]
    assert floor in wall
    assert "| tiny | math | SBD / NTP | " in wall and "| no measurable difference |" in wall
    assert "| tiny | math | SBD / EB \u03b3=0.1 | \u2013 | 2.50x [2.37, 2.50] | faster | 2.00x [1.82, 2.22] (batch 8) | " \
        "faster |" in wall  # \u2013: the score files name no fine-tune steps
    assert "93.8% coverage" in wall and "| NTP / NTP |" not in wall  # the reference's row is its A/A control
    assert "wall 2.00x [1.82, 2.22]" in files["table1.md"].decode()


def test_a_run_timed_at_two_checkpoints_has_a_row_per_budget_that_names_its_steps(tmp_path):
    """finetune.eval_at_steps: the speed stage times each checkpoint's rows; the section tells them apart by their
    steps (the label alone is the same at every budget), the smaller budget first."""
    score_paths, speed_paths = [], []
    for steps, eb_wall in ((200, 1.0), (100, 1.5)):
        root = tmp_path / str(steps)
        root.mkdir()
        for path in scores(root):
            path.write_text(json.dumps({**json.loads(path.read_text()), "train_steps": steps}))
            score_paths.append(path)
        walls = {**WALLS, ("sbd", "eb-entropy-g0.1"): [eb_wall] * 5}
        speed_paths.append(write_speed(root, speed_doc("tiny", "math", walls, SPECS, rounds=5, steps=steps)))
    md = build_report(score_paths, paper_table=None, speed_paths=speed_paths)["report.md"].decode()
    wall = md.split("## Wall-clock (the speed stage")[1].split("\n## ")[0]
    eb_rows = [line for line in wall.splitlines() if line.startswith("| tiny | math | SBD / EB")]
    assert [row.split(" | ")[3] for row in eb_rows] == ["100", "200"]
    assert "1.33x" in eb_rows[0].split(" | ")[4] and "2.00x" in eb_rows[1].split(" | ")[4]


def test_without_a_speed_stage_no_wall_speedup_is_claimed(tmp_path):
    md = build_report(scores(tmp_path), paper_table=None)["report.md"].decode()
    assert "No wall-clock was measured" in md and "wall n/a" in md


def timing_file(tmp_path, rows):
    """A time(k) file of hand-made rows ``(step, width, kv_len, [ms per round])`` at batch 1."""
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({
        "kind": "sbd_timing", "version": 1, "device": "cpu", "device_name": "test", "dtype": "float32", "warmup": 1,
        "repeats": 3, "model": {"name": "tiny"},
        "rows": [{"step": step, "batch": 1, "width": width, "kv_len": kv, "median_ms": sorted(ms)[len(ms) // 2],
                  "rounds_ms": ms} for step, width, kv, ms in rows]}))
    return roofline.load_timing(path)


def test_a_wider_step_measured_faster_beyond_its_interval_is_flagged(tmp_path):
    ntp = [1.0, 1.1, 1.0, 1.05, 1.0]
    timing = timing_file(tmp_path, [
        ("ntp", 1, 64, ntp), ("block", 6, 64, [0.8, 0.85, 0.8, 0.82, 0.81]), ("refeed", 12, 64, [1.5] * 5),
        ("ntp", 1, 128, ntp), ("block", 6, 128, [0.9, 1.2, 1.1, 1.0, 1.3]), ("refeed", 12, 128, [1.5] * 5)])
    flagged = implausible_steps(timing)
    assert [(f["kv_len"], f["narrow"], f["wide"]) for f in flagged] == [(64, ("ntp", 1), ("block", 6))]
    assert flagged[0]["ratio"].hi < 1  # block 6 / NTP per round, all below 1
    lines = plausibility_lines("tiny", timing)
    assert "implausible time(k)" in lines[0] and "a block step of 6 / the NTP step" in lines[1]
    fine = timing_file(tmp_path, [("ntp", 1, 64, ntp), ("block", 6, 64, [1.2] * 5), ("refeed", 12, 64, [1.1] * 5)])
    # a re-feed of 12 (logits for 6) may be faster than a block of 6 only within noise: here it is not
    assert [(f["narrow"], f["wide"]) for f in implausible_steps(fine)] == [(("block", 6), ("refeed", 12))]


def test_eq16_prediction_uses_the_widths_fed_and_draws_both_intervals(tmp_path):
    timing = timing_file(tmp_path, [(step, width, kv, [ms, ms * 1.1, ms, ms * 0.9, ms])
                                    for step, width, ms in (("ntp", 1, 1.0), ("block", 4, 2.0), ("refeed", 8, 3.0))
                                    for kv in (16, 256)])
    # 100 tokens in blocks of 4 at 2 forwards per block: 26 forwards of 4 and 24 re-feeds of 8
    widths = {("ntp", "ntp"): {1: 100}, ("sbd", "eb-entropy-g0.1"): {4: 26, 8: 24}}
    doc = speed_doc("tiny", "math", WALLS, SPECS, rounds=5, latency=LATENCY, widths=widths)
    summary = summarize(load_scores(scores(tmp_path)), [doc], {"tiny": timing})
    eb = summary[summary["sampler"] == "eb-entropy-g0.1"].iloc[0]
    assert eb["predicted_speedup"] == pytest.approx(100 * 1.0 / (26 * 2.0 + 24 * 3.0))  # the same in every round
    assert eb["predicted_lo"] == pytest.approx(eb["predicted_speedup"]) and eb["widths_source"] == "recorded"
    assert prediction_figure(summary)["png"][:4] == b"\x89PNG"


def test_a_rerun_is_compared_row_by_row_with_the_first_runs_intervals(tmp_path, capsys):
    from sbd_core.cli import main

    first = speed_doc("tiny", "math", WALLS, SPECS, rounds=5, latency=LATENCY)
    slower_eb = {**WALLS, ("sbd", "eb-entropy-g0.1"): [1.3, 1.3, 1.2, 1.3, 1.3]}  # at batch 8 only
    write_speed(tmp_path / "first", first)
    write_speed(tmp_path / "second", speed_doc("tiny", "math", slower_eb, SPECS, rounds=5, latency=LATENCY))
    assert main(["speed-compare", "--first", str(tmp_path / "first"), "--second", str(tmp_path / "second")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "tiny/math sbd/eb-entropy-g0.1 batch 8: first 2.00x [1.82, 2.22], rerun 1.54x: OUTSIDE" in out
    assert "tiny/math ntp/ntp (A/A) batch 1: first 1.00x [0.99, 1.01], rerun 1.00x: inside" in out
    assert not [line for line in out if " ntp/ntp batch" in line]  # the reference: 1 by construction
    assert out[-1] == "5 of 6 rerun medians inside the first run's interval (83%)"  # 3 rows x 2 batch sizes
