"""Fine-tune step time: SBD vs NTP at the same rows, tokens and settings, dense mask vs FlexAttention, CPU or GPU.

Each measurement is the engine's own optimizer step (:func:`sbd_core.train.train_step`: layout, forward, backward,
clip, AdamW) on a random Llama-shaped model over packed rows of random tokens (documents of ``--doc-tokens``), fp32
master weights, bf16 compute on GPU. Reported: median step time over ``--repeats`` after one warm-up step (which also
compiles FlexAttention), tokens/s (row tokens, before the SBD doubling), and SBD/NTP per attention backend, by wall
time and by this process's CPU time (the steadier clock on a shared CPU machine).

With ``--layers 1 2`` (two depths) it also fits step time = fixed + layers x per_layer and extrapolates to
``--target-layers`` (Llama-3.1 8B: 32) for :func:`sbd_core.cost.finetune_cost`. Prints tables, then ONE JSON line last.

    CPU (minutes): .venv/bin/python benchmarks/bench_train.py
    H200 (< 3 min): python benchmarks/bench_train.py --device cuda --preset llama8b --layers 1 2 --row-tokens 32768 \
        --attention flex --repeats 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from sbd_core.distributed import Runtime
from sbd_core.objective import model_inputs
from sbd_core.train import BatchSource, build_optimizer, prepare_model, train_step
from sbd_core.train_config import TrainConfig

PRESETS = {  # hidden, intermediate, heads, kv heads, vocab
    "tiny": dict(hidden_size=128, intermediate_size=384, num_attention_heads=4, num_key_value_heads=2, vocab_size=512),
    "small": dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3,
                  vocab_size=49152),  # SmolLM2-135M
    "llama8b": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                    vocab_size=128256),  # Llama-3.1 8B
}
MASK_ID = 3


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def build(args, layers: int, objective: str, attention: str, runtime: Runtime):
    """Model, optimizer, scheduler and batch source for one measurement."""
    torch.manual_seed(0)
    shape = PRESETS[args.preset]
    with runtime.device:  # initialise on the device: an 8B-wide embedding is slow to initialise on CPU
        model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=layers, max_position_embeddings=args.row_tokens,
                                             bos_token_id=0, eos_token_id=1, pad_token_id=2, **shape))
    model.config.sbd_mask_token_id = MASK_ID
    config = TrainConfig(objective=objective, batch_size=args.batch, max_length=args.row_tokens, attention=attention,
                         bf16=runtime.device.type == "cuda", activation_checkpointing=args.checkpointing,
                         max_steps=10_000, warmup_steps=1, learning_rate=1e-4)
    model = prepare_model(model, config, runtime)
    optimizer, scheduler = build_optimizer(model, config)
    gen = torch.Generator().manual_seed(1)
    docs = max(1, args.row_tokens // args.doc_tokens)
    rows = [{"input_ids": torch.randint(7, shape["vocab_size"], (args.row_tokens,), generator=gen).tolist(),
             "target": [1] * args.row_tokens,
             "doc_lengths": [args.row_tokens // docs] * (docs - 1) + [args.row_tokens - (docs - 1) * (args.row_tokens // docs)]}
            for _ in range(args.batch * 2)]
    return model, optimizer, scheduler, BatchSource(rows, config, runtime, 2, MASK_ID if objective == "sbd" else None), config


def step_ms(args, layers: int, objective: str, attention: str, runtime: Runtime) -> dict:
    """Median wall time of one optimizer step and of building its attention mask (ms), after one warm-up step;
    peak GPU memory (GiB). An out-of-memory step is reported, not raised."""
    model, optimizer, scheduler, source, config = build(args, layers, objective, attention, runtime)
    times, cpu_times, mask_times = [], [], []
    if runtime.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    try:
        for step in range(args.repeats + 1):
            batches = source.step(step)
            sync(runtime.device)
            start = time.perf_counter()
            model_inputs(model, batches[0].to(runtime.device))
            sync(runtime.device)
            mask_times.append((time.perf_counter() - start) * 1000)
            start, cpu_start = time.perf_counter(), time.process_time()
            train_step(model, optimizer, scheduler, batches, config, runtime)
            sync(runtime.device)
            times.append((time.perf_counter() - start) * 1000)
            cpu_times.append((time.process_time() - cpu_start) * 1000)
    except torch.OutOfMemoryError as err:
        return {"step_ms": None, "error": f"out of memory: {str(err)[:200]}"}
    finally:
        del model, optimizer
        if runtime.device.type == "cuda":
            torch.cuda.empty_cache()
    peak = torch.cuda.max_memory_allocated() / 2**30 if runtime.device.type == "cuda" else None
    return {"step_ms": statistics.median(times[1:]), "process_cpu_ms": statistics.median(cpu_times[1:]),
            "mask_ms": statistics.median(mask_times[1:]), "peak_gib": peak}


def fit_layers(points: dict[int, float], target: int) -> dict:
    """step = fixed + layers x per_layer from two depths; the extrapolated step time at ``target`` layers."""
    (l1, t1), (l2, t2) = sorted(points.items())[:2]
    per_layer = (t2 - t1) / (l2 - l1)
    fixed = t1 - l1 * per_layer
    return {"fixed_ms": fixed, "per_layer_ms": per_layer, "target_layers": target, "step_ms": fixed + target * per_layer}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    p.add_argument("--layers", type=int, nargs="+", default=[2])
    p.add_argument("--target-layers", type=int, default=32)
    p.add_argument("--row-tokens", type=int, default=256, help="tokens per training row (N + 1, before doubling)")
    p.add_argument("--doc-tokens", type=int, default=64, help="length of the packed documents in a row")
    p.add_argument("--batch", type=int, default=8, help="rows per step")
    p.add_argument("--attention", nargs="+", default=["sdpa"], choices=["sdpa", "flex", "eager"])
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    runtime = Runtime(rank=0, world_size=1, device=torch.device(args.device))
    results = {}
    for attention in args.attention:
        for objective in ("ntp", "sbd"):
            for layers in args.layers:
                got = step_ms(args, layers, objective, attention, runtime)
                results[f"{attention}/{objective}/{layers}"] = got
                ms = got["step_ms"]
                print(f"{attention:6s} {objective:4s} layers={layers:3d}  " + (
                    f"{ms:10.1f} ms/step  {args.batch * args.row_tokens / ms * 1000:12.0f} row tokens/s  "
                    f"mask {got['mask_ms']:.1f} ms  peak {got['peak_gib'] or 0:.1f} GiB" if ms else got["error"]),
                    flush=True)
    summary = {"device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu",
               "torch": torch.__version__, "threads": torch.get_num_threads(), "settings": vars(args),
               "step_ms": results, "sbd_over_ntp": {}, "extrapolated": {}}
    ms = {key: value["step_ms"] for key, value in results.items()}
    for attention in args.attention:
        for layers in args.layers:
            sbd, ntp = results[f"{attention}/sbd/{layers}"], results[f"{attention}/ntp/{layers}"]
            for clock in ("step_ms", "process_cpu_ms"):
                ratio = sbd[clock] / ntp[clock] if sbd.get(clock) and ntp.get(clock) else None
                summary["sbd_over_ntp"][f"{attention}/{layers}/{clock}"] = ratio
        for objective in ("ntp", "sbd"):
            points = {n: ms[f"{attention}/{objective}/{n}"] for n in args.layers}
            if len(points) >= 2 and all(points.values()):
                fit = fit_layers(points, args.target_layers)
                fit["row_tokens_per_s"] = args.batch * args.row_tokens / fit["step_ms"] * 1000
                summary["extrapolated"][f"{attention}/{objective}"] = fit
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
