"""The ``TritonError`` family: one class per Triton error code.

Every error the core reports surfaces as the matching subclass, with the
core's message. ``CancelledError`` is a subclass of ``UnknownError`` so code
written for the official binding (which reports cancellation as
``UnknownError``) keeps working.
"""

from __future__ import annotations

from typing import Optional


class TritonError(Exception):
    """Base class of every error raised by the Triton core."""


class UnknownError(TritonError):
    """An error of unknown cause."""


class InternalError(TritonError):
    """The core failed internally (also: a bad model repository path)."""


class NotFoundError(TritonError):
    """A model, tensor or other named entity does not exist."""


class InvalidArgumentError(TritonError):
    """An argument or a value is not acceptable."""


class UnavailableError(TritonError):
    """The server, a model or the Triton core itself is not available."""


class UnsupportedError(TritonError):
    """The operation is not supported here (e.g. GPU memory without CUDA)."""


class AlreadyExistsError(TritonError):
    """The entity already exists."""


class CancelledError(UnknownError):
    """The request was cancelled (``ResponseIterator.cancel()``)."""


# Indexed by TRITONSERVER_Error_Code; the native module raises its errors
# through this table (cpp/errors.cc reads it on the first error).
_BY_CODE: tuple[type[TritonError], ...] = (
    UnknownError,
    InternalError,
    NotFoundError,
    InvalidArgumentError,
    UnavailableError,
    UnsupportedError,
    AlreadyExistsError,
    CancelledError,
)

for _cls in (TritonError, *_BY_CODE):
    _cls.__module__ = "tritonserver"


def error_from_code(code: int, message: str) -> TritonError:
    """The exception object for a core error code and message."""
    cls = _BY_CODE[code] if 0 <= code < len(_BY_CODE) else UnknownError
    return cls(message)


def code_of(error: BaseException) -> Optional[int]:
    """The core error code (TRITONSERVER_Error_Code, also the python
    backend's TritonError codes) of a tritonserver error, its most specific
    class first (CancelledError before UnknownError); None for another
    exception. The one map from these classes to codes."""
    for cls in type(error).__mro__:
        if cls in _BY_CODE:
            return _BY_CODE.index(cls)
    return None


def advised(error_type: type[TritonError], message: str, core_error: BaseException) -> TritonError:
    """An error whose `message` adds this package's advice, written for its
    Python API (server.load(), Options), to the core's `core_error`: the
    network frontends answer with the core's words (network_text), as
    NVIDIA's binary does, since that advice is no fix for their clients."""
    explained = error_type(message)
    explained.core_text = network_text(core_error)  # type: ignore[attr-defined]
    return explained


def network_text(error: BaseException) -> str:
    """An error's message for a network client: the core's own words where
    the package advised its Python API's users (advised())."""
    return getattr(error, "core_text", None) or str(error)
