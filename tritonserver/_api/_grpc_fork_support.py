"""gRPC's fork handlers: off by default in a process that embeds Triton.

Triton's python backend starts each model's stub process with fork(), from
the core's threads, several at once when models load in parallel. grpcio
(tritonclient.grpc, a grpcio frontend) installs fork handlers that abort the
process when two forks overlap or a fork races gRPC's own threads ("Check
failed: is_forking != was_forking"): seen in this package's suite, in a
stub server's start after tests that used tritonclient.grpc, and in Ray
workers. gRPC reads GRPC_ENABLE_FORK_SUPPORT once, when it is imported, so
``import tritonserver`` sets it to 0 unless it is set already; a process
that imported grpc first keeps gRPC's default, and a stub server started
there says so once. (gRPC's fork support serves a child of os.fork() that
goes on using its parent's channels.)
"""

from __future__ import annotations

import os
import sys

from . import _logging

ENV = "GRPC_ENABLE_FORK_SUPPORT"
_OFF = ("0", "false")

# Whether grpc was imported before this module without the setting: then
# gRPC kept its fork handlers.
_grpc_first = "grpc" in sys.modules and ENV not in os.environ
os.environ.setdefault(ENV, "0")
_warned = False


def warn_if_on() -> None:
    """Say once (WARNING) that python models on the stub may abort this
    process, when gRPC's fork support is on in it."""
    global _warned
    if _warned or "grpc" not in sys.modules:
        return
    if not _grpc_first and os.environ.get(ENV, "").lower() in _OFF:
        return
    _warned = True
    _logging.package_log(
        _logging.WARNING,
        "gRPC's fork support is on in this process (%s): python models on the stub start with fork(), and "
        "gRPC's fork handlers may abort the process when two stubs start at once; set %s=0 in the environment "
        "before grpc is imported (importing tritonserver first does that), or run python models in-process",
        "grpc was imported before tritonserver" if _grpc_first else f"{ENV}={os.environ.get(ENV)}", ENV)
