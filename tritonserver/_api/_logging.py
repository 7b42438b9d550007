"""Triton's log lines in Python's ``logging``.

The package's own messages go to the logger ``"tritonserver"``; the core's
log lines to its child ``"tritonserver.core"``, on every core:

- by default the core writes its log to a pipe (``Options.log_file`` pointed
  at it) that one reader thread per process turns into ``logging`` records,
  with Triton's level letter mapped to a ``logging`` level and the core's
  source file and line as the record's ``pathname``/``lineno``;
- ``Options.log_file`` set by the user is kept: the core writes that file;
- ``Options.log_callback`` (cores with a log callback, Triton 2.72+) calls
  that function instead, for instance ``python_logging_callback``.

The core's log settings are process-wide: the server started last decides
where the core's log goes.
"""

from __future__ import annotations

import _thread
import os
import sys
from typing import TYPE_CHECKING, Callable, Optional

from ._enums import LogLevel

if TYPE_CHECKING:
    import re

# `logging` is imported only when something is logged, not at
# `import tritonserver` (about 10 ms): its levels by value.
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
_LEVELS = {LogLevel.INFO: INFO, LogLevel.WARN: WARNING, LogLevel.ERROR: ERROR, LogLevel.VERBOSE: DEBUG}
_LETTERS = {"I": INFO, "W": WARNING, "E": ERROR, "V": DEBUG}

# Triton's two line formats (LogFormat.DEFAULT and LogFormat.ISO8601),
# compiled on first use:
#   I1130 23:44:49.123456 4242 model_lifecycle.cc:849] message
#   2026-11-30T23:44:49Z I 4242 model_lifecycle.cc:849] message
_LINE_FORMATS = (r"([IWEV])\d{4} \d\d:\d\d:\d\d\.\d+ +(\d+) ([^\s:]+):(\d+)\] ?(.*)",
                 r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ([IWEV]) +(\d+) ([^\s:]+):(\d+)\] ?(.*)")
_line_patterns: list["re.Pattern[str]"] = []


def package_log(level: int, message: str, *args: object) -> None:
    """Log the package's own choices on the "tritonserver" logger. While
    nobody has imported `logging`, nothing configured it: its default
    (WARNING) would drop DEBUG and INFO, so they are skipped without
    importing it."""
    if level < WARNING and "logging" not in sys.modules:
        return
    import logging

    logging.getLogger("tritonserver").log(level, message, *args, stacklevel=2)


def python_logging_callback(level: LogLevel, filename: str, line: int, message: str) -> None:
    """A ``Options.log_callback`` that logs each line to the
    "tritonserver.core" logger at the matching level, with the core's source
    file and line as the record's location.

    Example:
        >>> Server(model_repository="models", log_info=True,
        ...        log_callback=python_logging_callback)
    """
    _emit(_LEVELS.get(level, INFO), filename, line, message, None)


def _emit(level: int, filename: str, line: int, message: str, pid: Optional[int]) -> None:
    import logging

    core_logger = logging.getLogger("tritonserver.core")
    if not core_logger.isEnabledFor(level):
        return
    record = core_logger.makeRecord(core_logger.name, level, filename, line, "%s", (message,), None,
                                    extra={"triton_pid": pid})
    core_logger.handle(record)


_Line = tuple[int, int, str, int, str]   # level, pid, file, line, message


def parse_line(text: str) -> Optional[_Line]:
    """(level, pid, file, line, message) of a line in Triton's log format,
    or None for a line that is not (a continuation of a multi-line message)."""
    if not _line_patterns:
        import re

        _line_patterns.extend(re.compile(f, re.S) for f in _LINE_FORMATS)
    match = _line_patterns[0].fullmatch(text) or _line_patterns[1].fullmatch(text)
    if match is None:
        return None
    letter, pid, filename, line, message = match.groups()
    if len(message) >= 2 and message[0] == message[-1] == '"':
        import json

        try:  # cores since 2.4x quote and escape each message
            message = json.loads(message)
        except ValueError:
            pass
    return _LETTERS[letter], int(pid), filename, int(line), message


class _CoreLogPipe:
    """The pipe the core logs into, one thread that drains it and one that
    hands its lines to ``logging``: a slow or stuck handler never makes the
    core wait on a full pipe. One per process, made when the first server
    starts."""

    PIPE_SIZE = 1 << 20
    MAX_QUEUED = 100_000  # lines waiting for a stuck handler; later ones are counted, not kept

    def __init__(self) -> None:
        import fcntl
        import queue
        import threading

        self._read, self._write = os.pipe()          # both close-on-exec
        self._wake_read, self._wake_write = os.pipe()
        try:  # a larger buffer than the default 64 KiB
            fcntl.fcntl(self._write, fcntl.F_SETPIPE_SZ, self.PIPE_SIZE)
        except OSError:
            pass
        # The core opens the pipe again by this name, for writing; our own
        # write end stays open so that the reader never sees end-of-file.
        self.pid = os.getpid()
        self.path = f"/proc/{self.pid}/fd/{self._write}"
        self._pending: Optional[_Line] = None
        self._queue: "queue.SimpleQueue[Optional[_Line]]" = queue.SimpleQueue()
        self._dropped = 0
        self._reader = threading.Thread(target=self._drain, name="tritonserver-core-log", daemon=True)
        self._emitter = threading.Thread(target=self._emit_lines, name="tritonserver-core-log-emit",
                                         daemon=True)
        self._reader.start()
        self._emitter.start()

    def _drain(self) -> None:
        import select

        buffer = b""
        poller = select.poll()  # not select(): descriptors may be above 1024
        poller.register(self._read, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._read in ready:
                buffer = self._consume(buffer + os.read(self._read, 1 << 16))
            elif self._wake_read in ready:
                # Stopping: what the core wrote before is in the pipe; take it.
                os.set_blocking(self._read, False)
                try:
                    while chunk := os.read(self._read, 1 << 16):
                        buffer = self._consume(buffer + chunk)
                except BlockingIOError:
                    pass
                self._consume(buffer + b"\n" if buffer else b"")
                self._complete()
                self._queue.put(None)
                return

    def _consume(self, data: bytes) -> bytes:
        """Queue the complete lines of `data`; return the rest."""
        *lines, rest = data.split(b"\n")
        for raw in lines:
            text = raw.decode("utf-8", "replace")
            parsed = parse_line(text)
            if parsed is not None:
                self._complete()
                self._pending = parsed
            elif self._pending is not None:   # a multi-line message goes on
                level, pid, filename, line, message = self._pending
                self._pending = (level, pid, filename, line, f"{message}\n{text}")
            elif text:
                self._put((INFO, 0, "", 0, text))
        if not rest:  # the core writes a message at once: it is complete
            self._complete()
        return rest

    def _complete(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self._put(pending)

    def _put(self, line: _Line) -> None:
        if self._queue.qsize() >= self.MAX_QUEUED:
            self._dropped += 1
            return
        self._queue.put(line)

    def _emit_lines(self) -> None:
        while (item := self._queue.get()) is not None:
            dropped, self._dropped = self._dropped, 0
            try:
                if dropped:
                    package_log(WARNING, "%d core log lines were dropped: the logging handlers did not keep up",
                                   dropped)
                level, pid, filename, line, message = item
                _emit(level, filename, line, message, pid or None)
            except Exception:  # a failing handler must not stop the draining
                pass

    def stop(self) -> None:
        """Drain what is left, hand it to ``logging``, stop both threads and
        close the pipe (the core must no longer write to it)."""
        os.write(self._wake_write, b"x")
        self._reader.join(timeout=10.0)
        self._emitter.join(timeout=10.0)
        for fd in (self._read, self._write, self._wake_read, self._wake_write):
            os.close(fd)


_pipe_lock = _thread.allocate_lock()
_pipe: Optional[_CoreLogPipe] = None


def core_log_pipe() -> Optional[str]:
    """The file name for ``Options.log_file`` that routes the core's log
    into ``logging`` (the reader starts on first use); None where that cannot
    work (no /proc): the core then writes to stderr, as it would anyway."""
    global _pipe
    with _pipe_lock:
        if _pipe is None or _pipe.pid != os.getpid():  # none yet, or a forked child's
            if not os.path.isdir(f"/proc/{os.getpid()}/fd"):
                package_log(WARNING, "no /proc here: the core's log lines go to stderr, not to logging")
                return None
            _pipe = _CoreLogPipe()
            package_log(DEBUG, "core log lines go to logging through %s", _pipe.path)
        return _pipe.path


def stop_core_log_pipe(reset_core: Optional[Callable[[], None]] = None) -> None:
    """At interpreter exit, after every server stopped: point the core's log
    back at stderr (``reset_core``: a function doing that), then stop the
    reader."""
    global _pipe
    with _pipe_lock:
        pipe, _pipe = _pipe, None
    if pipe is None:
        return
    if pipe.pid != os.getpid():
        return
    if reset_core is not None:
        try:
            reset_core()
        except Exception:
            pass
    pipe.stop()
