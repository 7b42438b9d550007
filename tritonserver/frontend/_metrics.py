"""`Metrics`: the server's Prometheus metrics over HTTP, as NVIDIA's binary
serves them on --metrics-port: ``GET /metrics`` (or ``/metrics/``; a query
is ignored) gives the core's metrics and the python models' custom ones in
Prometheus text; as in the binary, another path gives 200 with an empty body
and another method 405."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from .._api._errors import TritonError
from .._api._server import Server
from ._asgi_server import AsgiServer
from ._frontend import Frontend
from ._option_checks import check_address, check_int, check_port

_CONTENT_TYPE = (b"content-type", b"text/plain; charset=utf-8")


class Metrics(Frontend):
    """Serves `server`'s metrics at http://address:port/metrics."""

    @dataclass
    class Options:
        """As tritonfrontend's Metrics.Options. `thread_count` is accepted
        (a positive int) and has no effect: one event loop serves the
        endpoint, and the metrics are gathered by the core."""

        address: str = "0.0.0.0"
        port: int = 8002
        thread_count: int = 1

        def __post_init__(self) -> None:
            check_address(self)
            check_port(self)
            check_int(self, "thread_count", 1)

    def __init__(self, server: Server, options: Optional["Metrics.Options"] = None) -> None:
        super().__init__(server, options)
        self._http = AsgiServer("metrics", _metrics_app(server), self.options.address, self.options.port)

    @property
    def port(self) -> Optional[int]:
        """The port listened on once started (the chosen one for port 0)."""
        return self._http.port

    def start(self) -> None:
        self._http.start()

    def stop(self) -> None:
        self._http.stop()


Send = Callable[[dict[str, Any]], Awaitable[None]]


# The binary's metrics paths (its regular expression "/metrics/?", matched
# against the whole path).
_METRICS_PATHS = ("/metrics", "/metrics/")


def _metrics_app(server: Server) -> Callable[..., Awaitable[None]]:
    async def app(scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "GET":
            await _reply(send, 405, json.dumps({"error": "Method Not Allowed"}).encode(),
                         (b"content-type", b"application/json"))
            return
        body = b""
        if scope["path"] in _METRICS_PATHS:
            try:
                body = (await asyncio.get_running_loop().run_in_executor(None, server.metrics)).encode("utf-8")
            except TritonError as error:
                await _reply(send, 400, json.dumps({"error": str(error)}).encode(),
                             (b"content-type", b"application/json"))
                return
        await _reply(send, 200, body, _CONTENT_TYPE)

    return app


async def _reply(send: Send, status: int, body: bytes, content_type: tuple[bytes, bytes]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [content_type, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
