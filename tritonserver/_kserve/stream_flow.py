"""What a ModelStreamInfer call holds: its requests in the core and its
responses not yet written (in order, with their size). The call reads its
next request only while it has fewer than `MAX_IN_FLIGHT` requests in the
core and fewer than `MAX_QUEUED_BYTES` of responses unwritten: a client
that streams requests and reads no responses is then not read either, and
HTTP/2's flow control stops it sending. The server's memory stays bounded
(NVIDIA's binary reads such a client's requests without end). A writing
transport that does not wait for the client (the native one) tells the
servicer to wait itself (`GrpcTransport.send`), which fills this queue.
A request of a decoupled model gives its place back as soon as that is
known: such a model may hold a request open until later ones come (a
sequence's end, say), which a cap on them would wait for ever."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Tuple

MAX_IN_FLIGHT = 256
MAX_QUEUED_BYTES = 16 * 1024 * 1024


class StreamFlow:
    """The responses queue (`put`, `get`) and the requests in flight
    (`started`); `room()` waits until both are under their limits."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Tuple[Any, int]] = asyncio.Queue()
        self._bytes = 0
        self._in_flight = 0
        self._room = asyncio.Event()
        self._room.set()

    def _update(self) -> None:
        if self._bytes < MAX_QUEUED_BYTES and self._in_flight < MAX_IN_FLIGHT:
            self._room.set()
        else:
            self._room.clear()

    def started(self) -> Callable[..., None]:
        """A request goes to the core; the function returned gives its place
        back (once its last response is queued, it failed, or it is a
        decoupled model's: later calls do nothing). It takes an optional
        argument, so that it serves as a task's done callback."""
        self._in_flight += 1
        self._update()
        done = False

        def release(_task: Any = None) -> None:
            nonlocal done
            if not done:
                done = True
                self._in_flight -= 1
                self._update()

        return release

    def put(self, item: Any, size: int = 0) -> None:
        self._queue.put_nowait((item, size))
        self._bytes += size
        self._update()

    async def get(self) -> Any:
        item, size = await self._queue.get()
        self._bytes -= size
        self._update()
        return item

    async def room(self) -> None:
        """Returns once the call may read its next request."""
        await self._room.wait()
