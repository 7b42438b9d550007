"""Routing Triton's log lines to Python's ``logging`` (logger "tritonserver"),
for cores with a log callback (docs/cores.md)."""

from __future__ import annotations

from ._enums import LogLevel

# logging's levels (INFO, WARNING, ERROR, DEBUG), by value: `logging` is
# imported only when a line is logged, not at `import tritonserver` (about
# 10 ms of it).
_LEVELS = {
    LogLevel.INFO: 20,
    LogLevel.WARN: 30,
    LogLevel.ERROR: 40,
    LogLevel.VERBOSE: 10,
}


def python_logging_callback(level: LogLevel, filename: str, line: int, message: str) -> None:
    """A ``Options.log_callback`` that logs each line to the "tritonserver"
    logger at the matching level.

    Example:
        >>> Server(model_repository="models", log_info=True,
        ...        log_callback=python_logging_callback)
    """
    import logging

    logging.getLogger("tritonserver").log(_LEVELS.get(level, logging.INFO), "%s:%d] %s",
                                          filename, line, message)
