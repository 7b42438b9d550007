"""What the two ceilings (asyncio_ceiling.py, sync_ceiling.py) share: the
official API's objects for one request of the identity workload, and the
JSON line they print (the shape of c_api_floor's)."""

from __future__ import annotations

import json
from typing import Any


def api_objects() -> tuple[Any, Any]:
    """(make a request, make its response) with the official API's objects."""
    import numpy

    import tritonserver as ts

    inputs = {"INPUT0": numpy.ones(16, dtype=numpy.float32)}
    output = numpy.ones(16, dtype=numpy.float32)
    address, nbytes = output.ctypes.data, output.nbytes
    fp32, cpu = ts.DataType.FP32, ts.MemoryType.CPU

    def request() -> Any:
        return ts.InferenceRequest(model=None, inputs=inputs)  # type: ignore[arg-type]

    def response() -> Any:
        tensor = ts.Tensor(fp32, [16], ts.MemoryBuffer(address, cpu, 0, nbytes, output))
        return ts.InferenceResponse(None, None, {}, {"OUTPUT0": tensor}, None, None, True)  # type: ignore[arg-type]

    return request, response


def print_result(requests: int, seconds: float) -> None:
    """One JSON line: the rate and the time per request."""
    print(json.dumps({
        "requests_per_s": requests / seconds,
        "responses_per_s": requests / seconds,
        "us_per_request": seconds / requests * 1e6,
        "seconds": seconds,
        "requests": requests,
    }))
