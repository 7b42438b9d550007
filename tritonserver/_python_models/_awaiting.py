"""Running a model's coroutine to its end on the instance's event loop
without leaving a reference cycle behind.

``loop.run_until_complete`` re-raises a coroutine's exception from the Task
that holds it, and the exception's traceback leads back to that Task (the
frames it holds lead, through their callers, to the loop's handle of the
Task): a cycle, which keeps every frame of the traceback alive, with their
locals, until the garbage collector runs. Those locals are the requests of
the call and their response senders, and a request kept alive keeps its
model from unloading (a server's stop then waits out its exit_timeout).
Here the coroutine's outcome is put aside inside the loop, so the Task ends
with neither the result nor the exception, and the error is raised afresh."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable


async def _settle(awaitable: Awaitable[Any], outcome: list[Any]) -> None:
    try:
        outcome[:] = [await awaitable, None]
    except Exception as e:
        outcome[:] = [None, e]
    del outcome  # this frame, kept by the traceback, leads to no exception


def run_to_end(loop: asyncio.AbstractEventLoop, awaitable: Awaitable[Any]) -> Any:
    """The result of `awaitable` run on `loop`, or its exception raised."""
    outcome: list[Any] = [None, None]
    loop.run_until_complete(_settle(awaitable, outcome))
    result, error = outcome
    del outcome
    if error is None:
        return result
    try:
        raise error
    finally:
        error = None  # this frame no longer holds the exception that holds it
