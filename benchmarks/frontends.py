"""The network frontends against NVIDIA's: perf_analyzer 2.51 (`make
perf-analyzer`) against NVIDIA's tritonserver 2.51 binary (nvidia-pytriton
0.7.0's bin/tritonserver) and against this package's `python -m
tritonserver serve`, the same flags, on tests/models' identity_fp32 (the
identity C++ backend: the transport alone) and add_sub (a python model:
the binary runs it on the python backend's stub, the package in-process),
over HTTP and gRPC at concurrency 1 and 16.

Both servers are up at once and the rounds interleave (each cell runs on
every server before the next cell; the servers' order alternates by
round). Reported per cell and server: the median over rounds of
perf_analyzer's throughput and p50 latency, and the server's CPU per
inference: its processes' user+sys time over the run (/proc, the stub's
included) divided by the growth of the model's inference_count (the
server's statistics); then the package's ratio to the binary. Start to
ready: process start until GET /v2/health/ready answers 200, both models
loaded, median of --starts starts. A server that cannot run (the binary
absent; the package's serve command or its frontends not there yet) is
left out, saying why.

    python benchmarks/frontends.py [--rounds 3] [--window-ms 2000] [--starts 3]
        [--servers binary,package] [--quick] [--out docs/benchmarks.md] [--no-write] [--note TEXT]

Writes its marked section of docs/benchmarks.md (`make bench-frontends`)
and the raw figures to build/bench-frontends.json.
"""

from __future__ import annotations

import argparse
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
from typing import Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The marked section of docs/benchmarks.md this script owns (run.py keeps it).
BEGIN = "<!-- frontends: begin -->"
END = "<!-- frontends: end -->"
PERF_ANALYZER = ROOT / "build" / "perf_analyzer" / "perf_analyzer"
MODELS = {"identity_fp32": ["--shape", "INPUT0:16"],
          "add_sub": ["--shape", "INPUT0:16", "--shape", "INPUT1:16"]}
# Each server's own flags beyond the shared ones.
EXTRA_FLAGS = {"binary": [], "package": ["--python-models", "in-process"]}
FLAGS = ["--model-control-mode", "explicit", "--log-info", "false",
         *[arg for name in MODELS for arg in ("--load-model", name)]]


def commands() -> dict:
    """name -> (argv prefix or None, why it is left out)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import common
    import pytest

    found: dict = {}
    try:
        found["binary"] = (common.reference_command(), "")
    except pytest.skip.Exception as e:
        found["binary"] = (None, str(e))
    package = common.package_serve_command()
    probe = subprocess.run([*package, "--help"], capture_output=True, text=True, cwd=ROOT / "tests", timeout=120)
    found["package"] = ((package, "") if probe.returncode == 0 else
                        (None, f"`python -m tritonserver serve --help` exited {probe.returncode}: "
                               f"{(probe.stderr or probe.stdout).strip()[-300:]}"))
    return found


def inference_count(server, model: str) -> int:
    import tritonclient.http

    client = tritonclient.http.InferenceServerClient(server.http_url)
    try:
        return sum(int(e.get("inference_count", 0)) for e in client.get_inference_statistics(model)["model_stats"])
    finally:
        client.close()


def perf_analyzer(server, model: str, protocol: str, concurrency: int, window_ms: int) -> dict:
    """One perf_analyzer level; retried once when it reports an unstable
    measurement (exit 2). Returns throughput, p50 (us), server CPU per
    inference (us), or an error."""
    url = server.http_url if protocol == "http" else server.grpc_url
    argv = [str(PERF_ANALYZER), "-m", model, "-u", url, "-i", protocol, "--concurrency-range", str(concurrency),
            "-s", "99", "-r", "3", "-p", str(window_ms), *MODELS[model]]
    for attempt in range(2):
        count, cpu = inference_count(server, model), server.cpu_seconds()
        run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        cpu, count = server.cpu_seconds() - cpu, inference_count(server, model) - count
        if run.returncode == 0:
            throughput = re.search(r"^\s*Throughput: ([0-9.]+)", run.stdout, re.M)
            p50 = re.search(r"^\s*p50 latency: ([0-9]+)", run.stdout, re.M)
            assert throughput and p50, run.stdout
            return {"throughput": float(throughput.group(1)), "p50_us": int(p50.group(1)),
                    "cpu_us_per_infer": cpu / count * 1e6 if count else None, "inferences": count}
        if run.returncode != 2:
            break
    return {"error": f"perf_analyzer exited {run.returncode}: {(run.stdout + run.stderr).strip()[-500:]}"}


def start_to_ready(command: list[str], extra: list[str], starts: int) -> list[float]:
    import common

    seconds = []
    for _ in range(starts):
        with common.server_process(command, common.MODELS, [*FLAGS, *extra]) as server:
            seconds.append(server.ready_seconds)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--servers", default="binary,package")
    parser.add_argument("--quick", action="store_true", help="one round, 500 ms windows, one start, c1 only")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--no-write", action="store_true", help="print the section, leave the file")
    parser.add_argument("--note", default="", help="a sentence added to the section (e.g. the tree measured)")
    args = parser.parse_args()
    concurrencies = [1, 16]
    if args.quick:
        args.rounds, args.window_ms, args.starts, concurrencies = 1, 500, 1, [1]
    if not PERF_ANALYZER.is_file():
        sys.exit(f"{PERF_ANALYZER} is missing: run `make perf-analyzer`")
    available = commands()
    servers: dict[str, list[str]] = {}
    left_out: dict[str, str] = {}
    for name in args.servers.split(","):
        command, why = available[name]
        if command is None:
            left_out[name] = why
        else:
            servers[name] = command
    import common

    startup: dict[str, list[float]] = {}
    for name, command in list(servers.items()):
        try:
            startup[name] = start_to_ready(command, EXTRA_FLAGS[name], args.starts)
        except AssertionError as e:  # it does not serve these models over HTTP yet
            # Its log's last line, or the message's start (a timeout's).
            log = str(e).split(" before it was ready: ", 1)[-1].strip().splitlines() or [""]
            left_out[name] = "it did not start: " + log[-1][:200]
            del servers[name]
    for name, why in left_out.items():
        print(f"== {name}: left out ({why})", file=sys.stderr)
    if not servers:
        sys.exit("no server to measure")
    cells = [(model, protocol, c) for model in MODELS for protocol in ("http", "grpc") for c in concurrencies]
    results: dict = {f"{m}|{p}|{c}|{s}": [] for m, p, c in cells for s in servers}
    loads: list[float] = []
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        running = {name: stack.enter_context(common.server_process(command, common.MODELS,
                                                                   [*FLAGS, *EXTRA_FLAGS[name]]))
                   for name, command in servers.items()}
        for index in range(args.rounds):
            loads.append(os.getloadavg()[0])
            order = list(running) if index % 2 == 0 else list(reversed(running))
            for model, protocol, c in cells:
                for name in order:
                    result = perf_analyzer(running[name], model, protocol, c, args.window_ms)
                    results[f"{model}|{protocol}|{c}|{name}"].append(result)
                    print(f"round {index + 1} {model} {protocol} c{c} {name}: {result}", file=sys.stderr)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "rounds": args.rounds, "window_ms": args.window_ms, "load": loads, "startup": startup,
              "results": results, "left_out": left_out, "seconds": time.monotonic() - began,
              "cpus": os.cpu_count(), "note": args.note}
    (ROOT / "build").mkdir(exist_ok=True)
    (ROOT / "build" / "bench-frontends.json").write_text(json.dumps(report, indent=1))
    lines = section(report, cells, list(servers))
    print("\n".join(lines))
    if not args.no_write:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from pytriton_compare import write_section

        write_section(pathlib.Path(args.out), lines, BEGIN, END)


def median(rows: list[dict], key: str) -> Optional[float]:
    values = [row[key] for row in rows if row.get(key) is not None]
    return statistics.median(values) if values else None


def section(report: dict, cells: list, servers: list[str]) -> list[str]:
    def fmt(value: Optional[float], digits: int = 0) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    lines = [
        "## Network frontends against NVIDIA's binary (`make bench-frontends`)",
        "",
        f"benchmarks/frontends.py, {report['date']}: perf_analyzer 2.51 (`-s 99 -r 3 -p {report['window_ms']}`, "
        "FP32[16] inputs) against NVIDIA's tritonserver 2.51 binary (nvidia-pytriton 0.7.0) and this package's "
        "`python -m tritonserver serve` (python models in-process), the servers up at once; "
        f"{report['rounds']} interleaved rounds, medians; {report['cpus']} CPUs shared by client and servers "
        f"(load average at each round's start: {', '.join(f'{x:.1f}' for x in report['load'])}). "
        "Server CPU: the server's processes' user+sys time over a run (the stub's included) per inference "
        "its statistics counted. Ratio: the package's throughput over the binary's."
        + (f" {report['note']}" if report["note"] else ""),
        "",
    ]
    for name, why in report["left_out"].items():
        lines += [f"Left out: {name} ({why}).", ""]
    header = "| model | protocol | concurrency |"
    rule = "|---|---|---:|"
    for name in servers:
        header += f" {name} infer/s | {name} p50 us | {name} CPU us/infer |"
        rule += "---:|---:|---:|"
    both = "binary" in servers and "package" in servers
    if both:
        header += " package/binary |"
        rule += "---:|"
    lines += [header, rule]
    for model, protocol, c in cells:
        row = f"| {model} | {protocol} | {c} |"
        rates = {}
        for name in servers:
            rows = report["results"][f"{model}|{protocol}|{c}|{name}"]
            rates[name] = median(rows, "throughput")
            errors = [r["error"] for r in rows if "error" in r]
            row += (f" {fmt(rates[name])} | {fmt(median(rows, 'p50_us'))} | {fmt(median(rows, 'cpu_us_per_infer'))}"
                    f"{' (' + str(len(errors)) + ' failed)' if errors else ''} |")
        if both:
            row += (f" {rates['package'] / rates['binary']:.2f}x |" if rates["package"] and rates["binary"]
                    else " - |")
        lines.append(row)
    lines += ["", "| server | start to ready ms (median) | starts |", "|---|---:|---:|"]
    for name, seconds in report["startup"].items():
        lines.append(f"| {name} | {statistics.median(seconds) * 1000:,.0f} | {len(seconds)} |")
    lines.append("")
    return lines


if __name__ == "__main__":
    main()
