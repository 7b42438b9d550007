#!/usr/bin/env bash
# `make gpu-bundle`: everything the GPU check installs, prebuilt here, in
# build/gpu-bundle/ (git-ignored; carried to the GPU machine with the tree).
#
#   tritonserver_binding-*-cp312-abi3-*.whl   this package, built with pyenv's 3.12
#   nvidia_pytriton-0.7.0-*.whl       the Triton 2.51 core (unmodified)
#   identity/libtriton_identity.so    the C++ identity test backend
#   MANIFEST.txt                      sizes, sha256, the source they came
#                                     from, glibc/libstdc++ symbol versions
#   SOURCE_HASH                       hash of the sources the wheel and the
#                                     backend were built from (the GPU script
#                                     refuses a bundle older than the tree)
#
# The GPU image already has Python 3.12, numpy 2, pytest and hypothesis
# (../shared/DESIGN.md, "The GPU machine"), so no test dependency is bundled.
# The bundle must stay within 60 MiB (the tool that carries it allows 64 MiB
# with the working tree).
#
# Environment: PYTHON312 (default: pyenv's 3.12.1).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUNDLE=build/gpu-bundle
VENV=.venv-gpu-build
LIMIT_MIB=60
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

PYTHON312=${PYTHON312:-}
if [ -z "$PYTHON312" ]; then
  PYTHON312="$(pyenv prefix 3.12.1 2>/dev/null || true)/bin/python3.12"
fi
[ -x "$PYTHON312" ] || { echo "ERROR: no Python 3.12 at '$PYTHON312' (set PYTHON312)" >&2; exit 1; }

if [ ! -f "$VENV/.ready" ]; then
  echo "== creating $VENV (build tools for Python 3.12)"
  rm -rf "$VENV"
  "$PYTHON312" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q scikit-build-core nanobind setuptools-scm cmake ninja
  touch "$VENV/.ready"
fi
PY=$VENV/bin/python
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version'

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/identity"

echo "== building the tritonserver wheel (cp312 abi3)"
"$PY" -m pip wheel -q --no-build-isolation --no-deps -C build-dir=build/gpu-cp312 \
  -C cmake.define.TRITONSERVER_TESTING=ON -w "$BUNDLE" .  # with the test hooks

echo "== building the identity test backend"
"$VENV/bin/cmake" -S tests/backends/identity -B build/gpu-identity -G Ninja \
  -DCMAKE_MAKE_PROGRAM="$ROOT/$VENV/bin/ninja" -DCMAKE_BUILD_TYPE=Release >/dev/null
"$VENV/bin/cmake" --build build/gpu-identity
cp build/gpu-identity/libtriton_identity.so "$BUNDLE/identity/"

echo "== fetching the Triton core, pyproject.toml's dependency group core (pip's cache when present)"
"$PY" -m pip download -q --no-deps --only-binary :all: -d "$BUNDLE" --group core

bash tests/gpu/source_hash.sh > "$BUNDLE/SOURCE_HASH"

# The manifest; it also fails the bundle when a library needs a newer glibc
# than the core wheel's own floor (manylinux_2_35) or a libstdc++ newer than
# GCC 12's (Ubuntu 22.04): the GPU image is only known to run the core.
"$PY" - "$BUNDLE" <<'PYEOF'
import hashlib, os, re, subprocess, sys, zipfile

bundle = sys.argv[1]
lines = []
git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True)
lines.append(f"source: {git.stdout.strip() or 'unknown'} (hash {open(os.path.join(bundle, 'SOURCE_HASH')).read().strip()})")
lines.append(f"built with: Python {sys.version.split()[0]}")
total = 0
limits = {"GLIBC": (2, 35), "GLIBCXX": (3, 4, 30)}
problems = []
checked_wheel = 0  # extension modules of our wheel whose symbol versions were read
for dirpath, _, files in sorted(os.walk(bundle)):
    for name in sorted(files):
        path = os.path.join(dirpath, name)
        size = os.path.getsize(path)
        total += size
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        lines.append(f"{size:>10}  {digest}  {os.path.relpath(path, bundle)}")
        libraries = []
        if name.endswith(".so"):
            libraries.append((path, open(path, "rb").read()))
        elif name.startswith("tritonserver_binding-") and name.endswith(".whl"):
            with zipfile.ZipFile(path) as z:
                libraries += [(f"{name}:{n}", z.read(n)) for n in z.namelist() if n.endswith(".so")]
            checked_wheel += len(libraries)
        for label, data in libraries:
            for kind, floor in limits.items():
                found = {tuple(int(x) for x in v.split(b".")) for v in re.findall(rb"\b" + kind.encode() + rb"_([0-9.]+[0-9])\b", data)}
                newest = max(found, default=None)
                if newest is not None:
                    lines.append(f"{'':10}  needs {kind}_{'.'.join(map(str, newest))}: {label}")
                    if newest > floor:
                        problems.append(f"{label} needs {kind}_{'.'.join(map(str, newest))} (> {'.'.join(map(str, floor))})")
lines.append(f"total: {total} bytes ({total / 2**20:.1f} MiB)")
open(os.path.join(bundle, "MANIFEST.txt"), "w").write("\n".join(lines) + "\n")
if not checked_wheel:
    problems.append("no extension module found in a tritonserver_binding-*.whl: its glibc/libstdc++ needs were not checked")
if problems:
    sys.exit("ERROR: " + "; ".join(problems))
PYEOF

echo "== $BUNDLE"
cat "$BUNDLE/MANIFEST.txt"
du -sh "$BUNDLE"
size=$(du -sb "$BUNDLE" | cut -f1)
if [ "$size" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
  echo "ERROR: $BUNDLE is $size bytes, over ${LIMIT_MIB} MiB" >&2
  exit 1
fi
echo "carry it with: carry [\"$BUNDLE\"]; on the GPU machine: bash tests/gpu/run_gpu_checks.sh"
