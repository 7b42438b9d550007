"""`serve`'s own log lines and those of its in-process python models (what
a model's ``pb_utils.Logger`` says, and the package's reports of a model's
failures: the "tritonserver.models" logger), written where NVIDIA's binary
writes its log (stderr, or the --log-file) in Triton's log format, as the
binary's log shows its frontends' and a stub model's lines, between the core's own
lines as the core wrote them (``_logging.echo_core_lines``). The levels and the
format are the log settings of the moment (the flags, then /v2/logging's
and LogSettings' updates)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, Callable, Optional, TextIO

_LETTERS = {logging.DEBUG: "I", logging.INFO: "I", logging.WARNING: "W"}  # else E (Triton prints verbose as I)


def triton_line(record: logging.LogRecord, iso8601: bool) -> str:
    """`record` as the core writes a line of its log: the level's letter,
    the time (UTC), the process, file:line, and the message quoted as a
    JSON string."""
    letter = _LETTERS.get(record.levelno, "E")
    at = time.gmtime(record.created)
    where = f"{os.getpid()} {record.filename}:{record.lineno}] {json.dumps(record.getMessage(), ensure_ascii=False)}"
    if iso8601:
        return f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', at)} {letter} {where}"
    micros = int(record.created % 1 * 1_000_000)
    return f"{letter}{time.strftime('%m%d %H:%M:%S', at)}.{micros:06d} {where}"


class TritonLogHandler(logging.Handler):
    """Writes the records of the levels on in `settings()` (LogSettings.get:
    log_info, log_warning, log_error, log_verbose_level, log_format) as
    Triton log lines to `log_file` (appended) or stderr."""

    def __init__(self, settings: Callable[[], dict[str, Any]], log_file: Optional[str]) -> None:
        super().__init__(logging.DEBUG)
        self._settings = settings
        self._file: Optional[TextIO] = open(log_file, "a", encoding="utf-8") if log_file else None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            settings = self._settings()
            on = (settings["log_verbose_level"] > 0 if record.levelno < logging.INFO
                  else settings["log_info"] if record.levelno < logging.WARNING
                  else settings["log_warning"] if record.levelno < logging.ERROR else settings["log_error"])
            if not on:
                return
            self._write(triton_line(record, settings["log_format"] == "ISO8601"))
        except Exception:
            self.handleError(record)

    def write_raw(self, line: str) -> None:
        """A line as it is (the core's, _logging.echo_core_lines), between
        the records' lines."""
        with self.lock:  # type: ignore[union-attr]  # made by Handler.__init__
            self._write(line)

    def _write(self, line: str) -> None:
        out = self._file or sys.stderr
        out.write(line + "\n")
        out.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()
