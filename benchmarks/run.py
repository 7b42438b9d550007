"""`make bench`: every workload through the C API floor, this binding and
tritonclient (gRPC and HTTP against the `tritonserver` binary of the same
core), interleaved, a few repetitions each; medians and ratios go to
docs/benchmarks.md.

    python benchmarks/run.py [--reps 3] [--out docs/benchmarks.md] [--quick] [--only TEXT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Optional

import tritonserver
from tritonserver._api import _triton_core

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FLOOR = ROOT / "build" / "bench" / "c_api_floor"
IDENTITY = ROOT / "build" / "identity" / "libtriton_identity.so"
MiB = 1 << 20
# asyncio_ceiling.py shapes and their labels in the report.
ASYNCIO_REFERENCES = {"iterator": "asyncio", "api": "asyncio + API objects"}


@dataclass
class Workload:
    name: str
    model: str
    elements: int = 16
    inflight: int = 1
    requests: int = 2000
    stream_count: int = 0
    clients: bool = False  # also run through tritonclient
    # Also run the asyncio references: asyncio alone (no Triton), and the
    # floor with asyncio's own per-request time spent before each submit.
    asyncio_reference: bool = False
    target: str = ""
    results: dict[str, list[float]] = field(default_factory=dict)

    @property
    def bytes_per_request(self) -> int:
        return self.elements * 4


def workloads(quick: bool) -> list[Workload]:
    scale = 0.25 if quick else 1.0
    n = lambda count: max(10, int(count * scale))  # noqa: E731
    small = "identity 16xfp32"
    return [
        Workload(f"{small} sync", "identity_fp32", requests=n(4000), clients=True,
                 target="time <= 1.25x floor"),
        Workload(f"{small} asyncio 8", "identity_fp32", inflight=8, requests=n(30000),
                 asyncio_reference=True),
        Workload(f"{small} asyncio 64", "identity_fp32", inflight=64, requests=n(40000), clients=True,
                 target="throughput >= 0.8x floor", asyncio_reference=True),
        Workload("identity 4 MiB sync", "identity_fp32", elements=MiB, requests=n(1000), clients=True,
                 target="time <= 1.1x floor"),
        Workload("identity 4 MiB asyncio 8", "identity_fp32", elements=MiB, inflight=8, requests=n(400)),
        Workload("identity 64 MiB sync", "identity_fp32", elements=16 * MiB, requests=n(24), clients=True,
                 target="time <= 1.1x floor"),
        Workload("identity 64 MiB asyncio 8", "identity_fp32", elements=16 * MiB, inflight=8, requests=n(32)),
        Workload("python add_sub 16xfp32 sync", "add_sub", requests=n(1500), clients=True),
        Workload("python add_sub 16xfp32 asyncio 8", "add_sub", inflight=8, requests=n(2000)),
        Workload("python add_sub 16xfp32 asyncio 64", "add_sub", inflight=64, requests=n(3000)),
        Workload("python stream of 1,000 responses", "streaming", requests=n(8), stream_count=1000),
    ]


def floor_inputs(w: Workload) -> list[str]:
    if w.stream_count:
        return ["COUNT"]
    return ["INPUT0", "INPUT1"] if w.model == "add_sub" else ["INPUT0"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_json(command: list[str], env: Optional[dict] = None) -> dict:
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"{command[0]} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")


class TritonBinary:
    """The `tritonserver` executable of the nvidia-pytriton wheel, on loopback."""

    def __init__(self, install: _triton_core.CoreInstall, backends: str) -> None:
        binary = pathlib.Path(install.backend_directory).parent / "bin" / "tritonserver"
        self.http, self.grpc = free_port(), free_port()
        self.process = subprocess.Popen(
            [str(binary), "--model-repository", str(MODELS), "--backend-directory", backends,
             "--model-control-mode", "explicit", "--load-model", "identity_fp32", "--load-model", "add_sub",
             "--http-address", "127.0.0.1", "--http-port", str(self.http),
             "--grpc-address", "127.0.0.1", "--grpc-port", str(self.grpc),
             "--allow-metrics", "false", "--log-info", "false"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/v2/health/ready", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the tritonserver binary did not become ready")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--only", default="", help="run only the workloads whose name contains this")
    args = parser.parse_args()

    install = _triton_core.load_core()
    backends = pathlib.Path(tempfile.mkdtemp(prefix="bench-backends-"))
    links = _triton_core.python_backend_directory(install)
    if links:
        (backends / "python").symlink_to(pathlib.Path(links) / "python")
    (backends / "identity").mkdir()
    shutil.copy(IDENTITY, backends / "identity")
    _triton_core.prepare_stub_environment(install)  # for every child process
    companions = [install.python_backend[0]] if install.python_backend else []

    server: Optional[TritonBinary] = None
    if importlib.util.find_spec("tritonclient") is not None:
        server = TritonBinary(install, str(backends))
    else:
        print("tritonclient not installed: out-of-process rows skipped", file=sys.stderr)

    started = time.monotonic()
    items = [w for w in workloads(args.quick) if args.only in w.name]
    try:
        for rep in range(args.reps):
            for w in items:
                common = ["--model", w.model, "--requests", str(w.requests), "--inflight", str(w.inflight)]
                if w.stream_count:
                    common += ["--stream-count", str(w.stream_count)]
                else:
                    common += ["--elements", str(w.elements)]
                floor = [str(FLOOR), "--library", install.library, "--repository", str(MODELS),
                         "--backends", str(backends), *common]
                for c in companions:
                    floor += ["--companion", c]
                for name in floor_inputs(w):
                    floor += ["--input", name]
                ours = [sys.executable, str(ROOT / "benchmarks" / "bench_binding.py"),
                        "--repository", str(MODELS), "--backends", str(backends), *common]
                runs = {"floor": floor, "ours": ours}
                if w.asyncio_reference:
                    # The asyncio references first: the time per request of
                    # each is the client work a floor run spends before each
                    # submit.
                    for shape in ("iterator", "api"):
                        label = ASYNCIO_REFERENCES[shape]
                        alone = run_json([sys.executable, str(ROOT / "benchmarks" / "asyncio_ceiling.py"),
                                          "--shape", shape, "--inflight", str(w.inflight),
                                          "--requests", str(w.requests * 5)])
                        w.results.setdefault(label, []).append(alone["requests_per_s"])
                        runs["floor + " + label] = floor + ["--client-work-us", f"{alone['us_per_request']:.3f}"]
                if server is not None and w.clients:
                    client = [sys.executable, str(ROOT / "benchmarks" / "bench_client.py"), "--model", w.model,
                              "--requests", str(max(10, w.requests // 4)), "--inflight", str(w.inflight),
                              "--elements", str(w.elements)]
                    runs["grpc"] = client + ["--protocol", "grpc", "--url", f"127.0.0.1:{server.grpc}"]
                    runs["http"] = client + ["--protocol", "http", "--url", f"127.0.0.1:{server.http}"]
                for label, command in runs.items():
                    result = run_json(command)
                    rate = result["responses_per_s"] if w.stream_count else result["requests_per_s"]
                    w.results.setdefault(label, []).append(rate)
                print(f"rep {rep + 1}/{args.reps} {w.name}: "
                      + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in w.results.items()), flush=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(backends, ignore_errors=True)

    write_report(items, args, time.monotonic() - started)


def write_report(items: list[Workload], args: argparse.Namespace, seconds: float) -> None:
    def median(w: Workload, label: str) -> Optional[float]:
        values = w.results.get(label)
        return statistics.median(values) if values else None

    lines = [
        "# Benchmarks",
        "",
        "Produced by `make bench` (`python benchmarks/run.py`); do not edit by hand.",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        f"- Python {platform.python_version()}, numpy {__import__('numpy').__version__}, "
        f"Triton core {tritonserver.load_core()}",
        f"- {args.reps} repetitions per workload, interleaved (asyncio references, floor, ours, "
        f"floor + references, gRPC, HTTP), medians; "
        f"whole run {seconds:.0f} s",
        "- floor: `benchmarks/c_api_floor.cc`, the same core driven directly from C++ with a malloc allocator",
        "- rates are requests/s (responses/s for the stream); `ours/floor` > 1 means faster than the floor",
        "",
        "| workload | floor /s | ours /s | ours/floor | target | ours GB/s | gRPC /s | HTTP /s | ours/gRPC "
        "| ours/HTTP | asyncio alone /s | asyncio + API objects /s | floor + asyncio /s "
        "| floor + asyncio + API objects /s | ours/(floor + asyncio + API objects) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    references = [ASYNCIO_REFERENCES["iterator"], ASYNCIO_REFERENCES["api"]]
    references += ["floor + " + label for label in references]
    for w in items:
        floor, ours, grpc, http = (median(w, k) for k in ("floor", "ours", "grpc", "http"))
        alone, api, floor_alone, floor_api = (median(w, k) for k in references)
        fmt = lambda v: f"{v:,.0f}" if v else "–"  # noqa: E731
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "–"  # noqa: E731
        gbps = f"{ours * w.bytes_per_request * 2 / 1e9:.2f}" if ours and w.elements >= MiB else "–"
        lines.append(
            f"| {w.name} | {fmt(floor)} | {fmt(ours)} | {ratio(ours, floor)} | {w.target or '–'} | {gbps} "
            f"| {fmt(grpc)} | {fmt(http)} | {ratio(ours, grpc)} | {ratio(ours, http)} "
            f"| {fmt(alone)} | {fmt(api)} | {fmt(floor_alone)} | {fmt(floor_api)} | {ratio(ours, floor_api)} |"
        )
    lines += [
        "",
        "GB/s counts input plus output bytes per request. Python-backend rows include the backend's",
        "own inter-process hop (the stub), which the floor pays too.",
        "",
        "asyncio references (the asyncio rows of the identity model), measured in the same repetitions:",
        "*asyncio alone* is `benchmarks/asyncio_ceiling.py`: CPython's asyncio with no Triton, each",
        "request a future resolved from an eventfd reader and consumed with `async for`, the most any",
        "asyncio client can do; *asyncio + API objects* also makes, per request, the objects the official",
        "API hands out (an InferenceRequest; an InferenceResponse with a Tensor and its MemoryBuffer).",
        "*floor + X* is the floor with X's time per request (1 / its rate) busy-waited on the submitting",
        "thread before each submit (`c_api_floor --client-work-us`): the C API driven by a client whose",
        "only per-request work is X. See the notes below for why that costs the core far more than X.",
        "",
    ]
    notes = ROOT / "benchmarks" / "NOTES.md"
    if notes.is_file():
        lines += [notes.read_text()]
    pathlib.Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
