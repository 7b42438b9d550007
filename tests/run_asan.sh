#!/usr/bin/env bash
# The test suite against an AddressSanitizer + UndefinedBehaviorSanitizer
# build of the _native extension (`make test-asan`). See docs/sanitizers.md.
#
#   - creates .venv-asan at the repository root (reused when present): the
#     same set-up as .venv (numpy<2, so the python-backend tests run too),
#   - builds the extension with -fsanitize=address,undefined into
#     build/asan and installs it into .venv-asan,
#   - builds the identity test backend if build/identity has none (it is
#     not instrumented: it is test code, and the tests load it from there),
#   - runs the whole suite (tests/, every test_*.py) in one pytest process
#     with libasan preloaded, PYTHONMALLOC=malloc (so ASan sees Python
#     object memory too), leak detection on (at the exit of every process,
#     the subprocesses that tests start included) and tests/asan/lsan.supp
#     for leaks that are not ours,
#   - summarizes every sanitizer report with tests/asan/asan_report.py,
#     telling ours (cpp/, _native) from not ours (CPython, libtritonserver,
#     the python backend, numpy).
# Fails when a test fails or a sanitizer report is in our code.
#
# About 35 minutes on 2 cores (build about 5 minutes, tests about 30).
# Environment:
#   PYTHON            interpreter for the venv (default python3)
#   PYTEST_ARGS       extra pytest arguments, e.g. "-x" or "-k identity"
#   ASAN_TEST_FILES   test files to run, relative to tests/ (default: all of it)
#   ASAN_PER_FILE=1   one pytest process (and leak check) per test file:
#                     about 10 minutes more
#   ASAN_NO_SUPPRESSIONS=1  without tests/asan/lsan.supp (to see what it hides)
#   ASAN_FAST_UNWIND=1  frame-pointer unwinding of allocation stacks: much
#                     faster, but leak stacks stop at the first CPython or
#                     libtritonserver frame, so leaks cannot be attributed
# Outputs: build/asan/logs/ (sanitizer logs san.<program>.<pid>, pytest logs)
# and build/asan/report.txt (the summary).
set -euo pipefail

VENV=.venv-asan
# shellcheck source=tests/suite_env.sh
source "$(dirname "$0")/suite_env.sh"
BUILD_DIR=build/asan
LOGS=$ROOT/$BUILD_DIR/logs
START=$(date +%s)
section() { printf '\n== %s (t=%ss)\n' "$*" "$(( $(date +%s) - START ))"; }

# The sanitizer runtimes of the compiler that builds the extension.
CXX=${CXX:-g++}
ASAN_LIB=$("$CXX" -print-file-name=libasan.so)
STDCXX_LIB=$("$CXX" -print-file-name=libstdc++.so.6)
for lib in "$ASAN_LIB" "$STDCXX_LIB"; do
  [ -f "$lib" ] || { echo "ERROR: $CXX has no $(basename "$lib") (apt-get install libasan8 libubsan1)" >&2; exit 1; }
done

ensure_test_venv "numpy<2"  # the python backend stub of the 2.51 core needs it

bash tests/install_build_requires.sh "$PY"
# NVIDIA's clients and the serve extra (test_kserve_routes.py, the frontends'
# tests: the native HTTP and gRPC transports run sanitized too), keeping what
# .venv keeps (Makefile KEEP: tritonclient 2.51 needs protobuf<5 and pkg_resources)
KEEP=("numpy<2" "protobuf<5" "setuptools<81")
"$PY" -m pip install -q "tritonclient[grpc,http]==2.51.0" "${KEEP[@]}"
install_serve_extra "${KEEP[@]}"

section "building the extension with ASan + UBSan ($BUILD_DIR)"
SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer"
# libasan is preloaded during the build too: the build imports the
# instrumented module (nanobind's stub generation), which needs the ASan
# runtime first in the process. Leak checks of the compilers are off.
LD_PRELOAD="$ASAN_LIB" ASAN_OPTIONS=detect_leaks=0 \
  "$PY" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
  -C build-dir="$BUILD_DIR" \
  -C cmake.build-type=RelWithDebInfo \
  -C cmake.define.TRITONSERVER_TESTING=ON \
  -C "cmake.define.CMAKE_CXX_FLAGS=$SAN_FLAGS -g" \
  -C "cmake.define.CMAKE_C_FLAGS=$SAN_FLAGS -g" \
  -C "cmake.define.CMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" \
  -C "cmake.define.CMAKE_MODULE_LINKER_FLAGS=-fsanitize=address,undefined" \
  .
EXT=$("$PY" - <<'PYEOF'
import glob, os, sysconfig
site = sysconfig.get_paths()["platlib"]
print(glob.glob(os.path.join(site, "tritonserver", "_native*.so"))[0])
PYEOF
)
readelf -d "$EXT" | grep -q 'libasan' || { echo "ERROR: $EXT is not an ASan build" >&2; exit 1; }
echo "instrumented: $EXT"

ensure_identity_backend

rm -rf "$LOGS"
mkdir -p "$LOGS"
UNWIND="fast_unwind_on_malloc=0"
[ "${ASAN_FAST_UNWIND:-0}" = 1 ] && UNWIND="fast_unwind_on_malloc=1"
# The environment of the test processes only (not of this script's own
# tools, which would log their own exit-time leaks):
# - libstdc++ is preloaded with libasan: python does not link it, and ASan's
#   __cxa_throw interceptor must find it at start-up (else the first C++
#   exception aborts with "CHECK failed: ... real___cxa_throw").
# - PYTHONMALLOC=malloc: Python objects come from malloc, so ASan checks
#   them and LeakSanitizer sees the pointers they hold.
# - fast_unwind_on_malloc=0: allocation stacks are unwound with DWARF
#   information, through CPython and libtritonserver (built without frame
#   pointers): without it a leak's stack stops at the first such frame and
#   cannot show which of our calls made it.
# - protect_shadow_gap=0: the CUDA driver maps memory in ASan's shadow gap
#   (no effect without a GPU). log_exe_name: logs are san.<program>.<pid>.
# - intercept_tls_get_addr=0: GCC 12's sanitizer runtime, intercepting
#   __tls_get_addr, takes a dynamic TLS block that happens to start 16 bytes
#   into a page for a pre-2.25 glibc block with a header, and LeakSanitizer's
#   tracer then reads that "header" as a range to scan and dies at exit
#   ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal
#   error", exit status 1, no leak check): the rare failure of one subprocess
#   per full run (docs/sanitizers.md). glibc here is 2.36, whose blocks come
#   from malloc; LLVM's runtime replaced the guess in April 2023 ("Fix
#   tls_get_addr handling for glibc >=2.25"), after GCC 12's copy of it.
# - new_delete_type_mismatch=0: the 2.51 core's ~SequenceBatchScheduler
#   deletes a 24-byte object through an 8-byte type when a model with a
#   sequence batcher is destroyed (test_python_rescheduling.py), and ASan
#   aborts the whole run on it (it cannot be suppressed by file or
#   function); our code frees through unique_ptr/RAII of the type it made.
# - BASH_ENV: the python backend's stub is launched through `bash -c`;
#   tests/asan/stub_env.sh turns its leak check off (it says why).
SUPP=$ROOT/tests/asan/lsan.supp
[ "${ASAN_NO_SUPPRESSIONS:-0}" = 1 ] && SUPP=/dev/null
SAN_ENV=(
  "LD_PRELOAD=$ASAN_LIB $STDCXX_LIB"
  "PYTHONMALLOC=malloc"
  "ASAN_OPTIONS=detect_leaks=1:$UNWIND:malloc_context_size=30:protect_shadow_gap=0:intercept_tls_get_addr=0:new_delete_type_mismatch=0:log_path=$LOGS/san:log_exe_name=1"
  "LSAN_OPTIONS=suppressions=$SUPP:print_suppressions=0"
  "UBSAN_OPTIONS=print_stacktrace=1:log_path=$LOGS/san:log_exe_name=1"
  "BASH_ENV=$ROOT/tests/asan/stub_env.sh"
  # Tests whose tools cannot run under ASan skip when they see it (e.g.
  # tritonclient.http's gevent client: greenlet stack switching segfaults).
  "TRITONSERVER_TEST_ASAN=1"
)

# Deselected (node ids are relative to the repository root):
# - the ASan build links libasan and libubsan by design, which this wheel
#   check forbids;
# - resident-set growth bounds do not hold under ASan: freed memory is held
#   in its quarantine (up to 256 MiB) before reuse. LeakSanitizer checks
#   what those tests are for.
DESELECT=(--deselect tests/test_wheel_smoke.py::test_extension_needs_no_cuda_or_triton_library
          --deselect tests/test_memory_growth.py::test_rss_does_not_grow
          --deselect tests/test_refusals.py::test_refusals_leave_rss_flat)  # RSS bounds: ASan's quarantine grows RSS

if [ -n "${ASAN_TEST_FILES:-}" ]; then
  read -r -a FILES <<<"$ASAN_TEST_FILES"
else
  FILES=(.)
fi
# One pytest process for all files (the fixed cost of an ASan process with
# DWARF unwinding is about 20 s); ASAN_PER_FILE=1 runs one per file instead
# (about 10 minutes more; each file then gets its own leak check).
if [ "${ASAN_PER_FILE:-0}" = 1 ]; then
  mapfile -t GROUPS_ < <(cd tests && ls test_*.py)
else
  GROUPS_=("${FILES[*]}")
fi

section "running the tests under ASan + UBSan"
status=0
declare -A TOTAL=([passed]=0 [failed]=0 [skipped]=0 [error]=0 [deselected]=0)
for group in "${GROUPS_[@]}"; do
  read -r -a args <<<"$group"
  name=${group%.py}; [ "$name" = . ] && name=all
  log=$LOGS/pytest-$(tr -c 'A-Za-z0-9_.\n-' '_' <<<"$name" | head -c 60).log
  set +e
  # A bound that only catches a hang: the whole suite in one process takes
  # about 30 minutes under ASan here, one file at most a few.
  limit=$([ "$name" = all ] && echo 5400 || echo 1500)
  # shellcheck disable=SC2086
  (cd tests && timeout "$limit" env "${SAN_ENV[@]}" ../$PY -m pytest -c ../pyproject.toml --rootdir .. \
     -p no:cacheprovider -q -rfE "${DESELECT[@]}" ${PYTEST_ARGS:-} "${args[@]}") >"$log" 2>&1
  rc=$?
  set -e
  # The exit status of pytest is not the tests' verdict here: LeakSanitizer
  # sets it to 1 at exit when it reports a leak. The summary line is.
  last=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error|deselected)|no tests ran' "$log" | tail -1 | sed 's/=//g' || true)
  printf '  %-28s rc=%-3s %s\n' "$group" "$rc" "${last:-(no summary: see $log)}"
  for kind in passed failed skipped error deselected; do
    n=$(grep -oE "[0-9]+ ${kind}" <<<"$last" | grep -oE '^[0-9]+' || true)
    TOTAL[$kind]=$(( ${TOTAL[$kind]} + ${n:-0} ))
  done
  # No summary, a failure, or no test at all (a file name not found: pytest
  # ran nothing) fails the run.
  if [ -z "$last" ] || grep -qE '[0-9]+ (failed|error)|no tests ran' <<<"$last"; then
    status=1
    grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/      /' || true
    [ -z "$last" ] && tail -5 "$log" | sed 's/^/      /'
  fi
done

section "sanitizer reports"
set +e
python3 tests/asan/asan_report.py "$LOGS" "$ROOT/$BUILD_DIR/report.txt"
report_status=$?
set -e
[ "$report_status" -eq 0 ] || status=1

section "summary"
echo "tests: ${TOTAL[passed]} passed, ${TOTAL[failed]} failed, ${TOTAL[skipped]} skipped, ${TOTAL[error]} errors, ${TOTAL[deselected]} deselected"
echo "sanitizer findings in our code: $([ "$report_status" -eq 0 ] && echo none || echo "yes (see $BUILD_DIR/report.txt)")"
echo "logs: $BUILD_DIR/logs  report: $BUILD_DIR/report.txt  time: $(( $(date +%s) - START ))s"
exit "$status"
