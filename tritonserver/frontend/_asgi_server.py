"""An ASGI application served by uvicorn (httptools parser, uvloop loop) on
a LoopThread of its own: the transport of KServeHttp and Metrics. The
listening socket is made here, so that a port in use is an error of
`start()` naming it, port 0 gets a free port, and SO_REUSEPORT is set on
request."""

from __future__ import annotations

import asyncio
import math
import socket
from typing import Any, Optional

from .._api._errors import UnavailableError
from ._loop_thread import LoopThread

# How long stop() lets requests in flight finish before closing their connections.
GRACEFUL_STOP_SECONDS = 30.0
# A keep-alive connection idle between requests stays open until the client
# closes it, as with NVIDIA's binary (libevhtp without timeouts): uvicorn's
# default closes it after 5 s (asyncio and uvloop take an infinite delay).
KEEP_ALIVE_IDLE_SECONDS = math.inf


def _uvicorn() -> Any:
    try:
        import uvicorn
    except ImportError as error:
        raise ImportError(
            f"the HTTP frontends need uvicorn ({error}): pip install \"tritonserver-binding[serve]\""
        ) from None
    return uvicorn


def _http_protocol() -> Any:
    """uvicorn's httptools protocol, reading a body with both
    Transfer-Encoding: chunked and Content-Length (as `requests` sends a
    pre-chunked body) chunked, its Content-Length ignored: the binary's
    reading (RFC 9112 6.3); httptools refuses it by default."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.parser.set_dangerous_leniencies(lenient_chunked_length=True)

    return Protocol


def listening_socket(what: str, address: str, port: int, reuse_port: bool) -> socket.socket:
    """A TCP socket bound to address:port and listening (UnavailableError
    naming them when that fails, e.g. the port is in use)."""
    try:
        infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise UnavailableError(f"{what}: cannot listen on {address}:{port}: {error.strerror}") from None
    family, kind, proto, _, where = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(where)
        sock.listen(1024)
    except OSError as error:
        sock.close()
        raise UnavailableError(
            f"{what}: cannot listen on {address}:{port}: {error.strerror}"
            + (" (another server holds the port: choose another port, or stop that server)"
               if error.errno == 98 else "")
        ) from None
    sock.setblocking(False)
    return sock


class AsgiServer:
    """`app` served on address:port by uvicorn until `stop()`."""

    def __init__(self, what: str, app: Any, address: str, port: int, reuse_port: bool = False) -> None:
        self._what = what
        self._app = app
        self._address = address
        self._requested_port = port
        self._reuse_port = reuse_port
        self._thread = LoopThread(f"tritonserver-{what}")
        self._server: Any = None
        self._task: Optional[asyncio.Task[None]] = None
        self.port: Optional[int] = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        if self._server is not None:
            return
        uvicorn = _uvicorn()
        sock = listening_socket(self._what, self._address, self._requested_port, self._reuse_port)
        config = uvicorn.Config(
            self._app, loop="none", http=_http_protocol(), ws="none", lifespan="off", access_log=False,
            log_level="warning", timeout_graceful_shutdown=GRACEFUL_STOP_SECONDS, server_header=False,
            date_header=False, timeout_keep_alive=KEEP_ALIVE_IDLE_SECONDS,
        )
        server = uvicorn.Server(config)
        self._thread.start()

        async def serve() -> None:
            self._task = asyncio.ensure_future(server.serve(sockets=[sock]))
            while not server.started and not self._task.done():
                await asyncio.sleep(0.005)
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise UnavailableError(f"{self._what}: the server stopped while starting")

        try:
            self._thread.run(serve())
        except BaseException:
            self._thread.stop()
            sock.close()
            raise
        self._server, self.port = server, sock.getsockname()[1]

    def stop(self) -> None:
        """Stops listening, lets requests in flight finish (up to
        GRACEFUL_STOP_SECONDS), then stops the thread."""
        server, task = self._server, self._task
        if server is None:
            return

        async def shut() -> None:
            server.should_exit = True
            if task is not None:
                await asyncio.gather(task, return_exceptions=True)

        try:
            self._thread.run(shut())
        finally:
            self._thread.stop()
            self._server = self._task = None
