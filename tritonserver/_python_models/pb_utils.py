"""``triton_python_backend_utils`` for python models run in-process.

The names and behaviour follow the python backend's documented model API
(python_backend README, Triton 2.51): ``Tensor``, ``InferenceRequest``,
``InferenceResponse``, ``TritonError``, ``TritonModelException``, the
response sender of decoupled models, the pure-Python helpers and the
constants. Registered as ``sys.modules["triton_python_backend_utils"]`` when
an in-process model loads, so ``import triton_python_backend_utils as
pb_utils`` in model.py finds it.
"""

from __future__ import annotations

import ctypes
import enum
import json
import logging
import struct
import weakref
from collections.abc import Mapping
from typing import Any, Optional, Union

import numpy as np

from .. import _native
from .._api import _errors
from ._device_array import DeviceArray, input_on_device, is_on_device
from .._api._datautils import numpy_types
from .._api._enums import DataType, MemoryType
from .._api._memorybuffer import MemoryBuffer
from .._api._tensor import Tensor as _ApiTensor

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
# PreferredMemory's memory types, numbered as the stub's.
TRITONSERVER_MEMORY_GPU = 0
TRITONSERVER_MEMORY_CPU = 1

_BYTES = int(DataType.BYTES)
_BF16 = int(DataType.BF16)
# TRITONSERVER_DataType number -> NumPy type (BYTES: object arrays), from
# the package's one table of element types.
_NUMPY_BY_TRITON: dict[int, Any] = {int(t): numpy_type for t, numpy_type in numpy_types().items()}
_NUMPY_BY_TRITON[_BYTES] = np.object_
# The config's type names (BYTES as TYPE_STRING, BOOL as Python's bool), as
# the stub's module has them.
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_" + ("STRING" if t == _BYTES else DataType(t).name): bool if t == DataType.BOOL else numpy_type
    for t, numpy_type in _NUMPY_BY_TRITON.items()
}
_TRITON_BY_NUMPY: dict[Any, int] = {np.dtype(t): code for code, t in _NUMPY_BY_TRITON.items()}
_TRITON_BY_NUMPY[np.dtype(np.bytes_)] = _BYTES
# numpy_to_triton_type()'s comparisons, in the stub's order.
_STUB_TYPE_ORDER = [(numpy_type, code) for code, numpy_type in sorted(_NUMPY_BY_TRITON.items())] + [(np.bytes_, _BYTES)]
Array = np.ndarray[Any, Any]


def triton_to_numpy_type(data_type: int) -> Any:
    """The NumPy type of a TRITONSERVER_DataType number (None if unknown)."""
    return _NUMPY_BY_TRITON.get(data_type)


def numpy_to_triton_type(data_type: Any) -> Optional[int]:
    """The TRITONSERVER_DataType number of a NumPy type or dtype, found by
    equality as the stub finds it (None for what equals none of them: a
    Python type such as bool, a string, numpy.str_, a sized bytes dtype)."""
    for numpy_type, number in _STUB_TYPE_ORDER:
        if data_type == numpy_type:
            return number
    return None


def _triton_type(data_type: Any) -> Optional[int]:
    """The TRITONSERVER_DataType number of anything numpy.dtype() takes
    (None if none): what the package's own code converts with."""
    if isinstance(data_type, np.dtype):  # an array's dtype: no conversion
        found = _TRITON_BY_NUMPY.get(data_type)
        if found is not None:
            return found
    try:
        dtype = np.dtype(data_type)
    except TypeError:
        return None
    if dtype.type is np.bytes_ or dtype.type is np.str_:
        return _BYTES
    return _TRITON_BY_NUMPY.get(dtype)


def triton_string_to_numpy(triton_type_string: str) -> Any:
    """The NumPy type of a config data type such as "TYPE_FP32"."""
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def serialize_byte_tensor(input_tensor: Array) -> Any:
    """Each element as a 4-byte little-endian length and its bytes, in C
    order (str elements UTF-8 encoded); () for an empty tensor, None for a
    tensor that is not bytes/object."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type is not np.bytes_:
        return None
    parts = []
    for item in input_tensor.flat if input_tensor.flags.c_contiguous else np.ravel(input_tensor, order="C"):
        data = item if isinstance(item, bytes) else str(item).encode("utf-8")
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes_tensor(encoded_tensor: Any) -> Array:
    """The elements of a serialized BYTES tensor, as a 1-D object array of
    bytes."""
    view = memoryview(encoded_tensor).cast("B")
    items = []
    offset, end = 0, len(view)
    while offset < end:
        if offset + 4 > end:
            raise TritonModelException("malformed BYTES tensor: incomplete string data (a length prefix is cut off)")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > end:
            raise TritonModelException("malformed BYTES tensor: incomplete string data (an element runs past "
                                       "the end of the buffer)")
        items.append(bytes(view[offset:offset + length]))
        offset += length
    result = np.empty(len(items), dtype=np.object_)
    result[:] = items
    return result


def get_input_tensor_by_name(inference_request: "InferenceRequest", name: str) -> Optional["Tensor"]:
    """The request's input named `name`, or None."""
    native = inference_request._native
    if native is not None:  # a request given to execute(): read from the core's request
        tensor: Optional[Tensor] = native.input_tensor(name)
        return tensor
    return next((t for t in inference_request._inputs if t.name() == name), None)


def get_output_tensor_by_name(inference_response: "InferenceResponse", name: str) -> Optional["Tensor"]:
    """The response's output named `name`, or None."""
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_model_dir() -> str:
    """The folder of the calling model's version (where its model.py is)."""
    from . import _bls

    return _bls.model_dir()


def load_model(model_name: str, config: str = "", files: Optional[dict[str, bytes]] = None) -> None:
    """Load (or reload) a model of this server: `config` a model config as
    JSON, `files` {"file:<path>": contents} to load it from memory."""
    from . import _bls

    _bls.load_model(model_name, config, files)


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    """Start unloading a model of this server."""
    from . import _bls

    _bls.unload_model(model_name, unload_dependents)


def is_model_ready(model_name: str, model_version: str = "") -> bool:
    """Whether a model of this server is ready ("" version: its newest)."""
    from . import _bls

    return _bls.is_model_ready(model_name, model_version)


def _config_entry(model_config: dict[str, Any], section: str, name: str) -> Optional[dict[str, Any]]:
    for entry in model_config.get(section, ()):
        if entry.get("name") == name:
            return dict(entry)
    return None


def get_input_config_by_name(model_config: dict[str, Any], name: str) -> Optional[dict[str, Any]]:
    """The entry of `name` in the model config's inputs, or None."""
    return _config_entry(model_config, "input", name)


def get_output_config_by_name(model_config: dict[str, Any], name: str) -> Optional[dict[str, Any]]:
    """The entry of `name` in the model config's outputs, or None."""
    return _config_entry(model_config, "output", name)


def using_decoupled_model_transaction_policy(model_config: dict[str, Any]) -> bool:
    """Whether the model config says decoupled."""
    return bool(model_config.get("model_transaction_policy", {}).get("decoupled", False))


class TritonError(Exception):
    """An error a model gives as a response's error (and its code)."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        super().__init__(message)
        self._message = str(message)
        self._code = int(code)

    def message(self) -> str:
        """The error's message."""
        return self._message

    def code(self) -> int:
        """The error's code (TritonError.INTERNAL unless given)."""
        return self._code


class TritonModelException(Exception):
    """Raised by the model API on misuse."""

    def message(self) -> str:
        """The exception's message."""
        return str(self)


class Tensor:
    """A named tensor: an input of a request, or an output a model makes
    with ``Tensor(name, numpy_array)``."""

    __slots__ = ("_name", "_array", "_triton_dtype")
    _name: str
    _array: Union[Array, DeviceArray]
    _triton_dtype: int

    def __init__(self, name: str, data: Any, dtype: Any = None) -> None:
        """`data`: a NumPy array (or what ``numpy.asarray`` takes), whose
        dtype is the tensor's data type. `dtype` is refused (TypeError), as
        the python backend's Tensor(name, array) refuses a third argument: a
        data type other than the array's would send its bytes as another
        type."""
        if type(data) is np.ndarray and dtype is None and type(name) is str and data.flags.c_contiguous:
            known = _TRITON_BY_NUMPY.get(data.dtype)  # the common case: no checks to do
            if known is not None:
                self._name, self._array, self._triton_dtype = name, data, known
                return
        if isinstance(name, bytes):  # the stub takes UTF-8 bytes as the name's text
            name = _text(name, "Tensor name")
        if not isinstance(name, str):
            raise TritonModelException(f"Tensor name must be a str, not {type(name).__name__}")
        if dtype is not None:
            raise TypeError(
                f"Tensor '{name}': Tensor(name, array) takes no data type (the python backend's Tensor takes two "
                f"arguments, as here): the tensor's data type is its array's, and {dtype!r} would send the array's "
                "bytes as another type; convert the array instead, e.g. "
                "array.astype(pb_utils.triton_to_numpy_type(data_type))")
        if isinstance(data, DeviceArray):
            self._name, self._array, self._triton_dtype = name, data, data.triton_dtype
            return
        array = data if isinstance(data, np.ndarray) else np.asarray(data)
        # An array's own dtype first: no call.
        triton_dtype = _TRITON_BY_NUMPY.get(array.dtype) or _triton_type(array.dtype)
        if triton_dtype is None or array.dtype.kind == "U":
            raise TritonModelException(
                f"NumPy dtype is not supported. (Tensor '{name}': {array.dtype} has no Triton data type; use bool, "
                "(u)int8-64, float16/32/64, or object or bytes arrays for BYTES, e.g. numpy.char.encode(array))")
        self._name = name
        # C order, as the stub's tensors are (it copies them into shared memory)
        self._array = array if array.flags.c_contiguous else np.ascontiguousarray(array)
        self._triton_dtype = int(triton_dtype)

    def name(self) -> str:
        """The tensor's name."""
        return self._name

    def as_numpy(self) -> Array:
        """The data as a NumPy array (an input's is a private, writable copy,
        or with the model config's ZERO_COPY_INPUTS "yes" a read-only view
        of the request's memory). A tensor in GPU memory has none: read it
        with to_dlpack()."""
        array = self._array
        if isinstance(array, DeviceArray):
            raise TritonModelException(
                f"Tensor '{self._name}' is in GPU memory (device {array.device_id}), which as_numpy() cannot "
                "read: take it with to_dlpack() (e.g. torch.utils.dlpack.from_dlpack(tensor.to_dlpack())), or "
                "let inputs be copied to the host (leave out FORCE_CPU_ONLY_INPUT_TENSORS \"no\")")
        if self._triton_dtype == _BF16:  # held as its 16-bit words (uint16)
            raise TritonModelException("Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and "
                                       "from_dlpack() instead.")
        return array

    def triton_dtype(self) -> int:
        """The TRITONSERVER_DataType number."""
        return self._triton_dtype

    def shape(self) -> list[int]:
        """The dimensions."""
        return list(self._array.shape)

    def is_cpu(self) -> bool:
        """Whether the data is in host memory (False: in GPU memory)."""
        return not isinstance(self._array, DeviceArray)

    def to_dlpack(self) -> Any:
        """A DLPack capsule of the data (not for BYTES tensors): no copy,
        except of a read-only input view (ZERO_COPY_INPUTS), which a DLPack
        capsule cannot mark so."""
        if self._triton_dtype == _BYTES:
            raise TritonModelException(f"Tensor '{self._name}': a BYTES tensor has no DLPack form")
        return self.__dlpack__()

    def __dlpack__(self, **kwargs: Any) -> Any:
        """DLPack export of the data; a read-only host array that the
        consumer cannot take as read-only (a legacy capsule) is exported as a
        copy, so that no consumer writes into the request's memory."""
        array = self._array
        if self._triton_dtype == _BF16 and not isinstance(array, DeviceArray):  # NumPy exports no BF16
            return _ApiTensor(DataType.BF16, list(array.shape),
                              MemoryBuffer(array.ctypes.data, MemoryType.CPU, 0, array.nbytes, array)
                              ).__dlpack__(**kwargs)
        try:
            return array.__dlpack__(**kwargs)
        except BufferError:
            if isinstance(array, DeviceArray) or array.flags.writeable:
                raise
            return np.array(array).__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCPU, 0), or (kDLCUDA, device id) in GPU memory."""
        array = self._array
        return array.__dlpack_device__() if isinstance(array, DeviceArray) else (1, 0)

    @staticmethod
    def from_dlpack(name: str, capsule: Any) -> "Tensor":
        """A tensor of a DLPack object or capsule, no copy: in host memory
        a NumPy array, in GPU memory (CuPy, torch CUDA tensors) kept there
        until the response is sent. A NumPy array is taken as it is (numpy<2
        cannot export a read-only one through DLPack)."""
        if isinstance(capsule, np.ndarray):
            return Tensor(name, capsule)
        if is_on_device(capsule):
            try:
                return Tensor(name, DeviceArray.of_dlpack(capsule, f"Tensor '{name}'"))
            except ValueError as e:
                raise TritonModelException(str(e)) from None
        producer = capsule if hasattr(capsule, "__dlpack__") else _CapsuleHolder(capsule)
        try:
            array = np.from_dlpack(producer)
        except RuntimeError:  # a type NumPy lacks (it leaves the capsule unused): BF16 is taken
            imported = _ApiTensor.from_dlpack(producer)
            if imported.data_type != DataType.BF16:
                raise
            return _bf16_tensor(name, imported)
        return Tensor(name, array)

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, dtype={self._triton_dtype}, shape={self.shape()})"


def _bf16_tensor(name: str, tensor: _ApiTensor) -> Tensor:
    """A Tensor of a BF16 tensor in host memory, which NumPy has no type
    for: a copy of its 16-bit words (uint16), exported again through
    DLPack as BF16 and sent as BF16."""
    buffer = tensor.memory_buffer
    words = np.zeros(buffer.size // 2, np.uint16)
    if buffer.size:
        ctypes.memmove(words.ctypes.data, buffer.data_ptr, buffer.size)
    result = object.__new__(Tensor)
    result._name, result._array, result._triton_dtype = name, words.reshape(tensor.shape), _BF16
    return result


class _CapsuleHolder:
    """Gives a bare DLPack capsule the __dlpack__ protocol NumPy reads."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


# An output of a tensor the native send cannot read in place: (name, data
# type, data, shape or None); the data's bytes are read in place (a copy is
# made only of an array that is not C-contiguous), its shape is its own
# unless given; data in GPU memory is (pointer, bytes, device id, owner),
# its shape given.
OutputSpec = tuple[str, int, Any, Optional[list[int]]]


def _output_spec(name: str, triton_dtype: int, array: Union[Array, DeviceArray]) -> OutputSpec:
    """An output for the native send(): a numeric array as it is, a BYTES
    tensor serialized (with its shape). Called by C++ (the bridge,
    cpp/python_backend/pb_utils_bridge.h)."""
    if isinstance(array, DeviceArray):  # in GPU memory: copied when the response is filled
        return name, triton_dtype, array.spec(), list(array.shape)
    if triton_dtype != _BYTES:
        return name, triton_dtype, array, None
    serialized = serialize_byte_tensor(array)
    if serialized is None:
        raise TritonModelException(
            f"output '{name}': a BYTES tensor needs an object or bytes array, not {array.dtype}")
    return name, _BYTES, serialized or b"", list(array.shape)


def _input_value(name: str, found: tuple[int, tuple[int, ...], Union[Array, tuple[int, int, int]]],
                 owner: Any) -> Union[Array, DeviceArray]:
    """Called by C++ (cpp/python_backend/pb_utils_bridge.h): an input's value
    from what the native reader gives, `found`
    (datatype, shape, data): a numeric array in host memory as it is (a
    private copy, or a read-only view with ZERO_COPY_INPUTS), BYTES decoded
    from their raw bytes, data left in GPU memory as a DeviceArray that
    `owner` (the request) keeps valid."""
    datatype, shape, data = found
    if isinstance(data, tuple):  # in GPU memory (FORCE_CPU_ONLY_INPUT_TENSORS "no")
        return input_on_device(datatype, shape, data, owner)
    if datatype < _BYTES:  # BOOL .. FP64
        return data
    if datatype == _BYTES:
        try:
            return deserialize_bytes_tensor(data).reshape(shape)
        except (TritonModelException, ValueError) as e:
            raise TritonError(f"input '{name}': {e}", TritonError.INVALID_ARG) from None
    if datatype == _BF16:  # its 16-bit words (NumPy has no BF16): Tensor.to_dlpack() gives it as BF16
        return data.view(np.uint16).reshape(shape)
    raise TritonModelException(
        f"input '{name}' is of data type {datatype}, which NumPy has no type for: in-process models do not take "
        "it; run the model with Options(python_models=\"stub\")")


class ResponseSender:
    """Sends the responses of one request (decoupled models; a
    non-decoupled model may send its one response this way). Checked as
    the 2.51 stub's sender checks sends, in its words, raising its
    TritonModelException: flags 0 or TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    a response with flags 0, nothing after the final flag, and for a
    non-decoupled model one response, then the final flag alone."""

    __slots__ = ("_native",)

    def __init__(self, native: "_native.ResponseSender") -> None:
        self._native = native

    def send(self, response: Optional["InferenceResponse"] = None, flags: int = 0) -> None:
        """Send `response` (optional with flags) and/or the flags, e.g.
        TRITONSERVER_RESPONSE_COMPLETE_FINAL to end the request's stream."""
        if flags != 0 and flags != TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        try:
            if response is None:
                if flags == 0:
                    raise TritonModelException(
                        "Inference Response object must be provided when the response flags is set to zero.")
                self._native.send_flags(flags)
            else:
                _send(self._native, response, flags)
        except _errors.TritonError as e:  # as the stub raises what a send meets
            raise TritonModelException(str(e)) from None

    def is_cancelled(self) -> bool:
        """Whether the client cancelled the request."""
        return self._native.is_cancelled()


def _send(target: Any, response: "InferenceResponse", flags: int) -> None:
    """Send `response` through a native request or response sender."""
    if not isinstance(response, InferenceResponse):
        raise TritonModelException(f"expected an InferenceResponse, not {type(response).__name__}")
    error = response._error
    target.send(response._outputs, None if error is None else (error.code(), error.message()), flags,
                response._parameters)


class InferenceTrace:
    """The trace of a request, as ``request.trace()`` gives it, to pass on
    to a BLS request (``InferenceRequest(..., trace=request.trace())``).
    In-process python models run under no Triton trace: get_context() is
    None, as the stub's is when tracing is off, and a BLS request made with
    it is not traced. Made by the runtime only (as the stub's has no
    constructor)."""

    __slots__ = ()

    def __init__(self) -> None:
        raise TypeError("InferenceTrace: no constructor (take a request's trace with request.trace())")

    def get_context(self) -> Optional[str]:
        """The trace context (OpenTelemetry) to propagate: None, no trace."""
        return None


_NO_TRACE = object.__new__(InferenceTrace)  # (its __init__ refuses)


class PreferredMemory:
    """Where a BLS request would like its outputs: ``PreferredMemory(
    pb_utils.TRITONSERVER_MEMORY_CPU or _GPU, device id)``. In-process, BLS
    outputs are given in host memory whatever it says (a preference, as
    with the stub)."""

    __slots__ = ("preferred_memory_type", "preferred_device_id")

    def __init__(self, preferred_memory_type: int, preferred_device_id: int = 0) -> None:
        if preferred_memory_type not in (TRITONSERVER_MEMORY_GPU, TRITONSERVER_MEMORY_CPU):
            raise TypeError("PreferredMemory: preferred_memory_type must be pb_utils.TRITONSERVER_MEMORY_CPU or "
                            f"pb_utils.TRITONSERVER_MEMORY_GPU, not {preferred_memory_type!r}")
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = int(preferred_device_id)


def _text(value: Any, what: str) -> str:
    """A str argument of the model API, or bytes (UTF-8) as the stub takes
    them for a str (a name read from a BYTES input, say)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TritonModelException(f"{what} {value!r} is not UTF-8 text ({e})") from None
    raise TypeError(f"{what} must be a str (or UTF-8 bytes), not {type(value).__name__}")


_REQUIRED: Any = object()  # an argument InferenceRequest() requires, not given


class InferenceRequest:
    """A request given to execute(); also, built by a model with
    ``model_name=``, a request to another model (``exec()``)."""

    # _sender: the ResponseSender, once made (unset until then: the backend
    # makes these objects with _native and _model_name only); _flags, set
    # on such a request by set_flags() only.
    __slots__ = ("_native", "_request_id", "_correlation_id", "_inputs", "_requested", "_model_name",
                 "_model_version", "_flags", "_timeout", "_parameters", "_sender")

    def __init__(self, request_id: str = "", correlation_id: Union[int, str] = 0,
                 inputs: list[Tensor] = _REQUIRED,
                 requested_output_names: list[str] = _REQUIRED,
                 model_name: str = _REQUIRED, model_version: int = -1, flags: int = 0, timeout: int = 0,
                 preferred_memory: Optional[PreferredMemory] = None, trace: Optional[InferenceTrace] = None,
                 parameters: Any = None) -> None:
        """Checked as the stub checks its arguments (its words, where it
        has its own): `inputs`, `requested_output_names` and `model_name`
        are required and not None (else TypeError, as the stub's signature
        raises it), str arguments may be given as UTF-8 bytes, the
        correlation id is an int or a str, no requested output name is
        empty, `parameters` a dict of str keys and bool, int or str values
        (or its JSON text), `trace` a request's trace()."""
        for argument, value in (("inputs", inputs), ("requested_output_names", requested_output_names),
                                ("model_name", model_name)):
            if value is _REQUIRED or value is None:
                raise TypeError(f"InferenceRequest.__init__(): incompatible constructor arguments: {argument} "
                                f"{'is required' if value is _REQUIRED else 'cannot be None'} (a BLS request "
                                "takes model_name, inputs and requested_output_names, as the stub's does)")
        self._native: Optional[_native.BackendRequest] = None
        request_id = _text(request_id, "InferenceRequest: request_id")
        model_name = _text(model_name, "InferenceRequest: model_name")
        if not isinstance(correlation_id, (int, str)):
            raise TritonModelException("Correlation ID must be integer or string")
        requested = [_text(n, "InferenceRequest: a requested output name") for n in requested_output_names]
        if "" in requested:
            raise TritonModelException(f"Requested output name for request with id '{request_id}' and model name "
                                       f"'{model_name}' should not be empty.")
        if trace is not None and not isinstance(trace, InferenceTrace):
            raise TypeError(f"InferenceRequest: trace must be a request's trace() (an InferenceTrace), not "
                            f"{type(trace).__name__}")
        if preferred_memory is not None and not isinstance(preferred_memory, PreferredMemory):
            raise TypeError(f"InferenceRequest: preferred_memory must be a pb_utils.PreferredMemory, not "
                            f"{type(preferred_memory).__name__}")
        self._request_id = request_id
        self._correlation_id = correlation_id
        self._inputs = list(inputs)
        self._requested = requested
        self._model_name = model_name
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._parameters = json.dumps(_checked_parameters(parameters, "request parameter"))

    def trace(self) -> InferenceTrace:
        """The request's trace, to pass to a BLS request (``trace=``):
        in-process no Triton trace (get_context() is None)."""
        return _NO_TRACE

    def inputs(self) -> list[Tensor]:
        """The input tensors."""
        if self._native is None:
            return list(self._inputs)
        return [t for t in (get_input_tensor_by_name(self, n) for n in self._native.input_names()) if t is not None]

    def requested_output_names(self) -> set[str]:
        """The outputs the client asked for (empty: all), a set as the stub's."""
        return set(self._native.requested_output_names() if self._native is not None else self._requested)

    def request_id(self) -> str:
        """The request's id ("" when none)."""
        return self._native.id() if self._native is not None else self._request_id

    def correlation_id(self) -> Union[int, str]:
        """The sequence correlation id (0 when none)."""
        return self._native.correlation_id() if self._native is not None else self._correlation_id

    def flags(self) -> int:
        """The request flags (TRITONSERVER_REQUEST_FLAG_*), or those
        set_flags() set."""
        if self._native is None:
            return self._flags
        flags: Optional[int] = getattr(self, "_flags", None)
        return self._native.flags() if flags is None else flags

    def set_flags(self, flags: int) -> None:
        """Set the flags flags() gives (and a BLS request is sent with)."""
        if not isinstance(flags, int) or not 0 <= flags < 2**32:
            raise TypeError(f"set_flags(): flags must be an int from 0 to 2**32 - 1, not {flags!r}")
        self._flags = flags

    def parameters(self) -> str:
        """The request's parameters as a JSON object string."""
        if self._native is None:
            return self._parameters
        return json.dumps(self._native.parameters(), separators=(",", ":"))  # compact, as the stub's

    def timeout(self) -> int:
        """The timeout in microseconds (0: none)."""
        return self._timeout if self._native is None else self._native.timeout_us()

    def model_name(self) -> str:
        """The model this request is for."""
        return self._model_name

    def is_cancelled(self) -> bool:
        """Whether the client cancelled this request."""
        if self._native is None:
            return False
        return self._native.is_cancelled()

    def set_release_flags(self, flags: int) -> None:
        """How the request is released when execute() returns:
        TRITONSERVER_REQUEST_RELEASE_ALL (the default), or
        TRITONSERVER_REQUEST_RELEASE_RESCHEDULE to have execute() given it
        again in a later batch (a model with ``sequence_batching {
        iterative_sequence: true }``; a non-decoupled model puts None in
        its returned list for it)."""
        if self._native is None:
            raise TritonModelException("set_release_flags() is for requests given to execute()")
        self._native.set_release_flags(flags)

    def get_response_sender(self) -> ResponseSender:
        """The response sender of this request (the same one each call; it
        lives as long as the request, as the stub's does)."""
        sender: Optional[ResponseSender] = getattr(self, "_sender", None)
        if sender is None:
            if self._native is None:
                raise TritonModelException("get_response_sender() is for requests given to execute()")
            sender = self._sender = ResponseSender(self._native.response_sender())
        return sender

    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on a model of the same server (BLS): its
        InferenceResponse (with ``error`` set when it failed), or with
        `decoupled` an iterator of its responses."""
        if self._native is not None:
            raise TritonModelException("exec() is for requests a model builds with InferenceRequest(model_name=...)")
        from . import _bls

        return _bls.execute(self, decoupled)

    async def async_exec(self, decoupled: bool = False) -> Any:
        """exec() without blocking the event loop of an async execute()."""
        import asyncio

        from . import _bls

        context = _bls.context()

        def run() -> Any:
            _bls.enter(*context)
            result = self.exec(decoupled)
            if decoupled:
                list(result)  # all received here; iterating it gives them from the first
            return result

        return await asyncio.get_running_loop().run_in_executor(None, run)


class InferenceResponse:
    """A model's response: output tensors, or an error; `parameters` (a
    dict of str keys and bool, int or str values, or its JSON text) are
    checked here (TritonModelException), before anything is sent."""

    __slots__ = ("_outputs", "_error", "_parameters")
    _parameters: dict[str, Any]

    def __init__(self, output_tensors: Optional[list[Tensor]] = None, error: Optional[TritonError] = None,
                 parameters: Any = None) -> None:
        if error is not None and not isinstance(error, TritonError):
            raise TritonModelException(f"error must be a TritonError, not {type(error).__name__}")
        self._outputs = outputs = list(output_tensors) if output_tensors else []
        for tensor in outputs:
            if type(tensor) is not Tensor and not isinstance(tensor, Tensor):
                raise TritonModelException(f"output_tensors must hold Tensor objects, not {type(tensor).__name__}")
        self._error = error
        self._parameters = _checked_parameters(parameters, "response parameter")

    def output_tensors(self) -> list[Tensor]:
        """The output tensors."""
        return list(self._outputs)

    def has_error(self) -> bool:
        """Whether the response carries an error."""
        return self._error is not None

    def error(self) -> Optional[TritonError]:
        """The error, or None."""
        return self._error

    def parameters(self) -> str:
        """The response parameters as a JSON object string."""
        return json.dumps(self._parameters)


_INT64_RANGE = range(-2**63, 2**63)


def _checked_parameters(parameters: Any, what: str) -> dict[str, Any]:
    """Request or response parameters (`what`: "request parameter" or
    "response parameter"; None, a dict or its JSON text) checked as the
    python backend checks them (its wording: str keys; bool, int or str
    values), and for what a Triton parameter cannot hold (an int outside
    int64, a NUL in a key or a str value): TritonModelException."""
    if parameters is None:
        return {}
    if isinstance(parameters, str):
        parameters = json.loads(parameters) if parameters else {}
    if not isinstance(parameters, Mapping):
        raise TritonModelException(f"Expect parameters to have type dict, found type {type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"Expect parameters keys to have type str, found type {type(key)}")
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)}")
        nul_in = "name" if "\0" in key else "value" if isinstance(value, str) and "\0" in value else None
        if nul_in is not None:
            raise TritonModelException(
                f"{what} {key!r}: its {nul_in} holds a NUL character, which a Triton parameter cannot carry "
                "(its strings end at the first NUL); leave it out, or encode it (e.g. base64)")
        if isinstance(value, int) and value not in _INT64_RANGE:
            raise TritonModelException(
                f"{what} {key!r}: {value} is outside the range of a Triton int parameter (int64, "
                "-2**63 to 2**63 - 1); send it as a str")
    return dict(parameters)


class Logger:
    """The model's log, to Python's ``logging`` (logger
    "tritonserver.models", the record naming the model's file and line):
    ``Logger.log(message, level=Logger.INFO)`` and log_info, log_warn,
    log_error and log_verbose (DEBUG), as the stub's Logger. Its levels are
    ``Logger.LogLevel`` members, also ``Logger.INFO``, ``Logger.WARNING``,
    ``Logger.ERROR`` and ``Logger.VERBOSE``."""

    class LogLevel(int, enum.Enum):
        """The levels of Logger.log() (equal to their numbers, as the
        stub's enum is)."""

        INFO = 0
        WARNING = 1
        ERROR = 2
        VERBOSE = 3

    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE
    _logger = logging.getLogger("tritonserver.models")
    _LEVELS = {LogLevel.INFO: logging.INFO, LogLevel.WARNING: logging.WARNING, LogLevel.ERROR: logging.ERROR,
               LogLevel.VERBOSE: logging.DEBUG}

    @staticmethod
    def log(message: str, level: "Logger.LogLevel" = LogLevel.INFO) -> None:
        """Log `message` at `level`, a Logger.LogLevel (a plain int is
        refused, as the stub refuses it)."""
        if not isinstance(level, Logger.LogLevel):
            raise TypeError(f"Logger.log(): level must be a pb_utils.Logger.LogLevel (Logger.INFO, Logger.WARNING, "
                            f"Logger.ERROR or Logger.VERBOSE), not {type(level).__name__} {level!r}; the python "
                            "backend's stub refuses it too")
        Logger._emit(message, Logger._LEVELS[level])

    @staticmethod
    def log_info(message: str) -> None:
        """Log at INFO."""
        Logger._emit(message, logging.INFO)

    @staticmethod
    def log_warn(message: str) -> None:
        """Log at WARNING."""
        Logger._emit(message, logging.WARNING)

    @staticmethod
    def log_error(message: str) -> None:
        """Log at ERROR."""
        Logger._emit(message, logging.ERROR)

    @staticmethod
    def log_verbose(message: str) -> None:
        """Log at DEBUG (Triton's verbose)."""
        Logger._emit(message, logging.DEBUG)

    @staticmethod
    def _emit(message: Any, level: int) -> None:
        """`message` (str, or UTF-8 bytes as the stub takes them) to the
        logger, as said by the model's line that called the Logger."""
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        elif not isinstance(message, str):
            raise TypeError(f"Logger: the message must be a str, not {type(message).__name__} (the python "
                            "backend's stub refuses it too)")
        Logger._logger.log(level, "%s", message, stacklevel=3)


def _metric_refused(what: str, message: str) -> TritonModelException:
    """The stub's TritonModelException for a metric call its parent process
    refused: `what`, the model instance and the core's `message`."""
    from . import _bls

    return TritonModelException(f"{what}: Failed to process the request for model '{_bls.context()[2]}', "
                                f"message: {message}")


def _metric_call(what: str, call: Any, context: str = "") -> Any:
    """call(); a tritonserver error it raises (its `context` prefix, which
    the package's metrics API adds, taken off) as _metric_refused(what)."""
    try:
        return call()
    except _errors.TritonError as e:
        raise _metric_refused(what, str(e).removeprefix(context)) from None


class MetricFamily:
    """A family of custom metrics a model reports with Triton's own
    (``Server.metrics()``): ``MetricFamily(name, description, kind)``, then
    ``family.Metric(labels={...})``. As on the stub, the core's refusals
    are TritonModelException, and deleting a family clears its metrics."""

    COUNTER = 0
    GAUGE = 1

    def __init__(self, name: str, description: str, kind: int) -> None:
        from .._api._enums import MetricKind
        from .._api._metrics import MetricFamily as ApiMetricFamily

        if kind not in (MetricFamily.COUNTER, MetricFamily.GAUGE):
            raise TritonModelException(f"MetricFamily '{name}': kind must be MetricFamily.COUNTER or GAUGE, "
                                       f"not {kind!r}")
        self._metrics: weakref.WeakSet[Metric] = weakref.WeakSet()
        self._family = _metric_call("Error when creating MetricFamily",
                                    lambda: ApiMetricFamily(MetricKind(kind), name, description),
                                    f"MetricFamily '{name}': ")

    def Metric(self, labels: Optional[dict[str, str]] = None,  # noqa: N802 (the model API's name)
               buckets: Optional[list[float]] = None) -> "Metric":
        """The metric of this family with these labels (a dict of str
        values; `buckets` are for histograms, which this family is not)."""
        return Metric(self, labels, buckets)

    def __del__(self) -> None:
        for metric in list(getattr(self, "_metrics", ())):
            metric._metric = None


class Metric:
    """One labelled metric of a MetricFamily; once the family is deleted,
    its calls raise the stub's TritonModelException."""

    def __init__(self, family: MetricFamily, labels: Optional[dict[str, str]] = None,
                 buckets: Optional[list[float]] = None) -> None:
        from .._api._metrics import Metric as ApiMetric

        if labels is not None and not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        # The labels as the stub passes them on, through JSON: keys become
        # str, what JSON cannot say raises its TypeError; the values must be str.
        sent = json.loads(json.dumps(labels)) or {}
        if buckets is not None:
            raise TritonModelException("Failed to create metric. Buckets must be a list." if not isinstance(
                buckets, list) else "Failed to create metric. Unexpected buckets found.")
        if not all(isinstance(value, str) for value in sent.values()):
            raise _metric_refused("Error when creating Metric", "attempt to access JSON non-string as string")
        self._metric: Any = _metric_call("Error when creating Metric", lambda: ApiMetric(family._family, sent),
                                         "Metric: ")
        family._metrics.add(self)

    def _call(self, what: str, call: Any) -> Any:
        """_metric_call(what, call), refused as the stub refuses it once the
        family is deleted."""
        if self._metric is None:
            raise TritonModelException(
                f"{what}: Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The "
                "'MetricFamily' object should be deleted AFTER its corresponding 'Metric' objects have been deleted.")
        return _metric_call(what, call)

    def increment(self, value: float) -> None:
        """Add `value` (a counter's must not be negative)."""
        self._call("Failed to increment metric value", lambda: self._metric.increment(value))

    def set(self, value: float) -> None:
        """Set a gauge's value."""
        self._call("Failed to set metric value", lambda: self._metric.set_value(value))

    def value(self) -> float:
        """The current value."""
        return float(self._call("Failed to get metric value", lambda: self._metric.value))


class ModelConfig:
    """The model configuration a model's ``auto_complete_config(config)``
    completes: inputs, outputs, max batch size, dynamic batching and the
    transaction policy. Each change is checked against what the config file
    says already, as the stub checks it: the same ValueError texts, and the
    same TypeError/KeyError where an argument is not what the stub indexes
    (e.g. an input given as a list)."""

    def __init__(self, model_config: Union[dict[str, Any], str]) -> None:
        config = json.loads(model_config) if isinstance(model_config, str) else model_config
        self._model_config: dict[str, Any] = dict(config)
        self._model_config.setdefault("input", [])
        self._model_config.setdefault("output", [])
        self._model_config.setdefault("max_batch_size", 0)

    def _model(self) -> str:
        """"model '<name>'", as the stub's messages name the model."""
        return "model '" + str(self._model_config["name"]) + "'"

    def as_dict(self) -> dict[str, Any]:
        """The configuration as a dict (the JSON form of the protobuf)."""
        return self._model_config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        """Set max_batch_size (not below the config file's own)."""
        if self._model_config["max_batch_size"] > max_batch_size:
            raise ValueError(f"configuration specified max_batch_size {self._model_config['max_batch_size']}, but "
                             f"in auto-complete-config function for {self._model()} specified max_batch_size "
                             f"{max_batch_size}")
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        """Turn on dynamic batching (no other scheduler may be set)."""
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError(f"Configuration specified scheduling_choice as '{other}', but auto-complete-config "
                                 f"function for {self._model()} tries to set scheduling_choice as 'dynamic_batching'")
        self._model_config.setdefault("dynamic_batching", {})

    def _add(self, kind: str, entry: dict[str, Any], valid: tuple[str, ...]) -> None:
        """Add input or output `entry` to the config's `kind` list, or, when
        an entry of its name is there, set that one's data_type, dims (and
        optional) where they do not contradict it. The checks, their order
        and their texts are the stub's (names joined to the texts with +,
        so a name that is not a str fails as there)."""
        where = " in auto-complete-config function for " + self._model()
        for key in entry:
            if key not in valid:
                listed = ", ".join(f"'{k}'" for k in valid[:-1]) + f" and '{valid[-1]}'"
                raise ValueError(kind + " '" + entry["name"] + "'" + where + " contains property other than "
                                 + listed + ".")
        for key in ("name", "data_type", "dims"):
            if key not in entry:
                named = kind if key == "name" else kind + " '" + entry["name"] + "'"
                raise ValueError(named + where + f" is missing '{key}' property.")
        for current in self._model_config[kind]:
            if entry["name"] != current["name"]:
                continue
            if current["data_type"] != "TYPE_INVALID" and current["data_type"] != entry["data_type"]:
                raise ValueError("unable to load " + self._model() + ", configuration expects datatype "
                                 + current["data_type"] + " for " + kind + " '" + entry["name"]
                                 + "', model provides " + entry["data_type"])
            if current["dims"] and current["dims"] != entry["dims"]:
                raise self._expects("dims", entry, current)
            if "optional" in valid and "optional" in current and "optional" in entry \
                    and current["optional"] != entry["optional"]:
                raise self._expects("optional", entry, current)
            for key in valid[1:]:
                if key in entry:
                    current[key] = entry[key]
            return
        self._model_config[kind].append(entry)

    def _expects(self, key: str, entry: dict[str, Any], current: dict[str, Any]) -> ValueError:
        """The stub's error for an entry whose `key` (dims, optional) is
        not the config's."""
        return ValueError(self._model() + ", tensor '" + entry["name"] + f"': the model expects {key} {entry[key]} "
                          f"but the model configuration specifies {key} {current[key]}")

    def add_input(self, input: dict[str, Any]) -> None:  # noqa: A002 (the model API's name)
        """Add an input (name, data_type, dims, optional)."""
        self._add("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: dict[str, Any]) -> None:
        """Add an output (name, data_type, dims)."""
        self._add("output", output, ("name", "data_type", "dims"))

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        """Set the transaction policy ({"decoupled": bool}); a decoupled
        value the config already has may not change."""
        for key in transaction_policy_dict.keys():
            if key != "decoupled":
                raise ValueError(f"model transaction property in auto-complete-config function for {self._model()} "
                                 "contains property other than 'decoupled'.")
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            if "decoupled" in policy and policy["decoupled"] != transaction_policy_dict["decoupled"]:
                raise ValueError(f"trying to change decoupled property in auto-complete-config for {self._model()}, "
                                 f"which is already set to '{policy['decoupled']}'.")
            policy["decoupled"] = transaction_policy_dict["decoupled"]
