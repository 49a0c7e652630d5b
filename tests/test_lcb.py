"""LiveCodeBench without running programs: the shards and their window, the never-unpickled private tests (a hostile
pickle, a zlib bomb), the settings, lcb_runner's prompt and code extraction (the grading: test_lcb_grading.py)."""

import hashlib
import json
import math
import os
import pickle
import zlib

import pytest

from conftest import char_tokenizer
from lcb_fixtures import REFERENCE, ROWS, bomb_row, call, encode_private, fenced, hostile_row, row, stdin, write_shards
from sbd_core.benchmarks import ID_KEY, THINKING_ON, get_benchmark
from sbd_core.benchmarks.chat import render_chat
from sbd_core.benchmarks.lcbv6 import (RELEASES, SHARD_SHA256, SYSTEM_MESSAGE, extraction_effect, extract_code,
                                      question_prompt)
from sbd_core.benchmarks.lcb_results import flat_metrics, pass_at_k, window_rates
from sbd_core.sandbox.lcb_child import PRELUDE, as_function
from sbd_core.sandbox.lcb_tests import LcbDataError, inflate, load_tests, pickled_string
from sbd_core.sandbox.limits import LCB_MAX_TESTS_BYTES
from test_benchmarks import CHAT_TEMPLATE

LCB = get_benchmark("lcbv6")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_shards(tmp_path_factory.mktemp("lcb") / "shards")


# ------------------------------------------------------------------------------------------------ registry, settings
def test_registry_entry_and_defaults():
    assert LCB.available and LCB.paper_column == "lcbv6" and LCB.group == "reasoning"
    settings = LCB.settings()
    assert (settings.max_new_tokens, settings.system_prompt, settings.release) == (32768, THINKING_ON, "release_v6")
    assert (settings.test_timeout_s, settings.max_tests_bytes) == (6.0, LCB_MAX_TESTS_BYTES)
    assert LCB.generation(settings)[1] == get_benchmark("math500").generation(get_benchmark("math500").settings())[1]
    assert RELEASES["release_v6"] == tuple(SHARD_SHA256) and RELEASES["v6"] == ("test6.jsonl",)
    assert RELEASES["v5_v6"] == ("test5.jsonl", "test6.jsonl") and len(RELEASES["release_v3"]) == 3


@pytest.mark.parametrize("mapping, match", [
    ({"release": "v7"}, r"benchmarks.lcbv6.release must be one of \[.*'release_v6'"),
    ({"chat": False}, r"benchmarks.lcbv6.chat must be true"),
    ({"start_date": "2025-13-01"}, r"benchmarks.lcbv6.start_date must be a date YYYY-MM-DD, got '2025-13-01'"),
    ({"start_date": "2025-03-01", "end_date": "2025-02-01"}, r"start_date 2025-03-01 is after end_date 2025-02-01"),
    ({"test_timeout_s": 0}, r"benchmarks.lcbv6.test_timeout_s must be a number > 0"),
    ({"windows": 1}, r"unknown setting\(s\) \['windows'\]"),
])
def test_bad_settings_name_the_key(mapping, match):
    with pytest.raises(ValueError, match=match):
        LCB.settings(mapping)


# ------------------------------------------------------------------------------------------------ private tests
def test_pickled_strings_are_read_without_unpickling(tmp_path):
    for protocol in (2, 3, 4, 5):
        for text in ("[]", "x" * 300, "y" * 70000):
            assert pickled_string(pickle.dumps(text, protocol=protocol)) == text
    marker = tmp_path / "pwned"
    hostile = hostile_row(marker)
    with pytest.raises(LcbDataError, match=r"opcode STACK_GLOBAL at byte \d+.*never unpickled"):
        load_tests(hostile)
    with pytest.raises(LcbDataError, match=r"opcode GLOBAL at byte 2"):
        pickled_string(pickle.dumps(os.system, protocol=2))  # a reference to it, not a call
    for data, match in ((pickle.dumps(["a"]), "opcode EMPTY_LIST"), (pickle.dumps("a") + b"!", "1 bytes follow"),
                        (pickle.dumps("a")[:-1], "cannot be parsed"), (pickle.dumps(("a", "b")), "opcode TUPLE2")):
        with pytest.raises(LcbDataError, match=match):
            pickled_string(data)
    assert not marker.exists()


def test_a_zlib_bomb_stops_at_the_cap():
    bomb = zlib.compress(b"0" * (8 << 20), 9)
    assert len(bomb) < 20000
    with pytest.raises(LcbDataError, match=r"more than 1048576 bytes .*max_tests_bytes.*zlib bomb"):
        inflate(bomb, 1 << 20)
    assert len(inflate(bomb, 8 << 20)) == 8 << 20
    with pytest.raises(LcbDataError, match="zlib bomb"):
        load_tests(bomb_row(2 << 20), max_bytes=1 << 20)
    with pytest.raises(LcbDataError, match="truncated"):
        inflate(zlib.compress(b"abc")[:-2], 100)


def test_tests_are_public_then_private_and_checked():
    functional = row("f", "2025-01-01", "q", [call("1", "2")], [call("3", "4")], func_name="f")
    assert load_tests(functional).inputs == ["1", "3"] and load_tests(functional).fn_name == "f"
    plain = row("s", "2025-01-01", "q", [stdin("a", "b")], [stdin("c", "d")], plain_private=True)
    assert load_tests(plain).outputs == ["b", "d"] and not load_tests(plain).functional
    bad = [({"private_test_cases": encode_private([{"input": "1", "output": 2, "testtype": "stdin"}])},
            r"private_test_cases\[0\] must be an object with string 'input' and 'output'"),
           ({"private_test_cases": encode_private([{"input": "1", "output": "2", "testtype": "interactive"}])},
            "testtype 'interactive'"),
           ({"metadata": "{}"}, r"functional tests need metadata.func_name"),
           ({"metadata": json.dumps({"func_name": "not a name"})}, "is not a function name"),
           ({"public_test_cases": "[{"}, "public_test_cases is not valid JSON"),
           ({"private_test_cases": "%%%"}, "zlib stream is truncated")]
    for change, match in bad:
        with pytest.raises(LcbDataError, match=match):
            load_tests({**functional, **change})


# ------------------------------------------------------------------------------------------------ shards, window
def test_fetch_reads_the_shards_of_a_window(shards, tmp_path, capsys):
    path = LCB.fetch(LCB.settings({"data": str(shards)}), tmp_path / "all")
    problems = LCB.load(path)
    assert [p[ID_KEY] for p in problems] == sorted(r["question_id"] for r in ROWS)  # lcb_runner's order
    assert problems[0] == {**sorted(ROWS, key=lambda r: r["question_id"])[0], ID_KEY: problems[0]["question_id"]}
    out = capsys.readouterr().out
    assert "lcbv6: 10 problems (release_v6: contest dates 2023-06-10 to 2025-04-01; 5 stdin, 5 functional)" in out
    record = json.loads((tmp_path / "all" / "lcbv6_test.jsonl.provenance.json").read_text())
    assert record["n"] == 10 and record["data"] == str(shards) and record["source"]["revision"].startswith("0fe84c3")
    by_file = {r["file"]: r for r in record["shards"]}
    assert set(by_file) == set(SHARD_SHA256) and by_file["test6.jsonl"]["rows"] == 4
    for name, shard in by_file.items():
        assert shard["sha256"] == hashlib.sha256((shards / name).read_bytes()).hexdigest()
        assert shard["matches_revision"] is False  # fixtures, not the hub's shards
    v6 = LCB.load(LCB.fetch(LCB.settings({"data": str(shards), "release": "v6"}), tmp_path / "v6"))
    assert [p[ID_KEY] for p in v6] == ["2051A", "average-value", "is-power-of-two", "min-max-pair"]
    assert "lcbv6: 4 problems (v6: contest dates 2025-01-10 to 2025-04-01; 1 stdin, 3 functional) from test6.jsonl" \
        in capsys.readouterr().out
    window = LCB.settings({"data": str(shards), "start_date": "2025-02-08", "end_date": "2025-03-15", "limit": 5})
    assert [p[ID_KEY] for p in LCB.load(LCB.fetch(window, tmp_path / "w"))] == ["average-value", "is-power-of-two"]
    assert "from 2025-02-08 to 2025-03-15" in capsys.readouterr().out
    limited = LCB.load(LCB.fetch(LCB.settings({"data": str(shards), "limit": 3}), tmp_path / "l"))
    assert [p[ID_KEY] for p in limited] == [p[ID_KEY] for p in problems[:3]]


def test_fetch_refuses_a_hostile_pickle_and_a_bomb_without_writing(tmp_path):
    marker = tmp_path / "pwned"
    for bad, settings, match in ((hostile_row(marker), {}, r"question_id abc999_z: .*opcode STACK_GLOBAL"),
                                 (bomb_row(2 << 20), {"max_tests_bytes": 1 << 20}, r"abc998_y: .*zlib bomb")):
        folder = write_shards(tmp_path / bad["question_id"], ROWS + [bad])
        with pytest.raises(ValueError, match=match):
            LCB.fetch(LCB.settings({"data": str(folder), **settings}), tmp_path / "out")
        assert not (tmp_path / "out" / "lcbv6_test.jsonl").exists()
    assert not marker.exists()


def test_missing_shards_bad_lines_and_offline_download(shards, tmp_path, monkeypatch):
    partial = write_shards(tmp_path / "partial")
    (partial / "test4.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match=r"test4.jsonl does not exist; benchmarks.lcbv6.data must be a folder"):
        LCB.fetch(LCB.settings({"data": str(partial)}), tmp_path / "out")
    (partial / "test4.jsonl").write_text('{"question_id": "x"}\n')
    with pytest.raises(ValueError, match=r"test4.jsonl:1: lacks field\(s\) \['question_title'"):
        LCB.fetch(LCB.settings({"data": str(partial)}), tmp_path / "out")
    with pytest.raises(ValueError, match="no problem of v6 lies in the window 2026-01-01"):
        LCB.fetch(LCB.settings({"data": str(shards), "release": "v6", "start_date": "2026-01-01"}), tmp_path / "out")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import: set the constant too
    with pytest.raises(RuntimeError, match=r"could not download livecodebench/code_generation_lite@0fe84c3 shards "
                                           r"\['test6.jsonl'\] .*set benchmarks.lcbv6.data to a local folder"):
        LCB.fetch(LCB.settings({"release": "v6"}), tmp_path / "offline")
    assert not list((tmp_path / "offline").iterdir())


# ------------------------------------------------------------------------------------------------ prompt, extraction
def test_prompt_is_lcb_runners_in_the_chat_template():
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    stdin_row, functional_row = ROWS[0], ROWS[5]
    assert question_prompt(stdin_row) == (
        "### Question:\nPrint the sum of N integers.\n\n### Format: Read the inputs from stdin solve the problem and "
        "write the answer to stdout (do not directly test on the sample inputs). Enclose your code within delimiters "
        "as follows. Ensure that when the python program runs, it reads the inputs, runs the algorithm and writes "
        "output to STDOUT.\n```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the provided format with backticks)"
        "\n\n")
    assert f"```python\n{functional_row['starter_code']}\n```\n\n### Answer" in question_prompt(functional_row)
    settings = LCB.settings()
    user = SYSTEM_MESSAGE + "\n\n" + question_prompt(stdin_row)
    assert LCB.messages(stdin_row, settings) == [{"role": "system", "content": THINKING_ON},
                                                 {"role": "user", "content": user}]
    assert LCB.prompt(stdin_row, tok, settings) == render_chat(tok, LCB.messages(stdin_row, settings))
    assert LCB.messages(stdin_row, LCB.settings({"system_prompt": None})) == [
        {"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": question_prompt(stdin_row)}]


def test_code_is_lcb_runners_last_fenced_block_of_the_raw_output():
    program = REFERENCE["abc301_a"]
    assert extract_code(fenced(program)) == program.rstrip()
    decoy = "```python\nprint('decoy')\n```"
    assert extract_code(fenced(program, thinking=f"First try:\n{decoy}")) == program.rstrip()
    two = f"Slow version:\n```python\nprint(0)\n```\nFaster:\n```python\nprint(1)\n```\n"
    assert extract_code(two) == "print(1)"
    assert extract_code(f"<think>\n{decoy}\nstill thinking") == "print('decoy')"  # the thinking never ended
    assert extract_code(f"<think>\n{decoy}\n</think>\nNo code after all.") == "print('decoy')"
    assert extract_code("print(1)") is None and extract_code("```python\nprint(1)") is None  # no (closed) fence
    assert extract_code("```\n```") is None and extract_code("```python\n  \n```") is None  # an empty block


def test_the_score_counts_the_problems_the_thinking_rule_would_change():
    decoy = "```python\nprint('decoy')\n```"
    outputs = {"a": [fenced("print(1)", thinking=decoy)], "b": [f"<think>\n{decoy}\nstill"],
               "c": [f"<think>\n{decoy}\n</think>\nNo code.", "```python\nprint(2)\n```"]}
    programs = {qid: [extract_code(text) for text in texts] for qid, texts in outputs.items()}
    assert programs == {"a": ["print(1)"], "b": ["print('decoy')"], "c": ["print('decoy')", "print(2)"]}
    effect = extraction_effect(outputs, programs)
    assert effect["problems_with_another_program_after_thinking"] == 2 and effect["ids"] == ["b", "c"]
    assert effect["samples_with_unclosed_thinking"] == 1


# ------------------------------------------------------------------------------------------------ results, harness
def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4) and pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # C(3,2)/C(5,2)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 5, 5) == 1.0 and pass_at_k(10, 8, 3) == 1.0  # n - c < k
    assert pass_at_k(200, 17, 10) == pytest.approx(1 - math.comb(183, 10) / math.comb(200, 10), abs=1e-12)


def test_windows_are_compute_scores_date_filters_per_difficulty_and_platform():
    """start <= contest_date <= end, the dates at midnight: the end day counts only at 00:00."""
    problems = [{"question_id": str(i), "contest_date": f"{day}T{hour}:00:00", "difficulty": level, "platform": site}
                for i, (day, hour, level, site) in enumerate([
                    ("2024-07-31", "23", "easy", "atcoder"), ("2024-08-01", "00", "easy", "leetcode"),
                    ("2025-02-01", "12", "hard", "codeforces"), ("2025-05-01", "00", "medium", "leetcode"),
                    ("2025-05-01", "23", "hard", "atcoder")])]
    graded = {"0": [True], "1": [False], "2": [True], "3": [True], "4": [False]}
    whole, recent, year = window_rates(problems, graded, "release_v6", [1])
    assert (whole["window"], whole["problems"], whole["pass@1"]) == ("release_v6", 5, 0.6)
    assert (recent["window"], recent["problems"], recent["pass@1"]) == ("2025-02-01..2025-05-01", 2, 1.0)
    assert (year["problems"], year["pass@1"]) == (3, pytest.approx(2 / 3))
    assert whole["difficulty"]["hard"] == {"problems": 2, "pass@1": 0.5}
    assert recent["platform"]["atcoder"] == {"problems": 0, "pass@1": None}
    metrics = flat_metrics([whole, recent, year], [1])
    assert metrics["pass@1_2025-02-01..2025-05-01"] == 1.0 and metrics["pass@1_leetcode"] == 0.5


@pytest.mark.parametrize("program, body", [
    ("import sys\nx = 1\nprint(x)\n", "import sys\ndef wrapped_function():\n    x = 1\n    print(x)"),
    ("def main():\n    print(1)\nif __name__ == '__main__':\n    main()\n",
     "\ndef wrapped_function():\n\n    def main():\n        print(1)\n    main()"),
    ("def main():\n    pass\nif '__main__' == __name__:\n    main()\n",  # only lcb_runner's exact test is unwrapped
     "\ndef wrapped_function():\n\n    def main():\n        pass\n    if '__main__' == __name__:\n        main()"),
])
def test_a_stdin_program_becomes_lcb_runners_function_body(program, body):
    assert as_function(program) == PRELUDE + "\n" + body
    assert as_function("print(") == "print("  # does not parse: unchanged (it then fails to load)
