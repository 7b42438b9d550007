"""Inference timeouts of the in-process clients: one watcher thread (made on
first use) cancels each request still running at its deadline, so that a
request waits on its response iterator (the fast path) rather than on a
queue with a timeout."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Any, List, Optional, Tuple


class Watch:
    """One request's deadline: ``expired`` once the watcher cancelled it."""

    __slots__ = ("deadline", "iterator", "finished", "expired")

    def __init__(self, deadline: float, iterator: Any) -> None:
        self.deadline = deadline
        self.iterator = iterator
        self.finished = False
        self.expired = False


class Deadlines:
    """Requests in flight by deadline, and the thread that cancels the late ones."""

    def __init__(self) -> None:
        # a plain Lock taken directly on the per-request path (a Condition's
        # `with` is two Python calls around an RLock); the watcher waits on
        # the Condition over it
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: List[Tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._thread: Optional[threading.Thread] = None
        self._waking_at = float("inf")  # when the watcher wakes next (it is woken early only for an earlier deadline)

    def watch(self, iterator: Any, timeout_s: float) -> Watch:
        """Cancel `iterator` unless finish() is called within `timeout_s`."""
        watch = Watch(time.monotonic() + timeout_s, iterator)
        with self._lock:
            heapq.heappush(self._heap, (watch.deadline, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pytriton-client-deadlines", daemon=True)
                self._thread.start()
            if watch.deadline < self._waking_at:
                self._waking_at = watch.deadline
                self._cond.notify()
        return watch

    def finish(self, watch: Watch) -> None:
        """The request ended: forget it (and the finished ones before it)."""
        with self._lock:
            watch.finished = True
            watch.iterator = None
            while self._heap and self._heap[0][2].finished:
                heapq.heappop(self._heap)

    def _run(self) -> None:
        while True:
            late = []
            with self._cond:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._waking_at = float("inf")
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._waking_at = self._heap[0][0]
                    self._cond.wait(wait)
                    continue
                while self._heap and self._heap[0][0] <= time.monotonic():
                    _, _, watch = heapq.heappop(self._heap)
                    if not watch.finished:
                        watch.expired = True
                        late.append(watch.iterator)
                        watch.iterator = None
            _cancel(late)  # in a function of its own: no frame of this loop keeps a request alive while it waits
            late = []


DEADLINES = Deadlines()


def _cancel(iterators: List[Any]) -> None:
    for iterator in iterators:
        if iterator is not None:
            iterator.cancel()
