"""The names programs import from the official binding's low-level module
(``tritonserver._c.triton_bindings``, also re-exported as
``tritonserver._c``), as aliases of this package's own: the enums under
their C API names, the error classes, and the C API's string and size
helpers for data and memory types. The official module's handle classes
(``TRITONSERVER_Server``, ``TRITONSERVER_InferenceRequest``,
``TRITONSERVER_ResponseAllocator``, ...) are not here: use the public API
(the user guide's "Migrating from the official binding" lists what to use).
"""

from __future__ import annotations

from .._api._datautils import ELEMENT_TYPES
from .._api._enums import DataType as TRITONSERVER_DataType
from .._api._enums import InstanceGroupKind as TRITONSERVER_InstanceGroupKind
from .._api._enums import LogFormat as TRITONSERVER_LogFormat
from .._api._enums import LogLevel as TRITONSERVER_LogLevel
from .._api._enums import MemoryType as TRITONSERVER_MemoryType
from .._api._enums import MetricFormat as TRITONSERVER_MetricFormat
from .._api._enums import MetricKind as TRITONSERVER_MetricKind
from .._api._enums import ModelBatchFlag as TRITONSERVER_ModelBatchFlag
from .._api._enums import ModelControlMode as TRITONSERVER_ModelControlMode
from .._api._enums import ModelIndexFlag as TRITONSERVER_ModelIndexFlag
from .._api._enums import ModelTxnPropertyFlag as TRITONSERVER_ModelTxnPropertyFlag
from .._api._enums import RateLimitMode as TRITONSERVER_RateLimitMode
from .._api._enums import RequestFlag as TRITONSERVER_RequestFlag
from .._api._errors import AlreadyExistsError as AlreadyExistsError
from .._api._errors import InternalError as InternalError
from .._api._errors import InvalidArgumentError as InvalidArgumentError
from .._api._errors import NotFoundError as NotFoundError
from .._api._errors import TritonError as TritonError
from .._api._errors import UnavailableError as UnavailableError
from .._api._errors import UnknownError as UnknownError
from .._api._errors import UnsupportedError as UnsupportedError

__all__ = [
    "TRITONSERVER_DataType", "TRITONSERVER_InstanceGroupKind", "TRITONSERVER_LogFormat", "TRITONSERVER_LogLevel",
    "TRITONSERVER_MemoryType", "TRITONSERVER_MetricFormat", "TRITONSERVER_MetricKind",
    "TRITONSERVER_ModelBatchFlag", "TRITONSERVER_ModelControlMode", "TRITONSERVER_ModelIndexFlag",
    "TRITONSERVER_ModelTxnPropertyFlag", "TRITONSERVER_RateLimitMode", "TRITONSERVER_RequestFlag",
    "AlreadyExistsError", "InternalError", "InvalidArgumentError", "NotFoundError", "TritonError",
    "UnavailableError", "UnknownError", "UnsupportedError",
    "TRITONSERVER_DataTypeString", "TRITONSERVER_StringToDataType", "TRITONSERVER_DataTypeByteSize",
    "TRITONSERVER_MemoryTypeString",
]

_INVALID = "<invalid>"  # the C API's name of a value outside its enum


def TRITONSERVER_DataTypeString(datatype: int) -> str:
    """The C API's name of a data type ("FP32", "BYTES"; "<invalid>")."""
    try:
        member = TRITONSERVER_DataType(datatype)
    except ValueError:
        return _INVALID
    return _INVALID if member == TRITONSERVER_DataType.INVALID else member.name


def TRITONSERVER_StringToDataType(dtype: str) -> TRITONSERVER_DataType:
    """The data type of a C API name ("FP32"); INVALID for any other
    string."""
    return TRITONSERVER_DataType.__members__.get(dtype, TRITONSERVER_DataType.INVALID)


def TRITONSERVER_DataTypeByteSize(datatype: int) -> int:
    """Bytes per element of a data type; 0 for BYTES (no fixed size) and
    INVALID."""
    try:
        element = ELEMENT_TYPES.get(TRITONSERVER_DataType(datatype))
    except ValueError:
        return 0
    return 0 if element is None else element[2] // 8


def TRITONSERVER_MemoryTypeString(memtype: int) -> str:
    """The C API's name of a memory type ("CPU", "CPU_PINNED", "GPU";
    "<invalid>")."""
    try:
        return TRITONSERVER_MemoryType(memtype).name
    except ValueError:
        return _INVALID
