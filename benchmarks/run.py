"""`make bench`: every workload through the C API floor, this binding and
tritonclient (gRPC and HTTP against the `tritonserver` binary of the same
core), interleaved, a few repetitions each; medians and ratios go to
docs/benchmarks.md. Also: sync requests from 1, 2 and 4 Python threads,
and the start-up cost (import + start to ready, and resident memory).

The floor runs each workload both ways it can wait for completions
(`--wait block`: a condition variable; `--wait spin`: polling), several
short measured rounds each (`--rounds`): a blocked waiter pays a wake-up
per completion, which on these VMs costs 5-50 us when it lands on an idle
core, so the floor has a slow and a fast regime. Both are reported; ratios
are taken against the faster (the floor at its best).

    python benchmarks/run.py [--reps 3] [--rounds 3] [--out docs/benchmarks.md] [--quick] [--only TEXT]
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from startup import run as measure_startup  # noqa: E402  (benchmarks/startup.py)
from pytriton_compare import BEGIN as PYTRITON_BEGIN, END as PYTRITON_END  # noqa: E402
from frontends import BEGIN as FRONTENDS_BEGIN, END as FRONTENDS_END  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
FLOOR = ROOT / "build" / "bench" / "c_api_floor"
IDENTITY = ROOT / "build" / "identity" / "libtriton_identity.so"
MiB = 1 << 20
# asyncio_ceiling.py shapes and their labels in the report.
ASYNCIO_REFERENCES = {"iterator": "asyncio", "api": "asyncio + API objects"}
# sync_ceiling.py's label in the report.
SYNC_REFERENCE = "sync API objects"


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
    # Also run the sync reference: the API's objects alone (no Triton), and
    # the floor with their per-request time spent before each submit.
    sync_reference: bool = False
    target: str = ""
    threads: int = 1  # Python threads sending blocking requests (ours only)
    # A python-backend model: ours runs it through the stub ("ours") and
    # in-process ("ours in-process"); add_sub also as a bound function
    # ("ours bound", Server.bind).
    python_model: bool = False
    # Every run's JSON line, by label ("floor block" and "floor spin" hold
    # one line per round).
    results: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def bytes_per_request(self) -> int:
        return self.elements * 4


def workloads(quick: bool) -> list[Workload]:
    scale = 0.25 if quick else 1.0
    n = lambda count: max(10, int(count * scale))  # noqa: E731
    small = "identity 16xfp32"
    return [
        Workload(f"{small} sync", "identity_fp32", requests=n(4000), clients=True,
                 target="time <= 1.25x floor", sync_reference=True),
        Workload(f"{small} asyncio 8", "identity_fp32", inflight=8, requests=n(30000),
                 asyncio_reference=True),
        Workload(f"{small} asyncio 64", "identity_fp32", inflight=64, requests=n(40000), clients=True,
                 target="throughput >= 0.8x floor", asyncio_reference=True),
        # 3,000 (0.5 s): runs of 1,000 were too short for a steady rate on a shared VM.
        Workload("identity 4 MiB sync", "identity_fp32", elements=MiB, requests=n(3000), clients=True,
                 target="time <= 1.1x floor", sync_reference=True),
        Workload("identity 4 MiB asyncio 8", "identity_fp32", elements=MiB, inflight=8, requests=n(400)),
        Workload("identity 64 MiB sync", "identity_fp32", elements=16 * MiB, requests=n(24), clients=True,
                 target="time <= 1.1x floor"),
        Workload("identity 64 MiB asyncio 8", "identity_fp32", elements=16 * MiB, inflight=8, requests=n(32)),
        Workload("python add_sub 16xfp32 sync", "add_sub", requests=n(1500), clients=True, python_model=True),
        Workload("python add_sub 16xfp32 asyncio 8", "add_sub", inflight=8, requests=n(2000), python_model=True),
        Workload("python add_sub 16xfp32 asyncio 64", "add_sub", inflight=64, requests=n(3000), python_model=True),
        Workload("python stream of 1,000 responses", "streaming", requests=n(8), stream_count=1000, python_model=True),
    ] + [
        Workload(f"{small} sync, {t} threads", "identity_fp32", requests=n(4000), threads=t)
        for t in (1, 2, 4)
    ]


def floor_inputs(w: Workload) -> list[str]:
    if w.stream_count:
        return ["COUNT"]
    return ["INPUT0", "INPUT1"] if w.model == "add_sub" else ["INPUT0"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_jsons(command: list[str], env: Optional[dict] = None) -> list[dict]:
    """Every JSON line the command prints (one per measured round)."""
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    found = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not found:
        raise RuntimeError(f"{command[0]} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return found


def run_json(command: list[str], env: Optional[dict] = None) -> dict:
    return run_jsons(command, env)[-1]


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


def make_backend_folder(install: _triton_core.CoreInstall) -> pathlib.Path:
    """A temporary backend folder: python/ (links to the core's python
    backend, when it has one) and identity/ (our C++ test backend)."""
    backends = pathlib.Path(tempfile.mkdtemp(prefix="bench-backends-"))
    links = _triton_core.python_backend_directory(install)
    if links:
        (backends / "python").symlink_to(pathlib.Path(links) / "python")
    (backends / "identity").mkdir()
    shutil.copy(IDENTITY, backends / "identity")
    return backends


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per floor run")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--only", default="", help="run only the workloads whose name contains one of these "
                        "(comma-separated)")
    args = parser.parse_args()

    install = _triton_core.load_core()
    backends = make_backend_folder(install)
    _triton_core.prepare_stub_environment(install)  # for every child process
    companions = [install.python_backend[0]] if install.python_backend else []

    server: Optional[TritonBinary] = None
    if importlib.util.find_spec("tritonclient") is not None:
        server = TritonBinary(install, str(backends))
    else:
        print("tritonclient not installed: out-of-process rows skipped", file=sys.stderr)

    started = time.monotonic()
    items = [w for w in workloads(args.quick) if any(part in w.name for part in args.only.split(","))]
    startup: list[dict] = []
    try:
        for rep in range(args.reps):
            startup.append(measure_startup("plain"))
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
                        "--repository", str(MODELS), "--backends", str(backends), *common,
                        "--threads", str(w.threads)]
                if w.threads > 1 or "threads" in w.name:
                    w.results.setdefault("ours", []).append(run_json(ours))
                    print(f"rep {rep + 1}/{args.reps} {w.name}: ours {w.results['ours'][-1]['requests_per_s']:,.0f}/s",
                          flush=True)
                    continue
                this_rep = {}
                for wait in ("block", "spin"):
                    rounds = run_jsons(floor + ["--wait", wait, "--rounds", str(args.rounds)])
                    w.results.setdefault(f"floor {wait}", []).extend(rounds)
                    this_rep[wait] = statistics.median(rate(w, r) for r in rounds)
                runs = {"ours": ours}
                if w.python_model:
                    runs["ours"] = ours + ["--python-models", "stub"]
                    runs["ours in-process"] = ours + ["--python-models", "in-process"]
                    if w.model == "add_sub":
                        runs["ours bound"] = ours + ["--bind"]
                # The references wait the way the floor was faster this time.
                floor = floor + ["--wait", max(this_rep, key=lambda k: this_rep[k])]
                if w.asyncio_reference:
                    # The asyncio references first: the time per request of
                    # each is the client work a floor run spends before each
                    # submit.
                    for shape in ("iterator", "api"):
                        label = ASYNCIO_REFERENCES[shape]
                        alone = run_json([sys.executable, str(ROOT / "benchmarks" / "asyncio_ceiling.py"),
                                          "--shape", shape, "--inflight", str(w.inflight),
                                          "--requests", str(w.requests * 5)])
                        w.results.setdefault(label, []).append(alone)
                        runs["floor + " + label] = floor + ["--client-work-us", f"{alone['us_per_request']:.3f}"]
                if w.sync_reference:
                    alone = run_json([sys.executable, str(ROOT / "benchmarks" / "sync_ceiling.py"),
                                      "--requests", str(w.requests * 20)])
                    w.results.setdefault(SYNC_REFERENCE, []).append(alone)
                    runs["floor + " + SYNC_REFERENCE] = floor + ["--client-work-us", f"{alone['us_per_request']:.3f}"]
                if server is not None and w.clients:
                    client = [sys.executable, str(ROOT / "benchmarks" / "bench_client.py"), "--model", w.model,
                              "--requests", str(max(10, w.requests // 4)), "--inflight", str(w.inflight),
                              "--elements", str(w.elements)]
                    runs["grpc"] = client + ["--protocol", "grpc", "--url", f"127.0.0.1:{server.grpc}"]
                    runs["http"] = client + ["--protocol", "http", "--url", f"127.0.0.1:{server.http}"]
                for label, command in runs.items():
                    w.results.setdefault(label, []).append(run_json(command))
                print(f"rep {rep + 1}/{args.reps} {w.name}: "
                      + ", ".join(f"{k} {rate(w, v[-1]):,.0f}/s" for k, v in w.results.items()), flush=True)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(backends, ignore_errors=True)

    write_report(items, startup, args, time.monotonic() - started)


def rate(w: Workload, result: dict) -> float:
    return result["responses_per_s"] if w.stream_count else result["requests_per_s"]


def floor_rounds(w: Workload) -> list[dict]:
    """Every measured round of the floor, both ways of waiting."""
    return w.results.get("floor spin", []) + w.results.get("floor block", [])


def floor_best_round(w: Workload) -> Optional[dict]:
    """The floor's single fastest round (its fast regime, when any round
    reached it)."""
    return max(floor_rounds(w), key=lambda r: rate(w, r), default=None)


def floor_best_p50(w: Workload) -> Optional[float]:
    """The lowest p50 of any floor round: as seen by its client where the
    floor measures that (one request at a time), else submission to
    callback."""
    values = [r.get("seen_p50_us") or r.get("p50_us") for r in floor_rounds(w)]
    return min((v for v in values if v), default=None)


def floor_regimes(w: Workload) -> tuple[Optional[tuple[str, dict]], Optional[tuple[str, dict]]]:
    """(fast, slow): the floor's two ways of waiting, each as (mode, its
    median round), the faster first."""
    modes = []
    for wait in ("spin", "block"):
        rounds = sorted(w.results.get(f"floor {wait}", []), key=lambda r: rate(w, r))
        if rounds:
            modes.append((wait, rounds[(len(rounds) - 1) // 2]))
    modes.sort(key=lambda m: -rate(w, m[1]))
    return (modes[0] if modes else None), (modes[1] if len(modes) > 1 else None)


def identity_twin(items: list[Workload], w: Workload) -> Optional[Workload]:
    """The identity 16xfp32 workload sent the same way as `w` (None for a
    stream or when it did not run)."""
    return next((i for i in items if i.model == "identity_fp32" and i.elements == 16 and not w.stream_count
                 and i.inflight == w.inflight and i.threads == 1 and "threads" not in i.name), None)


def python_model_section(items: list[Workload], median) -> list[str]:  # noqa: ANN001
    """Python models three ways (stub, in-process, a bound function) beside
    the identity C++ backend sent the same way, all through this binding."""
    rows = [w for w in items if w.python_model]
    if not rows:
        return []
    fmt = lambda v: f"{v:,.0f}" if v else "–"  # noqa: E731
    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "–"  # noqa: E731
    lines = [
        "",
        "## Python models: in-process, stub, bound function",
        "",
        "The same python-backend model through this binding three ways: *stub* (the python backend's",
        "stub process, `python_models=\"stub\"`), *in-process* (its `model.py` run in this interpreter,",
        "`python_models=\"in-process\"`), *bound* (the same arithmetic as a Python function served with",
        "`Server.bind`); *identity* is the identity C++ backend sent the same way (no Python model code:",
        "the ceiling). Rates /s (responses/s for the stream); p50/p99 in us per request (per stream).",
        "Targets (issues 28, 24): in-process >= 3x stub and >= 0.5x identity; bound >= 0.5x identity.",
        "",
        "| workload | stub /s | in-process /s | bound /s | identity /s | in-process/stub | in-process/identity "
        "| bound/identity | bound/in-process | stub p50/p99 | in-process p50/p99 | bound p50/p99 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for w in rows:
        twin = identity_twin(items, w)
        stub, inproc, bound = (median(w, k) for k in ("ours", "ours in-process", "ours bound"))
        identity = median(twin, "ours") if twin else None

        def tail(label: str) -> str:
            p50, p99 = median(w, label, "p50_us"), median(w, label, "p99_us")
            return f"{p50:,.0f} / {p99:,.0f}" if p50 and p99 else "–"

        lines.append(f"| {w.name} | {fmt(stub)} | {fmt(inproc)} | {fmt(bound)} | {fmt(identity)} "
                     f"| {ratio(inproc, stub)} | {ratio(inproc, identity)} | {ratio(bound, identity)} "
                     f"| {ratio(bound, inproc)} | {tail('ours')} | {tail('ours in-process')} | {tail('ours bound')} |")
    return lines


def write_report(items: list[Workload], startup: list[dict], args: argparse.Namespace, seconds: float) -> None:
    def median(w: Workload, label: str, key: str = "") -> Optional[float]:
        values = [r[key] if key else rate(w, r) for r in w.results.get(label, []) if (r.get(key) is not None if key else True)]
        return statistics.median(values) if values else None

    fmt = lambda v: f"{v:,.0f}" if v else "–"  # noqa: E731
    us = lambda v: f"{v:,.1f}" if v else "–"  # noqa: E731
    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "–"  # noqa: E731
    main = [w for w in items if w.threads == 1 and "threads" not in w.name]
    threaded = [w for w in items if w.threads > 1 or "threads" in w.name]
    def rounds_span(w: Workload, wait: str) -> str:
        rates = sorted(rate(w, r) for r in w.results.get(f"floor {wait}", []))
        return f"{rates[0]:,.0f}-{rates[-1]:,.0f}" if rates else "–"

    lines = [
        "# Benchmarks",
        "",
        "Produced by `make bench` (`python benchmarks/run.py`); do not edit by hand.",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        f"- Python {platform.python_version()}, numpy {__import__('numpy').__version__}, "
        f"Triton core {os.path.basename(tritonserver.load_core())}",
        f"- {args.reps} repetitions per workload, interleaved (asyncio references, floor, ours, "
        f"floor + references, gRPC, HTTP), medians; the floor {args.rounds} measured rounds per run, "
        f"both ways of waiting; whole run {seconds:.0f} s",
        "- floor: `benchmarks/c_api_floor.cc`, the same core driven directly from C++ with a malloc "
        "allocator (blocks of 1 MiB and more reused)",
        "- rates are requests/s (responses/s for the stream); `ours/floor` > 1 means faster than the floor",
        "",
        "## Throughput",
        "",
        "*floor fast* is the floor at its best: of its two ways of waiting for completions (`spin`: the",
        "submitting thread polls; `block`: it sleeps on a condition variable and every completion wakes",
        "it), the faster, median of its rounds; *floor slow* is the other. Ratios are to the fast one.",
        "*spin rounds* and *block rounds* are the ranges of the floor's single rounds each way (on these",
        "VMs a round can run in a fast or a slow regime whichever way it waits); *best round* is the",
        "fastest single round, the floor at its very best.",
        "",
        "| workload | floor fast /s | floor slow /s | spin rounds /s | block rounds /s | ours /s "
        "| ours/floor fast | ours/floor slow | ours/best round | target | ours GB/s | gRPC /s | HTTP /s "
        "| ours/gRPC | ours/HTTP |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for w in main:
        fast, slow = floor_regimes(w)
        fast_rate = rate(w, fast[1]) if fast else None
        slow_rate = rate(w, slow[1]) if slow else None
        ours, grpc, http = (median(w, k) for k in ("ours", "grpc", "http"))
        gbps = f"{ours * w.bytes_per_request * 2 / 1e9:.2f}" if ours and w.elements >= MiB else "–"
        best = floor_best_round(w)
        lines.append(
            f"| {w.name} | {fmt(fast_rate)} ({fast[0] if fast else '–'}) | {fmt(slow_rate)} "
            f"({slow[0] if slow else '–'}) | {rounds_span(w, 'spin')} | {rounds_span(w, 'block')} "
            f"| {fmt(ours)} | {ratio(ours, fast_rate)} | {ratio(ours, slow_rate)} "
            f"| {ratio(ours, rate(w, best) if best else None)} | {w.target or '–'} | {gbps} "
            f"| {fmt(grpc)} | {fmt(http)} | {ratio(ours, grpc)} | {ratio(ours, http)} |"
        )
    lines += [
        "",
        "GB/s counts input plus output bytes per request. Python-backend rows include the backend's",
        "own inter-process hop (the stub), which the floor pays too.",
        "",
        "## Latency and fairness",
        "",
        "Microseconds per request, medians over the repetitions. *floor fast p50/p99* is the fast",
        "floor's, from submission to the final response's callback (the floor's own measure); *seen*",
        "is from the start of building the request to the submitting thread seeing it complete",
        "(one-at-a-time rows only), which is what *ours* measures (from `infer()` to the end of the",
        "iteration). *floor best p50* is the lowest p50 of any single floor round (seen, where the",
        "floor measures that; else to the callback): the floor in its fast regime. *per coroutine* is",
        "the fewest and the most requests one of the asyncio coroutines completed (they share one",
        "count: equal when asyncio is fair).",
        "",
        "| workload | floor fast p50 | floor fast p99 | floor fast seen p50 | floor fast seen p99 "
        "| floor best p50 | ours p50 | ours p99 | ours p50 / floor fast p50 "
        "| ours p50 / floor fast seen p50 | ours p50 / floor best p50 "
        "| per coroutine min | per coroutine max |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in main:
        if w.stream_count:
            continue
        fast, _ = floor_regimes(w)
        wait = fast[0] if fast else "spin"
        fp50, fp99 = median(w, f"floor {wait}", "p50_us"), median(w, f"floor {wait}", "p99_us")
        sp50, sp99 = median(w, f"floor {wait}", "seen_p50_us"), median(w, f"floor {wait}", "seen_p99_us")
        p50, p99 = median(w, "ours", "p50_us"), median(w, "ours", "p99_us")
        cmin, cmax = median(w, "ours", "completed_min"), median(w, "ours", "completed_max")
        best = floor_best_p50(w)
        lines.append(
            f"| {w.name} | {us(fp50)} | {us(fp99)} | {us(sp50)} | {us(sp99)} | {us(best)} | {us(p50)} "
            f"| {us(p99)} | {ratio(p50, fp50)} | {ratio(p50, sp50)} | {ratio(p50, best)} "
            f"| {fmt(cmin)} | {fmt(cmax)} |"
        )
    lines += python_model_section(items, median)
    lines += [
        "",
        "## Sync reference",
        "",
        "| workload | ours /s | ours p50 | API objects alone /s | floor + API objects /s "
        "| its p50 | its seen p50 | ours/(floor + API objects) | ours p50 / its seen p50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    reference = "floor + " + SYNC_REFERENCE
    for w in main:
        if not w.sync_reference:
            continue
        ours, alone, floor_api = (median(w, k) for k in ("ours", SYNC_REFERENCE, reference))
        p50 = median(w, "ours", "p50_us")
        rp50, rseen = median(w, reference, "p50_us"), median(w, reference, "seen_p50_us")
        lines.append(f"| {w.name} | {fmt(ours)} | {us(p50)} | {fmt(alone)} | {fmt(floor_api)} | {us(rp50)} "
                     f"| {us(rseen)} | {ratio(ours, floor_api)} | {ratio(p50, rseen)} |")
    lines += [
        "",
        "*API objects alone* is `benchmarks/sync_ceiling.py`: per request, the objects the official API",
        "hands out (an InferenceRequest; an InferenceResponse with a Tensor and its MemoryBuffer), made",
        "and iterated in a plain loop with no Triton: what every binding of this API pays at least.",
        "*floor + API objects* is the floor (waiting its faster way) with that time per request",
        "busy-waited on the submitting thread before each submit. The floor's fast regime needs the next",
        "request to follow the last response within a few microseconds (Triton's backend thread is then",
        "still awake; on this VM a few microseconds of client work between requests already moves its",
        "callback p50 from ~5 us to ~20 us: benchmarks/NOTES.md), so this, not the bare floor, is what a",
        "Python client's latency can be held to.",
    ]
    references = [ASYNCIO_REFERENCES["iterator"], ASYNCIO_REFERENCES["api"]]
    references += ["floor + " + label for label in references]
    lines += [
        "",
        "## asyncio references",
        "",
        "| workload | ours /s | asyncio alone /s | asyncio + API objects /s | floor + asyncio /s "
        "| floor + asyncio + API objects /s | ours/(floor + asyncio + API objects) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for w in main:
        if not w.asyncio_reference:
            continue
        ours = median(w, "ours")
        alone, api, floor_alone, floor_api = (median(w, k) for k in references)
        lines.append(f"| {w.name} | {fmt(ours)} | {fmt(alone)} | {fmt(api)} | {fmt(floor_alone)} "
                     f"| {fmt(floor_api)} | {ratio(ours, floor_api)} |")
    lines += [
        "",
        "*asyncio alone* is `benchmarks/asyncio_ceiling.py`: CPython's asyncio with no Triton, each",
        "request a future resolved from an eventfd reader and consumed with `async for`, the most any",
        "asyncio client can do; *asyncio + API objects* also makes, per request, the objects the official",
        "API hands out (an InferenceRequest; an InferenceResponse with a Tensor and its MemoryBuffer).",
        "*floor + X* is the floor (waiting its faster way) with X's time per request (1 / its rate) busy-waited",
        "on the submitting thread before each submit (`c_api_floor --client-work-us`): the C API driven",
        "by a client whose only per-request work is X.",
        "",
    ]
    if threaded:
        one = next((median(w, "ours") for w in threaded if w.threads == 1), None)
        lines += [
            "## Threads",
            "",
            "Sync requests (identity 16xfp32) from N Python threads at once, one request at a time each;",
            "the GIL is released around every wait and every core call that can block.",
            "",
            "| threads | ours /s | vs 1 thread | p50 us | p99 us |",
            "|---:|---:|---:|---:|---:|",
        ]
        for w in threaded:
            total = median(w, "ours")
            lines.append(f"| {w.threads} | {fmt(total)} | {ratio(total, one)} | {us(median(w, 'ours', 'p50_us'))} "
                         f"| {us(median(w, 'ours', 'p99_us'))} |")
        lines.append("")
    if startup:
        def mid(key: str) -> float:
            return statistics.median(r[key] for r in startup)

        lines += [
            "## Start-up",
            "",
            "`benchmarks/startup.py` in a fresh interpreter: `import tritonserver`, then",
            "`Server(...).start(wait_until_ready=True)` on an empty repository (EXPLICIT mode); medians of "
            f"{len(startup)} runs, one per repetition (`python benchmarks/startup.py --runs 15 --phases`",
            "for more runs and the steps of start).",
            "",
            "| import ms | start ms | import + start ms | import + start CPU ms | RSS added by import MiB "
            "| RSS added by start MiB |",
            "|---:|---:|---:|---:|---:|---:|",
            f"| {mid('import_ms'):.0f} | {mid('start_ms'):.0f} | {mid('total_ms'):.0f} "
            f"| {mid('total_cpu_ms'):.0f} | {mid('rss_import_mib'):.1f} | {mid('rss_start_mib'):.1f} |",
            "",
        ]
    # The sections benchmarks/pytriton_compare.py (make bench-pytriton) and
    # benchmarks/frontends.py (make bench-frontends) write are kept as they were.
    out = pathlib.Path(args.out)
    previous = out.read_text() if out.is_file() else ""
    for begin, end in ((PYTRITON_BEGIN, PYTRITON_END), (FRONTENDS_BEGIN, FRONTENDS_END)):
        if begin in previous and end in previous:
            lines += [previous[previous.index(begin):previous.index(end) + len(end)], ""]
    notes = ROOT / "benchmarks" / "NOTES.md"
    if notes.is_file():
        lines += [notes.read_text()]
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
