"""Per-request cost of small requests (identity_fp32, 16 x fp32) through
whichever `tritonserver` is first on sys.path: for A/B runs of two builds
(PYTHONPATH=<other build's site dir> selects the other one), interleaved.

    python benchmarks/small_ab.py --backends DIR [--mode sync|async] [--requests N]
        [--inflight 64] [--profile]

Prints one JSON line: wall and calling-thread CPU microseconds per request,
and (sync) p50/p99 latency of single requests. --profile prints cProfile's
top entries instead. DIR holds identity/libtriton_identity.so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import time

import numpy

import tritonserver

MODELS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "models"


def sync_loop(model: tritonserver.Model, inputs: dict, count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        for response in model.infer(inputs=inputs):
            response.outputs["OUTPUT0"]
        latencies.append(time.perf_counter() - start)
    return latencies


async def async_loop(model: tritonserver.Model, inputs: dict, count: int, inflight: int) -> None:
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            async for response in model.async_infer(inputs=inputs):
                response.outputs["OUTPUT0"]

    await asyncio.gather(*(worker() for _ in range(inflight)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", required=True)
    parser.add_argument("--mode", choices=("sync", "async"), default="sync")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    server = tritonserver.Server(
        model_repository=str(MODELS), backend_directory=args.backends,
        model_control_mode=tritonserver.ModelControlMode.EXPLICIT, log_error=True,
    ).start(wait_until_ready=True)
    model = server.load("identity_fp32")
    inputs = {"INPUT0": numpy.ones(16, dtype=numpy.float32)}

    def run(count: int) -> tuple[list[float], float, float]:
        start, cpu = time.perf_counter(), time.thread_time()
        latencies: list[float] = []
        if args.mode == "sync":
            latencies = sync_loop(model, inputs, count)
        else:
            asyncio.run(async_loop(model, inputs, count, args.inflight))
        return latencies, time.perf_counter() - start, time.thread_time() - cpu

    run(max(200, args.requests // 10))  # warm-up
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        run(args.requests)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    else:
        latencies, seconds, cpu = run(args.requests)
        latencies.sort()
        pick = lambda p: latencies[int(p * len(latencies))] * 1e6 if latencies else None  # noqa: E731
        print(json.dumps({
            "build": str(pathlib.Path(tritonserver.__file__).parent.parent),
            "mode": args.mode, "wall_us": seconds / args.requests * 1e6,
            "cpu_us": cpu / args.requests * 1e6, "p50_us": pick(0.5), "p99_us": pick(0.99),
        }))
    server.stop()


if __name__ == "__main__":
    main()
