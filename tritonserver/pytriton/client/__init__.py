"""PyTriton's clients (``pytriton.client``): `ModelClient`,
`DecoupledModelClient`, `FuturesModelClient`, `AsyncioModelClient`,
`AsyncioDecoupledModelClient`, over HTTP or gRPC (tritonclient) by the url
as PyTriton takes it ("localhost", "http://host:port", "grpc://host:port"),
or to a `Triton` of the same process without a socket: "inprocess://"
("inprocess://<TritonConfig.id>" when several run); see docs/pytriton.md."""

from ._asyncio import AsyncioDecoupledModelClient, AsyncioModelClient
from ._futures import FuturesModelClient
from ._model_client import DecoupledModelClient, ModelClient
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
    "AsyncioDecoupledModelClient",
    "AsyncioModelClient",
    "DecoupledModelClient",
    "FuturesModelClient",
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
