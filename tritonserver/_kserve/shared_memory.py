"""System (POSIX) shared memory regions that clients register with a
server's frontends, as Triton's shared-memory extension: one registry per
Server, shared by its HTTP and gRPC frontends (as in NVIDIA's binary, a
region registered over HTTP is usable over gRPC). A request reads its
inputs from regions and writes its outputs into them through its
`RegionUses` (`SystemSharedMemory.uses()`): each region it names is in
use, and unregistering it refused, from the moment the request is decoded
until the frontend releases the uses (its last response written, or it
failed or was cancelled), as the binary holds a region for a request.

Only POSIX shared-memory keys are taken ("/name" or "name": one file of
/dev/shm, opened without following links), never paths; a region's offset
and size are checked against the file, and every use against the region
and against the file's size then (a region whose file its owner truncated
is refused, not read: touching a mapping past the end of its file kills the
process with SIGBUS; a truncation while a request is reading the region
remains the owner's to avoid, as with the binary). Messages and error
classes are the binary's.
"""

from __future__ import annotations

import mmap
import os
import stat
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from .._api._errors import AlreadyExistsError, InternalError, InvalidArgumentError, NotFoundError

SHM_DIR = "/dev/shm"
_NAME_MAX = 255

# Why the frontends refuse a CUDA shared-memory region (after the binary's
# words on a host without GPUs, "failed to register shared memory region:
# invalid args").
NO_CUDA_SHARED_MEMORY = ("this server serves no CUDA shared memory (GPUs not supported): register system shared "
                         "memory, or send the tensors in the request")


@dataclass
class _Region:
    name: str
    key: str
    offset: int
    byte_size: int
    mapping: mmap.mmap
    start: int  # where the region begins in `mapping` (mmap offsets are page-aligned)
    fd: int  # the file, open while the region is registered: its size is checked at each use
    uses: int = 0  # requests that use the region now (RegionUses holding it)

    def release(self) -> None:
        """Unmaps the region and closes its file (BufferError, and nothing
        done, while a view of it is held)."""
        self.mapping.close()
        self._close_file()

    def _close_file(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def checked_key(key: Any) -> str:
    """The file name in /dev/shm of a POSIX shared-memory key: InternalError
    for a key shm_open would not open (the binary's class and words: an
    empty key, a path), InvalidArgumentError for one that is no string."""
    if not isinstance(key, str):
        raise InvalidArgumentError(f"shared memory key must be a string, not {type(key).__name__}")
    name = key[1:] if key.startswith("/") else key
    if (not name or name in (".", "..") or "/" in name or "\0" in name or len(name) > _NAME_MAX
            or not _has_utf8_form(name)):
        raise InternalError(
            f"Unable to open shared memory region: '{key}': a key is a POSIX shared memory name "
            f"('/name', at most {_NAME_MAX} characters, no other '/'), as shm_open takes it, not a path"
        )
    return name


def _has_utf8_form(text: str) -> bool:
    """False for text with a lone surrogate (JSON's "\\ud800"), which no file name has."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _checked_size(what: str, value: Any) -> int:
    if type(value) is not int or value < 0:
        raise InvalidArgumentError(f"shared memory {what} must be a non-negative integer, not {value!r}")
    return value


class SystemSharedMemory:
    """The system shared-memory regions registered with one server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions: dict[str, _Region] = {}

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        file_name = checked_key(key)
        offset = _checked_size("offset", offset)
        byte_size = _checked_size("byte_size", byte_size)
        with self._lock:
            if name in self._regions:
                raise AlreadyExistsError(f"shared memory region '{name}' already in manager")
            self._regions[name] = _map(name, key, file_name, offset, byte_size)

    def unregister(self, name: str = "") -> None:
        """Unmaps region `name`, or every region for "" (an unknown name is
        no error, as in the binary). A region a request uses is refused
        (InternalError, the binary's words); unregistering every region
        removes the others and names those in use."""
        with self._lock:
            names = sorted(self._regions) if name == "" else [name] if name in self._regions else []
            busy = [each for each in names if not self._released(each)]
        if busy and name:
            raise InternalError(f"Cannot unregister shared memory region '{name}', it is currently in use.")
        if busy:
            raise InternalError("Failed to unregister the following system shared memory regions: "
                                + "".join(f"{each} ," for each in busy))

    def _released(self, name: str) -> bool:
        """Unmaps and forgets region `name` unless it is in use: by a
        request (its uses), or by an array the core still holds over its
        mapping (BufferError). The lock is held."""
        region = self._regions[name]
        if region.uses:
            return False
        try:
            region.release()
        except BufferError:
            return False
        del self._regions[name]
        return True

    def status(self, name: str = "") -> list[dict[str, Any]]:
        with self._lock:
            if name and name not in self._regions:
                raise NotFoundError(f"Unable to find system shared memory region: '{name}'")
            regions = [self._regions[name]] if name else [self._regions[each] for each in sorted(self._regions)]
            return [{"name": r.name, "key": r.key, "offset": r.offset, "byte_size": r.byte_size} for r in regions]

    def uses(self) -> "RegionUses":
        """The regions one request is to use (none yet)."""
        return RegionUses(self)

    def _view(self, name: str, offset: int, byte_size: int, uses: "RegionUses") -> memoryview:
        offset = _checked_size("offset", offset)
        byte_size = _checked_size("byte_size", byte_size)
        with self._lock:
            region = self._regions.get(name)
            if region is None:
                raise NotFoundError(f"Unable to find shared memory region: '{name}'")
            if offset >= region.byte_size and not (offset == 0 and byte_size == 0):
                raise InvalidArgumentError(f"Invalid offset for shared memory region: '{name}'")
            if offset + byte_size > region.byte_size:
                raise InvalidArgumentError(f"Invalid offset + byte size for shared memory region: '{name}'")
            file_size = os.fstat(region.fd).st_size
            if region.offset + offset + byte_size > file_size:
                raise InvalidArgumentError(
                    f"shared memory region '{name}': its file '{region.key}' is now {file_size} bytes, shorter than "
                    f"the region registered (offset {region.offset} + byte_size {region.byte_size}): unregister the "
                    "region and register it again once the file has its size")
            if all(held is not region for held in uses._regions):
                region.uses += 1
                uses._regions.append(region)
            begin = region.start + offset
            return memoryview(region.mapping)[begin:begin + byte_size]

    def _release(self, uses: "RegionUses") -> None:
        with self._lock:
            for region in uses._regions:
                region.uses -= 1
            uses._regions.clear()

    def close(self) -> None:
        """Unmaps every region whose views are released (the rest go with their last view)."""
        with self._lock:
            for region in self._regions.values():
                try:
                    region.release()
                except BufferError:
                    region._close_file()  # the mapping stays valid without it
            self._regions.clear()


class RegionUses:
    """The regions one request uses. Each region it views counts as in use
    (SystemSharedMemory.unregister refuses it) until release(), which the
    frontend calls once on every path: the request's last response written
    (outputs into their regions), or its refusal, failure or cancellation.
    Used from one task at a time."""

    __slots__ = ("_registry", "_regions")

    def __init__(self, registry: SystemSharedMemory) -> None:
        self._registry = registry
        self._regions: list[_Region] = []

    def view(self, name: str, offset: int, byte_size: int) -> memoryview:
        """A writable view of `byte_size` bytes at `offset` in region `name`,
        which is in use from now until release() (NotFoundError for an
        unknown region, InvalidArgumentError for bytes outside it)."""
        return self._registry._view(name, offset, byte_size, self)

    def release(self) -> None:
        """The request is done with its regions (again: nothing more)."""
        if self._regions:
            self._registry._release(self)


def _map(name: str, key: str, file_name: str, offset: int, byte_size: int) -> _Region:
    try:
        directory = os.open(SHM_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise InternalError(f"Unable to open shared memory region: '{key}': {SHM_DIR}: {error.strerror}") from None
    try:
        fd = os.open(file_name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    except OSError as error:
        raise InternalError(f"Unable to open shared memory region: '{key}': {error.strerror}") from None
    finally:
        os.close(directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidArgumentError(f"Invalid shared memory region: '{key}': not a shared memory object")
        if offset + byte_size > info.st_size:
            raise InvalidArgumentError(
                f"failed to register shared memory region '{name}': invalid args (offset {offset} + byte_size "
                f"{byte_size} is past the end of '{key}', {info.st_size} bytes)"
            )
        aligned = offset - offset % mmap.ALLOCATIONGRANULARITY
        length = offset - aligned + byte_size
        if length == 0:
            raise InvalidArgumentError(f"failed to register shared memory region '{name}': invalid args (byte_size 0)")
        mapping = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=aligned)
    except BaseException as error:
        os.close(fd)
        if isinstance(error, OSError):
            raise InternalError(f"failed to register shared memory region '{name}': {error.strerror}") from None
        raise
    return _Region(name, key, offset, byte_size, mapping, offset - aligned, fd)


_REGISTRIES: "weakref.WeakKeyDictionary[Any, SystemSharedMemory]" = weakref.WeakKeyDictionary()
_REGISTRIES_LOCK = threading.Lock()


def system_shared_memory(server: Any) -> SystemSharedMemory:
    """`server`'s registry (one per Server, made on first use)."""
    with _REGISTRIES_LOCK:
        registry = _REGISTRIES.get(server)
        if registry is None:
            registry = _REGISTRIES[server] = SystemSharedMemory()
        return registry
