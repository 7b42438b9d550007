"""PyTriton's API on this package's in-process server: a PyTriton program
runs here by changing ``pytriton`` to ``tritonserver.pytriton`` in its
imports (``from tritonserver.pytriton.triton import Triton, TritonConfig``,
``from tritonserver.pytriton.decorators import batch``,
``from tritonserver.pytriton.model_config import ModelConfig, Tensor``).
See docs/pytriton.md for what is the same and every difference."""

from . import client, decorators, exceptions, model_config, triton
from .proxy.types import Request, Requests
from .decorators import (
    ConstantPadder,
    TritonContext,
    batch,
    fill_optionals,
    first_value,
    group_by_keys,
    group_by_values,
    pad_batch,
    sample,
    triton_context,
)
from .exceptions import (
    PyTritonBadParameterError,
    PyTritonError,
    PyTritonInvalidOperationError,
    PyTritonModelConfigError,
    PyTritonRuntimeError,
    PyTritonUnrecoverableError,
    PyTritonValidationError,
)
from .model_config import DeviceKind, DynamicBatcher, ModelConfig, QueuePolicy, Tensor, TimeoutAction
from .triton import Triton, TritonConfig, TritonSecurityConfig

__all__ = [
    "ConstantPadder",
    "DeviceKind",
    "DynamicBatcher",
    "ModelConfig",
    "PyTritonBadParameterError",
    "PyTritonError",
    "PyTritonInvalidOperationError",
    "PyTritonModelConfigError",
    "PyTritonRuntimeError",
    "PyTritonUnrecoverableError",
    "PyTritonValidationError",
    "QueuePolicy",
    "Request",
    "Requests",
    "Tensor",
    "TimeoutAction",
    "Triton",
    "TritonConfig",
    "TritonContext",
    "TritonSecurityConfig",
    "batch",
    "client",
    "decorators",
    "exceptions",
    "fill_optionals",
    "first_value",
    "group_by_keys",
    "group_by_values",
    "model_config",
    "pad_batch",
    "sample",
    "triton",
    "triton_context",
]
