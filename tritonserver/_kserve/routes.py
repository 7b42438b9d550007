"""The KServe v2 HTTP routes of one embedded Server, independent of any web
framework: ``KServeRoutes.handle(method, path, headers, body)`` gives the
status, headers and body to send.

Routes: ``GET /v2``, ``GET /v2/health/live``, ``GET /v2/health/ready``,
``GET /v2/models/{name}[/versions/{v}]`` (metadata), ``.../ready``,
``.../config``, ``.../stats``, ``GET /v2/models/stats``, ``POST .../infer``.
``GET /v2`` lists only the protocol extensions these routes serve (not
shared memory, the model repository, trace, logging or classification).
Errors carry the protocol's body ``{"error": "..."}`` with 400 (bad request
or input, or a body over ``max_body_bytes``), 404 (unknown model or route),
405 (wrong method), 415 (unknown Content-Encoding), 503 (server or model not
ready) or 500.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping, Optional

from .._api._enums import ModelTxnPropertyFlag
from .._api._errors import (
    AlreadyExistsError,
    CancelledError,
    InvalidArgumentError,
    NotFoundError,
    TritonError,
    UnavailableError,
    UnsupportedError,
)
from .._api._model import Model
from .._api._server import Server
from . import fast_infer
from .codec import (
    ProtocolError,
    bad_request,
    core_text,
    decode_request,
    encode_response,
    error_body,
    parse_header_length,
)

HEADER_LENGTH = "inference-header-content-length"

# The largest request body, after decompression: Triton's own HTTP
# endpoint's default (--http-max-input-size, 64 MiB).
DEFAULT_MAX_BODY_BYTES = 64 * 2**20

# The protocol extensions these routes serve, of those the core lists:
# binary tensors, parameters, sequence and priority/timeout parameters,
# the config and statistics routes.
SERVED_EXTENSIONS = frozenset(
    ("binary_tensor_data", "parameters", "sequence", "schedule_policy", "model_configuration", "statistics")
)

# Triton error class -> HTTP status (anything else is a 500).
_STATUS = (
    (CancelledError, 499),
    (InvalidArgumentError, 400),
    (UnsupportedError, 400),
    (NotFoundError, 404),
    (AlreadyExistsError, 409),
    (UnavailableError, 503),
)


@dataclass
class Reply:
    """An HTTP response to send."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def json(document: Any, status: int = 200) -> "Reply":
        return Reply(status, json.dumps(document).encode("utf-8"), {"content-type": "application/json"})

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
    return 500


class KServeRoutes:
    """Serves the KServe v2 protocol for `server`'s models (only those in
    `models` when it is given). A request body larger than `max_body_bytes`
    once decompressed is refused (400) without inflating the rest."""

    def __init__(self, server: Server, models: Optional[Collection[str]] = None,
                 response_parameters: Optional[dict[str, Any]] = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self._server = server
        self._models = frozenset(models) if models is not None else None
        # Added to every infer response's "parameters" (e.g. which replica answered).
        self._response_parameters = dict(response_parameters or {})
        self._max_body_bytes = checked_body_limit(max_body_bytes)

    async def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer one HTTP request (`headers` with lower-case names)."""
        try:
            return await self._route(method.upper(), path, headers, body)
        except ProtocolError as error:
            return Reply.error(error.status, str(error))
        except TritonError as error:
            return Reply.error(status_of(error), str(error))

    async def _route(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Reply:
        parts = [part for part in path.split("/") if part]
        if not parts or parts[0] != "v2":
            return Reply.error(404, f"no route for {path!r}: the KServe v2 routes start with /v2")
        if not self._serving():
            return Reply.error(503, "the server is not running")
        rest = parts[1:]
        if rest == [] or rest[0] == "health":
            _require(method, "GET", path)
            return self._server_route(rest, path)
        if rest[0] != "models" or len(rest) < 2:
            return Reply.error(404, f"no route for {path!r}")
        if rest == ["models", "stats"]:  # as in Triton, not a model named "stats"
            _require(method, "GET", path)
            return Reply.json(self._all_statistics())
        name, version, action = _model_path(rest[1:], path)
        model = self.model(name, version)
        if action == "infer":
            _require(method, "POST", path)
            return await self._infer(model, headers, body)
        _require(method, "GET", path)
        if action == "":
            return Reply.json(model.metadata())
        if action == "ready":
            return Reply(200) if model.ready() else Reply.error(503, f"model '{name}' is not ready")
        if action == "config":
            return Reply.json(model.config())
        if action == "stats":
            return Reply.json(model.statistics())
        return Reply.error(404, f"no route for {path!r}")

    def _serving(self) -> bool:
        try:
            return self._server.live()
        except TritonError:
            return False

    def _server_route(self, rest: list[str], path: str) -> Reply:
        if rest == []:
            metadata = self._server.metadata()
            metadata["extensions"] = [e for e in metadata.get("extensions", []) if e in SERVED_EXTENSIONS]
            return Reply.json(metadata)
        if rest == ["health", "live"]:
            return Reply(200)
        if rest == ["health", "ready"]:
            return Reply(200) if self._server.ready() else Reply.error(503, "the server is not ready")
        return Reply.error(404, f"no route for {path!r}")

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
        fast = await fast_infer.infer(model, body, headers.get(HEADER_LENGTH), headers.get("content-encoding"),
                                      self._max_body_bytes, self._response_parameters)
        if fast is not None:
            return _infer_reply(*fast)
        body = _decompress(headers.get("content-encoding"), body, self._max_body_bytes)
        request = decode_request(body, parse_header_length(headers.get(HEADER_LENGTH)))
        if model.transaction_properties() & ModelTxnPropertyFlag.DECOUPLED:
            raise bad_request(
                f"model '{model.name}' is decoupled (any number of responses per request); "
                "the infer route needs exactly one: stream it through a DeploymentHandle instead"
            )
        response = None
        async for response in model.async_infer(
            inputs=request.inputs,
            parameters=request.parameters,
            request_id=request.request_id,
            output_names=request.output_names,
            output_memory_type="cpu",
            **request.fields,
        ):
            if response.outputs or response.error:
                break
        if response is None:
            return Reply.error(500, f"model '{model.name}' sent no response")
        payload, header_length = encode_response(
            model.name, response.model_version, request, response.outputs,
            {**response.parameters, **self._response_parameters},
        )
        return _infer_reply(payload, header_length)


def _infer_reply(payload: bytes, header_length: Optional[int]) -> Reply:
    """An infer response: JSON alone, or JSON of `header_length` bytes and
    binary data."""
    if header_length is None:
        return Reply(200, payload, {"content-type": "application/json"})
    return Reply(200, payload, {"content-type": "application/octet-stream", HEADER_LENGTH: str(header_length)})


def _require(method: str, expected: str, path: str) -> None:
    if method != expected:
        raise ProtocolError(405, f"{path!r} takes {expected}, not {method}")


def _model_path(parts: list[str], path: str) -> tuple[str, int, str]:
    """name, version (-1: the server's choice) and action ('' for metadata)."""
    name, rest = core_text("model name", parts[0]), parts[1:]
    version = -1
    if rest[:1] == ["versions"]:
        if len(rest) < 2:
            raise ProtocolError(404, f"no route for {path!r}")
        if not (rest[1].isascii() and rest[1].isdigit()):
            raise bad_request(f"model version {rest[1]!r} is not a non-negative integer")
        version = int(rest[1])
        if version >= 2**63:
            raise bad_request(f"model version {rest[1]} is out of range (at most 2**63 - 1)")
        rest = rest[2:]
    if len(rest) > 1:
        raise ProtocolError(404, f"no route for {path!r}")
    return name, version, rest[0] if rest else ""


def _decompress(encoding: Optional[str], body: bytes, limit: int) -> bytes:
    """The body, inflated; at most `limit` bytes are ever produced."""
    if encoding in (None, "", "identity"):
        if len(body) > limit:
            raise _too_large(limit, "")
        return body
    if encoding not in ("gzip", "deflate"):
        raise ProtocolError(415, f"Content-Encoding {encoding!r} is not supported (gzip, deflate)")
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
