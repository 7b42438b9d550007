#!/usr/bin/env bash
# The core matrix (`make test-cores`): every Triton core on PyPI, each run
# with this package (docs/cores.md).
#
# For each nvidia-pytriton wheel below (one per distinct core), the wheel is
# downloaded once into build/cores/ and installed there with --target (kept
# for later runs); then the package in .venv is tested with
# TRITONSERVER_LIBRARY pointing at that core and TRITON_CORE_VERSION saying
# which Triton version it must report:
#   - tests/test_cores.py: start, metadata, identity and python-backend
#     inference, and each optional C function (UnsupportedError where the
#     core lacks it, the feature working where it has it);
#   - the identity-backend suites and the python-backend ones (skipped, with
#     the reason, where the core has no stub for this Python).
# Needs `make build` first (the Makefile target does it). Prints one summary
# line per core at the end; exits non-zero if any core failed.
#
# Environment: PYTEST_ARGS (extra pytest arguments).
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=$ROOT/.venv/bin/python
CACHE=$ROOT/build/cores
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

# wheel version -> the Triton version its core reports.
CORES="0.4.2:2.39.0 0.5.0:2.41.0 0.7.0:2.51.0"
SUITES="test_cores.py test_infer_datatypes.py test_identity_properties.py test_request_inputs.py
  test_model_repository.py test_metrics.py test_zero_copy.py test_tensor_dlpack.py"
# The cores before 2.51 word this refusal differently ("expected 3 inputs but
# got 2"); 2.51 names the input, which this test checks under `make test`.
DESELECT="--deselect tests/test_request_inputs.py::test_identity_wrong_rank_and_missing_input"

mkdir -p "$CACHE"
summary=()
status=0
for entry in $CORES; do
  wheel=${entry%%:*}
  version=${entry##*:}
  target=$CACHE/$wheel
  if [ ! -f "$target/.ready" ]; then
    "$PY" -m pip download -q --no-deps -d "$CACHE" "nvidia-pytriton==$wheel" || exit 1
    rm -rf "$target"
    "$PY" -m pip install -q --no-deps --no-index --target "$target" \
      "$CACHE"/nvidia_pytriton-"$wheel"-*.whl || exit 1
    touch "$target/.ready"
  fi
  library=$(ls "$target"/nvidia_pytriton.libs/libtritonserver*.so)
  echo "=== nvidia-pytriton $wheel: $library (expects Triton $version)"
  log=$CACHE/$wheel.log
  (cd tests && TRITONSERVER_LIBRARY=$library TRITON_CORE_VERSION=$version \
     "$PY" -m pytest -c ../pyproject.toml --rootdir .. -q -p no:cacheprovider -rs \
     $DESELECT ${PYTEST_ARGS:-} $SUITES) 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || status=1
  counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
  summary+=("nvidia-pytriton $wheel: Triton $version: ${counts:-no result} (exit $rc)")
done
echo
echo "=== core matrix"
printf '%s\n' "${summary[@]}"
exit $status
