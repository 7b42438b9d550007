"""InferenceRequest: what to run, on which inputs, and where outputs go."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from .. import _core
from ._datautils import DeviceOrMemoryType, host_array_data_type, parse_device_or_memory_type
from ._errors import InvalidArgumentError
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


@dataclass
class InferenceRequest:
    """An inference request (the official fields, plus ``output_names``).

    ``inputs`` values may be Tensors, anything with ``__dlpack__`` (NumPy,
    CuPy, PyTorch; CPU or GPU), NumPy arrays, lists or Python scalars, and
    lists/arrays of bytes or str for BYTES. Contiguous memory is handed to
    Triton by pointer; everything Triton reads stays alive until Triton
    releases the request. ``output_names`` (a deliberate addition) limits
    the outputs computed; by default all are returned.
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

    def _create_core_request(self) -> "_core.Request":
        """Build the native request; raises for anything invalid."""
        model = self.model
        request = _core.Request(model._server._started(), model.name, model.version)
        if self.request_id is not None:
            request.set_id(_typed("request_id", self.request_id, str))
        if self.flags:
            request.set_flags(_typed("flags", self.flags, int))
        if self.correlation_id is not None:
            if isinstance(self.correlation_id, str):
                request.set_correlation_id_string(self.correlation_id)
            else:
                request.set_correlation_id(_typed("correlation_id", self.correlation_id, int))
        if self.priority:
            request.set_priority(_typed("priority", self.priority, int))
        if self.timeout:
            request.set_timeout_us(_typed("timeout", self.timeout, int))
        for key, value in self.parameters.items():
            setter = _PARAMETER_SETTERS.get(type(value))
            if setter is None:
                raise InvalidArgumentError(
                    f"Unsupported Value. Can't convert {type(value)} to Request Parameter "
                    f"(parameter {key!r}: use str, int, float or bool)"
                )
            getattr(request, setter)(key, value)
        numpy = sys.modules.get("numpy")
        inputs: dict[str, Any] = self.inputs  # values of any kind, checked below
        for name, item in inputs.items():
            if numpy is not None and type(item) is numpy.ndarray and item.flags.c_contiguous:
                data_type = host_array_data_type(item.dtype)
                if data_type is not None:  # the common case, without Tensor objects
                    request.add_host_array(name, data_type, item)
                    continue
            tensor = Tensor._from_object(item)
            request.add_input(
                name, int(tensor.data_type), [int(d) for d in tensor.shape], tensor.data_ptr,
                tensor.size, int(tensor.memory_type), tensor.memory_type_id, tensor,
            )
        for name in self.output_names or ():
            request.add_requested_output(name)
        if self.output_memory_type is not None:
            memory_type, device_id = parse_device_or_memory_type(self.output_memory_type)
            request.set_output_memory(int(memory_type), device_id)
        if self.response_queue is not None and not hasattr(self.response_queue, "put_nowait"):
            raise InvalidArgumentError("response_queue must have a put_nowait() method")
        return request


def _typed(name: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise TypeError(f"InferenceRequest.{name} must be {kind.__name__}, not {type(value).__name__}")
    if isinstance(value, int) and value < 0:
        raise InvalidArgumentError(f"InferenceRequest.{name} must not be negative")
    return value
