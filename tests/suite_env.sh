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
# servers and tritonclient[grpc]) with the requirements given as arguments
# kept (e.g. "numpy>=2"), plus tritonclient's HTTP client for the tests.
install_serve_extra() {
  "$PY" - "$@" <<'PYEOF' > "$VENV/serve-requirements.txt"
import sys, tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["serve"]
print("\n".join(extra + ["tritonclient[http]"] + sys.argv[1:]))
PYEOF
  "$PY" -m pip install -q -r "$VENV/serve-requirements.txt"
}

# perf_analyzer 2.51 (NVIDIA's load generator; tests/test_perf_analyzer.py
# and benchmarks/frontends.py) in build/perf_analyzer/: bin/perf_analyzer
# from the tritonclient 2.51.0 wheel (the one in $VENV, else downloaded
# with pip), lib/ with the two libraries it needs beyond glibc:
# libb64.so.0d and libcudart.so.12 (it loads the CUDA runtime even for
# system shared memory), the copies bundled in the Triton core's wheel
# (nvidia-pytriton: libb64 1.2 and CUDA runtime 12.6, the versions 2.51 was
# built with), else Debian's libb64-0d (apt-get download, no root) and
# PyPI's nvidia-cuda-runtime-cu12. `build/perf_analyzer/perf_analyzer` runs
# it with lib/ on the library path. Made once.
PERF_ANALYZER_DIR=build/perf_analyzer
ensure_perf_analyzer() {
  local dir=$ROOT/$PERF_ANALYZER_DIR
  [ -x "$dir/perf_analyzer" ] && return 0
  echo "== setting up perf_analyzer 2.51 in $PERF_ANALYZER_DIR"
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib" "$dir/download"
  local site
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  local client
  client=$("$PY" -c 'import importlib.metadata as m; print(m.version("tritonclient"))' 2>/dev/null || true)
  if [ -x "$VENV/bin/perf_analyzer" ] && [ "$client" = 2.51.0 ]; then
    cp "$VENV/bin/perf_analyzer" "$dir/bin/"
  else
    "$PY" -m pip download -q --no-deps -d "$dir/download" "tritonclient==2.51.0" \
      --only-binary=:all: --platform manylinux1_x86_64
    unzip -q -o -j "$dir"/download/tritonclient-2.51.0-*.whl '*/perf_analyzer' -d "$dir/bin"
    chmod +x "$dir/bin/perf_analyzer"
  fi
  local b64 cudart
  b64=$(ls "$site"/nvidia_pytriton.libs/libb64-*.so.0d 2>/dev/null | head -1 || true)
  cudart=$(ls "$site"/nvidia_pytriton.libs/libcudart-*.so.12* 2>/dev/null | head -1 || true)
  if [ -z "$b64" ]; then
    (cd "$dir/download" && apt-get download -q libb64-0d >/dev/null)
    dpkg -x "$dir"/download/libb64-0d_*.deb "$dir/download/libb64"
    b64=$(ls "$dir"/download/libb64/usr/lib/*/libb64.so.0d)
  fi
  if [ -z "$cudart" ]; then
    "$PY" -m pip download -q --no-deps -d "$dir/download" nvidia-cuda-runtime-cu12 \
      --only-binary=:all: --platform manylinux2014_x86_64
    unzip -q -o "$dir"/download/nvidia_cuda_runtime_cu12-*.whl 'nvidia/cuda_runtime/lib/*' -d "$dir/download"
    cudart=$dir/download/nvidia/cuda_runtime/lib/libcudart.so.12
  fi
  cp "$b64" "$dir/lib/libb64.so.0d"
  cp "$cudart" "$dir/lib/libcudart.so.12"
  rm -rf "$dir/download"
  cat > "$dir/perf_analyzer.tmp" <<SHEOF
#!/bin/sh
# perf_analyzer 2.51 with its libraries (tests/suite_env.sh, ensure_perf_analyzer).
LD_LIBRARY_PATH="$dir/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$dir/bin/perf_analyzer" "\$@"
SHEOF
  chmod +x "$dir/perf_analyzer.tmp"
  local version
  version=$("$dir/perf_analyzer.tmp" --version 2>&1 || true)
  case $version in
    *"Version 2.51."*) ;;
    *) echo "perf_analyzer in $PERF_ANALYZER_DIR does not run: $version"; return 1 ;;
  esac
  mv "$dir/perf_analyzer.tmp" "$dir/perf_analyzer"
}
