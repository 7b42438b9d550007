#!/usr/bin/env bash
# The GPU check in one shot (docs/gpu.md), for a machine with a CUDA GPU and
# no network. Builds nothing: everything comes from build/gpu-bundle/, made
# by `make gpu-bundle` and carried along with the working tree:
#   bash tests/gpu/run_gpu_checks.sh
#
# Expects a plain `python3` (3.12) with numpy 2 and pytest (CuPy and PyTorch
# for the GPU cases; hypothesis for some identity tests). Installs the bundle
# offline into a scratch folder (PYTHONPATH), never into the system, then
# runs, each phase under one overall deadline (4 minutes):
#   1. a probe: driver, the CUDA runtimes mapped into the process, versions;
#   2. the GPU tests (-m gpu: tests/test_gpu.py, tests/test_zero_copy.py);
#   3. the identity-model tests (C++ backend only, CUDA present);
#   4. NVIDIA-compatible GPU cases (tests/gpu/test_nvidia_compat.py);
#   5. a small benchmark (64 MiB GPU output to CuPy vs a CuPy copy);
# and writes JUnit XML, probe.json, bench.json and summary.md under $OUT.
#
# Environment: PYTHON (default python3), OUT (default build/gpu-checks-out),
# GPU_BUNDLE (default build/gpu-bundle), GPU_CHECKS_ALLOW_NO_GPU=1 (no GPU is
# not a failure: the GPU tests are skipped and the rest must pass; for
# `make gpu-dryrun`), GPU_CHECKS_DEADLINE (seconds, default 240).
# Exit status: 0 when every phase passed (and a GPU was used, unless allowed).
set -uo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
BUNDLE=${GPU_BUNDLE:-$ROOT/build/gpu-bundle}
OUT=${OUT:-$ROOT/build/gpu-checks-out}
DEADLINE=${GPU_CHECKS_DEADLINE:-240}
ALLOW_NO_GPU=${GPU_CHECKS_ALLOW_NO_GPU:-0}
START=$(date +%s)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-checks.XXXXXX")
SITE=$WORK/site
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
export PIP_NO_INDEX=1 PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export XDG_CACHE_HOME=$WORK/cache
trap 'rm -rf "$WORK"' EXIT

exec > >(tee "$OUT/log.txt") 2>&1

elapsed() { echo $(( $(date +%s) - START )); }
left() { local l=$(( DEADLINE - $(elapsed) )); [ "$l" -gt 5 ] && echo "$l" || echo 5; }
section() { printf '\n==== %s (t=%ss)\n' "$*" "$(elapsed)"; }
die() { echo "ERROR: $*"; echo "setup: FAILED ($*)" > "$OUT/setup.txt"; summarize; exit 2; }
summarize() {
  "$PY" "$ROOT/tests/gpu/summarize.py" "$OUT" "$(elapsed)" "$ALLOW_NO_GPU" || true
}
# timeout sends SIGINT first: pytest then stops and still writes its JUnit XML.
bounded() { local cap=$1; shift; local t; t=$(left); [ "$t" -gt "$cap" ] && t=$cap
  timeout -s INT -k 15 "$t" "$@"; }

rm -f "$OUT"/*.xml "$OUT"/probe.json "$OUT"/bench.json "$OUT"/summary.md "$OUT"/setup.txt "$OUT"/phases.txt

section "Bundle $BUNDLE"
[ -d "$BUNDLE" ] || die "no bundle at $BUNDLE: run \`make gpu-bundle\` and carry build/gpu-bundle"
cat "$BUNDLE/MANIFEST.txt" 2>/dev/null | head -3
want=$(cat "$BUNDLE/SOURCE_HASH" 2>/dev/null || echo none)
have=$(bash tests/gpu/source_hash.sh)
[ "$want" = "$have" ] || die "the bundle was built from other sources (hash $want, this tree $have): run \`make gpu-bundle\` again"
shopt -s nullglob
wheels=("$BUNDLE"/tritonserver_binding-*.whl "$BUNDLE"/nvidia_pytriton-*.whl)
shopt -u nullglob
[ "${#wheels[@]}" -eq 2 ] || die "the bundle needs one tritonserver_binding and one nvidia_pytriton wheel, has: ${wheels[*]:-none}"
IDENTITY=$BUNDLE/identity/libtriton_identity.so
[ -f "$IDENTITY" ] || die "no $IDENTITY in the bundle"

section "Install the bundle offline into $SITE"
"$PY" --version
bounded 90 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "${wheels[@]}" \
  || die "pip install from the bundle failed"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
# The bundle's core, whatever else the image has (an NGC /opt/tritonserver
# would otherwise come first).
cores=("$SITE"/nvidia_pytriton.libs/libtritonserver*.so*)
[ -f "${cores[0]}" ] || die "no libtritonserver in the installed core wheel"
export TRITONSERVER_LIBRARY=${cores[0]}
export TRITONSERVER_TEST_IDENTITY_LIBRARY=$IDENTITY
"$PY" -c "import pytest" 2>/dev/null || die "pytest is not installed for $PY (the GPU image has it)"

section "Probe: driver, CUDA runtimes in the process, versions"
(cd "$WORK" && bounded 60 "$PY" "$ROOT/tests/gpu/probe.py" "$SITE" "$OUT/probe.json") \
  || die "the probe failed (tritonserver not importable from the bundle, or no core)"

PYTEST=("$PY" -m pytest -c ../pyproject.toml --rootdir .. -p no:cacheprovider -q -rfEs)
run_phase() {  # name cap pytest-args...
  local name=$1 cap=$2; shift 2
  section "Tests: $name"
  (cd tests && bounded "$cap" "${PYTEST[@]}" --junitxml="$OUT/$name.xml" "$@")
  local rc=$?
  echo "$name $rc" >> "$OUT/phases.txt"
  echo "$name: pytest exit status $rc"
}

run_phase gpu 100 -m gpu test_gpu.py test_zero_copy.py
# Identity models only (the python backend's stub needs numpy<2); -k as in
# the files' names for identity models. test_delivery.py last: a response
# kept alive by its user-queue feeder would fail later files' leak checks.
run_phase identity 80 -m "not gpu" \
  -k "identity or from_dlpack or memory_buffer or bytes_tensor or subclasses or not_found" \
  test_tensor_dlpack.py test_infer_datatypes.py test_request_inputs.py test_zero_copy.py test_delivery.py
run_phase nvidia_compat 40 gpu/test_nvidia_compat.py

section "Benchmark: 64 MiB GPU output to cupy.from_dlpack vs a CuPy copy"
(cd tests && bounded 30 "$PY" gpu/bench.py "$OUT/bench.json") || echo "benchmark: exit status $?"

section "Summary"
"$PY" "$ROOT/tests/gpu/summarize.py" "$OUT" "$(elapsed)" "$ALLOW_NO_GPU"
exit $?
