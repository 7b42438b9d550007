"""Header forward patterns (the binary's --http-header-forward-pattern and
--grpc-header-forward-pattern), written in RE2's syntax as the binary
compiles them, matched with Python's ``re``.

RE2 takes an inline flag group ``(?flags)`` anywhere: it sets the flags up
to the end of the enclosing group. Python takes one only at the very start
of a pattern and never with a ``-``; ``re2_to_python`` writes each such
group as Python's scoped ``(?flags:...)``, closed where RE2's setting ends
(the enclosing group's end, and around each ``|`` of it). Anything else is
left to Python: a pattern it cannot take is refused."""

from __future__ import annotations

import re
from typing import Optional

from .._api._errors import InvalidArgumentError

_FLAGS = re.compile(r"\(\?([a-zA-Z]*(?:-[a-zA-Z]*)?)\)")


def re2_to_python(pattern: str) -> str:
    """`pattern` with each RE2 inline flag group ``(?flags)`` written as
    Python's scoped ``(?flags:...)``; the rest as written."""
    out: list[str] = []
    # Per open group: the scoped flag groups opened in it, in order.
    scopes: list[list[str]] = [[]]
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append(pattern[index:index + 2])
            index += 2
            continue
        if char == "[":  # a character class: its parentheses and bars are literal
            end = index + 1
            if end < len(pattern) and pattern[end] == "^":
                end += 1
            if end < len(pattern) and pattern[end] == "]":
                end += 1
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            out.append(pattern[index:end + 1])
            index = end + 1
            continue
        flags = _FLAGS.match(pattern, index)
        if flags is not None:
            scopes[-1].append(flags.group(1))
            out.append(f"(?{flags.group(1)}:")
            index = flags.end()
            continue
        if char == "(":
            scopes.append([])
        elif char == ")" and len(scopes) > 1:
            out.append(")" * len(scopes.pop()))
        elif char == "|":
            out.append(")" * len(scopes[-1]) + "|" + "".join(f"(?{flag}:" for flag in scopes[-1]))
            index += 1
            continue
        out.append(char)
        index += 1
    out.append(")" * len(scopes[0]))
    return "".join(out)


def compile_header_pattern(pattern: str, what: str, flags: int = 0) -> Optional[re.Pattern[str]]:
    """The compiled forward pattern (None for ""), RE2 syntax as
    ``re2_to_python`` translates it; InvalidArgumentError naming `what`
    (e.g. "KServeGrpc.Options.forward_header_pattern") for one that neither
    RE2's inline flags nor Python's ``re`` explain."""
    if not isinstance(pattern, str):
        raise InvalidArgumentError(f"{what} must be a str (a regular expression), not {type(pattern).__name__}")
    if not pattern:
        return None
    try:
        return re.compile(re2_to_python(pattern), flags)
    except re.error as error:
        raise InvalidArgumentError(f"{what} {pattern!r} is not a regular expression: {error}") from None
