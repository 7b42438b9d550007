"""Routing Triton's log lines to Python's ``logging`` (logger "tritonserver"),
for cores with a log callback (Triton 2.72+)."""

from __future__ import annotations

import logging

from ._enums import LogLevel

logger = logging.getLogger("tritonserver")

_LEVELS = {
    LogLevel.INFO: logging.INFO,
    LogLevel.WARN: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
    LogLevel.VERBOSE: logging.DEBUG,
}


def python_logging_callback(level: LogLevel, filename: str, line: int, message: str) -> None:
    """A ``Options.log_callback`` that logs each line to the "tritonserver"
    logger at the matching level.

    Example:
        >>> Server(model_repository="models", log_info=True,
        ...        log_callback=python_logging_callback)
    """
    logger.log(_LEVELS.get(level, logging.INFO), "%s:%d] %s", filename, line, message)
