"""NTP and SBD fine-tuning of any Hugging Face causal LM, on the transformers ``Trainer``.

The Trainer owns the loop, optimizer (AdamW), schedule (warmup + cosine, SBD_SPEC §1.6), checkpointing, resume (model,
optimizer, scheduler and RNG states) and multi-device setups; this module only supplies the batch layout
(:mod:`sbd_core.masking`) and the loss (:mod:`sbd_core.objective`). The SBD block size is drawn per step, uniformly in
``[block_size_min, block_size_max]`` (paper: [2, 16]). Progress: the Trainer's bar (step, ETA) plus a ``train_log.jsonl``
line per logging step with the pooled, NTP and MATP losses, learning rate and tokens/s.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from .masking import SBDBatch, build_batch
from .objective import OBJECTIVES, compute_loss


@dataclass
class TrainConfig:
    """Fine-tuning settings; identical for both arms except ``objective``."""

    objective: str = "sbd"  # "ntp", "sbd" or "sbd_no_ntp_grad" (sbd_core.objective)
    max_steps: int = 100
    batch_size: int = 16
    grad_accum: int = 1
    learning_rate: float = 3e-4
    warmup_steps: int = 10
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    scheduler: str = "cosine"
    block_size_min: int = 2
    block_size_max: int = 16
    max_length: int = 256  # tokens per training row (N + 1)
    loss_on_prompt: bool = True
    seed: int = 0
    save_steps: int = 50
    logging_steps: int = 10
    bf16: bool = False
    # Objective options; the defaults are the paper's recipe, anything else is a named departure (see the report).
    matp_on_prompt: bool = True  # MATP targets may be prompt tokens (False: answers only; NTP follows loss_on_prompt)
    matp_loss_weight: float = 1.0  # each MATP label counts this many times in the pooled mean (sbd_core.objective)
    drop_empty_blocks: bool = True  # exact speed-up: leave out noised blocks without a MATP target (sbd_core.masking)

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {self.objective!r}")
        if not self.matp_loss_weight > 0:
            raise ValueError(f"matp_loss_weight must be > 0 (1 = the paper), got {self.matp_loss_weight}")
        if not 1 <= self.block_size_min <= self.block_size_max:
            raise ValueError(f"need 1 <= block_size_min <= block_size_max, got {self.block_size_min}, {self.block_size_max}")
        for name in ("max_steps", "batch_size", "grad_accum", "max_length", "save_steps", "logging_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


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


def pad_rows(rows: list[dict], pad_token_id: int) -> dict:
    """Collate tokenized rows: right-pad ids, document id -1 on padding, the target mask."""
    width = max(len(r["input_ids"]) for r in rows)
    seq = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    docs = torch.full((len(rows), width), -1, dtype=torch.long)
    target = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        seq[i, : len(r["input_ids"])] = torch.tensor(r["input_ids"])
        docs[i, : len(r["input_ids"])] = 0
        target[i, : len(r["target"])] = torch.tensor(r["target"])
    return {"sequence": seq, "doc_ids": docs, "target": target}


class SBDTrainer(Trainer):
    """``Trainer`` whose loss is :func:`sbd_core.objective.compute_loss`; logs the NTP and MATP parts too.

    The step's block size and the noising draw come from a generator seeded by (seed, step, micro-batch), not from the
    global RNG: the dataloader fetches one batch ahead, so global-RNG draws would not survive a resume exactly.
    """

    def __init__(self, *args, train_config: TrainConfig, mask_token_id: int | None, **kwargs):
        super().__init__(*args, **kwargs)
        self.train_config, self.mask_token_id = train_config, mask_token_id
        self._parts = {"ntp_loss": [], "matp_loss": []}
        self._tokens, self._clock = 0, time.perf_counter()
        self._micro_step = (-1, 0)

    def _generator(self, device) -> torch.Generator:
        step = self.state.global_step
        micro = self._micro_step[1] + 1 if self._micro_step[0] == step else 0
        self._micro_step = (step, micro)
        seed = (self.train_config.seed * 1_000_003 + step * 1_009 + micro) % (2**63)
        return torch.Generator(device=device).manual_seed(seed)

    def layout(self, inputs: dict) -> SBDBatch:
        """The SBD (or NTP) batch for this micro-step."""
        cfg, seq = self.train_config, inputs["sequence"]
        gen = self._generator(seq.device)
        layout, k = OBJECTIVES[cfg.objective], 0
        if layout == "sbd":
            k = int(torch.randint(cfg.block_size_min, cfg.block_size_max + 1, (1,), generator=gen, device=seq.device))
        loss_mask = None if cfg.loss_on_prompt else inputs["target"]
        matp_mask = loss_mask if cfg.matp_on_prompt else inputs["target"]
        return build_batch(seq, layout, self.mask_token_id, k, doc_ids=inputs["doc_ids"], loss_mask=loss_mask,
                           generator=gen, matp_loss_mask=matp_mask, drop_empty_blocks=cfg.drop_empty_blocks)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self._tokens += int((inputs["doc_ids"] >= 0).sum())
        cfg = self.train_config
        out = compute_loss(model, self.layout(inputs), ntp_gradient=cfg.objective != "sbd_no_ntp_grad",
                           matp_loss_weight=cfg.matp_loss_weight)
        for name in self._parts:
            value = getattr(out, name)
            if not math.isnan(value):
                self._parts[name].append(value)
        return (out.loss, None) if return_outputs else out.loss

    def log(self, logs, start_time=None):
        if "loss" in logs:
            for name, values in self._parts.items():
                if values:
                    logs[name] = sum(values) / len(values)
                values.clear()
            now = time.perf_counter()
            logs["tokens_per_s"] = self._tokens / max(now - self._clock, 1e-9)
            self._tokens, self._clock = 0, now
        super().log(logs, start_time)


class JsonlLogger(TrainerCallback):
    """Append one JSON line per logging step to ``path``."""

    def __init__(self, path: Path):
        self.path = path

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            with open(self.path, "a") as f:
                f.write(json.dumps({"step": state.global_step, **logs}) + "\n")


def trim_log(log_path: Path, resume: str | None) -> None:
    """Keep only log lines the resumed run will not write again (all of them go on a fresh start)."""
    if not log_path.exists():
        return
    step = int(Path(resume).name.split("-")[-1]) if resume else 0
    kept = [line for line in log_path.read_text().splitlines() if line and json.loads(line)["step"] <= step]
    log_path.write_text("".join(line + "\n" for line in kept))


def training_arguments(config: TrainConfig, checkpoint_dir: Path, progress: bool) -> TrainingArguments:
    """The Trainer settings derived from ``config``."""
    return TrainingArguments(
        output_dir=str(checkpoint_dir),
        max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        learning_rate=config.learning_rate,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        lr_scheduler_type=config.scheduler,
        logging_steps=config.logging_steps,
        save_steps=config.save_steps,
        save_total_limit=2,
        seed=config.seed,
        data_seed=config.seed,
        bf16=config.bf16,
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        disable_tqdm=not progress,
    )


def train(model, tokenizer, rows: list[dict], config: TrainConfig, checkpoint_dir: Path, log_path: Path,
          progress: bool = True, callbacks: list | None = None) -> dict:
    """Train ``model`` in place on tokenized ``rows``; resume from the newest checkpoint in ``checkpoint_dir`` if any.

    Returns a summary with the final logged losses. The caller saves the model (see :mod:`sbd_core.checkpoint`).
    """
    from .mask_token import mask_token_id

    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    resume = get_last_checkpoint(str(checkpoint_dir))
    trim_log(log_path, resume)
    mask_id = mask_token_id(model) if OBJECTIVES[config.objective] == "sbd" else None
    trainer = SBDTrainer(
        model=model,
        args=training_arguments(config, checkpoint_dir, progress),
        train_dataset=rows,
        data_collator=lambda rows: pad_rows(rows, tokenizer.pad_token_id or 0),
        callbacks=[JsonlLogger(log_path), *(callbacks or [])],
        train_config=config,
        mask_token_id=mask_id,
    )
    trainer.train(resume_from_checkpoint=resume)
    history = [h for h in trainer.state.log_history if "loss" in h]
    return {"resumed_from": resume, "steps": trainer.state.global_step, "final": history[-1] if history else {},
            "config": asdict(config)}
