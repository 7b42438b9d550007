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
    """Rate limiter mode (``TRITONSERVER_RateLimitMode``)."""

    OFF = 0
    EXEC_COUNT = 1


class InstanceGroupKind(IntEnum):
    """Kinds of model instance groups (``TRITONSERVER_InstanceGroupKind``)."""

    AUTO = 0
    CPU = 1
    GPU = 2
    MODEL = 3


class LogFormat(IntEnum):
    """Log line format (``TRITONSERVER_LogFormat``)."""

    DEFAULT = 0
    ISO8601 = 1


class LogLevel(IntEnum):
    """Log levels (``TRITONSERVER_LogLevel``)."""

    INFO = 0
    WARN = 1
    ERROR = 2
    VERBOSE = 3


class MetricFormat(IntEnum):
    """Output format of ``Server.metrics()``."""

    PROMETHEUS = 0


class MetricKind(IntEnum):
    """Kinds of custom metrics."""

    COUNTER = 0
    GAUGE = 1


class ModelBatchFlag(IntFlag):
    """Batching properties of a model."""

    UNKNOWN = 1
    FIRST_DIM = 2


class ModelTxnPropertyFlag(IntFlag):
    """Transaction properties of a model (decoupled or one-to-one)."""

    ONE_TO_ONE = 1
    DECOUPLED = 2


class ModelIndexFlag(IntFlag):
    """Flags of the model index query."""

    READY = 1


class RequestFlag(IntFlag):
    """Sequence flags of an inference request."""

    SEQUENCE_START = 1
    SEQUENCE_END = 2
