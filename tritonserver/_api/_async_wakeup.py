"""How a response reaches asyncio: one native LoopNotifier per event loop.

On each response the native core records which request has news and, if the
loop was not already due to look, writes the notifier's eventfd (no GIL, no
Python on Triton's threads). The loop's reader callback then hands exactly
those requests' waiters their responses. Works the same under uvloop and
with several loops in several threads.

A request is attached to its loop's notifier the first time its iterator
has to wait (a response already queued by then needs no wake-up). This
module is imported, with asyncio, by the first ``async_infer``.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from typing import Optional

from .. import _core

# A waker refers to its loop only through the loop's reader callback, so a
# finished loop (and with it its waker and eventfd) can be collected.
_wakers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWaker]" = weakref.WeakKeyDictionary()
_tokens = itertools.count(1)
# The waker used last, found without the WeakKeyDictionary's per-lookup
# weak reference (a program usually runs one loop): (weakref to loop, waker),
# cleared when that loop goes.
_last: Optional[tuple["weakref.ReferenceType[asyncio.AbstractEventLoop]", "LoopWaker"]] = None

running_loop = asyncio.get_running_loop


class LoopWaker:
    """The notifier of one event loop and the requests awaited on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # The native notifier owns the eventfd and closes it only when no
        # request refers to it any more.
        self.notifier = _core.LoopNotifier.create()
        self._waiting: dict[int, tuple[_core.Request, asyncio.Future[_core.Response]]] = {}
        loop.add_reader(self.notifier.fd, self._on_ready)

    def attach(self, request: "_core.Request") -> int:
        """Route `request`'s wake-ups here; returns its token."""
        token = next(_tokens)
        request.set_notifier(self.notifier, token)
        return token

    def wait(self, request: "_core.Request", token: int,
             loop: asyncio.AbstractEventLoop) -> "asyncio.Future[_core.Response]":
        """A future (of this waker's `loop`) for the request's next response:
        the caller found none queued, and the notifier reports any that
        arrives from now on."""
        future: asyncio.Future[_core.Response] = loop.create_future()
        self._waiting[token] = (request, future)
        return future

    def _on_ready(self) -> None:
        waiting = self._waiting
        for token in self.notifier.drain():
            entry = waiting.get(token)
            if entry is None:  # nobody awaiting: the next __anext__ takes it
                continue
            request, future = entry
            if future.done():  # the awaiting task was cancelled
                del waiting[token]
                continue
            response = request.try_next()
            if response is not None:
                del waiting[token]
                future.set_result(response)


def waker(loop: asyncio.AbstractEventLoop) -> LoopWaker:
    """The LoopWaker of `loop` (made on first use)."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    found = _wakers.get(loop)
    if found is None:
        found = _wakers[loop] = LoopWaker(loop)
    _last = (weakref.ref(loop, _forget_last), found)
    return found


def _forget_last(loop_ref: "weakref.ReferenceType[asyncio.AbstractEventLoop]") -> None:
    global _last
    if _last is not None and _last[0] is loop_ref:
        _last = None
