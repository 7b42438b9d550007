"""Enumerations of the Triton C API, with its numeric values.

They are ``IntEnum``/``IntFlag`` classes: members compare equal to the
plain integers the C API uses, as the official binding's enums do.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag


class DataType(IntEnum):
    """Tensor element types (``TRITONSERVER_DataType``)."""

    INVALID = 0
    BOOL = 1
    UINT8 = 2
    UINT16 = 3
    UINT32 = 4
    UINT64 = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FP16 = 10
    FP32 = 11
    FP64 = 12
    BYTES = 13
    BF16 = 14


class MemoryType(IntEnum):
    """Where a buffer lives (``TRITONSERVER_MemoryType``)."""

    CPU = 0
    CPU_PINNED = 1
    GPU = 2


class ModelControlMode(IntEnum):
    """How the server manages models (``TRITONSERVER_ModelControlMode``)."""

    NONE = 0
    POLL = 1
    EXPLICIT = 2


class RateLimitMode(IntEnum):
    """Rate limiter mode (``TRITONSERVER_RateLimitMode``): off, or model
    instances scheduled by the resources they declare."""

    OFF = 0
    EXEC_COUNT = 1


class InstanceGroupKind(IntEnum):
    """Kinds of model instance groups (``TRITONSERVER_InstanceGroupKind``)."""

    AUTO = 0
    CPU = 1
    GPU = 2
    MODEL = 3


class LogFormat(IntEnum):
    """Log line format (``TRITONSERVER_LogFormat``): Triton's default
    prefix, or an ISO 8601 timestamp first."""

    DEFAULT = 0
    ISO8601 = 1


class LogLevel(IntEnum):
    """Log levels (``TRITONSERVER_LogLevel``), as log_callback receives them
    and as ``logging`` levels are mapped from them."""

    INFO = 0
    WARN = 1
    ERROR = 2
    VERBOSE = 3


class MetricFormat(IntEnum):
    """Output format of ``Server.metrics()`` (``TRITONSERVER_MetricFormat``):
    the Prometheus text format, the only one the core has."""

    PROMETHEUS = 0


class MetricKind(IntEnum):
    """Kinds of custom metrics (``TRITONSERVER_MetricKind``)."""

    COUNTER = 0
    GAUGE = 1


class ModelBatchFlag(IntFlag):
    """Batching properties of a model (``TRITONSERVER_ModelBatchFlag``):
    FIRST_DIM when the model batches along its first dimension, UNKNOWN
    when the core cannot tell."""

    UNKNOWN = 1
    FIRST_DIM = 2


class ModelTxnPropertyFlag(IntFlag):
    """Transaction properties of a model (``TRITONSERVER_ModelTxnPropertyFlag``):
    ONE_TO_ONE, one response per request, or DECOUPLED, any number."""

    ONE_TO_ONE = 1
    DECOUPLED = 2


class ModelIndexFlag(IntFlag):
    """Flags of the model index query (``TRITONSERVER_ModelIndexFlag``):
    READY lists only the models ready for inference."""

    READY = 1


class RequestFlag(IntFlag):
    """Sequence flags of an inference request (``TRITONSERVER_RequestFlag``):
    the first and the last request of a sequence."""

    SEQUENCE_START = 1
    SEQUENCE_END = 2
