"""DeviceArray: a C-contiguous tensor in GPU memory as in-process python
models hold it: an input the core left on its device (the model config's
FORCE_CPU_ONLY_INPUT_TENSORS "no"), or a model's output taken through
DLPack from CuPy, PyTorch or JAX. No copy is made: the owner (the request,
or the producer's DLPack capsule) keeps the memory; an output is copied
once, into the response's buffer, when it is sent."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _native
from .._api._datautils import ELEMENT_TYPES, dlpack_to_triton_dtype
from .._api._dlpack import DLDeviceType
from .._api._enums import DataType, MemoryType
from .._api._memorybuffer import MemoryBuffer
from .._api._tensor import Tensor as _ApiTensor

_CUDA = int(DLDeviceType.kDLCUDA)


class DeviceArray:
    """A tensor in the memory of CUDA device `device_id`: what a DLPack
    consumer (``torch.from_dlpack``, ``cupy.from_dlpack``) takes without a
    copy. Slicing rows (``array[a:b]``) gives a view of them."""

    __slots__ = ("data_ptr", "nbytes", "device_id", "shape", "triton_dtype", "owner")

    def __init__(self, data_ptr: int, nbytes: int, device_id: int, shape: tuple[int, ...],
                 triton_dtype: int, owner: Any) -> None:
        self.data_ptr = data_ptr
        self.nbytes = nbytes
        self.device_id = device_id
        self.shape = shape
        self.triton_dtype = triton_dtype
        self.owner = owner

    @staticmethod
    def of_dlpack(obj: Any, what: str) -> "DeviceArray":
        """The device memory of a DLPack object or capsule (no copy); a
        ValueError naming `what` when it is not C-contiguous or of a type
        Triton has none for."""
        view = _native.import_dlpack(obj)
        if not view.c_contiguous:
            raise ValueError(f"{what} is a non-contiguous GPU tensor: make it contiguous first "
                             "(torch: .contiguous(), CuPy: cupy.ascontiguousarray)")
        try:
            data_type = dlpack_to_triton_dtype(view.dtype_code, view.dtype_bits)
        except Exception as e:
            raise ValueError(f"{what}: {e}") from None
        # The view holds the producer's capsule, and so its memory.
        return DeviceArray(view.data_ptr, view.nbytes, view.device_id, tuple(view.shape), int(data_type), view)

    @property
    def dtype(self) -> Optional[np.dtype[Any]]:
        """The NumPy dtype of the elements (None for BF16, which NumPy
        lacks)."""
        kind, _, bits = ELEMENT_TYPES[DataType(self.triton_dtype)]
        if kind is None:
            return None
        return np.dtype(bool) if kind == "b" else np.dtype(f"{kind}{bits // 8}")

    def __getitem__(self, rows: Any) -> "DeviceArray":
        """Rows `rows.start` to `rows.stop` (a slice of the first axis,
        step 1): a view of them."""
        if not isinstance(rows, slice) or rows.step not in (None, 1) or not self.shape:
            raise TypeError("a GPU tensor can only be sliced by rows (array[start:stop])")
        start, stop, _ = rows.indices(self.shape[0])
        stop = max(start, stop)
        row_bytes = self.nbytes // self.shape[0] if self.shape[0] else 0
        return DeviceArray(self.data_ptr + start * row_bytes, (stop - start) * row_bytes, self.device_id,
                           (stop - start, *self.shape[1:]), self.triton_dtype, self.owner)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def _tensor(self) -> _ApiTensor:
        return _ApiTensor(DataType(self.triton_dtype), list(self.shape),
                          MemoryBuffer(self.data_ptr, MemoryType.GPU, self.device_id, self.nbytes, self.owner))

    def __dlpack__(self, stream: Optional[int] = None, max_version: Optional[tuple[int, int]] = None,
                   dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A DLPack capsule of the memory (no copy); `stream` as the array
        API standard says (the consumer's stream is made to wait for copies
        queued on the legacy default stream)."""
        return self._tensor().__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCUDA, device id)."""
        return (_CUDA, self.device_id)

    def spec(self) -> tuple[int, int, int, Any]:
        """(pointer, bytes, device id, owner): how the native send() takes
        a GPU output."""
        return (self.data_ptr, self.nbytes, self.device_id, self.owner)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={DataType(self.triton_dtype).name}, device=cuda:{self.device_id})"


def dlpack_device(obj: Any) -> tuple[int, int]:
    """The DLPack device of an object or bare capsule (nothing consumed)."""
    if hasattr(obj, "__dlpack_device__"):
        device = obj.__dlpack_device__()
        return int(device[0]), int(device[1])
    return _native.dlpack_capsule_device(obj)


def is_on_device(obj: Any) -> bool:
    """Whether a DLPack object (or capsule) lives in CUDA device memory."""
    return dlpack_device(obj)[0] == _CUDA


def input_on_device(datatype: int, shape: tuple[int, ...], where: tuple[int, int, int], owner: Any) -> DeviceArray:
    """An input the native request left in GPU memory: `where` is
    (pointer, bytes, device id); `owner`, the request, keeps it valid."""
    data_ptr, nbytes, device_id = where
    return DeviceArray(data_ptr, nbytes, device_id, tuple(shape), datatype, owner)
