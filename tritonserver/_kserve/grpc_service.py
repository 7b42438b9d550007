"""Triton's GRPCInferenceService for one embedded Server, on grpc.aio: the
protocol logic of KServeGrpc (the transport is tritonserver.frontend's).

The messages are tritonclient's generated modules (``tritonclient.grpc``'s
service_pb2 and model_config_pb2): a process has one copy of the
``inference`` proto package, whoever imports it first, so a program that
imports tritonclient.grpc beside this service works.

Status codes and message texts are the binary's (src/grpc/*.cc, r24.10): a
TritonError maps to the gRPC code its core error code maps to there.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, AsyncIterator, Callable, Optional

import numpy

from .._api._enums import DataType
from .._api._errors import (
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnsupportedError,
    code_of,
    error_from_code,
    network_text,
)
from .._api._model import Model
from .._api._server import Server
from .codec import DATATYPES, RESERVED_PARAMETER_PREFIX, _raw_bytes, core_judged
from .header_pattern import compile_header_pattern
from .log_settings import LogSettings
from .shared_memory import NO_CUDA_SHARED_MEMORY, RegionUses, SystemSharedMemory, system_shared_memory
from .stream_flow import StreamFlow, Turn

INSTALL_HINT = 'pip install "tritonserver-binding[serve]"'


def generated_modules() -> tuple[Any, Any, Any]:
    """tritonclient's service_pb2, service_pb2_grpc and model_config_pb2."""
    try:
        from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc  # type: ignore[import-untyped]
    except ImportError as error:
        raise ImportError(
            f"the gRPC frontend needs grpcio and tritonclient[grpc] ({error}): {INSTALL_HINT}"
        ) from None
    return service_pb2, service_pb2_grpc, model_config_pb2


def grpc_module() -> Any:
    try:
        import grpc  # type: ignore[import-untyped]
    except ImportError as error:
        raise ImportError(f"the gRPC frontend needs grpcio ({error}): {INSTALL_HINT}") from None
    return grpc


def _json_format() -> Any:
    from google.protobuf import json_format  # type: ignore[import-untyped]

    return json_format


# Core error code (tritonserver's error classes) -> grpc.StatusCode name, as
# the binary's GrpcStatusUtil::CodeToStatus.
_STATUS_NAMES = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARGUMENT", "UNAVAILABLE", "UNIMPLEMENTED",
                 "ALREADY_EXISTS", "CANCELLED")


# gRPC clients (grpc core: grpcio, tritonclient.grpc, perf_analyzer) refuse
# a status whose metadata passes 8 KiB ("received metadata size exceeds soft
# limit"): a long error message, a model's traceback say, would reach the
# client as RESOURCE_EXHAUSTED "Stream removed" instead of itself. The
# budget of a status message, in bytes once percent-encoded as grpc-message
# is, leaves room for the status's other headers.
_DETAILS_BUDGET = 7000


def _encoded_size(char: str) -> int:
    """The bytes of one character in grpc-message (the gRPC spec's
    percent-encoding: printable ASCII but "%" as is, every other byte of
    its UTF-8 as %XX)."""
    if " " <= char <= "~" and char != "%":
        return 1
    return 3 * len(char.encode("utf-8", "replace"))


def status_details(text: str) -> str:
    """`text` as a call's status message: whole when it fits the budget
    (_DETAILS_BUDGET), else its beginning and a note saying how much was cut
    and why (the client then still reads the error, with its status code)."""
    if len(text) * 12 <= _DETAILS_BUDGET:  # 12: the most one character can take
        return text
    sizes = [_encoded_size(char) for char in text]
    if sum(sizes) <= _DETAILS_BUDGET:
        return text
    kept, used = 0, 0
    room = _DETAILS_BUDGET - 160  # the note below, in ASCII
    while used + sizes[kept] <= room:
        used += sizes[kept]
        kept += 1
    return (f"{text[:kept]} [... {len(text) - kept} more characters cut by the server: gRPC clients refuse "
            f"status messages past 8 KiB]")


def status_code(error: Exception) -> Any:
    """The grpc.StatusCode of a TritonError, or of the ValueError the
    package raises for a name, id or parameter it cannot pass to the core
    (a NUL in it): INVALID_ARGUMENT."""
    if isinstance(error, ValueError):
        return grpc_module().StatusCode.INVALID_ARGUMENT
    code = code_of(error)
    return getattr(grpc_module().StatusCode, _STATUS_NAMES[code] if code is not None else "UNKNOWN")


# The request parameters with the reserved prefix that gRPC clients may set.
_RESERVED_PARAMETERS = ("triton_enable_empty_final_response",)

# Typed contents field -> the datatypes it may carry (the binary's
# InferGRPCToInput) and the NumPy type its elements are stored as.
_CONTENTS = (
    ("bool_contents", ("BOOL",), numpy.bool_),
    ("int_contents", ("INT8", "INT16", "INT32"), None),
    ("int64_contents", ("INT64",), numpy.int64),
    ("uint_contents", ("UINT8", "UINT16", "UINT32"), None),
    ("uint64_contents", ("UINT64",), numpy.uint64),
    ("fp32_contents", ("FP32",), numpy.float32),
    ("fp64_contents", ("FP64",), numpy.float64),
    ("bytes_contents", ("BYTES",), None),
)
_CONTENTS_TYPE = {"bool_contents": "BOOL", "int_contents": "INT32", "int64_contents": "INT64",
                  "uint_contents": "UINT32", "uint64_contents": "UINT64", "fp32_contents": "FP32",
                  "fp64_contents": "FP64", "bytes_contents": "BYTES"}


def model_version(text: str) -> int:
    """A request's model version string (GetModelVersionFromString)."""
    if text == "":
        return -1
    try:
        version = int(text)
    except ValueError:
        raise InvalidArgumentError(
            f"failed to get model version from specified version string '{text}' (details: stol), version "
            "should be an integral value > 0"
        ) from None
    if version < 0:
        raise InvalidArgumentError(
            f"invalid model version specified '{text}' , version should be an integral value > 0")
    if version >= 2**63:
        raise InvalidArgumentError(
            f"failed to get model version from specified version string '{text}' (details: stol), version "
            "should be an integral value > 0")
    return version


def _parameter_value(parameter: Any) -> Any:
    """The value an InferParameter holds (None when none is set)."""
    kind = parameter.WhichOneof("parameter_choice")
    return None if kind is None else getattr(parameter, kind)


def _set_parameter(target: Any, value: Any) -> None:
    """An InferParameter from a response parameter's value (a BYTES one is
    refused, as the binary refuses it)."""
    if isinstance(value, bytes):
        raise UnsupportedError(BYTES_PARAMETER_REFUSED)
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = str(value)


# cpp/infer_response_message.h's kBytesParameterRefused: the binary's words
BYTES_PARAMETER_REFUSED = "Response parameter of type 'TRITONSERVER_PARAMETER_BYTES' is not currently supported"


class _OutputRegion:
    """An output a request asked into a shared-memory region."""

    __slots__ = ("region", "offset", "byte_size")

    def __init__(self, region: str, offset: int, byte_size: int) -> None:
        self.region, self.offset, self.byte_size = region, offset, byte_size


# How long an answer waits for the core to let go of the request's
# shared-memory inputs (a model that keeps its input arrays holds them longer).
RELEASE_WAIT_SECONDS = 2.0


class _HeldRegions:
    """The regions a request uses (`uses`: in use from its decoding until
    the caller releases them, on every path) and the arrays over shared
    memory its inputs are made of (the region's mapping is exported to
    them until they go). The core holds a request's inputs until it
    releases the request, which may come just after its final response;
    the answer waits for that, so that a client may unregister the region
    once it has the answer (as the binary lets it, which holds regions
    until the response is complete)."""

    __slots__ = ("uses", "_loop", "_left", "_done", "_refs")

    def __init__(self, registry: SystemSharedMemory) -> None:
        self.uses = registry.uses()
        self._loop = asyncio.get_running_loop()
        self._left = 0
        self._done: Optional[asyncio.Future[None]] = None
        self._refs: list[weakref.ref[Any]] = []

    def track(self, array: Any) -> None:
        self._left += 1
        self._refs.append(weakref.ref(array, self._gone))

    def _gone(self, _ref: Any) -> None:  # on whichever thread let go of the last array over the view
        self._loop.call_soon_threadsafe(self._one_gone)

    def _one_gone(self) -> None:
        self._left -= 1
        if self._left == 0 and self._done is not None and not self._done.done():
            self._done.set_result(None)

    async def released(self) -> None:
        if self._left == 0:
            return
        self._done = self._loop.create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self._done), RELEASE_WAIT_SECONDS)
        except asyncio.TimeoutError:
            pass  # still held by the model: the region stays in use (unregister says so)


class _Infer:
    """One ModelInferRequest, decoded: the arguments of async_infer and
    where outputs go."""

    __slots__ = ("model", "kwargs", "output_regions", "empty_final", "regions")

    def __init__(self, model: Model, kwargs: dict[str, Any], output_regions: dict[str, _OutputRegion],
                 empty_final: bool, regions: RegionUses) -> None:
        self.model = model
        self.kwargs = kwargs
        self.output_regions = output_regions
        self.empty_final = empty_final
        self.regions = regions  # through which outputs are written into their regions


def _typed_parameter(tensor: Any, key: str, kind: str, region: Optional[str]) -> Any:
    """A tensor's shared-memory parameter `key` of `kind` (None when not
    given), checked as the binary's ParseSharedMemoryParams."""
    if key not in tensor.parameters:
        return None
    if region is None and key != "shared_memory_region":
        raise InvalidArgumentError(
            f"'{key}' can not be specified without 'shared_memory_region' parameter for tensor '{tensor.name}'")
    value = tensor.parameters[key]
    if value.WhichOneof("parameter_choice") != kind:
        raise InvalidArgumentError(
            f"invalid value type for '{key}' parameter for tensor '{tensor.name}', expected {kind}.")
    return getattr(value, kind)


def _shared_memory_parameters(tensor: Any) -> Optional[tuple[str, int, int]]:
    """(region, offset, byte_size) of a tensor's shared-memory parameters;
    None without them."""
    region = _typed_parameter(tensor, "shared_memory_region", "string_param", None)
    offset = _typed_parameter(tensor, "shared_memory_offset", "int64_param", region) or 0
    byte_size = _typed_parameter(tensor, "shared_memory_byte_size", "int64_param", region)
    if region is None:
        return None
    if byte_size is None:
        raise InvalidArgumentError(
            f"'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for "
            f"tensor '{tensor.name}'")
    if offset < 0 or byte_size < 0:
        raise InvalidArgumentError(
            f"tensor '{tensor.name}': shared_memory_offset {offset} and shared_memory_byte_size {byte_size} must "
            "not be negative")
    return region, offset, byte_size


def _input_value(datatype: str, shape: list[int], data: Any, track: Optional[Callable[[Any], None]] = None) -> Any:
    """An input of raw little-endian `data` (bytes or a memoryview): a NumPy
    array over it when its size fits the shape (no copy), else a Tensor
    that lets the core refuse the size with its own message. `track` is
    given the array every other one is made from (it holds `data`)."""
    kind = DATATYPES.get(datatype)
    raw = numpy.frombuffer(data, dtype=numpy.uint8)
    if track is not None:
        track(raw)
    if kind is not None and datatype not in ("BYTES", "BF16") and len(shape) <= 32:  # NumPy 1's most dimensions
        dtype = kind[1]
        count = 1
        for d in shape:
            count *= d
        if raw.nbytes == count * dtype.itemsize:
            return raw.view(dtype).reshape(shape)
    return core_judged(datatype, shape, raw)


def _typed_contents(io: Any, model_name: str) -> bytes:
    """An input's typed `contents`, serialized as raw tensor data (none for
    `contents` without values, as the binary takes it: the core then
    checks the size against the shape)."""
    contents = io.contents
    datatype = io.datatype
    found: Optional[bytes] = None
    for field, allowed, dtype in _CONTENTS:
        values = getattr(contents, field)
        if not len(values):
            continue
        if found is not None:
            raise InvalidArgumentError(
                f"unexpected explicit tensor data for input tensor '{io.name}' for model '{model_name}', "
                "binary data was already supplied.")
        if datatype not in allowed:
            raise InvalidArgumentError(
                f"unexpected explicit tensor data for input tensor '{io.name}' for model '{model_name}' of "
                f"type '{_CONTENTS_TYPE[field]}', expected datatype '{datatype}'")
        if field == "bytes_contents":
            found = b"".join(len(item).to_bytes(4, "little") + item for item in values)
        else:
            element = dtype or DATATYPES[datatype][1]
            # INT8/INT16/UINT8/UINT16 keep the low bytes of each 32-bit
            # element, as the binary does.
            found = numpy.asarray(values, dtype=numpy.int64 if dtype is None else dtype).astype(element).tobytes()
    return b"" if found is None else found


class GrpcInferenceService:
    """The GRPCInferenceService RPCs of `server` (a grpc.aio servicer).

    `restrictions`: protocol group -> (metadata key, value) a request must
    carry; `forward_header_pattern`: request metadata whose key matches it
    (search; RE2 syntax, header_pattern.py) becomes a string request parameter of infer requests;
    `compression`: the grpc.Compression of infer responses (None: none).
    """

    def __init__(self, server: Server, restrictions: Optional[dict[str, tuple[str, str]]] = None,
                 forward_header_pattern: str = "", compression: Any = None) -> None:
        self._pb, _, self._config_pb = generated_modules()
        self._server = server
        self._restrictions = {group: (key.lower(), value) for group, (key, value) in (restrictions or {}).items()}
        self._forward = compile_header_pattern(forward_header_pattern, "forward_header_pattern")
        self._shared_memory = system_shared_memory(server)
        self._log_settings = LogSettings.of(server)
        self._compression = compression
        self._wrap_methods()

    # -- plumbing ---------------------------------------------------------------
    _GROUPS = {
        "ServerLive": "health", "ServerReady": "health", "ModelReady": "health",
        "ServerMetadata": "metadata", "ModelMetadata": "metadata",
        "ModelInfer": "inference", "ModelStreamInfer": "inference",
        "ModelConfig": "model-config", "ModelStatistics": "statistics",
        "RepositoryIndex": "model-repository", "RepositoryModelLoad": "model-repository",
        "RepositoryModelUnload": "model-repository",
        "SystemSharedMemoryStatus": "shared-memory", "SystemSharedMemoryRegister": "shared-memory",
        "SystemSharedMemoryUnregister": "shared-memory", "CudaSharedMemoryStatus": "shared-memory",
        "CudaSharedMemoryRegister": "shared-memory", "CudaSharedMemoryUnregister": "shared-memory",
        "TraceSetting": "trace", "LogSettings": "logging",
    }

    def _wrap_methods(self) -> None:
        """Each unary RPC checks its group's restriction and turns a
        TritonError into the binary's status code and message."""
        for name, group in self._GROUPS.items():
            if name in ("ModelInfer", "ModelStreamInfer"):
                continue  # their own methods (below)
            setattr(self, name, self._unary(getattr(self, "_" + name), group))

    def _unary(self, method: Callable[..., Any], group: str) -> Callable[..., Any]:
        async def rpc(request: Any, context: Any) -> Any:
            await self.check_restriction(group, context)  # aborts
            try:
                result = method(request, context)
                if asyncio.iscoroutine(result):
                    result = await result
                return result
            except (TritonError, ValueError) as error:
                await context.abort(status_code(error), status_details(network_text(error)))

        rpc.__name__ = method.__name__.lstrip("_")
        return rpc

    def restriction(self, group: str, metadata: Any) -> Optional[str]:
        """The refusal of a request of `group` without its restricted header,
        or None."""
        restriction = self._restrictions.get(group)
        if restriction is None:
            return None
        key, value = restriction
        for k, v in metadata or ():
            if k == key and v == value:
                return None
        return f"This protocol is restricted, expecting header '{key}'"

    async def check_restriction(self, group: str, context: Any) -> None:
        """Aborts the RPC (UNAVAILABLE, as the binary) without the header."""
        refusal = self.restriction(group, context.invocation_metadata())
        if refusal is not None:
            await context.abort(grpc_module().StatusCode.UNAVAILABLE, refusal)

    # -- health and metadata ----------------------------------------------------
    def _ServerLive(self, request: Any, context: Any) -> Any:
        return self._pb.ServerLiveResponse(live=self._server.live())

    def _ServerReady(self, request: Any, context: Any) -> Any:
        return self._pb.ServerReadyResponse(ready=self._server.ready())

    def _ModelReady(self, request: Any, context: Any) -> Any:
        version = model_version(request.version)
        return self._pb.ModelReadyResponse(ready=self._server.model(request.name, version).ready())

    def _ServerMetadata(self, request: Any, context: Any) -> Any:
        metadata = self._server.metadata()
        extensions = [e for e in metadata.get("extensions", []) if e not in NOT_SERVED_EXTENSIONS]
        return self._pb.ServerMetadataResponse(name=metadata.get("name", ""), version=metadata.get("version", ""),
                                               extensions=extensions)

    def _ModelMetadata(self, request: Any, context: Any) -> Any:
        metadata = self._server.model(request.name, model_version(request.version)).metadata()
        response = self._pb.ModelMetadataResponse(
            name=metadata.get("name", ""), versions=metadata.get("versions", []),
            platform=metadata.get("platform", ""))
        for field in ("inputs", "outputs"):
            for tensor in metadata.get(field, []):
                getattr(response, field).add(name=tensor.get("name", ""), datatype=tensor.get("datatype", ""),
                                             shape=tensor.get("shape", []))
        return response

    def _ModelConfig(self, request: Any, context: Any) -> Any:
        config = self._server.model(request.name, model_version(request.version)).config()
        response = self._pb.ModelConfigResponse()
        json_format = _json_format()
        try:
            json_format.ParseDict(config, response.config)
        except json_format.ParseError as error:  # a field this tritonclient's ModelConfig lacks
            raise InternalError(
                f"the configuration of model '{request.name}' does not fit the ModelConfig message of the installed "
                f"tritonclient ({error}): install the tritonclient[grpc] of this Triton core's release") from None
        return response

    def _ModelStatistics(self, request: Any, context: Any) -> Any:
        try:
            statistics = self._server.model(request.name, model_version(request.version)).statistics()
        except NotFoundError as error:  # the core's class for this case, as the binary answers
            raise InvalidArgumentError(str(error)) from None
        response = self._pb.ModelStatisticsResponse()
        _json_format().ParseDict(statistics, response)
        return response

    # -- model repository -------------------------------------------------------
    def _RepositoryIndex(self, request: Any, context: Any) -> Any:
        if request.repository_name:
            raise UnsupportedError("'repository_name' specification is not supported")
        response = self._pb.RepositoryIndexResponse()
        for (name, version), model in self._server.models(exclude_not_ready=request.ready).items():
            entry = response.models.add(name=name, version="" if version < 0 else str(version))
            if model.state:
                entry.state = model.state
            if model.reason:
                entry.reason = model.reason
        return response

    async def _RepositoryModelLoad(self, request: Any, context: Any) -> Any:
        if request.repository_name:
            raise UnsupportedError("'repository_name' specification is not supported")
        parameters: dict[str, Any] = {}
        for key, value in request.parameters.items():
            kind = value.WhichOneof("parameter_choice")
            if key == "config":
                if kind != "string_param":
                    raise InvalidArgumentError(
                        f"invalid value type for load parameter '{key}', expected string_param.")
                parameters[key] = value.string_param
            elif key.startswith("file:"):
                if kind != "bytes_param":
                    raise InvalidArgumentError(
                        f"invalid value type for load parameter '{key}', expected bytes_param.")
                parameters[key] = value.bytes_param
            else:
                raise InvalidArgumentError(f"unrecognized load parameter '{key}'.")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self._server.load, request.model_name, parameters)
        except NotFoundError as error:  # the package's word for the core's "failed to poll": the binary's class
            raise InternalError(str(error)) from None
        return self._pb.RepositoryModelLoadResponse()

    async def _RepositoryModelUnload(self, request: Any, context: Any) -> Any:
        if request.repository_name:
            raise UnsupportedError("'repository_name' specification is not supported")
        unload_dependents = False
        if "unload_dependents" in request.parameters:
            value = request.parameters["unload_dependents"]
            if value.WhichOneof("parameter_choice") != "bool_param":
                raise InvalidArgumentError(
                    "invalid value type for 'unload_dependents' parameter, expected bool_param.")
            unload_dependents = value.bool_param
        loop = asyncio.get_running_loop()
        try:
            # Answered once the unload has begun (its requests in flight then
            # end in the background), as the binary answers.
            await loop.run_in_executor(None, self._server._begin_unload, request.model_name, unload_dependents)
        except NotFoundError:
            pass  # a name that is neither in a repository nor loaded: the core (and the binary) accept it
        return self._pb.RepositoryModelUnloadResponse()

    # -- shared memory ----------------------------------------------------------
    def _SystemSharedMemoryStatus(self, request: Any, context: Any) -> Any:
        response = self._pb.SystemSharedMemoryStatusResponse()
        for region in self._shared_memory.status(request.name):
            response.regions[region["name"]].CopyFrom(
                self._pb.SystemSharedMemoryStatusResponse.RegionStatus(**region))
        return response

    def _SystemSharedMemoryRegister(self, request: Any, context: Any) -> Any:
        self._shared_memory.register(request.name, request.key, request.offset, request.byte_size)
        return self._pb.SystemSharedMemoryRegisterResponse()

    def _SystemSharedMemoryUnregister(self, request: Any, context: Any) -> Any:
        self._shared_memory.unregister(request.name)
        return self._pb.SystemSharedMemoryUnregisterResponse()

    # CUDA shared memory: the binary built without GPU support answers so;
    # this server registers no CUDA regions (none can be registered).
    def _CudaSharedMemoryStatus(self, request: Any, context: Any) -> Any:
        if request.name:
            raise NotFoundError(f"Unable to find cuda shared memory region: '{request.name}'")
        return self._pb.CudaSharedMemoryStatusResponse()

    def _CudaSharedMemoryRegister(self, request: Any, context: Any) -> Any:
        raise InvalidArgumentError(f"failed to register shared memory region: invalid args: {NO_CUDA_SHARED_MEMORY}")

    def _CudaSharedMemoryUnregister(self, request: Any, context: Any) -> Any:
        return self._pb.CudaSharedMemoryUnregisterResponse()

    # -- trace and logging --------------------------------------------------------
    def _TraceSetting(self, request: Any, context: Any) -> Any:
        raise UnavailableError(
            "the server does not support trace (this server's gRPC frontend serves no trace settings: trace "
            "requests in-process with the Triton core's options instead)")

    def _LogSettings(self, request: Any, context: Any) -> Any:
        updates: dict[str, Any] = {}
        for key, value in request.settings.items():
            updates[key] = _parameter_value(value)
        settings = self._log_settings.update(updates) if updates else self._log_settings.get()
        response = self._pb.LogSettingsResponse()
        for key, value in settings.items():
            target = response.settings[key]
            if isinstance(value, bool):
                target.bool_param = value
            elif isinstance(value, int):
                target.uint32_param = value
            else:
                target.string_param = value
        return response

    # -- inference ----------------------------------------------------------------
    def _decode(self, request: Any, metadata: Any, held: _HeldRegions) -> _Infer:
        """The async_infer arguments of a ModelInferRequest (TritonError for a
        request the binary refuses)."""
        model = self._server.model(request.model_name, model_version(request.model_version))
        kwargs: dict[str, Any] = {"output_memory_type": "cpu"}
        if request.id:
            kwargs["request_id"] = request.id
        parameters: dict[str, Any] = {}
        flags = 0
        empty_final = False
        for key, value in request.parameters.items():
            kind = value.WhichOneof("parameter_choice")
            if key == "sequence_id":
                if kind == "int64_param":
                    kwargs["correlation_id"] = value.int64_param % 2**64
                elif kind == "string_param":
                    kwargs["correlation_id"] = value.string_param
                else:
                    raise InvalidArgumentError(
                        "invalid value type for 'sequence_id' parameter, expected int64_param or string_param.")
            elif key in ("sequence_start", "sequence_end"):
                if kind != "bool_param":
                    raise InvalidArgumentError(f"invalid value type for '{key}' parameter, expected bool_param.")
                if value.bool_param:
                    flags |= 1 if key == "sequence_start" else 2
            elif key == "priority":
                if kind == "int64_param":
                    if value.int64_param < 0:
                        raise InvalidArgumentError("invalid value for 'priority', expected value >= 0.")
                    kwargs["priority"] = value.int64_param
                elif kind == "uint64_param":
                    kwargs["priority"] = value.uint64_param
                else:
                    raise InvalidArgumentError(
                        "invalid value type for 'priority' parameter, expected int64_param or uint64_param.")
            elif key == "timeout":
                if kind != "int64_param":
                    raise InvalidArgumentError("invalid value type for 'timeout' parameter, expected int64_param.")
                kwargs["timeout"] = value.int64_param % 2**64
            elif key.startswith(RESERVED_PARAMETER_PREFIX):
                if key not in _RESERVED_PARAMETERS:
                    raise InvalidArgumentError(
                        f"parameter keys starting with '{RESERVED_PARAMETER_PREFIX}' are reserved for Triton usage. "
                        f"Only the following keys starting with '{RESERVED_PARAMETER_PREFIX}' are allowed: "
                        + " ".join(_RESERVED_PARAMETERS))
                if kind != "bool_param":
                    raise InvalidArgumentError(f"invalid value type for '{key}' parameter, expected bool_param.")
                empty_final = value.bool_param
            elif kind in ("int64_param", "bool_param", "string_param", "double_param"):
                parameters[key] = getattr(value, kind)
            else:
                raise InvalidArgumentError(
                    f"invalid value type for '{key}' parameter, expected int64_param, bool_param, or string_param.")
        if flags:
            kwargs["flags"] = flags
        if self._forward is not None:
            for key, value in metadata or ():
                if isinstance(value, str) and self._forward.search(key):
                    parameters[key] = value
        if parameters:
            kwargs["parameters"] = parameters

        inputs: dict[str, Any] = {}
        raw_index = 0
        raw_contents = request.raw_input_contents
        for io in request.inputs:
            if io.name in inputs:  # the binary's refusal, not one of them silently
                raise InvalidArgumentError(
                    f"input '{io.name}' already exists in request for model '{request.model_name}': give each "
                    "input once")
            shape = io.shape[:]
            if any(d < 0 for d in shape):
                raise InvalidArgumentError(
                    f"input '{io.name}' for model '{request.model_name}' has a negative dimension in its shape "
                    f"{shape}")
            if io.datatype not in DATATYPES:
                raise InvalidArgumentError(
                    f"input '{io.name}' for model '{request.model_name}': unknown datatype '{io.datatype}' (one "
                    f"of {', '.join(DATATYPES)})")
            shared = _shared_memory_parameters(io)
            if shared is not None:
                if io.HasField("contents"):
                    raise InvalidArgumentError(
                        f"unexpected 'content' provided when using shared memory for input tensor '{io.name}' "
                        f"for model '{request.model_name}'")
                region, offset, byte_size = shared
                # an array over the region's memory: the region stays mapped while the request holds it
                data: Any = held.uses.view(region, offset, byte_size)
            elif io.HasField("contents"):
                if len(raw_contents):
                    raise InvalidArgumentError(
                        f"contents field must not be specified when using raw_input_contents for '{io.name}' "
                        f"for model '{request.model_name}'")
                data = _typed_contents(io, request.model_name)
            elif raw_index < len(raw_contents):
                data = raw_contents[raw_index]
                raw_index += 1
            else:
                raise InvalidArgumentError(
                    f"unable to find data for input tensor '{io.name}' for model '{request.model_name}' in "
                    "request.")
            inputs[io.name] = _input_value(io.datatype, shape, data, held.track if shared is not None else None)
        kwargs["inputs"] = inputs

        output_regions: dict[str, _OutputRegion] = {}
        if len(request.outputs):
            names = []
            for output in request.outputs:
                if "classification" in output.parameters:
                    raise UnsupportedError(
                        f"output '{output.name}' for model '{request.model_name}': the classification extension "
                        "is not supported by this server's gRPC frontend: request the output itself")
                shared = _shared_memory_parameters(output)
                if shared is not None:
                    region, offset, byte_size = shared
                    # checked now, as the binary does when it reads the request, and in use from now
                    held.uses.view(region, offset, byte_size).release()
                    output_regions[output.name] = _OutputRegion(region, offset, byte_size)
                names.append(output.name)
            kwargs["output_names"] = names
        return _Infer(model, kwargs, output_regions, empty_final, held.uses)

    def _encode(self, decoded: _Infer, response: Any, message: Any) -> None:
        """Fill a ModelInferResponse from an InferenceResponse."""
        message.model_name = decoded.model.name
        if response.model_version is not None:
            message.model_version = str(response.model_version)
        message.id = response.request_id or ""
        for key, value in response.parameters.items():
            _set_parameter(message.parameters[key], value)
        regions = decoded.output_regions
        for name, tensor in response.outputs.items():
            message.outputs.add(name=name, datatype=DataType(tensor.data_type).name,
                                shape=[int(d) for d in tensor.shape])
            raw = _raw_bytes(tensor)
            target = regions.get(name)
            if target is None:
                message.raw_output_contents.append(raw)
                continue
            if len(raw) > target.byte_size:
                raise InternalError(
                    f"shared memory size specified with the request for output '{name}' ({target.byte_size} "
                    f"bytes) should be at least {len(raw)} bytes to hold the results")
            view = decoded.regions.view(target.region, target.offset, len(raw))
            try:
                view[:] = raw
            finally:
                view.release()
            message.raw_output_contents.append(b"")

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        await self.check_restriction("inference", context)
        if self._compression is not None:
            context.set_compression(self._compression)
        held = _HeldRegions(self._shared_memory)
        try:
            try:
                message = await self._infer(request, context.invocation_metadata(), held)
                code = None
            except (TritonError, ValueError) as error:
                code, text = status_code(error), network_text(error)
            # answered once the request's frames (holding its inputs) are gone
            # and the core let go of its shared-memory inputs
            await held.released()
        finally:
            held.uses.release()  # before the answer; at once when cancelled (the client left)
        if code is None:
            return message
        await context.abort(code, status_details(text))

    # -- the native transport's ModelInfer path (cpp/grpc_transport.cc) ----------
    def native_infer_enabled(self) -> bool:
        """Whether every plain ModelInfer may take the native path: no
        restriction on inference, no forwarded metadata, no compression
        (each would need the servicer)."""
        return "inference" not in self._restrictions and self._forward is None and self._compression is None

    @staticmethod
    def native_error(code: int, text: str) -> tuple[int, str]:
        """(grpc status number, message) of a core error of a native-path
        request, as ModelInfer words the same error."""
        error = error_from_code(code, text)
        return status_code(error).value[0], status_details(network_text(error))

    @staticmethod
    def native_stream_error(code: int, text: str) -> str:
        """The error_message of a ModelStreamInfer response for a core error
        of a native-path request, as _stream_responses words it."""
        return str(error_from_code(code, text))

    async def _infer(self, request: Any, metadata: Any, held: _HeldRegions) -> Any:
        decoded = self._decode(request, metadata, held)
        if decoded.model._decoupled():
            raise UnsupportedError("ModelInfer RPC doesn't support models with decoupled transaction policy")
        iterator = decoded.model.async_infer(**decoded.kwargs)
        message = self._pb.ModelInferResponse()
        try:
            async for response in iterator:
                if response.outputs or response.final:
                    self._encode(decoded, response, message)
                    break
        except asyncio.CancelledError:  # the client cancelled or went away
            iterator.cancel()
            raise
        return message

    async def ModelStreamInfer(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Each request of the stream runs as it arrives; a model that is
        not decoupled is answered in the order of the requests, a decoupled
        model's every response as it comes (stream_flow.py), as the binary
        writes them. An error is a stream message with error_message and the
        stream goes on; with the header triton_grpc_error: true, the model's
        first error (a response's) ends the stream with its status at once,
        and a request refused before the model runs (decode, unknown model,
        the core's checks at submission) is still an in-stream message, as
        the binary does."""
        await self.check_restriction("inference", context)
        if self._compression is not None:
            context.set_compression(self._compression)
        metadata = context.invocation_metadata()
        end_at_error = any(k == "triton_grpc_error" and v == "true" for k, v in metadata or ())
        flow = StreamFlow()
        tasks: set[asyncio.Task[None]] = set()
        done = object()

        async def read() -> None:
            try:
                async for request in request_iterator:
                    release = flow.started()
                    turn = flow.turn()
                    task = asyncio.ensure_future(self._stream_one(request, metadata, flow, turn, release,
                                                                  end_at_error))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    task.add_done_callback(release)
                    await flow.room()  # the next request once the call holds less (stream_flow.py)
                if tasks:
                    await asyncio.gather(*list(tasks), return_exceptions=True)
            finally:
                flow.put(done)

        reader = asyncio.ensure_future(read())
        # the native transport's Context: whether the next message is in its
        # request's turn (frontend/_native_grpc.py); grpc.aio's has none
        in_turn = hasattr(context, "in_turn")
        try:
            while True:
                item, ordered = await flow.get()
                if item is done:
                    break
                message, code = item
                if code is not None and end_at_error:
                    await context.abort(code, status_details(message.error_message))
                if in_turn:
                    context.in_turn = ordered
                yield message
            reader.result()
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()

    async def _stream_one(self, request: Any, metadata: Any, flow: StreamFlow, turn: Turn,
                          release: Callable[..., None], end_at_error: bool) -> None:
        """Queues the responses of one request of a stream in its turn, the
        final one once the core let go of its shared-memory inputs."""
        held = _HeldRegions(self._shared_memory)
        try:
            final = await self._stream_responses(request, metadata, flow, held, turn, release, end_at_error)
            await held.released()
            held.uses.release()  # before the final response goes
            if final is not None:
                message, code, size = final
                flow.put((message, code), size, None if code is not None and end_at_error else turn)
        finally:
            held.uses.release()  # at once when cancelled
            turn.end()

    async def _stream_responses(self, request: Any, metadata: Any, flow: StreamFlow, held: _HeldRegions,
                                turn: Turn, release: Callable[..., None],
                                end_at_error: bool) -> Optional[tuple[Any, Any, int]]:
        """Queues the responses but the final one, which it returns (with
        its error's status code, or None, and the bytes of its outputs).
        Each is queued with the bytes of its outputs (what its message
        holds, less a little framing; protobuf's ByteSize() would cost a
        serialization). The code of a response's error (the model's, or its
        outputs') ends the stream under triton_grpc_error, and such a
        message is queued out of turn, as the binary ends the stream at
        once; a request refused before the model runs answers in its turn
        with no code: an in-stream message whatever the header, as the
        binary's stream_infer_handler.cc answers an error of issuing it."""
        iterator = None
        try:
            decoded = self._decode(request, metadata, held)
            decoupled = decoded.model._decoupled()
            if decoupled:
                release()  # not counted: it may wait on the stream's later requests (stream_flow.py)
                turn.end()  # its responses are written as they come
            iterator = decoded.model.async_infer(raise_on_error=False, **decoded.kwargs)
        except (TritonError, ValueError) as error:
            if self._names_decoupled(request):
                turn.end()  # the binary writes a decoupled model's refusal at once too
            message = self._pb.ModelStreamInferResponse(error_message=network_text(error))
            message.infer_response.id = request.id
            return message, None, 0
        try:
            final = None
            async for response in iterator:
                message = self._pb.ModelStreamInferResponse()
                infer_response = message.infer_response
                code, size = None, 0
                if response.error is not None:
                    message.error_message = str(response.error)
                    code = status_code(response.error)
                    self._identify(infer_response, request)
                elif decoupled and response.final and not response.outputs and not response.parameters:
                    if not decoded.empty_final:
                        continue
                    self._identify(infer_response, request)
                else:
                    try:
                        self._encode(decoded, response, infer_response)
                        size = sum(tensor.size for tensor in response.outputs.values())
                    except TritonError as error:
                        message = self._pb.ModelStreamInferResponse(error_message=network_text(error))
                        code = status_code(error)
                        infer_response = message.infer_response
                        self._identify(infer_response, request)
                infer_response.parameters["triton_final_response"].bool_param = response.final
                if response.final:
                    final = (message, code, size)
                else:
                    flow.put((message, code), size, None if code is not None and end_at_error else turn)
            return final
        except asyncio.CancelledError:
            iterator.cancel()
            raise
        except (TritonError, ValueError) as error:  # while answering: the request's failure, as a response's
            message = self._pb.ModelStreamInferResponse(error_message=network_text(error))
            self._identify(message.infer_response, request)
            message.infer_response.parameters["triton_final_response"].bool_param = True
            return message, status_code(error), 0

    def _names_decoupled(self, request: Any) -> bool:
        """Whether the model a request names is decoupled (False for one the
        core does not know, or a version that does not parse)."""
        try:
            return self._server.model(request.model_name, model_version(request.model_version))._decoupled()
        except (TritonError, ValueError):
            return False

    @staticmethod
    def _identify(infer_response: Any, request: Any) -> None:
        infer_response.id = request.id
        infer_response.model_name = request.model_name
        infer_response.model_version = request.model_version


# Protocol extensions the core lists that this frontend does not serve.
NOT_SERVED_EXTENSIONS = frozenset(("classification", "cuda_shared_memory", "trace"))
