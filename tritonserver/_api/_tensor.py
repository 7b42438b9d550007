"""Tensor: typed, shaped memory that speaks DLPack in both directions.

Outputs are Tensors whose buffers were allocated by the native response
allocator; they are shared, never copied, with NumPy, CuPy, PyTorch or any
other DLPack consumer, and freed when the last reference goes.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from .. import _native
from ._datautils import (
    DeviceOrMemoryType,
    deserialize_bytes,
    dlpack_to_triton_dtype,
    numpy_to_triton_dtype,
    parse_device_or_memory_type,
    serialize_bytes_array,
    triton_to_dlpack_dtype,
)
from ._dlpack import DLDeviceType
from ._enums import DataType, MemoryType
from ._errors import InvalidArgumentError, UnsupportedError
from ._memorybuffer import MemoryBuffer, _from_view, import_dlpack

if TYPE_CHECKING:
    import numpy

_PYTHON_SCALARS = (bool, int, float, str, bytes)


@dataclass
class Tensor:
    """A tensor: element type, shape, and the memory holding it.

    Examples:
        >>> t = Tensor.from_dlpack(numpy.arange(4, dtype=numpy.float32))
        >>> numpy.from_dlpack(t)          # shares t's memory
        array([0., 1., 2., 3.], dtype=float32)
    """

    data_type: DataType
    shape: Sequence[int]
    memory_buffer: MemoryBuffer

    # -- properties ---------------------------------------------------------
    @property
    def data_ptr(self) -> int:
        """Address of the first byte."""
        return self.memory_buffer.data_ptr

    @property
    def memory_type(self) -> MemoryType:
        """Kind of memory holding the data."""
        return self.memory_buffer.memory_type

    @property
    def memory_type_id(self) -> int:
        """Device id of the memory (0 for host memory)."""
        return self.memory_buffer.memory_type_id

    @property
    def size(self) -> int:
        """Size of the data in bytes."""
        return self.memory_buffer.size

    def _dims(self, where: str) -> list[int]:
        """``shape`` as a list of ints, checked: a list or tuple (not a str)
        of non-negative integers (NumPy's included). A str, a float or a
        negative dimension raises TypeError/ValueError naming the field and
        `where` it was used, instead of being truncated by int()."""
        shape = self.shape
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise TypeError(f"{where}: Tensor.shape must be a list of ints, not {type(shape).__name__} "
                            f"({shape!r})")
        dims = []
        for d in shape:
            if isinstance(d, bool) or not hasattr(type(d), "__index__"):
                raise TypeError(f"{where}: Tensor.shape must be a list of ints, not {list(shape)!r} "
                                f"(the dimension {d!r} is a {type(d).__name__})")
            d = d.__index__()
            if d < 0:
                raise ValueError(f"{where}: Tensor.shape {list(shape)!r} has a negative dimension ({d})")
            dims.append(d)
        return dims

    # -- DLPack export -----------------------------------------------------
    def __dlpack__(
        self,
        *,
        stream: Optional[Any] = None,
        max_version: Optional[tuple[int, int]] = None,
        dl_device: Optional[tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """Export as a DLPack capsule (zero-copy; the capsule holds the owner
        of this Tensor's memory, ``memory_buffer.owner``). A versioned capsule is returned when the consumer
        passes ``max_version`` >= (1, 0).

        ``stream`` follows the array API standard: for GPU memory None or 1
        (the legacy default stream), 2 (the per-thread default stream), -1 (no
        synchronization) or a CUDA stream handle > 2; for host memory only
        None. A response's outputs are complete when it is delivered (the
        backend has finished writing); copies made with CUDA (to_device(), a
        backend's cudaMemcpy) are queued on the legacy default stream, which
        streams None, 1 and 2 are ordered after, and a stream handle > 2 is
        made to wait for them with an event (no host synchronization).
        """
        device = self.__dlpack_device__()
        if stream is not None:
            if isinstance(stream, bool) or not isinstance(stream, int):
                raise BufferError(f"DLPack stream must be an int or None, not {type(stream).__name__}")
            if device[0] != int(DLDeviceType.kDLCUDA):
                raise BufferError(f"DLPack stream must be None for host memory, not {stream}")
            if stream == 0 or stream < -1:
                raise BufferError(
                    f"DLPack stream {stream} is not valid for CUDA memory: pass None or 1 (legacy default "
                    "stream), 2 (per-thread default stream), -1 (no synchronization) or a stream handle > 2"
                )
        if copy:
            raise BufferError("Tensor.__dlpack__ exports without copying; copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(
                f"cannot export to device {tuple(dl_device)} from {device} without a copy; "
                "use Tensor.to_device() first"
            )
        code, bits = triton_to_dlpack_dtype(self.data_type)
        if stream is not None and stream > 2:
            _native.cuda_stream_wait_default(device[1], stream)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        problem = self.memory_buffer._problem()
        if problem is not None:
            raise ValueError(f"cannot export this Tensor: {problem}")
        # The native export checks that the shape fits in the buffer (a
        # changed shape or data_type would make the consumer read past it).
        # The capsule holds the memory's owner: for outputs the native buffer
        # (its deleter then needs no GIL), else the owner object.
        return _native.export_dlpack(
            self.memory_buffer.owner, self.data_ptr, self.size, self._dims("cannot export this Tensor"), code, bits,
            device[0], device[1], versioned,
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        """(DLPack device type, device id). Pinned host memory is reported as
        kDLCPU, which every CPU consumer accepts."""
        if self.memory_type == MemoryType.GPU:
            return (int(DLDeviceType.kDLCUDA), self.memory_type_id)
        return (int(DLDeviceType.kDLCPU), 0)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> numpy.ndarray[Any, Any]:
        """NumPy view of host memory (no copy); BYTES decode to an object array."""
        if self.memory_type == MemoryType.GPU:
            raise TypeError("a GPU tensor cannot be viewed as a NumPy array; call to_host() first")
        if self.data_type == DataType.BF16:
            raise TypeError(
                "NumPy has no bfloat16 type, so a BF16 tensor cannot be viewed as a NumPy array: "
                "use a DLPack consumer that has one, e.g. torch.from_dlpack(tensor)"
            )
        import numpy

        if self.data_type == DataType.BYTES:
            array = self.to_bytes_array()
        else:
            array = numpy.from_dlpack(self)
        if dtype is not None:
            array = array.astype(dtype, copy=False)
        return array.copy() if copy else array

    # -- construction ------------------------------------------------------
    @staticmethod
    def from_dlpack(obj: Any) -> "Tensor":
        """Wrap any DLPack object (NumPy, CuPy, PyTorch, ...) without a copy.

        A non-contiguous host array is copied once into a contiguous buffer;
        a non-contiguous device array raises InvalidArgumentError.
        """
        view = import_dlpack(obj)
        data_type = dlpack_to_triton_dtype(view.dtype_code, view.dtype_bits)
        if view.c_contiguous:
            buffer = _from_view(view, obj)
        else:
            buffer = view.contiguous_copy()
        return Tensor(data_type, list(view.shape), buffer)

    @staticmethod
    def from_bytes_array(array: Any) -> "Tensor":
        """A BYTES tensor from a list or array of bytes/str."""
        tensor = Tensor._from_object(array)
        if tensor.data_type != DataType.BYTES:
            raise InvalidArgumentError(
                f"Unsupported conversion from {array!r} to Triton BYTES Tensor. "
                f"Got {tensor.data_type.name}"
            )
        return tensor

    from_string_array = from_bytes_array

    @staticmethod
    def _from_object(value: Any) -> "Tensor":
        """Tensor for an input value: a Tensor, a DLPack object, a NumPy
        array/scalar, a Python scalar or a (nested) list/tuple."""
        if isinstance(value, Tensor):
            return value
        numpy = sys.modules.get("numpy")  # no array of it exists unless imported
        if numpy is not None and isinstance(value, numpy.ndarray):
            return Tensor._from_numpy(value)
        if isinstance(value, (list, tuple, *_PYTHON_SCALARS)) or (
            numpy is not None and isinstance(value, numpy.generic)
        ):
            import numpy as np

            try:
                array = np.asarray(value)
                if array.dtype.kind in "SU" and not isinstance(value, np.generic):
                    # NumPy's fixed-width strings drop trailing NULs:
                    # the given bytes and str objects themselves instead
                    array = np.array(value, dtype=np.object_)
            except ValueError as e:
                raise InvalidArgumentError(
                    f"Conversion from {value!r} to tensor not supported: {e}"
                ) from e
            return Tensor._from_numpy(array)
        if hasattr(value, "__dlpack__"):
            return Tensor.from_dlpack(value)
        raise InvalidArgumentError(
            f"Input type {type(value).__name__} not supported: use a Tensor, a NumPy "
            "array, a list, a Python scalar, or an object with __dlpack__"
        )

    @staticmethod
    def _from_numpy(array: numpy.ndarray[Any, Any]) -> "Tensor":
        import numpy

        data_type = numpy_to_triton_dtype(array.dtype)
        shape = list(array.shape)
        if data_type == DataType.BYTES:
            array = serialize_bytes_array(array)
        elif not array.dtype.isnative:
            # Triton reads native (little-endian) values: convert, one copy.
            array = numpy.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
        elif not array.flags.c_contiguous:
            array = numpy.ascontiguousarray(array)  # one copy, documented
        pointer = array.__array_interface__["data"][0]
        return Tensor(data_type, shape, MemoryBuffer(pointer, MemoryType.CPU, 0, array.nbytes, array))

    # -- BYTES -------------------------------------------------------------
    def to_bytes_array(self) -> numpy.ndarray[Any, Any]:
        """Decode a BYTES tensor into an object array of ``bytes``."""
        if self.data_type != DataType.BYTES:
            raise InvalidArgumentError(
                f"Tensor has data type {DataType(self.data_type).name} not {DataType.BYTES.name}"
            )
        import numpy

        problem = self.memory_buffer._problem()
        if problem is not None:
            raise ValueError(f"cannot read this BYTES Tensor: {problem}")
        import ctypes  # here, not at import: ~2 ms of `import tritonserver`

        host = self.to_host()
        raw = ctypes.string_at(host.data_ptr, host.size) if host.size else b""
        shape = self._dims("cannot read this BYTES Tensor")
        count = math.prod(shape)
        array = numpy.empty(count, dtype=numpy.object_)
        array[:] = deserialize_bytes(raw, count)
        return array.reshape(shape)

    def to_string_array(self) -> numpy.ndarray[Any, Any]:
        """Decode a BYTES tensor into an array of ``str`` (UTF-8)."""
        import numpy

        decoded = [b.decode("utf-8") for b in self.to_bytes_array().reshape(-1)]
        shape = self._dims("cannot read this BYTES Tensor")
        if not decoded:
            return numpy.empty(shape, dtype=numpy.str_)
        for index, text in enumerate(decoded):
            if text.endswith("\0"):
                raise ValueError(
                    f"element {index} of this BYTES Tensor ends with a NUL character, which a NumPy str array "
                    "drops: read it with to_bytes_array() (bytes objects, kept whole) and decode those")
        return numpy.array(decoded, dtype=numpy.str_).reshape(shape)

    # -- moving between devices --------------------------------------------
    def to_host(self) -> "Tensor":
        """This tensor in host memory (self when it already is)."""
        return self.to_device("cpu")

    def to_device(self, device: DeviceOrMemoryType) -> "Tensor":
        """This tensor in the given memory (self when it already is there).

        Copies between host and GPU memory use the CUDA runtime; without CUDA
        they raise UnsupportedError.
        """
        memory_type, device_id = parse_device_or_memory_type(device)
        here = (self.memory_type, self.memory_type_id)
        if here == (memory_type, device_id):
            return self
        host_kinds = (MemoryType.CPU, MemoryType.CPU_PINNED)
        if memory_type == MemoryType.CPU and self.memory_type in host_kinds:
            return self
        try:
            memory: MemoryBuffer = _native.copy(self.data_ptr, self.size, int(self.memory_type), int(memory_type),
                                              device_id)
        except UnsupportedError as e:
            raise UnsupportedError(
                f"Conversion from {here} to {(memory_type, device_id)} not supported: {e}"
            ) from e
        return Tensor(self.data_type, list(self.shape), memory)

