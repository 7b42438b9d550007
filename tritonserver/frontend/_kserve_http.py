"""KServeHttp: the KServe v2 HTTP/REST protocol of an embedded Server, with
the name and options of NVIDIA's ``tritonfrontend.KServeHttp``.

The protocol is ``tritonserver._kserve.routes`` (framework-free); this
module is only the transport: uvicorn (httptools parser, uvloop loop)
running the routes as an ASGI application on an event loop thread of its
own (``LoopThread``), on a socket bound here, so a bind error is raised by
``start()`` and ``port=0`` gives ``.port``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .._api._errors import InvalidArgumentError, UnavailableError
from .._api._server import Server
from .._kserve.routes import DEFAULT_MAX_BODY_BYTES, KServeRoutes, Reply, checked_restrictions
from .._kserve.shared_memory import system_shared_memory
from ._loop_thread import LoopThread

_logger = logging.getLogger("tritonserver.frontend")

# Seconds start() waits for uvicorn to take the socket.
_START_TIMEOUT = 30.0


class KServeHttp:
    """Serves `server`'s models over HTTP, as the KServe v2 protocol with
    Triton's extensions (docs/serving.md lists the routes)."""

    @dataclass
    class Options:
        """tritonfrontend's fields and defaults, plus this package's own.

        - address, port: where to listen (port 0: a free port, then `.port`).
        - reuse_port: SO_REUSEPORT on the socket (several processes may
          listen on one port).
        - thread_count: accepted for tritonfrontend's programs; requests are
          served by one event loop thread (the core's own threads run the
          models), so it changes nothing.
        - header_forward_pattern: request headers whose lower-case name
          matches this regular expression reach infer and generate requests
          as string parameters (the binary's --http-header-forward-pattern).
        - restricted_apis: {category: (header, value)}: the binary's
          --http-restricted-api (categories "health", "metadata",
          "inference", "shared-memory", "model-config", "model-repository",
          "statistics", "trace", "logging"): requests of the category
          without the header are answered 403.
        - max_input_size: the largest request body in bytes, compressed or
          not (the binary's --http-max-input-size, 64 MiB).
        """

        address: str = "0.0.0.0"
        port: int = 8000
        reuse_port: bool = False
        thread_count: int = 8
        header_forward_pattern: str = ""
        restricted_apis: Optional[Mapping[str, tuple[str, str]]] = None
        max_input_size: int = DEFAULT_MAX_BODY_BYTES

        def __post_init__(self) -> None:
            if not isinstance(self.address, str) or not self.address:
                raise InvalidArgumentError(f"KServeHttp.Options.address must be a non-empty str, not {self.address!r}")
            if type(self.port) is not int or not 0 <= self.port <= 65535:
                raise InvalidArgumentError(f"KServeHttp.Options.port must be an int from 0 to 65535, not {self.port!r}")
            if type(self.reuse_port) is not bool:
                raise InvalidArgumentError(f"KServeHttp.Options.reuse_port must be a bool, not {self.reuse_port!r}")
            if type(self.thread_count) is not int or self.thread_count < 1:
                raise InvalidArgumentError(
                    f"KServeHttp.Options.thread_count must be a positive int, not {self.thread_count!r}")
            if type(self.max_input_size) is not int or self.max_input_size < 1:
                raise InvalidArgumentError(
                    f"KServeHttp.Options.max_input_size must be a positive int (bytes), not {self.max_input_size!r}")
            if not isinstance(self.header_forward_pattern, str):
                raise InvalidArgumentError("KServeHttp.Options.header_forward_pattern must be a str (a regular "
                                           f"expression), not {self.header_forward_pattern!r}")
            try:
                re.compile(self.header_forward_pattern)
            except re.error as error:
                raise InvalidArgumentError(f"KServeHttp.Options.header_forward_pattern "
                                           f"{self.header_forward_pattern!r} is not a valid regular expression: "
                                           f"{error}") from None
            try:
                checked_restrictions(self.restricted_apis)
            except InvalidArgumentError as error:
                raise InvalidArgumentError(f"KServeHttp.Options.{error}") from None

    def __init__(self, server: Server, options: Optional["KServeHttp.Options"] = None) -> None:
        if not isinstance(server, Server):
            raise InvalidArgumentError(f"KServeHttp(server, ...) takes a tritonserver.Server, not "
                                       f"{type(server).__name__}")
        if options is None:
            options = KServeHttp.Options()
        if not isinstance(options, KServeHttp.Options):
            raise InvalidArgumentError(f"KServeHttp(server, options): options must be a KServeHttp.Options, not "
                                       f"{type(options).__name__}")
        self._server = server
        self.options = options
        self._thread: Optional[LoopThread] = None
        self._uvicorn: Any = None
        self._task: Optional[asyncio.Task[None]] = None
        self._port: Optional[int] = None

    @property
    def port(self) -> int:
        """The port listened on (the one picked for port 0 once started)."""
        return self._port if self._port is not None else self.options.port

    def start(self) -> "KServeHttp":
        """Listen and serve; returns once the socket listens. UnavailableError
        naming address:port when it cannot be bound."""
        if self._thread is not None:
            return self
        try:
            import uvicorn
        except ImportError as error:
            raise UnavailableError(f"KServeHttp needs the serve extra (uvicorn, uvloop, httptools): "
                                   f"pip install \"tritonserver-binding[serve]\" ({error})") from None
        try:
            live = self._server.live()
        except Exception:  # noqa: BLE001 - a server never started raises
            live = False
        if not live:
            raise InvalidArgumentError("KServeHttp.start(): the server is not running: start it first "
                                       "(Server.start()), then the frontend")
        options = self.options
        sock = _listening_socket(options.address, options.port, options.reuse_port)
        routes = KServeRoutes(
            self._server, max_body_bytes=options.max_input_size, shared_memory=system_shared_memory(self._server),
            model_repository=True, logging=True, generate=True, trace=True,
            restricted_apis=options.restricted_apis, header_forward_pattern=options.header_forward_pattern)
        config = uvicorn.Config(
            _AsgiApp(routes, options.max_input_size), loop="uvloop", http="httptools", lifespan="off",
            access_log=False, log_config=None, server_header=False,
            timeout_graceful_shutdown=max(float(self._server.options.exit_timeout), 1.0))
        self._uvicorn = uvicorn.Server(config)
        self._port = sock.getsockname()[1]
        thread = LoopThread(f"tritonserver-http-{self._port}")
        thread.start()
        self._thread = thread
        try:
            thread.run(self._serve(sock), _START_TIMEOUT)
        except BaseException:
            self._thread = None
            thread.stop()
            sock.close()
            raise
        return self

    async def _serve(self, sock: socket.socket) -> None:
        server = self._uvicorn
        self._task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():
                error = self._task.exception()
                raise UnavailableError(f"KServeHttp could not serve on {self.options.address}:{self._port}: {error}")
            await asyncio.sleep(0.005)

    def stop(self) -> None:
        """Stop listening, let the requests in flight finish (at most the
        server's exit_timeout), then return."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            thread.run(self._shutdown())
        finally:
            thread.stop()
            self._uvicorn = self._task = None

    async def _shutdown(self) -> None:
        self._uvicorn.should_exit = True
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def __enter__(self) -> "KServeHttp":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _listening_socket(address: str, port: int, reuse_port: bool) -> socket.socket:
    where = f"{address}:{port}"
    try:
        family, kind, protocol, _, sockaddr = socket.getaddrinfo(
            address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as error:
        raise UnavailableError(f"KServeHttp cannot listen on {where}: the address does not resolve ({error})") from None
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
        sock.listen(2048)
        sock.setblocking(False)
    except OSError as error:
        sock.close()
        hint = " (another process holds it: pick another port, or stop that process)" if error.errno == 98 else ""
        raise UnavailableError(f"KServeHttp cannot listen on {where}: {error.strerror}{hint}") from None
    return sock


class _AsgiApp:
    """The routes as an ASGI application: reads the body (at most
    `max_input_size` bytes), answers with routes.handle(), streams
    generate_stream's events, and cancels the request in the core when the
    client disconnects first."""

    def __init__(self, routes: KServeRoutes, max_input_size: int) -> None:
        self._routes = routes
        self._limit = max_input_size

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        body = await self._body(headers, receive, send)
        if body is None:
            return
        handler = asyncio.ensure_future(self._routes.handle(scope["method"], scope["path"], headers, body))
        disconnected = asyncio.ensure_future(receive())
        try:
            await asyncio.wait((handler, disconnected), return_when=asyncio.FIRST_COMPLETED)
            if not handler.done():  # the client left: cancel its request
                handler.cancel()
                await asyncio.gather(handler, return_exceptions=True)
                return
            try:
                reply = handler.result()
            except Exception as error:  # noqa: BLE001 - a bug here must not take the server down
                _logger.exception("KServeHttp: %s %s failed", scope["method"], scope["path"])
                reply = Reply.error(500, f"internal error serving {scope['path']}: {type(error).__name__}: {error}")
            await _send(send, reply, disconnected)
        finally:
            if not disconnected.done():
                disconnected.cancel()

    async def _body(self, headers: dict[str, str], receive: Any, send: Any) -> Optional[bytes]:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._limit:
            await _send(send, _too_large(int(declared), self._limit), None)
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self._limit:
                await _send(send, _too_large(size, self._limit), None)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def _too_large(size: int, limit: int) -> Reply:
    return Reply.error(400, f"the request body ({size} bytes or more) is larger than the limit of {limit} bytes: "
                            "send smaller requests, or raise KServeHttp.Options.max_input_size "
                            "(the serve command's --http-max-input-size)")


async def _send(send: Any, reply: Reply, disconnected: Optional["asyncio.Future[Any]"]) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in reply.headers.items()]
    if reply.stream is None:
        headers.append((b"content-length", str(len(reply.body)).encode()))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": reply.body})
        return
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    stream = reply.stream
    chunks = stream.__aiter__()
    try:
        while True:
            following = asyncio.ensure_future(chunks.__anext__())
            if disconnected is not None:
                await asyncio.wait((following, disconnected), return_when=asyncio.FIRST_COMPLETED)
                if not following.done():  # the client left: cancel its request
                    following.cancel()
                    await asyncio.gather(following, return_exceptions=True)
                    return
            try:
                chunk = await following
            except StopAsyncIteration:
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
