"""InferenceRequest: what to run, on which inputs, and where outputs go."""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, TypedDict, Union

from .. import _native
from ._datautils import DeviceOrMemoryType, parse_device_or_memory_type
from ._errors import InvalidArgumentError, NotFoundError
from ._checks import non_negative_int
from ._checks import text as _text
from ._tensor import Tensor

if TYPE_CHECKING:
    import asyncio
    import queue

    from ._model import Model

_PARAMETER_SETTERS = {
    str: "set_string_parameter",
    int: "set_int_parameter",
    float: "set_double_parameter",
    bool: "set_bool_parameter",
}


@dataclass(frozen=True)
class RawInput:
    """An input value (internal): host bytes that the core gives the
    model's only input, whose datatype and shape it deduces from the model
    configuration and the byte size (the core's raw input, as KServe HTTP's
    raw binary request: Inference-Header-Content-Length 0). The core
    refuses it for a model of several inputs, or a BYTES input not of
    shape [1]."""

    data: bytes


class InferenceRequestKwargs(TypedDict, total=False):
    """The fields of ``InferenceRequest`` but ``model``, as keyword arguments
    (``Model.infer(**kwargs)``, ``async_infer``, ``create_request``), for type
    checkers. Kept equal to those fields (a test checks)."""

    request_id: Optional[str]
    flags: int
    correlation_id: Optional[Union[int, str]]
    priority: int
    timeout: int
    inputs: dict[str, Union[Tensor, Any]]
    parameters: dict[str, Union[str, int, float, bool]]
    output_memory_type: Optional[DeviceOrMemoryType]
    response_queue: Optional[Union["queue.SimpleQueue[Any]", "asyncio.Queue[Any]", Any]]
    output_names: Optional[list[str]]


@dataclass
class InferenceRequest:
    """An inference request (the official fields, plus ``output_names``).

    ``inputs`` values may be Tensors, anything with ``__dlpack__`` (NumPy,
    CuPy, PyTorch; CPU or GPU), NumPy arrays, lists or Python scalars, and
    lists/arrays of bytes or str for BYTES. Host inputs of up to 64 KiB are
    copied when the request is built (the caller may refill them at once);
    larger contiguous memory is handed to Triton by pointer, and everything
    Triton reads stays alive until Triton releases the request (write into
    it only after the final response). ``output_names`` (a deliberate addition) limits
    the outputs computed; by default all are returned. Every field but
    ``model`` is a keyword argument of ``Model.infer()``, described there.
    """

    model: "Model"
    request_id: Optional[str] = None
    flags: int = 0
    correlation_id: Optional[Union[int, str]] = None
    priority: int = 0
    timeout: int = 0
    inputs: dict[str, Union[Tensor, Any]] = field(default_factory=dict)
    parameters: dict[str, Union[str, int, float, bool]] = field(default_factory=dict)
    output_memory_type: Optional[DeviceOrMemoryType] = None
    response_queue: Optional[Union["queue.SimpleQueue[Any]", "asyncio.Queue[Any]", Any]] = None
    output_names: Optional[list[str]] = None
    # Sent by in-process python model code (BLS, _python_models/_bls.py): a
    # stop past its exit timeout cancels it (not a field).
    _from_model_code = False

    def _create_native_request(self) -> "_native.Request":
        """Build the native request; raises for anything invalid.

        This runs for every request: the common case (no optional settings,
        NumPy inputs) takes as few Python steps as possible; the rest is in
        the helpers below.
        """
        model = self.model
        try:
            model_name = model.name
            server = model._server._started()
        except AttributeError:
            raise TypeError(
                f"InferenceRequest.model must be a Model (server.model(name)), not {type(model).__name__}"
            ) from None
        if type(model_name) is not str or "\x00" in model_name or not model_name.isascii():
            model_name = _text("model name", model_name)
        version = model.version
        if type(version) is not int or not -1 <= version < 2**63:
            version = _model_version(version)
        inputs: dict[str, Any] = self.inputs  # values of any kind, checked below
        if type(inputs) is not dict:
            inputs = _mapping("inputs", inputs)
        try:
            request = _native.Request(server, model_name, version)
        except NotFoundError as e:
            raise model._server._unknown_model(e, model_name, version) from None
        try:
            if self._from_model_code:
                request.set_from_model_code()
            if (self.request_id is not None or self.flags or self.correlation_id is not None
                    or self.priority or self.timeout):
                self._set_options(request)
            parameters = self.parameters
            if parameters or type(parameters) is not dict:
                _set_parameters(request, parameters)
            ndarray = _ndarray or _find_ndarray()
            for name, item in inputs.items():
                if type(name) is not str or "\x00" in name or not name.isascii():
                    name = _text("input name", name)
                # The common case, without Tensor objects: a C-contiguous,
                # native-order array of a plain type, taken by the core (its
                # Triton type read from the buffer format); anything else
                # is declined and takes the general path.
                if type(item) is ndarray and request.add_host_array(name, item):
                    continue
                if type(item) is RawInput:
                    _add_raw_input(request, name, item.data)
                    continue
                tensor = Tensor._from_object(item)
                _check_extent(name, tensor)
                request.add_input(
                    name, int(tensor.data_type), tensor._dims(f"input {name!r}"), tensor.data_ptr,
                    tensor.size, int(tensor.memory_type), tensor.memory_type_id, tensor,
                )
            if self.output_names:
                if isinstance(self.output_names, (str, bytes)):
                    raise TypeError(
                        f"InferenceRequest.output_names must be a list of names, not a "
                        f"{type(self.output_names).__name__}: write output_names=[{self.output_names!r}]"
                    )
                for name in self.output_names:
                    request.add_requested_output(_text("output name", name))
            if self.output_memory_type is not None:
                memory_type, device_id = parse_device_or_memory_type(self.output_memory_type)
                request.set_output_memory(int(memory_type), device_id)
            if self.response_queue is not None and not hasattr(self.response_queue, "put_nowait"):
                raise InvalidArgumentError("response_queue must have a put_nowait() method")
        except BaseException:
            # Nothing of a refused request may hold the model (a kept
            # exception would otherwise stall Server.stop()).
            request.discard()
            raise
        return request

    def _set_options(self, request: "_native.Request") -> None:
        """Request id, flags, correlation id, priority and timeout."""
        if self.request_id is not None:
            request.set_id(_text("InferenceRequest.request_id", self.request_id))
        if self.flags:
            request.set_flags(_unsigned("InferenceRequest.flags", self.flags, 32))
        if self.correlation_id is not None:
            if isinstance(self.correlation_id, str):
                request.set_correlation_id_string(_text("InferenceRequest.correlation_id", self.correlation_id))
            else:
                request.set_correlation_id(_unsigned("InferenceRequest.correlation_id", self.correlation_id, 64))
        if self.priority:
            request.set_priority(_unsigned("InferenceRequest.priority", self.priority, 64))
        if self.timeout:
            request.set_timeout_us(_unsigned("InferenceRequest.timeout", self.timeout, 64))


# numpy.ndarray once NumPy is imported (no array of it exists before).
_ndarray: Optional[type] = None


def _add_raw_input(request: "_native.Request", name: str, data: bytes) -> None:
    if type(data) is not bytes:
        raise TypeError(f"RawInput.data must be bytes, not {type(data).__name__}")
    pointer = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    request.add_raw_input(name, pointer, len(data), data)


def _find_ndarray() -> Optional[type]:
    global _ndarray
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        _ndarray = numpy.ndarray
    return _ndarray


def _set_parameters(request: "_native.Request", parameters: dict[str, Any]) -> None:
    for key, value in _mapping("parameters", parameters).items():
        setter = _PARAMETER_SETTERS.get(type(value))
        if setter is None:
            raise InvalidArgumentError(
                f"Unsupported Value. Can't convert {type(value)} to Request Parameter "
                f"(parameter {key!r}: use str, int, float or bool)"
            )
        key = _text("parameter name", key)
        if type(value) is int and not -(2**63) <= value < 2**63:
            raise InvalidArgumentError(f"parameter {key!r}: {value} does not fit in a signed 64-bit int")
        if type(value) is str:
            _text(f"parameter {key!r}", value)
        getattr(request, setter)(key, value)


def _mapping(field: str, value: Any) -> dict[Any, Any]:
    """InferenceRequest.inputs or .parameters: a dict (name -> value)."""
    if not isinstance(value, dict):
        raise TypeError(
            f"InferenceRequest.{field} must be a dict (name -> value), not {type(value).__name__}"
            + (f"; for none, leave it out or pass {field}={{}}" if value is None else "")
        )
    return value


def _model_version(version: Any) -> int:
    """A model version, checked: an int in Triton's range (-1: the server's
    choice)."""
    if type(version) is not int:
        raise TypeError(f"model version must be an int (-1 for the server's choice), not {type(version).__name__}")
    if not -1 <= version < 2**63:
        raise InvalidArgumentError(f"model version {version} is out of range (-1 to 2**63 - 1)")
    return version


def _check_extent(name: str, tensor: Tensor) -> None:
    """Refuse a tensor whose buffer claims memory its owner does not hold, or
    whose fields were set to values no memory has: Triton would read past
    it. (Triton itself checks the byte size against the shape.)"""
    problem = tensor.memory_buffer._problem()
    if problem is not None:
        raise InvalidArgumentError(f"input {name!r}: {problem}")


def _unsigned(field: str, value: Any, bits: int) -> int:
    """A request field the core takes as an unsigned int of `bits` bits."""
    return non_negative_int(field, value, bits, InvalidArgumentError)
