"""Blocking calls into the core that a Ctrl-C interrupts: the call runs on a
thread of its own while the main thread waits for it in short slices, so a
KeyboardInterrupt is raised at once (as stop() raises it, _stopping.py) and
the call goes on to its end in the background. A call from any other thread
runs as it is (Python delivers signals to the main thread only)."""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar, cast

T = TypeVar("T")

SLICE_S = 0.1


def call(work: Callable[[], T], name: str) -> T:
    """work()'s result (or its exception); from the main thread, waited for
    in slices that a KeyboardInterrupt ends (work goes on, its outcome
    dropped). `name`: the worker thread's name."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as e:  # handed to the caller
            outcome.append((False, e))
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    while not done.wait(SLICE_S):
        pass
    succeeded, value = outcome.pop()
    if not succeeded:
        raise value
    return cast(T, value)
