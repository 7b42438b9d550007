"""Restricted protocol groups, as the binary's ``--grpc-restricted-protocol``
and ``--http-restricted-api`` flags: ``"<group>[,<group>...]:<key>=<value>"``
restricts those groups to requests that carry the header ``key`` (with the
frontend's prefix) set to ``value``. An entry is that text, or the triple
``(groups, key, value)`` (groups: "a,b" or a list of names)."""

from __future__ import annotations

from typing import Any, Iterable

from .._api._errors import InvalidArgumentError

# The binary's groups (src/restricted_features.h).
GROUPS = (
    "health", "metadata", "inference", "shared-memory", "model-config", "model-repository",
    "statistics", "trace", "logging",
)


def parse_restrictions(specs: Iterable[Any], what: str, noun: str, key_prefix: str = "") -> dict[str, tuple[str, str]]:
    """group -> (header, value) from the flags' values; InvalidArgumentError
    naming `what` (e.g. "KServeGrpc.Options.restricted_protocols") for a
    malformed one, an unknown group, or a group given twice, the last two
    in the binary's words for a group (`noun`: its "api" of HTTP,
    "protocol" of gRPC)."""
    if isinstance(specs, str):
        specs = [specs]
    restrictions: dict[str, tuple[str, str]] = {}
    for spec in specs:
        groups, key, value = _entry(spec, what)
        for group in groups:
            if group not in GROUPS:
                raise InvalidArgumentError(
                    f"{what}: unknown restricted {noun} '{group}' (in {spec!r}; one of {', '.join(GROUPS)})"
                )
            if group in restrictions:
                raise InvalidArgumentError(
                    f"{what}: restricted {noun} '{group}' can not be specified in multiple config groups"
                )
            restrictions[group] = (key_prefix + key, value)
    return restrictions


def _entry(spec: Any, what: str) -> tuple[list[str], str, str]:
    groups: Any = None
    key: Any = None
    value: Any = None
    if isinstance(spec, str):
        names, colon, setting = spec.partition(":")
        key, equals, value = setting.partition("=")
        groups = names if colon and equals else None
    elif isinstance(spec, (tuple, list)) and len(spec) == 3:
        groups, key, value = spec
    if isinstance(groups, str):
        groups = groups.split(",")
    if (not isinstance(groups, (list, tuple)) or not groups or not all(isinstance(g, str) for g in groups)
            or not isinstance(key, str) or not key or not isinstance(value, str)):
        raise InvalidArgumentError(
            f"{what}: {spec!r} is not '<group>[,<group>...]:<key>=<value>' nor a (groups, key, value) triple "
            f"(e.g. 'model-repository,shared-memory:admin-key=secret'; groups: {', '.join(GROUPS)})"
        )
    return list(groups), key, value
