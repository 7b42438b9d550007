"""An asyncio event loop on a daemon thread of its own, for the network
frontends: each frontend's server runs there, beside whatever loop (or none)
the user's program runs, and the user's thread hands it work with `run`."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine, Optional, TypeVar

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # the serve extra's uvloop is missing: asyncio's own loop serves too
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """A thread named `name` running one event loop until `stop()`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError(f"{self._name}: the event loop thread is not running")
        return self._loop

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        loop = _new_loop()
        started = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            try:
                loop.run_forever()
            finally:
                _cancel_remaining(loop)
                loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=main, name=self._name, daemon=True)
        self._thread.start()
        started.wait()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: Optional[float] = None) -> T:
        """Runs `coroutine` on the loop and returns its result (raises what
        it raises); TimeoutError after `timeout` seconds (it is cancelled)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"{self._name}: no answer within {timeout} s") from None

    def stop(self) -> None:
        """Stops the loop (its remaining tasks are cancelled) and joins the thread."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            if thread is not threading.current_thread():
                thread.join()
        self._thread = self._loop = None


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
