#!/usr/bin/env bash
# The GPU check in one shot (docs/gpu.md), for a machine with a CUDA GPU and
# no network. Builds nothing: everything comes from build/gpu-bundle/, made
# by `make gpu-bundle` and carried along with the working tree:
#   bash tests/gpu/run_gpu_checks.sh
#
# Expects a plain `python3` (3.12) with numpy 2 and pytest (CuPy, PyTorch and
# JAX for the GPU cases; hypothesis for some identity tests). Installs the
# bundle offline into a scratch folder (PYTHONPATH), never into the system;
# every cache (CuPy's kernels, the driver's JIT, torch, Triton, JAX) goes
# under that scratch folder too. Then runs, each phase in a process of its
# own under a watchdog (its own cap and one overall deadline, 400 s, of which
# the last 60 s are kept for the last phase):
#   probe          driver, MIG, the CUDA runtimes mapped, versions (60 s)
#   gpu            -m gpu: tests/test_gpu.py, tests/test_zero_copy.py,
#                  tests/test_python_gpu.py (150 s)
#   identity       the identity-model tests, CUDA present (90 s)
#   nvidia_compat  tests/gpu/test_nvidia_compat.py (45 s)
#   triton_log     one server with Triton's info/warning log: a GPU and a
#                  pinned inference (45 s)
#   bench          what GPU users pay (tests/gpu/bench.py, 90 s)
#   gpu_metrics    GPU metrics (DCGM) tried once, last (60 s)
# The test phases run with GPU metrics off (TRITONSERVER_TEST_GPU_METRICS=0):
# a DCGM start or stop that hangs would cost the whole shot.
#
# Whatever happens, the files under $OUT say where it stopped: pytest runs
# with -v into log.txt as it goes (the test running is the last one named),
# Python's faulthandler is on everywhere (a native crash prints every
# thread's Python stack; pytest also dumps them when one test runs past
# 60 s), and a phase past its cap gets, before it is stopped, every
# thread's native stack (gdb `thread apply all bt`, or the kernel's
# /proc/PID/task/*/stack and wchan without gdb) for it and its child
# processes, then SIGINT (pytest still writes its JUnit XML), then SIGABRT
# (faulthandler prints the Python stacks), then SIGKILL.
#
# $OUT holds at most 8 files (what the GPU machine's tool brings back):
# summary.md, log.txt, probe.json, bench.json, gpu.xml, identity.xml,
# nvidia_compat.xml, triton_log.txt.
#
# Environment: PYTHON (default python3), OUT (default build/gpu-checks-out),
# GPU_BUNDLE (default build/gpu-bundle), GPU_CHECKS_ALLOW_NO_GPU=1 (no GPU is
# not a failure: the GPU tests are skipped and the rest must pass; for
# `make gpu-dryrun`), GPU_CHECKS_DEADLINE (seconds, default 400).
# Exit status: 0 when every phase passed (and a GPU was used, unless allowed).
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd)
PY=${PYTHON:-python3}
BUNDLE=${GPU_BUNDLE:-$ROOT/build/gpu-bundle}
OUT=${OUT:-$ROOT/build/gpu-checks-out}
DEADLINE=${GPU_CHECKS_DEADLINE:-400}
RESERVE=60  # seconds of the deadline kept for the last phase (GPU metrics)
ALLOW_NO_GPU=${GPU_CHECKS_ALLOW_NO_GPU:-0}
START=$(date +%s)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-checks.XXXXXX")
SITE=$WORK/site
STATE=$WORK/state  # phase statuses for the summary (not under $OUT: 8 files come back)
CACHE=$WORK/cache
mkdir -p "$STATE" "$CACHE"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1
export PIP_NO_INDEX=1 PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# Every cache under the scratch folder, none in the home folder.
export XDG_CACHE_HOME=$CACHE/xdg CUPY_CACHE_DIR=$CACHE/cupy CUDA_CACHE_PATH=$CACHE/nv \
  TORCH_HOME=$CACHE/torch TORCHINDUCTOR_CACHE_DIR=$CACHE/torchinductor TRITON_CACHE_DIR=$CACHE/triton \
  TRITON_HOME=$CACHE/triton-home JAX_COMPILATION_CACHE_DIR=$CACHE/jax NUMBA_CACHE_DIR=$CACHE/numba \
  MPLCONFIGDIR=$CACHE/matplotlib TRITONSERVER_TEST_CACHE_DIRECTORY=$CACHE/tritonserver
export TRITONSERVER_TEST_GPU_METRICS=0
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX would take 75% of the GPU at its first use
ulimit -c 0  # a crash or the watchdog's SIGABRT writes no core file

rm -f "$OUT"/*.xml "$OUT"/probe.json "$OUT"/bench.json "$OUT"/summary.md "$OUT"/log.txt \
  "$OUT"/triton_log.txt "$OUT"/setup.txt "$OUT"/phases.txt

# Everything printed goes to log.txt as it comes; at exit the tee is waited
# for, so the log is whole before the summary's exit status is returned.
exec 3>&1 4>&2
exec > >(tee "$OUT/log.txt") 2>&1
TEE_PID=$!
finish() {
  local rc=$?
  exec 1>&3 2>&4 3>&- 4>&-  # tee sees the end of its input
  wait "$TEE_PID" 2>/dev/null  # a process substitution: waitable from bash 5.1
  for _ in $(seq 50); do kill -0 "$TEE_PID" 2>/dev/null || break; sleep 0.1; done
  rm -rf "$WORK"
  exit "$rc"
}
trap finish EXIT

elapsed() { echo $(( $(date +%s) - START )); }
left() { local l=$(( DEADLINE - RESERVE - $(elapsed) )); [ "$l" -gt 5 ] && echo "$l" || echo 5; }
section() { printf '\n==== %s (t=%ss)\n' "$*" "$(elapsed)"; }
summarize() {
  "$PY" "$ROOT/tests/gpu/summarize.py" "$OUT" "$STATE" "$(elapsed)" "$ALLOW_NO_GPU"
}
die() { echo "ERROR: $*"; echo "setup: FAILED ($*)" > "$STATE/setup.txt"; summarize; exit 2; }

# Child processes of $1, recursively (from /proc: no procps needed).
descendants() {
  local parent=$1 f pid ppid
  for f in /proc/[0-9]*/status; do
    pid=${f#/proc/}; pid=${pid%/status}
    ppid=$(awk '/^PPid:/ {print $2}' "$f" 2>/dev/null) || continue
    if [ "$ppid" = "$parent" ]; then echo "$pid"; descendants "$pid"; fi
  done
}

# Native stacks of every thread of process $1: thread names and wait
# channels (and kernel stacks) from /proc, then gdb's backtraces where gdb is.
native_stacks() {
  local pid=$1 task
  echo "---- process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)"
  for task in /proc/"$pid"/task/*; do
    echo "thread ${task##*/} $(cat "$task/comm" 2>/dev/null) wchan=$(cat "$task/wchan" 2>/dev/null)"
    command -v gdb >/dev/null 2>&1 || sed 's/^/    /' "$task/stack" 2>/dev/null | head -n 20
  done
  if command -v gdb >/dev/null 2>&1; then
    timeout -k 5 60 gdb -p "$pid" -batch -nx -q -iex "set auto-load off" -ex "set pagination off" \
      -ex "thread apply all bt 40" 2>&1 | grep -v -e '^\[New LWP' -e '^warning: ' | head -n 4000
  fi
}

# guard NAME CAP DIR COMMAND...: runs COMMAND in DIR (as one process, its
# own), at most CAP seconds and no later than the overall deadline. Past its
# time: stacks, SIGINT, SIGABRT, SIGKILL (see the top). Records
# "NAME STATUS [hung]" for the summary; returns the status.
guard() {
  local name=$1 cap=$2 dir=$3; shift 3
  local t waited=0 pid rc hung="" p
  t=$(left); [ "$t" -gt "$cap" ] && t=$cap
  echo "(phase $name: at most ${t}s)"
  # Job control on for the start: the phase gets its own process group and
  # SIGINT at its default (an asynchronous command would otherwise ignore it).
  set -m
  (cd "$dir" && exec "$@") &
  pid=$!
  set +m
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$t" ]; do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    hung=hung
    echo
    echo "==== HANG: phase $name still running after ${t}s; native stacks of it and its children:"
    for p in "$pid" $(descendants "$pid"); do native_stacks "$p"; done
    echo "==== HANG: SIGINT to $name"
    kill -INT "$pid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "==== HANG: SIGABRT to $name (faulthandler: Python stacks of every thread)"
      kill -ABRT "$pid" 2>/dev/null
      for _ in 1 2 3 4 5; do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
    for p in "$pid" $(descendants "$pid"); do kill -KILL "$p" 2>/dev/null; done
  fi
  wait "$pid"
  rc=$?
  [ "$rc" -gt 128 ] && echo "(phase $name ended by signal $((rc - 128)))"
  echo "$name $rc $hung" >> "$STATE/phases.txt"
  echo "$name: exit status $rc${hung:+ (stopped by the watchdog)}"
  return "$rc"
}

section "Machine"
echo "kernel: $(uname -r) ($(uname -m)); date: $(date -u +%FT%TZ); CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-(unset)}"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,mig.mode.current,compute_mode,persistence_mode \
    --format=csv 2>&1
else
  echo "no nvidia-smi"
fi
echo "gdb: $(command -v gdb || echo 'not installed: hang stacks from /proc')"

section "Bundle $BUNDLE"
[ -d "$BUNDLE" ] || die "no bundle at $BUNDLE: run \`make gpu-bundle\` and carry build/gpu-bundle"
head -3 "$BUNDLE/MANIFEST.txt" 2>/dev/null
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
timeout -k 10 90 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "${wheels[@]}" \
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
guard probe 60 "$WORK" "$PY" -X faulthandler "$ROOT/tests/gpu/probe.py" "$SITE" "$OUT/probe.json"

# -v: each test is named as it starts and its result printed as it ends, so
# the log shows the test that was running when a phase crashed or hung.
PYTEST=("$PY" -X faulthandler -m pytest -c ../pyproject.toml --rootdir .. -p no:cacheprovider -v -rfEs
        -o faulthandler_timeout=60 --durations=5)
run_phase() {  # name cap pytest-args...
  local name=$1 cap=$2; shift 2
  section "Tests: $name"
  guard "$name" "$cap" tests "${PYTEST[@]}" --junitxml="$OUT/$name.xml" "$@"
}

run_phase gpu 150 -m gpu test_gpu.py test_zero_copy.py test_python_gpu.py
# Identity models only (the python backend's stub needs numpy<2); -k as in
# the files' names for identity models. test_delivery.py last: a response
# kept alive by its user-queue feeder would fail later files' leak checks.
run_phase identity 90 -m "not gpu" \
  -k "identity or from_dlpack or memory_buffer or bytes_tensor or subclasses or not_found" \
  test_tensor_dlpack.py test_infer_datatypes.py test_request_inputs.py test_zero_copy.py test_delivery.py
run_phase nvidia_compat 45 gpu/test_nvidia_compat.py

section "Triton's own log (info, warning): a GPU and a pinned inference outside pytest"
guard triton_log 45 tests "$PY" -X faulthandler gpu/triton_log.py log "$WORK/triton-log.txt"
{ echo "==== phase triton_log: the core's log (info, warning, error)"; cat "$WORK/triton-log.txt" 2>/dev/null; } \
  >> "$OUT/triton_log.txt"

section "Benchmark: what GPU users pay"
guard bench 90 tests "$PY" -X faulthandler gpu/bench.py "$OUT/bench.json"

section "GPU metrics (DCGM), tried once, last"
RESERVE=0
guard gpu_metrics 60 tests "$PY" -X faulthandler gpu/triton_log.py metrics "$WORK/metrics-log.txt" "$OUT/bench.json"
{ echo "==== phase gpu_metrics: the core's log (info, warning, error), GPU metrics off then on"
  cat "$WORK/metrics-log.txt" 2>/dev/null; } >> "$OUT/triton_log.txt"

section "Summary"
summarize
