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
# Under numpy 2, tests/conftest.py skips every test that needs a
# python-backend model (reason: "the python backend stub of this Triton core
# needs numpy<2"); the identity-backend tests and the rest all run.
#
# Environment: PYTHON (default python3), PYTEST_ARGS (extra pytest arguments,
# e.g. "-x -k identity").
set -euo pipefail

VENV=.venv-numpy2
# shellcheck source=tests/suite_env.sh
source "$(dirname "$0")/suite_env.sh"

ensure_test_venv "numpy>=2"
# for test_kserve_routes.py; tritonclient 2.51 pins numpy<2, later ones do not
"$PY" -m pip install -q "tritonclient[http]" "numpy>=2"
"$PY" -c 'import numpy, sys; print("numpy", numpy.__version__); sys.exit(int(numpy.__version__.split(".")[0]) < 2)' \
  || { echo "ERROR: $VENV does not have numpy 2 (remove $VENV and rerun)" >&2; exit 1; }

bash tests/install_build_requires.sh "$PY"

echo "== building and installing tritonserver into $VENV (build/numpy2)"
"$PY" -m pip install -q --no-build-isolation --no-deps -C build-dir=build/numpy2 \
  -C cmake.define.TRITONSERVER_TESTING=ON .  # with the test hooks

ensure_identity_backend

echo "== running the suite with numpy 2"
cd tests
# shellcheck disable=SC2086
exec ../$PY -m pytest -c ../pyproject.toml --rootdir .. -p no:cacheprovider ${PYTEST_ARGS:-} .
