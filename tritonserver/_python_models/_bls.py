"""BLS for python models run in-process: ``pb_utils.InferenceRequest(
model_name=..., ...).exec()`` runs a request on a model of the server the
calling model runs in, through this package's own API (no copy of numeric
outputs: they are DLPack views of the response buffers)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import re
import threading
from typing import Any, Iterator, Optional, Union

import numpy as np

from .._api import _errors, _server
from .._api._datautils import numpy_types
from .._api._enums import DataType, MemoryType
from . import pb_utils
from ._device_array import DeviceArray

# The server address and the model folder of the model instance running
# on this thread (set by _runtime around auto_complete_config, initialize,
# execute and finalize, with enter()).
current = threading.local()
_NUMPY_TYPES = numpy_types()


def enter(server_address: Optional[int], model_dir: Optional[str], instance: str) -> None:
    """Say which server (its core handle's address) and which model
    instance (its version folder, its name) the model code about to run on
    this thread belongs to."""
    current.server_address = server_address
    current.model_dir = model_dir
    current.instance = instance


def context() -> tuple[Optional[int], Optional[str], str]:
    """What enter() said on this thread, to say it again on another."""
    return (getattr(current, "server_address", None), getattr(current, "model_dir", None),
            getattr(current, "instance", ""))


def _refused(what: str, message: str) -> pb_utils.TritonModelException:
    """A model control call the server refused, worded as the stub words
    what its parent process answers."""
    return pb_utils.TritonModelException(
        f"Failed to {what}: Failed to process the request for model '{getattr(current, 'instance', '')}', "
        f"message: {message}")


@contextlib.contextmanager
def _refusals(what: str) -> Iterator[None]:
    """A TritonError of the server's, raised in the block, becomes
    _refused(what, its message)."""
    try:
        yield
    except _errors.TritonError as e:
        raise _refused(what, str(e)) from None


def _calling_server() -> "_server.Server":
    """The running Server of the model code calling (its core handle's
    address, said by enter()); on a thread of the model's own, the only
    running server with in-process python models."""
    address = getattr(current, "server_address", None)
    running = _server.running_servers()
    if address is not None:
        for server_address, server in running:
            if server_address == address:
                return server
        if _server.stopped_server(address):
            raise pb_utils.TritonModelException(
                "the server this model runs in was stopped: it takes no new requests (BLS) nor model control "
                "calls; let execute() finish without them")
    candidates = [s for _, s in running if s.python_models == "in-process"]
    if len(candidates) == 1:
        return candidates[0]
    raise pb_utils.TritonModelException(
        "cannot tell which server the calling model runs in: call BLS and model control (exec(), load_model(), "
        "unload_model(), is_model_ready()) from execute(), initialize() or finalize(), or from a thread of the "
        "model's own only while one server runs python models in-process")


def model_dir() -> str:
    """pb_utils.get_model_dir(): the calling model's version folder (where
    its model.py is), as the stub gives it."""
    folder = getattr(current, "model_dir", None)
    if folder is None:
        raise pb_utils.TritonModelException(
            "get_model_dir(): python models run in-process share one interpreter, so the model is known only while "
            "its own auto_complete_config(), initialize(), execute() or finalize() runs: call it there (e.g. keep "
            "it in initialize()), not from a thread of the model's own")
    return str(folder)


def load_model(model_name: str, config: str = "", files: Optional[dict[str, bytes]] = None) -> None:
    """pb_utils.load_model(): load (or reload) a model of the calling
    model's server, with an optional config (JSON) and files, as the stub
    does (its messages; the core's error otherwise)."""
    if files is not None and not isinstance(files, dict):
        raise pb_utils.TritonModelException(
            f"failed to load model '{model_name}', files should be a dictionary of file paths and file contents")
    parameters: dict[str, Any] = {}
    if config:
        parameters["config"] = config
    for path, content in (files or {}).items():
        if not isinstance(path, str) or not isinstance(content, bytes):
            raise pb_utils.TritonModelException(
                f"failed to load model '{model_name}', files should be a dictionary of file paths (str) and file "
                f"contents (bytes), not {type(path).__name__}: {type(content).__name__}")
        parameters[path] = content
    server = _calling_server()
    with _refusals("load model"):
        server.load(model_name, parameters or None)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """pb_utils.unload_model(): start unloading a model of the calling
    model's server (not waited for, as with the stub)."""
    server = _calling_server()
    with _refusals("unload model"):
        server.unload(model_name, unload_dependents=unload_dependents)


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """pb_utils.is_model_ready(): whether a model (version: a string, ""
    for the newest) of the calling model's server is ready."""
    version = -1
    if model_version:
        number = re.match(r"\s*[+-]?\d+", model_version)  # read as the stub reads it (std::stol)
        if number is None:
            raise _refused("check model readiness", f"failed to get model version from specified version string "
                           f"'{model_version}' (details: stol), version should be an integral value > 0")
        version = int(number.group())
        if version < 0:
            raise _refused("check model readiness", f"failed to get model version from specified version string "
                           f"'{model_version}', version should be an integral value > 0")
    server = _calling_server()
    with _refusals("check model readiness"):
        return _server.model_is_ready(server, model_name, version)


def _error_of(error: BaseException) -> pb_utils.TritonError:
    code = _errors.code_of(error)
    return pb_utils.TritonError(str(error), pb_utils.TritonError.INTERNAL if code is None else code)


def _response_of(response: Any) -> pb_utils.InferenceResponse:
    """A tritonserver.InferenceResponse as the model API's."""
    outputs = []
    for name, tensor in response.outputs.items():
        array: Any
        if tensor.data_type == DataType.BYTES:
            array = np.asarray(tensor.to_bytes_array(), dtype=np.object_).reshape(tensor.shape)
        elif tensor.data_type == DataType.BF16 and tensor.memory_type != MemoryType.GPU:  # NumPy has no BF16
            outputs.append(pb_utils._bf16_tensor(name, tensor))
            continue
        elif tensor.memory_type == MemoryType.GPU:
            array = DeviceArray.of_dlpack(tensor, f"output '{name}'")
        else:
            array = _writable_view(tensor)
        outputs.append(pb_utils.Tensor(name, array))
    error = None if response.error is None else _error_of(response.error)
    return pb_utils.InferenceResponse(output_tensors=outputs, error=error, parameters=dict(response.parameters or {}))


def _writable_view(tensor: Any) -> Any:
    """A host output of a BLS response as a writable NumPy view, as the
    stub's are (a model post-processes them in place): the response is the
    calling model's alone. NumPy 1's from_dlpack() makes read-only arrays."""
    dtype = _NUMPY_TYPES.get(tensor.data_type)
    buffer = tensor.memory_buffer
    if dtype is None or buffer.size == 0:
        return np.from_dlpack(tensor)
    memory = (ctypes.c_char * buffer.size).from_address(buffer.data_ptr)
    memory.owner = buffer.owner  # keeps the response's buffer alive as long as the array
    return np.frombuffer(memory, dtype).reshape(tensor.shape)


def _input_of(tensor: pb_utils.Tensor) -> Any:
    """What the request takes of a BLS input: the data of a GPU tensor, a
    BF16 tensor itself (its DLPack export: NumPy has no BF16), else the
    array."""
    if not tensor.is_cpu():
        return tensor._array
    if tensor.triton_dtype() == DataType.BF16:
        return tensor
    return tensor.as_numpy()


class ResponseIterator:
    """The responses of a decoupled BLS request (the request is sent
    already), as the stub's iterator gives them: once its final response
    came, a new iteration (`for`, `iter()`) gives them all again from the
    first; one left midway resumes where it was."""

    def __init__(self, responses: Optional[Iterator[Any]], seen: Optional[list[pb_utils.InferenceResponse]] = None
                 ) -> None:
        """`responses`: the server's, to come; None: finished, with `seen`."""
        self._responses = responses
        self._seen = seen or []
        self._index = 0  # the next of `_seen` to give, once finished

    def __iter__(self) -> "ResponseIterator":
        if self._responses is None and self._index >= len(self._seen):
            self._index = 0
        return self

    def __next__(self) -> pb_utils.InferenceResponse:
        if self._responses is not None:
            try:
                received = next(self._responses)
            except StopIteration:  # (the final response was given already)
                self._responses = None
                self._index = len(self._seen)
                raise
            response = _response_of(received)
            self._seen.append(response)
            if received.final:
                self._responses = None
                self._index = len(self._seen)
            return response
        if self._index >= len(self._seen):
            raise StopIteration
        self._index += 1
        return self._seen[self._index - 1]


def execute(request: pb_utils.InferenceRequest,
            decoupled: bool) -> Union[pb_utils.InferenceResponse, "ResponseIterator"]:
    """The response (or, `decoupled`, an iterator of the responses) of
    `request` run on its model; a refused request gives a response with its
    error, as with the stub."""
    server = _calling_server()
    kwargs: dict[str, Any] = {}
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
    name = request._model_name
    try:
        model = server.model(name, request._model_version)
        if not decoupled and model._decoupled():  # checked before sending, as the stub does
            return _refusal(name, f"Model {name} is using the decoupled. The current BLS request call doesn't support "
                                  "models using the decoupled transaction policy. Please use 'decoupled=True' argument "
                                  "to the 'exec' or 'async_exec' calls for decoupled models.'")
        inputs: dict[str, Any] = {t.name(): _input_of(t) for t in request._inputs}
        sent = model.create_request(inputs=inputs, **kwargs)
        sent._from_model_code = True  # a stop past its exit timeout cancels it
        responses = model.infer(sent, raise_on_error=False)
        if decoupled:
            return ResponseIterator(responses)
        (result,) = [_response_of(r) for r in responses]  # a model that is not decoupled answers once
        return result
    except _errors.TritonError as e:
        try:
            ready = _server.model_is_ready(server, name, request._model_version)
        except _errors.TritonError:
            ready = False
        failed = _refusal(name, str(e) if ready else
                          f"Failed for execute the inference request. Model '{name}' is not ready.")
        return ResponseIterator(None, [failed]) if decoupled else failed


def _refusal(model_name: str, why: str) -> pb_utils.InferenceResponse:
    """The response of a BLS request the core refused, as the stub words
    it (code INTERNAL)."""
    return pb_utils.InferenceResponse(error=pb_utils.TritonError(
        f"Model {model_name} - Error when running inference: {why}"))
