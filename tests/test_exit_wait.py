"""What a program waits for when it ends with requests in flight, and how a
Ctrl-C ends that wait. A child process sends a 90 s request to the `sleep`
model, which ignores cancellation (as most models do), and ends:

- by a Ctrl-C while it waits for the response (the KeyboardInterrupt
  unhandled, or leaving a `with Server` block): stderr says what is waited
  for, how long at most, and that Ctrl-C again exits now; a second Ctrl-C
  ends it at once as an interrupted program (killed by SIGINT), with no
  traceback of ours;
- without a Ctrl-C, at the end of the script: the same line (the Ctrl-C
  hint without "again"), and the exit goes on once the request is done.

A Ctrl-C during `server.stop()` itself raises KeyboardInterrupt promptly;
that stop goes on in the background, and interpreter exit says it waits for
it.

The process used to wait silently for the model (up to exit_timeout, then
the server's background stop), to ignore a second Ctrl-C for the whole
exit_timeout, and then to print a second traceback from the exit hook.
A program that exits with nothing in flight stays silent
(test_exit_silence.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from common import ROOT, default_sigint, wait_for

EXIT_TIMEOUT = 60

SCRIPT = """
import asyncio, numpy, tritonserver
from common import make_options
server = tritonserver.Server(make_options({backend_directory!r}, server_id="exit-wait", exit_timeout={exit_timeout},
                                          log_error=False, python_models={python_models!r}))
server.start(wait_until_ready=True, timeout=60)
model = server.load("sleep")
inputs = {{"SECONDS": numpy.array([{seconds}], dtype=numpy.float32)}}
parameters = {{"ignore_cancellation": True}}
{body}
"""

# The request is in flight when IN FLIGHT is printed; the first Ctrl-C comes
# then (wherever it lands, the KeyboardInterrupt is not handled).
INTERRUPTED = {
    "unhandled": ("iterator = model.infer(inputs=inputs, parameters=parameters)\n"
                  "print('IN FLIGHT', flush=True)\n"
                  "next(iterator)"),
    "with_block": ("with server:\n"
                   "    iterator = model.infer(inputs=inputs, parameters=parameters)\n"
                   "    print('IN FLIGHT', flush=True)\n"
                   "    next(iterator)"),
}

# Left in flight at the end of the script (the request takes 4 s).
LEFT_IN_FLIGHT = {
    "sync": "iterator = model.infer(inputs=inputs, parameters=parameters)\nprint('LEFT', flush=True)",
    "async": ("loop = asyncio.new_event_loop()\n"
              "async def start():\n"
              "    return model.async_infer(inputs=inputs, parameters=parameters)\n"
              "iterator = loop.run_until_complete(start())\n"
              "print('LEFT', flush=True)"),
}

WAITING = re.compile(r"tritonserver: waiting up to (\d+) s \(Options\.exit_timeout\) for 1 in-flight request of "
                     r"model 'sleep' to finish; press Ctrl-C( again)? to exit now\n")

# Far below the model's 90 s: only a bound that catches waiting for it.
PROMPT_EXIT_S = 10.0


class Child:
    """The script in a child process, its output in files (the model's stub
    process inherits them and could keep pipes open)."""

    def __init__(self, tmp_path, script: str) -> None:
        self.out_path, self.err_path = tmp_path / "stdout", tmp_path / "stderr"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT / "tests", stdout=out,
                                            stderr=err, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                                            preexec_fn=default_sigint)

    def out(self) -> str:
        return self.out_path.read_text()

    def err(self) -> str:
        return self.err_path.read_text()

    def wait_for_output(self, predicate, seconds: float) -> None:
        """Until predicate(stdout, stderr) holds; fails, showing both, if the
        child ends or `seconds` pass first."""
        assert wait_for(lambda: predicate(self.out(), self.err()) or self.process.poll() is not None, seconds)
        assert predicate(self.out(), self.err()), (self.process.poll(), self.out(), self.err()[-3000:])

    def interrupt_when(self, pattern: "re.Pattern[str]", seconds: float) -> float:
        """One Ctrl-C once stderr matches `pattern`; the seconds from it
        until the child ended."""
        self.wait_for_output(lambda out, err: pattern.search(err) is not None, seconds)
        sent = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)
        return time.monotonic() - sent

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def script(backend_directory: str, body: str, seconds: float, python_models: str = "auto") -> str:
    return SCRIPT.format(backend_directory=backend_directory, exit_timeout=EXIT_TIMEOUT, python_models=python_models,
                         seconds=seconds, body=body)


def interrupted_twice(backend_directory: str, tmp_path, body: str, python_models: str) -> tuple[Child, float]:
    """Run `body`, Ctrl-C once it says IN FLIGHT, again once stderr says
    what it waits for; returns the child (ended) and how long after the
    second Ctrl-C it ended."""
    child = Child(tmp_path, script(backend_directory, body, 90.0, python_models))
    try:
        child.wait_for_output(lambda out, err: "IN FLIGHT" in out, 120)
        child.process.send_signal(signal.SIGINT)
        return child, child.interrupt_when(WAITING, 30)
    finally:
        child.kill()


@pytest.mark.parametrize("python_models", [pytest.param("stub", marks=pytest.mark.python_stub), "in-process"])
def test_ctrl_c_twice_after_an_unhandled_interrupt(backend_directory, tmp_path, python_models):
    child, took = interrupted_twice(backend_directory, tmp_path, INTERRUPTED["unhandled"], python_models)
    err = child.err()
    waiting = WAITING.search(err)
    assert waiting.group(2) == " again", err
    assert EXIT_TIMEOUT - 10 <= int(waiting.group(1)) <= EXIT_TIMEOUT, err
    assert took < PROMPT_EXIT_S, f"exited {took:.1f} s after the second Ctrl-C"
    assert child.process.returncode == -signal.SIGINT, err
    before, after = err[:waiting.start()], err[waiting.end():]
    # Python's own traceback of the first Ctrl-C, then ours: one line each.
    assert before.count("Traceback") == 1 and before.rstrip().endswith("KeyboardInterrupt"), before
    assert after == "tritonserver: exiting now, without waiting for the server\n", after


def test_ctrl_c_twice_in_a_with_block(backend_directory, tmp_path):
    child, took = interrupted_twice(backend_directory, tmp_path, INTERRUPTED["with_block"], "auto")
    err = child.err()
    waiting = WAITING.search(err)
    assert waiting.group(2) == " again", err
    assert took < PROMPT_EXIT_S, f"exited {took:.1f} s after the second Ctrl-C"
    assert child.process.returncode == -signal.SIGINT, err
    # The stop at the end of the block waited: no traceback at all.
    assert err == waiting.group(0) + "tritonserver: exiting now, without waiting for the server\n", err


@pytest.mark.parametrize("state", sorted(LEFT_IN_FLIGHT))
def test_exit_with_a_request_in_flight_says_what_it_waits_for(backend_directory, tmp_path, state):
    child = Child(tmp_path, script(backend_directory, LEFT_IN_FLIGHT[state], 4.0))
    try:
        child.process.wait(timeout=120)
    finally:
        child.kill()
    err = child.err()
    waiting = WAITING.fullmatch(err)
    assert waiting is not None and waiting.group(2) is None, err
    assert child.out().strip() == "LEFT"
    assert child.process.returncode == 0, err


def test_ctrl_c_at_exit_exits_now(backend_directory, tmp_path):
    # Exit with a 90 s request in flight, then one Ctrl-C once stderr says so.
    child = Child(tmp_path, script(backend_directory, LEFT_IN_FLIGHT["sync"], 90.0))
    try:
        took = child.interrupt_when(WAITING, 120)
    finally:
        child.kill()
    err = child.err()
    assert WAITING.search(err).group(2) is None, err
    assert took < PROMPT_EXIT_S, f"exited {took:.1f} s after the Ctrl-C"
    assert child.process.returncode == -signal.SIGINT, err
    assert err.endswith("to exit now\ntritonserver: exiting now, without waiting for the server\n"), err
    assert "Traceback" not in err, err


# stop() with the request in flight; a thread of the child sends it SIGINT
# once its main thread waits in the stop (its innermost Python frame is the
# wait's), and exit then waits for the stop left running.
STOP_INTERRUPTED = """
import os, signal, sys, threading, time
iterator = model.infer(inputs=inputs, parameters=parameters)
main = threading.main_thread().ident

def waiting_in_stop():
    frame = sys._current_frames().get(main)
    return frame is not None and frame.f_code.co_name == "stop" and frame.f_code.co_filename.endswith("_stopping.py")

def interrupt_the_stop():
    while not waiting_in_stop():
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt_the_stop, daemon=True).start()
start = time.monotonic()
try:
    server.stop()
    print("STOPPED", flush=True)
except KeyboardInterrupt:
    print("STOP INTERRUPTED after %.1f s, ready: %s" % (time.monotonic() - start, server.ready()), flush=True)
"""

BACKGROUND_WAITING = re.compile(r"tritonserver: waiting up to (\d+) s for the server to finish stopping, with 1 "
                                r"in-flight request of model 'sleep' \(exiting while it stops could crash\); press "
                                r"Ctrl-C to exit now\n")


def test_ctrl_c_during_stop_raises_and_exit_waits_for_the_stop(backend_directory, tmp_path):
    child = Child(tmp_path, script(backend_directory, STOP_INTERRUPTED, 90.0))
    try:
        took = child.interrupt_when(BACKGROUND_WAITING, 120)
    finally:
        child.kill()
    (line,) = child.out().splitlines()
    interrupted = re.fullmatch(r"STOP INTERRUPTED after (\S+) s, ready: False", line)
    assert interrupted and float(interrupted.group(1)) < PROMPT_EXIT_S, line
    err = child.err()
    waiting = BACKGROUND_WAITING.search(err)
    assert err == waiting.group(0) + "tritonserver: exiting now, without waiting for the server\n", err
    assert took < PROMPT_EXIT_S, f"exited {took:.1f} s after the Ctrl-C"
    assert child.process.returncode == -signal.SIGINT, err
