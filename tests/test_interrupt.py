"""Ctrl-C during a blocking wait: next() on a response iterator (and so
list(model.infer(...))) waiting for a model that takes long raises
KeyboardInterrupt promptly, cancels the request, and the program goes on
(the server stops cleanly). The wait used to ignore SIGINT until the next
response arrived (forever for a model that never answers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from common import ROOT, default_sigint, python_model_repository, wait_for

# A child's start: a server, and a request of the sleep model that would
# take 60 s in flight.
SLEEPING_REQUEST = """
import os, signal, threading, time, numpy, tritonserver
from common import make_options, wait_for
server = tritonserver.Server(make_options({backend_directory!r}, server_id={server_id!r}, exit_timeout={exit_timeout},
                                          log_error=False))
server.start(wait_until_ready=True, timeout=60)
model = server.load("sleep")
iterator = model.infer(inputs={{"SECONDS": numpy.array([60.0], dtype=numpy.float32)}}, raise_on_error=False)
"""


def interrupted(call: str) -> str:
    """A child's lines that run `call`, printing "INTERRUPTED after <s> s"
    when a KeyboardInterrupt ends it ("NOT INTERRUPTED" otherwise)."""
    return ("start = time.monotonic()\ntry:\n    " + call + "\n    print(\"NOT INTERRUPTED\", flush=True)\n"
            "except KeyboardInterrupt:\n    print(\"INTERRUPTED after %.1f s\" % (time.monotonic() - start), "
            "flush=True)\n")


SCRIPT = SLEEPING_REQUEST + """
print("WAITING", flush=True)
""" + interrupted("{wait}") + """# The request was cancelled: it ends at once, and the server still serves.
rest = list(iterator)
print("REST", len(rest), rest[-1].final, type(rest[-1].error).__name__, flush=True)
out = list(model.infer(inputs={{"SECONDS": numpy.array([0.0], dtype=numpy.float32)}}))
print("AGAIN", numpy.from_dlpack(out[-1].outputs["OUT"]).tolist(), flush=True)
server.stop()
print("STOPPED", flush=True)
"""

WAITS = {
    "next": "next(iterator)",
    "list": "list(iterator)",
}

# Only a bound that catches the bug (the model answers after 60 s).
INTERRUPT_BOUND_S = 10.0


def sigint_child(script: str, tmp_path, ready, before_signal=None, cleanup=None):
    """Runs `script` in a child, sends it SIGINT once `ready(its stdout so
    far)`, and returns (its stdout lines, its stderr, the seconds from the
    signal to its "INTERRUPTED" line, its exit status); `cleanup` runs
    whatever happened. Output goes to files, not pipes: a model's stub
    process inherits the child's stdout and could keep a pipe open after
    the child is gone."""
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT / "tests", stdout=out, stderr=err,
                                   env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=default_sigint)
    try:
        assert wait_for(lambda: ready(out_path.read_text()) or process.poll() is not None, 120)
        assert ready(out_path.read_text()), err_path.read_text()
        if before_signal is not None:
            before_signal()
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        wait_for(lambda: "INTERRUPTED" in out_path.read_text() or process.poll() is not None, 90)
        waited = time.monotonic() - sent
        process.wait(timeout=120)
    finally:
        if cleanup is not None:
            cleanup()
        if process.poll() is None:
            process.kill()
            process.wait()
    return out_path.read_text().splitlines(), err_path.read_text(), waited, process.returncode


@pytest.mark.parametrize("wait", sorted(WAITS))
def test_sigint_interrupts_a_blocking_wait(backend_directory, tmp_path, wait):
    script = SCRIPT.format(backend_directory=backend_directory, server_id="interrupt", exit_timeout=10, wait=WAITS[wait])
    lines, err, waited, returncode = sigint_child(script, tmp_path, lambda out: "WAITING" in out,
                                                  before_signal=lambda: time.sleep(0.5))
    assert len(lines) > 1 and lines[1].startswith("INTERRUPTED"), (lines, err)
    assert waited < INTERRUPT_BOUND_S, f"KeyboardInterrupt came {waited:.1f} s after SIGINT"
    assert lines[2].startswith("REST 1 True"), lines  # the cancelled request's final response
    assert lines[2].split()[-1] in ("CancelledError", "UnknownError"), lines
    assert lines[3:] == ["AGAIN [0.0]", "STOPPED"], lines
    assert returncode == 0, err


STREAM_SCRIPT = """
import os, signal, threading, numpy, tritonserver
from common import hooks, make_options, streaming_inputs, wait_for
server = tritonserver.Server(make_options({backend_directory!r}, server_id="interrupt-stream", exit_timeout=10,
                                          log_error=False))
server.start(wait_until_ready=True, timeout=60)
model = server.load("streaming")
iterator = model.infer(inputs=streaming_inputs(100, delay_ms=30), raise_on_error=True)
values, interrupted, fifth = [], 0, threading.Event()

def interrupt():  # Ctrl-C once the loop waits in next() after the fifth response
    fifth.wait()
    wait_for(lambda: hooks().threads_waiting() == 1, 60)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
try:
    for response in iterator:
        if response.outputs:
            values.append(int(numpy.from_dlpack(response.outputs["OUT"])[0]))
        if len(values) == 5:
            fifth.set()
except KeyboardInterrupt:
    interrupted = 2
try:
    for response in iterator:  # what came before the cancel, then its end
        if response.outputs:
            values.append(int(numpy.from_dlpack(response.outputs["OUT"])[0]))
    print("NOT CANCELLED", flush=True)
except tritonserver.CancelledError:
    print("CANCELLED", flush=True)
print("INTERRUPTED", interrupted, flush=True)
print("VALUES", values == list(range(len(values))), len(values), flush=True)
server.stop()
"""


def test_sigint_while_a_stream_flows_loses_no_response_and_cancels(backend_directory, tmp_path):
    # Responses every 30 ms: the signal lands while next() waits. The
    # response taken off the queue as the signal's handler ran stays queued
    # (it used to be lost in the Python code making it), and the request
    # is cancelled (it used to run to its end).
    script = STREAM_SCRIPT.format(backend_directory=backend_directory)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT / "tests", capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=default_sigint)
    lines = result.stdout.splitlines()
    assert lines[:2] == ["CANCELLED", "INTERRUPTED 2"], (lines, result.stderr)
    assert lines[2].startswith("VALUES True"), lines  # 0, 1, 2, ... without a gap
    assert int(lines[2].split()[-1]) < 100, lines


LOAD_SCRIPT = """
import pathlib, time, tritonserver
from common import make_options
marks = pathlib.Path({marks!r})
server = tritonserver.Server(make_options({backend_directory!r}, server_id="interrupt-load", log_error=False,
                                          model_repository={repository!r}, python_models="in-process"))
server.start(wait_until_ready=True, timeout=60)
""" + interrupted('server.load("slow_init")') + """(marks / "release").touch()  # the load, gone on in the background, ends
deadline = time.monotonic() + 60
while not server.model("slow_init").ready() and time.monotonic() < deadline:
    time.sleep(0.01)
print("READY", server.model("slow_init").ready(), flush=True)
server.stop()
print("STOPPED", flush=True)
"""

SLOW_INIT = """
import pathlib, time
MARKS = pathlib.Path({marks!r})
class TritonPythonModel:
    def initialize(self, args):
        (MARKS / "initializing").touch()
        deadline = time.monotonic() + 60
        while not (MARKS / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    def execute(self, requests):
        return []
"""


def test_sigint_interrupts_a_slow_load_which_goes_on(backend_directory, tmp_path):
    """Ctrl-C while load() waits for a model's slow initialize() raises
    KeyboardInterrupt at once (it came when the load ended); the load goes
    on in the background, and the model becomes ready."""
    marks = tmp_path / "marks"
    marks.mkdir()
    repository = python_model_repository(tmp_path, "slow_init", SLOW_INIT.format(marks=str(marks)))
    script = LOAD_SCRIPT.format(backend_directory=backend_directory, repository=str(repository), marks=str(marks))
    lines, err, waited, returncode = sigint_child(script, tmp_path, lambda out: (marks / "initializing").exists(),
                                                  cleanup=(marks / "release").touch)
    assert lines and lines[0].startswith("INTERRUPTED"), (lines, err)
    assert waited < INTERRUPT_BOUND_S, f"KeyboardInterrupt came {waited:.1f} s after SIGINT"
    assert lines[1:] == ["READY True", "STOPPED"], (lines, err)
    assert returncode == 0


UNLOAD_SCRIPT = SLEEPING_REQUEST + """
state = lambda: server.models()[("sleep", 1)].state

def interrupt():  # Ctrl-C once the unload has begun (its drain waits for the request)
    wait_for(lambda: state() == "UNLOADING", 60)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
""" + interrupted('server.unload("sleep")') + """# The unload goes on in the background: the model drains until its request ends.
print("STATE", state(), flush=True)
iterator.cancel()
list(iterator)
print("UNLOADED", wait_for(lambda: state() == "UNAVAILABLE", 60), flush=True)
server.stop()
print("STOPPED", flush=True)
"""


def test_sigint_interrupts_an_unload_waiting_for_its_requests(backend_directory):
    # unload() lets the model's requests in flight finish first (at most
    # exit_timeout); its wait used to ignore SIGINT until they had.
    script = UNLOAD_SCRIPT.format(backend_directory=backend_directory, server_id="interrupt-unload", exit_timeout=30)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT / "tests", capture_output=True, text=True,
                            timeout=120, env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=default_sigint)
    lines = result.stdout.splitlines()
    assert lines and lines[0].startswith("INTERRUPTED"), (lines, result.stderr)
    assert float(lines[0].split()[2]) < INTERRUPT_BOUND_S, lines
    assert lines[1:] == ["STATE UNLOADING", "UNLOADED True", "STOPPED"], (lines, result.stderr)
    assert result.returncode == 0, result.stderr
