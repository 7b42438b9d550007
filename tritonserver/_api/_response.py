"""InferenceResponse and the iterators that deliver responses (blocking and
asyncio). The native module queues each response as it arrives; iterating
only takes it from there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .. import _native
from ._errors import TritonError
from ._tensor import Tensor

if TYPE_CHECKING:
    import asyncio
    from types import ModuleType

    from ._model import Model
    from ._request import InferenceRequest


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
    """One response: outputs (name → Tensor), parameters, error, and whether
    it is the final response of its request."""

    model: "Model"
    request_id: Optional[str] = None
    parameters: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Tensor] = field(default_factory=dict)
    error: Optional[TritonError] = None
    classification_label: Optional[str] = None
    final: bool = False

    @staticmethod
    def _from_native(model: "Model", request: "InferenceRequest", native: "_native.Response",
                     cancelled: bool = False) -> "InferenceResponse":
        """The InferenceResponse of a native response (made natively, by the
        classes' own constructors: `inference_response` in
        cpp/response_view.cc)."""
        response: InferenceResponse = native.inference_response(model, request, cancelled)
        return response


class ResponseIterator(_native.ResponseStream):
    """Blocking iterator over a request's responses (the GIL is released
    while waiting). Iterate from one thread at a time.

    ``ResponseIterator(model, request, inference_request, raise_on_error=False)``;
    its ``for`` loop steps in the native base (no Python frame per step).
    """

    if TYPE_CHECKING:
        # Kept by the native base (the stub leaves private names out).
        _model: "Model"
        _request: "_native.Request"
        _inference_request: "InferenceRequest"
        _raise_on_error: bool
        _complete: bool
        _cancelled: bool

        def __iter__(self) -> "ResponseIterator":
            """The iterator itself."""

        def __next__(self) -> InferenceResponse:
            """The next response, waiting for it with the GIL released."""

        def _deliver(self, native: "_native.Response") -> InferenceResponse:
            """The InferenceResponse of `native`; raises its error when
            raise_on_error (the stream is complete after the final one)."""

    def cancel(self) -> None:
        """Ask Triton to cancel the request; the stream then ends promptly,
        with CancelledError (raise_on_error) or a response carrying it."""
        self._cancelled = True
        self._request.cancel()


class AsyncResponseIterator(ResponseIterator):
    """asyncio iterator over a request's responses, woken on its own event
    loop without a thread per request."""

    def __init__(self, model: "Model", request: "_native.Request", inference_request: "InferenceRequest",
                 raise_on_error: bool, loop: "asyncio.AbstractEventLoop",
                 waiters: "_native.AsyncioWaiters") -> None:
        super().__init__(model, request, inference_request, raise_on_error)
        self._loop = loop
        # The loop's waiters, to which the request was attached at submission.
        self._waiters = waiters

    def __aiter__(self) -> "AsyncResponseIterator":
        """The iterator itself."""
        return self

    async def __anext__(self) -> InferenceResponse:
        """The next response, awaited on the calling event loop (which runs
        its other ready tasks first, even when the response is already
        there)."""
        if self._complete:
            raise StopAsyncIteration
        waiters = self._waiters
        # A future that the loop's waiters resolve, or (a response already
        # queued) an awaitable that first lets the loop run its other tasks
        # once: either way this task yields, so one task cannot chain
        # requests of a fast model while the others starve.
        response_or_future = waiters.next(self._request, self._loop)
        try:
            native = await response_or_future
        except BaseException:  # cancelled: stop holding the future
            waiters.forget(self._request)
            raise
        return self._deliver(native)

    def __iter__(self) -> Any:
        """Not iterable synchronously: use ``async for``."""
        raise TypeError("AsyncResponseIterator is iterated with 'async for'")

    def __next__(self) -> Any:
        """Not iterable synchronously: use ``async for``."""
        raise TypeError("AsyncResponseIterator is iterated with 'async for'")
