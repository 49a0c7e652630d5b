#!/usr/bin/env bash
# Create .venv with the pinned, tested package set (docs/install.md). torch comes first, as a CPU build: PyPI's torch
# wheel for Linux is the CUDA build, which brings GBs of NVIDIA libraries. A torch wheel that pip's own configuration
# offers locally (find-links) is used as it is; otherwise the CPU build comes from PyTorch's CPU index. On a GPU
# machine set TORCH_SPEC, e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128".
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH=torch==2.13.0
CPU_INDEX=https://download.pytorch.org/whl/cpu
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip install --quiet)
if [ -n "${TORCH_SPEC:-}" ]; then
  # shellcheck disable=SC2086
  "${PIP[@]}" $TORCH_SPEC
elif ! "${PIP[@]}" --no-index --no-deps "$TORCH" 2>/dev/null; then
  "${PIP[@]}" "$TORCH" --index-url "$CPU_INDEX"
fi
"${PIP[@]}" -r requirements/ci.txt
"${PIP[@]}" --no-deps -e .
.venv/bin/python -m pip check
