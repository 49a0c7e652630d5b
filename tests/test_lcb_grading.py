"""LiveCodeBench grading in the code sandbox, beside the official grader: reference programs pass, shifted ones fail,
formatting edge cases and the idioms whose verdict depends on lcb_runner's harness (a function body, its mocks of
standard input and output, what ``==`` accepts, interpreter state a program changes) are judged as lcb_runner judges
them (its own ``run_test`` from the ``nvidia-livecodebench`` wheel, on our fixture programs only), hostile stdin
programs fail, and the benchmark runs through the DAG's benchmark, decode and score stages on fixture shards with a
tiny scripted model."""

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import char_tokenizer
from lcb_fixtures import (DELIBERATE, EDGE_CASES, IDIOMS, MORE_IDIOMS, REFERENCE, ROWS, STACK_DEPTH_DEPENDENT, fenced,
                          row, stdin, write_shards)
from official_lcb import official_results
from sbd_core import pipeline
from sbd_core.benchmarks import ID_KEY, get_benchmark
from sbd_core.benchmarks.lcbv6 import extract_code
from sbd_core.sandbox.pool import detect_isolation
from sbd_core.sandbox.lcb_grader import evaluate_lcb, stdin_output_matches
from sbd_core.report import build_report
from sbd_core.samplers import sampler_spec
from test_benchmarks import CHAT_TEMPLATE
from test_benchmarks_scoring import scripted_model

LCB = get_benchmark("lcbv6")
TIMEOUT = 3  # seconds per test in both graders: the fixture programs take milliseconds or never end
BY_ID = {r["question_id"]: r for r in ROWS}
IDS = [r["question_id"] for r in ROWS]
WINDOWS = [(None, None), ("2025-02-01", "2025-05-01"), ("2024-01-01", None), (None, "2023-07-01")]
UNCLOSED_THINKING = f"<think>\nFirst draft:\n```python\n{REFERENCE['abc301_a']}```\nBut wait"


def cases() -> list[dict]:
    """Every (row, answer) graded in the default tier: references, shifted references, edge cases, idioms."""
    shifted = {qid: REFERENCE[IDS[(i + 1) % len(IDS)]] for i, qid in enumerate(IDS)}
    listed = ([("reference", q, REFERENCE[q], True) for q in IDS] + [("shifted", q, shifted[q], False) for q in IDS]
              + [("edge", q, p, ok) for q, p, ok in EDGE_CASES])
    answers = [(group, qid, fenced(program), ok) for group, qid, program, ok in listed]
    answers += [("edge", "abc301_a", "n = int(input())\nprint(sum(map(int, input().split())))", False),  # no fence
                ("edge", "two-sum", f"```python\nprint(0)\n```\nBetter:\n{fenced(REFERENCE['two-sum'])}", True),
                ("edge", "abc301_a", UNCLOSED_THINKING, True)]  # lcb_runner reads the code inside the thinking
    return [{"group": group, "qid": qid, "row": BY_ID[qid], "completion": text, "passes": ok}
            for group, qid, text, ok in answers] + idiom_cases(IDIOMS)


def idiom_cases(idioms: list) -> list[dict]:
    return [{"group": "idiom", "name": name, "qid": qid, "row": BY_ID[qid], "completion": fenced(program),
             "official": official, "passes": official and name not in DELIBERATE}
            for name, qid, program, official in idioms]


def side_by_side(listed: list[dict], work) -> tuple:
    """Our verdicts and the official grader's on the same cases (the official one in a subprocess, alongside; its
    RuntimeError instead when the wheel cannot be fetched from PyPI here)."""
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


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return side_by_side(cases(), tmp_path_factory.mktemp("lcb_grading"))


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


def test_edge_cases_and_idioms_get_their_verdicts(graded):
    """Without the official grader too: each case's verdict as lcb_runner gives it (fixtures), but the deliberate
    differences."""
    listed, ours, _, _ = graded
    for case, verdict in zip(listed, ours):
        assert verdict["passed"] == case["passes"], (case, verdict)
    statuses = {v["status"] for v in ours}
    assert {"passed", "wrong_answer", "time_limit_exceeded", "runtime_error", "no_code"} <= statuses


def assert_as_official(listed: list[dict], ours: list[dict], theirs: list[dict]) -> None:
    """The same verdict as the official grader on every case (and, but for shifted references, the same status and
    failing test), except the deliberate differences, where it passes and we fail."""
    for case, verdict, record in zip(listed, ours, theirs):
        if case["group"] == "idiom":
            assert record["passed"] == case["official"], (case, record)  # the fixture says what lcb_runner does
        if case.get("name") in DELIBERATE:
            assert record["passed"] and not verdict["passed"], (case, verdict, record)
            continue
        assert record["passed"] == verdict["passed"], (case, verdict, record)
        if case["group"] == "shifted":  # (a shifted program fails there too, sometimes in another way)
            continue
        code = True if verdict["passed"] else record["results"][-1]
        status = {-2: "wrong_answer", False: "wrong_answer", -3: "time_limit_exceeded", True: "passed",
                  -4: "runtime_error" if record["code"] else "no_code", -1: "runtime_error"}[code]
        assert verdict["status"] == status, (case, verdict, record)
        failed = None if status in ("passed", "no_code") else 0 if code == -1 else len(record["results"]) - 1
        if "truth value of an array" in record["metadata"].get("error", ""):
            failed -= 1  # lcb_runner records the failing comparison's result, then -4, for the same test
        if case.get("name") not in STACK_DEPTH_DEPENDENT:
            assert verdict["failed_test"] == failed, (case, verdict, record)


def test_verdicts_and_statuses_equal_the_official_graders(graded):
    listed, ours, _, _ = graded
    assert_as_official(listed, ours, official(graded)["cases"])


@pytest.mark.slow
def test_more_idioms_as_the_official_grader(tmp_path):
    listed, ours, theirs, _ = side_by_side(idiom_cases(MORE_IDIOMS), tmp_path)
    for case, verdict in zip(listed, ours):
        assert verdict["passed"] == case["passes"], (case, verdict)
    assert_as_official(listed, ours, official((None, None, theirs))["cases"])


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
    # 16 anonymous files of 8 MiB (128 MiB at most): it prints the answer only if it held them all
    "fill_memfd": "import os\nheld = []\nfor _ in range(16):\n    held.append(os.memfd_create('fill'))\n"
                  "    for _ in range(8):\n        os.write(held[-1], bytes(1 << 20))\n" f"print({SECRET!r})\n",
    "honest": f"input()\nprint({SECRET!r})\n",  # the control: a program that knows the answer passes
}


def test_hostile_stdin_programs_fail_and_leave_nothing(tmp_path):
    rows = [row(f"h_{name}", "2025-01-01", "q", [stdin("q\n", SECRET + "\n")], [stdin("q\n", SECRET)])
            for name in HOSTILE]
    programs = {r["question_id"]: HOSTILE[r["question_id"][2:]] for r in rows}
    threads = threading.active_count()
    result = evaluate_lcb(rows, programs, tmp_path, test_timeout_s=2, parallel=2, timeout_s=300)
    verdicts = {qid[2:]: v for qid, v in result["per_problem"].items()}
    assert verdicts.pop("honest")["passed"]
    assert not any(v["passed"] for v in verdicts.values()), verdicts
    assert verdicts["swallow_alarm"]["status"] == "time_limit_exceeded"
    assert verdicts["flood"]["status"] in ("runtime_error", "time_limit_exceeded")
    assert verdicts["forged_report"]["status"] == verdicts["forged_exit"]["status"] == "runtime_error"
    assert verdicts["find_secret"]["status"] == "wrong_answer"  # it looked where it can for 1 s and found nothing
    assert verdicts["fill_memfd"]["status"] == "runtime_error" and "PermissionError" in verdicts["fill_memfd"]["detail"]
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
    records_ids = ["2051A", "average-value", "is-power-of-two", "min-max-pair"]
    assert [r["id"] for r in records] == records_ids
    assert all(r["completion"] == answer and r["prompt"].endswith("<|start|>assistant\n") for r in records)
    (tmp_path / "work").mkdir()
    names = {"model": "tiny", "objective": "ntp", "sampler": "ntp"}
    result = pipeline.run_score("lcbv6", generations, tmp_path / "score.json", data=test_file, settings=settings,
                                names=names, work_dir=tmp_path / "work")
    assert "lcbv6: accuracy 0.2500 on 4 problems" in capsys.readouterr().out
    saved = json.loads((tmp_path / "score.json").read_text())
    assert saved["accuracy"] == 0.25 == result["metrics"]["pass@1"] and saved["n_problems"] == 4
    assert saved["metrics"]["pass@1_stdin"] == 1.0 and saved["metrics"]["pass@1_functional"] == 0.0
    verdicts = saved["per_problem"]
    assert verdicts["2051A"]["passed"] and verdicts["2051A"]["status"] == "passed"
    assert verdicts["2051A"]["program"] == REFERENCE["2051A"].rstrip()
    assert {verdicts[q]["status"] for q in ("average-value", "is-power-of-two", "min-max-pair")} == {"runtime_error"}
    # v6's four problems lie in 2024-08-01..2025-05-01, three of them (not 2051A) in 2025-02-01..2025-05-01
    assert saved["metrics"]["pass@1_2024-08-01..2025-05-01"] == 0.25 and saved["metrics"]["pass@1_codeforces"] == 1.0
    assert saved["metrics"]["pass@1_2025-02-01..2025-05-01"] == 0.0 and saved["metrics"]["pass@1_atcoder"] is None
    assert [(w["window"], w["problems"]) for w in saved["lcb"]["windows"]] == [
        ("v6", 4), ("2025-02-01..2025-05-01", 3), ("2024-08-01..2025-05-01", 4)]
    assert saved["lcb"]["samples_per_problem"] == [1] and saved["lcb"]["extraction"]["ids"] == []
    eval_all = json.loads((tmp_path / "score_eval_all.json").read_text())
    assert saved["sidecars"] == {"eval_all.json": str(tmp_path / "score_eval_all.json")}
    assert [r["question_id"] for r in eval_all] == records_ids and eval_all[0]["graded_list"] == [True]
    assert eval_all[0]["output_list"] == [answer] and eval_all[0]["code_list"] == [REFERENCE["2051A"].rstrip()]
    report = build_report([tmp_path / "score.json"], paper_table=None)["report.md"].decode()
    section = report[report.index("## LiveCodeBench"):]  # the run's rows: its test file, then the two paper windows
    assert "| tiny | NTP / NTP | v6 | 25.0 (4) | 50.0 (2) | 0.0 (1) | 0.0 (1) | - | 100.0 (1) | 0.0 (3) | - | 0 |" \
        in section, section
    assert "| tiny | NTP / NTP | 2025-02-01..2025-05-01 | 0.0 (3) |" in section


def test_samples_windows_and_eval_all_as_lcb_runners_compute_scores(tmp_path):
    """Five samples per problem (the reference or a shifted one): pass@1 and pass@5 over the test file, the paper
    windows, each difficulty and platform equal what lcb_runner's compute_scores reads from our eval_all.json."""
    test_file = pipeline.run_benchmark("lcbv6", {"data": str(write_shards(tmp_path / "shards"))}, tmp_path / "bench")
    shifted = {qid: REFERENCE[IDS[(i + 3) % len(IDS)]] for i, qid in enumerate(IDS)}
    right = {qid: i % 4 for i, qid in enumerate(IDS)}  # how many of the five samples are the reference
    with (tmp_path / "gens.jsonl").open("w") as out:
        for qid, correct in right.items():
            texts = [fenced(REFERENCE[qid])] * correct + [fenced(shifted[qid])] * (5 - correct)
            out.write(json.dumps({"id": qid, "completions": texts}) + "\n")
    score = pipeline.run_score("lcbv6", tmp_path / "gens.jsonl", tmp_path / "score.json", data=test_file,
                               settings={"test_timeout_s": TIMEOUT}, work_dir=tmp_path)
    assert score["lcb"]["samples_per_problem"] == [5] and score["lcb"]["k"] == [1, 5]
    assert score["per_problem"]["arc190_a"]["graded_list"] == [True, True, True, False, False]
    assert score["per_problem"]["arc190_a"]["pass@1"] == 0.6 and len(score["per_problem"]["arc190_a"]["samples"]) == 5
    assert score["accuracy"] == pytest.approx(sum(right.values()) / 50)
    windows = [(None, None, "release_v6"), ("2025-02-01", "2025-05-01", "2025-02-01..2025-05-01"),
               ("2024-08-01", "2025-05-01", "2024-08-01..2025-05-01")]
    platforms = ("atcoder", "codeforces", "leetcode")
    requests = [(score["sidecars"]["eval_all.json"], start, end, None) for start, end, _ in windows]
    requests += [(score["sidecars"]["eval_all.json"], None, None, name) for name in platforms]
    try:
        theirs = official_results([], tmp_path / "official", TIMEOUT, scores=requests)["scores"]
    except RuntimeError as err:
        pytest.skip(f"the official grader cannot be fetched here: {err}")
    ours = {w["window"]: w for w in score["lcb"]["windows"]}
    for (_, _, label), printed in zip(windows, theirs):
        window = ours[label]
        assert window["problems"] == printed["problems"]
        for k in (1, 5):
            assert window[f"pass@{k}"] == pytest.approx(printed[f"Pass@{k}"], abs=1e-12), (label, k)
            for level in ("easy", "medium", "hard"):
                mine = window["difficulty"][level][f"pass@{k}"]
                assert (mine is None and printed[f"{level.title()} Pass@{k}"] != printed[f"{level.title()} Pass@{k}"]
                        ) or mine == pytest.approx(printed[f"{level.title()} Pass@{k}"], abs=1e-12), (label, level)
    for name, printed in zip(platforms, theirs[len(windows):]):
        assert ours["release_v6"]["platform"][name]["pass@1"] == pytest.approx(printed["Pass@1"], abs=1e-12), name
