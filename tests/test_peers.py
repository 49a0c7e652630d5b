"""The training-free peers (sbd_core.decoding.peers): Hugging Face generate greedy and with prompt lookup, against our NTP mode
(oracle style: equal tokens until a step where generate's own top-2 gap is below 1e-3), the stop rule and NFE counted
by hand on a scripted model, the decode stage with a peer, bad input."""

import json
from dataclasses import replace

import pytest
import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from conftest import char_tokenizer, tiny_model
from oracles import TIE_BOUND, RecordingSolver, check_greedy_path, engine_ntp_logits, top2_gap
from sbd_core import checkpoint, pipeline
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.factory import make_block_decoder
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.errors import UserError
from sbd_core.io_utils import read_jsonl
from sbd_core.mask_token import setup_mask_token
from sbd_core.decoding.peers import PeerDecoder
from sbd_core.decoding.factory import make_solver
from sbd_core.samplers import sampler_spec

PROMPTS = ["hi", "a much longer prompt than the others", "mid size", "four"]
PAD = 2
HF, LOOKUP = sampler_spec("hf_generate"), sampler_spec("prompt_lookup")


def plain_generate(model, inputs, mask, max_new):
    """transformers' greedy generate as a user calls it, padding suppressed as our decoders do: (tokens, scores)."""
    out = model.generate(input_ids=inputs, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                         eos_token_id=None, pad_token_id=PAD, suppress_tokens=[PAD], output_scores=True,
                         return_dict_in_generate=True)
    return out.sequences[:, inputs.shape[1]:].tolist(), torch.stack(out.scores, dim=1)


def left_padded(rows):
    """(input ids, attention mask) of token-id rows padded on the left."""
    width = max(len(r) for r in rows)
    inputs = torch.tensor([[PAD] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return inputs, mask


def our_ntp(model, tokenizer, ids, max_new):
    """Our NTP mode (the engine), one prompt at a time: its generations and the logits of each row's forwards."""
    recorder = RecordingSolver(make_solver(sampler_spec("ntp")))
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=(), batch_size=1)
    gens = make_block_decoder(model, tokenizer, config, recorder).generate(ids)
    return gens, engine_ntp_logits(recorder.calls, 1, len(ids), max_new, eos=())


@pytest.mark.parametrize("batch_size", [1, 4])
def test_hf_generate_gives_the_tokens_of_our_ntp_mode(model_kind, tokenizer, batch_size):
    model = tiny_model(model_kind, len(tokenizer))
    ids, max_new = [tokenizer(p)["input_ids"] for p in PROMPTS], 12
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=(), batch_size=batch_size)
    peer = PeerDecoder(model, tokenizer, config, HF)
    assert peer.setup.excluded_ids == (PAD,) and peer.config.batch_size == batch_size
    gens = peer.generate(ids)
    ours, our_logits = our_ntp(model, tokenizer, ids, max_new)
    # the batch as the peer forms it (shortest prompts first), decoded by plain generate: the same computation
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for lo in range(0, len(ids), batch_size):
        chunk = order[lo:lo + batch_size]
        inputs, mask = left_padded([ids[i] for i in chunk])
        ref, scores = plain_generate(model, inputs, mask, max_new)
        for row, i in enumerate(chunk):
            assert gens[i].token_ids == ref[row]  # same library call, same float operations: exactly equal
            check_greedy_path(ours[i].token_ids, our_logits[i], ref[row], scores[row])
            assert (gens[i].nfe, gens[i].stop_reason) == (max_new, "length")
            assert gens[i].text == tokenizer.decode(gens[i].token_ids) and gens[i].wall_time_s > 0


def test_prompt_lookup_keeps_greedy_tokens_in_fewer_forwards(model_kind, tokenizer):
    model = tiny_model(model_kind, len(tokenizer))
    ids, max_new = [tokenizer(p)["input_ids"] for p in PROMPTS], 12
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=(), batch_size=4)
    peer = PeerDecoder(model, tokenizer, config, LOOKUP)
    assert peer.config.batch_size == 1  # transformers: assisted generation at batch 1 only
    for prompt, gen in zip(ids, peer.generate(ids)):
        ref, scores = plain_generate(model, *left_padded([prompt]), max_new)
        # the peer's logits are not recorded: generate's own scores stand for both sides (the check is the tokens)
        check_greedy_path(gen.token_ids, scores[0], ref[0], scores[0])
        assert 1 <= gen.nfe <= max_new and gen.num_tokens == max_new


def peaked_llama(tokenizer, scale=25.0):
    """A tiny random LlamaForCausalLM whose output layer is scaled up: peaked distributions, so greedy decisions have
    wide margins (checked before any comparison) and two code paths must choose the same tokens."""
    model = tiny_model("llama", len(tokenizer))
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


def test_peers_equal_our_ntp_mode_and_greedy_generate_where_decisions_are_stable(tokenizer):
    model, max_new = peaked_llama(tokenizer), 16
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    refs = [plain_generate(model, *left_padded([prompt]), max_new) for prompt in ids]
    gaps = [top2_gap(step) for _, scores in refs for step in scores[0]]
    assert min(gaps) > TIE_BOUND, f"a near-tied greedy decision (top-2 gap {min(gaps):.2e}): no fair comparison"
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=(), batch_size=4)
    ours = make_block_decoder(model, tokenizer, config, make_solver(sampler_spec("ntp"))).generate(ids)  # the engine
    for batch_size in (1, 4):
        hf = PeerDecoder(model, tokenizer, replace(config, batch_size=batch_size), HF).generate(ids)
        assert [(g.token_ids, g.nfe, g.stop_reason, g.text) for g in hf] == [
            (g.token_ids, g.nfe, g.stop_reason, g.text) for g in ours]
    lookup = PeerDecoder(model, tokenizer, config, LOOKUP).generate(ids)
    for gen, (ref, _) in zip(lookup, refs):  # lossless for greedy: generate's own tokens, in no more forwards
        assert gen.token_ids == ref[0] and gen.stop_reason == "length" and 1 <= gen.nfe <= max_new
    assert sum(g.nfe for g in lookup) < len(ids) * max_new  # drafts were accepted: the equality covers verification


# ------------------------------------------------------------------------------------------------ scripted model
CYCLE = "abcdefgh"


class CycleLM(LlamaForCausalLM):
    """A tiny Llama whose next token after ``CYCLE[i]`` is ``CYCLE[i + 1]`` (cyclically; after any other token:
    ``a``), decisively: every decision is certain, so every decoder must agree exactly."""

    def setup(self, tokenizer):
        succ = torch.full((self.config.vocab_size,), tokenizer.convert_tokens_to_ids("a"))
        for a, b in zip(CYCLE, CYCLE[1:] + CYCLE[0]):
            succ[tokenizer.convert_tokens_to_ids(a)] = tokenizer.convert_tokens_to_ids(b)
        self.succ = succ
        return self

    def forward(self, input_ids=None, **kwargs):
        out = super().forward(input_ids=input_ids, **kwargs)
        fed = input_ids[:, -out.logits.shape[1]:]
        out.logits = torch.zeros_like(out.logits).scatter_(-1, self.succ[fed][..., None], 20.0)
        return out


@pytest.fixture(scope="module")
def cycle_model():
    tok = char_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                         bos_token_id=0, eos_token_id=1, pad_token_id=PAD)
    torch.manual_seed(0)
    return CycleLM(config).eval().setup(tok), tok


def decode_all(model, tok, prompts, max_new=12, stops=(), eos=(), batch_size=1):
    """(our NTP mode on the reference decoder, hf_generate, prompt lookup) generations of ``prompts``."""
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, stop_strings=stops, eos_token_ids=eos,
                          batch_size=batch_size, engine="reference")  # the engine runs its own forward, not ours
    ntp = BlockDecoder(model, tok, config, make_solver(sampler_spec("ntp")))
    return tuple(decoder.generate(prompts) for decoder in (ntp, PeerDecoder(model, tok, config, HF),
                                                           PeerDecoder(model, tok, config, LOOKUP)))


def outcome(gen):
    return gen.text, gen.token_ids, gen.stop_reason


def test_prompt_lookup_forwards_counted_by_hand(cycle_model):
    model, tok = cycle_model
    ntp, hf, lookup = decode_all(model, tok, ["abcdefghab"])
    assert outcome(ntp[0]) == outcome(hf[0]) == outcome(lookup[0]) == ("cdefghabcdef", tok("cdefghabcdef",
                                                                       add_special_tokens=False)["input_ids"], "length")
    # forward 1 (prefill): the last bigram "ab" first occurs at the prompt's start, so the draft is the 8 tokens after
    # it, "cdefghab"; all are the model's own choices: 8 + 1 tokens. Forward 2: "bc" first occurs at positions 2-3,
    # draft "defghabcde" (10), accepted, and cut to the 3 tokens left of the 12.
    assert (ntp[0].nfe, hf[0].nfe, lookup[0].nfe) == (12, 12, 2)
    assert lookup[0].tokens_per_forward == 6.0


def test_stop_string_and_eos_cut_as_our_decoders_cut(cycle_model):
    model, tok = cycle_model
    prompts = ["abcdefghab", "gh"]
    # "fg" ends at the 5th token of the first row, inside the first forward's accepted draft for prompt lookup
    for batch_size in (1, 2):
        ntp, hf, lookup = decode_all(model, tok, prompts, stops=("fg",), batch_size=batch_size)
        assert [outcome(g) for g in ntp] == [outcome(g) for g in hf] == [outcome(g) for g in lookup]
        assert outcome(hf[0])[::2] == ("cde", "stop_string") and hf[0].token_ids[-1] == tok.convert_tokens_to_ids("g")
        assert [g.nfe for g in ntp] == [g.nfe for g in hf] == [5, 7] and lookup[0].nfe == 1
        e = tok.convert_tokens_to_ids("e")  # an EOS: kept as the last token, cut from the text; rows stop apart
        ntp, hf, lookup = decode_all(model, tok, prompts, eos=(e,), batch_size=batch_size)
        assert [outcome(g) for g in ntp] == [outcome(g) for g in hf] == [outcome(g) for g in lookup]
        assert [(g.text, g.stop_reason, g.token_ids[-1]) for g in hf] == [("cd", "eos", e), ("abcd", "eos", e)]
        assert [g.nfe for g in hf] == [3, 5] and lookup[0].nfe == 1


def test_stop_strings_see_the_generation_only(cycle_model):
    """Why the peers apply our stop rule instead of transformers' stop_strings: its StopStringCriteria also reads the
    prompt ("bc" straddling the prompt's end stops it after one token) and only the end of the sequence (with prompt
    lookup, "fg" completed inside an accepted draft is missed); our decoders do neither."""
    model, tok = cycle_model
    ntp, hf, lookup = decode_all(model, tok, ["abcdefghab"], stops=("bc",))
    assert outcome(ntp[0]) == outcome(hf[0]) == outcome(lookup[0])
    assert (hf[0].text, hf[0].num_tokens, hf[0].stop_reason) == ("cdefgha", 9, "stop_string")
    prompt = torch.tensor([tok("abcdefghab")["input_ids"]])
    straddled = model.generate(prompt, max_new_tokens=12, do_sample=False, stop_strings=["bc"], tokenizer=tok)
    missed = model.generate(prompt, max_new_tokens=12, do_sample=False, stop_strings=["fg"], tokenizer=tok,
                            prompt_lookup_num_tokens=10)
    assert straddled.shape[1] - prompt.shape[1] == 1 and missed.shape[1] - prompt.shape[1] == 12


# ------------------------------------------------------------------------------------------------ stage and errors
def test_decode_stage_with_peers(tmp_path):
    tok = char_tokenizer()
    model = tiny_model("llama", len(tok))
    setup_mask_token(tok, model)  # an SBD-ready checkpoint: the peers suppress its mask token as our decoders do
    model_dir = checkpoint.save(model, tok, tmp_path / "model")
    settings = {"limit": 3, "max_new_tokens": 6}
    test_file = pipeline.run_benchmark("math", settings, tmp_path / "bench")
    decode = {"batch_size": 2}
    for spec, batch in ((HF, 2), (LOOKUP, 1)):
        out = tmp_path / spec["tag"] / "math.jsonl"
        pipeline.run_decode(model_dir, "math", settings, test_file, {"solver": spec["solver"]}, decode, out)
        records = read_jsonl(out)
        assert len(records) == 3 and all(1 <= r["nfe"] <= r["num_tokens"] <= 6 for r in records)
        record = json.loads(out.with_name("math.jsonl.provenance.json").read_text())["settings"]
        assert record["sampler_spec"] == spec and record["batch_size"] == batch
    score = pipeline.run_score("math", out, tmp_path / "score.json", data=test_file)  # prompt lookup's
    assert (score["batch_size"], score["sampler_spec"]["mode"]) == (1, "hf")
    assert score["total_blocks"] == score["total_tokens"]  # one token per block: the peers decode no blocks


def test_peer_errors_are_named(tokenizer):
    model = tiny_model("llama", len(tokenizer))
    with pytest.raises(ValueError, match="training-free peers"):
        PeerDecoder(model, tokenizer, DecodeConfig(mode="ntp"), sampler_spec("ntp"))
    with pytest.raises(ValueError, match="empty prompt"):
        PeerDecoder(model, tokenizer).generate([[]])
    model.generation_config = GenerationConfig(forced_eos_token_id=1)
    with pytest.raises(UserError, match="forced_eos_token_id.*plain greedy"):
        PeerDecoder(model, tokenizer, DecodeConfig(mode="ntp"), HF)
