"""KServeGrpc's native transport (``Options(transport="native")``): the
extension's gRPC server (cpp/grpc_transport.h: nghttp2 on epoll, a few
I/O threads) in front of the same servicer as the grpcio transport
(tritonserver._kserve.grpc_service.GrpcInferenceService) and the health
Check. Each call's messages are handed to a LoopThread, decoded there with
tritonclient's generated modules, and its answer written back by the
extension; a client that resets a call or leaves cancels it, as with grpcio."""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import threading
from typing import Any, AsyncIterator, Callable, Optional

from .. import _native
from ._asgi_server import listening_socket
from ._io_threads import start_io_threads
from ._loop_thread import LoopThread

_logger = logging.getLogger("tritonserver.frontend")

# grpc-status codes (grpc.StatusCode's numbers) the transport words itself.
OK, CANCELLED, UNKNOWN, INTERNAL, UNIMPLEMENTED = 0, 1, 2, 13, 12


def available() -> bool:
    """Whether this build of the extension has the native transport (the
    CMake option TRITONSERVER_NATIVE_GRPC)."""
    return hasattr(_native, "GrpcTransport")


class Abort(Exception):
    """What ServicerContext.abort raises: the call ends with `code`."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


def _code_number(code: Any) -> int:
    """A grpc.StatusCode's number (or a number)."""
    value = getattr(code, "value", code)
    return int(value[0] if isinstance(value, tuple) else value)


class Context:
    """What the servicer uses of grpc.aio's ServicerContext, and `in_turn`:
    the servicer says of each ModelStreamInfer message it yields whether
    it answers in its request's turn (a model that is not decoupled), so
    that the transport writes it after the answers of the stream's earlier
    requests that it serves itself (cpp/grpc_transport.cc)."""

    __slots__ = ("_metadata", "in_turn")

    def __init__(self, metadata: tuple[tuple[str, Any], ...]) -> None:
        self._metadata = metadata
        self.in_turn = False

    def invocation_metadata(self) -> tuple[tuple[str, Any], ...]:
        return self._metadata

    async def abort(self, code: Any, details: str = "") -> None:
        raise Abort(_code_number(code), details)

    def set_compression(self, compression: Any) -> None:
        # the transport compresses infer responses itself, at the level it was given
        raise RuntimeError("the native gRPC transport compresses infer responses at its compression_level")


class Method:
    """One RPC: its handler, request type, and whether it streams."""

    __slots__ = ("handler", "request_type", "streaming")

    def __init__(self, handler: Callable[..., Any], request_type: Any, streaming: bool) -> None:
        self.handler, self.request_type, self.streaming = handler, request_type, streaming


def service_methods(service: Any, descriptor: Any, module: Any) -> dict[str, Method]:
    """path -> Method for each RPC of a service `descriptor` that `service`
    implements (its request types from the generated `module`)."""
    methods = {}
    for method in descriptor.methods:
        handler = getattr(service, method.name, None)
        if handler is None:
            continue
        if method.server_streaming != method.client_streaming:
            continue  # none in these services: served as unimplemented
        methods[f"/{descriptor.full_name}/{method.name}"] = Method(
            handler, getattr(module, method.input_type.name), method.client_streaming)
    return methods


class _Call:
    """A call in flight: its messages so far, then its task."""

    __slots__ = ("method", "metadata", "messages", "queue", "task")

    def __init__(self, method: Method, metadata: tuple[tuple[str, Any], ...]) -> None:
        self.method = method
        self.metadata = metadata
        self.messages: list[bytes] = []
        self.queue: Optional[asyncio.Queue[Optional[bytes]]] = None
        self.task: Optional[asyncio.Task[None]] = None


def _metadata(pairs: list[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """Metadata as grpcio gives it: binary ("-bin") values decoded from base64."""
    out = []
    for key, value in pairs:
        if isinstance(value, bytes):
            try:
                value = base64.b64decode(value + b"=" * (-len(value) % 4))
            except ValueError:
                pass
        out.append((key, value))
    return tuple(out)


class NativeGrpcServer:
    """`methods` (path -> Method) served on address:port by the native
    transport until `stop()`; messages over `max_message` bytes are refused
    (compressed ones, gzip or deflate, too once decompressed).
    `compression_level` (the binary's grpc_compression_level: 0 NONE, 1
    LOW, 2 MED, 3 HIGH): infer responses compressed with an algorithm the
    client accepts, as the binary compresses them (cpp/grpc_compression.h).
    With `native_infer` (the native Server, and the servicer's
    native_error and native_stream_error), the plain ModelInfer is served on the I/O thread and
    answered from Triton's (cpp/grpc_transport.cc): its protobuf read
    (cpp/model_infer_request.h) and its answer written
    (cpp/infer_response_message.h) natively; native_error words a core
    error; so is each plain message of a ModelStreamInfer to a model that
    is not decoupled (native_stream_error words its errors), the stream's
    status waiting for their answers. Any other call, and a message that
    path declines, goes to `methods`."""

    def __init__(self, what: str, methods: dict[str, Method], address: str, port: int, reuse_port: bool,
                 io_threads: int, max_message: int, loop_thread: LoopThread,
                 native_infer: Optional[tuple[Any, Any, Any]] = None, compression_level: int = 0) -> None:
        self._native_infer = native_infer
        self._what = what
        self._methods = methods
        self._address = address
        self._requested_port = port
        self._reuse_port = reuse_port
        self._io_threads = io_threads
        self._max_message = max_message
        self._compression_level = compression_level
        self._loop_thread = loop_thread
        self._transport: Any = None
        self._threads: list[threading.Thread] = []
        # The loop thread's own: the calls of each connection, by stream.
        self._calls: dict[int, dict[int, _Call]] = {}
        self.port: Optional[int] = None

    def start(self) -> None:
        """Listens (the loop thread is started by the caller)."""
        if self._transport is not None:
            return
        sock = listening_socket(self._what, self._address, self._requested_port, self._reuse_port)
        port = sock.getsockname()[1]
        post: Any = self._loop_thread.loop.call_soon_threadsafe
        self._transport = transport = _native.GrpcTransport(
            sock.detach(), self._io_threads, self._max_message, self._compression_level,
            functools.partial(post, self._dispatch_all),
            functools.partial(post, self._closed))
        if self._native_infer is not None:
            transport.enable_infer(*self._native_infer)
        self._threads = start_io_threads(self._what, transport)
        self.port = port

    @property
    def native_infers(self) -> int:
        """How many ModelInfer calls took the native path."""
        return int(self._transport.native_infers) if self._transport is not None else 0

    @property
    def native_stream_infers(self) -> int:
        """How many ModelStreamInfer messages took the native path."""
        return int(self._transport.native_stream_infers) if self._transport is not None else 0

    def stop(self, grace_s: float) -> None:
        """Stops listening, lets calls in flight finish (up to `grace_s`),
        then cancels the rest and closes the connections and the threads."""
        transport = self._transport
        if transport is None:
            return
        try:
            if not transport.stop(grace_s):
                _logger.warning("%s: calls still in flight after %s s were cancelled at stop", self._what, grace_s)
            for thread in self._threads:
                thread.join()
            transport.close_all()
            self._loop_thread.run(self._cancel_all())
        finally:
            self._transport = None
            self._threads = []

    # On the loop thread.

    async def _cancel_all(self) -> None:
        for connection in list(self._calls):
            self._closed(connection)

    def _dispatch_all(self, connection: int, events: list[tuple[Any, ...]]) -> None:
        """What one read of `connection` brought, per stream."""
        for event in events:
            self._dispatch(connection, *event)

    def _dispatch(self, connection: int, stream: int, path: Optional[str], metadata: Optional[list[tuple[str, Any]]],
                  messages: list[bytes], ended: bool, cancelled: bool) -> None:
        calls = self._calls.get(connection)
        if path is not None:
            method = self._methods.get(path)
            if method is None:
                self._transport.finish(connection, stream, UNIMPLEMENTED, f"Method not found: {path}")
                return
            if calls is None:
                calls = self._calls[connection] = {}
            call = calls[stream] = _Call(method, _metadata(metadata or []))
            if method.streaming:
                call.queue = asyncio.Queue()
                call.task = asyncio.ensure_future(self._serve_stream(connection, stream, call))
                call.task.add_done_callback(functools.partial(self._forget, connection, stream))
        else:
            known = calls.get(stream) if calls is not None else None
            if known is None:
                return  # a call the transport or this server answered already
            call = known
        if cancelled:
            self._cancel(connection, stream, call)
            return
        if call.queue is not None:
            for message in messages:
                call.queue.put_nowait(message)
            if ended:
                call.queue.put_nowait(None)
            return
        call.messages.extend(messages)
        if ended:
            call.task = asyncio.ensure_future(self._serve_unary(connection, stream, call))
            call.task.add_done_callback(functools.partial(self._forget, connection, stream))

    def _cancel(self, connection: int, stream: int, call: _Call) -> None:
        if call.task is not None:
            call.task.cancel()
        else:
            self._forget(connection, stream, None)

    def _forget(self, connection: int, stream: int, _task: Optional[asyncio.Task[None]]) -> None:
        calls = self._calls.get(connection)
        if calls is not None:
            calls.pop(stream, None)
            if not calls:
                del self._calls[connection]

    def _closed(self, connection: int) -> None:
        for stream, call in list(self._calls.get(connection, {}).items()):
            self._cancel(connection, stream, call)

    def _finish_error(self, connection: int, stream: int, error: BaseException) -> None:
        if isinstance(error, Abort):
            self._transport.finish(connection, stream, error.code, error.details)
        else:
            _logger.error("%s: a call failed", self._what, exc_info=error)
            self._transport.finish(connection, stream, UNKNOWN,
                                   f"Unexpected error in the service: {type(error).__name__}: {error}")

    async def _serve_unary(self, connection: int, stream: int, call: _Call) -> None:
        transport = self._transport
        if len(call.messages) != 1:
            transport.finish(connection, stream, INTERNAL if call.messages else UNIMPLEMENTED,
                             f"a unary call takes one request message, not {len(call.messages)}")
            return
        try:
            request = call.method.request_type.FromString(call.messages[0])
        except Exception as error:  # noqa: BLE001 - google.protobuf's DecodeError
            transport.finish(connection, stream, INTERNAL, f"the request message cannot be parsed: {error}")
            return
        call.messages = []
        try:
            response = await call.method.handler(request, Context(call.metadata))
        except asyncio.CancelledError:
            return  # the client left or reset the call
        except BaseException as error:  # noqa: BLE001 - a bug here must not take the server down
            self._finish_error(connection, stream, error)
            return
        transport.reply(connection, stream, response.SerializeToString())

    async def _serve_stream(self, connection: int, stream: int, call: _Call) -> None:
        transport = self._transport
        assert call.queue is not None
        requests = self._requests(call.queue, call.method.request_type, functools.partial(transport.taken, connection,
                                                                                           stream))
        context = Context(call.metadata)
        responses = call.method.handler(requests, context)
        try:
            async for response in responses:
                if transport.send(connection, stream, response.SerializeToString(), context.in_turn):
                    await _drained(transport, connection, stream)
        except asyncio.CancelledError:
            return
        except BaseException as error:  # noqa: BLE001
            self._finish_error(connection, stream, error)
            return
        finally:
            await responses.aclose()
        transport.finish(connection, stream, OK, "")

    @staticmethod
    async def _requests(queue: "asyncio.Queue[Optional[bytes]]", request_type: Any,
                        taken: Callable[[int], None]) -> AsyncIterator[Any]:
        """The call's request messages as the handler reads them; each one
        read gives its window back to the client (`taken`)."""
        while True:
            message = await queue.get()
            if message is None:
                return
            taken(len(message))
            try:
                request = request_type.FromString(message)
            except Exception as error:  # noqa: BLE001
                raise Abort(INTERNAL, f"a request message cannot be parsed: {error}") from None
            yield request


async def _drained(transport: Any, connection: int, stream: int) -> None:
    """Returns once the stream's output no longer backs up (its client reads
    again, or it is gone). Only a client that does not read its responses
    makes a call wait here; looked at every few milliseconds meanwhile."""
    delay = 0.001
    while transport.backed_up(connection, stream):
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.01)
