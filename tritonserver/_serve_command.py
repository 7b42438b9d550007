"""``python -m tritonserver serve``: a Triton server over the network from
this process, as NVIDIA's tritonserver binary runs one: the binary's flags
(tritonserver/_serve_flags.py), the KServe HTTP and gRPC frontends and the
metrics endpoint of tritonserver.frontend, python models in-process where
the stub cannot run them. SIGINT or SIGTERM: the frontends stop accepting
and let requests in flight finish, the models are unloaded within
--exit-timeout-secs, and the command exits 0; a server that cannot start
exits 1 naming why."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any, Optional

from ._api._enums import ModelControlMode
from ._api._errors import InvalidArgumentError, TritonError
from ._api._logging import echo_core_lines
from ._api._options import BinaryFlagOptions
from ._api._server import Server
from ._kserve.log_settings import LogSettings
from ._serve_flags import ServeSettings, settings
from ._serve_log import TritonLogHandler


# serve's own log lines, in the binary's log (TritonLogHandler).
_log = logging.getLogger("tritonserver.serve")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _frontends(server: Server, config: ServeSettings) -> list[tuple[str, Any]]:
    """The frontends the flags ask for, not yet started: (what the binary calls it, frontend)."""
    from . import frontend

    made: list[tuple[str, Any]] = []
    for name, kind, options in (("GRPCInferenceService", "KServeGrpc", config.grpc),
                                ("HTTPService", "KServeHttp", config.http),
                                ("Metrics Service", "Metrics", config.metrics)):
        if options is not None:
            cls = getattr(frontend, kind)
            made.append((name, cls(server, cls.Options(**options))))
    return made


def serve(argv: list[str]) -> int:
    try:
        config = settings(argv)  # SystemExit(2) naming a bad flag
    except InvalidArgumentError as error:  # refused before anything starts, exit 1 as the binary
        _say(f"error: {error}")
        return 1
    stop = threading.Event()
    received: list[int] = []

    def on_signal(number: int, _frame: Any) -> None:
        received.append(number)
        stop.set()

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    server: Optional[Server] = None
    started: list[Any] = []
    logs = [logging.getLogger("tritonserver.models"), _log]
    try:
        try:
            # Only a started server is kept for the stop below: a start that
            # fails has stopped what it began.
            # With --exit-on-error=false the server serves what loaded, as
            # the binary does (not ready under strict readiness while a
            # model failed; such a model loads again through the
            # repository API once fixed).
            made = Server(BinaryFlagOptions(**config.server))
            to_log = TritonLogHandler(LogSettings.of(made).get, config.server.get("log_file"))
            for log in logs:  # every level reaches the handler, which keeps those on
                log.addHandler(to_log)
                log.setLevel(logging.DEBUG)
            echo_core_lines(to_log.write_raw)
            server = made.start(wait_until_ready=config.server["exit_on_error"])
            for name, frontend in _frontends(server, config):
                frontend.start()
                started.append(frontend)
                _log.info("Started %s at %s:%d", name, frontend.options.address, frontend.port)
        except (TritonError, ImportError) as error:
            _say(f"error: {error}")
            return 1
        polling = config.server["model_control_mode"] == ModelControlMode.POLL
        wait = config.repository_poll_secs if polling and config.repository_poll_secs > 0 else None
        while not stop.wait(wait):
            try:
                server.poll_model_repository()
            except TritonError as error:
                _say(f"error: polling the model repository: {error}")
        _say(f"Signal ({received[0]}) received: stopping (in-flight requests have "
             f"{config.exit_timeout_secs} s to finish)")
        return 0
    finally:
        for frontend in reversed(started):
            try:
                frontend.stop()
            except TritonError as error:
                _say(f"error: stopping a frontend: {error}")
        if server is not None:
            server.stop()
        echo_core_lines(None)
        for log in logs:
            for log_handler in [h for h in log.handlers if isinstance(h, TritonLogHandler)]:
                log.removeHandler(log_handler)
                log_handler.close()
                log.setLevel(logging.NOTSET)
        for number, handler in previous.items():
            signal.signal(number, handler)
