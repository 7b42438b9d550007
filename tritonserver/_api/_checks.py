"""The validation vocabulary of every API of the package (Options, requests,
server and model calls, metrics, the KServe routes): each check names the
field it refuses, in one wording.

- the wrong type: TypeError, "<field> must be <what>, not <type> (<value>)";
- a str the core cannot take (a NUL would cut it, a lone surrogate has no
  UTF-8 form): ValueError;
- an int out of range: `range_error` (ValueError by default; requests pass
  InvalidArgumentError, the class the core gives such a request).
"""

from __future__ import annotations

from typing import Any, NoReturn, Optional


def fail(field: str, expected: str, value: Any) -> NoReturn:
    """TypeError: `field` must be `expected`, not what `value` is."""
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise TypeError(f"{field} must be {expected}, not {type(value).__name__} ({shown})")


def text(field: str, value: Any) -> str:
    """A name or value that becomes a C string: a str without NUL (a NUL
    would silently cut it, naming another model, input or output) that is
    valid Unicode (a lone surrogate has no UTF-8 form)."""
    if not isinstance(value, str):
        fail(field, "a str", value)
    if "\x00" in value:
        raise ValueError(f"embedded null character in {field} {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{field} {value!r} is not valid Unicode text ({e.reason} at index {e.start}): "
                             "it has no UTF-8 form to pass to the core") from None
    return value


def non_negative_int(field: str, value: Any, bits: Optional[int] = None,
                     range_error: type[Exception] = ValueError) -> int:
    """An int (not a bool) >= 0, below 2**bits when `bits` is given."""
    if isinstance(value, bool) or not isinstance(value, int):
        fail(field, "an int", value)
    if value < 0:
        raise range_error(f"{field} must not be negative (got {value})")
    if bits is not None and value >= 1 << bits:
        raise range_error(f"{field}: {value} does not fit in {bits} bits")
    return int(value)
