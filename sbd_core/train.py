"""NTP and SBD fine-tuning of any Hugging Face causal LM, on 1 to N processes (torch FSDP2 + DCP, see distributed.py).

One short loop owns the schedule (AdamW, warmup + cosine to ``min_lr_ratio`` of the peak), gradient accumulation,
clipping, logging and resume; :mod:`sbd_core.distributed` owns sharding, precision and checkpoints;
:mod:`sbd_core.masking` the batch layout and :mod:`sbd_core.objective` the loss. (The transformers ``Trainer`` is not
used: accelerate 1.15 shards with FSDP only on accelerators, so it could not run the sharded path on CPUs, and its loss
accounting is per device.)

What a run does not depend on: the number of processes and the micro-batch split. Step ``s`` trains on the same global
batch of ``rows_per_step`` rows (a seeded permutation per epoch), draws one block size ``k ~ U[block_size_min,
block_size_max]`` from (seed, step) (paper: [2, 16]) and each row's noise from (seed, step, row position), and its loss is
the pooled mean over every label of the global batch (the counts are summed over processes before the backward). So 1
process with 8 rows per micro-batch, 2 processes with 4, or 1 process with 4 x 2 accumulation give the same losses up to
float summation order, and a run resumes exactly, on any number of processes.

Progress: a tqdm bar in the main process and a ``train_log.jsonl`` line per logging step with the loss (mean of the
steps' pooled losses), the pooled NTP and MATP losses, learning rate, gradient norm and tokens/s (all processes).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Collection

import torch

from . import distributed
from .masking import IGNORE_INDEX, SBDBatch, block_end_after, build_batch, drop_empty_segments, fill_past_end
from .objective import compute_loss
from .train_config import OBJECTIVES, TrainConfig, micro_batches_per_step

log = logging.getLogger("sbd_core")


def tokenize_examples(tokenizer, pairs, max_length: int) -> list[dict]:
    """``(prompt, target)`` pairs -> rows of ``bos + prompt + target + eos`` ids with a target mask, cut to max_length."""
    rows = []
    for prompt, target in pairs:
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        t = tokenizer(target, add_special_tokens=False)["input_ids"]
        bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        ids = (bos + p + t + [tokenizer.eos_token_id])[:max_length]
        rows.append({"input_ids": ids, "target": ([0] * (len(bos) + len(p)) + [1] * (len(t) + 1))[:max_length]})
    return rows


def pad_rows(rows: list[dict], pad_token_id: int, width: int | None = None) -> dict:
    """Collate tokenized rows: right-pad ids to ``width`` (default: the longest row), a document id per token (-1 on
    padding), the target mask.

    A packed row lists its documents' lengths in ``doc_lengths`` (ids 0, 1, ...); any other row is one document.
    """
    width = width or max(len(r["input_ids"]) for r in rows)
    seq = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    docs = torch.full((len(rows), width), -1, dtype=torch.long)
    target = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        lengths = torch.as_tensor(r.get("doc_lengths", [n]), dtype=torch.long)
        if int(lengths.sum()) != n:
            raise ValueError(f"row {i}: doc_lengths sum to {int(lengths.sum())}, but the row has {n} tokens")
        seq[i, :n] = torch.as_tensor(r["input_ids"])
        docs[i, :n] = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        target[i, : len(r["target"])] = torch.as_tensor(r["target"])
    return {"sequence": seq, "doc_ids": docs, "target": target}


# --------------------------------------------------------------------------------------------------------------- batches
class RowOrder:
    """The global row sequence: epoch ``e`` is a permutation of all rows seeded by (seed, e), whatever the process count."""

    def __init__(self, n_rows: int, seed: int):
        if n_rows < 1:
            raise ValueError("no training rows")
        self.n_rows, self.seed, self._perms = n_rows, seed, {}

    def row(self, position: int) -> int:
        """The row index at global ``position`` (position // n_rows is the epoch)."""
        epoch, offset = divmod(position, self.n_rows)
        if epoch not in self._perms:
            generator = torch.Generator().manual_seed(self.seed * 7919 + epoch)
            self._perms = {e: p for e, p in self._perms.items() if e == epoch - 1}  # a step may straddle two epochs
            self._perms[epoch] = torch.randperm(self.n_rows, generator=generator)
        return int(self._perms[epoch][offset])


def _seeded(*parts: int) -> torch.Generator:
    """A CPU generator seeded from integers (seed, step, position, ...)."""
    value = 0
    for part in parts:
        value = (value * 1_000_003 + part + 1) % (2**63 - 1)
    return torch.Generator().manual_seed(value)


def block_size_for_step(config: TrainConfig, step: int) -> int:
    """k for this optimizer step (0 for ntp): one draw from (seed, step), shared by every micro-batch and process."""
    if OBJECTIVES[config.objective] == "ntp":
        return 0
    return int(torch.randint(config.block_size_min, config.block_size_max + 1, (1,), generator=_seeded(config.seed, step)))


def layout(inputs: dict, positions: list[int], config: TrainConfig, mask_token_id: int | None, step: int,
           eos_token_id: int | None = None) -> SBDBatch:
    """The SBD (or NTP) batch of collated ``inputs``; row i's noise comes from (seed, step, positions[i]).
    ``eos_token_id``: needed by ``matp_past_end`` (:func:`sbd_core.masking.fill_past_end`)."""
    k, kind = block_size_for_step(config, step), OBJECTIVES[config.objective]
    sequence, doc_ids, target = inputs["sequence"], inputs["doc_ids"], inputs["target"]
    ntp_mask = None if config.loss_on_prompt else target
    matp_mask = ntp_mask if config.matp_on_prompt else target
    if config.matp_past_end and kind == "sbd":
        if eos_token_id is None:
            raise ValueError("matp_past_end needs the tokenizer's end-of-text token id")
        sequence, doc_ids, fill = fill_past_end(sequence, doc_ids, k, eos_token_id)
        ntp_targets = torch.ones_like(target) if ntp_mask is None else ntp_mask
        ntp_mask = ntp_targets.bool() & ~fill
        matp_mask = (ntp_targets if matp_mask is None else matp_mask).bool() | fill
    parts = []
    for i, position in enumerate(positions):
        row = slice(i, i + 1)
        parts.append(build_batch(sequence[row], kind, mask_token_id, k, doc_ids=doc_ids[row],
                                 loss_mask=None if ntp_mask is None else ntp_mask[row],
                                 generator=_seeded(config.seed, step, position),
                                 matp_loss_mask=None if matp_mask is None else matp_mask[row],
                                 shift=config.matp_shift))
    cat = {name: torch.cat([getattr(p, name) for p in parts]) for name in ("input_ids", "position_ids", "labels", "doc_ids")}
    batch = SBDBatch(**cat, block_size=k, objective=kind)
    return drop_empty_segments(batch) if kind == "sbd" and config.drop_empty_blocks else batch


class BatchSource:
    """This process's micro-batches of each step: micro-batch m of process r holds global slots (m x P + r) x B ..."""

    def __init__(self, rows, config: TrainConfig, runtime: distributed.Runtime, pad_token_id: int, mask_token_id,
                 eos_token_id: int | None = None):
        self.rows, self.config, self.runtime = rows, config, runtime
        self.pad_token_id, self.mask_token_id, self.eos_token_id = pad_token_id, mask_token_id, eos_token_id
        self.accum = micro_batches_per_step(config, runtime.world_size)
        self.rows_per_step = self.accum * runtime.world_size * config.batch_size
        self.order = RowOrder(len(rows), config.seed)

    def step(self, step: int) -> list[SBDBatch]:
        """The layouts of this process's micro-batches for optimizer step ``step``.

        Every micro-batch is padded to the longest row of the whole global batch, so a row's layout (which of its tokens
        are inputs, where its noised copy starts) does not depend on how the batch is split.
        """
        b, world, first_of_step = self.config.batch_size, self.runtime.world_size, step * self.rows_per_step
        width = max(len(self.rows[self.order.row(p)]["input_ids"])
                    for p in range(first_of_step, first_of_step + self.rows_per_step))
        if self.config.matp_past_end and OBJECTIVES[self.config.objective] == "sbd":  # room for the longest fill
            width = block_end_after(width, block_size_for_step(self.config, step)) + 1
        out = []
        for micro in range(self.accum):
            first = first_of_step + (micro * world + self.runtime.rank) * b
            positions = list(range(first, first + b))
            inputs = pad_rows([self.rows[self.order.row(p)] for p in positions], self.pad_token_id, width)
            out.append(layout(inputs, positions, self.config, self.mask_token_id, step, self.eos_token_id))
        return out


# --------------------------------------------------------------------------------------------------------------- model
def attention_backend(requested: str, device: torch.device) -> str:
    """The attention implementation to train with; FlexAttention has no backward on CPU, so CPU runs fall back."""
    if requested == "auto":
        return "flex_attention" if device.type == "cuda" else "sdpa"
    if requested == "flex" and device.type != "cuda":
        log.warning("attention 'flex' asked for, but FlexAttention has no backward pass on %s (torch %s): training "
                    "with the dense mask (sdpa) instead", device.type, torch.__version__)
        return "sdpa"
    return "flex_attention" if requested == "flex" else requested


def prepare_model(model, config: TrainConfig, runtime: distributed.Runtime):
    """fp32 master weights, the attention backend, activation checkpointing, then sharding (several processes)."""
    if any(p.dtype != torch.float32 for p in model.parameters()):
        log.info("casting the model to float32 for training: master weights and AdamW state stay fp32%s",
                 " (compute in bf16)" if config.bf16 else "")
        model.float()
    model.set_attn_implementation(attention_backend(config.attention, runtime.device))
    if config.activation_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()
    return distributed.shard(model, runtime, config.bf16)


def build_optimizer(model, config: TrainConfig):
    """AdamW (decay on matrices and embeddings, not on norms and biases) and the warmup + cosine schedule."""
    from transformers import get_scheduler

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=config.learning_rate, betas=(config.adam_beta1, config.adam_beta2),
                                  eps=config.adam_eps)
    name, extra = config.scheduler, None
    if config.min_lr_ratio > 0:
        if name != "cosine":
            raise ValueError(f"min_lr_ratio needs scheduler 'cosine', got {name!r}")
        name, extra = "cosine_with_min_lr", {"min_lr_rate": config.min_lr_ratio}
    scheduler = get_scheduler(name, optimizer, num_warmup_steps=config.warmup_steps,
                              num_training_steps=config.max_steps, scheduler_specific_kwargs=extra)
    return optimizer, scheduler


# --------------------------------------------------------------------------------------------------------------- loop
def train_step(model, optimizer, scheduler, batches: list[SBDBatch], config: TrainConfig,
               runtime: distributed.Runtime) -> dict:
    """Forward/backward every micro-batch with the loss normalised by the global label count, clip, step.

    Returns the step's global sums: ntp and matp loss sums and counts, and non-padding tokens.
    """
    labels = sum(int((b.labels != IGNORE_INDEX).sum()) for b in batches)
    total = float(distributed.all_reduce_sum(torch.tensor([float(labels)], device=runtime.device), runtime)[0])
    scale = runtime.world_size / max(total, 1.0)  # FSDP averages gradients over processes: undo that, sum instead
    sums = torch.zeros(5, dtype=torch.float64)
    for batch in batches:
        with distributed.autocast(runtime, config.bf16):
            out = compute_loss(model, batch.to(runtime.device), ntp_gradient=config.objective != "sbd_no_ntp_grad",
                               matp_loss_weight=config.matp_loss_weight)
        (out.loss * ((out.n_ntp + out.n_matp) * scale)).backward()
        parts = [out.ntp_loss * out.n_ntp if out.n_ntp else 0.0, out.n_ntp,
                 out.matp_loss * out.n_matp if out.n_matp else 0.0, out.n_matp, int((batch.doc_ids >= 0).sum())]
        sums += torch.tensor(parts, dtype=torch.float64)
    max_norm = config.max_grad_norm if config.max_grad_norm > 0 else float("inf")
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
    sums = distributed.all_reduce_sum(sums.to(runtime.device), runtime).cpu()
    return {"sums": sums, "grad_norm": float(norm), "learning_rate": lr}


class LogWindow:
    """Collects the steps between two log lines and turns them into one ``train_log.jsonl`` record."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.steps, self.sums, self.clock, self.last = [], torch.zeros(5, dtype=torch.float64), time.perf_counter(), {}

    def add(self, result: dict) -> None:
        s = result["sums"]
        self.steps.append(float((s[0] + s[2]) / max(float(s[1] + s[3]), 1.0)))
        self.sums += s
        self.last = result

    def record(self, step: int, epoch: float) -> dict:
        s, now = self.sums, time.perf_counter()
        record = {"step": step, "loss": sum(self.steps) / len(self.steps),
                  "ntp_loss": float(s[0] / s[1]) if s[1] else math.nan,
                  "matp_loss": float(s[2] / s[3]) if s[3] else math.nan,
                  "learning_rate": self.last["learning_rate"], "grad_norm": self.last["grad_norm"],
                  "tokens_per_s": float(s[4]) / max(now - self.clock, 1e-9), "epoch": epoch}
        self.reset()
        return {k: v for k, v in record.items() if not (isinstance(v, float) and math.isnan(v))}


def trim_log(log_path: Path, step: int) -> None:
    """Keep only log lines the resumed run will not write again (all of them go on a fresh start)."""
    if not log_path.exists():
        return
    kept = [line for line in log_path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
    log_path.write_text("".join(line + "\n" for line in kept))


def _resume(checkpoint_dir: Path, model, optimizer, scheduler, log_path: Path, runtime) -> tuple[int, str | None]:
    """Load the newest checkpoint if any; return (first step to run, checkpoint path)."""
    found = distributed.last_checkpoint(checkpoint_dir)
    step = 0
    if found is not None:
        state = distributed.load_checkpoint(found, model, optimizer)
        scheduler.load_state_dict(state["scheduler"])
        step = state["step"]
        log.info("resuming from %s (step %d, written by %d processes)", found, step, state["world_size"])
    if runtime.is_main:
        trim_log(log_path, step)
    distributed.barrier(runtime)
    return step, str(found) if found else None


def train(model, tokenizer, rows, config: TrainConfig, checkpoint_dir: Path, log_path: Path, progress: bool = True,
          callbacks: list | None = None, runtime: distributed.Runtime | None = None, stop_at: int | None = None,
          export_steps: Collection[int] = (), export: Callable[[int], None] | None = None) -> dict:
    """Train ``model`` in place on tokenized ``rows`` (a sequence of dicts, see :func:`pad_rows`); resume from the newest
    checkpoint in ``checkpoint_dir`` if any. ``callbacks``: callables ``cb(step, record_or_None)`` after every step.
    ``stop_at``: stop after this step with a checkpoint (a time-limited job); the next call resumes from it.
    ``export(step)`` runs on every process after each step of ``export_steps``, before that step's checkpoint, so a
    resumed run never skips an export (it keeps the model of that step: :func:`sbd_core.launch.worker`).

    Returns a summary with the final logged losses. Under several processes every process calls this; the caller saves
    the model (:func:`sbd_core.distributed.full_state_dict`, :mod:`sbd_core.checkpoint`).
    """
    from tqdm.auto import tqdm

    from .mask_token import mask_token_id

    runtime = runtime or distributed.init_runtime(str(next(model.parameters()).device))
    checkpoint_dir, log_path = Path(checkpoint_dir), Path(log_path)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    mask_id = mask_token_id(model) if OBJECTIVES[config.objective] == "sbd" else None
    source = BatchSource(rows, config, runtime, tokenizer.pad_token_id or 0, mask_id, tokenizer.eos_token_id)
    model = prepare_model(model, config, runtime)
    optimizer, scheduler = build_optimizer(model, config)
    start, resumed = _resume(checkpoint_dir, model, optimizer, scheduler, log_path, runtime)
    window, record = LogWindow(), {}
    bar = tqdm(total=config.max_steps, initial=start, disable=not (progress and runtime.is_main), desc=config.objective)
    last = min(config.max_steps, stop_at or config.max_steps)
    for step in range(start, last):
        window.add(train_step(model, optimizer, scheduler, source.step(step), config, runtime))
        done, logged = step + 1, None
        if done % config.logging_steps == 0 or done == config.max_steps:
            logged = record = window.record(done, done * source.rows_per_step / len(rows))
            if runtime.is_main:
                with open(log_path, "a") as f:
                    f.write(json.dumps(record) + "\n")
                bar.set_postfix(loss=f"{record['loss']:.3f}")
        if export is not None and done in export_steps:
            export(done)
        if (done % config.save_steps == 0 or done == last) and done < config.max_steps:
            state = {"step": done, "world_size": runtime.world_size, "scheduler": scheduler.state_dict()}
            distributed.save_checkpoint(checkpoint_dir, done, model, optimizer, state, runtime, config.save_total_limit)
        bar.update(1)
        for callback in callbacks or []:
            callback(done, logged)
    bar.close()
    return {"resumed_from": resumed, "steps": max(last, start), "finished": last == config.max_steps,
            "final": record, "config": asdict(config),
            "world_size": runtime.world_size, "micro_batches_per_step": source.accum,
            "rows_per_step": source.rows_per_step}
