#!/usr/bin/env bash
# PyTriton's examples that run on a CPU without downloads, server and
# client each, unedited, their `pytriton` imports redirected to
# tritonserver.pytriton (tests/pytriton_redirect.py, by tests/pytriton_launch.py);
# nothing of PyTriton is committed here.
#   tests/run_pytriton_examples.sh <a PyTriton checkout, e.g. of tag v0.7.0> [example names...]
# Each example's client must exit 0; where REFERENCE_PY (a Python with
# PyTriton installed, e.g. .venv-pytriton/bin/python) is given, the same
# example also runs on PyTriton and the client's own log lines (its
# `examples.*` loggers, timestamps removed) must be the same in both runs.
# The examples listen on PyTriton's default ports (8000-8002): each runs in
# a network namespace of its own where `unshare -n` works (as root), so
# several runs, and other servers on the machine, do not collide;
# elsewhere the examples run one after the other on the machine's ports.
# Environment: PY (the Python under test, default .venv/bin/python),
# REFERENCE_PY, TIMEOUT_S (per example, default 240).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAUNCH="$ROOT/tests/pytriton_launch.py"

if [ "${1:-}" = "--one" ]; then  # internal: one example, server then client (in the namespace when made)
  shift
  PYTHON=$1 MODE=$2 DIR=$3 OUT=$4
  if [ "${IN_NETNS:-}" = 1 ]; then ip link set lo up; fi
  cd "$DIR"
  set -m  # the server as a job of its own: SIGINT (Ctrl+C) reaches it, as in a terminal
  "$PYTHON" "$LAUNCH" $MODE server.py > "$OUT.server" 2>&1 &
  SERVER=$!
  set +m
  timeout "${TIMEOUT_S:-240}" "$PYTHON" "$LAUNCH" $MODE client.py > "$OUT.client" 2>&1
  STATUS=$?
  kill -INT "$SERVER" 2>/dev/null
  for _ in $(seq 600); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SERVER" 2>/dev/null && echo "(the server did not exit within 60 s of SIGINT: killed)" >> "$OUT.server"
  wait "$SERVER"
  echo $? > "$OUT.server_status"
  exit $STATUS
fi

[ $# -ge 1 ] || { echo "usage: $0 <pytriton checkout> [example names...]" >&2; exit 2; }
CHECKOUT=$(cd "$1" && pwd); shift
PY=${PY:-$ROOT/.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
REFERENCE_PY=${REFERENCE_PY:-}
REFERENCE_ENV=()
if [ -n "$REFERENCE_PY" ]; then
  REFERENCE_PY=$(cd "$(dirname "$REFERENCE_PY")" && pwd)/$(basename "$REFERENCE_PY")
  # PyTriton's python-backend stub finds a pyenv-built libpython only through LD_LIBRARY_PATH
  LIBDIR=$("$REFERENCE_PY" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')
  REFERENCE_ENV=(env "LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
EXAMPLES=("$@")
if [ ${#EXAMPLES[@]} -eq 0 ]; then
  EXAMPLES=(add_sub_python add_sub_python_with_optional identity_python multiple_models_python use_parameters_and_headers)
  if "$PY" -c 'import torch' 2>/dev/null; then EXAMPLES+=(linear_random_pytorch); fi
fi
NETNS=()
if unshare -n true 2>/dev/null; then NETNS=(env IN_NETNS=1 unshare -n); else
  echo "(unshare -n is not permitted here: the examples run one at a time on ports 8000-8002)"; fi
WORK=$(mktemp -d)
if [ -n "${KEEP_OUTPUTS:-}" ]; then echo "(outputs in $WORK)"; else trap 'rm -rf "$WORK"' EXIT; fi

run() {  # run <python> <mode> <example> <output prefix>
  local prefix=()
  if [ "$1" = "$REFERENCE_PY" ]; then prefix=("${REFERENCE_ENV[@]}"); fi
  "${prefix[@]}" "${NETNS[@]}" bash "$0" --one "$1" "$2" "$CHECKOUT/examples/$3" "$4"
}
own_lines() {  # the example's own log lines, without their timestamps
  grep -E ' - [A-Z]+ - examples\.' "$1" | sed -E 's/^[0-9-]+ [0-9:,]+ - //'
}

PASSED=() FAILED=()
for example in "${EXAMPLES[@]}"; do
  [ -f "$CHECKOUT/examples/$example/client.py" ] || { echo "== $example: no such example"; FAILED+=("$example"); continue; }
  export PYTRITON_LAUNCH_SEED_TORCH=
  case $example in *pytorch*) export PYTRITON_LAUNCH_SEED_TORCH=1 ;; esac
  echo "== $example"
  started=$(date +%s%N)
  run "$PY" --redirect "$example" "$WORK/$example.here"
  status=$?
  elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
  verdict="client exit $status, server and client in $((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000))) s"
  ok=$([ $status -eq 0 ] && echo 1 || echo 0)
  server_status=$(cat "$WORK/$example.here.server_status" 2>/dev/null || echo "?")
  verdict="$verdict, server exit $server_status after SIGINT"
  if [ "$server_status" != 0 ]; then ok=0; fi
  if [ $ok = 1 ] && [ -z "$(own_lines "$WORK/$example.here.client")" ]; then ok=0; verdict="$verdict, printed nothing of its own"; fi
  if [ $ok = 1 ] && [ -n "$REFERENCE_PY" ]; then
    if [ -n "$PYTRITON_LAUNCH_SEED_TORCH" ] && ! "$REFERENCE_PY" -c 'import torch' 2>/dev/null; then
      verdict="$verdict; not compared (no torch beside PyTriton in $REFERENCE_PY)"
    else
      started=$(date +%s%N)
      run "$REFERENCE_PY" "" "$example" "$WORK/$example.pytriton"
      reference=$?
      elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
      if [ $reference -ne 0 ]; then
        verdict="$verdict; PyTriton's run failed ($reference), not compared"
        tail -n 20 "$WORK/$example.pytriton.client" "$WORK/$example.pytriton.server"
      elif diff <(own_lines "$WORK/$example.pytriton.client") <(own_lines "$WORK/$example.here.client") \
          > "$WORK/$example.diff"; then
        verdict="$verdict; the client printed the same as on PyTriton ($(own_lines "$WORK/$example.here.client" | wc -l) lines; PyTriton: $((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000))) s)"
      else
        ok=0; verdict="$verdict; the client's output differs from PyTriton's:"
      fi
    fi
  fi
  echo "   $verdict"
  [ -f "$WORK/$example.diff" ] && [ $ok = 0 ] && cut -c1-400 "$WORK/$example.diff"
  if [ $ok = 1 ]; then PASSED+=("$example"); else
    FAILED+=("$example")
    echo "   -- client:"; tail -n 30 "$WORK/$example.here.client" | cut -c1-400
    echo "   -- server:"; tail -n 30 "$WORK/$example.here.server" | cut -c1-400
  fi
done
echo "== PyTriton examples on tritonserver.pytriton ($("$PY" -c 'import sys, numpy; print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}")')):" \
  "${#PASSED[@]} passed (${PASSED[*]:-none}), ${#FAILED[@]} failed (${FAILED[*]:-none})"
[ ${#FAILED[@]} -eq 0 ]
