"""Benchmark scoring through the DAG's path (``Benchmark.score``: lm-eval replaying stored generations by problem id,
or the code scorer), on real test sets, and its agreement with lm-eval's own run of the same task with the ``sbd``
model (prompts byte-identical, same metric on the same generations), in-process and from lm-eval's command line."""

import json
import os
import subprocess
import sys

import pytest
import torch
from lm_eval.api.instance import Instance

from conftest import char_tokenizer, tiny_model
from sbd_core.benchmarks import ID_KEY, get_benchmark
from sbd_core.pipeline import run_score
from sbd_core.benchmarks.lm_eval_task import metric_name, write_lm_eval_task
from sbd_core.benchmarks.replay import MissingGenerationError, ReplayLM
from sbd_core.tasks import get_task
from test_benchmarks import CHAT_TEMPLATE, SHARED, needs_data

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


def shifted(texts):
    """Every problem gets the next problem's answer."""
    return texts[1:] + texts[:1]


def by_id(problems, texts):
    return {p[ID_KEY]: t for p, t in zip(problems, texts)}


# ------------------------------------------------------------------------------------------------ real test sets
@needs_data
def test_gsm8k_reference_solutions_score_full_marks(tmp_path, capsys):
    bench = get_benchmark("gsm8k")
    data = SHARED / "gsm8k_test.jsonl"
    problems = bench.load(data)
    solutions = [p["answer"] for p in problems]  # worked solutions ending "#### N", 14 with a thousands comma
    gens = tmp_path / "gens.jsonl"
    gens.write_text("".join(json.dumps({"id": p[ID_KEY], "completion": s}) + "\n" for p, s in zip(problems, solutions)))
    result = run_score("gsm8k", gens, tmp_path / "score.json", data=data)  # python -m sbd_core score
    assert result["accuracy"] == 1.0 == result["metrics"]["exact_match/flexible-extract"] and result["n"] == 1319
    assert result["metrics"]["exact_match/strict-match"] == 0.0  # no "The final answer is N" in the references
    assert json.loads((tmp_path / "score.json").read_text())["per_problem"]["5"] == {"correct": True,
                                                                                     "extracted": "64"}
    assert "gsm8k: accuracy 1.0000 on 1319 problems" in capsys.readouterr().out
    wrong = bench.score(problems, by_id(problems, shifted(solutions)), tmp_path / "w", bench.settings())
    assert wrong["accuracy"] <= 0.03


@needs_data
@pytest.mark.slow
def test_math500_reference_answers_score_full_marks(tmp_path):
    """Even problems: the answer boxed inside a sentence after a thinking block that boxes a decoy; odd problems:
    the dataset's worked solution. math-verify must accept all 500 (189 are LaTeX, not integers)."""
    bench = get_benchmark("math500")
    problems = bench.load(SHARED / "math500_test.jsonl")
    texts = [f"<think>\nIs it \\boxed{{0}}?\n</think>\nSo the answer is $\\boxed{{{p['answer']}}}$, as claimed."
             if i % 2 == 0 else p["solution"] for i, p in enumerate(problems)]
    result = bench.score(problems, by_id(problems, texts), tmp_path, bench.settings())
    assert result["accuracy"] == 1.0 and result["n"] == 500
    assert result["per_problem"]["0"]["correct"] and result["per_problem"]["2"]["extracted"] == "\\frac{14}{3}"
    assert bench.score(problems, by_id(problems, shifted(texts)), tmp_path, bench.settings())["accuracy"] <= 0.03


@needs_data
def test_aime25_reference_answers_score_full_marks(tmp_path):
    bench = get_benchmark("aime25")
    problems = bench.load(SHARED / "aime25_test.jsonl")
    texts = [f"<think>Try \\boxed{{1000}}.</think>The answer is \\boxed{{{p['answer']}}}." for p in problems]
    assert bench.score(problems, by_id(problems, texts), tmp_path, bench.settings())["accuracy"] == 1.0
    assert bench.score(problems, by_id(problems, shifted(texts)), tmp_path, bench.settings())["accuracy"] <= 0.04


def test_synthetic_math_matches_the_task_extraction_from_another_cwd(tmp_path, monkeypatch):
    bench, task = get_benchmark("math"), get_task("math")
    problems = bench.problems(task.make_problems("test", 7, 3), "generated")
    answers = [p["answer"] for p in problems]
    completions = [f" 1+1: 2. So {answers[0]}.\n#### {answers[0]}", f" wrong\n#### {int(answers[1]) + 1}",
                   " I do not know.", f" So\n#### {answers[3]}", f" close: ####{answers[4]}",
                   f" negative\n#### -{answers[5]}", f" #### {answers[6]} then #### 0"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = bench.score(problems, by_id(problems, completions), tmp_path / "work", bench.settings())
    direct = [task.extract_answer(c) == a for c, a in zip(completions, answers)]
    assert direct == [True, False, False, True, False, False, True]
    assert result["accuracy"] == pytest.approx(3 / 7) == result["metrics"]["exact_match"]
    assert result["per_problem"] == {p[ID_KEY]: {"correct": ok, "extracted": task.extract_answer(c)}
                                     for p, c, ok in zip(problems, completions, direct)}
    assert result["lm_eval_version"] == "0.4.13" and not list(elsewhere.iterdir())
    json.dumps(result, allow_nan=False)  # plain Python values only
    with pytest.raises(ValueError, match="1 of 7 problems have no completion"):
        bench.score(problems, by_id(problems[1:], completions[1:]), tmp_path / "work", bench.settings())


# ------------------------------------------------------------------------------------------------ replay model
def test_replay_answers_by_problem_id_and_cuts_at_stops(tmp_path):
    gens = tmp_path / "g.jsonl"
    gens.write_text('{"id": "0", "completion": " a #### 1"}\n{"id": "HumanEval/3", "completion": " b\\n\\nQ: c"}\n')
    replay = ReplayLM(str(gens))
    def request(doc, gen_kwargs, doc_id):
        return Instance("generate_until", doc, ("ctx", gen_kwargs), 0, metadata=("task", doc_id, 1))

    requests = [request({"task_id": "HumanEval/3"}, {"until": ["\n\n"]}, 9), request({"question": "q"}, {}, 0),
                request({ID_KEY: "0", "task_id": "x"}, {"until": []}, 5)]
    assert replay.generate_until(requests) == [" b", " a #### 1", " a #### 1"]
    missing = request({}, {}, 7)
    with pytest.raises(MissingGenerationError, match=r"1 of 2 problems have no stored completion .* first missing "
                                                     r"id: '7'") as err:
        replay.generate_until([requests[0], missing])
    assert isinstance(err.value, KeyError)
    with pytest.raises(NotImplementedError, match="only replays stored generations"):
        replay.loglikelihood([Instance("loglikelihood", {}, ("a", "b"), 0)])


# ------------------------------------------------------------------------------------------------ lm-eval agreement
def scripted_model(tok, script: str | list[int]):
    """A tiny Llama whose greedy continuation of any text that ends in a newline is ``script`` (text, one token per
    character, or token ids; no token twice) and then EOS.

    Every layer's output projections are zero, so each position's logits depend on its own token only (a bigram table
    over ``"\n" + script + EOS``, one hidden direction per step); the chosen token leads the rest by 80 logits, so the
    decoding decisions cannot tie. Decoded in NTP mode: masked positions would read the mask token's row instead."""
    model = tiny_model("llama", len(tok), context=2048)
    ids = [tok.convert_tokens_to_ids(c) for c in script] if isinstance(script, str) else list(script)
    chain = [tok.convert_tokens_to_ids("\n")] + ids + [tok.eos_token_id]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.zero_()
        model.lm_head.weight.zero_()
        for step, (token, following) in enumerate(zip(chain, chain[1:])):
            model.model.embed_tokens.weight[token, step] = 1.0
            model.lm_head.weight[following, step] = 10.0
    return model


@pytest.fixture(scope="module")
def chat_ckpt(tmp_path_factory):
    """A saved scripted model answering "18" (GSM8K test problem 0's answer; problems 1 and 2 have others), with a
    tokenizer that carries a chat template."""
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    path = tmp_path_factory.mktemp("chat_ckpt")
    scripted_model(tok, "18").save_pretrained(path)
    tok.save_pretrained(path)
    return path


def lm_eval_view(results, task, headline):
    """From lm-eval's results with logged samples: ``{id: (prompt, response)}``, ``{id: correct}`` under the
    ``headline`` metric and the metrics (named as the DAG names them)."""
    def context(args):  # in memory a list of (context, gen_kwargs); in a samples file {"gen_args_0": {"arg_0": ..}}
        return args["gen_args_0"]["arg_0"] if isinstance(args, dict) else args[0][0]

    metric, filter_name = headline.split(",")
    logged = results["samples"][task]
    samples = {s["doc"][ID_KEY]: (context(s["arguments"]), s["resps"][0][0]) for s in logged}
    correct = {s["doc"][ID_KEY]: bool(s[metric]) for s in logged if s["filter"] == filter_name}
    metrics = {metric_name(k): v for k, v in results["results"][task].items() if "," in k and "_stderr" not in k}
    return samples, correct, metrics


def check_agreement(bench, problems, settings, tok, lm_eval_results, work_dir):
    """lm-eval's prompts are the benchmark's; its responses, scored by the DAG's path, give its metrics."""
    samples, correct, metrics = lm_eval_view(lm_eval_results, bench.task, bench.headline)
    assert {i: prompt for i, (prompt, _) in samples.items()} == {
        p[ID_KEY]: bench.prompt(p, tok, settings) for p in problems}
    assert all(prompt.count("<|begin_of_text|>") == 1 for prompt, _ in samples.values())
    dag = bench.score(problems, {i: response for i, (_, response) in samples.items()}, work_dir, settings)
    assert dag["metrics"] == metrics and {i: r["correct"] for i, r in dag["per_problem"].items()} == correct
    return samples, dag


def test_sbd_model_renders_chats_and_encodes_one_bos(chat_ckpt, monkeypatch):
    """``SBDLM.apply_chat_template`` is the benchmarks' renderer; a rendered chat (which starts with BOS) is encoded
    without adding special tokens, a plain prompt with them; without a chat template the error says what to do."""
    from sbd_core.decoding.setup import Generation
    from sbd_core.lm_eval_adapter import model as lm_eval_model

    lm = lm_eval_model.SBDLM(str(chat_ckpt), mode="ntp")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    chat = lm.apply_chat_template(messages)
    assert chat == "<|begin_of_text|><|start|>system\ns<|end|>\n<|start|>user\nu<|end|>\n<|start|>assistant\n"
    assert lm.tokenizer_name and lm.chat_template(True) == CHAT_TEMPLATE
    seen = {}

    class Recorder:
        def __init__(self, model, tokenizer, config, spec):
            self.config = config

        def generate(self, prompts, progress=False):
            seen.update({p: self.config.add_special_tokens for p in prompts})
            return [Generation("x", [5], 1, "length", 0.0) for _ in prompts]

    monkeypatch.setattr(lm_eval_model, "make_decoder", Recorder)
    requests = [Instance("generate_until", {}, (text, {"max_gen_toks": 1}), 0) for text in (chat, "Question: 1")]
    assert lm.generate_until(requests, disable_tqdm=True) == ["x", "x"]
    assert seen == {chat: False, "Question: 1": True}
    lm.tokenizer.chat_template = None
    with pytest.raises(ValueError, match="has no chat template"):
        lm.apply_chat_template(messages)


@needs_data
@pytest.mark.parametrize("name, data", [("gsm8k", "gsm8k_test.jsonl"), ("math500", "math500_test.jsonl")])
def test_sbd_model_through_lm_eval_agrees_with_the_dag(chat_ckpt, tmp_path, name, data):
    """lm-eval decodes with the ``sbd`` model and ``apply_chat_template``; its prompts are the benchmark's prompts
    (system prompt, chat template, one BOS) and its generations, replayed through the DAG's score path, give the same
    metrics and per-problem verdicts."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from sbd_core.lm_eval_adapter.model import SBDLM

    bench = get_benchmark(name)
    settings = bench.settings({"limit": 3, "max_new_tokens": 12})
    problems = bench.load(SHARED / data)[:3]
    write_lm_eval_task(bench, problems, settings, tmp_path / "task")
    lm = SBDLM(str(chat_ckpt), mode="ntp", batch_size=3)
    results = lm_eval.simple_evaluate(
        model=lm, tasks=[bench.task], apply_chat_template=True, bootstrap_iters=0, log_samples=True,
        task_manager=TaskManager(include_path=str(tmp_path / "task"), include_defaults=False))
    samples, dag = check_agreement(bench, problems, settings, lm.tokenizer, results, tmp_path / "dag")
    assert all(response == "18" for _, response in samples.values())
    if name == "gsm8k":
        assert dag["accuracy"] == pytest.approx(1 / 3) and dag["per_problem"]["0"]["correct"]


@needs_data
@pytest.mark.slow
def test_lm_eval_command_line_run_agrees_with_the_dag(chat_ckpt, tmp_path):
    """The same agreement through lm-eval's own command line (our wrapper only registers the models)."""
    bench = get_benchmark("gsm8k")
    settings = bench.settings({"limit": 3, "max_new_tokens": 10})
    problems = bench.load(SHARED / "gsm8k_test.jsonl")[:3]
    write_lm_eval_task(bench, problems, settings, tmp_path / "task")
    cmd = [sys.executable, "-m", "sbd_core.lm_eval_adapter.cli", "run", "--model", "sbd",
           "--model_args", f"pretrained={chat_ckpt},mode=ntp", "--tasks", bench.task,
           "--include_path", str(tmp_path / "task"), "--apply_chat_template", "--log_samples",
           "--output_path", str(tmp_path / "out")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, **OFFLINE})
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    logged = [json.loads(line) for path in (tmp_path / "out").rglob("samples_*.jsonl")
              for line in path.read_text().splitlines()]
    tok = char_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    _, dag = check_agreement(bench, problems, settings, tok, {"samples": {bench.task: logged},
                                                              "results": results["results"]}, tmp_path / "dag")
    assert dag["accuracy"] == pytest.approx(1 / 3)


# ------------------------------------------------------------------------------------------------ code
def test_code_wrapper_scores_chat_answers_with_the_code_scorer(tmp_path):
    """Canonical solutions written as a chat model writes them (a fenced script with an import and chatter) pass;
    the same answers shifted by one problem fail. HumanEval-schema problems of the synthetic code task stand in for
    HumanEval+ (the real copy lacks the plus inputs)."""
    bench = get_benchmark("humaneval_plus")
    problems = bench.problems(get_task("code").make_problems("test", 6, 0), "generated")
    answers = [f"import math\n\n{p['prompt']}{p['canonical_solution']}```\n\nThis passes the examples above."
               for p in problems]
    settings = bench.settings({"parallel": 2, "timeout_s": 300})
    result = bench.score(problems, by_id(problems, answers), tmp_path, settings)
    assert result["accuracy"] == 1.0 == result["metrics"]["pass@1_base"] and result["n"] == 6
    assert "This passes" not in result["per_problem"][problems[0][ID_KEY]]["program"]
    wrong = bench.score(problems, by_id(problems, shifted(answers)), tmp_path, settings)
    assert wrong["accuracy"] <= 1 / 6  # two problems of one family may share an answer


@needs_data
def test_mbpp_plus_canonical_solutions_pass(tmp_path):
    bench = get_benchmark("mbpp_plus")
    problems = bench.load(SHARED / "mbppplus_prerelease.jsonl")[:40]
    answers = [f"Here is the code:\n```python\n{p['canonical_solution']}\n```\n" for p in problems]
    settings = bench.settings({"parallel": 2, "timeout_s": 600})
    assert bench.score(problems, by_id(problems, answers), tmp_path, settings)["accuracy"] == 1.0
    assert bench.score(problems, by_id(problems, shifted(answers)), tmp_path, settings)["accuracy"] <= 0.05
