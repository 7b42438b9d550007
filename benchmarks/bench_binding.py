"""One workload through this binding, in a fresh process; prints one JSON
line in the same shape as c_api_floor.

    python bench_binding.py --repository DIR --backends DIR --model NAME
        [--elements N] [--inflight N] [--requests N] [--stream-count N]

--inflight 1 runs one blocking request at a time; N > 1 keeps N requests in
flight with asyncio; --stream-count N sends COUNT=N to a decoupled model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import numpy

import tritonserver


def inputs_for(args: argparse.Namespace) -> dict[str, numpy.ndarray]:
    if args.stream_count:
        return {"COUNT": numpy.array([args.stream_count], dtype=numpy.int32)}
    data = numpy.ones(args.elements, dtype=numpy.float32)
    names = ["INPUT0", "INPUT1"] if args.model == "add_sub" else ["INPUT0"]
    return {name: data for name in names}


def run_sync(model: tritonserver.Model, inputs: dict, count: int) -> tuple[list[float], int]:
    latencies, responses = [], 0
    for _ in range(count):
        start = time.perf_counter()
        for response in model.infer(inputs=inputs):
            responses += 1 if response.outputs else 0
            del response  # like the floor: outputs are released once seen
        latencies.append(time.perf_counter() - start)
    return latencies, responses


async def run_async(model: tritonserver.Model, inputs: dict, count: int, inflight: int) -> tuple[list[float], int]:
    latencies: list[float] = []
    responses = 0
    remaining = count

    async def worker() -> None:
        nonlocal remaining, responses
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            async for response in model.async_infer(inputs=inputs):
                responses += 1 if response.outputs else 0
                del response  # like the floor: outputs are released once seen
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(worker() for _ in range(inflight)))
    return latencies, responses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repository", required=True)
    parser.add_argument("--backends", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--elements", type=int, default=16)
    parser.add_argument("--inflight", type=int, default=1)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--stream-count", type=int, default=0)
    args = parser.parse_args()

    server = tritonserver.Server(
        model_repository=args.repository,
        backend_directory=args.backends,
        model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
        log_error=True,
    ).start(wait_until_ready=True)
    model = server.load(args.model)
    inputs = inputs_for(args)

    def run(count: int) -> tuple[list[float], int, float]:
        start = time.perf_counter()
        if args.inflight == 1:
            latencies, responses = run_sync(model, inputs, count)
        else:
            latencies, responses = asyncio.run(run_async(model, inputs, count, args.inflight))
        return latencies, responses, time.perf_counter() - start

    run(max(20, args.requests // 10))  # warm-up
    latencies, responses, seconds = run(args.requests)
    latencies.sort()
    pick = lambda p: latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e6  # noqa: E731
    print(json.dumps({
        "requests_per_s": args.requests / seconds,
        "responses_per_s": responses / seconds,
        "p50_us": pick(0.5),
        "p99_us": pick(0.99),
        "seconds": seconds,
        "requests": args.requests,
    }))
    server.stop()


if __name__ == "__main__":
    main()
