"""The decoding settings (:class:`DecodeConfig`), shared by every decoder and both modes; no torch import, so the
workflow checks a config's ``decode`` section when Snakemake parses the rules."""

from __future__ import annotations

from dataclasses import dataclass

ENGINES = ("fast", "reference")  # sbd_core.decoding.engine and the readable sbd_core.decoding.reference


@dataclass
class DecodeConfig:
    """Decoding settings shared by the SBD and NTP modes."""

    mode: str = "sbd"  # "sbd" (block decoding with a solver) or "ntp" (one token per forward)
    block_size: int = 16
    max_new_tokens: int = 256
    stop_strings: tuple[str, ...] = ()
    eos_token_ids: tuple[int, ...] | None = None  # None: the tokenizer's EOS
    batch_size: int = 8
    add_special_tokens: bool = True  # passed to the tokenizer when prompts are strings
    engine: str = "fast"  # "fast" (rows on their own, static cache) or "reference"; the factory picks by it
    compile: bool | None = None  # fast engine: compile its step (torch.compile; CUDA graphs on a GPU); None: on GPUs
    max_len: int | None = None  # fast engine: cache positions per row (prompt + new tokens); None: as the prompts need

    def __post_init__(self):
        if self.mode not in ("sbd", "ntp"):
            raise ValueError(f"mode must be 'sbd' or 'ntp', got {self.mode!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {self.engine!r}")
        if self.compile not in (None, True, False):
            raise ValueError(f"compile must be true, false or null (compile on GPUs only), got {self.compile!r}")
        if self.max_len is not None and (not isinstance(self.max_len, int) or self.max_len < 2):
            raise ValueError(f"max_len must be an integer >= 2 or null, got {self.max_len!r}")
        for name in ("block_size", "max_new_tokens", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.stop_strings = tuple(self.stop_strings)
