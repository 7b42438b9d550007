"""Model: a handle on one model of a server, and the entry point for
inference."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional, cast

from ._enums import ModelBatchFlag, ModelTxnPropertyFlag
from ._errors import InvalidArgumentError, NotFoundError
from ._checks import text as _text
from ._request import InferenceRequest, InferenceRequestKwargs, _model_version
from ._response import AsyncResponseIterator, ResponseIterator, asyncio_waiters
from ._typing import Unpack
from ._user_queues import register_user_queue, unregister_user_queue

if TYPE_CHECKING:
    import asyncio

    from .. import _native
    from ._server import Server


def _json_object(text: str) -> dict[str, Any]:
    """A JSON object from the core (metadata, config, statistics)."""
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def _given_request(request: Any, kwargs: Mapping[str, object]) -> InferenceRequest:
    """The InferenceRequest passed to infer(), checked: a dict of inputs in
    its place, or keyword arguments that would be ignored, are refused."""
    if not isinstance(request, InferenceRequest):
        hint = " (pass inputs by keyword: infer(inputs={...}))" if isinstance(request, dict) else ""
        raise TypeError(
            f"the first argument of infer() is an InferenceRequest, not {type(request).__name__}{hint}"
        )
    if kwargs:
        raise TypeError(
            f"infer() takes an InferenceRequest or keyword arguments, not both "
            f"(got an InferenceRequest and {', '.join(sorted(kwargs))})"
        )
    return request


class Model:
    """A model served by a Server (a snapshot of its index entry).

    Example:
        >>> model = server.model("add_sub")
        >>> for response in model.infer(inputs={"INPUT0": a, "INPUT1": b}):
        ...     print(response.outputs["OUTPUT0"])
    """

    def __init__(
        self,
        server: "Server",
        name: str,
        version: int = -1,
        state: Optional[str] = None,
        reason: Optional[str] = None,
    ) -> None:
        server._started()
        _text("model name", name)
        self._server = server
        self.name = name
        self.version = _model_version(version)
        self.state = state
        self.reason = reason

    def __repr__(self) -> str:
        return str({"name": self.name, "version": self.version, "state": self.state})

    __str__ = __repr__

    # -- inference -------------------------------------------------------------
    def create_request(self, **kwargs: Unpack[InferenceRequestKwargs]) -> InferenceRequest:
        """A new InferenceRequest for this model, made from the keyword
        arguments of ``infer()`` (described there)."""
        return self._request(None, kwargs)

    def infer(
        self,
        inference_request: Optional[InferenceRequest] = None,
        raise_on_error: bool = True,
        **kwargs: Unpack[InferenceRequestKwargs],
    ) -> ResponseIterator:
        """Send a request; iterate the result for its responses.

        Give either ``inference_request`` (made by ``create_request()`` or
        ``InferenceRequest(model, ...)``) or the keyword arguments below,
        which make one; not both. Errors in building the request (unknown
        model, bad input or parameter, GPU output without CUDA) raise here,
        before anything is queued. With ``raise_on_error`` (the default) a
        response that carries an error raises it when the iterator reaches
        it; otherwise the error is in ``response.error``.

        Keyword arguments:
            inputs: The input tensors by name: Tensors, NumPy arrays, anything
                with ``__dlpack__`` (CuPy, PyTorch, JAX; CPU or GPU), lists or
                Python scalars, and arrays or lists of bytes or str for BYTES
                inputs. Host inputs of up to 64 KiB are copied here (the
                caller may refill them once this returns); larger
                contiguous memory, and GPU memory, is passed to Triton
                without a copy and kept alive until Triton releases the
                request: write into it only after the final response.
            parameters: Request parameters by name (str, int, float or bool
                values), which the model reads.
            output_names: The outputs to compute and return (a list of
                names); by default all of the model's outputs.
            output_memory_type: Where outputs are allocated: ``"cpu"`` (the
                default), ``"cpu_pinned"``, ``"gpu"``, ``"gpu:1"``, a
                MemoryType, or a ``(MemoryType or DLDeviceType, device id)``
                pair.
            request_id: An id for the request, which its responses carry in
                ``response.request_id``.
            correlation_id: The sequence this request belongs to (an int or a
                str), for models with the sequence batcher.
            flags: Sequence flags: 1 for the first request of a sequence, 2
                for its last (3 for both); 0 (the default) otherwise.
            priority: The request's priority for a model whose dynamic
                batcher has priority levels (1 is the highest); 0 uses the
                model's default priority.
            timeout: Microseconds within which the request must complete,
                for models whose dynamic batcher has a queue policy (which
                says what happens to a late request, e.g. it fails); 0 (the
                default) uses the model's own timeout.
            response_queue: A queue (``queue.SimpleQueue``, ``asyncio.Queue``
                or anything with ``put_nowait``) that receives each response
                as it arrives, whether or not the iterator is read.
        """
        request = self._request(inference_request, kwargs)
        return ResponseIterator(self, self._submit(request), request, raise_on_error)

    def async_infer(
        self,
        inference_request: Optional[InferenceRequest] = None,
        raise_on_error: bool = True,
        **kwargs: Unpack[InferenceRequestKwargs],
    ) -> AsyncResponseIterator:
        """Like infer(), for asyncio: ``async for response in ...``. Call it
        with an event loop running in this thread. Takes the arguments of
        ``infer()``, keyword arguments included (described there)."""
        request = self._request(inference_request, kwargs)
        waiters_module = asyncio_waiters()
        loop = waiters_module.running_loop()
        waiters = waiters_module.for_loop(loop)
        native_request = self._submit(request, loop, waiters)
        return AsyncResponseIterator(self, native_request, request, raise_on_error, loop, waiters)

    def _request(self, given: Optional[InferenceRequest], kwargs: Mapping[str, object]) -> InferenceRequest:
        """The request to send: `given`, checked, or one of this model built
        from the keyword arguments (a `model` among them is ignored)."""
        if given is not None:
            return _given_request(given, kwargs)
        cast("dict[str, Any]", kwargs).pop("model", None)
        return InferenceRequest(self, **cast("dict[str, Any]", kwargs))

    def _submit(self, request: InferenceRequest, loop: Optional["asyncio.AbstractEventLoop"] = None,
                waiters: Optional["_native.AsyncioWaiters"] = None) -> "_native.Request":
        """Build and submit the native request (attached to `waiters`, the
        asyncio waiters of `loop`, if given; feeding a user queue, if any,
        on `loop`)."""
        native_request = request._create_native_request()
        token = None
        try:
            if request.response_queue is not None:
                token = register_user_queue(native_request, request.response_queue, self, request, loop)
            if waiters is not None:
                waiters.submit(native_request)  # attach and submit, one call
            else:
                native_request.submit()
        except BaseException:
            if token is not None:
                unregister_user_queue(token)
            native_request.discard()  # its inputs go now (a no-op once submitted)
            raise
        return native_request

    # -- introspection ---------------------------------------------------------
    def ready(self) -> bool:
        """Whether this model (version) is ready."""
        return self._server._started().model_is_ready(self.name, self.version)

    def metadata(self) -> dict[str, Any]:
        """Model metadata: name, versions, platform, inputs, outputs."""
        server = self._server._started()
        try:
            return _json_object(server.model_metadata(self.name, self.version))
        except NotFoundError as e:
            raise self._server._unknown_model(e, self.name, self.version) from None

    def config(self, config_version: int = 1) -> dict[str, Any]:
        """The model configuration, as JSON."""
        server = self._server._started()
        try:
            return _json_object(server.model_config(self.name, self.version, config_version))
        except NotFoundError as e:
            raise self._server._unknown_model(e, self.name, self.version) from None

    def statistics(self) -> dict[str, Any]:
        """Inference statistics (``{"model_stats": [...]}``). A model being
        unloaded (its requests in flight finishing) has none, as the core's
        once its unload began: it is left out of every model's statistics
        (an empty name) and unknown on its own."""
        server = self._server._started()
        draining = server.draining_models()
        try:
            if self.name in draining:
                raise InvalidArgumentError(f"requested model '{self.name}' is not available")  # the core's words
            statistics = _json_object(server.model_statistics(self.name, self.version))
        except InvalidArgumentError as e:  # the core's class for this case: kept
            if "is not available" not in str(e):
                raise
            raise self._server._unknown_model(e, self.name, self.version) from None
        if draining and not self.name:
            statistics["model_stats"] = [s for s in statistics.get("model_stats", []) if s.get("name") not in draining]
        return statistics

    def batch_properties(self) -> ModelBatchFlag:
        """Batching properties."""
        return ModelBatchFlag(self._server._started().model_batch_properties(self.name, self.version))

    def transaction_properties(self) -> ModelTxnPropertyFlag:
        """Transaction properties (ONE_TO_ONE or DECOUPLED)."""
        return ModelTxnPropertyFlag(
            self._server._started().model_transaction_properties(self.name, self.version)
        )

    def _decoupled(self) -> bool:
        """Whether the model is decoupled (any number of responses a request)."""
        return bool(self.transaction_properties() & ModelTxnPropertyFlag.DECOUPLED)
