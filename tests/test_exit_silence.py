"""Interpreter exit is silent whatever a program leaves behind: NumPy views
of outputs, Tensors, responses, unconsumed iterators, running or stopped
servers, asyncio requests not awaited. Each state is left by a subprocess
that then exits; its stderr must be empty and its exit code 0. (nanobind used
to print "leaked instances ... reference counting issue" lines for objects
still referenced at exit.) A request still running at exit is said on stderr
while exit waits for it: test_exit_wait.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from common import ROOT

SCRIPT = """
import asyncio, numpy, tritonserver
from common import make_options
server = tritonserver.Server(make_options({backend_directory!r}, server_id="exit-state", log_error=False))
server.start(wait_until_ready=True, timeout=60)
model = server.load({model!r})
data = numpy.arange(4, dtype=numpy.float32)
def respond():
    return list(model.infer(inputs={{"INPUT0": data}}))[0]
{state}
print("LEFT", flush=True)
"""

IDENTITY_STATES = {
    "numpy_view": "view = numpy.from_dlpack(respond().outputs['OUTPUT0'])",
    "numpy_views_after_stop": ("views = [numpy.from_dlpack(respond().outputs['OUTPUT0']) for _ in range(20)]\n"
                               "server.stop()"),
    "asarray_view": "view = numpy.asarray(respond().outputs['OUTPUT0'])",
    "tensor": "tensor = respond().outputs['OUTPUT0']",
    "response_and_memory_buffer": "response = respond(); buffer = response.outputs['OUTPUT0'].memory_buffer",
    "unconsumed_iterator": "iterator = model.infer(inputs={'INPUT0': data})",
    "request_object": "request = model.create_request(inputs={'INPUT0': data})",
    "running_server_only": "",
    # a daemon thread sending requests in a loop while the program exits
    # (its next request, after the exit's stop, printed a traceback)
    "daemon_thread_still_sending": ("import threading\n"
                                    "sent = threading.Event()\n"
                                    "def send():\n"
                                    "    while True:\n"
                                    "        respond()\n"
                                    "        sent.set()\n"
                                    "threading.Thread(target=send, daemon=True).start()\n"
                                    "assert sent.wait(60)"),
    "unconsumed_async_iterator": ("loop = asyncio.new_event_loop()\n"
                                  "async def start():\n"
                                  "    return model.async_infer(inputs={'INPUT0': data})\n"
                                  "iterator = loop.run_until_complete(start())"),
}


def run_and_exit(backend_directory: str, model: str, state: str) -> subprocess.CompletedProcess:
    script = SCRIPT.format(backend_directory=backend_directory, model=model, state=state)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT / "tests", env=env, capture_output=True,
                          text=True, timeout=120)


def assert_silent_exit(process: subprocess.CompletedProcess) -> None:
    assert process.stdout.strip() == "LEFT", process.stdout
    assert process.stderr == "", process.stderr
    assert process.returncode == 0


@pytest.mark.parametrize("state", sorted(IDENTITY_STATES))
def test_exit_is_silent(backend_directory, state):
    assert_silent_exit(run_and_exit(backend_directory, "identity_fp32", IDENTITY_STATES[state]))

