#!/usr/bin/env bash
# The suite on Python 3.13 with numpy 2 (`make test-python313`, part of
# `make test`): Python 3.13 has no numpy<2, so python-backend models run
# in-process there. Uses pyenv's 3.13 (PYTHON313 overrides); where there is
# none, says so and skips. The environment is .venv-py313 (build folder
# build/py313); everything else is tests/run_numpy2.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON313=${PYTHON313:-}
if [ -z "$PYTHON313" ] && command -v pyenv >/dev/null 2>&1; then
  prefix=$(pyenv prefix 3.13.0 2>/dev/null || true)
  [ -n "$prefix" ] && PYTHON313="$prefix/bin/python3"
fi
if [ -z "$PYTHON313" ] || [ ! -x "$PYTHON313" ]; then
  echo "== SKIPPED the Python 3.13 run: no Python 3.13 (install it with pyenv: pyenv install 3.13.0, or set PYTHON313)"
  exit 0
fi
echo "== the suite on $("$PYTHON313" --version) ($PYTHON313) with numpy 2"
PYTHON="$PYTHON313" VENV=.venv-py313 BUILD_DIR=build/py313 exec bash tests/run_numpy2.sh
