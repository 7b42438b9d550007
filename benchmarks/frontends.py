"""The network frontends against NVIDIA's: perf_analyzer 2.51 (`make
perf-analyzer`) as the client of every server, over HTTP, gRPC and gRPC
streaming (ModelStreamInfer, `--streaming`; "grpc-stream") at concurrency
1 and 16, FP32[16] inputs, on four workloads:

- identity_fp32 (tests/models; the identity C++ backend: the transport
  alone) and add_sub (tests/models; a python model): NVIDIA's
  tritonserver 2.51 binary (nvidia-pytriton 0.7.0's bin/tritonserver; the
  python model on the python backend's stub) against this package's
  `python -m tritonserver serve` (the same flags; python models
  in-process), with its default transports and, for each other transport
  serve offers (`--http-transport uvicorn`; `--grpc-transport X` once serve
  has that flag), the same server on that transport for that protocol;
- decoupled streaming (tests/models' `streaming`, a decoupled python
  model answering each request with STREAM_RESPONSES responses): the same
  servers, over gRPC streams only;
- bound add_sub: one PyTriton server program (`Triton().bind` of an
  add_sub function over FP32[16], no batching: the `pytriton-server` role
  of benchmarks/pytriton_compare.py) run on PyTriton 0.7 (.venv-pytriton:
  its tritonserver binary, the proxy model's stub, the function in the
  program's process) and moved here (the same program, its imports
  redirected to tritonserver.pytriton: one process).

All servers are up at once and the rounds interleave (each cell runs on
every server that serves it before the next cell; the servers' order
alternates by round). Reported per cell and server: the median over rounds
of perf_analyzer's throughput and p50 latency, and the server's CPU per
inference: its processes' user+sys time over the run (/proc: the server's
process and its descendants) divided by the inferences the server counted
(the model's inference_count; the PyTriton program counts its function's
calls); then the ratio to the reference (the binary; PyTriton for the
bound function) and the target. Start to ready: process start until the
server answers ready with its models loaded (median of --starts starts);
RSS: every process of the server (the binary and its stubs; PyTriton's
Python process, its tritonserver and stubs), when ready and after the
rounds. A server that cannot run (the binary or .venv-pytriton absent, a
transport serve does not offer) is left out, saying why.

    python benchmarks/frontends.py [--rounds 3] [--window-ms 2000] [--starts 3]
        [--servers all|NAME,...] [--workloads all|NAME,...]
        [--pytriton-python .venv-pytriton/bin/python]
        [--quick] [--out docs/benchmarks.md] [--no-write] [--note TEXT]

Writes its marked section of docs/benchmarks.md (`make bench-frontends`)
and the raw figures to build/bench-frontends.json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import pytriton_compare  # noqa: E402  (the PyTriton server program, process trees)

# The marked section of docs/benchmarks.md this script owns (run.py keeps it).
BEGIN = "<!-- frontends: begin -->"
END = "<!-- frontends: end -->"
PERF_ANALYZER = ROOT / "build" / "perf_analyzer" / "perf_analyzer"
PERF_ANALYZER_TIMEOUT_S = 60  # one run of one cell
SHAPES = {"identity_fp32": ["--shape", "INPUT0:16"],
          "add_sub": ["--shape", "INPUT0:16", "--shape", "INPUT1:16"]}
# The decoupled workload: tests/models' `streaming` python model answering
# each request with STREAM_RESPONSES responses (perf_analyzer's input data
# file, written at the start of a run).
STREAM_RESPONSES = 16
STREAM_DATA = ROOT / "build" / "bench-frontends-streaming.json"
# workload -> (the model's name on the servers, perf_analyzer's flags for its inputs)
WORKLOADS = {"identity_fp32": ("identity_fp32", SHAPES["identity_fp32"]),
             "add_sub": ("add_sub", SHAPES["add_sub"]),
             "decoupled streaming": ("streaming", ["--async", "--input-data", str(STREAM_DATA)]),
             "bound add_sub": ("add_sub_plain", SHAPES["add_sub"])}
# The workloads served on some protocols only (a decoupled model: streams).
WORKLOAD_PROTOCOLS = {"decoupled streaming": ("grpc-stream",)}
# workload -> (the reference server, {protocol: the target ratio to it});
# "grpc-stream" is gRPC's ModelStreamInfer (perf_analyzer --streaming), no target.
TARGETS = {"identity_fp32": ("binary", {"http": 0.8, "grpc": 0.6}),
           "add_sub": ("binary", {"http": 1.2, "grpc": 1.2}),
           "decoupled streaming": ("binary", {}),
           "bound add_sub": ("pytriton", {"http": 8.0, "grpc": 8.0})}
FLAGS = ["--model-control-mode", "explicit", "--log-info", "false",
         *[arg for model in ("identity_fp32", "add_sub", "streaming") for arg in ("--load-model", model)]]
PACKAGE_FLAGS = ["--python-models", "in-process"]


class Running:
    """A server up, as the rounds use it: its urls (tritonclient's form),
    its process, how long it took to be ready, and how it counts a model's
    inferences."""

    def __init__(self, http_url: str, grpc_url: str, pid: int, ready_seconds: float,
                 count: Callable[[str], int], access_token: Optional[str] = None) -> None:
        self.http_url, self.grpc_url, self.pid, self.ready_seconds = http_url, grpc_url, pid, ready_seconds
        self.count = count
        self.access_token = access_token  # of its restricted endpoints (PyTriton's), or None

    def header_flags(self, protocol: str) -> list[str]:
        """perf_analyzer's -H flags for the restricted endpoints it calls
        (statistics), in PyTriton's header names."""
        if self.access_token is None:
            return []
        name = "triton-access-token" if protocol == "http" else "triton-grpc-protocol-triton-access-token"
        return ["-H", f"{name}:{self.access_token}"]

    def processes(self) -> list[dict]:
        """Its process and descendants: pid, kind, RSS (MiB)."""
        return pytriton_compare.process_tree(self.pid)


@dataclass
class Contender:
    name: str                       # as --servers names it
    label: str                      # as the tables name it
    workloads: tuple[str, ...]
    protocols: tuple[str, ...]
    start: Callable[[], contextlib.AbstractContextManager[Running]]


def statistics_count(http_url: str) -> Callable[[str], int]:
    def count(model: str) -> int:
        import tritonclient.http

        client = tritonclient.http.InferenceServerClient(http_url)
        try:
            stats = client.get_inference_statistics(model)["model_stats"]
            return sum(int(e.get("inference_count", 0)) for e in stats)
        finally:
            client.close()
    return count


def triton_process(command: list[str], flags: list[str]) -> Callable[[], contextlib.AbstractContextManager[Running]]:
    """The binary or serve, with FLAGS + `flags` (tests/common.py's server_process)."""
    @contextlib.contextmanager
    def start() -> Iterator[Running]:
        import common

        with common.server_process(command, common.MODELS, [*FLAGS, *flags]) as server:
            yield Running(server.http_url, server.grpc_url, server.pid, server.ready_seconds,
                          statistics_count(server.http_url))
    return start


def pytriton_program(python: Optional[str]) -> Callable[[], contextlib.AbstractContextManager[Running]]:
    """The PyTriton server program serving add_sub_plain: on PyTriton
    (.venv-pytriton's `python`) or moved here (None)."""
    @contextlib.contextmanager
    def start() -> Iterator[Running]:
        import common

        ports = common.free_port(), common.free_port(), common.free_port()
        child = pytriton_compare.start_pytriton_server(python, *ports, models="add_sub_plain")
        try:
            token = child.read()["access_token"]  # ready: Triton().run() returned, the model loaded
            ready = time.perf_counter() - child.started
            total = [0]

            def count(model: str) -> int:  # the function's calls so far (`stats` answers those since the last)
                child.send("stats")
                total[0] += sum(int(size) * n for size, n in child.read()[model].items())
                return total[0]

            yield Running(f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}", child.process.pid, ready, count,
                          token)
        finally:
            child.close()
    return start


def serve_transports(package: list[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """{protocol: the transports serve offers (its --PROTOCOL-transport
    choices)} and {protocol: the one it uses by default}."""
    probe = subprocess.run([*package, "--help"], capture_output=True, text=True, cwd=ROOT / "tests", timeout=120)
    if probe.returncode != 0:
        raise RuntimeError(f"`python -m tritonserver serve --help` exited {probe.returncode}: "
                           f"{(probe.stderr or probe.stdout).strip()[-300:]}")
    offered = {protocol: (m.group(1).split(",") if (m := re.search(rf"--{protocol}-transport \{{([^}}]*)\}}",
                                                                   probe.stdout)) else [])
               for protocol in ("http", "grpc")}
    defaults = subprocess.run(
        [sys.executable, "-c", "from tritonserver.frontend import KServeHttp, KServeGrpc\n"
         "print(KServeHttp.Options().transport, getattr(KServeGrpc.Options(), 'transport', 'grpcio'))"],
        capture_output=True, text=True, check=True, cwd=ROOT / "tests").stdout.split()
    return offered, dict(zip(("http", "grpc"), defaults))


def contenders(pytriton_python: str) -> tuple[list[Contender], dict[str, str]]:
    """Every server this script knows, and those left out (name -> why)."""
    import common
    import pytest

    found: list[Contender] = []
    left_out: dict[str, str] = {}
    models = ("identity_fp32", "add_sub", "decoupled streaming")
    try:
        found.append(Contender("binary", "NVIDIA's binary 2.51", models, ("http", "grpc", "grpc-stream"),
                               triton_process(common.reference_command(), [])))
    except pytest.skip.Exception as e:
        left_out["binary"] = str(e)
    package = common.package_serve_command()
    try:
        offered, default = serve_transports(package)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        left_out["package"] = str(e)
    else:
        found.append(Contender("package", f"package (HTTP {default['http']}, gRPC {default['grpc']})", models,
                               ("http", "grpc", "grpc-stream"), triton_process(package, PACKAGE_FLAGS)))
        for protocol in ("http", "grpc"):
            others = [t for t in offered[protocol] if t != default[protocol]]
            for transport in others:
                found.append(Contender(f"package-{protocol}-{transport}",
                                       f"package, --{protocol}-transport {transport}", models,
                                       (protocol, "grpc-stream") if protocol == "grpc" else (protocol,),
                                       triton_process(package, [*PACKAGE_FLAGS, f"--{protocol}-transport",
                                                                transport])))
            if not offered[protocol]:
                left_out[f"package-{protocol}-*"] = (f"serve has no --{protocol}-transport flag: one {protocol} "
                                                     f"transport ({default[protocol]})")
    python = os.path.abspath(pytriton_python)
    if os.path.isfile(python):
        found.append(Contender("pytriton", "PyTriton 0.7", ("bound add_sub",), ("http", "grpc"),
                               pytriton_program(python)))
    else:
        left_out["pytriton"] = f"{python} is missing: `make .venv-pytriton/.ready` makes it"
    found.append(Contender("pytriton-moved", "tritonserver.pytriton (the same program)", ("bound add_sub",),
                           ("http", "grpc"), pytriton_program(None)))
    return found, left_out


def perf_analyzer(server: Running, workload: str, protocol: str, concurrency: int, window_ms: int,
                  window_requests: Optional[int] = None) -> dict:
    """One perf_analyzer level: three windows of `window_ms`, or, with
    `window_requests`, of that many requests (used at concurrency 16, where
    perf_analyzer's time windows stalled while the servers ran in a
    scheduling group of their own: benchmarks/NOTES.md). Run again (at most
    3 runs) when it reports an unstable measurement (exit 2) or runs past
    PERF_ANALYZER_TIMEOUT_S. Returns throughput, p50 (us), server CPU per
    inference (us), or an error."""
    model, shapes = WORKLOADS[workload]
    url = server.http_url if protocol == "http" else server.grpc_url
    windows = (["-p", str(window_ms)] if window_requests is None else
               ["--measurement-mode", "count_windows", "--measurement-request-count", str(window_requests)])
    interface = ["-i", "grpc", "--streaming"] if protocol == "grpc-stream" else ["-i", protocol]
    argv = [str(PERF_ANALYZER), "-m", model, "-u", url, *interface, "--concurrency-range", str(concurrency),
            "-s", "1000", "-r", "3", *windows, *shapes, *server.header_flags(protocol)]
    for attempt in range(3):
        pids = [p["pid"] for p in server.processes()]
        count, cpu = server.count(model), pytriton_compare.cpu_seconds(pids)
        try:
            run = subprocess.run(argv, capture_output=True, text=True, timeout=PERF_ANALYZER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            continue
        cpu, count = pytriton_compare.cpu_seconds(pids) - cpu, server.count(model) - count
        if run.returncode == 0:
            throughput = re.search(r"^\s*Throughput: ([0-9.]+)", run.stdout, re.M)
            p50 = re.search(r"^\s*p50 latency: ([0-9]+)", run.stdout, re.M)
            assert throughput and p50, run.stdout
            return {"throughput": float(throughput.group(1)), "p50_us": int(p50.group(1)),
                    "cpu_us_per_infer": cpu / count * 1e6 if count else None, "inferences": count}
        if run.returncode != 2:
            return {"error": f"perf_analyzer exited {run.returncode}: {(run.stdout + run.stderr).strip()[-500:]}"}
    return {"error": f"perf_analyzer gave no stable measurement in 3 runs of at most {PERF_ANALYZER_TIMEOUT_S} s"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--servers", default="all", help="'all' or names: binary, package, package-http-uvicorn, "
                        "package-grpc-X, pytriton, pytriton-moved")
    parser.add_argument("--workloads", default="all", help="'all' or names: " + ", ".join(WORKLOADS))
    parser.add_argument("--pytriton-python", default=str(ROOT / ".venv-pytriton" / "bin" / "python"))
    parser.add_argument("--quick", action="store_true", help="one round, 500 ms windows, one start, c1 only")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--no-write", action="store_true", help="print the section, leave the file")
    parser.add_argument("--note", default="", help="a sentence added to the section (e.g. the tree measured)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))  # common.py: the server processes
    concurrencies = [1, 16]
    if args.quick:
        args.rounds, args.window_ms, args.starts, concurrencies = 1, 500, 1, [1]
    if not PERF_ANALYZER.is_file():
        sys.exit(f"{PERF_ANALYZER} is missing: run `make perf-analyzer`")
    found, left_out = contenders(args.pytriton_python)
    if args.servers != "all":
        wanted = args.servers.split(",")
        unknown = set(wanted) - {c.name for c in found} - set(left_out)
        if unknown:
            sys.exit(f"--servers: no server named {', '.join(sorted(unknown))} "
                     f"(known: {', '.join(c.name for c in found)})")
        found = [c for c in found if c.name in wanted]
        left_out = {name: why for name, why in left_out.items() if name in wanted}
    began = time.monotonic()
    startup: dict[str, list[float]] = collections.defaultdict(list)
    rss_ready: dict[str, list[list[dict]]] = collections.defaultdict(list)
    for contender in list(found):
        try:
            for _ in range(args.starts):
                with contender.start() as server:
                    startup[contender.name].append(server.ready_seconds)
                    rss_ready[contender.name].append(server.processes())
        except (AssertionError, RuntimeError) as e:  # it does not start: its log's last line
            log = str(e).split(" before it was ready: ", 1)[-1].strip().splitlines() or [""]
            left_out[contender.name] = "it did not start: " + log[-1][:200]
            found.remove(contender)
    for name, why in left_out.items():
        print(f"== {name}: left out ({why})", file=sys.stderr)
    if not found:
        sys.exit("no server to measure")
    STREAM_DATA.parent.mkdir(exist_ok=True)
    STREAM_DATA.write_text(json.dumps({"data": [{"COUNT": [STREAM_RESPONSES], "DELAY_MS": [0]}]}))
    workloads = list(WORKLOADS) if args.workloads == "all" else args.workloads.split(",")
    if set(workloads) - set(WORKLOADS):
        sys.exit(f"--workloads: no workload named {', '.join(sorted(set(workloads) - set(WORKLOADS)))} "
                 f"(known: {', '.join(WORKLOADS)})")
    cells = [(workload, protocol, c) for workload in workloads for protocol in ("http", "grpc", "grpc-stream")
             for c in concurrencies
             if protocol in WORKLOAD_PROTOCOLS.get(workload, (protocol,))
             and any(workload in s.workloads and protocol in s.protocols for s in found)]
    results: dict = {f"{w}|{p}|{c}|{s.name}": [] for w, p, c in cells for s in found
                     if w in s.workloads and p in s.protocols}
    rss_after: dict[str, list[list[dict]]] = collections.defaultdict(list)
    loads: list[float] = []
    with contextlib.ExitStack() as stack:
        running = {s.name: stack.enter_context(s.start()) for s in found}
        for index in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = found if index % 2 == 0 else found[::-1]
            for workload, protocol, c in cells:
                for s in order:
                    key = f"{workload}|{protocol}|{c}|{s.name}"
                    if key in results:
                        # past concurrency 1: count windows of about window_ms at this server's rate at 1
                        first = results.get(f"{workload}|{protocol}|{concurrencies[0]}|{s.name}") or [{}]
                        rate = first[-1].get("throughput") if c != concurrencies[0] else None
                        window_requests = max(500, int(rate * args.window_ms / 1000)) if rate else None
                        result = perf_analyzer(running[s.name], workload, protocol, c, args.window_ms,
                                               window_requests)
                        results[key].append(result)
                        print(f"round {index + 1} {workload} {protocol} c{c} {s.name}: {result}", file=sys.stderr)
            for name, server in running.items():
                rss_after[name].append(server.processes())
    loads.append(os.getloadavg()[0])
    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "rounds": args.rounds, "window_ms": args.window_ms, "load": loads, "startup": startup,
              "rss_ready": rss_ready, "rss_after": rss_after, "results": results, "left_out": left_out,
              "seconds": time.monotonic() - began, "cpus": os.cpu_count(), "note": args.note,
              "servers": {s.name: s.label for s in found}}
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "bench-frontends.json").write_text(json.dumps(report, indent=1))
    lines = section(report, cells)
    print("\n".join(lines))
    if not args.no_write:
        pytriton_compare.write_section(pathlib.Path(args.out), lines, BEGIN, END)


def median(rows: list[dict], key: str) -> Optional[float]:
    values = [row[key] for row in rows if row.get(key) is not None]
    return statistics.median(values) if values else None


def rss_text(trees: list[list[dict]]) -> str:
    """The median total RSS (MiB) over `trees`, and its processes by kind."""
    parts, total = pytriton_compare.rss_by_kind(trees)
    return f"{total:,.0f} ({parts})"


def section(report: dict, cells: list) -> list[str]:
    def fmt(value: Optional[float], digits: int = 0) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    labels = report["servers"]
    load = ", ".join(f"{x:.1f}" for x in report["load"])
    lines = [
        "## Network frontends against NVIDIA's binary and PyTriton (`make bench-frontends`)",
        "",
        f"benchmarks/frontends.py, {report['date']}: perf_analyzer 2.51 (`-s 1000 -r 3 -p {report['window_ms']}`: "
        "three fixed windows at concurrency 1; at 16 three windows of as many requests as the same server "
        "answered in one such window at 1 in that round, `--measurement-mode count_windows`; FP32[16] inputs) as the "
        "client of every server, all servers up at once; "
        f"{report['rounds']} interleaved rounds, medians; the whole run {report['seconds'] / 60:.0f} min on "
        f"{report['cpus']} CPUs shared by client, servers and other work (load average at each round's start, "
        f"then at the end: {load}). identity_fp32 (the identity C++ backend) and add_sub (a python model): "
        "NVIDIA's tritonserver 2.51 binary (nvidia-pytriton 0.7.0; add_sub on the python backend's stub) "
        "against this package's `python -m tritonserver serve` (python models in-process) on its default "
        "transports and on each other transport serve offers. Bound add_sub: one PyTriton server program "
        "(`Triton().bind` of an add_sub function, no batching; benchmarks/pytriton_compare.py's "
        "`pytriton-server`) run on PyTriton 0.7 and moved here (its imports redirected to "
        "tritonserver.pytriton). Server CPU: the server's processes' user+sys time over a run (stubs and "
        "PyTriton's tritonserver included) per inference the server counted. Ratio: throughput over the "
        "reference's (the binary; PyTriton for the bound function), of the medians (per round in brackets); "
        "target: the least ratio issue 40 asks for. grpc-stream: gRPC's ModelStreamInfer (perf_analyzer "
        "`--streaming`, one stream per concurrent context; no target). Decoupled streaming: the `streaming` "
        f"python model (tests/models) answering each request with {STREAM_RESPONSES} responses, over gRPC "
        "streams only (`--async`); infer/s counts requests, the responses are that many times more."
        + (f" {report['note']}" if report["note"] else ""),
        "",
    ]
    for name, why in report["left_out"].items():
        lines += [f"Left out: {name} ({why}).", ""]
    lines += ["| workload | protocol | concurrency | server | infer/s | p50 us | server CPU us/infer "
              "| ratio | target |", "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for workload, protocol, c in cells:
        reference, targets = TARGETS[workload]
        reference_rate = median(report["results"].get(f"{workload}|{protocol}|{c}|{reference}", []), "throughput")
        for name, label in labels.items():
            rows = report["results"].get(f"{workload}|{protocol}|{c}|{name}")
            if rows is None:
                continue
            rate = median(rows, "throughput")
            errors = [r["error"] for r in rows if "error" in r]
            failed = f" ({len(errors)} failed)" if errors else ""
            if name == reference:
                ratio, target = "reference", ""
            else:
                ratio = f"{rate / reference_rate:.2f}x" if rate and reference_rate else "-"
                references = report["results"].get(f"{workload}|{protocol}|{c}|{reference}", [])
                per_round = [f"{mine['throughput'] / theirs['throughput']:.1f}"
                             for mine, theirs in zip(rows, references)
                             if "throughput" in mine and "throughput" in theirs]
                ratio += f" ({', '.join(per_round)})" if len(per_round) > 1 else ""
                target = f"{targets[protocol]}x" if protocol in targets else "-"
            lines.append(f"| {workload} | {protocol} | {c} | {label} | {fmt(rate)}{failed} "
                         f"| {fmt(median(rows, 'p50_us'))} | {fmt(median(rows, 'cpu_us_per_infer'))} "
                         f"| {ratio} | {target} |")
    lines += ["", "| server | start to ready ms | RSS MiB when ready (processes) | RSS MiB after the rounds "
              "(processes) |", "|---|---:|---|---|"]
    for name, label in labels.items():
        seconds = report["startup"][name]
        after = report["rss_after"].get(name)
        lines.append(f"| {label} | {statistics.median(seconds) * 1000:,.0f} | {rss_text(report['rss_ready'][name])} "
                     f"| {rss_text(after) if after else '-'} |")
    lines += ["", f"Start to ready: process start until ready with its models loaded (the binary and serve: "
              "identity_fp32, add_sub and streaming, GET /v2/health/ready polled; the PyTriton program: its bound function, "
              f"`Triton().run()` returned), median of {len(next(iter(report['startup'].values())))} starts. "
              "RSS: the server's process and its descendants, medians (when ready: over the starts; after: "
              "over the rounds); a kind with xN: N processes together.", ""]
    return lines


if __name__ == "__main__":
    main()
