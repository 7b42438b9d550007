"""The GPU check's server-log phases (run by run_gpu_checks.sh from tests/),
outside pytest, each in a process of its own:

  log      one server with Triton's info and warning log on (the tests run
           with it off, so the CUDA memory pool, pinned pool and device lines
           never print) serves a GPU-output, a pinned-output and (with CuPy) a
           GPU-input inference on identity_fp32; the core's log goes to LOG.
  metrics  GPU metrics (the core's bundled DCGM), tried once, last: start-up
           and stop time of a server with GPU metrics off, then on, and the
           nv_gpu_* metric families it reports; the core's log goes to LOG;
           the times are added to BENCH_JSON under "gpu_metrics".

Prints what it did as it goes (the check's log.txt); exits 1 when a step
failed, after trying the rest.

    python gpu/triton_log.py log LOG
    python gpu/triton_log.py metrics LOG BENCH_JSON
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
import tempfile
import time
import traceback
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import numpy  # noqa: E402

import tritonserver  # noqa: E402
from tritonserver import _native  # noqa: E402
from common import IDENTITY_LIBRARY, make_options, single  # noqa: E402

FAILED: list[str] = []


def attempt(label: str, fn: Any) -> Any:
    print(f"{label} ...", flush=True)
    start = time.perf_counter()
    try:
        value = fn()
    except Exception as e:  # recorded; the next step still runs
        traceback.print_exc()
        FAILED.append(f"{label}: {type(e).__name__}: {e}")
        print(f"{label}: FAILED ({type(e).__name__}: {e})", flush=True)
        return None
    print(f"{label}: {value} ({time.perf_counter() - start:.2f} s)", flush=True)
    return value


def backend_folder() -> str:
    folder = tempfile.mkdtemp(prefix="gpu-log-backends-")
    os.makedirs(os.path.join(folder, "identity"))
    shutil.copy(IDENTITY_LIBRARY, os.path.join(folder, "identity"))
    return folder


def server_with_log(folder: str, log: str, server_id: str, **overrides: Any) -> tritonserver.Server:
    options = dict(server_id=server_id, log_file=log, log_info=True, log_warn=True, log_error=True)
    options.update(overrides)
    return tritonserver.Server(make_options(folder, **options))


def log_phase(log: str) -> None:
    folder = backend_folder()
    server = server_with_log(folder, log, "gpu-log", gpu_metrics=False)
    attempt("start (info + warning log)", lambda: (server.start(wait_until_ready=True, timeout=60), "ready")[1])
    try:
        attempt("load identity_fp32", lambda: server.load("identity_fp32").name)
        model = server.model("identity_fp32")
        data = numpy.arange(1 << 16, dtype=numpy.float32)

        def infer(memory: str, inputs: Any = data) -> str:
            out = single(model.infer(inputs={"INPUT0": inputs}, output_memory_type=memory)).outputs["OUTPUT0"]
            host = numpy.from_dlpack(out.to_host())
            assert (host == data).all(), "wrong values"
            return f"{out.memory_type.name}:{out.memory_type_id}, {out.size} bytes, values right"

        attempt("pinned output", lambda: infer("cpu_pinned"))
        if _native.cuda_device_count() == 0:
            print("GPU output and input: skipped (no CUDA device)", flush=True)
            return
        attempt("GPU output", lambda: infer("gpu:0"))
        try:
            import cupy
        except Exception as e:  # the image has it; the dry run does not
            print(f"CuPy input: skipped ({type(e).__name__}: {e})", flush=True)
        else:
            attempt("CuPy (GPU) input, GPU output", lambda: infer("gpu:0", cupy.asarray(data)))
    finally:
        attempt("stop", lambda: server.stop() or "stopped")
        shutil.rmtree(folder, ignore_errors=True)


def metrics_phase(log: str, bench_json: str) -> None:
    folder = backend_folder()
    record: dict[str, Any] = {}

    def cycle(gpu_metrics: bool) -> str:
        server = server_with_log(folder, log, f"gpu-metrics-{gpu_metrics}", metrics=True, gpu_metrics=gpu_metrics)
        start = time.perf_counter()
        server.start(wait_until_ready=True, timeout=60)
        started = time.perf_counter() - start
        families: list[str] = []
        try:
            if gpu_metrics:
                time.sleep(2.5)  # one metrics interval (2 s): DCGM's first readings
            text = server.metrics()
            families = sorted({line.split()[2] for line in text.splitlines()
                               if line.startswith("# TYPE nv_gpu") or line.startswith("# TYPE nv_energy")})
        finally:
            start = time.perf_counter()
            server.stop()
            stopped = time.perf_counter() - start
        key = "on" if gpu_metrics else "off"
        record[f"start_s_{key}"] = round(started, 3)
        record[f"stop_s_{key}"] = round(stopped, 3)
        record[f"gpu_families_{key}"] = families
        return f"start {started:.2f} s, stop {stopped:.2f} s, GPU metric families: {', '.join(families) or 'none'}"

    try:
        attempt("server with GPU metrics off", lambda: cycle(False))
        attempt("server with GPU metrics on (DCGM)", lambda: cycle(True))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        try:
            with open(bench_json) as f:
                bench = json.load(f)
        except (OSError, ValueError):
            bench = {}
        bench["gpu_metrics"] = record
        with open(bench_json, "w") as f:
            json.dump(bench, f, indent=1)


def main() -> int:
    mode, log = sys.argv[1], sys.argv[2]
    tritonserver.load_core()
    print(f"CUDA: {_native.cuda_device_count()} device(s), {_native.cuda_status()}", flush=True)
    if mode == "log":
        log_phase(log)
    elif mode == "metrics":
        metrics_phase(log, sys.argv[3])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    if FAILED:
        print("FAILED: " + "; ".join(FAILED), flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
