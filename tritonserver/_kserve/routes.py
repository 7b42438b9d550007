"""The KServe v2 HTTP routes of one embedded Server, independent of any web
framework: ``KServeRoutes.handle(method, path, headers, body)`` gives the
status, headers and body to send (a streamed body for generate_stream).

Always served: ``GET /v2``, ``GET /v2/health/live``, ``GET
/v2/health/ready``, ``GET /v2/models/{name}[/versions/{v}]`` (metadata),
``.../ready``, ``.../config``, ``.../stats``, ``GET /v2/models/stats``,
``POST .../infer``. The optional route groups (constructor arguments; the
network frontend serves them all, the Ray deployment none): system shared
memory (with a registry: its routes, and infer inputs and outputs in
regions; CUDA shared memory is then answered too, with the binary's answers
of a build without GPUs), the model repository extension, ``/v2/logging``,
``.../generate`` and ``.../generate_stream``, and trace (refused, 501).
``GET /v2`` lists only the protocol extensions served.

Errors carry the protocol's body ``{"error": "..."}`` with the status that
NVIDIA's tritonserver gives (its src/http_server.cc): 400 (bad request or
input, unknown version, a model that is not ready), 403 (restricted API
without its header), 404 (unknown model, region or route), 405 (wrong
method), 500, 501 (unsupported: decoupled model on infer, unknown
Content-Encoding, trace), 503 (server not running). Where the binary answers
500 for a body it cannot parse, these routes answer 400 naming the cause.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Collection, Mapping, Optional

from .._api._errors import (
    InternalError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnsupportedError,
    network_text,
)
from .._api._model import Model
from .._api._server import Server
from . import fast_infer
from .codec import (
    ProtocolError,
    bad_request,
    core_text,
    decode_generate,
    decode_request,
    encode_generate,
    encode_response,
    dump_json,
    error_body,
    load_json,
    parse_header_length,
)
from .header_pattern import compile_header_pattern
from .log_settings import LogSettings
from .shared_memory import NO_CUDA_SHARED_MEMORY, RegionUses, SystemSharedMemory

HEADER_LENGTH = "inference-header-content-length"

# generate_stream's reply headers: server-sent events.
_EVENT_STREAM = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}

# The largest request body, after decompression, by default: later Triton
# releases' --http-max-input-size (64 MiB; Ray deployments use it).
# KServeHttp has no limit by default, as NVIDIA's 2.51 binary.
DEFAULT_MAX_BODY_BYTES = 64 * 2**20

# The protocol extensions these routes always serve, of those the core
# lists: binary tensors, parameters, sequence and priority/timeout
# parameters, the config and statistics routes. The optional groups add
# theirs (KServeRoutes.extensions).
SERVED_EXTENSIONS = frozenset(
    ("binary_tensor_data", "parameters", "sequence", "schedule_policy", "model_configuration", "statistics")
)

# Triton error class -> HTTP status, as the binary's HttpCodeFromError
# (InternalError and anything unlisted: 500; invalid argument, already
# exists, cancelled and unknown: 400).
_STATUS = (
    (NotFoundError, 404),
    (UnavailableError, 503),
    (UnsupportedError, 501),
    (InternalError, 500),
)

# A CUDA IPC handle's size (cudaIpcMemHandle_t), as the binary decodes raw_handle.
CUDA_IPC_HANDLE_BYTES = 64


@dataclass
class Reply:
    """An HTTP response to send."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # A body sent in chunks as they come (generate_stream); `body` is then empty.
    stream: Optional[AsyncIterator[bytes]] = None

    @staticmethod
    def json(document: Any, status: int = 200) -> "Reply":
        return Reply(status, dump_json(document), {"content-type": "application/json"})

    @staticmethod
    def error(status: int, message: str) -> "Reply":
        return Reply(status, error_body(message), {"content-type": "application/json"})


def checked_body_limit(max_body_bytes: Any) -> int:
    """`max_body_bytes`, a positive int (ValueError otherwise)."""
    if type(max_body_bytes) is not int or max_body_bytes <= 0:
        raise ValueError(f"max_body_bytes must be a positive int (bytes), not {max_body_bytes!r}")
    return max_body_bytes


def status_of(error: TritonError) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 400 if isinstance(error, TritonError) else 500


class KServeRoutes:
    """Serves the KServe v2 protocol for `server`'s models (only those in
    `models` when it is given). A request body larger than `max_body_bytes`
    once decompressed is refused (400) without inflating the rest.

    Optional route groups: `shared_memory` (a
    ``shared_memory.SystemSharedMemory``: the shared-memory routes and
    tensors in regions), `model_repository` (index, load, unload),
    `logging` (/v2/logging), `generate` (generate and generate_stream),
    `trace` (answered 501: not served). `restricted_apis`: {group:
    (header, value)}, the binary's --http-restricted-api as
    ``restricted.parse_restrictions`` reads it.
    `header_forward_pattern`: request headers whose (lower-case) name
    matches this regular expression reach infer and generate requests as
    string parameters (the binary's --http-header-forward-pattern)."""

    def __init__(self, server: Server, models: Optional[Collection[str]] = None,
                 response_parameters: Optional[dict[str, Any]] = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, *,
                 shared_memory: Optional[SystemSharedMemory] = None, model_repository: bool = False,
                 logging: bool = False,
                 generate: bool = False, trace: bool = False,
                 restricted_apis: Optional[Mapping[str, tuple[str, str]]] = None,
                 header_forward_pattern: str = "") -> None:
        self._server = server
        self._models = frozenset(models) if models is not None else None
        # Added to every infer response's "parameters" (e.g. which replica answered).
        self._response_parameters = dict(response_parameters or {})
        self._max_body_bytes = checked_body_limit(max_body_bytes)
        self._shm = shared_memory
        self._model_repository = model_repository
        self._generate = generate
        self._trace = trace
        self._restricted = {group: (header.lower(), value)
                            for group, (header, value) in dict(restricted_apis or {}).items()}
        self._log_settings = LogSettings.of(server) if logging else None
        self._forward = compile_header_pattern(header_forward_pattern, "header_forward_pattern", re.IGNORECASE)

    @property
    def extensions(self) -> frozenset[str]:
        """The protocol extensions served (names as the core lists them)."""
        served = set(SERVED_EXTENSIONS)
        if self._shm is not None:
            served.add("system_shared_memory")
        if self._model_repository:
            served |= {"model_repository", "model_repository(unload_dependents)"}
        if self._log_settings is not None:
            served.add("logging")
        return frozenset(served)

    async def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer one HTTP request (`headers` with lower-case names)."""
        try:
            return await self._route(method.upper(), path, headers, body)
        except ProtocolError as error:
            return Reply.error(error.status, str(error))
        except TritonError as error:
            return Reply.error(status_of(error), network_text(error))

    def _check(self, category: str, headers: Mapping[str, str], method: str, *allowed: str) -> None:
        """The binary's checks of every route, in its order: the API
        restriction (403), then the method (405)."""
        rule = self._restricted.get(category)
        if rule is not None and headers.get(rule[0]) != rule[1]:
            raise ProtocolError(403, f"This API is restricted, expecting header '{rule[0]}'")
        if method not in allowed:
            raise ProtocolError(405, f"Method Not Allowed: this route takes {' or '.join(allowed)}, not {method}")

    async def _route(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        parts = [part for part in path.split("/") if part]
        if not parts or parts[0] != "v2":
            raise _no_route()
        if not self._serving():
            return Reply.error(503, "the server is not running")
        rest = parts[1:]
        if rest == [] or rest[0] == "health":
            self._check("metadata" if rest == [] else "health", headers, method, "GET")
            return self._server_route(rest)
        if rest[0] == "systemsharedmemory" and self._shm is not None:
            return self._system_shared_memory(rest[1:], method, headers, body)
        if rest[0] == "cudasharedmemory" and self._shm is not None:
            return self._cuda_shared_memory(rest[1:], method, headers, body)
        if rest[0] == "repository" and self._model_repository:
            return await self._repository(rest[1:], method, headers, body)
        if rest == ["logging"] and self._log_settings is not None:
            self._check("logging", headers, method, "GET", "POST")
            return self._log_settings_route(method, body)
        if rest == ["trace", "setting"] and self._trace:
            self._check("trace", headers, method, "GET", "POST")
            raise _trace_refused()
        if rest[0] != "models" or len(rest) < 2:
            raise _no_route()
        if rest == ["models", "stats"]:  # as in Triton, not a model named "stats"
            self._check("statistics", headers, method, "GET")
            return Reply.json(self._all_statistics())
        name, version, action = _model_path(rest[1:])
        if action in ("generate", "generate_stream") and self._generate:
            self._check("inference", headers, method, "POST")
            return await self._generate_route(self.model(name, version), headers, body, action == "generate_stream")
        if action == "trace/setting" and self._trace and version == -1:
            self._check("trace", headers, method, "GET", "POST")
            raise _trace_refused()
        if action == "infer":
            self._check("inference", headers, method, "POST")
            return await self._infer(self.model(name, version), headers, body)
        if action in ("", "ready", "config", "stats"):
            category = {"": "metadata", "ready": "health", "config": "model-config", "stats": "statistics"}[action]
            self._check(category, headers, method, "GET")
            model = self.model(name, version)
            if action == "":
                return Reply.json(model.metadata())
            if action == "ready":
                return Reply(200) if model.ready() else Reply.error(400, f"model '{name}' is not ready")
            if action == "config":
                return Reply.json(model.config())
            return Reply.json(model.statistics())
        raise _no_route()

    def _serving(self) -> bool:
        try:
            return self._server.live()
        except TritonError:
            return False

    def _server_route(self, rest: list[str]) -> Reply:
        if rest == []:
            metadata = self._server.metadata()
            served = self.extensions
            metadata["extensions"] = [e for e in metadata.get("extensions", []) if e in served]
            return Reply.json(metadata)
        if rest == ["health", "live"]:
            return Reply(200)
        if rest == ["health", "ready"]:
            return Reply(200) if self._server.ready() else Reply.error(400, "the server is not ready")
        raise _no_route()

    def model(self, name: str, version: int = -1) -> Model:
        """A served model (NotFoundError for one that is not served)."""
        if self._models is not None and name not in self._models:
            raise NotFoundError(f"unknown model '{name}': this endpoint serves {sorted(self._models)}")
        return self._server.model(name, version)

    def _all_statistics(self) -> dict[str, Any]:
        """Every served model's statistics (the core gives all models' for an
        empty model name)."""
        statistics = self._server.model("").statistics()
        if self._models is not None:
            statistics["model_stats"] = [s for s in statistics["model_stats"] if s.get("name") in self._models]
        return statistics

    async def _infer(self, model: Model, headers: Mapping[str, str], body: bytes) -> Reply:
        # The common binary request: native (fast_infer.py); None for anything else.
        fast = None if self._forwarded(headers) else await fast_infer.infer(
            model, body, headers.get(HEADER_LENGTH), headers.get("content-encoding"), self._max_body_bytes,
            self._response_parameters)
        if fast is not None:
            return _compressed(_infer_reply(*fast), headers.get("accept-encoding"))
        # The model first (an unknown one is a 404, a decoupled one a 501,
        # whatever the body; the binary's 501 says text/plain), then the body.
        if model._decoupled():
            return Reply(501, error_body(
                f"HTTP end point doesn't support models with decoupled transaction policy (model '{model.name}' "
                "sends any number of responses per request): "
                + ("stream it with POST .../generate_stream or gRPC's ModelStreamInfer" if self._generate
                   else "stream it through a DeploymentHandle instead")), {"content-type": "text/plain"})
        body = _decompress(headers.get("content-encoding"), body, self._max_body_bytes)
        # The regions the request names are in use until its reply is made
        # or it fails or is cancelled (the client left), on every path.
        regions = self._shm.uses() if self._shm is not None else None
        try:
            return await self._infer_decoded(model, headers, body, regions)
        finally:
            if regions is not None:
                regions.release()

    async def _infer_decoded(self, model: Model, headers: Mapping[str, str], body: bytes,
                             regions: Optional[RegionUses]) -> Reply:
        request = decode_request(body, parse_header_length(headers.get(HEADER_LENGTH)), regions)
        parameters = {**request.parameters, **self._forwarded(headers)}
        response = None
        responses = model.async_infer(
            inputs=request.inputs,
            parameters=parameters,
            request_id=request.request_id,
            output_names=request.output_names,
            output_memory_type="cpu",
            **request.fields,
        )
        try:
            async for response in responses:
                if response.outputs or response.error:
                    break
        finally:
            responses.cancel()  # a no-op once complete; cancels it when this task is cancelled
        if response is None:
            return Reply.error(500, f"model '{model.name}' sent no response")
        payload, header_length = encode_response(
            model.name, response.model_version, request, response.outputs,
            {**response.parameters, **self._response_parameters}, regions,
        )
        return _compressed(_infer_reply(payload, header_length), headers.get("accept-encoding"))

    def _forwarded(self, headers: Mapping[str, str]) -> dict[str, str]:
        """The request headers that header_forward_pattern forwards, as
        request parameters."""
        if self._forward is None:
            return {}
        return {name: value for name, value in headers.items() if self._forward.search(name)}

    # -- generate ------------------------------------------------------------
    async def _generate_route(self, model: Model, headers: Mapping[str, str], body: bytes, stream: bool) -> Reply:
        encoding = headers.get("content-encoding")
        if encoding not in (None, "", "identity"):
            raise bad_request("Unsupported content-encoding, only 'identity' is supported.")
        if len(body) > self._max_body_bytes:
            raise _too_large(self._max_body_bytes, "")
        request = decode_generate(model.name, body, model.metadata())
        decoupled = model._decoupled()
        responses = model.async_infer(inputs=request.inputs, parameters={**request.parameters,
                                                                         **self._forwarded(headers)},
                                      request_id=request.request_id, output_memory_type="cpu",
                                      raise_on_error=False)
        if not stream:
            documents: list[dict[str, Any]] = []
            try:
                async for response in responses:
                    if response.error is not None:  # the model's failure: 400, as the binary's generate
                        return Reply.error(400, str(response.error))
                    if response.outputs or not response.final or not decoupled:
                        documents.append(encode_generate(model.name, response.model_version, request.request_id,
                                                         response.outputs, response.parameters))
            finally:
                responses.cancel()
            if len(documents) != 1:
                raise InternalError(
                    f"generate expects model to produce exactly 1 response, use generate stream for model that "
                    f"generates various number of responses (model '{model.name}' sent {len(documents)})")
            return Reply.json(documents[0])
        # The first response decides the status, as in the binary: the
        # model's failure before anything was streamed is a 400 whose body
        # is that one error event.
        try:
            first = await responses.__anext__()
        except StopAsyncIteration:
            first = None
        except BaseException:
            responses.cancel()
            raise
        if first is not None and first.error is not None:
            responses.cancel()
            return Reply(400, _error_event(str(first.error)), dict(_EVENT_STREAM))
        return Reply(200, b"", dict(_EVENT_STREAM),
                     stream=_events(model, request.request_id, first, responses, decoupled))

    # -- system and CUDA shared memory ---------------------------------------
    def _system_shared_memory(self, rest: list[str], method: str, headers: Mapping[str, str],
                              body: bytes) -> Reply:
        region, action = _region_path(rest)
        self._check("shared-memory", headers, method, "GET" if action == "status" else "POST")
        registry = self._shm
        assert registry is not None  # routed here only with one
        if action == "status":
            return Reply.json(registry.status(region))
        if action == "unregister":
            registry.unregister(region)
            return Reply(200, b"", {"content-type": "application/json"})
        if not region:
            raise bad_request("'region name' is necessary to register system shared memory region")
        document = _json_object(body, "the shared memory register request")
        if "key" not in document:
            raise bad_request("Shared memory register request has no 'key' field")
        if "byte_size" not in document:
            raise bad_request("Shared memory register request has no 'byte_size' field")
        registry.register(region, document["key"], document.get("offset", 0), document["byte_size"])
        return Reply(200, b"", {"content-type": "application/json"})

    def _cuda_shared_memory(self, rest: list[str], method: str, headers: Mapping[str, str],
                            body: bytes) -> Reply:
        """As the binary on a host without GPUs: no region is ever
        registered, so the status is empty and unregistering does nothing;
        a register request is checked as the binary checks it, then refused
        with its words."""
        region, action = _region_path(rest)
        self._check("shared-memory", headers, method, "GET" if action == "status" else "POST")
        if action == "status":
            if region:
                raise NotFoundError(f"Unable to find cuda shared memory region: '{region}'")
            return Reply.json([])
        if action == "unregister":
            return Reply(200, b"", {"content-type": "application/json"})
        if not region:
            raise bad_request("'region name' is necessary to register cuda shared memory region")
        document = _json_object(body, "the shared memory register request")
        if "raw_handle" not in document:
            raise bad_request("Shared memory register request has no 'raw_handle' field")
        handle = document["raw_handle"]
        encoded = handle.get("b64") if isinstance(handle, dict) else None
        try:
            decoded = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
        except (binascii.Error, ValueError):
            decoded = b""
        if len(decoded) != CUDA_IPC_HANDLE_BYTES:
            raise bad_request("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
        raise bad_request(f"failed to register shared memory region: invalid args: {NO_CUDA_SHARED_MEMORY}")

    # -- model repository ----------------------------------------------------
    async def _repository(self, rest: list[str], method: str, headers: Mapping[str, str],
                          body: bytes) -> Reply:
        repository = ""
        if rest and rest[0] not in ("index", "models"):
            repository, rest = rest[0], rest[1:]
        if rest != ["index"] and not (len(rest) == 3 and rest[0] == "models" and rest[2] in ("load", "unload")):
            raise _no_route()
        self._check("model-repository", headers, method, "POST")
        if rest == ["index"]:
            document = _json_object(body, "the repository index request") if body.strip() else {}
            ready = document.get("ready", False)
            if not isinstance(ready, bool):
                raise bad_request("'ready' of the repository index request must be a boolean")
            return Reply.json(self._index(ready))
        if repository:
            raise UnsupportedError("'repository_name' specification is not supported")
        name = core_text("model name", rest[1])
        document = _json_object(body, f"the {rest[2]} request") if body.strip() else {}
        parameters = document.get("parameters", {})
        if not isinstance(parameters, dict):
            raise bad_request(f"'parameters' of the {rest[2]} request must be a JSON object")
        if rest[2] == "load":
            try:
                await asyncio.to_thread(self._server.load, name, _load_parameters(parameters) or None)
            except NotFoundError as error:  # the package's word for the core's "failed to poll": the binary's class
                raise InternalError(str(error)) from None
            except ValueError as error:  # Server.load's refusal of an argument (e.g. text with no UTF-8 form)
                raise bad_request(str(error)) from None
        else:
            dependents = parameters.get("unload_dependents", False)
            if not isinstance(dependents, bool):
                raise bad_request("Unable to parse 'unload_dependents': it must be a boolean")
            try:
                # Answered once the unload has begun (its requests in flight
                # then end in the background), as the binary answers.
                await asyncio.to_thread(self._server._begin_unload, name, dependents)
            except NotFoundError:
                pass  # a name neither in a repository nor loaded: the core (and the binary) accept it
        return Reply(200, b"", {"content-type": "application/json"})

    def _index(self, ready: bool) -> list[dict[str, Any]]:
        entries = []
        for (name, version), model in self._server.models(exclude_not_ready=ready).items():
            if self._models is not None and name not in self._models:
                continue
            entry: dict[str, Any] = {"name": name}
            if version >= 0:
                entry["version"] = str(version)
            if model.state:
                entry["state"] = model.state
            if model.reason:
                entry["reason"] = model.reason
            entries.append(entry)
        return entries

    # -- logging ---------------------------------------------------------------
    def _log_settings_route(self, method: str, body: bytes) -> Reply:
        """The core's log settings; a POST changes those it names (the
        binary's rules: log_file can not be changed, unknown keys are
        ignored, a null value changes nothing)."""
        assert self._log_settings is not None  # routed here only with them
        if method == "GET":
            return Reply.json(self._log_settings.get())
        document = _json_object(body, "the log settings request")
        changes = {key: value for key, value in document.items() if value is not None}
        return Reply.json(self._log_settings.update(changes) if changes else self._log_settings.get())


async def _events(model: Model, request_id: Optional[str], first: Any, responses: Any,
                  decoupled: bool) -> AsyncIterator[bytes]:
    """generate_stream's server-sent events: one "data: {...}" per
    response (an error as {"error": ...}), `first` first; closing it early
    cancels the request."""

    async def each() -> AsyncIterator[Any]:
        if first is None:
            return
        yield first
        async for more in responses:
            yield more

    try:
        async for response in each():
            if response.error is not None:
                yield _error_event(str(response.error))
                return
            if decoupled and response.final and not response.outputs:
                continue  # the flag-only final response
            try:
                document = encode_generate(model.name, response.model_version, request_id, response.outputs,
                                           response.parameters)
            except (ProtocolError, TritonError) as error:
                yield _error_event(str(error))
                return
            yield b"data: " + dump_json(document) + b"\n\n"
    finally:
        responses.cancel()


def _error_event(message: str) -> bytes:
    """generate_stream's error: one server-sent event {"error": ...}."""
    return b"data: " + error_body(message) + b"\n\n"


def _trace_refused() -> UnsupportedError:
    return UnsupportedError("trace is not supported by this server: its frontends do not trace requests "
                            "(use the server's statistics, GET /v2/models/stats, or metrics instead)")


def _region_path(rest: list[str]) -> tuple[str, str]:
    """(region or "", action) of a shared-memory path."""
    region = ""
    if rest[:1] == ["region"] and len(rest) == 3:
        region, rest = core_text("region name", rest[1]), rest[2:]
    if len(rest) != 1 or rest[0] not in ("status", "register", "unregister"):
        raise _no_route()
    return region, rest[0]


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    try:
        document = load_json(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise bad_request(f"{what} is not valid JSON: {error}") from None
    except RecursionError:
        raise bad_request(f"{what} nests too deeply") from None
    if not isinstance(document, dict):
        raise bad_request(f"{what} must be a JSON object")
    return document


def _load_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """A load request's parameters: "config" (a JSON string) and
    "file:<path>" (base64 content), as Server.load takes them."""
    loaded: dict[str, Any] = {}
    for key, value in parameters.items():
        if not isinstance(value, str):
            raise bad_request(f"load parameter '{key}' must be a string (config: JSON text; file:<path>: base64), "
                              f"not {type(value).__name__}")
        if key == "config":
            loaded[key] = value
        elif key.startswith("file:"):
            try:
                loaded[key] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as error:
                raise bad_request(f"load parameter '{key}' is not valid base64: {error}") from None
        else:
            raise bad_request(f"unknown load parameter '{key}' (one of: config, file:<path>)")
    return loaded


def _infer_reply(payload: bytes, header_length: Optional[int]) -> Reply:
    """An infer response: JSON alone, or JSON of `header_length` bytes and
    binary data."""
    if header_length is None:
        return Reply(200, payload, {"content-type": "application/json"})
    return Reply(200, payload, {"content-type": "application/octet-stream", HEADER_LENGTH: str(header_length)})


def _compressed(reply: Reply, accept_encoding: Optional[str]) -> Reply:
    """The reply compressed with the first of gzip and deflate that the
    client accepts (Accept-Encoding), as the binary does for infer."""
    encoding = _accepted(accept_encoding)
    if encoding is None:
        return reply
    if encoding == "gzip":
        compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    else:
        compressor = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS)
    body = compressor.compress(reply.body) + compressor.flush()
    return Reply(reply.status, body, {**reply.headers, "content-encoding": encoding})


def _accepted(accept_encoding: Optional[str]) -> Optional[str]:
    if not accept_encoding:
        return None
    for item in accept_encoding.split(","):
        token, _, weight = item.strip().partition(";")
        token = token.strip().lower()
        if token in ("gzip", "deflate") and weight.strip().replace(" ", "") not in ("q=0", "q=0.0", "q=0.00",
                                                                                    "q=0.000"):
            return token
    return None


def _no_route() -> ProtocolError:
    """A path that no route takes: the binary's 404, its text alone."""
    return ProtocolError(404, "Not Found")


def _model_path(parts: list[str]) -> tuple[str, int, str]:
    """name, version (-1: the server's choice) and action ('' for metadata)."""
    name, rest = core_text("model name", parts[0]), parts[1:]
    version = -1
    if rest[:1] == ["versions"]:
        if len(rest) < 2:
            raise _no_route()
        if not (rest[1].isascii() and rest[1].isdigit()):  # no route of the binary's matches: its 404
            raise _no_route()
        version = int(rest[1])
        if version >= 2**63:
            raise bad_request(f"model version {rest[1]} is out of range (at most 2**63 - 1)")
        rest = rest[2:]
    if rest == ["trace", "setting"]:
        return name, version, "trace/setting"
    if len(rest) > 1:
        raise _no_route()
    return name, version, rest[0] if rest else ""


def _decompress(encoding: Optional[str], body: bytes, limit: int) -> bytes:
    """The body, inflated; at most `limit` bytes are ever produced."""
    if encoding in (None, "", "identity"):
        if len(body) > limit:
            raise _too_large(limit, "")
        return body
    if encoding not in ("gzip", "deflate"):
        raise ProtocolError(501, f"Unsupported compression type: Content-Encoding {encoding!r} (gzip, deflate, "
                                 "identity)")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    try:
        inflated = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise bad_request(f"the {encoding} request body does not decompress: {error}") from None
    if len(inflated) > limit:
        raise _too_large(limit, f" once {encoding}-decompressed")
    if not inflater.eof:
        raise bad_request(f"the {encoding} request body is truncated: its compressed stream does not end")
    if inflater.unused_data:
        raise bad_request(f"the {encoding} request body has {len(inflater.unused_data)} bytes after its "
                          "compressed stream (one stream per body)")
    return inflated


def _too_large(limit: int, how: str) -> ProtocolError:
    return bad_request(
        f"the request body is larger than the limit of {limit} bytes{how}: send smaller requests, or raise "
        "the limit (KServeRoutes' max_body_bytes; TritonDeployment's bind(..., max_body_bytes=...))"
    )
