"""Checks of the frontends' Options fields, made when an Options is built
(as tritonfrontend's pydantic fields do): a wrong value raises
InvalidArgumentError naming the class, the field and what it takes."""

from __future__ import annotations

from typing import Any, Optional

from .._api._errors import InvalidArgumentError


def _refuse(options: Any, field: str, wanted: str) -> InvalidArgumentError:
    value = getattr(options, field)
    return InvalidArgumentError(f"{type(options).__qualname__}.{field} must be {wanted}, not {value!r}")


def check_int(options: Any, field: str, low: int = 0, high: Optional[int] = None) -> None:
    value = getattr(options, field)
    if isinstance(value, bool) or not isinstance(value, int):  # an int or an IntEnum, never a bool
        raise _refuse(options, field, "an int")
    if value < low or (high is not None and value > high):
        raise _refuse(options, field, f"an int from {low} to {high}" if high is not None else f"an int >= {low}")


def check_port(options: Any, field: str = "port") -> None:
    check_int(options, field, 0, 65535)


def check_bool(options: Any, field: str) -> None:
    if type(getattr(options, field)) is not bool:
        raise _refuse(options, field, "True or False")


def check_str(options: Any, field: str) -> None:
    if not isinstance(getattr(options, field), str):
        raise _refuse(options, field, "a str")


def check_address(options: Any, field: str = "address") -> None:
    check_str(options, field)
    if not getattr(options, field):
        raise _refuse(options, field, "an IP address or host name (e.g. '0.0.0.0' for every interface)")
