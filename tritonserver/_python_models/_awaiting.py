"""Running a model's coroutines: to their end without leaving a reference
cycle behind, and, for decoupled models, on an event loop of their own
thread (`BackgroundLoop`), as the stub runs them.

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
import threading
from typing import Any, Awaitable, Callable


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
    return _result_of(outcome)


def _result_of(outcome: list[Any]) -> Any:
    """The result `_settle` put aside, or its exception raised afresh."""
    result, error = outcome
    outcome.clear()
    if error is None:
        return result
    try:
        raise error
    finally:
        error = None  # this frame no longer holds the exception that holds it


class OwnLoop:
    """An instance's own event loop, run by the calling thread: made at
    first use, closed by close(). Where a non-decoupled model's coroutines
    (_runtime.py) and a bound callable's (_bound.py) run to their end."""

    __slots__ = ("_loop",)

    def __init__(self) -> None:
        self._loop: "asyncio.AbstractEventLoop | None" = None

    def get(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def run_to_end(self, awaitable: Awaitable[Any]) -> Any:
        return run_to_end(self.get(), awaitable)

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None


class BackgroundLoop:
    """An event loop run forever on a thread of its own: where a decoupled
    model's coroutines run, as the stub runs them. Its async execute() is
    started there and the core's thread returns at once, so requests run
    concurrently (each awaiting its own I/O); initialize() and finalize()
    run there too, so that asyncio objects they make serve execute().

    `name` names the thread; `on_start` is called first on it (per-thread
    state the model's calls need)."""

    def __init__(self, name: str, on_start: Callable[[], None]) -> None:
        self.loop = asyncio.new_event_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        started = threading.Event()

        def run() -> None:
            on_start()
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(started.set)
            self.loop.run_forever()

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()
        started.wait()

    def run_to_end(self, awaitable: Awaitable[Any]) -> Any:
        """The result of `awaitable` run on the loop (the caller waits, the
        GIL released), or its exception raised."""
        outcome: list[Any] = [None, None]
        asyncio.run_coroutine_threadsafe(_settle(awaitable, outcome), self.loop).result()
        return _result_of(outcome)

    def start(self, awaitable: Awaitable[Any], on_error: Callable[[BaseException], None]) -> None:
        """Start `awaitable` on the loop and return; `on_error` is called
        there with its exception, or with CancelledError when the loop is
        closed before it ends."""
        self.loop.call_soon_threadsafe(self._spawn, awaitable, on_error)

    def _spawn(self, awaitable: Awaitable[Any], on_error: Callable[[BaseException], None]) -> None:
        # Kept here until done: a Task only awaited by its own frames is
        # otherwise garbage, collected mid-await ("Task was destroyed but
        # it is pending!").
        task = self.loop.create_task(_background(awaitable, on_error))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what still runs (each cancelled call is told, through its
        `on_error`), stop the loop and end its thread (waits at most
        `timeout` seconds for each)."""
        if self.loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(_cancel(self._tasks), self.loop).result(timeout)
        except Exception:
            pass  # a call that ignores its cancellation is left to end on its own
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()


async def _background(awaitable: Awaitable[Any], on_error: Callable[[BaseException], None]) -> None:
    try:
        await awaitable
    except (Exception, asyncio.CancelledError) as e:
        on_error(e)
    del awaitable, on_error  # the frame, kept by a traceback, holds neither


async def _cancel(running: set[asyncio.Task[None]]) -> None:
    tasks = list(running)  # each leaves the set when done
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
