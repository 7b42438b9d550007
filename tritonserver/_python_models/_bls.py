"""BLS for python models run in-process: ``pb_utils.InferenceRequest(
model_name=..., ...).exec()`` runs a request on a model of the server the
calling model runs in, through this package's own API (no copy of numeric
outputs: they are DLPack views of the response buffers)."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator, Optional, Union

import numpy as np

from .._api import _errors, _server
from .._api._enums import DataType, MemoryType
from . import pb_utils
from ._device_array import DeviceArray

# The server address of the model instance running on this thread
# (set by _runtime around initialize/execute/finalize).
current = threading.local()


def _server_of(address: Optional[int]) -> "_server.Server":
    """The running Server whose core handle is at `address`; without one
    (a thread of the model's own), the only running server with in-process
    python models."""
    running = [s for s in list(_server._running) if s._server is not None]
    if address is not None:
        for server in running:
            if server._ptr() == address:
                return server
    candidates = [s for s in running if s.python_models == "in-process"]
    if len(candidates) == 1:
        return candidates[0]
    raise pb_utils.TritonModelException(
        "BLS: cannot tell which server this request is for (call exec() from execute(), initialize() or "
        "finalize(), or from a thread while only one server runs python models in-process)")


def _error_of(error: BaseException) -> pb_utils.TritonError:
    code = _errors._BY_CODE.index(type(error)) if type(error) in _errors._BY_CODE else pb_utils.TritonError.INTERNAL
    return pb_utils.TritonError(str(error), code)


def _response_of(response: Any) -> pb_utils.InferenceResponse:
    """A tritonserver.InferenceResponse as the model API's."""
    outputs = []
    for name, tensor in response.outputs.items():
        array: Any
        if tensor.data_type == DataType.BYTES:
            array = np.asarray(tensor.to_bytes_array(), dtype=np.object_).reshape(tensor.shape)
        elif tensor.memory_type == MemoryType.GPU:
            array = DeviceArray.of_dlpack(tensor, f"output '{name}'")
        else:
            array = np.from_dlpack(tensor)
        outputs.append(pb_utils.Tensor(name, array))
    error = None if response.error is None else _error_of(response.error)
    return pb_utils.InferenceResponse(output_tensors=outputs, error=error, parameters=dict(response.parameters or {}))


def execute(request: pb_utils.InferenceRequest,
            decoupled: bool) -> Union[pb_utils.InferenceResponse, Iterator[pb_utils.InferenceResponse]]:
    """The response (or, `decoupled`, an iterator of the responses) of
    `request` run on its model; a refused request gives a response with its
    error, as with the stub."""
    server = _server_of(getattr(current, "server_address", None))
    kwargs: dict[str, Any] = {"raise_on_error": False}
    if request._request_id:
        kwargs["request_id"] = request._request_id
    if request._correlation_id:
        kwargs["correlation_id"] = request._correlation_id
    if request._flags:
        kwargs["flags"] = request._flags
    if request._timeout:
        kwargs["timeout"] = request._timeout
    parameters = json.loads(request._parameters) if request._parameters else {}
    if parameters:
        kwargs["parameters"] = parameters
    if request._requested:
        kwargs["output_names"] = list(request._requested)
    try:
        model = server.model(request._model_name, request._model_version)
        inputs: dict[str, Any] = {t.name(): t._array if not t.is_cpu() else t.as_numpy() for t in request._inputs}
        responses = model.infer(inputs=inputs, **kwargs)
        if decoupled:
            return (_response_of(r) for r in responses)
        results = [_response_of(r) for r in responses]
    except _errors.TritonError as e:
        failed = pb_utils.InferenceResponse(error=_error_of(e))
        return iter([failed]) if decoupled else failed
    if len(results) != 1:
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(
            f"BLS: model '{request._model_name}' gave {len(results)} responses to a request; use "
            "exec(decoupled=True) for a decoupled model"))
    return results[0]
