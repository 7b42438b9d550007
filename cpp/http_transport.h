// The native HTTP/1.1 transport of KServeHttp (Options.transport="native";
// tritonserver/frontend/_native_http.py): llhttp parses, epoll serves
// non-blocking sockets on a few I/O threads (started by Python, each
// running HttpTransport.serve_io without the GIL), and every whole request
// is handed to Python (a callable, usually the frontend loop's
// call_soon_threadsafe) as (connection, sequence, method, target, headers,
// body). Replies come back by sequence number (reply, or reply_start /
// reply_chunk / reply_end for a chunked stream) from any thread and are
// written in request order (pipelining), by the replying thread while the
// socket takes them, else by the connection's I/O thread.
//
// What the transport does itself: keep-alive and Connection: close,
// HTTP/1.0, Content-Length and chunked request bodies, `Expect:
// 100-continue` (the interim answer once earlier replies are out), the
// body-size limit (the request is handed to `refused` instead, which
// answers it; the connection closes after), malformed requests (`refused`
// with llhttp's reason; closes after), a client that leaves with requests
// unanswered (`closed(connection)`), and a graceful stop (no new
// connections, the requests in flight answered, then every connection
// closed).
#pragma once

#include <nanobind/nanobind.h>

namespace tsb {

void bind_http_transport(nanobind::module_& m);

}  // namespace tsb
