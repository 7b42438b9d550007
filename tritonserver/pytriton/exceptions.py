"""PyTriton's exception classes (``pytriton.exceptions``), with its names
and hierarchy: every one is a `PyTritonError` whose ``message`` is its text."""

from __future__ import annotations


class _MessageError(Exception):
    """An exception whose ``message`` is its text (the base PyTriton's
    server and client errors share, each hierarchy with a root of its own)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    def __str__(self) -> str:
        return self._message

    @property
    def message(self) -> str:
        """The error's text."""
        return self._message


class PyTritonError(_MessageError):
    """The base of this module's errors."""


class PyTritonValidationError(PyTritonError):
    """A configuration or a value that does not validate."""


class PyTritonInvalidOperationError(PyTritonError):
    """An operation the object's state does not allow."""


class PyTritonBadParameterError(PyTritonError):
    """A parameter of a call that cannot be used."""


class PyTritonModelConfigError(PyTritonError):
    """A model configuration that cannot be used."""


class PyTritonUnrecoverableError(PyTritonError):
    """Raised by an inference callable that can serve no further requests:
    the requests of the call get the error and the Triton object stops
    (its serve() returns)."""


class PyTritonRuntimeError(PyTritonError):
    """An error of no other category (e.g. a decorator's check at call time)."""
