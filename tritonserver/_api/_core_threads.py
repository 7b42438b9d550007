"""Waiting until the Triton core's own threads are idle, as /proc shows them.

The 2.51 core (its main branch too, as of this writing) crashes with SIGSEGV
when it destroys a model instance while the instance's backend thread is
still finishing a task: ``TritonBackendThread::StopBackendThread`` reads the
last entry of the thread's instance list, which the thread empties while it
runs a task (``RateLimiter::DequeuePayload``) and refills after it. The
loader of a model waits for the instance's warm-up task on that thread; the
thread wakes the loader, then still has a few steps to run. When the
server's stop follows the load at once, as the core's own stop after a
failed start does, the model can be destroyed while the thread has not run
those steps yet (seen in ~1 of 20 failed starts on two busy cores).

The thread is then runnable ("R"); once done it sleeps waiting for its next
task. ``wait_until_idle`` waits, within a bound, until no thread of the
process outside Python's own threads (the core's threads: backend threads,
loaders, the model deleter) is runnable.
"""

from __future__ import annotations

import os
import threading
import time

_TASKS = "/proc/self/task"
_POLL_S = 0.001


def _runnable(tid: str) -> bool:
    try:
        with open(f"{_TASKS}/{tid}/stat", "rb") as f:
            stat = f.read()
    except OSError:  # the thread ended meanwhile
        return False
    # "tid (comm) state ...": comm may hold spaces and parentheses.
    fields = stat[stat.rfind(b")") + 1:].split()
    return bool(fields) and fields[0] == b"R"


def wait_until_idle(timeout_s: float) -> bool:
    """Wait until no non-Python thread of this process is runnable, at
    most `timeout_s`; whether they were. True at once where /proc cannot
    be read (nothing to wait on there)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            tids = os.listdir(_TASKS)
        except OSError:
            return True
        python_threads = {str(t.native_id) for t in threading.enumerate()}
        if not any(_runnable(tid) for tid in tids if tid not in python_threads):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
