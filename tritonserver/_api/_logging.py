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
where the core's log goes, and which of its levels reach ``logging``.

The core always logs its ERROR lines (to the pipe when no level is on, and
those lines then reach no logger): while ``Server.start()`` or
``Server.load()`` runs, the lines it logs are collected (``core_errors``),
so that a model that failed to load is named with the core's reason
whatever the log settings.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
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


# The levels of the core's lines that reach `logging` (none: empty), from
# the log levels of the server started last; and the core's ERROR lines
# that are no error on this machine (said at DEBUG instead).
_routed: frozenset[int] = frozenset((DEBUG, INFO, WARNING, ERROR))
_echo: Optional[Callable[[str], None]] = None  # echo_core_lines
_benign: frozenset[str] = frozenset()
# Said by the Triton core at every start where no CUDA driver can be loaded:
# only its CUDA block manager is missing then, which nothing uses without a
# GPU.
NO_CUDA_DRIVER = "CudaDriverHelper has not been initialized."


def routed_levels(verbose: bool, info: bool, warn: bool, error: bool) -> frozenset[int]:
    """The levels of the core's lines to route, from the log levels on:
    verbose lines are DEBUG records."""
    return frozenset(level for level, on in ((DEBUG, verbose), (INFO, info), (WARNING, warn), (ERROR, error)) if on)


def echo_core_lines(write: Optional[Callable[[str], None]]) -> None:
    """From now on hand each line of the core's log of a level routed to
    `write`, as the core wrote it (a multi-line message line by line),
    instead of making records of them (None: records again). `serve`'s
    log, which shows the core's lines as NVIDIA's binary does."""
    global _echo
    _echo = write


def route_core_lines(levels: frozenset[int], gpu: bool) -> None:
    """Set which of the core's lines reach `logging` (at start): those of
    `levels` (routed_levels)."""
    global _routed, _benign
    _routed = levels
    _benign = frozenset() if gpu else frozenset((NO_CUDA_DRIVER,))


def _level_here(level: int, message: str) -> int:
    """The level a core line is said at here."""
    if level == ERROR and message in _benign:
        return DEBUG
    return level


def _emit(level: int, filename: str, line: int, message: str, pid: Optional[int]) -> None:
    level = _level_here(level, message)
    if level not in _routed:
        return
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
    MARKER = b"\0tritonserver-sync "  # a line of ours (no core line starts with NUL)

    def __init__(self) -> None:
        import fcntl
        import queue

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
        self._sync_lock = threading.Lock()
        self._sync_cv = threading.Condition(self._sync_lock)
        self._sync_sent = 0
        self._sync_read = 0
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
            if raw.startswith(self.MARKER):  # written by sync(): all before it is read
                self._complete()
                self._synced(int(raw[len(self.MARKER):]))
                continue
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
            echo = _echo
            if echo is not None and (self._pending[0] if self._pending is not None else INFO) in _routed:
                try:
                    echo(text)
                except Exception:  # a failing writer must not stop the draining
                    pass
        if not rest:  # the core writes a message at once: it is complete
            self._complete()
        return rest

    def _complete(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self._put(pending)

    def _put(self, line: _Line) -> None:
        _collect(line[0], line[4])
        if _echo is not None or _level_here(line[0], line[4]) not in _routed:
            return
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

    def sync(self, timeout: float = 5.0) -> None:
        """Return once the lines the core wrote before this call are read
        (collected by core_errors()); at most `timeout` seconds."""
        with self._sync_lock:
            self._sync_sent += 1
            number = self._sync_sent
        os.write(self._write, self.MARKER + b"%d\n" % number)
        with self._sync_cv:
            self._sync_cv.wait_for(lambda: self._sync_read >= number, timeout)

    def _synced(self, number: int) -> None:
        with self._sync_cv:
            self._sync_read = max(self._sync_read, number)
            self._sync_cv.notify_all()

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
# Where the core's log goes now (the server started last decided): "pipe",
# "callback", "stderr" (no pipe can be made), or "file:" and the name of
# the user's log file.
_destination = "stderr"
# The lists of core_errors() blocks now running, each receiving the
# messages of the core's ERROR lines.
_collecting: list[list[str]] = []
_collecting_lock = _thread.allocate_lock()


def _collect(level: int, message: str) -> None:
    if level != ERROR or not _collecting or message in _benign:
        return
    with _collecting_lock:
        for messages in _collecting:
            messages.append(message)


def set_destination(destination: str) -> None:
    """Say where the core's log goes from now on: "pipe", "callback" (a
    callback made by collecting_callback()), "stderr", or "file:" and a log
    file's name."""
    global _destination
    _destination = destination


def collecting_callback(callback: Callable[[int, str, int, str], None],
                        levels: frozenset[int]) -> Callable[[int, str, int, str], None]:
    """The core's log callback: collects its ERROR lines for core_errors()
    and hands the lines of the levels asked for (`levels`, routed_levels)
    to `callback` (level, file, line, message)."""
    def on_line(level: int, filename: str, line: int, message: str) -> None:
        ours = _LEVELS.get(LogLevel(level), INFO)
        _collect(ours, message)
        if _level_here(ours, message) in levels:
            callback(level, filename, line, message)

    return on_line


@contextlib.contextmanager
def core_errors() -> Iterator[list[str]]:
    """The messages of the ERROR lines the core logs while the block runs
    (with those of other threads' calls into the core meanwhile), complete
    when it ends, even when it raises. Empty where the core writes to a
    file whose lines cannot be read back, or on stderr."""
    messages: list[str] = []
    destination = _destination
    path = destination[len("file:"):] if destination.startswith("file:") else None
    offset = 0
    if path is not None:
        try:
            offset = os.path.getsize(path)
        except OSError:
            pass
    with _collecting_lock:
        _collecting.append(messages)
    try:
        yield messages
    finally:
        try:
            if destination == "pipe":
                with _pipe_lock:
                    pipe = _pipe
                if pipe is not None and pipe.pid == os.getpid():
                    pipe.sync()
            elif path is not None:
                messages.extend(_file_errors(path, offset))
        finally:
            with _collecting_lock:
                _collecting.remove(messages)


def _file_errors(path: str, offset: int) -> list[str]:
    """The messages of the ERROR lines in the log file `path` past `offset`."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return []
    lines: list[_Line] = []
    for text in data.decode("utf-8", "replace").removesuffix("\n").split("\n"):
        parsed = parse_line(text)
        if parsed is not None:
            lines.append(parsed)
        elif lines:  # a multi-line message goes on
            lines[-1] = (*lines[-1][:4], f"{lines[-1][4]}\n{text}")
    return [line[4] for line in lines if line[0] == ERROR and line[4] not in _benign]


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


def errors_asked_for() -> bool:
    """Whether the server started last asked for the core's ERROR lines."""
    return ERROR in _routed


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
