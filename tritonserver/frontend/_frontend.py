"""What the three frontends share: the (server, options) arguments checked
as tritonfrontend checks them, and use as a context manager."""

from __future__ import annotations

from typing import Any, Optional, TypeVar

from .._api._errors import InvalidArgumentError
from .._api._server import Server

F = TypeVar("F", bound="Frontend")


class Frontend:
    """A frontend of one Server; subclasses define ``Options``, ``start()`` and ``stop()``."""

    Options: Any

    def __init__(self, server: Server, options: Optional[Any] = None) -> None:
        kind = type(self).__name__
        if not isinstance(server, Server):
            raise InvalidArgumentError(f"{kind} serves a tritonserver.Server, not {type(server).__name__}")
        if options is None:
            options = self.Options()
        if not isinstance(options, self.Options):
            raise InvalidArgumentError(
                f"Incorrect type for options. options argument must be of type {kind}.Options"
            )
        self._server = server
        self.options = options

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: F) -> F:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
