"""The in-process transport of the clients (url ``inprocess://`` or
``inprocess://<TritonConfig.id>``): a request is a call into the embedded
server of a `Triton` running in this process, without a socket; the asyncio
clients' requests are the server's asyncio requests (answered on their
event loop, no thread between). Headers that match the Triton's
``http_header_forward_pattern`` reach the model as parameters, as the HTTP
endpoint forwards them."""

from __future__ import annotations

import re
import time
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple

import numpy

from ... import _native
from ..._api._datautils import triton_to_dlpack_dtype
from ..._api._dlpack import DLDeviceType
from ..._api._enums import DataType, MemoryType
from ..._api._errors import TritonError
from ..._api._tensor import Tensor
from ..exceptions import PyTritonError
from ..model_config.triton_model_config import TritonModelConfig
from ..triton import Triton, running_triton
from ._common import Array, Value, model_config_of
from ._deadlines import DEADLINES
from ._url import ClientUrl
from .exceptions import (PyTritonClientInferenceServerError, PyTritonClientInvalidUrlError,
                         PyTritonClientModelUnavailableError, PyTritonClientTimeoutError)


class InProcessTransport:
    """One client's way to a model of a Triton of this process."""

    def __init__(self, url: ClientUrl, model_name: str, model_version: Optional[str],
                 inference_timeout_s: float) -> None:
        self.url = url
        self._id = url.hostname
        self._model_name = model_name
        self._model_version = int(model_version) if model_version not in (None, "") else -1
        self._inference_timeout_s = inference_timeout_s
        self._triton: Optional[Triton] = None
        self._served: Optional[Tuple[Any, Any]] = None  # (server, model)

    def close(self) -> None:
        self._triton = None
        self._served = None

    def wait_for_server(self, timeout_s: float) -> None:
        self._target(timeout_s)

    def wait_for_model(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        triton = self._target(timeout_s)
        while True:
            try:
                if triton.server.model(self._model_name, self._model_version).ready():
                    return
            except TritonError:
                pass
            if time.monotonic() >= deadline:
                raise PyTritonClientTimeoutError(
                    f"Timeout while waiting for model {self._model_name} to be ready ({timeout_s} s)")
            time.sleep(0.01)  # the server has no readiness event to wait on

    def model_config(self, timeout_s: float) -> TritonModelConfig:
        triton = self._target(timeout_s)
        bound = triton._models.get(self._model_name)
        if bound is not None:
            return bound.triton_config
        try:
            config = triton.server.model(self._model_name, self._model_version).config()
        except TritonError as e:
            raise PyTritonClientModelUnavailableError(f"Model {self._model_name} is unavailable: {e}") from None
        return model_config_of(self._model_name, config)

    def load_model(self, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        self._target(0).server.load(self._model_name, {"config": config, **(files or {})} if config else None)

    def unload_model(self) -> None:
        self._target(0).server.unload(self._model_name)

    def _target(self, timeout_s: float) -> Triton:
        if self._triton is not None and self._triton.is_connected():
            return self._triton
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                found = running_triton(self._id)
            except PyTritonError as e:  # several run: the url must name one
                raise PyTritonClientInvalidUrlError(f"{self.url.with_scheme}: {e}") from None
            if found is not None:
                self._triton = found
                return found
            if time.monotonic() >= deadline:
                named = f"with id '{self._id}' " if self._id else ""
                raise PyTritonClientTimeoutError(
                    f"Waiting for the server at {self.url.with_scheme}: no Triton {named}runs in this process "
                    f"after {timeout_s} s (enter `with Triton(...) as triton:` or call triton.run() first)")
            time.sleep(0.01)  # a Triton of this process registers itself when it runs; nothing to wait on

    def _model(self) -> Any:
        """The served model (looked up once; again after the Triton restarted)."""
        triton = self._target(0)
        if self._served is None or self._served[0] is not triton.server:
            try:
                self._served = (triton.server, triton.server.model(self._model_name, self._model_version))
            except TritonError as e:
                raise PyTritonClientModelUnavailableError(f"Model {self._model_name} is unavailable: {e}") from None
        return self._served[1]

    def _parameters(self, parameters: Optional[Dict[str, Value]],
                    headers: Optional[Dict[str, Value]]) -> Dict[str, Value]:
        """The request's parameters: `parameters` and the headers the
        Triton's http_header_forward_pattern forwards."""
        merged: Dict[str, Value] = dict(parameters) if parameters else {}
        if headers:
            pattern = self._target(0)._config.http_header_forward_pattern
            if pattern:
                merged.update({k: v for k, v in headers.items() if re.match(pattern, k)})
        return merged

    def responses(self, inputs: Dict[str, Array], output_names: List[str], parameters: Optional[Dict[str, Value]],
                  headers: Optional[Dict[str, Value]], decoupled: bool) -> Iterator[Dict[str, Array]]:
        """The request's responses' outputs. `output_names` (the model's
        outputs, which the network transport names in its request) is not
        sent: a request naming none gets them all, without the per-name
        work. A caller that stops reading before the last response (a
        decoupled stream left early) cancels the request."""
        return self._outputs(self._submitted(False, inputs, parameters, headers))

    def async_responses(self, inputs: Dict[str, Array], parameters: Optional[Dict[str, Value]],
                        headers: Optional[Dict[str, Value]]) -> AsyncIterator[Dict[str, Array]]:
        """responses() for a coroutine of the running event loop: the
        request is submitted now, its responses come on this loop. The
        inference timeout cancels it (as responses()); so does a caller
        that stops reading before its last response (its task cancelled,
        or the iterator closed)."""
        return self._async_outputs(self._submitted(True, inputs, parameters, headers))

    async def async_result(self, inputs: Dict[str, Array], parameters: Optional[Dict[str, Value]],
                           headers: Optional[Dict[str, Value]]) -> Dict[str, Array]:
        """The outputs of a request's last response with outputs, awaited on
        the running event loop (AsyncioModelClient: a model that is not
        decoupled answers once): async_responses() without an asynchronous
        generator between, which was 14 % of the rate at 16 in flight."""
        iterator = self._submitted(True, inputs, parameters, headers)
        watch = DEADLINES.watch(iterator, self._inference_timeout_s)
        final = False
        last: Dict[str, Array] = {}
        try:
            async for response in iterator:
                final = response.final
                last = self._checked(response, watch.expired) or last
            return last
        finally:
            DEADLINES.finish(watch)
            if not final:
                iterator.cancel()  # the caller's task was cancelled

    def _submitted(self, asynchronous: bool, inputs: Dict[str, Array], parameters: Optional[Dict[str, Value]],
                   headers: Optional[Dict[str, Value]]) -> Any:
        """The request sent (by Model.async_infer or Model.infer): its response iterator."""
        model = self._model()
        send = model.async_infer if asynchronous else model.infer
        try:
            return send(inputs=inputs, parameters=self._parameters(parameters, headers), raise_on_error=False)
        except TritonError as e:
            raise PyTritonClientInferenceServerError(f"Error occurred during inference request. Message: {e}") \
                from None

    def _outputs(self, iterator: Any) -> Iterator[Dict[str, Array]]:
        watch = DEADLINES.watch(iterator, self._inference_timeout_s)
        final = False
        try:
            for response in iterator:
                final = response.final
                outputs = self._checked(response, watch.expired)
                if outputs:
                    yield outputs
        finally:
            DEADLINES.finish(watch)
            if not final:
                iterator.cancel()  # the caller left before the last response (nothing to do after it)

    async def _async_outputs(self, iterator: Any) -> AsyncIterator[Dict[str, Array]]:
        watch = DEADLINES.watch(iterator, self._inference_timeout_s)
        final = False
        try:
            async for response in iterator:
                final = response.final
                outputs = self._checked(response, watch.expired)
                if outputs:
                    yield outputs
        finally:
            DEADLINES.finish(watch)
            if not final:
                iterator.cancel()  # the caller left before the last response (nothing to do after it)

    def _checked(self, response: Any, expired: bool) -> Dict[str, Array]:
        """A response's outputs ({} for a response without any), or the
        error it stands for."""
        if expired:
            raise PyTritonClientTimeoutError(
                f"Timeout occurred during inference request. Timeout: {self._inference_timeout_s} s")
        if response.error is not None:
            raise PyTritonClientInferenceServerError(
                f"Error occurred during inference request. Message: {response.error}")
        # views of the response's buffers (kept alive by the arrays)
        return {name: _array(tensor) for name, tensor in response.outputs.items()}


def _array(tensor: Tensor) -> Array:
    """An output as NumPy, as numpy.asarray(tensor) makes it (a read-only
    view of the response's buffer; BYTES decoded). A host tensor of a type
    NumPy has is exported straight from its native buffer: the response made
    it a moment ago, so Tensor.__dlpack__'s checks of fields a caller may
    have changed have nothing to find (they were 2 of this path's 4 us)."""
    dlpack_type = _DLPACK_TYPES.get(tensor.data_type)
    buffer = tensor.memory_buffer
    if dlpack_type is None or buffer.memory_type == MemoryType.GPU:
        return numpy.asarray(tensor)
    return numpy.from_dlpack(_Export(buffer, tensor.shape, dlpack_type))


class _Export:
    """A DLPack producer of a response's host output (numpy.from_dlpack's argument)."""

    __slots__ = ("_buffer", "_shape", "_type")

    def __init__(self, buffer: Any, shape: Any, dlpack_type: Tuple[int, int]) -> None:
        self._buffer, self._shape, self._type = buffer, shape, dlpack_type

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any:
        buffer = self._buffer
        return _native.export_dlpack(buffer.owner, buffer.data_ptr, buffer.size, self._shape, *self._type,
                                     _CPU, 0, max_version is not None and max_version[0] >= 1)

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (_CPU, 0)


_DLPACK_TYPES: Dict[DataType, Tuple[int, int]] = {
    t: triton_to_dlpack_dtype(t) for t in DataType if t not in (DataType.BYTES, DataType.BF16, DataType.INVALID)}
_CPU = int(DLDeviceType.kDLCPU)
