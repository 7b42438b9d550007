# Sourced through BASH_ENV by every non-interactive bash started under
# tests/run_asan.sh. Triton's python backend launches its stub process as
#   bash -c "... exec <triton_python_backend_stub> ..."
# and that stub inherits LD_PRELOAD=libasan.so and ASAN_OPTIONS. The stub is
# not ours and is not instrumented: ASan stays preloaded there (it runs fine
# with it and would still log a memory error, attributed to the stub), but
# its leak check is turned off: at exit the stub leaves thousands of
# CPython, pybind11 and numpy allocations behind (module and type objects
# created at import), none of them from our code, which never runs there.
case "${BASH_EXECUTION_STRING:-}" in
  *triton_python_backend_stub*)
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
    ;;
esac
