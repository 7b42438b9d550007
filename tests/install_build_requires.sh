#!/usr/bin/env bash
# Installs pyproject.toml's [build-system] requires into the environment of
# the given python (builds with --no-build-isolation need them there; the
# list changes over time, so it is read, not copied).
#   bash tests/install_build_requires.sh .venv-numpy2/bin/python
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$1
mapfile -t BUILD_REQUIRES < <("$PY" - <<'PYEOF'
try:
    import tomllib
except ImportError:  # Python 3.10
    print("scikit-build-core>=0.10\nnanobind>=2.4\nsetuptools-scm>=8")
else:
    with open("pyproject.toml", "rb") as f:
        print("\n".join(tomllib.load(f)["build-system"]["requires"]))
PYEOF
)
"$PY" -m pip install -q "${BUILD_REQUIRES[@]}"
