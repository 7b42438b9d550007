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
