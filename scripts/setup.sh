#!/usr/bin/env bash
# Create .venv with the pinned, tested package set. Installs the CPU torch wheel first so nothing pulls a CUDA build;
# on a GPU machine set TORCH_SPEC (e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# shellcheck disable=SC2086
.venv/bin/python -m pip install --quiet $TORCH_SPEC
.venv/bin/python -m pip install --quiet -r requirements/ci.txt
.venv/bin/python -m pip install --quiet --no-deps -e .
.venv/bin/python -m pip check
