"""InferenceResponse and the iterators that deliver responses (blocking and
asyncio). The native core queues each response as it arrives; iterating
only takes it from there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .. import _core
from ._enums import DataType, MemoryType
from ._errors import CancelledError, TritonError, error_from_code
from ._tensor import Tensor

if TYPE_CHECKING:
    import asyncio
    from types import ModuleType

    from ._model import Model
    from ._request import InferenceRequest


_wakeup: "Optional[ModuleType]" = None


def async_wakeup() -> Any:
    """The `_async_wakeup` module, imported (with asyncio) on first use and
    kept in a global: import statements on the per-request path cost ~0.7 us
    per request in the asyncio profile."""
    global _wakeup
    if _wakeup is None:
        from . import _async_wakeup

        _wakeup = _async_wakeup
    return _wakeup


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
    def _from_core(model: "Model", request: "InferenceRequest", core: "_core.Response",
                   cancelled: bool = False) -> "InferenceResponse":
        return _from_core(model, request, core, cancelled)


def _from_core(model: "Model", request: "InferenceRequest", core: "_core.Response",
               cancelled: bool = False) -> InferenceResponse:
    """The InferenceResponse of a native response (runs once per response)."""
    request_id, parameters, final, core_error, core_outputs = core.fields
    outputs = {name: Tensor(data_type, shape, memory) for name, data_type, shape, memory in core_outputs}
    error: Optional[TritonError] = None
    if core_error is not None:
        error = error_from_code(*core_error)
    elif cancelled and final and not outputs:
        error = CancelledError("request cancelled")
    return InferenceResponse(model, request_id or request.request_id, parameters, outputs, error, None, final)


class ResponseIterator:
    """Blocking iterator over a request's responses (the GIL is released
    while waiting). Iterate from one thread at a time."""

    def __init__(self, model: "Model", request: "_core.Request", inference_request: "InferenceRequest",
                 raise_on_error: bool = False) -> None:
        self._model = model
        self._request = request
        self._inference_request = inference_request
        self._raise_on_error = raise_on_error
        self._complete = False
        self._cancelled = False

    def __iter__(self) -> "ResponseIterator":
        """The iterator itself."""
        return self

    def __next__(self) -> InferenceResponse:
        """The next response, waiting for it with the GIL released."""
        if self._complete:
            raise StopIteration
        core = self._request.next()
        assert core is not None  # no timeout given: next() waits for one
        return self._deliver(core)

    def _deliver(self, core: "_core.Response") -> InferenceResponse:
        response = _from_core(self._model, self._inference_request, core, self._cancelled)
        self._complete = response.final
        if response.error is not None and self._raise_on_error:
            raise response.error
        return response

    def cancel(self) -> None:
        """Ask Triton to cancel the request; the stream then ends promptly,
        with CancelledError (raise_on_error) or a response carrying it."""
        self._cancelled = True
        self._request.cancel()


class AsyncResponseIterator(ResponseIterator):
    """asyncio iterator over a request's responses, woken on its own event
    loop without a thread per request."""

    def __init__(self, model: "Model", request: "_core.Request", inference_request: "InferenceRequest",
                 raise_on_error: bool, loop: "asyncio.AbstractEventLoop",
                 waiters: "_core.AsyncioWaiters") -> None:
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
            core = await response_or_future
        except BaseException:  # cancelled: stop holding the future
            waiters.forget(self._request)
            raise
        return self._deliver(core)

    def __iter__(self) -> Any:
        """Not iterable synchronously: use ``async for``."""
        raise TypeError("AsyncResponseIterator is iterated with 'async for'")

    def __next__(self) -> Any:
        """Not iterable synchronously: use ``async for``."""
        raise TypeError("AsyncResponseIterator is iterated with 'async for'")
