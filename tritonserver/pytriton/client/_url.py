"""The urls the clients take, as PyTriton's: ``"localhost"`` (HTTP, port
8000), ``"host:port"`` (HTTP), ``"http://host[:port]"``,
``"grpc://host[:port]"`` (port 8001 by default), and this package's
``"inprocess://[<TritonConfig.id>]"`` (a Triton of this process)."""

from __future__ import annotations

import dataclasses
import urllib.parse

from .exceptions import PyTritonClientInvalidUrlError

DEFAULT_PORTS = {"http": 8000, "grpc": 8001}
INPROCESS = "inprocess"


@dataclasses.dataclass(frozen=True)
class ClientUrl:
    """A parsed url: `scheme` (http, grpc or inprocess), `hostname` and
    `port` (for inprocess: the Triton's id, and 0)."""

    scheme: str
    hostname: str
    port: int

    @classmethod
    def parse(cls, url: str) -> "ClientUrl":
        if not isinstance(url, str):
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}. Url must be a string.")
        scheme, separator, rest = url.partition("://")
        if not separator:
            scheme, rest = "http", url
        scheme = scheme.lower()
        if scheme == INPROCESS:
            return cls(INPROCESS, rest.strip("/"), 0)
        if scheme not in DEFAULT_PORTS:
            raise PyTritonClientInvalidUrlError(
                f"Invalid url {url!r}: the scheme {scheme!r} is not supported; use http://host:port, "
                "grpc://host:port (or host:port for HTTP), or inprocess:// for a Triton of this process")
        try:
            parsed = urllib.parse.urlsplit(f"//{rest}")
            port = parsed.port or DEFAULT_PORTS[scheme]
        except ValueError as e:
            raise PyTritonClientInvalidUrlError(f"Invalid url {url!r}: {e}") from None
        if not parsed.hostname or parsed.path not in ("", "/") or parsed.query or parsed.fragment:
            raise PyTritonClientInvalidUrlError(
                f"Invalid url {url!r}: expected {scheme}://host[:port] (e.g. {scheme}://localhost:"
                f"{DEFAULT_PORTS[scheme]})")
        return cls(scheme, parsed.hostname, port)

    @property
    def address(self) -> str:
        """host:port, as tritonclient takes it."""
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        return f"{host}:{self.port}"

    @property
    def with_scheme(self) -> str:
        if self.scheme == INPROCESS:
            return f"{INPROCESS}://{self.hostname}"
        return f"{self.scheme}://{self.address}"

    @property
    def without_scheme(self) -> str:
        return self.address
