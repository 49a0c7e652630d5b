"""Defaults of the code scorer's resource limits, in one place (cheap to import: the benchmarks' settings use them).

``PARALLEL`` sandboxed workers per phase; ``MAX_MEMORY_BYTES`` address space per program (evalplus's own default,
4 GiB); ``TIMEOUT_S`` wall-clock limit of one whole scoring run.
"""

PARALLEL = 2
MAX_MEMORY_BYTES = 4 << 30
TIMEOUT_S = 3600.0
