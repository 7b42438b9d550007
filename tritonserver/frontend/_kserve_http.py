"""KServeHttp: the KServe v2 HTTP/REST protocol of an embedded Server, with
the name and options of NVIDIA's ``tritonfrontend.KServeHttp``.

The protocol is ``tritonserver._kserve.routes`` (framework-free); this
module is the ASGI application around it (body limit, streamed replies, a
client that leaves cancels its request), served by ``AsgiServer`` (uvicorn
with httptools on a uvloop LoopThread).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .._api._errors import InvalidArgumentError
from .._api._server import Server
from .._kserve import fast_infer
from .._kserve.header_pattern import compile_header_pattern
from .._kserve.restricted import parse_restrictions
from .._kserve.routes import KServeRoutes, Reply
from .._kserve.shared_memory import system_shared_memory
from . import _native_http as native_http
from ._asgi_server import AsgiServer
from ._frontend import Frontend
from ._option_checks import check_address, check_bool, check_int, check_port, check_str

_logger = logging.getLogger("tritonserver.frontend")

# Options.max_input_size=None: bodies of any size, as NVIDIA's 2.51 binary
# takes them (libevhtp's max_body_size is left at 0, no limit), for the
# transports that count in a size_t.
NO_BODY_LIMIT = 2**62


class KServeHttp(Frontend):
    """Serves `server`'s models over HTTP, as the KServe v2 protocol with
    Triton's extensions (docs/serving.md lists the routes)."""

    @dataclass
    class Options:
        """tritonfrontend's fields and defaults, plus this package's own.

        - address, port: where to listen (port 0: a free port, then `.port`).
        - reuse_port: SO_REUSEPORT on the socket (several servers may
          listen on one port; the kernel spreads connections).
        - thread_count: accepted (a positive int) for tritonfrontend's
          programs, with no effect: one event loop thread serves the
          requests, the core's own threads run the models.
        - header_forward_pattern: request headers whose lower-case name
          matches this regular expression reach infer and generate requests
          as string parameters (the binary's --http-header-forward-pattern).
        - restricted_apis: a list of the binary's --http-restricted-api
          values, "<groups>:<key>=<value>" or (groups, key, value) triples
          (groups comma-separated, of "health", "metadata", "inference",
          "shared-memory", "model-config", "model-repository", "statistics",
          "trace", "logging"): a request of a restricted group without
          header `key` set to `value` is answered 403.
        - max_input_size (this package's): the largest request body in
          bytes, as received and once decompressed; None (the default):
          no limit, as NVIDIA's 2.51 binary (which has no such flag).
        - transport (this package's): "native" (the default where the
          extension has it: its own HTTP/1.1 server, llhttp on epoll, with
          `thread_count` I/O threads) or "uvicorn" (the routes as an ASGI
          app under uvicorn; the default of a build without the native
          transport). The same routes answer on both.
        """

        address: str = "0.0.0.0"
        port: int = 8000
        reuse_port: bool = False
        thread_count: int = 8
        header_forward_pattern: str = ""
        restricted_apis: list[Any] = field(default_factory=list)
        max_input_size: Optional[int] = None
        transport: str = field(default_factory=lambda: native_http.DEFAULT_TRANSPORT)

        def __post_init__(self) -> None:
            check_address(self)
            check_port(self)
            check_bool(self, "reuse_port")
            check_int(self, "thread_count", 1)
            if self.max_input_size is not None:
                check_int(self, "max_input_size", 1)
            check_str(self, "header_forward_pattern")
            compile_header_pattern(self.header_forward_pattern, "KServeHttp.Options.header_forward_pattern")
            self.restrictions()
            check_str(self, "transport")
            if self.transport not in ("uvicorn", "native"):
                raise InvalidArgumentError(f"KServeHttp.Options.transport {self.transport!r} is not one of "
                                           "'uvicorn', 'native'")
            if self.transport == "native" and not native_http.available():
                raise InvalidArgumentError("KServeHttp.Options.transport 'native': this build of the package has "
                                           "no native HTTP transport (built with TRITONSERVER_NATIVE_HTTP=OFF): "
                                           "use transport='uvicorn'")

        def restrictions(self) -> dict[str, tuple[str, str]]:
            """restricted_apis as group -> (header, value)."""
            return parse_restrictions(self.restricted_apis, "KServeHttp.Options.restricted_apis", "api")

    def __init__(self, server: Server, options: Optional["KServeHttp.Options"] = None) -> None:
        super().__init__(server, options)
        self._http: Optional[Union[AsgiServer, native_http.NativeHttpServer]] = None

    @property
    def port(self) -> Optional[int]:
        """The port listened on once started (the chosen one for port 0)."""
        return self._http.port if self._http is not None else None

    def start(self) -> None:
        """Listen and serve; returns once the socket listens (UnavailableError
        naming address:port when it cannot be bound)."""
        if self._http is not None and self._http.running:
            return
        try:
            live = self._server.live()
        except Exception:  # noqa: BLE001 - a server never started raises
            live = False
        if not live:
            raise InvalidArgumentError("KServeHttp.start(): the server is not running: start it first "
                                       "(Server.start()), then its frontends")
        options = self.options
        limit = options.max_input_size if options.max_input_size is not None else NO_BODY_LIMIT
        routes = KServeRoutes(
            self._server, max_body_bytes=limit, shared_memory=system_shared_memory(self._server),
            model_repository=True, logging=True, generate=True, trace=True,
            restricted_apis=options.restrictions(),
            header_forward_pattern=options.header_forward_pattern)
        if options.transport == "native":
            native_infer = (self._server._started() if fast_infer.enabled and not options.header_forward_pattern
                            and "inference" not in options.restrictions() else None)
            self._http = native_http.NativeHttpServer(
                "KServeHttp", routes, options.address, options.port, options.reuse_port, options.thread_count,
                limit, _too_large, native_infer)
        else:
            self._http = AsgiServer("KServeHttp", _AsgiApp(routes, limit), options.address,
                                    options.port, options.reuse_port)
        self._http.start()

    def stop(self) -> None:
        """Stop listening, let the requests in flight finish, then return."""
        if self._http is not None:
            self._http.stop()


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
        # receive() answers once the client disconnects (or the reply is
        # sent): a client that leaves first cancels its request.
        disconnected = asyncio.ensure_future(receive())
        disconnected.add_done_callback(lambda _: handler.cancel())  # a no-op once handled
        try:
            try:
                reply = await handler
            except asyncio.CancelledError:
                if disconnected.done() and not disconnected.cancelled():
                    return  # the client left
                raise
            except Exception as error:  # noqa: BLE001 - a bug here must not take the server down
                _logger.exception("KServeHttp: %s %s failed", scope["method"], scope["path"])
                reply = Reply.error(500, f"internal error serving {scope['path']}: {type(error).__name__}: {error}")
            await _send(send, reply, disconnected)
        finally:
            if not disconnected.done():
                disconnected.cancel()

    async def _body(self, headers: dict[str, str], receive: Any, send: Any) -> Optional[bytes]:
        # A chunked body's Content-Length is ignored (as by the binary).
        declared = None if "transfer-encoding" in headers else headers.get("content-length")
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
