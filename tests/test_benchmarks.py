"""Benchmark registry: settings, data files and ids, generations files, prompts (chat and plain), code programs and the
math judge. Nothing here runs lm-eval or executes code (see test_benchmarks_scoring.py)."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import datasets
import huggingface_hub
import pytest

from conftest import char_tokenizer
from sbd_core.benchmarks import (BENCHMARKS, ID_KEY, PAPER_COLUMNS, THINKING_OFF, THINKING_ON, Benchmark,
                                 BenchmarkUnavailable, Settings, add_special_tokens_for, describe_benchmarks,
                                 get_benchmark, score_generations)
from sbd_core.benchmarks.chat import render_chat
from sbd_core.benchmarks.lm_eval_hooks import final_answer_text, math_answer, math_verify_results
from sbd_core.benchmarks.lm_eval_task import LmEvalBenchmark, task_config
from sbd_core.records.generations import read_generations
from sbd_core.tasks import get_task

# copies of the real test sets beside the checkout (a folder shared/benchmarks above it); absent on most machines
SHARED = next((p / "shared" / "benchmarks" for p in Path(__file__).resolve().parents
               if (p / "shared" / "benchmarks").is_dir()), Path("shared/benchmarks/not-found"))
needs_data = pytest.mark.skipif(not SHARED.is_dir(), reason="no real benchmark copies (shared/benchmarks) found")
# a small Llama-3-like template: BOS, one block per message, content trimmed
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def chat_tok():
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    return tok


def humaneval_rows(n=None):
    with gzip.open(SHARED / "humaneval_test.jsonl.gz", "rt") as handle:
        return [json.loads(line) for line in handle][:n]


# ------------------------------------------------------------------------------------------------ registry
def test_registry_is_the_one_list_in_table_1_order():
    assert PAPER_COLUMNS == ("math500", "aime25", "lcbv6", "gsm8k", "humaneval_plus", "mbpp")
    assert set(BENCHMARKS) == {"math500", "aime25", "lcbv6", "gsm8k", "humaneval_plus", "mbpp_plus", "math", "code",
                               "code_chain", "math_long", "code_affine", "math_direct", "math_graded", "code_graded",
                               "math_shorter"}
    assert {b.group for b in BENCHMARKS.values()} == {"reasoning", "chat", "synthetic"}
    assert get_benchmark("mbpp_plus").paper_column == "mbpp" and get_benchmark("math").paper_column is None
    with pytest.raises(ValueError, match=r"unknown benchmark 'gsm9k'; registered: \['aime25', 'code'"):
        get_benchmark("gsm9k")


def test_describe_lists_every_benchmark_as_plain_data():
    table = describe_benchmarks()
    assert list(table) == list(BENCHMARKS)
    assert all(entry["available"] for entry in table.values())
    assert table["lcbv6"]["defaults"]["release"] == "release_v6"
    assert table["mbpp_plus"]["defaults"]["max_new_tokens"] == 256 and "parallel" in table["mbpp_plus"]["defaults"]
    json.dumps(table)


def test_importing_the_registry_loads_no_heavy_package():
    code = ("import sys, sbd_core.benchmarks; "
            "print([m for m in ('torch', 'lm_eval', 'evalplus', 'datasets', 'transformers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_an_unavailable_benchmark_says_why(tmp_path):
    class NotYet(Benchmark):
        available, reason = False, "its data are not public yet"

    bench = NotYet(name="later", paper_column=None, group="chat", defaults=Settings(max_new_tokens=8),
                   required_fields=(), source={})
    with pytest.raises(BenchmarkUnavailable, match="benchmark 'later' is not available: its data are not public yet"):
        bench.fetch(bench.settings(), tmp_path)
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------------ settings
@pytest.mark.parametrize("name, tokens, system", [
    ("math500", 32768, THINKING_ON), ("aime25", 32768, THINKING_ON), ("lcbv6", 32768, THINKING_ON),
    ("gsm8k", 1024, THINKING_OFF), ("humaneval_plus", 1024, THINKING_OFF), ("mbpp_plus", 256, THINKING_OFF),
])
def test_paper_defaults(name, tokens, system):
    settings = get_benchmark(name).settings()
    assert (settings.max_new_tokens, settings.system_prompt, settings.chat, settings.limit) == (tokens, system, True,
                                                                                                 None)


def test_settings_overrides_and_stops():
    gsm = get_benchmark("gsm8k")
    s = gsm.settings({"max_new_tokens": 64, "limit": 5, "stop_strings": ["\n\n"], "data": "x.jsonl"})
    assert (s.max_new_tokens, s.limit, s.data) == (64, 5, "x.jsonl") and gsm.generation(s) == (64, ("\n\n",))
    assert gsm.settings({"data": Path("d/x.jsonl")}).data == "d/x.jsonl"
    assert "<|eot_id|>" in gsm.generation(gsm.settings())[1]
    code = get_benchmark("humaneval_plus")
    chat_stops, plain_stops = (code.generation(code.settings({"chat": c}))[1] for c in (True, False))
    assert "\n```\n" in chat_stops and "\ndef " not in chat_stops  # chat code may define helpers
    assert "\ndef " in plain_stops and "\n```\n" not in plain_stops
    assert code.settings({"parallel": 8, "timeout_s": 60}).timeout_s == 60.0
    assert get_benchmark("math").generation(get_benchmark("math").settings()) == (96, get_task("math").stop_sequences)


@pytest.mark.parametrize("name, mapping, match", [
    ("gsm8k", {"max_tokens": 5}, r"benchmarks.gsm8k: unknown setting\(s\) \['max_tokens'\]; allowed: \['chat'"),
    ("gsm8k", {"max_new_tokens": "1k"}, r"benchmarks.gsm8k.max_new_tokens must be an integer >= 1, got '1k'"),
    ("gsm8k", {"limit": 0}, r"benchmarks.gsm8k.limit must be an integer >= 1, got 0"),
    ("gsm8k", {"chat": "yes"}, r"benchmarks.gsm8k.chat must be true or false, got 'yes'"),
    ("gsm8k", {"stop_strings": "\n"}, r"stop_strings must be a list of non-empty strings"),
    ("gsm8k", {"parallel": 2}, r"unknown setting\(s\) \['parallel'\]"),
    ("mbpp_plus", {"timeout_s": 0}, r"benchmarks.mbpp_plus.timeout_s must be a number > 0, got 0"),
    ("math500", {"chat": False, "system_prompt": "x"}, r"system_prompt applies only with chat: true"),
    ("math", {"chat": True}, r"benchmarks.math.chat must be false"),
    ("code", {"seed": -1}, r"benchmarks.code.seed must be an integer >= 0"),
    ("code", {"limit": None}, r"benchmarks.code.limit must be an integer >= 1: it is the number of problems"),
    ("math", {"split": "train"}, r"benchmarks.math.split must be one of \['dev', 'test'\] \(train is what the "
                                 r"models learn from\), got 'train'"),
    ("code", {"split": "valid"}, r"benchmarks.code.split must be one of \['dev', 'test'\]"),
    ("gsm8k", {"split": "test"}, r"benchmarks.gsm8k: unknown setting\(s\) \['split'\]"),
    ("gsm8k", ["limit"], r"benchmarks.gsm8k must be a mapping"),
])
def test_bad_settings_name_the_key_and_the_fix(name, mapping, match):
    with pytest.raises(ValueError, match=match):
        get_benchmark(name).settings(mapping)


# ------------------------------------------------------------------------------------------------ data and ids
@needs_data
def test_ids_are_task_ids_or_row_indices():
    gsm = get_benchmark("gsm8k").load(SHARED / "gsm8k_test.jsonl")
    assert len(gsm) == 1319 and [p[ID_KEY] for p in gsm[:3]] == ["0", "1", "2"] and gsm[-1][ID_KEY] == "1318"
    mbpp = get_benchmark("mbpp_plus").load(SHARED / "mbppplus_prerelease.jsonl")
    assert mbpp[0][ID_KEY] == "Mbpp/2" and len({p[ID_KEY] for p in mbpp}) == len(mbpp) == 399
    assert len(get_benchmark("math500").load(SHARED / "math500_test.jsonl")) == 500
    assert len(get_benchmark("aime25").load(SHARED / "aime25_test.jsonl")) == 30


@needs_data
def test_fetch_copies_the_local_file_with_limit_and_provenance(tmp_path):
    bench = get_benchmark("gsm8k")
    path = bench.fetch(bench.settings({"data": str(SHARED / "gsm8k_test.jsonl"), "limit": 7}), tmp_path)
    assert path == tmp_path / "gsm8k_test.jsonl"
    problems = bench.load(path)
    source = [json.loads(line) for line in (SHARED / "gsm8k_test.jsonl").read_text().splitlines()[:7]]
    assert problems == [{**row, ID_KEY: str(i)} for i, row in enumerate(source)]
    record = json.loads(Path(str(path) + ".provenance.json").read_text())
    assert record["n"] == 7 and record["source"]["revision"] == "e53f048856ff4f594e959d75785d2c2d37b678ee"
    assert record["settings"]["limit"] == 7 and len(record["sha256"]) == 64


def test_offline_download_failure_names_the_data_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    # read at import: set the constants too (else five retries of a lookup that cannot resolve, 23 s)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    bench = get_benchmark("math500")
    with pytest.raises(RuntimeError, match=r"could not load HuggingFaceH4/MATH-500@6e4ed1a.*set benchmarks.math500.data"):
        bench.fetch(bench.settings(), tmp_path)
    assert not list(tmp_path.iterdir())


def test_load_rejects_rows_outside_the_schema(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(ValueError, match=r"row 1 lacks field\(s\) \['answer'\]; gsm8k rows need \['question', "
                                         r"'answer'\].*openai/gsm8k"):
        get_benchmark("gsm8k").load(bad)
    dup = tmp_path / "dup.jsonl"
    row = {k: "" for k in ("task_id", "prompt", "entry_point", "canonical_solution", "base_input", "plus_input",
                           "atol", "contract")}
    dup.write_text((json.dumps({**row, "task_id": "HumanEval/1"}) + "\n") * 2)
    with pytest.raises(ValueError, match=r"problem id 'HumanEval/1' repeats \(rows 1 and 2\)"):
        get_benchmark("humaneval_plus").load(dup)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        get_benchmark("gsm8k").load(tmp_path / "missing.jsonl")


def test_a_test_file_the_benchmark_stage_wrote_is_never_cut_again(tmp_path):
    """101 problems, one more than the default limit (100): scoring without settings takes all of them; a limit
    applies where the problems are chosen (a fetch, a file in the source's schema) or when the settings state it."""
    bench = get_benchmark("math")
    assert bench.defaults.limit == 100
    stage_file = bench.fetch(bench.settings({"limit": 101}), tmp_path / "stage")
    problems, applied = bench.problem_set(stage_file, bench.settings(), None, tmp_path)
    assert len(problems) == 101 and applied == {"limit": 101, "by": "benchmark stage"}
    assert len(bench.problem_set(stage_file, bench.settings({"limit": 200}), 200, tmp_path)[0]) == 101
    with pytest.raises(ValueError, match=r"stage/math_test.jsonl: the benchmark stage wrote this test file with "
                                         r"101 problems, and limit 50 would cut it"):
        bench.problem_set(stage_file, bench.settings({"limit": 50}), 50, tmp_path)
    source_schema = tmp_path / "rows.jsonl"  # the source's own schema: no sbd_id
    source_schema.write_text("".join(json.dumps({k: v for k, v in p.items() if k != ID_KEY}) + "\n"
                                     for p in problems))
    assert bench.problem_set(source_schema, bench.settings(), None, tmp_path)[1] == {"limit": None, "by": None}
    cut, applied = bench.problem_set(source_schema, bench.settings({"limit": 7}), 7, tmp_path)
    assert [p[ID_KEY] for p in cut] == [p[ID_KEY] for p in problems[:7]] and applied == {"limit": 7, "by": "settings"}
    fetched, applied = bench.problem_set(None, bench.settings(), None, tmp_path / "fetch")
    assert len(fetched) == 100 and applied == {"limit": 100, "by": "fetch"}


def test_synthetic_benchmarks_generate_their_problems_and_training_rows(tmp_path):
    math = get_benchmark("math")
    problems = math.load(math.fetch(math.settings({"limit": 4, "seed": 3}), tmp_path))
    task = get_task("math")
    expected = task.make_problems("test", 4, 3)
    assert [p["question"] for p in problems] == [p["question"] for p in expected]
    assert [p[ID_KEY] for p in problems] == [p["task_id"] for p in expected]
    assert all(p["prompt"] == task.prompt_text(p) == math.prompt(p, None, math.settings()) for p in problems)
    rows = get_benchmark("code").training_rows("train", 3, 0)
    code_task = get_task("code")
    assert rows == [{"task": "code", "task_id": p["task_id"], "prompt": code_task.prompt_text(p),
                     "target": code_task.target_text(p)} for p in code_task.make_problems("train", 3, 0)]


@pytest.mark.parametrize("name, key", [("math", "question"), ("code", "prompt")])
def test_the_split_setting_chooses_the_problems_and_every_score_names_it(tmp_path, name, key):
    """``split: dev`` generates the development problems (test by default); the stage's test file records its split
    and the score file names it; settings naming another split than the test file's are one error line."""
    bench, task = get_benchmark(name), get_task(name)
    assert bench.settings().split == "test" and bench.split(get_benchmark("gsm8k").settings()) == "test"
    files = {split: bench.fetch(bench.settings({"limit": 3, "split": split}), tmp_path / split)
             for split in ("dev", "test")}
    for split, path in files.items():
        assert [p[key] for p in bench.load(path)] == [p[key] for p in task.make_problems(split, 3, 0)]
        assert json.loads(Path(f"{path}.provenance.json").read_text())["split"] == split
    assert not {p[key] for p in bench.load(files["dev"])} & {p[key] for p in bench.load(files["test"])}
    right = [task.target_text(p) for p in task.make_problems("dev", 3, 0)]
    generations = tmp_path / "dev.jsonl"
    generations.write_text("".join(json.dumps({"id": p[ID_KEY], "completion": c}) + "\n"
                                   for p, c in zip(bench.load(files["dev"]), right)))
    one_worker = {"parallel": 1} if name == "code" else {}
    score = score_generations(name, generations, files["dev"], one_worker, tmp_path)
    assert score["split"] == "dev" and score["accuracy"] == 1.0
    stated = score_generations(name, generations, files["dev"], {"split": "dev", **one_worker}, tmp_path)
    assert stated["split"] == "dev"
    with pytest.raises(ValueError, match=r"dev/.*_test.jsonl: the benchmark stage wrote this test file from the 'dev' "
                                         r"split, but the settings name split 'test'"):
        score_generations(name, generations, files["dev"], {"split": "test"}, tmp_path)


def test_read_generations(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"id": 0, "completion": "a"}\n{"task_id": "HumanEval/1", "completion": "b"}\n')
    assert read_generations(path) == {"0": "a", "HumanEval/1": "b"}
    assert read_generations(path, samples=True) == {"0": ["a"], "HumanEval/1": ["b"]}
    repeats = ('{"id": "0", "completion": "a"}', '{"id": "0", "completion": "c"}', '{"id": 0, "completions": ["a"]}')
    for repeat in repeats:
        path.write_text('{"id": 0, "completion": "a"}\n\n' + repeat + "\n")  # the same line too: each id once
        with pytest.raises(ValueError, match=r"g.jsonl:3: id '0' repeats \(lines 1 and 3\); each problem has one"):
            read_generations(path, samples=True)
    path.write_text('{"id": "0", "completions": ["a", "b"]}\n')
    assert read_generations(path, samples=True) == {"0": ["a", "b"]}
    with pytest.raises(ValueError, match="g.jsonl:1: 'completions' .* this one scores one 'completion' per problem"):
        read_generations(path)
    for bad in ('{"id": "0", "completions": []}', '{"id": "0", "completions": ["a", 1]}', '{"id": "0", "text": "a"}'):
        path.write_text("\n" + bad + "\n")
        with pytest.raises(ValueError, match="g.jsonl:2: a generations record needs an 'id' and a string 'completion'"):
            read_generations(path, samples=True)
    path.write_text("\n")
    with pytest.raises(ValueError, match="g.jsonl: no generations"):
        read_generations(path)


# ------------------------------------------------------------------------------------------------ prompts
def test_chat_and_plain_prompts(chat_tok):
    bench, problem = get_benchmark("math500"), {"problem": "What is $1+1$?", "answer": "2"}
    user = "Solve the following math problem. Make sure to put the answer (and only answer) inside \\boxed{}.\n\n" \
           "What is $1+1$?"
    assert bench.prompt(problem, None, bench.settings({"chat": False})) == user
    assert bench.prompt(problem, chat_tok, bench.settings()) == (
        f"<|begin_of_text|><|start|>system\n{THINKING_ON}<|end|>\n<|start|>user\n{user}<|end|>\n<|start|>assistant\n")
    no_system = bench.prompt(problem, chat_tok, bench.settings({"system_prompt": None}))
    assert no_system == render_chat(chat_tok, [{"role": "user", "content": user}]) and "system" not in no_system
    with pytest.raises(ValueError, match="has no chat template.*'chat: false'"):
        bench.prompt(problem, char_tokenizer(), bench.settings())


def test_special_tokens_are_added_only_without_a_leading_bos(chat_tok):
    assert add_special_tokens_for("Question: 1+1", chat_tok)
    assert not add_special_tokens_for(render_chat(chat_tok, [{"role": "user", "content": "hi"}]), chat_tok)


@needs_data
def test_code_prompt_is_evalplus_instruction_prompt(chat_tok):
    from evalplus.provider.utility import make_raw_chat_prompt

    from sbd_core.benchmarks.code import INSTRUCTION_PREFIX, RESPONSE_PREFIX

    bench, problem = get_benchmark("humaneval_plus"), humaneval_rows(1)[0]
    task_prompt = problem["prompt"].strip() + "\n"
    evalplus = make_raw_chat_prompt(task_prompt, INSTRUCTION_PREFIX, RESPONSE_PREFIX, chat_tok)
    assert bench.prompt(problem, chat_tok, bench.settings({"system_prompt": None})) == evalplus
    assert evalplus.endswith("```python\n") and "def has_close_elements" in evalplus
    with_system = bench.prompt(problem, chat_tok, bench.settings())
    assert with_system.startswith(f"<|begin_of_text|><|start|>system\n{THINKING_OFF}<|end|>\n")
    assert with_system.endswith(evalplus[len("<|begin_of_text|>"):])
    assert bench.prompt(problem, None, bench.settings({"chat": False})) == task_prompt


@needs_data
def test_code_program_is_the_sanitized_solution():
    bench, problem = get_benchmark("humaneval_plus"), humaneval_rows(3)[2]  # truncate_number
    body = problem["canonical_solution"]
    chat = (f"def helper():\n    return 0\n\ndef {problem['entry_point']}(number: float) -> float:\n{body}```\n\n"
            "This works because the fractional part is what remains.")
    program = bench.program(problem, chat, bench.settings())
    assert f"def {problem['entry_point']}(" in program and "This works" not in program
    compile(program, "program", "exec")
    plain = bench.program(problem, body + "\nprint('noise')\n", bench.settings({"chat": False}))
    assert plain.startswith(problem["prompt"].strip()[:20]) and "print('noise')" not in plain
    synthetic = get_benchmark("code")
    task_problem = get_task("code").make_problems("test", 1, 0)[0]
    assert synthetic.program(task_problem, "    return 1\n", synthetic.settings()) == task_problem["prompt"] + \
        "    return 1\n"


# ------------------------------------------------------------------------------------------------ math judge
def test_final_answer_text():
    assert final_answer_text("<think>a \\boxed{1}</think>\nSo \\boxed{2}") == "\nSo \\boxed{2}"
    assert final_answer_text("<think>still thinking \\boxed{1}") == ""
    assert final_answer_text("plain \\boxed{3}") == "plain \\boxed{3}"


@pytest.mark.parametrize("gold, response, ok", [
    ("\\frac{14}{3}", "so the answer is \\boxed{\\dfrac{14}{3}}.", True),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "Hence $\\boxed{(3, \\frac{\\pi}{2})}$.", True),
    ("10\\%", "The rate is \\boxed{10\\%}.", True),
    ("5", "The answer is \\boxed{5.0}", True),
    ("10\\%", "The rate is \\boxed{11\\%}.", False),
    ("70", "<think>\\boxed{70}</think> I conclude \\boxed{71}", False),
    ("70", "<think>I think \\boxed{70} but", False),
    ("70", "", False),
])
def test_math_verify_judge(gold, response, ok):
    assert math_verify_results({"answer": gold}, [response]) == {"math_verify": int(ok)}


def test_math_answer_reports_what_was_read():
    assert math_answer("<think>x</think> so \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert math_answer("no answer here") is None


def test_every_replayed_lm_eval_task_declares_zero_shots():
    """The score stage runs lm-eval's ``evaluate``, not ``simple_evaluate`` (``LmEvalBenchmark.score``), which would
    give a task without ``num_fewshot`` zero shots and seed its few-shot sampler: every shipped task states 0."""
    tasks = {b.task for b in BENCHMARKS.values() if isinstance(b, LmEvalBenchmark)}
    assert tasks >= {"sbd_synth_math", "sbd_gsm8k", "sbd_math500", "sbd_aime25"}
    assert {task: task_config(task).get("num_fewshot") for task in tasks} == dict.fromkeys(tasks, 0)
