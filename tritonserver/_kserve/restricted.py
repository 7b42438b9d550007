"""Restricted protocol groups, as the binary's ``--grpc-restricted-protocol``
and ``--http-restricted-api`` flags: ``"<group>[,<group>...]:<key>=<value>"``
restricts those groups to requests that carry the header ``key`` (with the
frontend's prefix) set to ``value``."""

from __future__ import annotations

from typing import Iterable

from .._api._errors import InvalidArgumentError

# The binary's groups (src/restricted_features.h).
GROUPS = (
    "health", "metadata", "inference", "shared-memory", "model-config", "model-repository",
    "statistics", "trace", "logging",
)


def parse_restrictions(specs: Iterable[str], what: str, key_prefix: str = "") -> dict[str, tuple[str, str]]:
    """group -> (header, value) from the flags' values; InvalidArgumentError
    naming `what` (e.g. "KServeGrpc.Options.restricted_protocols") for a
    malformed one, an unknown group, or a group given twice."""
    if isinstance(specs, str):
        specs = [specs]
    restrictions: dict[str, tuple[str, str]] = {}
    for spec in specs:
        if not isinstance(spec, str):
            raise InvalidArgumentError(f"{what}: each entry is a str '<groups>:<key>=<value>', not {spec!r}")
        groups, colon, setting = spec.partition(":")
        key, equals, value = setting.partition("=")
        if not colon or not equals or not groups or not key:
            raise InvalidArgumentError(
                f"{what}: {spec!r} is not '<group>[,<group>...]:<key>=<value>' (e.g. 'model-repository,"
                f"shared-memory:admin-key=secret'; groups: {', '.join(GROUPS)})"
            )
        for group in groups.split(","):
            if group not in GROUPS:
                raise InvalidArgumentError(
                    f"{what}: unknown restricted group '{group}' in {spec!r} (one of {', '.join(GROUPS)})"
                )
            if group in restrictions:
                raise InvalidArgumentError(
                    f"{what}: restricted group '{group}' can not be specified in multiple config groups"
                )
            restrictions[group] = (key_prefix + key, value)
    return restrictions
