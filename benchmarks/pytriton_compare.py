"""`make bench-pytriton`: `Server.bind` against NVIDIA's PyTriton, serving
the same Python function (add_sub over FP32[16]: OUTPUT0 = INPUT0 + INPUT1,
OUTPUT1 = INPUT0 - INPUT1), with the identity C++ backend as a reference.

    make bench-pytriton          # makes .venv-pytriton and builds .venv first
    .venv/bin/python benchmarks/pytriton_compare.py [--rounds 5] [--quick]
        [--pytriton-python .venv-pytriton/bin/python] [--out docs/benchmarks.md]

Contenders, each round started afresh and the two sides alternating in
order from round to round (medians over rounds; ratios also per round):

- PyTriton (nvidia-pytriton 0.7.0, in .venv-pytriton, its own numpy<2):
  `Triton().bind` in a server process of that venv's Python (which starts
  the tritonserver binary, whose python-backend stubs run PyTriton's proxy
  model), two models: `add_sub_plain` (no batching, one request per call)
  and `add_sub_batch` (`@batch`, max_batch_size 16, dynamic batcher). Each
  row is a client process of that venv with N threads, one
  `pytriton.client.ModelClient` each (HTTP or gRPC), `infer_sample` in a
  loop.
- the same PyTriton server program moved here (`tritonserver.pytriton`):
  the `pytriton-server` role run by .venv's Python with its `pytriton`
  imports redirected (tests/pytriton_redirect.py, as
  `make test-pytriton-examples` runs PyTriton's examples), its endpoints
  this package's frontends; the same PyTriton client processes (from
  .venv-pytriton) against it.
- this package (in .venv): one process that starts a Server with python
  models in-process, binds the same function twice (max_batch_size 0, and
  16 with dynamic batching), and sends requests itself: sync `infer` from 1
  and 16 threads, `async_infer` with 16 and 64 in flight (the loops of
  benchmarks/bench_binding.py). The identity C++ backend
  (tests/models/identity_fp32) in the same process is the reference row.

Start-up is from spawning the server process to its models ready; RSS is
read from /proc for every process of each side (PyTriton: its Python
process, the tritonserver binary, its stubs; the client processes apart).
The batch sizes each bound function saw are counted per row.

The script runs itself in its other roles (`bind-worker` with .venv's
Python; `pytriton-server`, `pytriton-client` with .venv-pytriton's); only
the standard library and numpy are imported at module level, so every role
runs in either venv.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Optional

import numpy

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
ELEMENTS = 16
MAX_BATCH = 16
# The marked section of docs/benchmarks.md this script owns (run.py keeps it).
BEGIN = "<!-- pytriton_compare: begin -->"
END = "<!-- pytriton_compare: end -->"

# ---------------------------------------------------------------- shared helpers


def add_sub(INPUT0: numpy.ndarray, INPUT1: numpy.ndarray) -> dict[str, numpy.ndarray]:
    """The function both sides serve."""
    return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}


def summary(latencies: list[float], seconds: float, **extra: Any) -> dict[str, Any]:
    """One row's result: rate and latency percentiles (us)."""
    latencies = sorted(latencies)

    def pick(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e6

    return {"requests_per_s": len(latencies) / seconds, "p50_us": pick(0.5), "p99_us": pick(0.99),
            "requests": len(latencies), **extra}


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far (those gone count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


# What a process of either side is, by a part of its command line.
PROCESS_KINDS = (("--redirect", "Python process (tritonserver.pytriton)"),
                 ("pytriton-server", "PyTriton's Python process"), ("bind-worker", "Python process (server and client)"),
                 ("-m tritonserver serve", "Python process (serve)"),
                 ("triton_python_backend_stub", "python-backend stub"), ("resource_tracker", "multiprocessing tracker"),
                 ("multiprocessing", "multiprocessing child"), ("tritonserver", "tritonserver binary"))


def process_kind(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline") as f:
        command = f.read().replace("\0", " ")
    return next((kind for part, kind in PROCESS_KINDS if part in command),
                os.path.basename(command.split(" ")[0]))


def process_tree(pid: int) -> list[dict[str, Any]]:
    """`pid` and its descendants: pid, kind (see PROCESS_KINDS), RSS (MiB)."""
    parents: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            # The command name is in parentheses and may hold spaces.
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            parents[ppid].append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            name = process_kind(current)
            found.append({"pid": current, "name": name, "rss_mib": rss_mib(current)})
        except OSError:
            continue
        todo += parents.get(current, [])
    return found


class Records:
    """Where a child role writes its JSON lines: the original stdout, kept
    for them alone once `isolate` ran (PyTriton's log thread prints
    tritonserver's output in fragments, which would split a record)."""

    stream: IO[str] = sys.stdout

    @classmethod
    def isolate(cls) -> None:
        cls.stream = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)  # native code and child processes: stderr
        sys.stdout = sys.stderr  # Python's prints too


def emit(record: dict[str, Any]) -> None:
    Records.stream.write(json.dumps(record) + "\n")
    Records.stream.flush()


def read_record(stream: IO[str]) -> dict[str, Any]:
    """The next JSON line a child prints (other lines are passed through)."""
    while True:
        line = stream.readline()
        if not line:
            raise RuntimeError("the child process exited before answering")
        if line.startswith("{"):
            record: dict[str, Any] = json.loads(line)
            return record
        print("   |", line.rstrip(), file=sys.stderr)


# ---------------------------------------------------------------- PyTriton side (.venv-pytriton)


def pytriton_server(args: argparse.Namespace) -> None:
    """Serve add_sub through PyTriton; answer `stats` (batch sizes seen since
    the last `stats`) and `quit` on stdin. With --redirect (.venv's Python),
    the same program runs on tritonserver.pytriton."""
    if args.redirect:
        sys.path.insert(0, str(ROOT / "tests"))
        import pytriton_redirect

        pytriton_redirect.install()
    from pytriton.decorators import batch
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig

    Records.isolate()
    seen: dict[str, list[int]] = {name: [] for name in args.models.split(",")}

    def plain(requests: list[Any]) -> list[dict[str, numpy.ndarray]]:
        seen["add_sub_plain"].append(len(requests))
        return [add_sub(r["INPUT0"], r["INPUT1"]) for r in requests]

    @batch
    def batched(INPUT0: numpy.ndarray, INPUT1: numpy.ndarray) -> dict[str, numpy.ndarray]:
        seen["add_sub_batch"].append(len(INPUT0))
        return add_sub(INPUT0, INPUT1)

    tensors = ([Tensor(name=n, dtype=numpy.float32, shape=(ELEMENTS,)) for n in ("INPUT0", "INPUT1")],
               [Tensor(name=n, dtype=numpy.float32, shape=(ELEMENTS,)) for n in ("OUTPUT0", "OUTPUT1")])
    config = TritonConfig(http_address="127.0.0.1", http_port=args.http_port, grpc_address="127.0.0.1",
                          grpc_port=args.grpc_port, metrics_port=args.metrics_port, allow_metrics=False,
                          **({"http_transport": args.http_transport} if args.http_transport else {}))
    with Triton(config=config) as triton:
        if "add_sub_plain" in seen:
            triton.bind(model_name="add_sub_plain", infer_func=plain, inputs=tensors[0], outputs=tensors[1],
                        config=ModelConfig(batching=False))
        if "add_sub_batch" in seen:
            triton.bind(model_name="add_sub_batch", infer_func=batched, inputs=tensors[0], outputs=tensors[1],
                        config=ModelConfig(max_batch_size=MAX_BATCH,
                                           batcher=DynamicBatcher(max_queue_delay_microseconds=0)))
        triton.run()
        # The token of its restricted endpoints (statistics: perf_analyzer reads them).
        emit({"ready": True, "access_token": triton.get_access_token()})
        for line in sys.stdin:
            command = line.split()
            if command == ["stats"]:
                emit({name: collections.Counter(sizes) for name, sizes in seen.items()})
                for sizes in seen.values():
                    sizes.clear()
            elif command[:1] == ["inprocess"]:  # inprocess <model> <concurrency> <requests> [asyncio]
                from pytriton.client import AsyncioModelClient, ModelClient

                model, concurrency, requests = command[1], int(command[2]), int(command[3])
                if command[4:] == ["asyncio"]:
                    emit(asyncio_client_rows(lambda: AsyncioModelClient("inprocess://", model, init_timeout_s=60),
                                             concurrency, requests))
                else:
                    emit(client_rows(lambda: ModelClient("inprocess://", model, init_timeout_s=60), concurrency,
                                     requests))
            elif command == ["quit"]:
                break


def pytriton_client(args: argparse.Namespace) -> None:
    """`--concurrency` threads, one ModelClient each, `infer_sample` in a loop."""
    from pytriton.client import ModelClient

    emit(client_rows(lambda: ModelClient(args.url, args.model, init_timeout_s=60), args.concurrency, args.requests))


def client_rows(make_client: Callable[[], Any], concurrency: int, requests: int) -> dict[str, Any]:
    """`concurrency` threads, one client of `make_client` each, `infer_sample`
    in a loop (`requests` in all, after a warm-up); the row's summary, with
    this process's CPU time per request."""
    sample = numpy.ones(ELEMENTS, dtype=numpy.float32)
    share = max(1, requests // concurrency)
    start_line = threading.Barrier(concurrency + 1)
    latencies: list[float] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with make_client() as client:
                for _ in range(max(5, share // 10)):  # warm-up
                    client.infer_sample(INPUT0=sample, INPUT1=sample)
                start_line.wait()
                mine = []
                for _ in range(share):
                    t = time.perf_counter()
                    client.infer_sample(INPUT0=sample, INPUT1=sample)
                    mine.append(time.perf_counter() - t)
                with lock:
                    latencies.extend(mine)
        except BaseException as e:  # reported below; the barrier must not hang
            errors.append(e)
            start_line.abort()

    threads = [threading.Thread(target=work) for _ in range(concurrency)]
    for t in threads:
        t.start()
    try:
        start_line.wait()
    except threading.BrokenBarrierError:
        pass
    started, cpu = time.perf_counter(), time.process_time()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    cpu = time.process_time() - cpu
    return summary(latencies, time.perf_counter() - started, client_rss_mib=rss_mib(os.getpid()),
                   client_cpu_us=cpu / max(1, len(latencies)) * 1e6)


def asyncio_client_rows(make_client: Callable[[], Any], concurrency: int, requests: int) -> dict[str, Any]:
    """client_rows for an asyncio client: `concurrency` tasks on one event
    loop, one client of `make_client` each, awaiting `infer_sample` in a
    loop."""
    import asyncio

    sample = numpy.ones(ELEMENTS, dtype=numpy.float32)
    share = max(1, requests // concurrency)
    latencies: list[float] = []

    async def work(client: Any, count: int, timed: bool) -> None:
        for _ in range(count):
            t = time.perf_counter()
            await client.infer_sample(INPUT0=sample, INPUT1=sample)
            if timed:
                latencies.append(time.perf_counter() - t)

    async def run() -> tuple[float, float]:
        clients = [make_client() for _ in range(concurrency)]
        try:
            await asyncio.gather(*(work(c, max(5, share // 10), False) for c in clients))  # warm-up
            started, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(work(c, share, True) for c in clients))
            return time.perf_counter() - started, time.process_time() - cpu
        finally:
            for client in clients:
                await client.close()

    seconds, cpu = asyncio.run(run())
    return summary(latencies, seconds, client_rss_mib=rss_mib(os.getpid()),
                   client_cpu_us=cpu / max(1, len(latencies)) * 1e6)


# ---------------------------------------------------------------- this package's side (.venv)


def bind_worker(args: argparse.Namespace) -> None:
    """One process: a Server with add_sub bound twice and identity_fp32
    loaded; runs every row of ours, one JSON line each."""
    import asyncio

    import tritonserver
    from tritonserver import TensorSpec

    from bench_binding import run_async, run_sync, run_threads  # benchmarks/bench_binding.py

    Records.isolate()
    seen: list[int] = []

    def bound(INPUT0: numpy.ndarray, INPUT1: numpy.ndarray) -> dict[str, numpy.ndarray]:
        seen.append(len(INPUT0) if INPUT0.ndim == 2 else 1)
        return add_sub(INPUT0, INPUT1)

    server = tritonserver.Server(model_repository=args.repository, backend_directory=args.backends,
                                 python_models="in-process",
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT, log_error=True)
    server.start(wait_until_ready=True)
    inputs = [TensorSpec(n, numpy.float32, (ELEMENTS,)) for n in ("INPUT0", "INPUT1")]
    outputs = [TensorSpec(n, numpy.float32, (ELEMENTS,)) for n in ("OUTPUT0", "OUTPUT1")]
    models = {
        "bind mbs 0": server.bind("add_sub_plain", bound, inputs=inputs, outputs=outputs),
        f"bind mbs {MAX_BATCH}": server.bind("add_sub_batch", bound, inputs=inputs, outputs=outputs,
                                             max_batch_size=MAX_BATCH),
        "identity C++": server.load("identity_fp32"),
    }
    emit({"ready": True})

    data = numpy.ones(ELEMENTS, dtype=numpy.float32)
    for prefix, model in models.items():
        sample = {"INPUT0": data} if prefix.startswith("identity") else {"INPUT0": data, "INPUT1": data}
        if prefix.endswith(str(MAX_BATCH)):
            sample = {name: value[None, :] for name, value in sample.items()}
        shapes: list[tuple[str, Callable[[int], list[float]]]] = [
            ("sync c1", lambda n: run_sync(model, sample, n)[0]),
            ("sync 16 threads", lambda n: run_threads(model, sample, n, 16)[0]),
            ("asyncio 16", lambda n: asyncio.run(run_async(model, sample, n, 16))[0]),
            ("asyncio 64", lambda n: asyncio.run(run_async(model, sample, n, 64))[0]),
        ]
        for shape, run in shapes:
            count = args.requests * (1 if shape == "sync c1" else 2)
            run(max(50, count // 10))  # warm-up
            seen.clear()
            started = time.perf_counter()
            latencies = run(count)
            seconds = time.perf_counter() - started
            emit({"row": f"{prefix}, {shape}", **summary(latencies, seconds, batches=collections.Counter(seen))})
    emit({"done": True})
    sys.stdin.readline()  # the orchestrator reads our RSS first
    server.stop()


# ---------------------------------------------------------------- orchestration (.venv)


@dataclass
class Results:
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: collections.defaultdict(list))
    startup_s: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    # Per round: the processes of each side with their RSS.
    processes: dict[str, list[list[dict[str, Any]]]] = field(default_factory=lambda: collections.defaultdict(list))
    # The largest PyTriton client process, per side and round.
    client_rss_mib: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    load: list[float] = field(default_factory=list)  # the 1-minute load average as each round starts

    def median(self, row: str, key: str = "requests_per_s") -> float:
        return statistics.median(r[key] for r in self.rows[row])


class Child:
    """A child process speaking JSON lines on stdout, commands on stdin."""

    def __init__(self, command: list[str], env: Optional[dict[str, str]] = None) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env, cwd=HERE)
        assert self.process.stdout is not None and self.process.stdin is not None
        self.stdout, self.stdin = self.process.stdout, self.process.stdin

    def read(self) -> dict[str, Any]:
        return read_record(self.stdout)

    def send(self, line: str) -> None:
        self.stdin.write(line + "\n")
        self.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send("quit")
                self.process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()


MOVED = "tritonserver.pytriton"  # the PyTriton server program on this package


def pytriton_env(python: str) -> dict[str, str]:
    """The environment of a process of .venv-pytriton's `python`: under
    pyenv's CPython the stub finds libpython only through LD_LIBRARY_PATH."""
    libdir = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def start_pytriton_server(python: Optional[str], http_port: int, grpc_port: int, metrics_port: int,
                          models: str = "add_sub_plain,add_sub_batch", http_transport: str = "") -> Child:
    """The PyTriton server program (the `pytriton-server` role) serving
    `models`: on PyTriton with .venv-pytriton's `python`, or, with None,
    moved here (this Python, its imports redirected; its HTTP endpoint on
    `http_transport`, "" for the default). Read its first record
    (`{"ready": true}`) to wait for its models."""
    command = ([python, __file__, "pytriton-server"] if python is not None
               else [sys.executable, __file__, "pytriton-server", "--redirect", "--http-transport", http_transport])
    return Child([*command, "--http-port", str(http_port), "--grpc-port", str(grpc_port),
                  "--metrics-port", str(metrics_port), "--models", models],
                 pytriton_env(python) if python is not None else None)


def pytriton_round(args: argparse.Namespace, results: Results, free_port: Callable[[], int],
                   side: str = "PyTriton", transport: str = "", protocols: tuple[str, ...] = ("http", "grpc")) -> None:
    """PyTriton's client processes against the PyTriton server program, run
    on PyTriton (side "PyTriton") or moved here (side MOVED, its HTTP
    endpoint on `transport`: rows "http <transport>"). Protocol "inprocess"
    (MOVED only): `ModelClient("inprocess://")` threads in the server's
    own process; "inprocess asyncio": `AsyncioModelClient("inprocess://")`
    tasks on one event loop there."""
    python = args.pytriton_python
    env = pytriton_env(python)
    ports = {"http": free_port(), "grpc": free_port()}
    server = start_pytriton_server(python if side == "PyTriton" else None, ports["http"], ports["grpc"],
                                   free_port(), http_transport=transport)
    # the startup and RSS of a side are those of its server with every protocol
    whole = "grpc" in protocols
    try:
        server.read()
        if whole:
            results.startup_s[side].append(time.perf_counter() - server.started)
        client_rss = 0.0
        for model in ("add_sub_plain", "add_sub_batch"):
            for protocol in protocols:
                for concurrency in (1, 16):
                    server_pids = [p["pid"] for p in process_tree(server.process.pid)]
                    server_cpu = cpu_seconds(server_pids)
                    if protocol.startswith("inprocess"):
                        requests = args.bind_requests * (1 if concurrency == 1 else 2)
                        server.send(f"inprocess {model} {concurrency} {requests} {protocol[len('inprocess'):]}")
                        row = server.read()
                    else:
                        requests = args.pytriton_requests * (1 if concurrency == 1 else 3)
                        done = subprocess.run(
                            [python, __file__, "pytriton-client", "--url",
                             f"{protocol}://127.0.0.1:{ports[protocol]}", "--model", model,
                             "--concurrency", str(concurrency), "--requests", str(requests)],
                            capture_output=True, text=True, env=env, cwd=HERE, timeout=600)
                        if done.returncode != 0:
                            raise RuntimeError(f"pytriton client failed:\n{done.stderr[-3000:]}")
                        row = json.loads(done.stdout.strip().splitlines()[-1])
                        client_rss = max(client_rss, row["client_rss_mib"])
                    # the server's CPU over the client's run (its warm-up requests included: ~10% more);
                    # in-process, the process's (client and server) is client_cpu_us
                    warm = concurrency * max(5, max(1, requests // concurrency) // 10)
                    row["server_cpu_us"] = (cpu_seconds(server_pids) - server_cpu) / (row["requests"] + warm) * 1e6
                    server.send("stats")
                    row["batches"] = server.read()[model]
                    shown = f"{protocol} {transport}" if protocol == "http" and transport else protocol
                    label = (f"{side} {shown} {'@batch mbs 16' if model == 'add_sub_batch' else 'mbs 0'}, "
                             f"c{concurrency}")
                    results.rows[label].append(row)
                    print(f"  {label}: {row['requests_per_s']:,.0f}/s p50 {row['p50_us']:,.0f} us", flush=True)
        if whole:
            results.processes[side].append(process_tree(server.process.pid))
            results.client_rss_mib[side].append(client_rss)
    finally:
        server.close()


def bind_round(args: argparse.Namespace, results: Results) -> None:
    worker = Child([sys.executable, __file__, "bind-worker", "--repository", args.repository,
                    "--backends", args.backends, "--requests", str(args.bind_requests)])
    try:
        worker.read()
        results.startup_s["bind"].append(time.perf_counter() - worker.started)
        while "done" not in (record := worker.read()):
            label = record.pop("row")
            results.rows[label].append(record)
            print(f"  {label}: {record['requests_per_s']:,.0f}/s p50 {record['p50_us']:,.0f} us", flush=True)
        results.processes["bind"].append(process_tree(worker.process.pid))
    finally:
        worker.close()


def batch_text(rows: list[dict[str, Any]]) -> str:
    """Mean batch size the function saw, and the largest, over all rounds."""
    counts: collections.Counter[int] = collections.Counter()
    for r in rows:
        counts.update({int(k): v for k, v in r["batches"].items()})
    calls = sum(counts.values())
    if not calls:
        return "–"
    return f"{sum(k * v for k, v in counts.items()) / calls:.1f} (max {max(counts)})"


def rss_by_kind(trees: list[list[dict[str, Any]]]) -> tuple[str, float]:
    """Process trees of one side, one a round (process_tree): its processes by kind with their
    median RSS (MiB), as text, and the median total RSS."""
    per_kind: dict[str, list[float]] = collections.defaultdict(list)
    totals = []
    for tree in trees:
        by_kind: collections.Counter[str] = collections.Counter()
        for p in tree:
            by_kind[p["name"]] += p["rss_mib"]
        for kind, mib in by_kind.items():
            per_kind[kind].append(mib)
        totals.append(sum(by_kind.values()))
    counts = collections.Counter(p["name"] for p in trees[-1])
    parts = ", ".join(f"{kind}{f' x{counts[kind]}' if counts[kind] > 1 else ''} {statistics.median(v):.0f}"
                      for kind, v in per_kind.items())
    return parts, statistics.median(totals)


def report(results: Results, args: argparse.Namespace, seconds: float) -> list[str]:
    ours = [r for r in results.rows if r.startswith("bind") or r.startswith("identity")]
    theirs = [r for r in results.rows if r.startswith("PyTriton")]
    moved = [r for r in results.rows if r.startswith(MOVED)]
    lines = [
        "## `bind` vs PyTriton (`make bench-pytriton`)",
        "",
        "Produced by `make bench-pytriton` (`python benchmarks/pytriton_compare.py`); the same function",
        "`add_sub` over FP32[16] served by this package's `Server.bind` (python models in-process, client in",
        "the same process) and by PyTriton 0.7.0 (`Triton().bind`; its `ModelClient` from a second process",
        "over loopback, one client per thread). `mbs 16`: max_batch_size 16 with the dynamic batcher (PyTriton:",
        "`@batch`); `mbs 0`: one call per request. The identity C++ backend is the reference (no Python function).",
        "A PyTriton request crosses a loopback socket, the tritonserver process and its proxy model's",
        "ZeroMQ/shared-memory hop to the function's process; a `bind` request is a call within one process.",
        f"`{MOVED}` rows: the same PyTriton server program (`Triton().bind`, `@batch`) with its imports",
        "redirected to `tritonserver.pytriton` (its endpoints this package's HTTP/gRPC frontends), against the",
        "same PyTriton client processes: what a PyTriton program gains by moving here, its clients unchanged.",
        "Its HTTP endpoint: `http native` rows the native transport (`TritonConfig(http_transport=\"native\")`),",
        "`http uvicorn` rows the uvicorn one (a server of their own). `inprocess` rows: the same program's",
        "`ModelClient(\"inprocess://\", ...)` (this package's client, one per thread) in the server's process;",
        "`inprocess asyncio` rows: its `AsyncioModelClient(\"inprocess://\", ...)` (one per task, the tasks on",
        "one event loop); each compared with PyTriton's better network row (HTTP or gRPC) of the same model and",
        "concurrency.",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()},"
        f" numpy {numpy.__version__} (ours); PyTriton in its own venv",
        f"- load average (1 min) {', '.join(f'{x:.1f}' for x in results.load)} at the start of each round"
        " (other work on the machine)",
        f"- {args.rounds} rounds, each side started afresh per round, each side first in turn;"
        f" medians over rounds; whole run {seconds:.0f} s",
        "- batch: the mean number of requests per call of the function (largest in brackets)",
        "",
        "| row | req/s | p50 us | p99 us | batch | rounds req/s |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in ours + theirs + moved:
        spread = ", ".join(f"{r['requests_per_s']:,.0f}" for r in results.rows[row])
        lines.append(f"| {row} | {results.median(row):,.0f} | {results.median(row, 'p50_us'):,.0f} "
                     f"| {results.median(row, 'p99_us'):,.0f} | {batch_text(results.rows[row])} | {spread} |")

    def best(rows: list[str], round_index: Optional[int] = None) -> tuple[str, float]:
        def value(r: str) -> float:
            return (results.rows[r][round_index]["requests_per_s"] if round_index is not None
                    else results.median(r))
        name = max(rows, key=value)
        return name, value(name)

    pytriton_c1 = [r for r in theirs if r.endswith("c1")]
    pytriton_c16 = [r for r in theirs if r.endswith("c16")]
    comparisons = [
        ("concurrency 1: bind sync", [r for r in ours if r.startswith("bind") and r.endswith("sync c1")], pytriton_c1),
        ("16 threads: bind sync", [r for r in ours if r.startswith("bind") and r.endswith("16 threads")],
         pytriton_c16),
        ("16 in flight: bind (threads or asyncio)",
         [r for r in ours if r.startswith("bind") and (r.endswith("16 threads") or r.endswith("asyncio 16"))],
         pytriton_c16),
    ]
    lines += ["", "| ratio | bind (best row) | PyTriton (best row) | ratio of medians | per-round ratios |",
              "|---|---|---|---:|---|"]
    for label, mine, other in comparisons:
        (m_name, m_rate), (o_name, o_rate) = best(mine), best(other)
        per_round = [best(mine, i)[1] / best(other, i)[1] for i in range(args.rounds)]
        lines.append(f"| {label} | {m_name} ({m_rate:,.0f}/s) | {o_name} ({o_rate:,.0f}/s) | {m_rate / o_rate:.1f}x "
                     f"| {', '.join(f'{x:.1f}' for x in per_round)} |")

    if moved:
        lines += ["", f"| client (PyTriton's; inprocess: ours) against | PyTriton req/s | {MOVED} req/s | ratio of medians "
                  "| per-round ratios | CPU us/req: client, server (PyTriton) | CPU us/req: client, server "
                  f"({MOVED}) |", "|---|---:|---:|---:|---|---|---|"]
        for row in moved:
            # the PyTriton row(s) of the same model and concurrency: the same protocol, or for
            # in-process PyTriton's best of HTTP and gRPC (round by round)
            protocol, rest = row[len(MOVED) + 1:].split(" ", 1)
            if rest.startswith(("native ", "uvicorn ", "asyncio ")):
                rest = rest.split(" ", 1)[1]
            others = [f"PyTriton {p} {rest}" for p in (("http", "grpc") if protocol == "inprocess" else (protocol,))]
            if not all(o in results.rows for o in others):
                continue
            theirs_per_round = [max(results.rows[o][i]["requests_per_s"] for o in others)
                                for i in range(len(results.rows[row]))]
            rounds = [m["requests_per_s"] / o for m, o in zip(results.rows[row], theirs_per_round)]
            other = max(others, key=results.median)

            def cpu(name: str) -> str:
                if "client_cpu_us" not in results.rows[name][0]:
                    return "–"
                if "inprocess" in name:
                    return f"{results.median(name, 'client_cpu_us'):,.0f} (one process)"
                return (f"{results.median(name, 'client_cpu_us'):,.0f}, "
                        f"{results.median(name, 'server_cpu_us'):,.0f}")

            against = row[len(MOVED) + 1:] + (f" (vs {other.split()[1]})" if protocol == "inprocess" else "")
            lines.append(f"| {against} | {results.median(other):,.0f} | {results.median(row):,.0f} "
                         f"| {results.median(row) / results.median(other):.1f}x "
                         f"| {', '.join(f'{x:.1f}' for x in rounds)} | {cpu(other)} | {cpu(row)} |")
        lines += ["", "CPU us/req: the client process's CPU time (all its threads) over its timed requests, and the",
                  "server side's (every process of it) over the client's run, per request; with 2 cores shared by",
                  "client and server, their sum over 2 bounds the rate at concurrency 16 (inprocess: the one",
                  "process's CPU time, client and server together)."]
    lines += ["", "| side | start to ready s | server-side processes: RSS MiB | server-side total MiB "
              "| client process MiB |", "|---|---:|---|---:|---:|"]
    for side in ("PyTriton", MOVED, "bind"):
        if not results.processes[side]:
            continue
        parts, total = rss_by_kind(results.processes[side])
        client = (f"{statistics.median(results.client_rss_mib[side]):.0f}" if results.client_rss_mib[side]
                  else "(the same process)")
        lines.append(f"| {side} | {statistics.median(results.startup_s[side]):.2f} | {parts} "
                     f"| {total:.0f} | {client} |")
    lines += ["", "Start to ready: from spawning the server process (interpreter start and imports included) to",
              "its models ready (ours: both add_sub bindings and the identity model). RSS: medians over rounds,",
              "read after each round's rows (a kind with xN: N processes together); client: the largest",
              "PyTriton client process of the round (16 threads).", ""]
    return lines


def write_section(path: pathlib.Path, lines: list[str], begin: str = BEGIN, end: str = END) -> None:
    """Replace (or append) the section of `path` marked by `begin` and
    `end` (by default this script's; benchmarks/frontends.py has its own)."""
    section = "\n".join([begin, *lines, end])
    text = path.read_text() if path.is_file() else ""
    if begin in text and end in text:
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def orchestrate(args: argparse.Namespace) -> None:
    from run import free_port, make_backend_folder  # benchmarks/run.py
    from tritonserver._api import _triton_core

    # Absolute (the children run in benchmarks/), symlinks kept (a venv's python is one).
    args.pytriton_python = os.path.abspath(args.pytriton_python)
    if not os.path.isfile(args.pytriton_python):
        sys.exit(f"{args.pytriton_python} is missing: `make bench-pytriton` makes .venv-pytriton")
    if args.quick:
        args.rounds, args.pytriton_requests, args.bind_requests = 1, 100, 500
    backends = make_backend_folder(_triton_core.load_core())
    args.backends, args.repository = str(backends), str(ROOT / "tests" / "models")
    results = Results()
    started = time.monotonic()
    try:
        for index in range(args.rounds):
            results.load.append(os.getloadavg()[0])
            sides: list[tuple[str, Callable[[], None]]] = [
                ("PyTriton", lambda: pytriton_round(args, results, free_port)),
                (MOVED, lambda: pytriton_round(args, results, free_port, MOVED, "native",
                                               ("http", "grpc", "inprocess", "inprocess asyncio"))),
                (f"{MOVED} (uvicorn)", lambda: pytriton_round(args, results, free_port, MOVED, "uvicorn", ("http",))),
                ("bind", lambda: bind_round(args, results))]
            turn = index % len(sides)  # each side first in turn
            for name, run_side in sides[turn:] + sides[:turn]:
                print(f"round {index + 1}/{args.rounds}: {name}", flush=True)
                run_side()
    finally:
        shutil.rmtree(backends, ignore_errors=True)
    lines = report(results, args, time.monotonic() - started)
    print("\n".join(lines))
    if args.out:
        write_section(pathlib.Path(args.out), lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    roles = parser.add_subparsers(dest="role")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pytriton-python", default=str(ROOT / ".venv-pytriton" / "bin" / "python"))
    parser.add_argument("--pytriton-requests", type=int, default=800, help="per c1 row (c16 rows: 3x)")
    parser.add_argument("--bind-requests", type=int, default=4000, help="per sync c1 row (others: 2x)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"), help="'' to print only")
    parser.add_argument("--quick", action="store_true", help="one short round (a smoke run)")
    server = roles.add_parser("pytriton-server")
    for port in ("--http-port", "--grpc-port", "--metrics-port"):
        server.add_argument(port, type=int, required=True)
    server.add_argument("--redirect", action="store_true", help="run on tritonserver.pytriton (.venv's Python)")
    server.add_argument("--http-transport", default="", help="with --redirect: TritonConfig.http_transport")
    server.add_argument("--models", default="add_sub_plain,add_sub_batch", help="which of the two to bind")
    client = roles.add_parser("pytriton-client")
    client.add_argument("--url", required=True)
    client.add_argument("--model", required=True)
    client.add_argument("--concurrency", type=int, default=1)
    client.add_argument("--requests", type=int, default=800)
    worker = roles.add_parser("bind-worker")
    worker.add_argument("--repository", required=True)
    worker.add_argument("--backends", required=True)
    worker.add_argument("--requests", type=int, default=4000)
    args = parser.parse_args()
    handlers: dict[Optional[str], Callable[[argparse.Namespace], None]] = {
        None: orchestrate, "pytriton-server": pytriton_server, "pytriton-client": pytriton_client,
        "bind-worker": bind_worker}
    handlers[args.role](args)


if __name__ == "__main__":
    main()
