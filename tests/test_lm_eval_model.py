"""lm-eval adapters: SBDLM (registry, string params, generate_until vs BlockDecoder, NTP scoring, runs through
lm-eval in-process and from its command line)."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from lm_eval.api.instance import Instance

from conftest import char_tokenizer, tiny_model
from oracles import TIE_BOUND, top2_gap
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_block_decoder
from sbd_core.benchmarks import get_benchmark
from sbd_core.benchmarks.lm_eval_task import write_lm_eval_task
from sbd_core.lm_eval_adapter.model import ReplayLM, SBDLM, coerce_solver_params
from sbd_core.mask_token import setup_mask_token
from sbd_core.decoding.peers import PeerDecoder
from sbd_core.decoding.solvers import get_solver
from sbd_core.tasks import get_task

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A saved tiny Llama with the SBD mask token recorded, plus the character tokenizer."""
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok))
    setup_mask_token(tok, model)
    path = tmp_path_factory.mktemp("ckpt")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def lm(ckpt):
    """SBDLM built the way lm-eval builds it from a model_args string."""
    from lm_eval.api.registry import get_model

    args = f"pretrained={ckpt},solver=eb,gamma=0.1,block_size=4,batch_size=2,max_gen_toks=16"
    return get_model("sbd").create_from_arg_string(args, {"batch_size": None, "device": None})


def gen_request(context, **gen_kwargs):
    return Instance("generate_until", {}, (context, gen_kwargs), 0)


def ll_request(context, continuation):
    return Instance("loglikelihood", {}, (context, continuation), 0)


# ------------------------------------------------------------------------------------------------ registry / params
def test_registry_names_and_builtins_still_visible():
    from lm_eval.api.registry import get_model

    assert get_model("sbd") is SBDLM and get_model("sbd-replay") is ReplayLM
    assert get_model("dummy").__name__ == "DummyLM"  # registering ours must not hide lm-eval's built-in table


def test_lm_eval_does_not_discover_entry_points():
    code = ("import lm_eval.api.registry as r, lm_eval.models; "
            "print('sbd' in r.model_registry, 'sbd_core.lm_eval_adapter.model' in __import__('sys').modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]


def test_string_params_are_converted(lm):
    assert lm.solver.name == "eb" and lm.solver.params["gamma"] == 0.1 and isinstance(lm.solver.params["gamma"], float)
    assert (lm.block_size, lm.batch_size, lm.max_gen_toks) == (4, 2, 16)
    assert coerce_solver_params("topk", {"n": "3", "temperature": "0.5", "proxy": " entropy", "seed": 2.0}) == {
        "n": 3, "temperature": 0.5, "proxy": "entropy", "seed": 2}
    assert coerce_solver_params("eb", {"gamma": "inf"}) == {"gamma": float("inf")}
    assert type(coerce_solver_params("factor", {"f": 1})["f"]) is float
    assert coerce_solver_params("ntp", {"temperature": "0.7", "seed": "3"}) == {"temperature": 0.7, "seed": 3}
    assert coerce_solver_params("left_to_right", {"n": "2"}) == {"n": 2}


@pytest.mark.parametrize("solver, params, match", [
    ("eb", {"gama": "0.1"}, r"unknown parameter 'gama' for solver 'eb'; allowed: \['first_token', 'gamma', 'order', 'proxy'"),
    ("eb", {"gamma": "abc"}, "gamma must be a number, got 'abc'"),
    ("eb", {"gamma": True}, "gamma must be a number"),
    ("topk", {"n": "2.5"}, "n must be an integer, got 2.5"),
    ("topk", {"proxy": None}, "proxy must be a string"),
    ("nope", {}, "unknown solver 'nope'"),
    ("ntp", {"gamma": "0.1"}, r"unknown parameter 'gamma' for solver 'ntp'; allowed: \['seed', 'temperature'\]"),
])
def test_bad_solver_params(solver, params, match):
    with pytest.raises(ValueError, match=match):
        coerce_solver_params(solver, params)


def test_ntp_is_one_vocabulary(ckpt):
    """``solver=ntp`` (the workflow's name) and ``mode=ntp`` both mean NTP decoding; contradictions are errors."""
    for args in ({"solver": "ntp"}, {"mode": "ntp"}, {"mode": "ntp", "solver": "ntp"}):
        lm = SBDLM(str(ckpt), **args)
        assert lm.mode == "ntp" and lm.sampler.tag == "ntp" and lm.sampler.family == "ntp"
    sampled = SBDLM(str(ckpt), solver="ntp", temperature="0.7", seed="2").sampler
    assert sampled.params == {"temperature": 0.7, "seed": 2} and sampled.tag == "ntp-t0.7-s2"
    default = SBDLM(str(ckpt))
    assert (default.mode, default.sampler.tag) == ("sbd", "eb-entropy-g0.1")
    assert SBDLM(str(ckpt), mode="sbd", solver="left_to_right").sampler.tag == "l2r-1"
    with pytest.raises(ValueError, match="mode='sbd' contradicts solver='ntp'"):
        SBDLM(str(ckpt), mode="sbd", solver="ntp")
    with pytest.raises(ValueError, match="mode='ntp' contradicts solver='eb'"):
        SBDLM(str(ckpt), mode="ntp", solver="eb")
    with pytest.raises(ValueError, match=r"unknown parameter 'gamma' for solver 'ntp'"):
        SBDLM(str(ckpt), solver="ntp", gamma="0.1")
    with pytest.raises(ValueError, match=r"unknown parameter 'gamma' for solver 'ntp'"):
        SBDLM(str(ckpt), mode="ntp", gamma=0.1)


def test_peers_answer_through_generate(ckpt):
    """``solver=hf_generate`` / ``solver=prompt_lookup`` (``mode=hf``): the training-free peers, decoded by
    :class:`PeerDecoder` with the request's stop strings and length."""
    lm = SBDLM(str(ckpt), mode="hf", solver="prompt_lookup", tokens="4", batch_size=2)
    assert (lm.mode, lm.solver, lm.sampler.tag) == ("ntp", None, "prompt-lookup-4")
    assert SBDLM(str(ckpt), solver="hf_generate").sampler.mode == "hf"
    prompts = ["Question: 12+3\nAnswer:", "hi"]
    config = DecodeConfig(mode="ntp", max_new_tokens=8, batch_size=2)
    free = PeerDecoder(lm.model, lm.tokenizer, config, lm.sampler).generate(prompts)
    stop = free[0].text[3]  # a character the first completion really produces: the cut must take effect
    out = lm.generate_until([gen_request(p, until=[stop], max_gen_toks=8) for p in prompts], disable_tqdm=True)
    ref = PeerDecoder(lm.model, lm.tokenizer, replace(config, stop_strings=(stop,)), lm.sampler).generate(prompts)
    assert out == [g.text for g in ref] and out[0] == free[0].text.split(stop)[0]
    assert [s["nfe"] for s in lm.last_stats] == [g.nfe for g in ref] and lm.last_stats[0]["stop_reason"] == "stop_string"
    with pytest.raises(ValueError, match="mode='hf' contradicts solver='eb'"):
        SBDLM(str(ckpt), mode="hf", solver="eb")


def test_constructor_errors(ckpt, tmp_path):
    with pytest.raises(ValueError, match=r"gamma=-1.0 is out of range"):
        SBDLM(str(ckpt), gamma="-1")
    with pytest.raises(ValueError, match="block_size must be an integer"):
        SBDLM(str(ckpt), block_size="big")
    with pytest.raises(ValueError, match="mode must be"):
        SBDLM(str(ckpt), mode="diffusion")
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok))  # no mask token recorded
    bare = tmp_path / "bare"
    model.save_pretrained(bare), tok.save_pretrained(bare)
    with pytest.raises(ValueError, match="sbd_mask_token_id"):
        SBDLM(str(bare))
    assert SBDLM(str(bare), solver="ntp").mode == "ntp"  # NTP needs no mask token


# ------------------------------------------------------------------------------------------------ generation
@pytest.mark.parametrize("mode", ["sbd", "ntp"])
def test_generate_until_equals_block_decoder(ckpt, lm, mode):
    # Exact equality is sound here: both sides decode the same prompts in the same batches with the same model object,
    # so they run the same float operations on any machine (no second code path whose rounding could flip a choice).
    model = lm if mode == "sbd" else SBDLM(str(ckpt), solver="ntp", batch_size=2)
    solver = get_solver("eb", gamma=0.1) if mode == "sbd" else get_solver("left_to_right")
    prompts = ["Question: 12+3\nAnswer:", "hi", "a longer prompt", "xyz"]

    def decode(ps, stops, max_new):
        config = DecodeConfig(mode=mode, block_size=4, max_new_tokens=max_new, stop_strings=stops, batch_size=2)
        return make_block_decoder(model.model, model.tokenizer, config, solver).generate(ps)

    free = decode(prompts[:2], (), 12)
    stop = free[0].text[5]  # a character the first completion really produces: the cut must take effect
    requests = [gen_request(prompts[0], until=[stop], max_gen_toks=12), gen_request(prompts[2], max_gen_toks=5),
                gen_request(prompts[1], until=stop, max_gen_toks=12), gen_request(prompts[3], until=[], max_gen_toks=5)]
    out = model.generate_until(requests, disable_tqdm=True)
    ref_a, ref_b = decode(prompts[:2], (stop,), 12), decode([prompts[2], prompts[3]], (), 5)
    assert out == [ref_a[0].text, ref_b[0].text, ref_a[1].text, ref_b[1].text]
    assert out[0] == free[0].text.split(stop)[0] and len(out[0]) <= 5
    assert all(stop not in text for text in (out[0], out[2]))
    stats = model.last_stats
    assert [s["nfe"] for s in stats] == [ref_a[0].nfe, ref_b[0].nfe, ref_a[1].nfe, ref_b[1].nfe]
    assert stats[0]["stop_reason"] == "stop_string"
    assert all(s["num_tokens"] <= 5 for s in (stats[1], stats[3]))
    assert all(s["stop_reason"] == "length" and s["num_tokens"] == 5 for s in (stats[1], stats[3])
               if s["stop_reason"] != "eos")
    if mode == "ntp":
        assert all(s["nfe"] == s["num_tokens"] for s in stats)


def test_generate_until_rejects_sampling_kwargs(lm):
    with pytest.raises(ValueError, match="set temperature/seed in model_args"):
        lm.generate_until([gen_request("hi", do_sample=True)])


# ------------------------------------------------------------------------------------------------ scoring
def hand_logprob(model, ids, n_cont):
    """Sum of log-probs of the last ``n_cont`` of ``ids`` from one unbatched causal forward, the greedy flag, and the
    margin that decides the flag (the closest call if greedy, else the clearest miss), in logits."""
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
    rows, target = logp[len(ids) - 1 - n_cont:len(ids) - 1], torch.tensor(ids[len(ids) - n_cont:])
    chosen = rows.gather(1, target[:, None])[:, 0]
    lead = chosen - rows.scatter(1, target[:, None], -torch.inf).max(-1).values  # > 0 where the target is the argmax
    greedy = bool((lead > 0).all())
    return chosen.sum().item(), greedy, float(lead.min() if greedy else -lead.min())


def test_loglikelihood_equals_hand_computation(lm):
    tok, model = lm.tokenizer, lm.model
    with torch.no_grad():
        last = model(input_ids=torch.tensor([tok("hello")["input_ids"]])).logits[0, -1]
    assert top2_gap(last) > TIE_BOUND  # decisive: the batched scorer must find the same greedy token
    greedy = tok.convert_ids_to_tokens(last.argmax().item())
    cases = [("Question: 1+1", " 2"), ("ab ", "cd"), ("", "xyz"), ("hello", greedy)]
    got = lm.loglikelihood([ll_request(c, x) for c, x in cases])
    enc = lambda s: tok(s)["input_ids"]
    want = [hand_logprob(model, enc("Question: 1+1 2"), 2), hand_logprob(model, enc("ab cd"), 3),
            hand_logprob(model, [lm.prefix_token_id] + enc("xyz"), 3),
            hand_logprob(model, enc("hello") + [last.argmax().item()], 1)]
    for (lp, is_greedy), (ref_lp, ref_greedy, margin) in zip(got, want):
        assert lp == pytest.approx(ref_lp, abs=1e-4)
        assert is_greedy == ref_greedy or margin < TIE_BOUND  # the batched forward may flip only a near-tie
    assert got[3][1] is True and got[0][0] < 0


def test_loglikelihood_rolling_windows(ckpt, lm):
    text = "rolling windows test"  # 20 characters = 20 tokens
    req = Instance("loglikelihood_rolling", {}, (text,), 0)
    ids = [lm.prefix_token_id] + lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert lm.loglikelihood_rolling([req])[0] == pytest.approx(hand_logprob(lm.model, ids, 20)[0], abs=1e-4)
    short = SBDLM(str(ckpt), max_length=8, batch_size=3)  # windows: predict 0-7, 8-15, then 16-19 with 8 inputs
    total = 0.0
    for a in range(0, 20, 8):
        b = min(a + 8, 20)
        total += hand_logprob(lm.model, ids[max(0, b - 8):b + 1], b - a)[0]
    assert short.loglikelihood_rolling([req])[0] == pytest.approx(total, abs=1e-4)
    assert short.loglikelihood_rolling([req])[0] != pytest.approx(lm.loglikelihood_rolling([req])[0], abs=1e-3)


# ------------------------------------------------------------------------------------------------ through lm-eval
# (ReplayLM and the benchmarks' score path are tested in tests/test_benchmarks_scoring.py)
def synthetic_math_task(problems, out_dir):
    """The synthetic math benchmark's lm-eval task over ``problems`` (8 new tokens), written into ``out_dir``; its
    name."""
    bench = get_benchmark("math")
    settings = bench.settings({"max_new_tokens": 8})
    return write_lm_eval_task(bench, bench.problems(problems, "generated"), settings, out_dir)


def test_simple_evaluate_with_sbd_model_string(ckpt, lm, tmp_path):
    import lm_eval
    from lm_eval.tasks import TaskManager

    problems = get_task("math").make_problems("test", 2, 0)
    task = synthetic_math_task(problems, tmp_path)
    res = lm_eval.simple_evaluate(
        model="sbd", model_args=f"pretrained={ckpt},solver=eb,gamma=0.1,block_size=4,max_gen_toks=8,batch_size=1",
        tasks=[task], task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
        num_fewshot=0, bootstrap_iters=0, log_samples=True)
    samples = sorted(res["samples"][task], key=lambda s: s["doc_id"])
    prompts = [get_task("math").prompt_text(p) for p in problems]
    assert [s["arguments"][0][0] for s in samples] == prompts
    # batch_size=1 on both sides: each prompt is decoded alone, the same float operations whatever order lm-eval uses
    config = DecodeConfig(block_size=4, max_new_tokens=8, stop_strings=get_task("math").stop_sequences, batch_size=1)
    ref = make_block_decoder(lm.model, lm.tokenizer, config, get_solver("eb", gamma=0.1)).generate(prompts)
    assert [s["resps"][0][0] for s in samples] == [g.text for g in ref]
    assert res["results"][task]["exact_match,none"] == 0.0  # random weights never write "#### N"


@pytest.mark.slow  # about 20 s; the default tier runs the sbd model through lm-eval in-process
def test_lm_eval_command_line_runs_the_sbd_model(ckpt, tmp_path):
    problems = get_task("math").make_problems("test", 2, 0)
    task = synthetic_math_task(problems, tmp_path / "tasks")
    cmd = [sys.executable, "-m", "sbd_core.lm_eval_adapter.cli", "run", "--model", "sbd",
           "--model_args", f"pretrained={ckpt},solver=ntp,max_gen_toks=8",  # the workflow's name for NTP
           "--tasks", task, "--include_path", str(tmp_path / "tasks"), "--output_path", str(tmp_path / "out")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, **OFFLINE})
    assert out.returncode == 0, out.stderr[-2000:]
    results = list((tmp_path / "out").rglob("results*.json"))
    assert results and json.loads(results[0].read_text())["results"][task]["exact_match,none"] == 0.0
