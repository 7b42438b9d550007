#!/usr/bin/env bash
# The test suite in a separate environment with numpy 2 (`make test-numpy2`).
#
# The main environment (.venv) pins numpy<2 because the python backend stub
# of the Triton 2.51 core (nvidia-pytriton 0.7.0) is built against numpy 1.x.
# This runner checks that the binding itself works with numpy 2:
#   - creates .venv-numpy2 at the repository root (reused when present),
#   - installs numpy>=2, the test tools and the Triton core (--no-deps),
#   - builds and installs this package into it (build folder build/numpy2),
#   - builds the identity test backend if build/identity has none,
#   - runs the whole suite from tests/.
# Under numpy 2, python-backend models run in-process
# (Options.python_models="auto"), so their tests run too; tests/conftest.py
# skips only the tests of the stub process itself (marked `python_stub`).
#
# Environment: PYTHON (default python3), PYTEST_ARGS (extra pytest arguments,
# e.g. "-x -k identity"), VENV and BUILD_DIR (default .venv-numpy2 and
# build/numpy2; tests/run_python313.sh sets its own).
set -euo pipefail

VENV=${VENV:-.venv-numpy2}
BUILD_DIR=${BUILD_DIR:-build/numpy2}
# shellcheck source=tests/suite_env.sh
source "$(dirname "$0")/suite_env.sh"

ensure_test_venv "numpy>=2"
# the frontends' servers and the newest tritonclient (http and grpc; 2.51
# pins numpy<2, later ones do not): the network tests' clients
install_serve_extra "numpy>=2"
"$PY" -c 'import numpy, sys; print("numpy", numpy.__version__); sys.exit(int(numpy.__version__.split(".")[0]) < 2)' \
  || { echo "ERROR: $VENV does not have numpy 2 (remove $VENV and rerun)" >&2; exit 1; }

bash tests/install_build_requires.sh "$PY"

echo "== building and installing tritonserver into $VENV ($BUILD_DIR)"
"$PY" -m pip install -q --no-build-isolation --no-deps -C build-dir="$BUILD_DIR" \
  -C cmake.define.TRITONSERVER_TESTING=ON .  # with the test hooks

ensure_identity_backend

echo "== running the suite with numpy 2"
cd tests
# shellcheck disable=SC2086
exec ../$PY -m pytest -c ../pyproject.toml --rootdir .. -p no:cacheprovider ${PYTEST_ARGS:-} .
