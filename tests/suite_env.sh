# Sourced by tests/run_asan.sh and tests/run_numpy2.sh (after `set -euo
# pipefail`, with VENV set: their own virtual environment): goes to the
# repository root (ROOT) and sets PYTHON (default python3), PY and
# IDENTITY; the functions below set up the environment and the identity
# test backend the same way for both.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
PY=$VENV/bin/python
IDENTITY=build/identity/libtriton_identity.so
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

# Creates $VENV (reused once $VENV/.ready exists) with `numpy_spec`
# ("numpy<2" or "numpy>=2"), the dependency group test, the build tools and
# the Triton core of pyproject.toml's group core (--no-deps).
ensure_test_venv() {
  local numpy_spec=$1
  [ -f "$VENV/.ready" ] && return 0
  echo "== creating $VENV"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q "$numpy_spec" --group test nanobind scikit-build-core cmake ninja
  "$PY" -m pip install -q --no-deps --group core  # pyproject.toml: the core pin
  touch "$VENV/.ready"
}

# Builds the identity test backend into build/identity when $IDENTITY is
# missing (it is test code: never instrumented, shared by every suite).
ensure_identity_backend() {
  [ -f "$IDENTITY" ] && return 0
  echo "== building the identity test backend ($IDENTITY)"
  "$VENV/bin/cmake" -S tests/backends/identity -B build/identity -G Ninja \
    -DCMAKE_MAKE_PROGRAM="$ROOT/$VENV/bin/ninja" -DCMAKE_BUILD_TYPE=Release >/dev/null
  "$VENV/bin/cmake" --build build/identity
}

# Installs what the serve extra of pyproject.toml lists (the frontends'
# servers and tritonclient[grpc]) with `numpy_spec` kept, plus tritonclient's
# HTTP client for the tests.
install_serve_extra() {
  local numpy_spec=$1
  "$PY" - "$numpy_spec" <<'PYEOF' > "$VENV/serve-requirements.txt"
import sys, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["serve"]
print("\n".join(extra + ["tritonclient[http]", sys.argv[1]]))
PYEOF
  "$PY" -m pip install -q -r "$VENV/serve-requirements.txt"
}
