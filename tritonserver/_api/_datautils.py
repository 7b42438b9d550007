"""Conversions between Triton, NumPy and DLPack descriptions of data, the
parsing of memory-type specs, and the BYTES wire format."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Optional, Union

from ._dlpack import DLDataTypeCode, DLDeviceType
from ._enums import DataType, MemoryType
from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    import numpy

DeviceOrMemoryType = Union[
    tuple[MemoryType, int], MemoryType, tuple[DLDeviceType, int], str
]

_BOOL, _UINT, _INT, _FLOAT = (DLDataTypeCode.kDLBool, DLDataTypeCode.kDLUInt, DLDataTypeCode.kDLInt,
                              DLDataTypeCode.kDLFloat)

# The one element-type table: Triton type -> (NumPy dtype kind or None,
# DLPack type code, bits per element). The NumPy and DLPack lookups below,
# and the KServe codec's datatype names, are derived from it (numpy itself
# is not imported here: `import tritonserver` stays fast). BYTES has no
# fixed-size element (NumPy object/str/bytes arrays map to it).
ELEMENT_TYPES: dict[DataType, tuple[Optional[str], int, int]] = {
    DataType.BOOL: ("b", _BOOL, 8),
    DataType.UINT8: ("u", _UINT, 8), DataType.UINT16: ("u", _UINT, 16),
    DataType.UINT32: ("u", _UINT, 32), DataType.UINT64: ("u", _UINT, 64),
    DataType.INT8: ("i", _INT, 8), DataType.INT16: ("i", _INT, 16), DataType.INT32: ("i", _INT, 32),
    DataType.INT64: ("i", _INT, 64),
    DataType.FP16: ("f", _FLOAT, 16), DataType.FP32: ("f", _FLOAT, 32), DataType.FP64: ("f", _FLOAT, 64),
    DataType.BF16: (None, DLDataTypeCode.kDLBfloat, 16),  # no NumPy type
}
_NUMPY_KIND_TO_TRITON = {(kind, bits // 8): t for t, (kind, _, bits) in ELEMENT_TYPES.items() if kind}
_DLPACK_TO_TRITON = {(code, bits): t for t, (_, code, bits) in ELEMENT_TYPES.items()}
_TRITON_TO_DLPACK = {t: (code, bits) for t, (_, code, bits) in ELEMENT_TYPES.items()}



def numpy_types() -> dict[DataType, Any]:
    """Triton type -> NumPy scalar type, for the types NumPy has (BYTES and
    BF16 have none), from ELEMENT_TYPES; imports numpy."""
    import numpy

    return {t: numpy.dtype(f"{kind}{bits // 8}").type for t, (kind, _, bits) in ELEMENT_TYPES.items() if kind}


_MEMORY_TYPE_NAMES = {
    "CPU": MemoryType.CPU,
    "CPU_PINNED": MemoryType.CPU_PINNED,
    "GPU": MemoryType.GPU,
    "CUDA": MemoryType.GPU,
}

_DLPACK_DEVICE_TO_MEMORY_TYPE = {
    DLDeviceType.kDLCPU: MemoryType.CPU,
    DLDeviceType.kDLCUDA: MemoryType.GPU,
    DLDeviceType.kDLCUDAHost: MemoryType.CPU_PINNED,
    DLDeviceType.kDLCUDAManaged: MemoryType.GPU,
}


def numpy_to_triton_dtype(dtype: Any) -> DataType:
    """The Triton type of a NumPy dtype (str/bytes/object → BYTES)."""
    if dtype.kind in "OSU":
        return DataType.BYTES
    try:
        return _NUMPY_KIND_TO_TRITON[(dtype.kind, dtype.itemsize)]
    except KeyError:
        raise InvalidArgumentError(
            f"Unsupported Numpy data type. Can't convert {dtype} to Triton server data type"
        ) from None


def dlpack_to_triton_dtype(code: int, bits: int) -> DataType:
    """The Triton type of a DLPack (type code, bits) pair."""
    try:
        return _DLPACK_TO_TRITON[(code, bits)]
    except KeyError:
        raise InvalidArgumentError(
            f"Unsupported DLPack data type (code {code}, {bits} bits): no Triton equivalent"
        ) from None


def triton_to_dlpack_dtype(data_type: DataType) -> tuple[int, int]:
    """The DLPack (type code, bits) of a Triton type; BYTES has none."""
    try:
        return _TRITON_TO_DLPACK[DataType(data_type)]
    except KeyError:
        raise InvalidArgumentError(
            f"Unsupported Triton server data type. Can't convert {DataType(data_type).name} "
            "to DLPack (BYTES tensors are read with to_bytes_array())"
        ) from None


def dlpack_device_to_memory_type(device_type: int, device_id: int) -> tuple[MemoryType, int]:
    """(MemoryType, id) of a DLPack device."""
    try:
        memory_type = _DLPACK_DEVICE_TO_MEMORY_TYPE[DLDeviceType(device_type)]
    except (KeyError, ValueError):
        raise InvalidArgumentError(
            f"Unsupported DLPack device type {device_type}: only CPU, CUDA, "
            "CUDA host and CUDA managed memory can be used"
        ) from None
    if memory_type != MemoryType.GPU:
        device_id = 0
    return memory_type, device_id


def parse_device_or_memory_type(value: DeviceOrMemoryType) -> tuple[MemoryType, int]:
    """Parse the official memory-type forms: "cpu", "cpu_pinned", "gpu",
    "gpu:1", a MemoryType, or a (MemoryType | DLDeviceType, id) pair."""
    if isinstance(value, tuple) and len(value) == 2:
        kind, device_id = value
        if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
            raise InvalidArgumentError(f"Invalid memory type {value}: bad device id")
        if isinstance(kind, DLDeviceType):
            return dlpack_device_to_memory_type(kind, device_id)
        if isinstance(kind, MemoryType):
            return kind, device_id if kind == MemoryType.GPU else 0
        raise InvalidArgumentError(f"Invalid memory type {value}")
    if isinstance(value, MemoryType):
        return value, 0
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) > 2:
            raise InvalidArgumentError(f"Invalid memory type string {value}")
        try:
            memory_type = _MEMORY_TYPE_NAMES[parts[0].strip().upper()]
        except KeyError:
            raise InvalidArgumentError(
                f"Unsupported Memory Type String. Can't convert {parts[0].upper()} "
                "to Triton server memory type (use cpu, cpu_pinned, gpu or gpu:N)"
            ) from None
        device_id = 0
        if len(parts) == 2:
            try:
                device_id = int(parts[1])
            except ValueError:
                raise InvalidArgumentError(f"Invalid memory type string {value}") from None
            if device_id < 0:
                raise InvalidArgumentError(f"Invalid memory type string {value}")
        return memory_type, device_id
    raise InvalidArgumentError(
        f"Invalid memory type {value!r}: use a string such as 'cpu' or 'gpu:0', "
        "a MemoryType, or a (MemoryType | DLDeviceType, id) pair"
    )


# The largest BYTES element: its length is a 4-byte unsigned prefix.
_MAX_BYTES_ELEMENT = 2**32 - 1


def serialize_bytes_array(array: numpy.ndarray[Any, Any]) -> numpy.ndarray[Any, Any]:
    """Triton's BYTES wire format: per element (C order) a 4-byte
    little-endian length, then the bytes. str elements are UTF-8 encoded."""
    import numpy

    chunks = []
    for item in array.reshape(-1, order="C").tolist() if array.size else []:
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, (bytes, bytearray)):
            item = str(item).encode("utf-8")
        if len(item) > _MAX_BYTES_ELEMENT:
            raise InvalidArgumentError(
                f"a BYTES element of {len(item)} bytes is too large: Triton's BYTES format "
                f"stores each element's length in 4 bytes (at most {_MAX_BYTES_ELEMENT} bytes); "
                "split it, or send it as a UINT8 tensor"
            )
        chunks.append(struct.pack("<I", len(item)))
        chunks.append(item)
    return numpy.frombuffer(b"".join(chunks), dtype=numpy.uint8)


def deserialize_bytes(data: bytes, count: int) -> list[bytes]:
    """Inverse of serialize_bytes_array: `count` elements from `data`."""
    out = []
    view = memoryview(data)
    offset = 0
    for _ in range(count):
        if offset + 4 > len(view):
            raise InvalidArgumentError("malformed BYTES tensor: truncated length prefix")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > len(view):
            raise InvalidArgumentError("malformed BYTES tensor: truncated element")
        out.append(bytes(view[offset : offset + length]))
        offset += length
    return out
