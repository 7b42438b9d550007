"""The I/O threads of a native transport (cpp/socket_server.h: HttpTransport,
GrpcTransport): threads Python starts, so that each has its own Python thread
state, each running the transport's serve_io(index) without the GIL."""

from __future__ import annotations

import threading
from typing import Any


def start_io_threads(what: str, transport: Any) -> list[threading.Thread]:
    """Starts one daemon thread per transport.io_threads, named after `what`
    (the frontend); returns them, for the caller to join once the transport
    has stopped."""
    threads = [threading.Thread(target=transport.serve_io, args=(index,), daemon=True,
                                name=f"tritonserver-{what}-io{index}")
               for index in range(transport.io_threads)]
    for thread in threads:
        thread.start()
    return threads
