"""`KServeGrpc`: Triton's GRPCInferenceService and grpc.health.v1 for an
embedded Server, on grpc.aio running on a LoopThread of its own, or on the
extension's native gRPC transport (_native_grpc.py) feeding the same
servicer on such a loop (the protocol logic is
tritonserver._kserve.grpc_service's)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any, Optional

from .._api._errors import InvalidArgumentError, UnavailableError
from .._api._server import Server
from .._kserve.grpc_service import INSTALL_HINT, GrpcInferenceService, generated_modules, grpc_module
from .._kserve.header_pattern import compile_header_pattern
from .._kserve.restricted import parse_restrictions
from ._asgi_server import listening_socket
from ._frontend import Frontend
from ._loop_thread import LoopThread
from . import _native_grpc as native_grpc
from ._option_checks import check_address, check_bool, check_int, check_port, check_str

# The binary's message size limit, both ways (MAX_GRPC_MESSAGE_SIZE: INT32_MAX).
MAX_MESSAGE_BYTES = 2**31 - 1
# How long stop() lets RPCs in flight finish before cancelling them.
GRACEFUL_STOP_SECONDS = 30.0
# The binary's prefix of a restricted protocol's header key.
RESTRICTED_HEADER_PREFIX = "triton-grpc-protocol-"
_INT32_MAX = 2**31 - 1


class _CompressionLevel(IntEnum):
    """grpc_compression_level, as tritonfrontend's Grpc_compression_level."""

    NONE = 0
    LOW = 1
    MED = 2
    HIGH = 3
    COUNT = 4


def _health_modules() -> tuple[Any, Any]:
    try:
        from grpc_health.v1 import health_pb2, health_pb2_grpc  # type: ignore[import-untyped]
    except ImportError as error:
        raise ImportError(f"KServeGrpc needs grpcio-health-checking ({error}): {INSTALL_HINT}") from None
    return health_pb2, health_pb2_grpc


class KServeGrpc(Frontend):
    """Serves `server` over Triton's gRPC protocol at address:port (and the
    standard grpc.health.v1 Check: SERVING while the server is ready)."""

    Grpc_compression_level = _CompressionLevel

    @dataclass
    class Options:
        """tritonfrontend's KServeGrpc.Options, with the binary's defaults,
        and `restricted_protocols`: a list of the binary's
        --grpc-restricted-protocol values, "<groups>:<key>=<value>" (the
        groups' RPCs then need the request header
        ``triton-grpc-protocol-<key>: <value>``). `infer_thread_count`,
        `infer_allocation_pool_size` and `max_response_pool_size` are
        accepted and have no effect (one event loop serves every RPC;
        responses are not pooled).

        `infer_compression_level` (LOW, MED, HIGH): infer responses
        compressed, as the binary compresses them, with an algorithm the
        client accepts (its grpc-accept-encoding) of gzip and deflate, LOW
        the first, MED the middle one, HIGH the last (grpc's choice; grpcio's
        transport always gzip); a client that accepts neither gets them
        uncompressed. Compressed requests (gzip, deflate) are served
        whatever the level.

        `transport` (this package's): "native" (the extension's own, on
        nghttp2: no TLS, the keepalive and connection-age options at their
        defaults; `infer_thread_count` is its number of I/O threads) or
        "grpcio" (grpc.aio's server). None, the default, picks native where
        the build has it and no option needs grpcio (TLS, keepalive or
        connection-age settings), else grpcio; the chosen one is then in
        `transport`."""

        address: str = "0.0.0.0"
        port: int = 8001
        reuse_port: bool = False
        use_ssl: bool = False
        server_cert: str = ""
        server_key: str = ""
        root_cert: str = ""
        use_mutual_auth: bool = False
        keepalive_time_ms: int = 7_200_000
        keepalive_timeout_ms: int = 20_000
        keepalive_permit_without_calls: bool = False
        http2_max_pings_without_data: int = 2
        http2_min_recv_ping_interval_without_data_ms: int = 300_000
        http2_max_ping_strikes: int = 2
        max_connection_age_ms: int = 0
        max_connection_age_grace_ms: int = 0
        infer_compression_level: _CompressionLevel = _CompressionLevel.NONE
        infer_thread_count: int = 2
        infer_allocation_pool_size: int = 8
        max_response_pool_size: int = 2_147_483_647
        forward_header_pattern: str = ""
        restricted_protocols: list[Any] = field(default_factory=list)
        transport: Optional[str] = None

        def __post_init__(self) -> None:
            check_address(self)
            check_port(self)
            for name in ("reuse_port", "use_ssl", "use_mutual_auth", "keepalive_permit_without_calls"):
                check_bool(self, name)
            for name in ("server_cert", "server_key", "root_cert", "forward_header_pattern"):
                check_str(self, name)
            for name in ("keepalive_time_ms", "keepalive_timeout_ms", "http2_max_pings_without_data",
                         "http2_min_recv_ping_interval_without_data_ms", "http2_max_ping_strikes",
                         "max_connection_age_ms", "max_connection_age_grace_ms", "infer_allocation_pool_size"):
                check_int(self, name, 0, _INT32_MAX)
            for name in ("infer_thread_count", "max_response_pool_size"):
                check_int(self, name, 1, _INT32_MAX)
            try:
                self.infer_compression_level = _CompressionLevel(self.infer_compression_level)
            except ValueError:
                raise InvalidArgumentError(
                    f"KServeGrpc.Options.infer_compression_level must be a KServeGrpc.Grpc_compression_level "
                    f"(NONE, LOW, MED or HIGH), not {self.infer_compression_level!r}") from None
            if self.infer_compression_level == _CompressionLevel.COUNT:
                raise InvalidArgumentError(
                    "KServeGrpc.Options.infer_compression_level must be NONE, LOW, MED or HIGH, not COUNT")
            if self.use_ssl and not (self.server_cert and self.server_key):
                raise InvalidArgumentError(
                    "KServeGrpc.Options: use_ssl needs server_cert and server_key (paths of PEM files)")
            if self.use_mutual_auth and not (self.use_ssl and self.root_cert):
                raise InvalidArgumentError(
                    "KServeGrpc.Options: use_mutual_auth needs use_ssl and root_cert (a PEM file of the client "
                    "certificates' authority)")
            compile_header_pattern(self.forward_header_pattern, "KServeGrpc.Options.forward_header_pattern")
            if self.transport is None:
                self.transport = "grpcio" if self._native_refusal() else "native"
            check_str(self, "transport")
            if self.transport not in ("grpcio", "native"):
                raise InvalidArgumentError(
                    f"KServeGrpc.Options.transport {self.transport!r} is not one of 'grpcio', 'native'")
            if self.transport == "native":
                refusal = self._native_refusal()
                if refusal:
                    raise InvalidArgumentError(refusal)
            self.restrictions = parse_restrictions(
                self.restricted_protocols, "KServeGrpc.Options.restricted_protocols", "protocol", RESTRICTED_HEADER_PREFIX)

        def _native_refusal(self) -> str:
            """Why the native transport cannot serve these options (what it
            would ignore otherwise), or ""."""
            if not native_grpc.available():
                return ("KServeGrpc.Options.transport 'native': this build of the package has no native gRPC "
                        "transport (built with TRITONSERVER_NATIVE_GRPC=OFF): use transport='grpcio'")
            if self.use_ssl or self.use_mutual_auth:
                return ("KServeGrpc.Options: use_ssl is not served by transport='native' (no TLS): use "
                        "transport='grpcio'")
            defaults = {f.name: f.default for f in fields(self)}
            for name in ("keepalive_time_ms", "keepalive_timeout_ms", "keepalive_permit_without_calls",
                         "http2_max_pings_without_data", "http2_min_recv_ping_interval_without_data_ms",
                         "http2_max_ping_strikes", "max_connection_age_ms", "max_connection_age_grace_ms"):
                if getattr(self, name) != defaults[name]:
                    return (f"KServeGrpc.Options.{name} {getattr(self, name)!r} is not served by transport='native' "
                            f"(its keepalive and connection age are fixed): use transport='grpcio', or leave {name} "
                            f"at {defaults[name]!r}")
            return ""

    def __init__(self, server: Server, options: Optional["KServeGrpc.Options"] = None) -> None:
        super().__init__(server, options)
        self._thread = LoopThread("tritonserver-grpc")
        self._grpc_server: Any = None
        self._native: Optional[native_grpc.NativeGrpcServer] = None
        self.port: Optional[int] = None

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> None:
        """Listens on address:port and returns once serving
        (UnavailableError naming address:port when it cannot listen)."""
        if self._grpc_server is not None or self._native is not None:
            return
        grpc = grpc_module()
        generated_modules()
        _health_modules()
        if self.options.transport == "native":
            self._start_native()
            return
        credentials = self._credentials(grpc) if self.options.use_ssl else None
        if self.options.port:
            # A port in use is found here, before grpc tries it: a grpc
            # server whose bind failed leaves grpc's fork handlers in a state
            # in which a later fork (a python model's stub starting) aborts
            # the process ("Check failed: is_forking != was_forking").
            listening_socket("KServeGrpc", self.options.address, self.options.port, self.options.reuse_port).close()
        self._thread.start()
        try:
            self._grpc_server, self.port = self._thread.run(self._serve(grpc, credentials))
        except BaseException:
            self._thread.stop()
            raise

    def _start_native(self) -> None:
        o = self.options
        self._thread.start()
        try:
            methods, service = self._thread.run(self._native_methods())
            native_infer = ((self._server._started(), service.native_error, service.native_stream_error)
                            if service.native_infer_enabled() else None)
            native = native_grpc.NativeGrpcServer("KServeGrpc", methods, o.address, o.port, o.reuse_port,
                                                  o.infer_thread_count, MAX_MESSAGE_BYTES, self._thread, native_infer,
                                                  int(o.infer_compression_level))
            native.start()
        except BaseException:
            self._thread.stop()
            raise
        self._native = native
        self.port = native.port

    async def _native_methods(self) -> tuple[dict[str, native_grpc.Method], GrpcInferenceService]:
        o = self.options
        service_pb2, _, _ = generated_modules()
        health_pb2, _ = _health_modules()
        service = GrpcInferenceService(self._server, o.restrictions, o.forward_header_pattern, None)
        methods = native_grpc.service_methods(
            service, service_pb2.DESCRIPTOR.services_by_name["GRPCInferenceService"], service_pb2)
        methods.update(native_grpc.service_methods(
            _Health(self._server, service, health_pb2), health_pb2.DESCRIPTOR.services_by_name["Health"],
            health_pb2))
        return methods, service

    async def _serve(self, grpc: Any, credentials: Any) -> tuple[Any, int]:
        o = self.options
        _, service_grpc, _ = generated_modules()
        health_pb2, health_pb2_grpc = _health_modules()
        compression = grpc.Compression.Gzip if o.infer_compression_level != _CompressionLevel.NONE else None
        service = GrpcInferenceService(self._server, o.restrictions, o.forward_header_pattern, compression)
        server = grpc.aio.server(options=self._channel_options())
        service_grpc.add_GRPCInferenceServiceServicer_to_server(service, server)
        health_pb2_grpc.add_HealthServicer_to_server(_Health(self._server, service, health_pb2), server)
        where = f"{o.address}:{o.port}" if ":" not in o.address else f"[{o.address}]:{o.port}"
        try:
            port = (server.add_secure_port(where, credentials) if credentials is not None
                    else server.add_insecure_port(where))
        except RuntimeError as error:
            port, cause = 0, str(error)
        else:
            cause = ""
        if not port:
            await server.stop(None)
            raise UnavailableError(
                f"KServeGrpc: cannot listen on {o.address}:{o.port}{': ' + cause if cause else ''} (the port is "
                "in use or the address is not one of this host's: choose another, or stop the server holding it)")
        await server.start()
        return server, port

    def _channel_options(self) -> list[tuple[str, Any]]:
        o = self.options
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 1 if o.reuse_port else 0),
            ("grpc.keepalive_time_ms", o.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", o.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", int(o.keepalive_permit_without_calls)),
            ("grpc.http2.max_pings_without_data", o.http2_max_pings_without_data),
            ("grpc.http2.min_ping_interval_without_data_ms", o.http2_min_recv_ping_interval_without_data_ms),
            ("grpc.http2.max_ping_strikes", o.http2_max_ping_strikes),
        ]
        if o.max_connection_age_ms:
            options.append(("grpc.max_connection_age_ms", o.max_connection_age_ms))
        if o.max_connection_age_grace_ms:
            options.append(("grpc.max_connection_age_grace_ms", o.max_connection_age_grace_ms))
        return options

    def _credentials(self, grpc: Any) -> Any:
        o = self.options

        def read(what: str, path: str) -> bytes:
            try:
                with open(path, "rb") as file:
                    return file.read()
            except OSError as error:
                raise InvalidArgumentError(
                    f"KServeGrpc.Options.{what}: cannot read {path!r}: {error.strerror}") from None

        pair = [(read("server_key", o.server_key), read("server_cert", o.server_cert))]
        root = read("root_cert", o.root_cert) if o.root_cert else None
        return grpc.ssl_server_credentials(pair, root_certificates=root,
                                           require_client_auth=o.use_mutual_auth)

    def stop(self) -> None:
        """Stops listening and lets RPCs in flight finish (at most
        GRACEFUL_STOP_SECONDS; the rest are cancelled, cancelling their
        requests in the core)."""
        if self._native is not None:
            try:
                self._native.stop(GRACEFUL_STOP_SECONDS)
            finally:
                self._thread.stop()
                self._native = None
            return
        server = self._grpc_server
        if server is None:
            return
        try:
            self._thread.run(server.stop(GRACEFUL_STOP_SECONDS))
        finally:
            self._thread.stop()
            self._grpc_server = None


class _Health:
    """grpc.health.v1.Health's Check, as the binary answers it: SERVING
    while the server is ready, NOT_SERVING otherwise, whatever service is
    named (Watch is not served, as in the binary)."""

    def __init__(self, server: Server, service: GrpcInferenceService, health_pb2: Any) -> None:
        self._server = server
        self._service = service
        self._pb = health_pb2

    async def Check(self, request: Any, context: Any) -> Any:
        await self._service.check_restriction("health", context)
        status = self._pb.HealthCheckResponse
        try:
            ready = self._server.ready()
        except Exception:
            ready = False
        return status(status=status.SERVING if ready else status.NOT_SERVING)

    async def Watch(self, request: Any, context: Any) -> Any:
        await context.abort(grpc_module().StatusCode.UNIMPLEMENTED, "Watch is not served: call Check")
        yield  # an async generator, as a server-streaming handler is
