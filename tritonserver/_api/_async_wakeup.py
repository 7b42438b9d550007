"""How a response reaches asyncio: one native LoopNotifier per event loop.

On each response the native core records which request has news and, if the
loop was not already due to look, writes the notifier's eventfd (no GIL, no
Python on Triton's threads). The loop's reader callback then hands exactly
those requests' waiters their responses. Works the same under uvloop and
with several loops in several threads.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref

from .. import _core

_wakers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaker]" = weakref.WeakKeyDictionary()
_tokens = itertools.count(1)


class _LoopWaker:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # The native notifier owns the eventfd and closes it only when no
        # request refers to it any more.
        self.notifier = _core.LoopNotifier.create()
        self.waiting: dict[int, tuple[_core.Request, asyncio.Future[_core.Response]]] = {}
        loop.add_reader(self.notifier.fd, self._on_ready)

    def wait(self, request: "_core.Request", token: int) -> "asyncio.Future[_core.Response]":
        future: asyncio.Future[_core.Response] = self.loop.create_future()
        self.waiting[token] = (request, future)
        return future

    def _on_ready(self) -> None:
        for token in self.notifier.drain():
            entry = self.waiting.get(token)
            if entry is None:  # nobody awaiting: the next __anext__ takes it
                continue
            request, future = entry
            if future.done():  # the awaiting task was cancelled
                del self.waiting[token]
                continue
            response = request.try_next()
            if response is not None:
                del self.waiting[token]
                future.set_result(response)


def attach(request: "_core.Request", loop: asyncio.AbstractEventLoop) -> int:
    """Route `request`'s wake-ups to `loop`; returns its token."""
    waker = _wakers.get(loop)
    if waker is None:
        waker = _wakers[loop] = _LoopWaker(loop)
    token = next(_tokens)
    request.set_notifier(waker.notifier, token)
    return token


async def wait_for_response(request: "_core.Request", token: int,
                            loop: asyncio.AbstractEventLoop) -> "_core.Response":
    """The request's next response, awaited on `loop` (attached first)."""
    response = request.try_next()
    if response is not None:
        return response
    return await _wakers[loop].wait(request, token)
