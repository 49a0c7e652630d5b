"""Defaults of the code scorer's resource limits, in one place (cheap to import: the benchmarks' settings use them).

``PARALLEL`` sandboxed workers per phase; ``MAX_MEMORY_BYTES`` address space per program (evalplus's own default,
4 GiB); ``TIMEOUT_S`` wall-clock limit of one whole scoring run.
"""

PARALLEL = 2
MAX_MEMORY_BYTES = 4 << 30
TIMEOUT_S = 3600.0

# LiveCodeBench: lcb_runner's time limit per test (wall clock, 6 s), a cap on one problem's decompressed tests (a zlib
# bomb stops there; real problems' tests are far smaller) and the whole scoring run (1,055 problems of release_v6,
# most of them programs that run every test)
LCB_TEST_TIMEOUT_S = 6.0
LCB_MAX_TESTS_BYTES = 1 << 30
LCB_TIMEOUT_S = 6 * 3600.0
