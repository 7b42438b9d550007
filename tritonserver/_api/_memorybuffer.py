"""MemoryBuffer: a pointer, its memory kind and size, and the object that
keeps the memory alive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .. import _native
from ._datautils import dlpack_device_to_memory_type
from ._enums import MemoryType
from ._errors import InvalidArgumentError


@dataclass
class MemoryBuffer:
    """A region of memory that Triton can read or that holds an output.

    ``owner`` keeps the memory alive: for outputs it is the native buffer the
    response allocator made (freed when the last reference goes); for inputs
    it is the array the data came from.
    """

    data_ptr: int
    memory_type: MemoryType
    memory_type_id: int
    size: int
    owner: Any

    @staticmethod
    def from_dlpack(owner: Any) -> "MemoryBuffer":
        """Describe the memory of any object that speaks DLPack (zero-copy).

        Raises InvalidArgumentError for objects without DLPack support or
        with non-contiguous memory.
        """
        view = import_dlpack(owner)
        if not view.c_contiguous:
            raise InvalidArgumentError("Only contiguous memory is supported")
        return _from_view(view, owner)

    def _problem(self) -> Optional[str]:
        """Why this buffer cannot be read as described (a field set to a bad
        value, or memory its owner does not hold), or None. Checked before
        any pointer is handed on: to Triton as an input, to a DLPack
        consumer as an export."""
        pointer, size = self.data_ptr, self.size
        if type(self.memory_type) is not MemoryType and not _is_memory_type(self.memory_type):
            return (f"MemoryBuffer.memory_type must be a MemoryType (CPU, CPU_PINNED or GPU), "
                    f"not {self.memory_type!r}")
        for field, value in (("data_ptr", pointer), ("size", size), ("memory_type_id", self.memory_type_id)):
            if type(value) is not int:
                return f"MemoryBuffer.{field} must be an int, not {type(value).__name__}"
            if value < 0:
                return f"MemoryBuffer.{field} must not be negative (it is {value})"
        if pointer == 0 and size > 0:
            return f"MemoryBuffer.data_ptr is null for a buffer of {size} bytes"
        extent = _owner_extent(self.owner)
        if extent is not None:
            start, held = extent
            if not (start <= pointer and pointer + size <= start + held):
                return (
                    f"the MemoryBuffer ({size} bytes at {pointer:#x}) lies outside "
                    f"the memory of its owner ({held} bytes at {start:#x})"
                )
        return None


def _is_memory_type(value: Any) -> bool:
    """Whether `value` is one of MemoryType's values (a plain int of one is
    accepted, as officially)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    try:
        MemoryType(value)
    except ValueError:
        return False
    return True


def _owner_extent(owner: Any) -> Optional[tuple[int, int]]:
    """(address, size) of the memory an owner object holds, when known."""
    if isinstance(owner, _native.Buffer):
        return owner.data_ptr, owner.size
    if isinstance(owner, _native.DLPackView):
        return owner.data_ptr, owner.nbytes
    interface = getattr(owner, "__array_interface__", None)
    if isinstance(interface, dict) and "data" in interface:
        nbytes = getattr(owner, "nbytes", None)
        if isinstance(nbytes, int):
            return int(interface["data"][0]), nbytes
    return None


def import_dlpack(obj: Any) -> "_native.DLPackView":
    """Import `obj` through DLPack (or the buffer protocol)."""
    if not hasattr(obj, "__dlpack__") and not isinstance(obj, memoryview):
        raise InvalidArgumentError(
            f"Object of type {type(obj).__name__} does not support the DLPack protocol"
        )
    try:
        return _native.import_dlpack(obj)
    except (TypeError, RuntimeError, BufferError, ValueError) as e:
        raise InvalidArgumentError(f"Object does not support DLPack protocol: {_producer_error(obj, e)}") from e


def _producer_error(obj: Any, error: Exception) -> str:
    """The producer's own reason (e.g. NumPy's BufferError for a read-only
    or byte-swapped array), which the importer's message does not carry."""
    try:
        obj.__dlpack__()
    except Exception as e:  # the producer's refusal is what the user needs
        return f"{type(e).__name__}: {e}"
    return str(error)


def _from_view(view: "_native.DLPackView", owner: Any) -> MemoryBuffer:
    """A MemoryBuffer over an imported array. Host memory keeps `owner`, the
    producer (NumPy's capsule holds that very array). Device memory keeps
    the view, which holds the consumed capsule until its deleter may run: a
    GPU producer's capsule may own memory the producer does not (a copy made
    for the export, on another device or stream)."""
    memory_type, device_id = dlpack_device_to_memory_type(view.device_type, view.device_id)
    if memory_type == MemoryType.GPU:
        owner = view
    return MemoryBuffer(view.data_ptr, memory_type, device_id, view.nbytes, owner)
