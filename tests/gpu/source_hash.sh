#!/usr/bin/env bash
# Prints one hash of the sources the GPU bundle is built from (the package,
# its C++ extension, the build configuration, the identity test backend).
# Works without .git: make_bundle.sh stores it, run_gpu_checks.sh compares.
set -euo pipefail
cd "$(dirname "$0")/../.."
find cpp tritonserver tests/backends/identity CMakeLists.txt pyproject.toml -type f \
  ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.so' -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16
