"""fork() after a server started: the child does not own the parent's
server. A child that exits normally exits cleanly (no SIGABRT from the
core's teardown of threads that stayed in the parent), and a child that
uses the parent's server gets UnavailableError at once instead of a hang;
the parent goes on serving. Each case runs in a fresh interpreter (a crash
is a failed test, not a crashed pytest)."""

from __future__ import annotations

import pytest

from common import run_script

FORK_SCRIPT = """
import os, sys, time, numpy, tritonserver
from common import make_options
server = tritonserver.Server(make_options({backend_directory!r}, server_id="fork", log_error=False))
server.start(wait_until_ready=True, timeout=60)
model = server.load("identity_fp32")
data = numpy.arange(3, dtype=numpy.float32)
list(model.infer(inputs={{"INPUT0": data}}))
pid = os.fork()
if pid == 0:
    if {child_infers}:
        started = time.monotonic()
        try:
            list(model.infer(inputs={{"INPUT0": data}}))
            print("CHILD served", flush=True)
        except tritonserver.TritonError as e:
            print("CHILD", type(e).__name__, round(time.monotonic() - started, 1), e, flush=True)
    sys.exit(0)  # a normal exit: atexit handlers, finalization, exit()
deadline = time.monotonic() + 60
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("EXIT", os.waitstatus_to_exitcode(status), flush=True)
        break
    if time.monotonic() > deadline:
        # A hung child: its stacks say where (seen once, under ASan only).
        import shutil, subprocess
        if shutil.which("gdb"):
            print(subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
                                 capture_output=True, text=True, timeout=120).stdout[-6000:], flush=True)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("EXIT hung", flush=True)
        break
    time.sleep(0.05)
out = list(model.infer(inputs={{"INPUT0": data}}))
print("PARENT", numpy.from_dlpack(out[-1].outputs["OUTPUT0"]).tolist(), flush=True)
server.stop()
"""


@pytest.mark.parametrize("child_infers", [False, True], ids=["child_exits", "child_infers"])
def test_a_child_of_fork_exits_cleanly_and_cannot_use_the_parents_server(backend_directory, tmp_path,
                                                                          child_infers):
    rc, out, err = run_script(FORK_SCRIPT.format(backend_directory=backend_directory, child_infers=child_infers),
                              tmp_path, timeout=180)
    assert rc == 0, out + err[-2000:]
    # The child exited with its own status: no SIGABRT (-6), no hang.
    assert "EXIT 0" in out, out + err[-2000:]
    assert "terminate called" not in err, err[-2000:]
    if child_infers:
        # At once, with an error that names the cause.
        line = next(line for line in out.splitlines() if line.startswith("CHILD"))
        assert line.startswith("CHILD UnavailableError"), line
        assert "fork()" in line, line
    assert "PARENT [0.0, 1.0, 2.0]" in out, out + err[-2000:]


GRPC_FORK_ENV = """
import os, sys
os.environ.pop("GRPC_ENABLE_FORK_SUPPORT", None)
{before}
import tritonserver
print(os.environ.get("GRPC_ENABLE_FORK_SUPPORT"))
"""


@pytest.mark.parametrize("before, expected", [
    ("", "0"),  # off unless set
    ("os.environ['GRPC_ENABLE_FORK_SUPPORT'] = '1'", "1"),  # the user's choice stays
], ids=["default", "set_by_the_user"])
def test_import_turns_grpc_fork_handlers_off_unless_set(tmp_path, before, expected):
    """Triton's python backend forks each stub from the core's threads, in
    parallel when models load together; gRPC's fork handlers abort the
    process when two forks overlap ("Check failed: is_forking !=
    was_forking": a CI run aborted in a stub server's start after tests
    that used tritonclient.grpc). import tritonserver sets
    GRPC_ENABLE_FORK_SUPPORT=0 unless it is set, as gRPC reads it on import."""
    rc, out, err = run_script(GRPC_FORK_ENV.format(before=before), tmp_path, timeout=120)
    assert rc == 0, err
    assert out.split() == [expected]


@pytest.mark.python_stub
def test_a_stub_server_in_a_process_that_imported_grpc_first_says_so(backend_directory, tmp_path):
    code = GRPC_FORK_ENV.format(before="import grpc") + f"""
import logging
logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
from common import make_options
with tritonserver.Server(make_options({backend_directory!r}, server_id="grpc-first", python_models="stub",
                                      startup_models=["add_sub"], log_error=False)) as server:
    print(server.model("add_sub").ready())
"""
    rc, out, err = run_script(code, tmp_path, timeout=120)
    assert rc == 0, err
    assert out.split() == ["0", "True"]
    assert "tritonserver WARNING gRPC's fork support is on in this process (grpc was imported before tritonserver)" \
        in err, err
