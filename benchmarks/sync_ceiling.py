"""The sync ceiling: what CPython alone costs per request for the pattern
`Model.infer` serves one request at a time, with no Triton and no binding;
prints one JSON line in the same shape as c_api_floor.

    python sync_ceiling.py [--requests N]

Each "request" makes the objects the official API hands out for a request
of the identity workload (an InferenceRequest; an InferenceResponse with one
Tensor and its MemoryBuffer: the public dataclasses of this package, made
by `ceiling_parts.api_objects`; the core is not loaded), iterates the
response with a `for` loop and reads its output. Every binding of this API
pays at least this per request; `make bench` busy-waits it on the floor's
submitting thread before each submit ("floor + API objects"), which is the
C API driven by a client whose only per-request work is the API's objects.
"""

from __future__ import annotations

import argparse
import time

from ceiling_parts import api_objects, print_result


def run(count: int) -> float:
    make_request, make_response = api_objects()
    start = time.perf_counter()
    for _ in range(count):
        make_request()
        for response in (make_response(),):
            response.outputs["OUTPUT0"]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200000)
    args = parser.parse_args()
    run(max(1000, args.requests // 10))  # warm-up
    seconds = run(args.requests)
    print_result(args.requests, seconds)


if __name__ == "__main__":
    main()
