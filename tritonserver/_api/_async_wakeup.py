"""How a response reaches asyncio: one eventfd per event loop.

The native core writes to the loop's eventfd when a response arrives (no
GIL, no Python on Triton's threads); the loop's reader callback then hands
each waiting iterator its response. Works the same under uvloop and with
several loops in several threads.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

from .. import _core

_wakers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWaker]" = weakref.WeakKeyDictionary()


class _LoopWaker:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.waiting: dict[int, tuple[Any, asyncio.Future]] = {}
        self.requests: "weakref.WeakSet[Any]" = weakref.WeakSet()
        loop.add_reader(self.fd, self._on_ready)
        weakref.finalize(loop, _close, self.fd, self.requests)

    def wait(self, request: "_core.Request") -> asyncio.Future:
        future = self.loop.create_future()
        self.waiting[id(request)] = (request, future)
        if request not in self.requests:
            self.requests.add(request)
            request.set_notify_fd(self.fd)  # wakes us at once if one is queued
        else:
            self._on_ready()
        return future

    def _on_ready(self) -> None:
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass
        for key, (request, future) in list(self.waiting.items()):
            if future.done():  # cancelled by the awaiting task
                del self.waiting[key]
                continue
            response = request.try_next()
            if response is not None:
                del self.waiting[key]
                future.set_result(response)


def _close(fd: int, requests: "weakref.WeakSet[Any]") -> None:
    # Requests still in flight must stop writing to this fd before it is
    # closed (the number could be reused).
    for request in list(requests):
        request.set_notify_fd(-1)
    os.close(fd)


async def wait_for_response(request: "_core.Request", loop: asyncio.AbstractEventLoop) -> "_core.Response":
    """The request's next response, awaited on `loop`."""
    waker = _wakers.get(loop)
    if waker is None:
        waker = _wakers[loop] = _LoopWaker(loop)
    return await waker.wait(request)
