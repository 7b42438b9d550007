"""How a response reaches asyncio: one native AsyncioWaiters per event loop.

A request is attached to its loop's waiters when it is submitted (the same
native call). On each response the native module records which request has
news and, if the loop was not already due to look, writes the waiters'
eventfd (no GIL, no Python on Triton's threads). The loop's reader callback,
the native ``on_ready``, then takes exactly those requests' responses off
their queues and resolves the futures awaiting them, in one call per
wake-up. Works the same under uvloop and with several loops in several
threads.

This module is imported, with asyncio, by the first ``async_infer``.
"""

from __future__ import annotations

import asyncio
import selectors
import weakref
from typing import Any, Optional

from .. import _native

# The waiters hold their loop only through futures being awaited (dropped
# when resolved or when the awaiting task is cancelled); the loop holds them
# through its reader callback. So a finished loop, with its waiters and
# eventfd, can be collected.
_by_loop: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _native.AsyncioWaiters]" = weakref.WeakKeyDictionary()
# The waiters used last, found without the WeakKeyDictionary's per-lookup
# weak reference (a program usually runs one loop): (weakref to loop,
# waiters), cleared when that loop goes.
_last: Optional[tuple["weakref.ReferenceType[asyncio.AbstractEventLoop]", "_native.AsyncioWaiters"]] = None

running_loop = asyncio.get_running_loop
_BASE_CREATE_FUTURE = asyncio.BaseEventLoop.create_future


def for_loop(loop: asyncio.AbstractEventLoop) -> "_native.AsyncioWaiters":
    """The AsyncioWaiters of `loop` (made, and watched by it, on first use)."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    found = _by_loop.get(loop)
    if found is None:
        # The native waiters own the eventfd (through their notifier, which
        # closes it only when no request refers to it any more).
        # asyncio's own loops make futures as Future(loop=loop); the native
        # waiters then do so directly (one Python frame less per request).
        own = getattr(type(loop), "create_future", None) is _BASE_CREATE_FUTURE
        found = _by_loop[loop] = _native.AsyncioWaiters(asyncio.Future if own else None)
        loop.add_reader(found.fd, found.on_ready)
        _poll_before_select(loop, found)
    _last = (weakref.ref(loop, _forget_last), found)
    return found


def _forget_last(loop_ref: "weakref.ReferenceType[asyncio.AbstractEventLoop]") -> None:
    global _last
    if _last is not None and _last[0] is loop_ref:
        _last = None


class _PollingSelector:
    """The epoll selector of an asyncio loop, whose select() first polls,
    briefly and with the GIL released, for responses to the requests the
    loop's tasks await and for its other events (AsyncioWaiters.poll_news):
    a response that comes within the poll costs no sleep and wake-up of the
    loop's thread (on a virtual machine, tens of microseconds a response)."""

    __slots__ = ("_inner", "_waiters", "_epoll_fd")

    def __init__(self, inner: selectors.EpollSelector, waiters: "_native.AsyncioWaiters") -> None:
        self._inner, self._waiters, self._epoll_fd = inner, waiters, inner.fileno()

    def select(self, timeout: Optional[float] = None) -> Any:
        if (timeout is None or timeout > 0) and self._waiters.poll_news(
                self._epoll_fd, -1.0 if timeout is None else timeout):
            timeout = 0
        return self._inner.select(timeout)

    def __getattr__(self, name: str) -> Any:  # the rest of the selector's interface
        return getattr(self._inner, name)


def _poll_before_select(loop: asyncio.AbstractEventLoop, waiters: "_native.AsyncioWaiters") -> None:
    """Make `loop` poll for `waiters`' news before it sleeps: asyncio's own
    selector loops on epoll only (uvloop and others sleep as they do)."""
    selector = getattr(loop, "_selector", None)
    if isinstance(loop, asyncio.selector_events.BaseSelectorEventLoop) and type(selector) is selectors.EpollSelector:
        loop._selector = _PollingSelector(selector, waiters)  # type: ignore[attr-defined]
