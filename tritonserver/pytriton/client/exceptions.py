"""PyTriton's client exception classes (``pytriton.client.exceptions``)."""

from __future__ import annotations

from ..exceptions import _MessageError


class PyTritonClientError(_MessageError):
    """The base of the clients' errors; ``message`` is its text."""


class PyTritonClientValueError(PyTritonClientError):
    """A bad argument."""


class PyTritonClientInvalidUrlError(PyTritonClientValueError):
    """A url the client cannot use."""


class PyTritonClientTimeoutError(PyTritonClientError):
    """The server, the model or an inference took longer than allowed."""


class PyTritonClientModelUnavailableError(PyTritonClientError):
    """The model is not served (unknown, not loaded, or not ready)."""


class PyTritonClientClosedError(PyTritonClientError):
    """The client was closed."""


class PyTritonClientModelDoesntSupportBatchingError(PyTritonClientError):
    """infer_batch() on a model without batching."""


class PyTritonClientInferenceServerError(PyTritonClientError):
    """The server or the inference callable failed the request."""


class PyTritonClientQueueFullError(PyTritonClientError):
    """The client's queue of requests is full."""
