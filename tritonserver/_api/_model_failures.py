"""Why a model is not available, and what brings it in this server's mode.

The Triton core says only "failed to load all models" when a model fails to
load at start, and "failed to poll from model repository" when the config
of a model to load cannot be read; the reasons are in its ERROR log lines
(collected by ``_logging.core_errors``) and in the model index (a model's
state and reason). These functions name each model with its reason, and say
what makes a model available in the server's model control mode.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from ._enums import ModelControlMode
from ._errors import advised

if TYPE_CHECKING:
    from ._errors import TritonError

# The core's (2.51) ERROR lines about one model: poll (config) failures,
# load failures of a version, and a load that could not be started.
_MODEL_LINES = (
    re.compile(r"Poll failed for model directory '(?P<name>[^']+)': (?P<reason>.*)", re.S),
    re.compile(r"failed to load '(?P<name>[^']+)' version (?P<version>\d+): (?P<reason>.*)", re.S),
    re.compile(r"failed to load model '(?P<name>[^']+)': (?P<reason>.*)", re.S),
    re.compile(r"failed to poll model '(?P<name>[^']+)': (?P<reason>.*)", re.S),
)
# The core's reason for a config.pbtxt that does not parse; the parser's own
# message (line, column, cause) goes to stderr, not to the core's log.
_UNPARSED_CONFIG = "failed to read text proto from "
_UNPARSED_CONFIG_HINT = (" (its config.pbtxt is not a valid model configuration: the parser's line, column and "
                         "cause are on stderr, in the line that starts with \"[libprotobuf ERROR\")")

# The core's status of a server start that failed, as it logs it when told
# not to exit on error (TRITONSERVER_ServerNew: "<code>: <message>"); the
# codes in the order of TRITONSERVER_Error_Code.
_STATUS_CODES = ("Unknown", "Internal", "Not found", "Invalid argument", "Unavailable", "Unsupported",
                 "Already exists", "Cancelled")
_STATUS_LINE = re.compile(rf"(?P<code>{'|'.join(_STATUS_CODES)}): (?P<message>.*)", re.S)
# Its message when the server initialized but models failed to load.
LOAD_FAILED = "failed to load all models"


@dataclass(frozen=True)
class Failure:
    """One model (version) that failed to load, with the core's reason."""

    model: str
    version: Optional[int]
    reason: str

    def __str__(self) -> str:
        where = f"model '{self.model}'" + (f" version {self.version}" if self.version is not None else "")
        hint = _UNPARSED_CONFIG_HINT if self.reason.startswith(_UNPARSED_CONFIG) else ""
        return f"{where}: {self.reason}{hint}"


def from_log(messages: Iterable[str]) -> tuple[list[Failure], list[str]]:
    """The model failures among the core's ERROR messages, and the other
    messages (in order, without repeats)."""
    failures: list[Failure] = []
    others: list[str] = []
    for message in messages:
        for pattern in _MODEL_LINES:
            match = pattern.fullmatch(message)
            if match is not None:
                version = match.groupdict().get("version")
                failure = Failure(match["name"], int(version) if version else None, match["reason"].strip())
                if failure not in failures:
                    failures.append(failure)
                break
        else:
            if message not in others:
                others.append(message)
    return failures, others


def take_start_status(messages: list[str], live: bool) -> Optional[tuple[int, str]]:
    """The core's status of a failed start among its ERROR `messages` (the
    last one it logs there), taken out of `messages`: its code
    (TRITONSERVER_Error_Code) and message; None when the start did not
    fail. A `live` server failed only if models failed to load."""
    for i in range(len(messages) - 1, -1, -1):
        match = _STATUS_LINE.fullmatch(messages[i])
        if match is None or (live and match["message"] != LOAD_FAILED):
            continue
        del messages[i]
        return _STATUS_CODES.index(match["code"]), match["message"]
    return None


def from_index(entries: Iterable[Mapping[str, Any]]) -> list[Failure]:
    """The models of a model index (the core's JSON entries) that are
    UNAVAILABLE with a reason other than an unload."""
    return [Failure(entry["name"], int(entry["version"]) if entry.get("version") else None, entry["reason"])
            for entry in entries
            if entry.get("state") == "UNAVAILABLE" and entry.get("reason") and entry["reason"] != "unloaded"]


def merged(first: list[Failure], second: list[Failure]) -> list[Failure]:
    """`first`, then the failures of `second` about a model `first` does not
    name."""
    named = {f.model for f in first}
    return first + [f for f in second if f.model not in named]


def describe(failures: list[Failure], others: list[str] = ()) -> str:  # type: ignore[assignment]
    """One line per failed model (and per other error the core logged)."""
    lines = [f"- {f}" for f in failures]
    if others:
        lines += [f"- (the core also logged) {message}" for message in others]
    return "\n".join(lines)


def how_to_load(mode: ModelControlMode, name: str, in_repository: bool) -> str:
    """What (re)loads the model `name` in a server of `mode` (its folder
    `in_repository` already, or still to be added)."""
    add = "" if in_repository else (f"put it in the model repository (a folder {name}/ with its config.pbtxt and "
                                    "a version folder such as 1/) and ")
    if mode == ModelControlMode.EXPLICIT:
        return f"{add}load it with server.load({name!r})"
    if mode == ModelControlMode.POLL:
        return (f"{add}call server.poll_model_repository() (this server runs with model_control_mode=POLL, which "
                "refuses server.load())")
    return (f"{add}start the server again (this server runs with model_control_mode=NONE, which loads the "
            "repository's models at start only and refuses server.load(); model_control_mode=EXPLICIT loads "
            "models by name)")


def did_you_mean(name: str, index: Iterable[Mapping[str, Any]]) -> str:
    """" (did you mean 'x'?)" naming the models of a model index whose names
    are close to `name`; "" when none is."""
    close = difflib.get_close_matches(name, sorted({str(e.get("name")) for e in index}), n=3)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def unknown_model(error: "TritonError", name: str, version: int, mode: ModelControlMode,
                  index: Sequence[Mapping[str, Any]], known_failures: list[Failure],
                  has_repository: bool = True) -> "TritonError":
    """The core's "unknown model" error (of its own class), with the cause
    and the fix that works in `mode`: for a model of the repository, the
    core's reason when it failed to load (from the index, or
    `known_failures` seen in the core's log); for another name, the close
    names of the repository ("did you mean"), or, on a server without a
    repository (`has_repository` false: it serves bound functions), bind()."""
    entries = [e for e in index if e.get("name") == name]
    if entries:
        failed = merged(from_index(entries), [f for f in known_failures if f.model == name])
        if failed:
            cause = (f"{'; '.join(str(f) for f in failed)}: it failed to load; fix it, then "
                     f"{how_to_load(mode, name, in_repository=True)}")
        elif any(e.get("state") == "UNLOADING" and (version == -1 or e.get("version") == str(version))
                 for e in entries):
            which = f"model {name!r}" if version == -1 else f"version {version} of model {name!r}"
            cause = (f"{which} is being unloaded (new requests are refused while its requests in flight "
                     f"finish); to serve it again, {how_to_load(mode, name, in_repository=True)}")
        elif version == -1:
            cause = f"model {name!r} is not loaded; {how_to_load(mode, name, in_repository=True)}"
        else:
            cause = (f"version {version} of model {name!r} is not loaded; "
                     f"{how_to_load(mode, name, in_repository=True)} (its version_policy decides which versions "
                     "are loaded)")
    elif not has_repository:
        cause = (f"no model named {name!r} is served{did_you_mean(name, index)} (this server has no model "
                 f"repository: it serves the functions bound to it); to serve a function under that name, "
                 f"server.bind({name!r}, fn, inputs=..., outputs=...)")
    else:
        cause = (f"no model named {name!r} is in the model repository{did_you_mean(name, index)}; to serve a "
                 "model of that name, "
                 f"{how_to_load(mode, name, in_repository=False)}")
    return advised(type(error), f"{error}: {cause}; server.models() lists the repository's models, their versions "
                   "and states", error)
