"""The KServe infer route over real HTTP: servers of this package up at
once, each serving KServeHttp (tritonserver.frontend) as one variant:
`fast` (the routes under uvicorn, httptools, uvloop, with the native infer
fast path, fast_infer), `python` (the same with fast_infer.enabled =
False), `native` (KServeHttp.Options(transport="native"): the extension's
HTTP/1.1 transport, fast path on); perf_analyzer (binary tensors,
identity_fp32, FP32[16]) against each in interleaved rounds. Server CPU per
inference: the server process's user+sys over the run (/proc) divided by
the model's inference_count delta (its statistics route).

    python benchmarks/kserve_http_ab.py --backends DIR --perf-analyzer PATH [--rounds 3]
        [--concurrency 1 16] [--variants fast python] [--binary]

DIR holds identity/libtriton_identity.so. --binary adds NVIDIA's
tritonserver 2.51 (of the nvidia-pytriton wheel in this environment) as
another server, for the ratio. (`--serve PORT VARIANT` is the server
process itself.)
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

MODELS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "models"


VARIANTS = ("fast", "python", "native")


def serve(port: int, variant: str, backends: str) -> None:
    """The package's KServeHttp frontend on `port` until SIGINT or SIGTERM,
    as `variant` (one of VARIANTS)."""
    import threading

    import tritonserver
    from tritonserver._kserve import fast_infer
    from tritonserver.frontend import KServeHttp

    fast = variant != "python"
    fast_infer.enabled = fast
    taken = [0]
    original = fast_infer.infer

    async def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = await original(*args, **kwargs)
        taken[0] += result is not None
        return result

    fast_infer.infer = counting  # type: ignore[assignment]
    server = tritonserver.Server(model_repository=str(MODELS), backend_directory=backends,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT, log_error=True)
    server.start(wait_until_ready=True)
    server.load("identity_fp32")
    done = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: done.set())
    transport = "native" if variant == "native" else "uvicorn"
    with KServeHttp(server, KServeHttp.Options(address="127.0.0.1", port=port, transport=transport)):
        done.wait()
    print(f"{variant}: the fast path answered {taken[0]} requests", flush=True)
    server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inference_count(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/identity_fp32/stats") as answer:
        return int(json.load(answer)["model_stats"][0]["inference_count"])


def wait_ready(port: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            inference_count(port)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def start_binary(port: int, backends: str) -> subprocess.Popen[bytes]:
    """NVIDIA's tritonserver 2.51 serving HTTP on `port` (gRPC and metrics
    on free ports), identity_fp32 loaded."""
    import importlib.util
    import sysconfig

    spec = importlib.util.find_spec("pytriton")  # not imported: its Python dependencies are not installed
    assert spec is not None and spec.submodule_search_locations, "nvidia-pytriton is not installed"
    root = pathlib.Path(list(spec.submodule_search_locations)[0])
    env = dict(os.environ, LD_LIBRARY_PATH=f"{root.parent / 'nvidia_pytriton.libs'}:{sysconfig.get_config_var('LIBDIR')}")
    return subprocess.Popen(
        [str(root / "tritonserver" / "bin" / "tritonserver"), f"--model-repository={MODELS}",
         f"--backend-directory={backends}", "--model-control-mode=explicit", "--load-model=identity_fp32",
         f"--http-port={port}", f"--grpc-port={free_port()}", f"--metrics-port={free_port()}",
         "--allow-metrics=false", "--log-error=true"],
        env=env, stdout=subprocess.DEVNULL)


def main(args: argparse.Namespace) -> None:
    servers: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    try:
        for variant in args.variants:
            port = free_port()
            process = subprocess.Popen([sys.executable, __file__, "--serve", str(port), variant,
                                        "--backends", args.backends])
            servers[variant] = (port, process)
        if args.binary:
            port = free_port()
            servers["binary"] = (port, start_binary(port, args.backends))
        order = list(servers)
        for port, _ in servers.values():
            wait_ready(port)
        results: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for round_ in range(args.rounds):
            for concurrency in args.concurrency:
                for variant in (order if round_ % 2 == 0 else order[::-1]):
                    port, process = servers[variant]
                    count, cpu = inference_count(port), cpu_seconds(process.pid)
                    run = subprocess.run(
                        [args.perf_analyzer, "-m", "identity_fp32", "-u", f"127.0.0.1:{port}", "-i", "http",
                         "--shape", "INPUT0:16", "--concurrency-range", str(concurrency), "-p", "2000",
                         "-s", "99", "-r", "3"],
                        capture_output=True, text=True, check=True)
                    cpu = cpu_seconds(process.pid) - cpu
                    count = inference_count(port) - count
                    rate = float(re.findall(r"Throughput: ([\d.]+) infer/sec", run.stdout)[-1])
                    per = cpu / count * 1e6
                    results.setdefault((variant, concurrency), []).append((rate, per))
                    print(f"round {round_} c{concurrency:<2} {variant:10} {rate:8.1f} infer/s  "
                          f"server CPU {per:6.1f} us/infer", flush=True)
        for (variant, concurrency), values in sorted(results.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0]))):
            print(f"median c{concurrency:<2} {variant:10} {statistics.median(v[0] for v in values):8.1f} infer/s  "
                  f"server CPU {statistics.median(v[1] for v in values):6.1f} us/infer")
    finally:
        for _, process in servers.values():
            process.send_signal(signal.SIGINT)
        for _, process in servers.values():
            process.wait(60)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", required=True)
    parser.add_argument("--perf-analyzer", default="perf_analyzer")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["fast", "python"])
    parser.add_argument("--binary", action="store_true")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "VARIANT"))
    parsed = parser.parse_args()
    if parsed.serve:
        serve(int(parsed.serve[0]), parsed.serve[1], parsed.backends)
    else:
        main(parsed)
