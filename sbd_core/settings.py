"""Typed settings of config sections that several stages share; every default lives here and only here.

The workflow's JSON schema checks types and ranges but carries no defaults, so a key left out of a config takes the
value below, whether a stage runs under Snakemake or by hand (``python -m sbd_core ...``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields


def from_section(cls, section: dict | None, where: str):
    """``cls(**section)`` for a dataclass, naming the config section and the allowed keys on an unknown key."""
    section = dict(section or {})
    allowed = sorted(f.name for f in fields(cls))
    unknown = sorted(set(section) - set(allowed))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {where}; allowed: {allowed}")
    return cls(**section)


@dataclass(frozen=True)
class RuntimeSettings:
    """Where models run: ``device`` (cpu, cuda, cuda:N), weight ``dtype`` for decoding, CPU ``threads`` per job."""

    device: str = "cpu"
    dtype: str = "float32"
    threads: int = 2

    def __post_init__(self):
        if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", self.device):
            raise ValueError(f"runtime.device must be cpu, cuda or cuda:N, got {self.device!r}")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"runtime.dtype must be float32, bfloat16 or float16, got {self.dtype!r}")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"runtime.threads must be an integer >= 1, got {self.threads!r}")

    @property
    def gpus(self) -> int:
        """GPUs one model job needs (0 on the CPU)."""
        return 0 if self.device == "cpu" else 1
