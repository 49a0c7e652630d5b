"""Lossless SBD (verify, sbd_core.decoding.verify) in the reference decoder: NTP mode's tokens and stop reasons for every solver,
block size, batch size and model family; the exact cache; NFE on scripted drafts that are always right (the plain
solver's + the final check) and always wrong (the adaptive rule's bound); speculative sampling reproduces NTP sampling's
distribution (chi-square) where the naive rule would not; the decode and score stages record what the report
checks."""

import json
import math

import pytest
import torch
from transformers import DynamicCache

from conftest import tiny_model
from oracles import RecordingSolver, decisions_are_stable, eos_splitting
from sbd_core import checkpoint, pipeline
from sbd_core.decoding import verify
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_block_decoder
from sbd_core.decoding.reference import BlockDecoder, ReferenceVerify
from sbd_core.io_utils import read_jsonl
from sbd_core.mask_token import setup_mask_token
from sbd_core.records.score import tokens_digest
from sbd_core.decoding.factory import make_solver
from sbd_core.samplers import sampler_spec
from sbd_core.decoding.solvers import get_solver

PROMPTS = ["hi", "a much longer prompt than the others, with many more tokens", "mid size", "x", "four"]
SOLVERS = [("eb", {"gamma": 0.3}), ("eb", {"gamma": 1.0, "proxy": "confidence"}), ("eb", {"gamma": math.inf}),
           ("entropy_threshold", {"threshold": 1.0}), ("confidence_threshold", {"threshold": 0.5}),
           ("factor", {"f": 1.0}), ("topk", {"n": 2}), ("left_to_right", {"n": 1})]


def peaked(kind, tokenizer):
    """A tiny SBD model with its output layer scaled up: peaked distributions, decisions with margins."""
    model = tiny_model(kind, len(tokenizer) + (8 if kind == "qwen3" else 0))
    setup_mask_token(tokenizer, model)
    model.lm_head.weight.data.mul_(12.0)
    return model


def ntp_reference(model, tokenizer, ids, **config):
    """NTP-mode greedy decoding of ``ids`` one at a time, checked free of near-tied decisions."""
    recorder = RecordingSolver(make_solver(sampler_spec("ntp")))
    config = DecodeConfig(mode="ntp", batch_size=1, engine="reference", **config)
    gens = make_block_decoder(model, tokenizer, config, recorder).generate(ids)
    assert decisions_are_stable(recorder.solver, recorder.calls), "a near-tied NTP decision: no fair comparison"
    return gens


def exactness_cases():
    """Every solver with Llama and Qwen-3: the default tier takes one family per solver, alternating, the slow tier the
    other; the default tier keeps EB at gamma 0.3, top-k and left-to-right (the thresholds and factor, and EB at gamma 1
    and infinity, 30-60 s each, in the slow tier only)."""
    for i, (name, params) in enumerate(SOLVERS):
        for j, kind in enumerate(("llama", "qwen3")):
            whole_blocks = name == "eb" and params["gamma"] >= 1.0
            default = j == i % 2 and not whole_blocks and name in ("eb", "topk", "left_to_right")
            marks = () if default else (pytest.mark.slow,)
            yield pytest.param(kind, name, params, marks=marks, id=f"{kind}-{name}-{list(params.values())[0]}")


@pytest.mark.parametrize("kind, name, params", list(exactness_cases()))
def test_verified_sbd_gives_ntp_modes_tokens_and_stops(tokenizer, kind, name, params):
    model, ids = peaked(kind, tokenizer), [tokenizer(p)["input_ids"] for p in PROMPTS]
    free = ntp_reference(model, tokenizer, ids, max_new_tokens=14, eos_token_ids=())
    eos = (eos_splitting(free, 4),)  # rows stop at different points, some by EOS, some by length
    reference = ntp_reference(model, tokenizer, ids, max_new_tokens=14, eos_token_ids=eos)
    assert {g.stop_reason for g in reference} == {"eos", "length"}
    solver = get_solver(name, verify="greedy", **params)
    for block_size in (2, 3, 6):
        for batch_size in (1, 3):  # alone, and batched (rows leave the batch at different forwards)
            config = DecodeConfig(block_size=block_size, max_new_tokens=14, eos_token_ids=eos, batch_size=batch_size,
                                  engine="reference")
            gens = make_block_decoder(model, tokenizer, config, solver).generate(ids)
            for gen, ref in zip(gens, reference):
                assert (gen.token_ids, gen.stop_reason, gen.text) == (ref.token_ids, ref.stop_reason, ref.text)
                assert gen.nfe <= ref.nfe + max(block_size - 1, 1)  # the adaptive rule's bound
                assert len(gen.accepted) == len(gen.drafted) and all(0 <= a <= d for a, d in
                                                                     zip(gen.accepted, gen.drafted))


def test_stop_strings_end_verified_rows_where_ntp_mode_ends_them(tokenizer):
    model, ids = peaked("llama", tokenizer), [tokenizer(p)["input_ids"] for p in PROMPTS]
    texts = [g.text for g in ntp_reference(model, tokenizer, ids, max_new_tokens=16, eos_token_ids=())]
    stop = next(t[5:7] for t in texts if len(t) > 8 and t[5:7].strip())  # a stop string from inside a row's text
    reference = ntp_reference(model, tokenizer, ids, max_new_tokens=16, eos_token_ids=(), stop_strings=(stop,))
    assert "stop_string" in {g.stop_reason for g in reference}
    config = DecodeConfig(block_size=4, max_new_tokens=16, eos_token_ids=(), stop_strings=(stop,), batch_size=3,
                          engine="reference")
    gens = make_block_decoder(model, tokenizer, config, get_solver("eb", gamma=0.5, verify="greedy")).generate(ids)
    assert [(g.token_ids, g.stop_reason, g.text) for g in gens] == [(g.token_ids, g.stop_reason, g.text)
                                                                      for g in reference]


def test_cache_holds_exact_causal_keys_after_rejections(sbd_model, tokenizer):
    ids = tokenizer("check the cache")["input_ids"]
    config = DecodeConfig(block_size=4, max_new_tokens=16, eos_token_ids=(), batch_size=1, engine="reference")
    decoder = BlockDecoder(sbd_model, tokenizer, config, get_solver("eb", gamma=1.0, verify="greedy"))
    decoded = decoder.decode_batch([ids])[0]
    loop = ReferenceVerify(decoder, [ids])  # decode_batch's verified path, kept to read its key mask afterwards
    with torch.no_grad():
        gen = loop.run()[0]
    assert (gen.token_ids, gen.nfe, gen.accepted) == (decoded.token_ids, decoded.nfe, decoded.accepted)
    assert sum(a < d for a, d in zip(gen.accepted, gen.drafted)) >= 2  # a random model: drafts were rejected
    valid = loop.key_valid[0]
    fed = int(valid.sum()) - len(ids)
    assert 8 <= fed < len(gen.token_ids) and valid.shape[0] > len(ids) + fed  # rejected columns are masked off
    fresh = DynamicCache(config=sbd_model.config)
    sbd_model(input_ids=torch.tensor([ids + gen.token_ids[:fed]]), cache=fresh, use_cache=True)
    for mine, ref in zip(decoder.cache.layers, fresh.layers):
        assert torch.allclose(mine.keys[0][:, valid], ref.keys[0], atol=1e-5)
        assert torch.allclose(mine.values[0][:, valid], ref.values[0], atol=1e-5)


class TwoModes(torch.nn.Module):
    """A real tiny model whose logits are replaced: a query fed the mask token (the masked mode) predicts
    ``draft(p)`` for its own position p, any other query (NTP mode) ``script(p + 1)``, with a confidence that falls
    along the sequence (top-k reveals left to right; neighbours differ by ~1%)."""

    def __init__(self, base, script, draft):
        super().__init__()
        self.base, self.script, self.draft, self.config = base, script, draft, base.config

    @property
    def device(self):
        return self.base.device

    def forward(self, input_ids, position_ids, logits_to_keep=0, **kw):
        out = self.base(input_ids=input_ids, position_ids=position_ids, logits_to_keep=logits_to_keep, **kw)
        n = out.logits.shape[1]
        masked = (input_ids[:, -n:] == self.config.sbd_mask_token_id).tolist()
        logits = torch.zeros_like(out.logits)
        for b, row in enumerate(position_ids[:, -n:].tolist()):
            for i, p in enumerate(row):
                logits[b, i, self.draft(p) if masked[b][i] else self.script(p + 1)] = 10.0 - 0.1 * p
        out.logits = logits
        return out


def base_model(tokenizer):
    """The tiny model under a scripted one (its logits are replaced: one model family is enough)."""
    model = tiny_model("llama", len(tokenizer))
    setup_mask_token(tokenizer, model)
    return model


def scripted(tokenizer, eos_at=None, wrong=False):
    """``TwoModes`` writing 'a' everywhere (EOS at absolute position ``eos_at``); drafts right, or always 'b'."""
    a, b = tokenizer.convert_tokens_to_ids("a"), tokenizer.convert_tokens_to_ids("b")
    script = lambda p: 1 if p == eos_at else a  # noqa: E731
    return TwoModes(base_model(tokenizer), script, (lambda p: b) if wrong else script)


@pytest.mark.parametrize("name, params, plain_nfe", [("topk", {"n": 2}, 5), ("eb", {"gamma": math.inf}, 3)])
def test_right_drafts_cost_the_plain_solvers_forwards_plus_the_final_check(tokenizer, name, params, plain_nfe):
    model = scripted(tokenizer, eos_at=12)  # prompt of 3: EOS at generation index 9, 10 tokens
    config = DecodeConfig(block_size=4, max_new_tokens=40, engine="reference")
    plain = BlockDecoder(model, tokenizer, config, get_solver(name, **params)).decode_batch([[5] * 3])[0]
    verified = get_solver(name, verify="greedy", **params)
    ours = BlockDecoder(model, tokenizer, config, verified).decode_batch([[5] * 3])[0]
    assert plain.nfe == plain_nfe and (plain.num_tokens, plain.stop_reason) == (10, "eos")
    # topk 2: blocks [0-3] and [4-7] in 2 forwards each (the first position is set free, the solver reveals 2 then 1),
    # block [8-11]: position 8 set, 9 (EOS) and 10 revealed -> the draft [8, 9] is verified in one more forward.
    # eb inf: a block per forward, then the final check
    assert (ours.token_ids, ours.stop_reason, ours.nfe) == (plain.token_ids, "eos", plain.nfe + 1)
    assert ours.accepted == ours.drafted == [3, 3, 1]  # per draft: tokens kept, tokens checked (after the first)
    # widths, per forward: the block alone, then [draft | new block] in a block's first forward, the final draft alone
    assert ours.widths == ([4, 4, 8, 4, 8, 2] if name == "topk" else [4, 8, 8, 2])


def test_a_stop_on_a_blocks_first_token_needs_no_check(tokenizer):
    model = scripted(tokenizer, eos_at=7)  # prompt of 3: EOS at generation index 4, a block's first token
    solver = get_solver("eb", gamma=math.inf, verify="greedy")
    config = DecodeConfig(block_size=4, max_new_tokens=40, engine="reference")
    gen = BlockDecoder(model, tokenizer, config, solver).decode_batch([[5] * 3])[0]
    assert (gen.num_tokens, gen.stop_reason, gen.nfe, gen.accepted) == (5, "eos", 2, [3])


@pytest.mark.parametrize("block_size", [4, 16])
def test_wrong_drafts_cost_at_most_k_minus_1_forwards_more_than_ntp(tokenizer, block_size):
    model = scripted(tokenizer, wrong=True)
    config = DecodeConfig(block_size=block_size, max_new_tokens=40, eos_token_ids=(), engine="reference")
    solver = get_solver("left_to_right", n=1, verify="greedy")  # one draft token per forward: the costliest drafts
    gen = BlockDecoder(model, tokenizer, config, solver).decode_batch([[5] * 3])[0]
    assert gen.text == "a" * 40 and set(gen.accepted) == {0}  # every draft was rejected at its first checked token
    assert 40 < gen.nfe <= 40 + block_size - 1  # NTP decoding: 40 forwards


def test_without_the_adaptive_rule_wrong_drafts_cost_k_over_2_forwards_a_token(tokenizer, monkeypatch):
    model = scripted(tokenizer, wrong=True)
    config = DecodeConfig(block_size=6, max_new_tokens=24, eos_token_ids=(), engine="reference")
    solver = get_solver("left_to_right", n=1, verify="greedy")
    monkeypatch.setattr(verify, "block_length", lambda k, nfe, tokens, room: min(k, room))  # blocks of k always
    gen = BlockDecoder(model, tokenizer, config, solver).decode_batch([[5] * 3])[0]
    # a block: 5 forwards to draft, its check drops the next block's start: 6 forwards for 2 tokens
    assert gen.text == "a" * 24 and gen.nfe >= (24 - 6) * 3


def test_block_length_keeps_the_excess_below_k_minus_2():
    assert verify.block_length(6, nfe=0, tokens=0, room=100) == 6  # a fresh row tries a whole block
    assert verify.block_length(6, nfe=5, tokens=2, room=100) == 3  # 3 forwards over: blocks of 3
    assert verify.block_length(6, nfe=9, tokens=2, room=100) == 2  # never below 2 (costs no more than NTP)
    assert verify.block_length(6, nfe=10, tokens=40, room=100) == 6  # banked forwards: whole blocks
    assert verify.block_length(6, nfe=0, tokens=0, room=1) == 1
    assert verify.block_length(1, nfe=0, tokens=0, room=10) == 1


def test_out_of_order_draws_are_judged_as_fixed_guesses():
    p = [torch.tensor([0.5, 0.5])] * 4
    # block positions drawn at forwards 1, 2, 1, 3: position 1 sees position 2's token (drawn before it), position 2
    # is seen by position 1 (drawn after it); 0 and 3 are in order
    got = verify.proposals([1, 2, 1, 3], p)
    assert [g is not None for g in got] == [True, False, False, True]
    assert [g is not None for g in verify.proposals([1, 1, 2, math.inf], p)] == [True, True, True, True]
    assert [g is not None for g in verify.proposals([1, 3, math.inf, 2], p)] == [True, False, False, False]


# ------------------------------------------------------------------------------------------------- sampling
class Coupled(torch.nn.Module):
    """Two tokens, a and b. NTP mode is a Markov chain: P(a | previous a) = 0.6, P(a | previous b) = 0.5. The masked
    mode couples a position to its right neighbour: a revealed neighbour x makes it x with probability 0.95; with the
    neighbour masked it is a coin flip (entropy 0.693), and the last block position is 0.6 / 0.4 (entropy 0.673), so
    the entropy proxy reveals the block's end first and the positions before it condition on it (drawn out of order).
    Under the naive rule this setting moves the law of the 8 sequences by a chi-square non-centrality of 0.166 per
    sample (computed exactly by enumerating draws, acceptances and residuals), ours by 0."""

    def __init__(self, base, a, b):
        super().__init__()
        self.base, self.a, self.b, self.config = base, a, b, base.config

    @property
    def device(self):
        return self.base.device

    def forward(self, input_ids, position_ids, logits_to_keep=0, **kw):
        out = self.base(input_ids=input_ids, position_ids=position_ids, logits_to_keep=logits_to_keep, **kw)
        probs = torch.zeros(*input_ids.shape, 2)
        mask, a = self.config.sbd_mask_token_id, self.a
        for row, (ids, pos) in enumerate(zip(input_ids.tolist(), position_ids.tolist())):
            at = {p: t for p, t in zip(pos, ids)}
            for i, (t, p) in enumerate(zip(ids, pos)):
                right = at.get(p + 1)
                if t != mask:
                    pa = 0.6 if t == a else 0.5
                elif right is None:
                    pa = 0.6
                else:
                    pa = 0.5 if right == mask else (0.95 if right == a else 0.05)
                probs[row, i] = torch.tensor([pa, 1 - pa])
        logits = torch.full_like(out.logits, -math.inf)
        logits[..., [self.a, self.b]] = probs[:, -out.logits.shape[1]:].log()
        out.logits = logits
        return out


def chi_square_bound(cells: int, failure: float = 1e-6) -> float:
    """A value a chi-square statistic with ``cells - 1`` degrees of freedom exceeds with probability <= ``failure``
    (Laurent and Massart 2000: P(X >= d + 2 sqrt(d x) + 2x) <= exp(-x))."""
    d, x = cells - 1, math.log(1 / failure)
    return d + 2 * math.sqrt(d * x) + 2 * x


def sampled_counts(model, tokenizer, solver, rows: int, length: int) -> dict:
    config = DecodeConfig(block_size=length, max_new_tokens=length, eos_token_ids=(), batch_size=rows,
                          engine="reference")
    gens = make_block_decoder(model, tokenizer, config, solver).generate([tokenizer("b")["input_ids"]] * rows)
    counts = {}
    for g in gens:
        counts[tuple(g.token_ids)] = counts.get(tuple(g.token_ids), 0) + 1
    return counts


def chi_square(counts: dict, exact: dict, rows: int) -> float:
    assert set(counts) <= set(exact)
    return sum((counts.get(seq, 0) - rows * p) ** 2 / (rows * p) for seq, p in exact.items())


@pytest.mark.parametrize("name, params", [("topk", {"n": 1, "proxy": "entropy"}), ("left_to_right", {"n": 1})])
def test_speculative_sampling_reproduces_ntp_sampling(tokenizer, name, params, monkeypatch):
    a, b = tokenizer.convert_tokens_to_ids("a"), tokenizer.convert_tokens_to_ids("b")
    model, rows, length = Coupled(base_model(tokenizer), a, b), 1000, 3
    exact = {(): 1.0}
    for _ in range(length):  # the chain's law of the 8 sequences after the prompt "b"
        exact = {seq + (t,): prob * (pa if t == a else 1 - pa) for seq, prob in exact.items()
                 for pa in [0.6 if (seq or (b,))[-1] == a else 0.5] for t in (a, b)}
    assert min(exact.values()) * rows >= 50  # expected counts large enough for the chi-square law
    bound = chi_square_bound(len(exact))
    solver = get_solver(name, temperature=1.0, seed=0, verify="sample", **params)
    assert chi_square(sampled_counts(model, tokenizer, solver, rows, length), exact, rows) < bound
    if name == "topk":  # drawn out of order: the naive rule (every token against the q it was drawn from) is biased
        monkeypatch.setattr(verify, "proposals", lambda drawn_at, probs: list(probs))
        naive = get_solver(name, temperature=1.0, seed=0, verify="sample", **params)
        assert chi_square(sampled_counts(model, tokenizer, naive, rows, length), exact, rows) > bound


# ------------------------------------------------------------------------------------------------- the stages
def test_decode_and_score_stages_record_what_the_report_checks(tokenizer, tmp_path):
    model_dir = checkpoint.save(base_model(tokenizer), tokenizer, tmp_path / "model")
    settings = {"limit": 3, "max_new_tokens": 8}
    test_file = pipeline.run_benchmark("math", settings, tmp_path / "bench")
    out = tmp_path / "math.jsonl"
    spec = sampler_spec("eb", gamma=0.3, verify="greedy")
    pipeline.run_decode(model_dir, "math", settings, test_file, spec, {"block_size": 4, "batch_size": 2}, out)
    record = json.loads(out.with_name("math.jsonl.provenance.json").read_text())["settings"]
    assert record["engine"] == "fast" and record["sampler_spec"]["tag"] == "eb-entropy-g0.3-verify"
    records = read_jsonl(out)
    assert all(len(r["accepted"]) == len(r["drafted"]) and r["nfe"] <= r["num_tokens"] + 3 for r in records)
    score = pipeline.run_score("math", out, tmp_path / "score.json", data=test_file)
    for r in records:
        problem = score["per_problem"][str(r["id"])]
        assert problem["tokens_sha"] == tokens_digest(r["token_ids"])
        assert (problem["accepted"], problem["drafted"]) == (r["accepted"], r["drafted"])
