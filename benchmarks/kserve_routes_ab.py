"""Process CPU per request of `KServeRoutes.handle()` for the KServe infer
route (identity_fp32, FP32[16], binary tensors in and out; and the same
request with JSON data), with the native fast path (fast_infer) on and off,
in interleaved rounds of one process: no web server, the routes alone.

    python benchmarks/kserve_routes_ab.py --backends DIR [--rounds 5] [--requests 5000] [--profile]

Prints one line per round and path, then the medians. --profile prints
cProfile's top entries of the fast path instead. DIR holds
identity/libtriton_identity.so.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pathlib
import pstats
import statistics
import time

import numpy

import tritonserver
from tritonserver._kserve import fast_infer
from tritonserver._kserve.routes import KServeRoutes

MODELS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "models"
PATH = "/v2/models/identity_fp32/infer"


def requests() -> dict[str, tuple[bytes, dict[str, str]]]:
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [16],
                                     "parameters": {"binary_data_size": 64}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    binary = header + numpy.arange(16, dtype=numpy.float32).tobytes()
    as_json = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [16],
                                      "data": list(range(16))}]}).encode()
    return {"binary": (binary, {"inference-header-content-length": str(len(header)),
                                "content-type": "application/octet-stream"}),
            "json": (as_json, {})}


async def run(routes: KServeRoutes, body: bytes, headers: dict[str, str], count: int) -> None:
    for _ in range(count):
        reply = await routes.handle("POST", PATH, headers, body)
        assert reply.status == 200, reply.body


async def measure(routes: KServeRoutes, body: bytes, headers: dict[str, str], count: int) -> tuple[float, float]:
    """CPU and wall microseconds per request."""
    await run(routes, body, headers, count // 10)  # warm-up
    cpu, wall = time.process_time(), time.perf_counter()
    await run(routes, body, headers, count)
    return (time.process_time() - cpu) / count * 1e6, (time.perf_counter() - wall) / count * 1e6


async def main(args: argparse.Namespace) -> None:
    server = tritonserver.Server(model_repository=str(MODELS), backend_directory=args.backends,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT, log_error=True)
    server.start(wait_until_ready=True)
    try:
        server.load("identity_fp32")
        routes = KServeRoutes(server)
        bodies = requests()
        if args.profile:
            body, headers = bodies["binary"]
            await run(routes, body, headers, 500)
            profile = cProfile.Profile()
            profile.enable()
            await run(routes, body, headers, args.requests)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(20)
            return
        results: dict[tuple[str, bool], list[float]] = {}
        for round_ in range(args.rounds):
            for name, (body, headers) in bodies.items():
                for fast in ((True, False) if round_ % 2 == 0 else (False, True)):
                    fast_infer.enabled = fast
                    cpu, wall = await measure(routes, body, headers, args.requests)
                    results.setdefault((name, fast), []).append(cpu)
                    print(f"round {round_} {name:6} fast={fast!s:5} cpu {cpu:6.1f} us/req  wall {wall:6.1f} us/req")
        fast_infer.enabled = True
        for (name, fast), values in sorted(results.items()):
            print(f"median {name:6} fast={fast!s:5} cpu {statistics.median(values):6.1f} us/req "
                  f"(min {min(values):.1f}, max {max(values):.1f})")
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--profile", action="store_true")
    asyncio.run(main(parser.parse_args()))
