"""CPU benchmark of the SBD decoder and training objective on a tiny random Llama.

Three parts, all on the same random fp32 LlamaForCausalLM with a character tokenizer:
  1. decoding throughput: HF ``generate`` (greedy) vs BlockDecoder in NTP mode vs SBD mode with several solvers;
  2. per-forward cost growth: a hook on ``model.forward`` splits each SBD decoding step into time inside the model and
     decoder overhead (everything else), at increasing cache length, next to a bare model forward on a cache of that size;
  3. training step time (forward + backward + AdamW) of the SBD objective vs the NTP objective.
The model is random, so EOS is disabled (every run generates exactly max_new_tokens) and the NFE of each solver is set
by the flat random logits, not by what a trained model would allow. Prints tables, then ONE JSON document as the last line.

    .venv/bin/python benchmarks/bench_decode.py [--quick] [--hidden 256 --layers 4 --max-new-tokens 128 --repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import statistics
import string
import time

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import DynamicCache, GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from sbd_core.decode import BlockDecoder, DecodeConfig
from sbd_core.mask_token import setup_mask_token
from sbd_core.masking import build_batch
from sbd_core.objective import compute_loss
from sbd_core.solvers import get_solver

SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|reserved_special_token_0|>"]
BLOCK = 16
SOLVERS = [("eb", {"gamma": 0.0}), ("eb", {"gamma": 0.1}), ("eb", {"gamma": float("inf")}), ("topk", {"n": 4})]


# ------------------------------------------------------------------------------------------------- setup
def char_tokenizer() -> PreTrainedTokenizerFast:
    """Character-level tokenizer over printable ASCII plus the specials (same as tests/conftest.py)."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS + list(string.printable))}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="?")
    tok.add_special_tokens({"additional_special_tokens": SPECIALS})
    tok.bos_token, tok.eos_token, tok.pad_token = SPECIALS[:3]
    return tok


def build_model(s: dict, vocab: int) -> LlamaForCausalLM:
    torch.manual_seed(s["seed"])
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=s["hidden"], intermediate_size=4 * s["hidden"],
                      num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                      num_key_value_heads=max(1, s["heads"] // 2), max_position_embeddings=s["context"],
                      bos_token_id=0, eos_token_id=1, pad_token_id=2)
    model = LlamaForCausalLM(cfg).float()
    model.set_attn_implementation("sdpa")
    return model.eval()


def settings(args) -> dict:
    """Every benchmark setting, derived from the CLI (``--quick`` shrinks everything)."""
    q = args.quick
    return dict(
        hidden=64 if q else args.hidden, layers=2 if q else args.layers, heads=4 if q else args.heads,
        context=args.context, seed=0, block_size=BLOCK, threads=torch.get_num_threads(),
        max_new_tokens=32 if q else args.max_new_tokens, repeats=1 if q else args.repeats,
        prompt_lens=[8, 32] if q else [32, 256], batch_sizes=[1, 8],
        growth_cache_lens=[32, 64, 128] if q else [128, 256, 512, 768], growth_batch_sizes=[1] if q else [1, 8],
        train_batch=2 if q else 8, train_tokens=64 if q else 256, train_repeats=1 if q else 3,
        eos_token_ids=[],
    )


def make_prompts(batch: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(len(SPECIALS), vocab, (batch, length), generator=g).tolist()


def median_time(fn, repeats: int):
    """Warm up once, then return (median seconds over ``repeats`` calls, last result)."""
    out, times = fn(), []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


@contextlib.contextmanager
def forward_timer(model):
    """Wrap ``model.forward``; yields a list that collects (q_len, cache_len, t_start, t_end) for every call."""
    calls, inner = [], model.forward

    def timed(*a, **kw):
        ids, cache = kw.get("input_ids", a[0] if a else None), kw.get("cache", kw.get("past_key_values"))
        cached, t0 = (cache.get_seq_length() if cache is not None else 0), time.perf_counter()
        out = inner(*a, **kw)
        calls.append((ids.shape[1], cached, t0, time.perf_counter()))
        return out

    model.forward = timed
    try:
        yield calls
    finally:
        del model.forward


# ------------------------------------------------------------------------------------------------- 1. throughput
def generate_runner(model, max_new: int):
    model.generation_config.eos_token_id = None  # a None in ``gc`` alone falls back to the model's EOS
    gc = GenerationConfig(max_new_tokens=max_new, do_sample=False, eos_token_id=None, pad_token_id=2)

    def run(prompts):
        ids = torch.tensor(prompts)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)
        new = out[:, ids.shape[1]:].tolist()
        assert all(len(n) == max_new for n in new), "generate stopped early: EOS not disabled"
        return new, [len(n) - 1 for n in new]  # NFE after prefill: the prefill already yields the first token

    return run


def decoder_runner(model, tok, mode: str, solver, max_new: int, batch: int):
    cfg = DecodeConfig(mode=mode, block_size=BLOCK, max_new_tokens=max_new, eos_token_ids=(), batch_size=batch)
    dec = BlockDecoder(model, tok, cfg, solver)

    def run(prompts):
        gens = dec.decode_batch(prompts)
        return [g.token_ids for g in gens], [g.nfe for g in gens]

    return run


def runners(model, tok, s: dict, batch: int) -> dict:
    n = s["max_new_tokens"]
    out = {"hf-generate": generate_runner(model, n),
           "ntp": decoder_runner(model, tok, "ntp", get_solver("topk", n=1), n, batch)}
    for name, params in SOLVERS:
        solver = get_solver(name, **params)
        out[f"sbd-{solver.tag}"] = decoder_runner(model, tok, "sbd", solver, n, batch)
    return out


def throughput_row(model, run, prompts, repeats: int) -> tuple[dict, list]:
    with forward_timer(model) as log:
        secs, (tokens, nfe) = median_time(lambda: run(prompts), repeats)
    calls = len(log) / (repeats + 1)  # model calls per run, prefill included
    n_tok = sum(len(t) for t in tokens)
    mean_nfe = statistics.mean(nfe)
    row = dict(wall_s=secs, forwards=calls, fwd_per_s=calls / secs, tok_per_s=n_tok / secs, mean_nfe=mean_nfe,
               tok_per_fwd=n_tok / len(tokens) / mean_nfe, ms_per_fwd=1e3 * secs / calls, tokens_per_row=n_tok / len(tokens))
    return row, tokens


def bench_throughput(model, tok, s: dict, vocab: int) -> tuple[list, bool]:
    rows, ntp_matches = [], True
    for batch in s["batch_sizes"]:
        for plen in s["prompt_lens"]:
            prompts = make_prompts(batch, plen, vocab, seed=plen)
            tokens = {}
            for mode, run in runners(model, tok, s, batch).items():
                row, tokens[mode] = throughput_row(model, run, prompts, s["repeats"])
                rows.append(dict(mode=mode, batch=batch, prompt_len=plen, **row))
            ntp_matches &= tokens["ntp"] == tokens["hf-generate"]
    return rows, ntp_matches


# ------------------------------------------------------------------------------------------------- 2. growth
@torch.no_grad()
def bare_forward_ms(model, batch: int, cache_len: int, q: int, vocab: int, repeats: int = 10) -> float:
    """Median ms of a plain causal forward of ``q`` tokens on a DynamicCache holding ``cache_len`` tokens."""
    ids = torch.tensor(make_prompts(batch, cache_len + q, vocab, seed=cache_len))
    cache = DynamicCache(config=model.config)
    model(input_ids=ids[:, :cache_len], cache=cache, use_cache=True, logits_to_keep=1)
    pos = torch.arange(cache_len, cache_len + q)[None].expand(batch, -1)

    def step():
        model(input_ids=ids[:, cache_len:], position_ids=pos, cache=cache, use_cache=True, logits_to_keep=q)
        cache.crop(-q)

    return 1e3 * median_time(step, repeats)[0]


def decoder_steps(model, tok, batch: int, max_new: int, vocab: int, prompt_len: int) -> list[tuple]:
    """(q_len, cache_len, ms inside model, ms of the whole step) for every SBD forward after the prefill."""
    cfg = DecodeConfig(mode="sbd", block_size=BLOCK, max_new_tokens=max_new, eos_token_ids=(), batch_size=batch)
    dec = BlockDecoder(model, tok, cfg, get_solver("eb", gamma=0.0))
    prompts = make_prompts(batch, prompt_len, vocab, seed=1)
    BlockDecoder(model, tok, dataclasses.replace(cfg, max_new_tokens=2 * BLOCK),
                 get_solver("eb", gamma=0.0)).decode_batch(prompts)  # short warm-up
    with forward_timer(model) as c:
        dec.decode_batch(prompts)
    return [(q, n, 1e3 * (t1 - t0), 1e3 * (t1 - c[i - 1][3])) for i, (q, n, t0, t1) in enumerate(c) if i > 0]


def bench_growth(model, tok, s: dict, vocab: int) -> list:
    rows, prompt_len = [], BLOCK
    for batch in s["growth_batch_sizes"]:
        steps = decoder_steps(model, tok, batch, max(s["growth_cache_lens"]) + 2 * BLOCK, vocab, prompt_len)
        for length in s["growth_cache_lens"]:
            sel = [(m, t) for q, n, m, t in steps if q == BLOCK and abs(n - length) <= BLOCK]
            model_ms, step_ms = (statistics.median(x) for x in zip(*sel))
            bare = bare_forward_ms(model, batch, length, BLOCK, vocab)
            rows.append(dict(batch=batch, cache_len=length, n_forwards=len(sel), bare_ms=bare, model_ms=model_ms,
                             step_ms=step_ms, overhead_ms=step_ms - model_ms, overhead_frac=1 - model_ms / step_ms,
                             step_over_bare=step_ms / bare))
    return rows


# ------------------------------------------------------------------------------------------------- 3. training
def train_step_ms(model, objective: str, s: dict, vocab: int, mask_id: int) -> float:
    g = torch.Generator().manual_seed(s["seed"])
    seq = torch.randint(len(SPECIALS), vocab, (s["train_batch"], s["train_tokens"] + 1), generator=g)
    batch = build_batch(seq, objective, mask_id, block_size=BLOCK, generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        compute_loss(model, batch).loss.backward()
        opt.step()

    secs = median_time(step, s["train_repeats"])[0]
    model.eval()
    return 1e3 * secs


def bench_train(model, s: dict, vocab: int, mask_id: int) -> dict:
    ms = {obj: train_step_ms(model, obj, s, vocab, mask_id) for obj in ("ntp", "sbd")}
    toks = s["train_batch"] * s["train_tokens"]
    out = {f"{obj}_ms_per_step": v for obj, v in ms.items()}
    out.update({f"{obj}_tok_per_s": 1e3 * toks / v for obj, v in ms.items()})
    return dict(batch=s["train_batch"], tokens=s["train_tokens"], sbd_over_ntp=ms["sbd"] / ms["ntp"], **out)


# ------------------------------------------------------------------------------------------------- output
def table(title: str, rows: list, cols: list) -> None:
    print(f"\n== {title}")
    print(" ".join(f"{c:>13}" for c in cols))
    for r in rows:
        print(" ".join(f"{r[c]:>13.3f}" if isinstance(r[c], float) else f"{r[c]!s:>13}" for c in cols))


def rounded(obj):
    """Floats to 4 decimals for the JSON document."""
    if isinstance(obj, (dict, list)):
        return {k: rounded(v) for k, v in obj.items()} if isinstance(obj, dict) else [rounded(v) for v in obj]
    return round(obj, 4) if isinstance(obj, float) else obj


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag, default in (("--hidden", 256), ("--layers", 4), ("--heads", 8), ("--context", 1024),
                          ("--max-new-tokens", 128), ("--repeats", 3), ("--threads", 0)):
        p.add_argument(flag, type=int, default=default, help="0: all CPUs" if flag == "--threads" else None)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of < 30 s")
    p.add_argument("--json", help="also write the JSON document to this path")
    args = p.parse_args()
    torch.set_num_threads(args.threads or os.cpu_count())
    s = settings(args)
    load0 = os.getloadavg()[0]
    tok = char_tokenizer()
    vocab = len(tok)
    model = build_model(s, vocab)
    mask_id = setup_mask_token(tok, model)
    params = sum(x.numel() for x in model.parameters())
    print(f"random LlamaForCausalLM: {params / 1e6:.2f}M params, hidden {s['hidden']}, {s['layers']} layers, "
          f"{s['heads']} heads, vocab {vocab}, fp32, CPU, {s['threads']} threads")
    print(f"EOS disabled (eos_token_ids=()): every run generates exactly {s['max_new_tokens']} tokens per row; "
          "random logits set the solvers' NFE (not comparable with a trained model)")
    tput, ntp_matches = bench_throughput(model, tok, s, vocab)
    table(f"1. decoding throughput (median of {s['repeats']} after 1 warm-up; forwards include the prefill, NFE excludes it)",
          tput, ["mode", "batch", "prompt_len", "fwd_per_s", "tok_per_s", "mean_nfe", "tok_per_fwd", "ms_per_fwd"])
    print(f"NTP decoder tokens == HF generate greedy tokens: {ntp_matches}")
    growth = bench_growth(model, tok, s, vocab)
    table("2. per-forward cost vs cache length (SBD eb-g0, q=16 forwards; overhead = step - time inside model.forward)",
          growth, ["batch", "cache_len", "bare_ms", "model_ms", "step_ms", "overhead_ms", "overhead_frac", "step_over_bare"])
    train = bench_train(model, s, vocab, mask_id)
    table("3. training step (fwd+bwd+AdamW)", [train], list(train))
    doc = dict(benchmark="bench_decode", settings={**s, "params": params, "vocab": vocab},
               env=dict(torch=torch.__version__, transformers=transformers.__version__, python=platform.python_version(),
                        cpu_count=os.cpu_count(), load_avg_start=load0, load_avg_end=os.getloadavg()[0]),
               throughput=tput, ntp_matches_generate=ntp_matches, growth=growth, train=train)
    if load0 > 0.5 * os.cpu_count():
        print(f"NOTE: 1-min load average {load0:.1f} on {os.cpu_count()} CPUs before the start: other processes "
              "share the cores, timings are noisy (oversubscribed threads can be 10x slower; try --threads 1)")
    text = json.dumps(rounded(doc))
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
