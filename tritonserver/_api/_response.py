"""InferenceResponse and the iterators that deliver responses (blocking and
asyncio). The native module queues each response as it arrives; iterating
only takes it from there.

InferenceResponse's home: Triton's OpenAI frontend imports
``tritonserver._api._response.InferenceResponse`` by this path, so it stays
here (cpp/api_types.cc imports it from here too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .. import _native
from ._errors import TritonError
from ._tensor import Tensor

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from types import ModuleType

    from ._model import Model


_waiters_module: "Optional[ModuleType]" = None


def asyncio_waiters() -> Any:
    """The `_asyncio_waiters` module, imported (with asyncio) on first use and
    kept in a global: import statements on the per-request path cost ~0.7 us
    per request in the asyncio profile."""
    global _waiters_module
    if _waiters_module is None:
        from . import _asyncio_waiters

        _waiters_module = _asyncio_waiters
    return _waiters_module


@dataclass
class InferenceResponse:
    """One response: outputs (name → Tensor), parameters, error, whether it
    is the final response of its request, and the version of the model that
    made it.

    ``model_version`` is not in the official API: the version the core ran
    the request on (for a request without a version, the one it chose), or
    None for a response the core did not make (a cancelled or failed
    request's end)."""

    model: "Model"
    request_id: Optional[str] = None
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Tensor] = field(default_factory=dict)
    error: Optional[TritonError] = None
    classification_label: Optional[str] = None
    final: bool = False
    model_version: Optional[int] = None


class ResponseIterator(_native.ResponseStream):
    """Blocking iterator over a request's responses (the GIL is released
    while waiting). Iterate from one thread at a time.

    ``ResponseIterator(model, request, inference_request, raise_on_error=False)``;
    its ``for`` loop steps in the native base (no Python frame per step).
    """

    if TYPE_CHECKING:
        def __iter__(self) -> "ResponseIterator":
            """The iterator itself."""

        def __next__(self) -> InferenceResponse:
            """The next response, waiting for it with the GIL released."""


class AsyncResponseIterator(_native.AsyncResponseStream):
    """asyncio iterator over a request's responses, woken on its own event
    loop without a thread per request. Iterate from one task at a time.

    ``AsyncResponseIterator(model, request, inference_request, raise_on_error,
    loop, waiters)``; ``__anext__`` is the native base's: each call returns
    an awaitable of the next response (also accepted by
    ``asyncio.create_task``), and the loop runs its other ready tasks first,
    even when the response is already there, so one task cannot chain
    requests of a fast model while the others starve.
    """

    if TYPE_CHECKING:
        def __aiter__(self) -> "AsyncResponseIterator":
            """The iterator itself."""

        def __anext__(self) -> "Coroutine[Any, None, InferenceResponse]":
            """The next response, awaited on the calling event loop."""
