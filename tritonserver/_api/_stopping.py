"""Waiting for a server to stop: in short slices, so that a Ctrl-C is
delivered while the core finishes the requests in flight; said on stderr
when the wait follows a Ctrl-C or happens at interpreter exit; and ended at
once by a Ctrl-C there.

A stop waits up to ``Options.exit_timeout`` for the requests in flight (the
core's stop runs on a thread of its own, ``cpp/server.cc``). Two ways to
wait:

- quietly (``Server.stop()`` in a running program): a Ctrl-C raises
  KeyboardInterrupt as in any blocking call, and the stop goes on in the
  background (interpreter exit waits for it, as below);
- announced (``Server.stop()`` at the end of a ``with`` block left by a
  KeyboardInterrupt, and everything at interpreter exit): when requests are
  still in flight after ``ANNOUNCE_AFTER_S``, one line on stderr says what is
  waited for and for how long; a Ctrl-C during the wait ends the process at
  once, as an interrupted program (killed by SIGINT: exit status 130 in a
  shell), without Python's teardown, which must not run while the core's
  threads are still inside it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import NoReturn, Optional

from .. import _native

# One slice of a wait: how long a Ctrl-C may wait to be delivered.
SLICE_S = 0.1
# Requests still in flight after this long are announced (a request about
# to finish is not worth a line).
ANNOUNCE_AFTER_S = 0.5
# How long interpreter exit waits for the stops that outlived their
# exit_timeout, at most (the core gives up CORE_GRACE_S after their
# exit_timeout: then they end).
BACKGROUND_WAIT_S = 60.0
CORE_GRACE_S = 30.0
# When the last stop left running in the background ends at the latest (the
# core gives up on it), in time.monotonic(); None: no such stop.
_background_ends_by: Optional[float] = None


def stop(server: _native.Server, exit_timeout: float, announced: bool, interrupted: bool) -> None:
    """Stop `server` and wait for its stop at most `exit_timeout` seconds,
    then take its outcome (the core's error, or InternalError "Exit timeout
    expired" with the stop left running in the background). `announced`:
    say what is waited for, and end the process on a Ctrl-C; `interrupted`:
    a Ctrl-C came before (the hint says "again")."""
    global _background_ends_by
    begun = time.monotonic()
    deadline = begun + exit_timeout
    announce_at = begun + ANNOUNCE_AFTER_S if announced else None
    stopping: Optional[_native.StopInProgress] = None
    try:
        # (A Ctrl-C before `stopping` is set drops the native object, which
        # leaves the stop running in the background all the same.)
        stopping = server.begin_stop()
        while not stopping.wait(min(SLICE_S, max(0.0, deadline - time.monotonic()))):
            now = time.monotonic()
            if now >= deadline:
                break
            if announce_at is not None and now >= announce_at:
                announce_at = None
                inflight = stopping.inflight()
                if inflight:
                    _say(f"waiting up to {_seconds(deadline - now)} (Options.exit_timeout) for "
                         f"{_requests(inflight)} to finish{_hint(interrupted)}")
    except KeyboardInterrupt:
        if stopping is not None:
            stopping.leave_running()
        if announced:
            exit_now()
        raise
    # Past the deadline finish() leaves the stop running in the background,
    # where the core gives up on it CORE_GRACE_S later.
    ends_by = deadline + CORE_GRACE_S
    _background_ends_by = max(_background_ends_by or ends_by, ends_by)
    stopping.finish()


def wait_for_background_stops(interrupted: bool) -> None:
    """At interpreter exit: wait (at most BACKGROUND_WAIT_S) for the stops
    that outlived their wait, so that no thread is inside the core while the
    process tears down; announced, and ended by a Ctrl-C, as above."""
    start = time.monotonic()
    deadline = start + BACKGROUND_WAIT_S
    # What the wait is said to take: until the core gives up, if sooner.
    said_deadline = min(deadline, _background_ends_by or deadline)
    announce_at: Optional[float] = start + ANNOUNCE_AFTER_S
    try:
        while _native.Server.reap_stopped(SLICE_S):
            now = time.monotonic()
            if now >= deadline:
                return
            if announce_at is not None and now >= announce_at:
                announce_at = None
                inflight = _native.Server.background_inflight()
                waited_for = f", with {_requests(inflight)}" if inflight else ""
                _say(f"waiting up to {_seconds(max(0.0, said_deadline - now))} for the server to finish stopping{waited_for} "
                     f"(exiting while it stops could crash){_hint(interrupted)}")
    except KeyboardInterrupt:
        exit_now()


def exit_now() -> NoReturn:
    """End the process at once as an interrupted program: killed by SIGINT
    (what Python itself does after an unhandled KeyboardInterrupt), without
    Python's teardown or the core's exit handlers, whose threads may still
    be running; the python backend's stub processes end when they see their
    parent gone."""
    _say("exiting now, without waiting for the server")
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # a closed or broken stream: nothing more to say
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    os._exit(128 + signal.SIGINT)  # only if SIGINT is blocked in every thread


def _say(message: str) -> None:
    if sys.stderr is not None:
        try:
            sys.stderr.write(f"tritonserver: {message}\n")
            sys.stderr.flush()
        except Exception:  # a closed or broken stderr: the wait goes on
            pass


def _hint(interrupted: bool) -> str:
    """How to stop waiting: only where a Ctrl-C reaches the wait (the main
    thread, with Python's own SIGINT handler)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        return ""
    return f"; press Ctrl-C{' again' if interrupted else ''} to exit now"


def _seconds(left: float) -> str:
    return f"{max(1, int(left + 0.999))} s"


def _requests(inflight: list[tuple[str, int]]) -> str:
    """'1 in-flight request of model 'a'', '3 in-flight requests of models
    'a' (2), 'b' (1)'."""
    total = sum(count for _, count in inflight)
    noun = "request" if total == 1 else "requests"
    if len(inflight) == 1:
        return f"{total} in-flight {noun} of model {inflight[0][0]!r}"
    models = ", ".join(f"{name!r} ({count})" for name, count in inflight)
    return f"{total} in-flight {noun} of models {models}"
