"""GPU checks (skipped without CUDA): FlexAttention training with backward, and the decoder and the fast engine on the
GPU against the slow CPU reference along their own paths (see oracles.py: no comparison of near-tied choices between
devices); the engine eager and compiled (FlexAttention, CUDA graphs: two graphs, no break, no recompile over calls),
its compiled path against its eager one and against ``generate`` only where no decision is near-tied; the compiled
engine in bf16 against an fp32 recomputation within bf16 rounding. Everything here short of the CUDA kernels themselves
is also checked on the CPU (test_engine_compile.py, test_engine_numerics.py)."""

import copy

import pytest
import torch
from torch._dynamo.utils import counters

from conftest import tiny_model
from oracles import TIE_BOUND, RecordingSolver, check_engine_path, check_sbd_path, decisions_are_stable, top2_gap
from test_engine_numerics import bf16_bound
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.reference import BlockDecoder
from sbd_core.decoding.setup import SHIFT_FIRST
from sbd_core.decoding.engine import FastDecoder
from sbd_core.mask_token import setup_mask_token
from sbd_core.masking import build_batch
from sbd_core.objective import compute_loss
from sbd_core.decoding.solvers import get_solver

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_flex_and_dense_training_agree_on_gpu(tokenizer):
    seq = torch.randint(7, len(tokenizer), (4, 129), generator=torch.Generator().manual_seed(0)).cuda()
    grads = {}
    for attn in ("sdpa", "flex_attention"):
        model = tiny_model("llama", len(tokenizer), attn=attn).cuda().train()
        batch = build_batch(seq, "sbd", 3, 16, generator=torch.Generator(device="cuda").manual_seed(1))
        out = compute_loss(model, batch)
        out.loss.backward()
        grads[attn] = (out.loss.item(), model.model.embed_tokens.weight.grad.clone())
    assert abs(grads["sdpa"][0] - grads["flex_attention"][0]) < 1e-4
    assert torch.allclose(grads["sdpa"][1], grads["flex_attention"][1], atol=1e-4)


def test_decoder_on_gpu_follows_cpu_reference(tokenizer):
    model = tiny_model("qwen3", len(tokenizer) + 8)
    setup_mask_token(tokenizer, model)
    config = DecodeConfig(block_size=8, max_new_tokens=24, eos_token_ids=())
    ids = [tokenizer(p)["input_ids"] for p in ["gpu check", "a second, longer prompt"]]
    recorder = RecordingSolver(get_solver("eb", gamma=0.3))
    gens = BlockDecoder(copy.deepcopy(model).cuda(), tokenizer, config, recorder).decode_batch(ids)
    assert recorder.calls and all(g.num_tokens == 24 for g in gens)
    check_sbd_path(model, ids, gens, recorder.calls, 8, 24, eos=(), excluded=(2, 3))


ENGINE_PROMPTS = ["gpu check", "a second, longer prompt", "x", "four more", "mid size"]
PAD, MASK = 2, 3


def sbd_model(tokenizer, kind: str = "llama", logit_scale: float = 1.0):
    """A tiny SBD model on the CPU (the reference's); ``logit_scale`` > 1 gives its decisions margins."""
    model = tiny_model(kind, len(tokenizer) + (8 if kind == "qwen3" else 0))
    setup_mask_token(tokenizer, model)
    with torch.no_grad():
        model.lm_head.weight.mul_(logit_scale)
    return model


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_engine_on_gpu_follows_the_cpu_reference_along_its_own_path(tokenizer, kind):
    model = sbd_model(tokenizer, kind)
    ids = [tokenizer(p)["input_ids"] for p in ENGINE_PROMPTS]
    recorder = RecordingSolver(get_solver("eb", gamma=0.5))
    config = DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=(), batch_size=2, compile=False)
    gens = FastDecoder(copy.deepcopy(model).cuda(), tokenizer, config, recorder).generate(ids)
    assert recorder.calls and all(g.num_tokens == 13 for g in gens)
    check_engine_path(model, ids, gens, recorder.calls, 2, 4, 13, eos=(), excluded=(PAD, MASK))


@pytest.fixture
def fresh_compiler():
    """A clean torch.compile state and counters; CUDA graphs that would be skipped raise instead (a skipped graph
    would run the step eagerly and silently)."""
    torch._dynamo.reset()
    counters.clear()
    with torch._inductor.config.patch({"triton.cudagraph_or_error": True}):
        yield
    torch._dynamo.reset()


@pytest.mark.parametrize("params, shifted", [({}, False), ({"first_token": "ntp", "order": "prefix"}, SHIFT_FIRST)],
                         ids=["paper", "claim-departures"])
def test_compiled_engine_on_gpu_decides_as_its_checked_eager_path(tokenizer, fresh_compiler, params, shifted):
    """The paper's inference, and the two departures the claim config decodes with (a block's first token from the
    NTP logit, reveals in position order), compiled with CUDA graphs against the engine's checked eager path."""
    model = sbd_model(tokenizer, logit_scale=12.0)
    gpu, ids, solver = copy.deepcopy(model).cuda(), [tokenizer(p)["input_ids"] for p in ENGINE_PROMPTS], \
        get_solver("eb", gamma=0.5, **params)
    recorder = RecordingSolver(solver)
    config = DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=(), batch_size=2, compile=False)
    eager = FastDecoder(gpu, tokenizer, config, recorder).generate(ids)
    check_engine_path(model, ids, eager, recorder.calls, 2, 4, 13, eos=(), excluded=(PAD, MASK), shifted=shifted)
    assert decisions_are_stable(solver, recorder.calls), "a near-tied decision: no fair comparison"
    engine = FastDecoder(gpu, tokenizer, DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=(),
                                                      batch_size=2, compile=True), solver)
    compiled = engine.generate(ids)
    assert engine.compile and engine.attention == "flex" and not counters["graph_break"]
    assert counters["stats"]["unique_graphs"] == 2  # the step and the prefill
    for ours, ref in zip(compiled, eager):
        assert (ours.token_ids, ours.nfe, ours.stop_reason, ours.widths) == (ref.token_ids, ref.nfe, ref.stop_reason,
                                                                            ref.widths)
    with torch._dynamo.config.patch(error_on_recompile=True):
        again = engine.generate(ids[1:])  # other prompts, refills: the same graphs
    assert [g.token_ids for g in again] == [g.token_ids for g in compiled[1:]]


def test_compiled_engine_on_gpu_gives_generates_tokens_in_ntp_mode(tokenizer, fresh_compiler):
    model = sbd_model(tokenizer, logit_scale=12.0).cuda()
    ids, max_new = [tokenizer(p)["input_ids"] for p in ENGINE_PROMPTS], 12
    config = DecodeConfig(mode="ntp", max_new_tokens=max_new, eos_token_ids=(), batch_size=2)  # compile: default
    engine = FastDecoder(model, tokenizer, config)
    gens = engine.generate(ids)
    assert engine.compile and counters["stats"]["unique_graphs"] == 2 and not counters["graph_break"]
    for prompt, gen in zip(ids, gens):
        out = model.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=max_new, do_sample=False,
                             eos_token_id=None, pad_token_id=PAD, suppress_tokens=[PAD, MASK], output_scores=True,
                             return_dict_in_generate=True)
        assert min(top2_gap(score[0]) for score in out.scores) >= TIE_BOUND, "a near tie: no fair comparison"
        assert gen.token_ids == out.sequences[0, len(prompt):].tolist() and gen.nfe == max_new


def test_bf16_compiled_engine_on_gpu_follows_an_fp32_recomputation(tokenizer, fresh_compiler):
    model = sbd_model(tokenizer, "qwen3")
    ids, recorder = [tokenizer(p)["input_ids"] for p in ENGINE_PROMPTS], RecordingSolver(get_solver("eb", gamma=0.5))
    config = DecodeConfig(block_size=4, max_new_tokens=13, eos_token_ids=(), batch_size=2, compile=True)
    gpu = copy.deepcopy(model).to("cuda", torch.bfloat16)
    gens = FastDecoder(gpu, tokenizer, config, recorder).generate(ids)
    reference = copy.deepcopy(gpu).float().cpu()  # the bf16 weights, computed in fp32
    check_engine_path(reference, ids, gens, recorder.calls, 2, 4, 13, eos=(), excluded=(PAD, MASK),
                      atol=bf16_bound(recorder.calls))
