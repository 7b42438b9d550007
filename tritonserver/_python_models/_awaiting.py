"""Running a model's coroutine to its end on the instance's event loop
without leaving a reference cycle behind.

``loop.run_until_complete`` re-raises a coroutine's exception from the Task
that holds it, and the exception's traceback holds the frame that holds the
Task: a cycle, which keeps every frame of the traceback alive, with their
locals, until the garbage collector runs. Those locals are the requests of
the call and their response senders, and a request kept alive keeps its
model from unloading (a server's stop then waits out its exit_timeout).
Here the coroutine's outcome is taken inside the loop, so the Task ends
without an exception and the error is raised afresh."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Optional


async def _settle(awaitable: Awaitable[Any]) -> tuple[Any, Optional[Exception]]:
    try:
        return await awaitable, None
    except Exception as e:
        return None, e


def run_to_end(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[Any]) -> Any:
    """The result of `awaitable` run on `loop`, or its exception raised."""
    result, error = loop.run_until_complete(_settle(awaitable))
    if error is None:
        return result
    try:
        raise error
    finally:
        error = None  # this frame no longer holds the exception that holds it
