// The native gRPC transport of KServeGrpc (Options.transport="native";
// tritonserver/frontend/_native_grpc.py): HTTP/2 by nghttp2 on the shared
// socket server (cpp/socket_server.h), gRPC's framing here: each call's
// request headers and whole messages (the 5-byte prefix taken off) are
// handed to Python (a callable, usually the frontend loop's
// call_soon_threadsafe), once per read of a connection, as (connection,
// [(stream, path, metadata, messages, ended, cancelled), ...]); its messages and its status (trailers grpc-status, grpc-message)
// come back from any thread by (connection, stream). Protobuf stays in
// Python, but for the plain ModelInfer (a model that is not decoupled) and
// the plain messages of a ModelStreamInfer (no triton_grpc_error; a
// decoupled model's every response too), which the transport reads,
// submits and answers itself (a stream's status from Python waits for
// their answers).
//
// What the transport does itself: HTTP/2 (settings, flow control, HPACK,
// pings, GOAWAY) by nghttp2; requests that are not gRPC (a method other
// than POST: 405; a content-type other than application/grpc*: 415); the
// message-size limit (RESOURCE_EXHAUSTED; a compressed message's once
// decompressed too); compressed messages (grpc-encoding gzip or deflate,
// cpp/grpc_compression.h), and infer responses compressed at a level as
// the binary compresses them; a stream the client resets, or a
// connection it drops, with calls in flight (`cancelled(connection,
// stream)`, `closed(connection)`); and the graceful stop of SocketServer.
// A stream's window is given back as Python takes its messages (`taken`)
// and its output drains; `send` says when the output backs up, and Python
// waits (`backed_up`) before it sends more: a client that does not read is
// stopped by flow control.
#pragma once

#include <nanobind/nanobind.h>

namespace tsb {

void bind_grpc_transport(nanobind::module_& m);

}  // namespace tsb
