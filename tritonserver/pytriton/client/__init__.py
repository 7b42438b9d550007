"""PyTriton's clients (``pytriton.client``). In this version they reach a
`Triton` of the same process without a socket: ``ModelClient("inprocess://",
"add_sub")`` (``inprocess://<TritonConfig.id>`` when several run); see
docs/pytriton.md. Over HTTP or gRPC, use PyTriton's own clients or
tritonclient against the frontends (TritonConfig's ports)."""

from ._inprocess import DecoupledModelClient, ModelClient
from .exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientQueueFullError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)

__all__ = [
    "DecoupledModelClient",
    "ModelClient",
    "PyTritonClientClosedError",
    "PyTritonClientError",
    "PyTritonClientInferenceServerError",
    "PyTritonClientInvalidUrlError",
    "PyTritonClientModelDoesntSupportBatchingError",
    "PyTritonClientModelUnavailableError",
    "PyTritonClientQueueFullError",
    "PyTritonClientTimeoutError",
    "PyTritonClientValueError",
]
