"""Network frontends for an embedded Server, with the names of NVIDIA's
`tritonfrontend` package: a program written for it runs by changing
``from tritonfrontend import ...`` to ``from tritonserver.frontend import ...``.

- `KServeHttp`: the KServe v2 HTTP/REST protocol (default port 8000).
- `KServeGrpc`: Triton's GRPCInferenceService and grpc.health.v1 (8001).
- `Metrics`: Prometheus text at /metrics (8002).

Each takes ``(server, Options(...))``, has ``start()``/``stop()`` and is a
context manager. They need the serve extra:
``pip install "tritonserver-binding[serve]"``. See docs/serving.md.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it (imported on first use, so that
# `import tritonserver.frontend` needs none of the servers)
_EXPORTS = {
    "KServeGrpc": "._kserve_grpc",
    "KServeHttp": "._kserve_http",
    "Metrics": "._metrics",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tritonserver.frontend' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
