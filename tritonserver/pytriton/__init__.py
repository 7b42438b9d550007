"""PyTriton's API on this package's in-process server: a PyTriton program
runs here by changing ``pytriton`` to ``tritonserver.pytriton`` in its
imports (``from tritonserver.pytriton.triton import Triton, TritonConfig``,
``from tritonserver.pytriton.decorators import batch``,
``from tritonserver.pytriton.model_config import ModelConfig, Tensor``).
See docs/pytriton.md for what is the same and every difference."""

from . import client, decorators, exceptions, model_config, triton  # noqa: F401
from ._request import Request, Requests  # noqa: F401
from .decorators import (  # noqa: F401
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
from .exceptions import (  # noqa: F401
    PyTritonBadParameterError,
    PyTritonError,
    PyTritonInvalidOperationError,
    PyTritonModelConfigError,
    PyTritonRuntimeError,
    PyTritonUnrecoverableError,
    PyTritonValidationError,
)
from .model_config import DeviceKind, DynamicBatcher, ModelConfig, QueuePolicy, Tensor, TimeoutAction  # noqa: F401
from .triton import Triton, TritonConfig, TritonSecurityConfig  # noqa: F401
