#!/usr/bin/env bash
# Checks a built wheel (make wheel): its manylinux tag, the extension's NEEDED
# list, and the smoke tests in a fresh virtualenv — first with no Triton core
# installed, then with the nvidia-pytriton core (server start, one inference).
#   bash tests/check_wheel.sh dist/tritonserver_binding-*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL=$1
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== auditwheel show"
.venv/bin/auditwheel show "$WHEEL"

# The extension and the in-process python backend library: no libpython,
# libtritonserver or CUDA (their symbols resolve from the process).
unzip -q -o "$WHEEL" 'tritonserver/_native*.so' 'tritonserver/_backend/libtriton_python.so' -d "$WORK/unzipped"
for library in "$WORK"/unzipped/tritonserver/_native*.so "$WORK"/unzipped/tritonserver/_backend/libtriton_python.so; do
  echo "== NEEDED of ${library#"$WORK"/unzipped/}"
  needed=$(readelf -d "$library" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
  echo "$needed"
  if echo "$needed" | grep -vqE '^(libstdc\+\+\.so|libgcc_s\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|ld-linux)'; then
    echo "ERROR: unexpected NEEDED entries" >&2
    exit 1
  fi
done

echo "== fresh virtualenv, no Triton core"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --upgrade pip  # --group needs pip >= 25.1
"$WORK/venv/bin/pip" install -q "$WHEEL" "numpy<2" --group test
cp -r tests/test_wheel_smoke.py examples "$WORK/"
mkdir -p "$WORK/tests" && mv "$WORK/test_wheel_smoke.py" "$WORK/tests/"
(cd "$WORK/tests" && TRITONSERVER_WHEEL_CHECK=1 ../venv/bin/python -m pytest -q -p no:cacheprovider test_wheel_smoke.py)

echo "== with the nvidia-pytriton core"
"$WORK/venv/bin/pip" install -q --no-deps --group core
(cd "$WORK/tests" && TRITONSERVER_WHEEL_CHECK=1 ../venv/bin/python -m pytest -q -p no:cacheprovider -rs test_wheel_smoke.py)
echo "wheel OK: $WHEEL"
