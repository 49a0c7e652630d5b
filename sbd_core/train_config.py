"""The fine-tuning settings (:class:`TrainConfig`) and what follows from them alone (:data:`OBJECTIVES`,
:func:`micro_batches_per_step`); no torch import, so the workflow checks a config's ``finetune`` section when Snakemake
parses the rules; the training loop (:mod:`sbd_core.train`) reads them from here."""

from __future__ import annotations

from dataclasses import dataclass

OBJECTIVES = {"ntp": "ntp", "sbd": "sbd", "sbd_no_ntp_grad": "sbd"}  # objective -> batch layout
ATTENTION = ("auto", "flex", "sdpa", "eager")
# Where a fine-tune records in the model config that its MATP labels were shifted (matp_shift): every SBD decoder of
# the checkpoint must read its block the same way (sbd_core.decoding.setup).
SHIFT_CONFIG_KEY = "sbd_matp_shift"
# matp_shift's third value (beside false, the paper's labels, and true, every masked token predicted from the position
# before it): only where that position is a revealed token or the token before the block (sbd_core.masking)
SHIFT_REVEALED = "revealed"
# The paper's values of the settings a recipe may depart from (loss_on_prompt: the paper does not say; every token is
# a target, as in its pretraining-style data).
PAPER_RECIPE = {"loss_on_prompt": True, "matp_on_prompt": True, "matp_loss_weight": 1.0, "matp_shift": False,
                "matp_past_end": False, "block_size_min": 2, "block_size_max": 16}


@dataclass
class TrainConfig:
    """Fine-tuning settings; identical for both arms except ``objective``."""

    objective: str = "sbd"  # "ntp", "sbd" or "sbd_no_ntp_grad" (sbd_core.objective)
    max_steps: int = 100
    batch_size: int = 16  # rows per micro-batch and process
    grad_accum: int = 1  # micro-batches per step (ignored when tokens_per_step is set)
    learning_rate: float = 3e-4
    warmup_steps: int = 10
    weight_decay: float = 0.0  # on matrices and embeddings, not on norms and biases
    max_grad_norm: float = 1.0
    scheduler: str = "cosine"  # any transformers scheduler name
    block_size_min: int = 2
    block_size_max: int = 16
    max_length: int = 256  # tokens per training row (N + 1)
    loss_on_prompt: bool = True
    seed: int = 0
    save_steps: int = 50
    logging_steps: int = 10
    bf16: bool = False  # bf16 compute; master weights and optimizer state stay fp32
    tokens_per_step: int | None = None  # global rows x max_length per optimizer step (paper: 2M); sets grad_accum
    min_lr_ratio: float = 0.0  # floor of the cosine schedule as a fraction of the peak
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    attention: str = "auto"  # auto (flex on GPU, sdpa on CPU) | flex | sdpa | eager
    activation_checkpointing: bool = False
    save_total_limit: int = 2
    # Objective options; the defaults are the paper's recipe, anything else is a departure (see departures()).
    matp_on_prompt: bool = True  # MATP targets may be prompt tokens (False: answers only; NTP follows loss_on_prompt)
    matp_loss_weight: float = 1.0  # scales each MATP label's cross-entropy in the pooled mean (sbd_core.objective)
    matp_shift: bool | str = False  # each masked token predicted from the position before it (True), or only where that
    # position is revealed ("revealed"); sbd_core.masking. Decoders read it from the model config (SHIFT_CONFIG_KEY)
    matp_past_end: bool = False  # masked positions after a row's end of text, to its block's end, are end-of-text MATP
    # targets (sbd_core.masking.fill_past_end); no effect on the ntp objective
    drop_empty_blocks: bool = True  # exact speed-up: leave out noised blocks without a MATP target (sbd_core.masking)

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {self.objective!r}")
        if not self.matp_loss_weight > 0:
            raise ValueError(f"matp_loss_weight must be > 0 (1 = the paper), got {self.matp_loss_weight}")
        if not (isinstance(self.matp_shift, bool) or self.matp_shift == SHIFT_REVEALED):
            raise ValueError(f"matp_shift must be false, true or 'revealed', got {self.matp_shift!r}")
        if not 1 <= self.block_size_min <= self.block_size_max:
            raise ValueError(f"need 1 <= block_size_min <= block_size_max, got {self.block_size_min}, {self.block_size_max}")
        for name in ("max_steps", "batch_size", "grad_accum", "max_length", "save_steps", "logging_steps",
                     "save_total_limit"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.attention not in ATTENTION:
            raise ValueError(f"attention must be one of {ATTENTION}, got {self.attention!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    def record_in(self, model_config) -> None:
        """Write what a decoder of this arm's checkpoints must know into ``model_config``: the shifted MATP labels."""
        if self.matp_shift and OBJECTIVES[self.objective] == "sbd":
            setattr(model_config, SHIFT_CONFIG_KEY, self.matp_shift)

    def departures(self) -> dict:
        """The settings of this arm that depart from the paper's recipe (:data:`PAPER_RECIPE`), e.g. for the report."""
        relevant = PAPER_RECIPE if OBJECTIVES[self.objective] == "sbd" else {"loss_on_prompt": True}
        return {key: getattr(self, key) for key, paper in relevant.items() if getattr(self, key) != paper}


def micro_batches_per_step(config: TrainConfig, world_size: int) -> int:
    """Gradient accumulation steps: ``tokens_per_step / (batch_size x max_length x processes)`` or ``grad_accum``."""
    if config.tokens_per_step is None:
        return config.grad_accum
    per_micro = config.batch_size * config.max_length * world_size
    if config.tokens_per_step % per_micro:
        raise ValueError(
            f"tokens_per_step={config.tokens_per_step} is not a multiple of batch_size x max_length x processes = "
            f"{config.batch_size} x {config.max_length} x {world_size} = {per_micro}; change one of them")
    return config.tokens_per_step // per_micro
