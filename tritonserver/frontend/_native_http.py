"""KServeHttp's native transport (``Options(transport="native")``): the
extension's HTTP/1.1 server (cpp/http_transport.h: llhttp, epoll, a few
I/O threads) in front of the same KServe routes as the uvicorn transport.
Each whole request is handed to the routes on a LoopThread and its Reply
written back by the extension, in request order; a client that leaves
cancels its requests, as with uvicorn."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from typing import Any, Callable, Optional
from urllib.parse import unquote

from .. import _native
from .._kserve.routes import KServeRoutes, Reply
from ._asgi_server import GRACEFUL_STOP_SECONDS, listening_socket
from ._io_threads import start_io_threads
from ._loop_thread import LoopThread

_logger = logging.getLogger("tritonserver.frontend")


def available() -> bool:
    """Whether this build of the extension has the native transport (the
    CMake option TRITONSERVER_NATIVE_HTTP)."""
    return hasattr(_native, "HttpTransport")


# KServeHttp's default transport: the native one where this build has it.
DEFAULT_TRANSPORT = "native" if available() else "uvicorn"


class NativeHttpServer:
    """`routes` served on address:port by the native transport until `stop()`;
    `too_large(size, limit)` words the refusal of a body over the limit.
    With `native_infer` (the native Server of the routes' server), the
    plain binary-tensor infer request is served natively, the GIL taken
    only to build and submit it (cpp/http_transport.cc); the caller passes it
    only where the routes would take their own fast path (fast_infer) for
    every such request: no forwarded headers, no restricted inference, no
    response parameters."""

    def __init__(self, what: str, routes: KServeRoutes, address: str, port: int, reuse_port: bool,
                 io_threads: int, max_input_size: int, too_large: Callable[[int, int], Reply],
                 native_infer: Any = None) -> None:
        self._what = what
        self._routes = routes
        self._address = address
        self._requested_port = port
        self._reuse_port = reuse_port
        self._io_threads = io_threads
        self._limit = max_input_size
        self._too_large = too_large
        self._native_infer = native_infer
        self._loop_thread = LoopThread(f"tritonserver-{what}")
        self._transport: Any = None
        self._threads: list[threading.Thread] = []
        # The loop thread's own: the tasks of each connection's requests.
        self._tasks: dict[int, set[asyncio.Task[None]]] = {}
        self.port: Optional[int] = None

    @property
    def running(self) -> bool:
        return self._transport is not None

    def start(self) -> None:
        if self._transport is not None:
            return
        sock = listening_socket(self._what, self._address, self._requested_port, self._reuse_port)
        port = sock.getsockname()[1]
        self._loop_thread.start()
        # What the I/O threads call (with the GIL): these, on the loop thread.
        post: Any = self._loop_thread.loop.call_soon_threadsafe
        try:
            transport = _native.HttpTransport(
                sock.detach(), self._io_threads, self._limit, functools.partial(post, self._serve),
                functools.partial(post, self._refused), functools.partial(post, self._closed))
        except BaseException:
            self._loop_thread.stop()
            raise
        if self._native_infer is not None:
            transport.enable_infer(self._native_infer)
        self._transport = transport
        self._threads = start_io_threads(self._what, transport)
        self.port = port

    def stop(self) -> None:
        """Stops listening, lets requests in flight finish (up to
        GRACEFUL_STOP_SECONDS), then closes the connections and the threads."""
        transport = self._transport
        if transport is None:
            return
        try:
            if not transport.stop(GRACEFUL_STOP_SECONDS):
                _logger.warning("%s: requests still in flight after %s s were dropped at stop",
                                self._what, GRACEFUL_STOP_SECONDS)
            for thread in self._threads:
                thread.join()
            transport.close_all()
        finally:
            self._loop_thread.stop()
            self._transport = None
            self._threads = []

    # On the loop thread.

    def _serve(self, connection: int, seq: int, method: str, target: str, headers: dict[str, str],
               body: bytes) -> None:
        task = asyncio.ensure_future(self._answer(connection, seq, method, target, headers, body))
        tasks = self._tasks.get(connection)
        if tasks is None:
            tasks = self._tasks[connection] = set()
        tasks.add(task)
        task.add_done_callback(functools.partial(self._forget, connection))

    def _refused(self, connection: int, seq: int, size: int, reason: str) -> None:
        reply = self._too_large(size, self._limit) if size >= 0 else Reply.error(400, reason)
        self._transport.reply(connection, seq, reply.status, reply.headers, reply.body)

    def _forget(self, connection: int, task: asyncio.Task[None]) -> None:
        tasks = self._tasks.get(connection)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del self._tasks[connection]

    def _closed(self, connection: int) -> None:
        for task in self._tasks.pop(connection, ()):
            task.cancel()

    async def _answer(self, connection: int, seq: int, method: str, target: str, headers: dict[str, str],
                      body: bytes) -> None:
        path = target.partition("?")[0]
        if "%" in path:
            path = unquote(path)
        transport = self._transport
        try:
            reply = await self._routes.handle(method, path, headers, body)
        except asyncio.CancelledError:
            return  # the client left
        except Exception as error:  # noqa: BLE001 - a bug here must not take the server down
            _logger.exception("%s: %s %s failed", self._what, method, path)
            reply = Reply.error(500, f"internal error serving {path}: {type(error).__name__}: {error}")
        if reply.stream is None:
            transport.reply(connection, seq, reply.status, reply.headers, reply.body)
            return
        stream = reply.stream
        try:
            transport.reply_start(connection, seq, reply.status, reply.headers)
            async for chunk in stream:
                transport.reply_chunk(connection, seq, chunk)
            transport.reply_end(connection, seq)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
