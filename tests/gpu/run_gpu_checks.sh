#!/usr/bin/env bash
# One-shot GPU checks, for a machine with a CUDA GPU and no network.
#
# Expects: Python 3.12 with numpy 2, CuPy, PyTorch, nanobind,
# scikit-build-core, cmake and ninja preinstalled, and the nvidia-pytriton
# wheel (the Triton 2.51 core) in .whl/ at the repository root. pytest is
# taken from the system, or installed offline from .whl/ if wheels for it
# are there.
#
# Everything is installed into a scratch target folder (PYTHONPATH), never
# into the system site-packages. Runs in about 2-4 minutes:
#   bash tests/gpu/run_gpu_checks.sh
# Environment: PYTHON (default python3), GPU_CHECK_DIR (scratch folder,
# default build/gpu-checks), OUT (if set, JUnit XML reports are written there).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
WORK=${GPU_CHECK_DIR:-$ROOT/build/gpu-checks}
SITE=$WORK/site
export PYTHONDONTWRITEBYTECODE=1
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
START=$(date +%s)

section() { printf '\n==================== %s (t=%ss) ====================\n' "$*" "$(( $(date +%s) - START ))"; }
fail() { echo "ERROR: $*" >&2; exit 1; }

section "Machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi || echo "(nvidia-smi failed with status $?)"
else
  echo "nvidia-smi not found"
fi
"$PY" --version
"$PY" - <<'PYEOF'
import importlib
for name in ("numpy", "cupy", "torch", "nanobind", "scikit_build_core", "pytest"):
    try:
        module = importlib.import_module(name)
        print(f"{name:18} {getattr(module, '__version__', '?')}")
    except Exception as e:  # report, do not fail: the tests skip what is missing
        print(f"{name:18} MISSING ({type(e).__name__}: {e})")
try:
    import torch
    print("torch.cuda.is_available():", torch.cuda.is_available())
except Exception:
    pass
PYEOF

section "Install the Triton core wheel (offline, into $SITE)"
shopt -s nullglob
wheels=("$ROOT"/.whl/nvidia_pytriton-*.whl)
shopt -u nullglob
[ "${#wheels[@]}" -ge 1 ] || fail "no .whl/nvidia_pytriton-*.whl in $ROOT (carry it with the working tree)"
rm -rf "$SITE"
mkdir -p "$SITE"
timeout 120 "$PY" -m pip install --no-deps --no-index --target "$SITE" "${wheels[0]}"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PY" -c "import pytest" 2>/dev/null; then
  section "Install pytest offline from .whl/"
  timeout 60 "$PY" -m pip install --no-index --find-links "$ROOT/.whl" --target "$SITE" pytest \
    || fail "pytest is not installed and no pytest wheels are in .whl/"
fi

section "Build and install the tritonserver package"
timeout 240 "$PY" -m pip install --no-build-isolation --no-deps --target "$SITE" "$ROOT"
(cd /tmp && "$PY" - "$SITE" <<'PYEOF'
import os, sys
import tritonserver
print("tritonserver", tritonserver.__version__, "from", tritonserver.__file__)
if not os.path.realpath(tritonserver.__file__).startswith(os.path.realpath(sys.argv[1])):
    raise SystemExit("the tritonserver imported is not the one just built")
PYEOF
)

section "Build the identity test backend"
CMAKE=cmake
command -v cmake >/dev/null 2>&1 || CMAKE=$("$PY" -c "import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, 'cmake'))")
GENERATOR=()
if command -v ninja >/dev/null 2>&1; then
  GENERATOR=(-G Ninja)
fi
CACHE=build/identity/CMakeCache.txt
if [ -f "$CACHE" ] && ! grep -q "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT/tests/backends/identity\$" "$CACHE"; then
  echo "stale $CACHE (made elsewhere): removing build/identity"
  rm -rf build/identity
fi
timeout 120 "$CMAKE" -S tests/backends/identity -B build/identity "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release
timeout 120 "$CMAKE" --build build/identity
ls -l build/identity/libtriton_identity.so

section "Triton core and CUDA as tritonserver sees them"
(cd /tmp && timeout 60 "$PY" - <<'PYEOF'
import tritonserver
from tritonserver import _core
print("core:", tritonserver.load_core())
print("cuda:", _core.cuda_status())
print("devices:", _core.cuda_device_count())
if _core.cuda_device_count() == 0:
    raise SystemExit("tritonserver sees no CUDA device: the GPU tests would all be skipped")
PYEOF
)

PYTEST=("$PY" -m pytest -c ../pyproject.toml --rootdir .. -p no:cacheprovider -v -rs)
junit() { if [ -n "${OUT:-}" ]; then echo "--junitxml=$OUT/$1.xml"; fi; }
status=0

section "GPU tests (-m gpu)"
set +e
(cd tests && timeout 240 "${PYTEST[@]}" $(junit gpu) -m gpu test_gpu.py test_zero_copy.py)
gpu_status=$?
set -e
echo "GPU tests: exit status $gpu_status"
[ "$gpu_status" -eq 0 ] || status=1

section "Identity-model tests with CUDA present (-m 'not gpu', C++ backend only)"
set +e
# -k picks the tests that use only identity models (or none); the python
# backend is not usable there. test_delivery.py goes last: a response kept
# alive by the user-queue feeder would otherwise fail later files' leak checks.
(cd tests && timeout 240 "${PYTEST[@]}" $(junit identity) -m "not gpu" \
  -k "identity or from_dlpack or memory_buffer or bytes_tensor or subclasses or not_found" \
  test_tensor_dlpack.py test_infer_datatypes.py test_request_inputs.py test_zero_copy.py test_delivery.py)
identity_status=$?
set -e
echo "Identity tests: exit status $identity_status"
[ "$identity_status" -eq 0 ] || status=1

section "Summary"
echo "GPU tests:      $([ "$gpu_status" -eq 0 ] && echo PASSED || echo "FAILED ($gpu_status)")"
echo "Identity tests: $([ "$identity_status" -eq 0 ] && echo PASSED || echo "FAILED ($identity_status)")"
echo "Total time: $(( $(date +%s) - START ))s"
exit "$status"
