"""LiveCodeBench grading in the code sandbox, beside the official grader: reference programs pass, shifted ones fail,
formatting edge cases are judged as lcb_runner judges them (its own ``run_test`` from the ``nvidia-livecodebench``
wheel, on our fixture programs only), hostile stdin programs fail, and the benchmark runs through the DAG's benchmark,
decode and score stages on fixture shards with a tiny scripted model."""

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import char_tokenizer
from lcb_fixtures import DIFFERENCES, EDGE_CASES, REFERENCE, ROWS, fenced, row, stdin, write_shards
from official_lcb import official_results
from sbd_core import pipeline
from sbd_core.benchmarks import ID_KEY, get_benchmark
from sbd_core.benchmarks.lcbv6 import extract_code
from sbd_core.evaluation.code import detect_isolation
from sbd_core.evaluation.code.lcb_grader import evaluate_lcb, stdin_output_matches
from sbd_core.samplers import sampler_spec
from test_benchmarks import CHAT_TEMPLATE
from test_benchmarks_scoring import scripted_model

LCB = get_benchmark("lcbv6")
TIMEOUT = 3  # seconds per test in both graders: the fixture programs take milliseconds or never end
BY_ID = {r["question_id"]: r for r in ROWS}
IDS = [r["question_id"] for r in ROWS]
WINDOWS = [(None, None), ("2025-02-08", "2025-03-15"), ("2024-01-01", None), (None, "2023-07-01")]


def cases() -> list[dict]:
    """Every (row, answer) graded here: references, shifted references, edge cases, documented differences."""
    shifted = {qid: REFERENCE[IDS[(i + 1) % len(IDS)]] for i, qid in enumerate(IDS)}
    listed = ([("reference", q, REFERENCE[q], True) for q in IDS] + [("shifted", q, shifted[q], False) for q in IDS]
              + [("edge", q, p, ok) for q, p, ok in EDGE_CASES] + [("difference", q, p, True) for q, p in DIFFERENCES])
    answers = [(group, qid, fenced(program), ok) for group, qid, program, ok in listed]
    answers += [("edge", "abc301_a", "n = int(input())\nprint(sum(map(int, input().split())))", False),  # no fence
                ("edge", "two-sum", f"```python\nprint(0)\n```\nBetter:\n{fenced(REFERENCE['two-sum'])}", True)]
    return [{"group": group, "qid": qid, "row": BY_ID[qid], "completion": text, "passes": ok}
            for group, qid, text, ok in answers]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Our verdicts and the official grader's on the same cases (the official one in a subprocess, alongside; its
    RuntimeError instead when the wheel cannot be fetched from PyPI here)."""
    work = tmp_path_factory.mktemp("lcb_grading")
    listed = cases()
    with ThreadPoolExecutor(1) as pool:
        official = pool.submit(official_results, [{"row": c["row"], "completion": c["completion"]} for c in listed],
                               work / "official", TIMEOUT, WINDOWS)
        rows = [{**c["row"], "question_id": f"{c['qid']}#{n}"} for n, c in enumerate(listed)]
        programs = {r["question_id"]: extract_code(c["completion"]) for r, c in zip(rows, listed)}
        ours = evaluate_lcb(rows, programs, work / "ours", test_timeout_s=TIMEOUT, parallel=2, timeout_s=600)
        try:
            theirs = official.result()
        except RuntimeError as err:
            theirs = err
    return listed, [ours["per_problem"][r["question_id"]] for r in rows], theirs, ours


def official(graded) -> dict:
    theirs = graded[2]
    if isinstance(theirs, RuntimeError):
        pytest.skip(f"the official grader cannot be fetched here: {theirs}")
    return theirs


def test_references_pass_and_shifted_programs_fail(graded):
    listed, ours, _, result = graded
    by_group = {}
    for case, verdict in zip(listed, ours):
        by_group.setdefault(case["group"], []).append(verdict["passed"])
    assert all(by_group["reference"]) and len(by_group["reference"]) == 10
    assert sum(by_group["shifted"]) / len(by_group["shifted"]) <= 0.05
    assert result["network_isolated"] == detect_isolation().jailed


def test_edge_cases_get_their_verdicts(graded):
    listed, ours, _, _ = graded
    for case, verdict in zip(listed, ours):
        assert verdict["passed"] == case["passes"], (case, verdict)
    statuses = {v["status"] for v in ours}
    assert {"passed", "wrong_answer", "time_limit_exceeded", "runtime_error", "no_code"} <= statuses


def test_verdicts_and_statuses_equal_the_official_graders(graded):
    listed, ours, _, _ = graded
    for case, verdict, theirs in zip(listed, ours, official(graded)["cases"]):
        if case["group"] == "difference":  # documented in the README: a stdin program runs as a real process
            assert not theirs["passed"] and theirs["results"] == [-4] and verdict["passed"]
            continue
        assert theirs["passed"] == verdict["passed"], (case, verdict, theirs)
        if case["group"] == "shifted":  # (a shifted program fails there too, sometimes in another way)
            continue
        code = True if verdict["passed"] else theirs["results"][-1]
        status = {-2: "wrong_answer", False: "wrong_answer", -3: "time_limit_exceeded", True: "passed",
                  -4: "runtime_error" if theirs["code"] else "no_code"}[code]
        assert verdict["status"] == status, (case, verdict, theirs)
        failed = None if status in ("passed", "no_code") else len(theirs["results"]) - 1
        assert verdict["failed_test"] == failed, (case, verdict, theirs)


def test_prompts_extraction_and_windows_are_lcb_runners(graded, tmp_path):
    listed, theirs = graded[0], official(graded)
    with_system, without = LCB.settings(), LCB.settings({"system_prompt": None})
    for case, record in zip(listed, theirs["cases"]):
        assert LCB.messages(case["row"], without) == record["chat"]  # lcb_runner's OpenAIChat layout
        assert LCB.messages(case["row"], with_system)[1:] == record["reasoning"]  # its reasoning-model layout
        assert (extract_code(case["completion"]) or "") == record["code"]
    folder = write_shards(tmp_path / "shards")
    for (start, end), kept in zip(WINDOWS, theirs["windows"]):
        settings = LCB.settings({"data": str(folder), "start_date": start, "end_date": end})
        assert [p[ID_KEY] for p in LCB.load(LCB.fetch(settings, tmp_path / "w"))] == sorted(kept), (start, end)


@pytest.mark.parametrize("output, expected, ok", [
    ("6", "6\n", True), ("  6 \n\n", "6", True), ("1.50", "1.5", True), ("1e0", "1", True), ("1 2", "1   2", True),
    ("0.5000001", "0.5", False), ("6\n", "6\n7", False), ("Yes  No", "Yes No", False), ("yes", "Yes", False),
    ("", "", True), ("nan", "NaN", False), ("1\n\n2", "1\n2", False),
])
def test_stdin_comparison(output, expected, ok):
    assert stdin_output_matches(output, expected) is ok


# ------------------------------------------------------------------------------------------------ hostile programs
SECRET = uuid.uuid4().hex
HOSTILE = {
    "forged_report": "import os\nos.write(3, b'{\"done\": true}\\n{\"v\": \"x\"}\\n')\nos._exit(0)\n",
    "forged_exit": f"print({SECRET!r}, flush=True)\nimport os\nos._exit(0)\n",  # right output, not finished
    "fork": "import os\nos.fork()\nprint('x')\n",
    "ctypes_fork": "import ctypes\nprint(ctypes.CDLL(None).fork())\n",
    "flood": "import sys\nwhile True:\n    sys.stdout.write('x' * (1 << 20))\n",
    "swallow_alarm": "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n",
    # it searches for at most 1 s (a host /tmp can hold a whole clone with its venv), then answers with what it found
    "find_secret": "import os, time\nend = time.monotonic() + 1.0\n"
                   "files = ['/proc/1/cmdline', '/proc/1/environ']\n"
                   "files += [f'/proc/self/fd/{fd}' for fd in os.listdir('/proc/self/fd')]\n"
                   "for root in ('/scratch', '/tmp', '/dev/shm', os.path.expanduser('~')):\n"
                   "    for d, _, names in os.walk(root):\n"
                   "        files += [os.path.join(d, f) for f in names]\n"
                   "        if time.monotonic() > end:\n            break\n"
                   "found = []\nfor f in files:\n    if time.monotonic() > end + 0.5:\n        break\n"
                   "    try:\n        found.append(open(f, 'rb').read(1 << 20))\n"
                   "    except Exception:\n        pass\n"
                   "print(next((b for b in found if b'" + SECRET[:8] + "' in b), b'').decode())\n",
    "honest": f"input()\nprint({SECRET!r})\n",  # the control: a program that knows the answer passes
}


def test_hostile_stdin_programs_fail_and_leave_nothing(tmp_path):
    rows = [row(f"h_{name}", "2025-01-01", "q", [stdin("q\n", SECRET + "\n")], [stdin("q\n", SECRET)])
            for name in HOSTILE]
    programs = {r["question_id"]: HOSTILE[r["question_id"][2:]] for r in rows}
    threads = threading.active_count()
    result = evaluate_lcb(rows, programs, tmp_path, test_timeout_s=TIMEOUT, parallel=2, timeout_s=300)
    verdicts = {qid[2:]: v for qid, v in result["per_problem"].items()}
    assert verdicts.pop("honest")["passed"]
    assert not any(v["passed"] for v in verdicts.values()), verdicts
    assert verdicts["swallow_alarm"]["status"] == "time_limit_exceeded"
    assert verdicts["flood"]["status"] in ("runtime_error", "time_limit_exceeded")
    assert verdicts["forged_report"]["status"] == verdicts["forged_exit"]["status"] == "runtime_error"
    assert verdicts["find_secret"]["status"] == "wrong_answer"  # it looked where it can for 1 s and found nothing
    assert threading.active_count() == threads and not list(tmp_path.iterdir())  # no pool thread, no run folder


# ------------------------------------------------------------------------------------------------ DAG stages
def test_benchmark_decode_and_score_stages_on_fixture_shards(tmp_path, capsys):
    """A scripted chat model answers every prompt with 2051A's reference program (one token): that problem passes,
    the three other v6 problems fail; the score file keys its verdicts by question_id."""
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    answer = fenced(REFERENCE["2051A"])
    tok.add_tokens([answer])
    model_dir = tmp_path / "model"
    scripted_model(tok, [tok.convert_tokens_to_ids(answer)]).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    settings = {"data": str(write_shards(tmp_path / "shards")), "release": "v6", "max_new_tokens": 8,
                "test_timeout_s": TIMEOUT}
    test_file = pipeline.run_benchmark("lcbv6", settings, tmp_path / "benchmarks")
    assert "lcbv6: 4 problems (v6" in capsys.readouterr().out
    generations = tmp_path / "generations.jsonl"
    pipeline.run_decode(model_dir, "lcbv6", settings, test_file, sampler_spec("ntp"), {"batch_size": 4}, generations,
                        progress=False)
    records = [json.loads(line) for line in generations.read_text().splitlines()]
    assert [r["id"] for r in records] == ["2051A", "average-value", "is-power-of-two", "min-max-pair"]
    assert all(r["completion"] == answer and r["prompt"].endswith("<|start|>assistant\n") for r in records)
    (tmp_path / "work").mkdir()
    result = pipeline.run_score("lcbv6", generations, tmp_path / "score.json", data=test_file, settings=settings,
                                work_dir=tmp_path / "work")
    assert "lcbv6: accuracy 0.2500 on 4 problems" in capsys.readouterr().out
    saved = json.loads((tmp_path / "score.json").read_text())
    assert saved["accuracy"] == 0.25 == result["metrics"]["pass@1"] and saved["n_problems"] == 4
    assert saved["metrics"]["pass@1_stdin"] == 1.0 and saved["metrics"]["pass@1_functional"] == 0.0
    verdicts = saved["per_problem"]
    assert verdicts["2051A"]["passed"] and verdicts["2051A"]["status"] == "passed"
    assert verdicts["2051A"]["program"] == REFERENCE["2051A"].rstrip()
    assert {verdicts[q]["status"] for q in ("average-value", "is-power-of-two", "min-max-pair")} == {"runtime_error"}
