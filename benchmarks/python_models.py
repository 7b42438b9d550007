"""Sync request rate of python models: in-process vs through the stub, with
the identity C++ backend as the reference. add_sub (and identity_fp32) over
FP32[16], one request at a time, rounds interleaved so the shared machine's
drift hits each way alike. Needs numpy<2 for the stub (make build's .venv):

    .venv/bin/python benchmarks/python_models.py [--rounds 5] [--requests 3000]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import tempfile
import time

import numpy

import tritonserver
from tritonserver._api import _triton_core

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
IDENTITY = ROOT / "build" / "identity" / "libtriton_identity.so"


def rate(model: tritonserver.Model, inputs: dict[str, numpy.ndarray], count: int) -> tuple[float, float]:
    """(requests per second, median latency in us) over `count` requests."""
    latencies = []
    start = time.perf_counter()
    for _ in range(count):
        t = time.perf_counter()
        for _response in model.infer(inputs=inputs):
            pass
        latencies.append(time.perf_counter() - t)
    return count / (time.perf_counter() - start), statistics.median(latencies) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    install = _triton_core.load_core()
    backends = pathlib.Path(tempfile.mkdtemp(prefix="bench-backends-"))
    links = _triton_core.python_backend_directory(install)
    if links is not None:
        (backends / "python").symlink_to(pathlib.Path(links) / "python")
    (backends / "identity").mkdir()
    shutil.copy(IDENTITY, backends / "identity" / IDENTITY.name)
    data = numpy.arange(16, dtype=numpy.float32)
    servers, cases = [], {}
    for mode in ("in-process", "stub"):
        server = tritonserver.Server(model_repository=str(MODELS), backend_directory=str(backends),
                                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                                     python_models=mode, server_id=f"bench-{mode}")
        server.start(wait_until_ready=True)
        servers.append(server)
        cases[f"add_sub {mode}"] = (server.load("add_sub"), {"INPUT0": data, "INPUT1": data})
        if mode == "stub":
            cases["identity_fp32 (C++)"] = (server.load("identity_fp32"), {"INPUT0": data})
    for model, inputs in cases.values():
        rate(model, inputs, 300)  # warm-up
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, (model, inputs) in cases.items():
            results[name].append(rate(model, inputs, args.requests))
    print(f"sync, FP32[16], {args.rounds} interleaved rounds of {args.requests} requests")
    print(f"{'case':24} {'median req/s':>13} {'range req/s':>18} {'median p50 us':>14}")
    for name, runs in results.items():
        rates = [r for r, _ in runs]
        print(f"{name:24} {statistics.median(rates):13,.0f} {min(rates):8,.0f}-{max(rates):<9,.0f} "
              f"{statistics.median([p for _, p in runs]):14.1f}")
    for server in servers:
        server.stop()


if __name__ == "__main__":
    main()
