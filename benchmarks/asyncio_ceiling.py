"""The asyncio ceiling: what CPython's asyncio alone costs per request for
the pattern `async_infer` serves, with no Triton and no binding at all;
prints one JSON line in the same shape as c_api_floor.

    python asyncio_ceiling.py [--inflight N] [--requests N] [--shape future|iterator|api]

N tasks loop: each "request" makes a future and awaits it; the future is
resolved from the loop's reader callback on an eventfd, which is written
once when the first future of a batch is registered, the way the native
LoopNotifier wakes the loop. --shape future awaits the bare future;
--shape iterator (the default) consumes each request as `async for` over an
async iterator, as `Model.async_infer` is (two `__anext__` calls, the second
ending the iteration); --shape api also makes the objects the official API
hands out for each request of the identity workload: an InferenceRequest,
and an InferenceResponse with one Tensor and its MemoryBuffer (the public
dataclasses of this package; the core is not loaded).

This is an upper bound for any asyncio client: the eventfd is written by
the loop's own thread, so the loop never sleeps and no other thread runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from ceiling_parts import api_objects, print_result


class _Notifier:
    """Futures waiting for "responses", resolved in batches from an eventfd
    reader (the LoopNotifier's pattern, without the other thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.pending: list[asyncio.Future[Any]] = []
        loop.add_reader(self.fd, self._on_ready)

    def wait(self) -> "asyncio.Future[Any]":
        future = self.loop.create_future()
        if not self.pending:
            os.eventfd_write(self.fd, 1)
        self.pending.append(future)
        return future

    def _on_ready(self) -> None:
        os.eventfd_read(self.fd)
        ready, self.pending = self.pending, []
        for future in ready:
            if not future.done():
                future.set_result(None)

    def close(self) -> None:
        self.loop.remove_reader(self.fd)
        os.close(self.fd)


class _Responses:
    """The smallest async iterator of one response: awaits it, then ends."""

    def __init__(self, notifier: _Notifier, request: Any = None, make_response: Any = None) -> None:
        self._notifier = notifier
        self.request = request  # held, as a response iterator holds its request
        self._make_response = make_response
        self._complete = False

    def __aiter__(self) -> "_Responses":
        return self

    async def __anext__(self) -> Any:
        if self._complete:
            raise StopAsyncIteration
        response = await self._notifier.wait()
        self._complete = True
        return self._make_response() if self._make_response else response


async def run(inflight: int, count: int, shape: str) -> float:
    notifier = _Notifier(asyncio.get_running_loop())
    remaining = count

    async def iterator_worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            async for _ in _Responses(notifier):
                pass

    make_request, make_response = api_objects() if shape == "api" else (None, None)

    async def api_worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            async for response in _Responses(notifier, make_request(), make_response):
                assert response.outputs

    async def future_worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await notifier.wait()

    worker = {"future": future_worker, "iterator": iterator_worker, "api": api_worker}[shape]
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    seconds = time.perf_counter() - start
    notifier.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--requests", type=int, default=200000)
    parser.add_argument("--shape", choices=("future", "iterator", "api"), default="iterator")
    args = parser.parse_args()
    asyncio.run(run(args.inflight, max(1000, args.requests // 10), args.shape))  # warm-up
    seconds = asyncio.run(run(args.inflight, args.requests, args.shape))
    print_result(args.requests, seconds)


if __name__ == "__main__":
    main()
