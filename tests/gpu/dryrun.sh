#!/usr/bin/env bash
# `make gpu-dryrun`: the GPU check here, as the GPU machine will run it but
# without a GPU, to prove the bundle is complete and the script builds
# nothing. A fresh venv of pyenv's Python 3.12 holding only numpy 2, pytest
# and hypothesis (the GPU image without CuPy and torch) runs
# tests/gpu/run_gpu_checks.sh with pip offline (PIP_NO_INDEX=1) and, where
# `unshare -n` works, with no network at all; build tools on PATH are
# stand-ins that fail. Output under build/gpu-dryrun-out/ (summary.md, JUnit XML, log.txt).
#
# Environment: PYTHON312 (default: pyenv's 3.12.1).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
VENV=.venv-gpu-dryrun
OUT=build/gpu-dryrun-out
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

PYTHON312=${PYTHON312:-}
if [ -z "$PYTHON312" ]; then
  PYTHON312="$(pyenv prefix 3.12.1 2>/dev/null || true)/bin/python3.12"
fi
[ -x "$PYTHON312" ] || { echo "ERROR: no Python 3.12 at '$PYTHON312' (set PYTHON312)" >&2; exit 1; }

echo "== fresh $VENV: numpy 2, pytest, hypothesis"
rm -rf "$VENV" "$OUT"
"$PYTHON312" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "numpy>=2" pytest hypothesis
"$VENV/bin/python" -m pip list --format=freeze

# PATH: the venv and the basic tools, behind stand-ins for every build tool
# that fail loudly: a build step left in the script would show.
TRAPS=$(mktemp -d)
trap 'rm -rf "$TRAPS"' EXIT
for tool in cmake ninja make cc c++ gcc g++ clang clang++ nvcc ld; do
  printf '#!/bin/sh\necho "DRY RUN: build tool %s called: $*" >&2\nexit 97\n' "$tool" > "$TRAPS/$tool"
  chmod +x "$TRAPS/$tool"
done
SAFE_PATH="$TRAPS:$ROOT/$VENV/bin:/usr/bin:/bin"
NET=()
if unshare -n true 2>/dev/null; then
  NET=(unshare -n)
  echo "== running with no network (unshare -n)"
else
  echo "== unshare -n unavailable: pip is offline (PIP_NO_INDEX=1), the network is not cut"
fi
set +e
env -i HOME="$HOME" PATH="$SAFE_PATH" TMPDIR="${TMPDIR:-/tmp}" LANG=C.UTF-8 \
  PYTHON="$ROOT/$VENV/bin/python" OUT="$ROOT/$OUT" GPU_CHECKS_ALLOW_NO_GPU=1 PIP_NO_INDEX=1 \
  CUDA_VISIBLE_DEVICES="" \
  "${NET[@]}" bash tests/gpu/run_gpu_checks.sh
rc=$?
set -e
echo "== run_gpu_checks.sh exit status: $rc (output in $OUT/)"
exit $rc
