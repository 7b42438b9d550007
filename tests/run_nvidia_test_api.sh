#!/usr/bin/env bash
# NVIDIA's own test of its in-process API (python/test/test_api.py of
# triton-inference-server/core), run unchanged against this package, several
# times in a row (`make stress-nvidia-api CORE_CHECKOUT=... `): a
# compatibility oracle and a crash detector (its TestMemoryLeak cases start and
# stop tracemalloc around inferences, which once met a race with the
# package's releaser thread: docs/design.md, "Native threads and the GIL").
# The test file is not part of this repository: pass a checkout of that
# repository (or any folder holding python/test/test_api.py and its models).
#
# Usage: tests/run_nvidia_test_api.sh CORE_CHECKOUT [RUNS] [PYTEST -k EXPRESSION]
# Prints one line per run and a summary; exits 1 if any run crashed (a
# signal) or failed.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
CHECKOUT=${1:?"usage: $0 CORE_CHECKOUT [RUNS] [-k EXPRESSION]"}
RUNS=${2:-20}
SELECT=${3:-TestMemoryLeak}
TEST="$CHECKOUT/python/test/test_api.py"
[ -f "$TEST" ] || { echo "ERROR: $TEST not found (a checkout of triton-inference-server/core?)" >&2; exit 2; }
PY=$ROOT/.venv/bin/python
[ -x "$PY" ] || { echo "ERROR: $PY missing: run make build first" >&2; exit 2; }

crashed=0 failed=0
for run in $(seq 1 "$RUNS"); do
  # From the test's own folder with a copy of nothing: its models sit beside it.
  (cd "$(dirname "$TEST")" && "$PY" -X faulthandler -m pytest -q -p no:cacheprovider -k "$SELECT" \
     test_api.py >"/tmp/nvidia_test_api.$run.log" 2>&1)
  rc=$?
  summary=$(tail -n 1 "/tmp/nvidia_test_api.$run.log")
  if [ $rc -gt 128 ] || [ $rc -lt 0 ]; then
    crashed=$((crashed + 1)); echo "run $run: CRASHED (exit $rc; log /tmp/nvidia_test_api.$run.log)"
  elif [ $rc -ne 0 ]; then
    failed=$((failed + 1)); echo "run $run: failed (exit $rc): $summary"
  else
    echo "run $run: $summary"
  fi
done
echo "== $RUNS runs of test_api.py -k $SELECT: $crashed crashed, $failed failed"
[ $crashed -eq 0 ] && [ $failed -eq 0 ]
