"""What a ModelStreamInfer call holds: its requests in the core and its
responses not yet written (in the order they are written, with their
size). The call reads its next request only while it has fewer than
`MAX_IN_FLIGHT` requests in the core and fewer than `MAX_QUEUED_BYTES` of
responses unwritten: a client that streams requests and reads no responses
is then not read either, and HTTP/2's flow control stops it sending. The
server's memory stays bounded (NVIDIA's binary reads such a client's
requests without end). A writing transport that does not wait for the
client (the native one) tells the servicer to wait itself
(`GrpcTransport.send`), which fills this queue. A request of a decoupled
model gives its place back as soon as that is known: such a model may hold
a request open until later ones come (a sequence's end, say), which a cap
on them would wait for ever.

The answers of a model that is not decoupled are written in the order
their requests came, as the binary writes them (its src/grpc/
stream_infer_handler.cc queues such a request's state when read and writes
the queue's head only): each request takes a `Turn` when read, and its
responses wait behind the turns before it that have not ended; the head's
go through at once. A decoupled model's responses are written as they come
(`Turn.end()` before any: they pass no turn, nor wait for one). What waits
is counted in the unwritten bytes. `get()` says of each item whether it was
put in its request's turn: the native transport holds such messages behind
the answers it writes itself (cpp/grpc_transport.cc, Stream::in_order)."""

from __future__ import annotations

import asyncio
import collections
from typing import Any, Callable, Optional, Tuple

MAX_IN_FLIGHT = 256
MAX_QUEUED_BYTES = 16 * 1024 * 1024


class Turn:
    """A request's place in the order of answers (`StreamFlow.turn()`)."""

    __slots__ = ("_flow", "held", "ended")

    def __init__(self, flow: "StreamFlow") -> None:
        self._flow = flow
        self.held: list[Tuple[Any, int, bool]] = []
        self.ended = False

    def end(self) -> None:
        """The request answers no more in order (its last response is put,
        it is a decoupled model's, or it failed): the turns after it may go."""
        if not self.ended:
            self.ended = True
            self._flow._advance()


class StreamFlow:
    """The responses queue (`put`, `get`), their order (`turn`) and the
    requests in flight (`started`); `room()` waits until both are under
    their limits."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Tuple[Any, int, bool]] = asyncio.Queue()
        self._bytes = 0
        self._in_flight = 0
        self._room = asyncio.Event()
        self._room.set()
        self._turns: collections.deque[Turn] = collections.deque()

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

    def turn(self) -> Turn:
        """The next request's place in the order of answers (taken as the
        request is read)."""
        turn = Turn(self)
        self._turns.append(turn)
        return turn

    def put(self, item: Any, size: int = 0, turn: Optional[Turn] = None) -> None:
        """Queues `item` for writing: at once without a turn or on the
        head's, else once the turns before `turn` ended."""
        self._bytes += size
        self._update()
        in_turn = turn is not None and not turn.ended
        if turn is None or not in_turn or self._turns[0] is turn:
            self._queue.put_nowait((item, size, in_turn))
        else:
            turn.held.append((item, size, in_turn))

    def _advance(self) -> None:
        """The ended turns at the head leave; the new head's held items go."""
        turns = self._turns
        while turns:
            head = turns[0]
            for entry in head.held:
                self._queue.put_nowait(entry)
            head.held.clear()
            if not head.ended:
                return
            turns.popleft()

    async def get(self) -> Tuple[Any, bool]:
        """The next item to write, and whether it was put in its turn."""
        item, size, in_turn = await self._queue.get()
        self._bytes -= size
        self._update()
        return item, in_turn

    async def room(self) -> None:
        """Returns once the call may read its next request."""
        await self._room.wait()
