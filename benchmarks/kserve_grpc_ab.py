"""KServeGrpc's two transports against NVIDIA's binary over real gRPC:
perf_analyzer 2.51 (`make perf-analyzer`, -i grpc) against NVIDIA's
tritonserver 2.51 (nvidia-pytriton's bin/tritonserver), this package's
`serve --grpc-transport grpcio` and `serve --grpc-transport native` (python
models in-process), all up at once, on identity_fp32 (the identity C++
backend: the transport alone) and add_sub (a python model: the binary's
stub, the package in-process), at concurrency 1 and 16. Rounds interleave
(each cell runs on every server before the next; the servers' order
alternates by round); per cell and server: the median of perf_analyzer's
throughput and the server's CPU per inference (benchmarks/frontends.py's
measure), then each transport's ratio to the binary.

    python benchmarks/kserve_grpc_ab.py [--rounds 3] [--window-ms 2000] [--servers binary grpcio native]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import common  # noqa: E402
import frontends  # noqa: E402

PACKAGE_FLAGS = ["--python-models", "in-process"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window-ms", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--models", nargs="+", default=list(frontends.MODELS))
    parser.add_argument("--servers", nargs="+", default=["binary", "grpcio", "native"])
    args = parser.parse_args()
    if not frontends.PERF_ANALYZER.is_file():
        sys.exit(f"{frontends.PERF_ANALYZER} is missing: run `make perf-analyzer`")
    commands = {"binary": (common.reference_command(), []),
                "grpcio": (common.package_serve_command(), [*PACKAGE_FLAGS, "--grpc-transport", "grpcio"]),
                "native": (common.package_serve_command(), [*PACKAGE_FLAGS, "--grpc-transport", "native"])}
    import contextlib

    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(common.server_process(commands[name][0], common.MODELS,
                                                                   [*frontends.FLAGS, *commands[name][1]]))
                   for name in args.servers}
        results: dict = {}
        for round_ in range(args.rounds):
            order = args.servers if round_ % 2 == 0 else args.servers[::-1]
            for model in args.models:
                for concurrency in args.concurrency:
                    for name in order:
                        cell = frontends.perf_analyzer(servers[name], model, "grpc", concurrency, args.window_ms)
                        if "error" in cell:
                            print(f"round {round_} {model} c{concurrency} {name}: {cell['error']}", flush=True)
                            continue
                        results.setdefault((model, concurrency, name), []).append(cell)
                        print(f"round {round_} {model:13} c{concurrency:<2} {name:7} {cell['throughput']:8.1f} "
                              f"infer/s  p50 {cell['p50_us']:6d} us  server CPU "
                              f"{cell['cpu_us_per_infer'] or 0:6.1f} us/infer", flush=True)
        print("\nmedians (ratio to the binary):")
        for model in args.models:
            for concurrency in args.concurrency:
                base = results.get((model, concurrency, "binary"))
                base_rate = statistics.median(c["throughput"] for c in base) if base else None
                for name in args.servers:
                    cells = results.get((model, concurrency, name))
                    if not cells:
                        continue
                    rate = statistics.median(c["throughput"] for c in cells)
                    cpu = statistics.median(c["cpu_us_per_infer"] or 0 for c in cells)
                    ratio = f"{rate / base_rate:5.2f}x" if base_rate else "  -  "
                    print(f"{model:13} c{concurrency:<2} {name:7} {rate:8.1f} infer/s  {ratio}  server CPU "
                          f"{cpu:6.1f} us/infer")


if __name__ == "__main__":
    main()
