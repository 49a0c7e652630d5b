"""The engine's compiled paths, checked on the CPU before any GPU sees them:

* the CUDA path's attention (FlexAttention over the flattened cache with a block mask built from the tokens) gives
  the dense plan's outputs on a ragged batch with re-fed blocks, blocks and padding, and no query is left without a key;
  run eagerly, it passes the engine's oracle (every forward's logits against a no-cache recomputation; slow tier);
* the step traces into one graph with ``fullgraph=True`` for every solver and NTP mode (dynamo only: ``backend="eager"``);
* the CUDA configuration (flex, traced through AOT autograd on the CPU) compiles the step and the prefill once each and
  never again over generate calls with other prompt lengths, batch sizes up to the capacity, and refills, and decides
  as the eager engine;
* the compiled CPU step (inductor) decides as the eager step (slow tier: compiling takes minutes on 2 cores).
Decisions are compared only on models whose decisions are stable (``oracles.decisions_are_stable``).
"""

import pytest
import torch
from torch._dynamo.utils import counters
from torch.nn.attention.flex_attention import create_mask

from conftest import tiny_model
from oracles import RecordingSolver, check_engine_path, decisions_are_stable
from sbd_core.decode_config import DecodeConfig
from sbd_core.decoding.engine import FastDecoder
from sbd_core.decoding.engine.decoder import bucket, buckets
from sbd_core.decoding.engine.attention import DensePlan, FlexPlan, Ragged
from sbd_core.decoding.engine.slots import Slots
from sbd_core.mask_token import setup_mask_token
from sbd_core.decoding.factory import make_solver
from sbd_core.samplers import sampler_spec
from sbd_core.decoding.solvers import excluded_index
from test_engine import MASK, PAD, PROMPTS, SOLVERS, ids_of, peaked_model

SLOTS, MAX_LEN, KV_HEADS, HEADS, HEAD_DIM = 3, 128, 2, 4, 8


def ragged_batch():
    """Slot 0 re-feeds 4 tokens then its block of 4, slot 1 feeds a block of 3, slot 2 a causal prompt of 5, then 4
    padding tokens in the scratch row (slot 3)."""
    slots = [0] * 8 + [1] * 3 + [2] * 5 + [3] * 4
    positions = list(range(20, 28)) + list(range(9, 12)) + list(range(5)) + list(range(4))
    limits = list(range(20, 24)) + [27] * 4 + [11] * 3 + list(range(5)) + list(range(4))
    columns = list(range(8)) + list(range(3)) + list(range(5)) + list(range(4))
    as_long = lambda values: torch.tensor(values, dtype=torch.long)  # noqa: E731
    return Ragged(ids=as_long([0] * 20), slots=as_long(slots), positions=as_long(positions),
                  limits=as_long(limits), rows=as_long(slots), columns=as_long(columns))


def test_flex_plan_gives_the_dense_plans_attention_and_every_query_sees_a_key():
    gen = torch.Generator().manual_seed(0)
    batch = ragged_batch()
    q = torch.randn(20, HEADS, HEAD_DIM, generator=gen)
    keys, values = (torch.randn(SLOTS + 1, MAX_LEN, KV_HEADS, HEAD_DIM, generator=gen) for _ in range(2))
    flex = FlexPlan(batch, MAX_LEN, SLOTS + 1)
    dense = DensePlan(batch, None, SLOTS + 1, torch.arange(8), torch.arange(MAX_LEN))
    assert torch.allclose(flex(q, keys, values, HEAD_DIM ** -0.5), dense(q, keys, values, HEAD_DIM ** -0.5),
                          atol=1e-5)
    visible = create_mask(flex.block_mask.mask_mod, 1, 1, 20, (SLOTS + 1) * MAX_LEN, device="cpu")[0, 0]
    expected = torch.zeros_like(visible)
    for t in range(20):  # the token's own row, positions 0..limit
        row = int(batch.slots[t]) * MAX_LEN
        expected[t, row: row + int(batch.limits[t]) + 1] = True
    assert torch.equal(visible, expected)
    blocks = flex.block_mask.to_dense()[0, 0].bool()  # [query blocks of 16, key blocks of 128] the kernel visits
    padded = torch.nn.functional.pad(visible, (0, 0, 0, 16 * blocks.shape[0] - 20))
    needed = padded.unflatten(0, (-1, 16)).unflatten(2, (-1, 128)).any(3).any(1)
    assert torch.equal(blocks, needed), "a block is skipped that holds a visible key, or visited that holds none"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_the_flex_path_follows_the_slow_reference_along_its_own_path(tokenizer, kind):
    """The CUDA path's attention, run eagerly (torch's unfused flex), under the oracle of test_engine.py."""
    model, ids = peaked_model(kind, tokenizer, scale=1.0), ids_of(tokenizer)
    recorder = RecordingSolver(make_solver(sampler_spec("eb", gamma=0.5)))
    config = DecodeConfig(block_size=4, max_new_tokens=9, eos_token_ids=(), batch_size=2)
    gens = FastDecoder(model, tokenizer, config, recorder, attention="flex").generate(ids)
    check_engine_path(model, ids, gens, recorder.calls, 2, 4, 9, eos=(), excluded=(PAD, MASK))


def test_buckets_bound_the_padding_and_the_number_of_graphs():
    for tokens in range(1, 4097):
        padded = bucket(tokens, 50)
        assert padded >= tokens and (padded % 16 == 0 or padded == 50)
        assert padded - tokens < (16 if tokens <= 256 else tokens / 16)
    assert bucket(50, 50) == 50 and bucket(45, 50) == 48  # a full NTP batch runs unpadded
    assert len(buckets(2 * 16 * 64, 64)) == 64 and len(buckets(2 * 6 * 50, 50)) == 36


@pytest.fixture
def fresh_dynamo():
    """Clean dynamo caches and counters around a test (each test compiles its own decoders)."""
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def solver_cases(default=("ntp", "eb")):
    """NTP mode and every solver of test_engine.SOLVERS; the default tier takes the first of each name in
    ``default`` (a full step's trace takes seconds), the slow tier the rest."""
    seen = set()
    for name, params in [("ntp", {}), *SOLVERS]:
        fast = name in default and name not in seen
        seen.add(name)
        yield pytest.param(name, params, marks=() if fast else (pytest.mark.slow,),
                           id="-".join([name, *map(str, params.values())]))


@pytest.mark.parametrize("name, params", list(solver_cases()))
def test_the_step_traces_into_one_graph_for_every_solver(tokenizer, fresh_dynamo, name, params):
    model = peaked_model("llama", tokenizer)
    spec = sampler_spec(name, **params)
    config = DecodeConfig(mode="ntp" if name == "ntp" else "sbd", block_size=4, max_new_tokens=6, eos_token_ids=(),
                          batch_size=2, compile=True)
    engine = FastDecoder(model, tokenizer, config, make_solver(spec), backend="eager")
    engine.generate(ids_of(tokenizer)[:3])  # fullgraph=True: a graph break raises
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 2  # the step and the prefill


@pytest.mark.parametrize("name, params", list(solver_cases(default=tuple(n for n, _ in SOLVERS))))
def test_every_solvers_update_traces_into_one_graph(fresh_dynamo, name, params):
    """The solver and the bookkeeping of a step, alone (seconds): every solver's code in the default tier."""
    mode, k, vocab = ("ntp", 1, 50) if name == "ntp" else ("sbd", 4, 50)
    state = Slots(3, k, 16, mode, vocab - 1, torch.zeros(vocab, dtype=torch.bool), torch.ones(vocab, dtype=torch.bool),
                  excluded_index([vocab - 1], vocab, "cpu"), make_solver(sampler_spec(name, **params)), "cpu")
    state.admit(torch.tensor([0, 2]), torch.tensor([5, 9]), torch.tensor([6, 16]), torch.tensor([7, 8]))
    update = torch.compile(state.update, fullgraph=True, backend="eager")
    for _ in range(3):
        update(torch.randn(3, k, vocab, generator=torch.Generator().manual_seed(0)))
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 1


@pytest.mark.slow
def test_the_cuda_configuration_compiles_once_over_generate_calls(tokenizer, fresh_dynamo):
    model = peaked_model("qwen3", tokenizer)
    solver = make_solver(sampler_spec("eb", gamma=0.5))
    config = DecodeConfig(block_size=4, max_new_tokens=10, eos_token_ids=(1,), batch_size=3, compile=True, max_len=128)
    engine = FastDecoder(model, tokenizer, config, solver, attention="flex", backend="aot_eager")
    ids = ids_of(tokenizer)
    calls = [ids, ids[:2], ids[3:] + ids[:1], [ids[1][:7], ids[0]], ids[2:] + ids[:3], [t + t[:3] for t in ids[:3]]]
    results = [engine.generate(calls[0])]
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 2  # the step and the prefill
    with torch._dynamo.config.patch(error_on_recompile=True):  # a recompile raises
        results += [engine.generate(prompts) for prompts in calls[1:]]
    assert counters["stats"]["unique_graphs"] == 2
    recorder = RecordingSolver(solver)
    eager = FastDecoder(model, tokenizer, DecodeConfig(**{**vars(config), "compile": False}), recorder)
    for prompts, compiled in zip(calls, results):
        reference = eager.generate(prompts)
        assert decisions_are_stable(solver, recorder.calls), "a near-tied decision: no fair comparison"
        assert [(g.token_ids, g.nfe, g.widths) for g in compiled] == [(g.token_ids, g.nfe, g.widths) for g in reference]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sbd", "ntp"])
def test_the_compiled_cpu_step_decides_as_the_eager_step(tokenizer, fresh_dynamo, mode):
    model = tiny_model("llama", len(tokenizer))
    setup_mask_token(tokenizer, model)
    with torch.no_grad():
        model.lm_head.weight.mul_(12.0)
    solver = make_solver(sampler_spec("ntp" if mode == "ntp" else "eb", **({} if mode == "ntp" else {"gamma": 0.5})))
    config = DecodeConfig(mode=mode, block_size=4, max_new_tokens=12, eos_token_ids=(1,), batch_size=3, compile=True)
    compiled = FastDecoder(model, tokenizer, config, solver)
    recorder = RecordingSolver(solver)
    eager = FastDecoder(model, tokenizer, DecodeConfig(**{**vars(config), "compile": False}), recorder)
    for prompts in (PROMPTS, PROMPTS[1:4]):
        ours, reference = compiled.generate(prompts), eager.generate(prompts)
        assert decisions_are_stable(solver, recorder.calls), "a near-tied decision: no fair comparison"
        assert [(g.token_ids, g.nfe, g.widths) for g in ours] == [(g.token_ids, g.nfe, g.widths) for g in reference]
    assert not counters["graph_break"] and counters["stats"]["unique_graphs"] == 2
    assert compiled.stats.fed_tokens > compiled.stats.row_tokens  # padding to a bucket ran through the scratch row
