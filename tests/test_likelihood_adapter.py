"""The ``sbd`` lm-eval model scores log-likelihoods as lm-eval's own ``hf`` model does, on the same checkpoint and
requests, so Table 2 measures the model and not our adapter.

Tiny random Llama (BPE with a BOS, like Llama-3.1's) and Qwen-3 (no BOS, like Qwen-3's) checkpoints are saved to a tmp
dir and loaded by both models from there. Log-likelihoods must agree per request within 1e-4 (float32; batches of
different sizes and padding change the sums by ~1e-6). The greedy flags must be equal wherever the flag is decided by
more than ``TIE_BOUND`` in logits (computed from one unbatched forward over the ``hf`` model's own token ids): a
near-tie may flip between two batchings on another CPU, so it is never compared.
"""

from __future__ import annotations

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM

from likelihood_fixtures import TEXTS, save_checkpoint, write_arc_copy
from oracles import TIE_BOUND
from sbd_core.lm_eval_adapter.model import SBDLM

ATOL = 1e-4

CASES = [
    ("Question: Which gas do plants take in from the air?\nAnswer:", " carbon dioxide"),
    ("Question: Which gas do plants take in from the air?\nAnswer: ", "oxygen"),  # trailing space moves over
    ("Question: Which gas do plants take in from the air?\nAnswer:  \n", " nitrogen gas"),  # trailing whitespace
    ("", "Question: Which"),  # empty context: scored after the prefix token (BOS, else EOS)
    ("", " the air"),
    ("A man is sitting on a roof.", " He starts pulling up roofing tiles and throws them down."),
    ("Sarah was a much better surgeon than Maria so", " Maria always got the harder cases."),
    ("def f(x):\n", "    return x * 3 + 7\n"),
    ("12+3=", "15"),
    ("Caf\u00e9 au lait", " \u00e9t\u00e9"),
    ("The following are multiple choice questions (with answers) about science.\n\n" * 3, "Answer: A"),
]


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def checkpoint(request, tmp_path_factory):
    return save_checkpoint(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def models(checkpoint):
    """lm-eval's own HF model and ours on the same folder, with different batch sizes."""
    hf = HFLM(pretrained=str(checkpoint), device="cpu", dtype="float32", batch_size=4)
    ours = SBDLM(str(checkpoint), solver="ntp", batch_size=3)
    return hf, ours


def request(context, continuation, i=0):
    return Instance("loglikelihood", {}, (context, continuation), i)


def hf_token_ids(hf: HFLM, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """The (context, continuation) token ids the ``hf`` model scores: its own encoding, its empty-context rule."""
    if context == "":
        cont = hf.tok_encode(continuation, add_special_tokens=False)
        return ([hf.prefix_token_id], cont) if hf.prefix_token_id != cont[0] else (cont[:1], cont[1:])
    return hf._encode_pair(context, continuation)


@torch.no_grad()
def greedy_margin(model, ctx: list[int], cont: list[int]) -> float:
    """How clearly the greedy flag of (ctx, cont) is decided, in logits, from one unbatched forward: if every
    continuation token is the argmax, the smallest lead over the runner-up; otherwise the largest deficit."""
    ids = torch.tensor([(ctx + cont)[:-1]])
    logits = model(input_ids=ids).logits[0, -len(cont):].float()
    target = torch.tensor(cont)
    chosen = logits.gather(1, target[:, None])[:, 0]
    lead = chosen - logits.scatter(1, target[:, None], -torch.inf).max(-1).values
    return float(lead.min()) if bool((lead > 0).all()) else float(-lead.min())


def greedy_cases(hf: HFLM, limit: int = 8) -> list[tuple[str, str]]:
    """(context, the model's greedy next token as text) for word-boundary prefixes of the fixture texts where that
    text re-encodes to the same token after the context, so some requests have a true greedy flag."""
    contexts = sorted({" ".join(text.split(" ")[:n]) for text in TEXTS for n in range(1, len(text.split(" ")))})
    cases = []
    for context in contexts:
        ids = hf.tok_encode(context)
        with torch.no_grad():
            token = int(hf.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
        text = hf.tokenizer.decode([token])
        if text.strip() and text.isprintable() and hf_token_ids(hf, context, text)[1] == [token]:
            cases.append((context, text))
            if len(cases) == limit:
                break
    return cases


def compare(hf: HFLM, ours: SBDLM, cases, got_hf, got_ours) -> int:
    """Assert equal log-likelihoods and decisive greedy flags; return how many true flags were compared."""
    true_flags = 0
    for (context, continuation), (lp_hf, greedy_hf), (lp_ours, greedy_ours) in zip(cases, got_hf, got_ours):
        assert lp_ours == pytest.approx(lp_hf, abs=ATOL), (context, continuation)
        ctx, cont = hf_token_ids(hf, context, continuation)
        if abs(greedy_margin(hf.model, ctx, cont)) > TIE_BOUND:
            assert greedy_ours == greedy_hf, (context, continuation)
            true_flags += greedy_hf
    return true_flags


def test_loglikelihood_equals_lm_evals_hf_model(models):
    hf, ours = models
    cases = CASES + greedy_cases(hf)
    requests = [request(c, x, i) for i, (c, x) in enumerate(cases)]
    true_flags = compare(hf, ours, cases, hf.loglikelihood(requests, disable_tqdm=True), ours.loglikelihood(requests))
    assert true_flags >= 3  # the flag comparison is not vacuous


def test_a_context_that_starts_with_bos_gets_no_second_one(models):
    """A rendered chat prompt begins with the BOS text; lm-eval's hf model then adds no BOS (nor do we)."""
    hf, ours = models
    bos = hf.tokenizer.bos_token
    if bos is None:
        pytest.skip("this tokenizer has no BOS token (Qwen-3 style)")
    cases = [(bos + "Question: Which gas do plants take in?\nAnswer:", " carbon dioxide")]
    requests = [request(c, x) for c, x in cases]
    compare(hf, ours, cases, hf.loglikelihood(requests, disable_tqdm=True), ours.loglikelihood(requests))
    assert hf_token_ids(hf, *cases[0])[0].count(hf.tokenizer.bos_token_id) == 1


def test_same_per_request_scores_through_an_lm_eval_task(models, checkpoint, tmp_path):
    """lm-eval's own ``arc_easy`` task on a local copy in the hub's layout, run with ``hf`` and with ``sbd``: every
    request of every document scores the same."""
    from lm_eval.evaluator import evaluate

    from sbd_core.likelihood import TASKS
    from sbd_core.pipeline.likelihood import task_manager

    hf, ours = models
    data = write_arc_copy(tmp_path / "ai2_arc")
    manager, group = task_manager(TASKS["arc_easy"], TASKS["arc_easy"].settings(None), data, tmp_path / "work")
    runs = {}
    for name, lm in (("hf", hf), ("sbd", ours)):  # lm-eval's evaluate: simple_evaluate without its env report
        result = evaluate(lm=lm, task_dict=manager.load([group]), log_samples=True)
        runs[name] = {s["doc_id"]: s for s in result["samples"]["arc_easy"]}
    assert len(runs["hf"]) == len(runs["sbd"]) == 6
    for doc_id, sample in runs["hf"].items():
        mine = runs["sbd"][doc_id]
        assert mine["arguments"] == sample["arguments"] and mine["doc_hash"] == sample["doc_hash"]
        cases = [tuple(args) for args in sample["arguments"]]
        compare(hf, ours, cases, [r[0] for r in sample["resps"]], [r[0] for r in mine["resps"]])
