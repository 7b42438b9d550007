"""The logging extension (Triton's LogSettings RPC and /v2/logging): the
core's log settings, read and changed while the server runs.

The Triton core has one logger per process: a change applies to every
Server of the process, as it would to the binary's one server. The
settings start from the Server's Options; what the core writes, and which
of its lines reach the "tritonserver.core" logger, change together. The
core keeps writing its ERROR lines where the package reads them (load
failures are explained from them), whatever log_error says.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .. import _native
from .._api import _logging
from .._api._errors import InvalidArgumentError, UnsupportedError
from .._api._options import log_levels

_FORMATS = {"default": 0, "ISO8601": 1}
# Setting -> (the protobuf/JSON kind it takes, the binary's word for it).
_KINDS: dict[str, tuple[type, str]] = {"log_info": (bool, "boolean"), "log_warning": (bool, "boolean"), "log_error": (bool, "boolean"),
          "log_verbose_level": (int, "int32"), "log_format": (str, "string")}


class LogSettings:
    """The log settings the frontends of one process report and change."""

    _lock = threading.Lock()
    _by_server: "weakref.WeakKeyDictionary[Any, LogSettings]" = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, server: Any) -> "LogSettings":
        with cls._lock:
            settings = cls._by_server.get(server)
            if settings is None:
                settings = cls._by_server[server] = cls(server.options)
            return settings

    def __init__(self, options: Any) -> None:
        verbose = int(options.log_verbose)
        info, warning, error = log_levels(options)
        self._settings: dict[str, Any] = {
            "log_file": options.log_file or "",
            "log_info": info,
            "log_warning": warning,
            "log_error": error,
            "log_verbose_level": verbose,
            "log_format": "ISO8601" if int(options.log_format) == 1 else "default",
        }

    def get(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._settings)

    def update(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply `changes` (setting name -> value) and return the settings;
        the binary's errors for a bad one (nothing is applied then)."""
        if "log_file" in changes:
            raise UnsupportedError("log file location can not be updated through network protocol")
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            kind = _KINDS.get(name)
            if kind is None:
                continue  # as the binary: settings it does not know are ignored
            wanted, word = kind
            if type(value) is not wanted or (isinstance(value, int) and not isinstance(value, bool)
                                             and not 0 <= value < 2**31):
                raise InvalidArgumentError(f"expect {word} for '{name}'")
            if name == "log_format" and value not in _FORMATS:
                raise InvalidArgumentError(f"invalid argument for log_format, got: {value}")
            checked[name] = value
        with self._lock:
            self._settings.update(checked)
            self._apply()
            return dict(self._settings)

    def _apply(self) -> None:
        s = self._settings
        core = _native.ServerOptions()  # the core's log setters act on its one logger at once
        core.set_log_info(s["log_info"])
        core.set_log_warn(s["log_warning"])
        core.set_log_error(s["log_error"] or _logging._destination != "stderr")
        core.set_log_verbose(s["log_verbose_level"])
        core.set_log_format(_FORMATS[s["log_format"]])
        levels = _logging.routed_levels(s["log_verbose_level"] > 0, s["log_info"], s["log_warning"], s["log_error"])
        _logging.route_core_lines(levels, gpu=_native.cuda_device_count() > 0)
