#!/usr/bin/env bash
# PyTriton's own unit tests of the API tritonserver.pytriton provides, run
# against it with their `pytriton` imports redirected (tests/pytriton_redirect.py);
# nothing of PyTriton is committed here.
#   tests/run_pytriton_unit_tests.sh <a PyTriton checkout, e.g. of tag v0.7.0> [test file names...]
# Default files: its tests of the decorators, tensors and security config.
# Those that import PyTriton's internals (its proxy, server and config
# generator) do not apply and are not listed.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 <pytriton checkout> [tests/unit/test_*.py names...]" >&2; exit 2; }
CHECKOUT=$(cd "$1" && pwd); shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")  # absolute: the tests run from a folder of their own
FILES=("$@")
[ ${#FILES[@]} -gt 0 ] || FILES=(test_decorators.py test_decorators_batch.py test_tensor.py test_triton_security.py)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/tests/unit"
cp "$CHECKOUT/tests/__init__.py" "$WORK/tests/"
cp "$CHECKOUT/tests/unit/__init__.py" "$CHECKOUT/tests/unit/utils.py" "$WORK/tests/unit/"
for f in "${FILES[@]}"; do cp "$CHECKOUT/tests/unit/$f" "$WORK/tests/unit/"; done
# utils.py imports PyTriton's config generator at the top, which these tests do not use
sed -i 's/^from pytriton.model_config.generator import ModelConfigGenerator$/ModelConfigGenerator = None/' \
  "$WORK/tests/unit/utils.py"
cat > "$WORK/conftest.py" <<PYEOF
import sys
sys.path.insert(0, "$ROOT/tests")
import pytriton_redirect
pytriton_redirect.install()
PYEOF
# the tests' own dependencies, beside (not in) the environment under test
if ! "$PY" -c 'import wrapt, pytest_mock' 2>/dev/null; then
  "$PY" -m pip install -q --no-deps --target "$WORK/site" wrapt pytest-mock
  export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
fi
# Tests that patch Triton._initialize_server (PyTriton's start of its
# tritonserver subprocess, which does not exist here) do not apply.
DESELECT=()
if [ -f "$WORK/tests/unit/test_triton_security.py" ]; then
  for t in TestTritonTokenManagement::test_explicit_token_used TestTritonTokenManagement::test_custom_restricted_endpoints \
           TestTritonTokenManagement::test_default_endpoints_used_when_none_provided \
           TestTritonConfigurationFlow::test_restriction_parameters_set_in_server_config \
           TestTritonConfigurationFlow::test_cli_args_generation_includes_restrictions \
           TestTritonConfigurationFlow::test_get_access_token_returns_string \
           TestEmptyRestrictionsHandling::test_empty_restrictions_no_server_config_set \
           TestEmptyRestrictionsHandling::test_none_restrictions_sets_default_server_config \
           TestEmptyRestrictionsHandling::test_triton_unrestricted_behavior_restoration; do
    DESELECT+=(--deselect "tests/unit/test_triton_security.py::$t")
  done
fi
cd "$WORK"
"$PY" -m pytest -p no:cacheprovider -p pytest_mock -q -rfE "${DESELECT[@]}" tests/unit
