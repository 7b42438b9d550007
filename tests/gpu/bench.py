"""The GPU check's benchmark (run by run_gpu_checks.sh from tests/): what GPU
users pay. Printed and written to a JSON file, never asserted (a
measurement, not a test). Without a GPU or CuPy it records why and exits 0.

  zero_copy       identity_fp32 with a CuPy (GPU) input, at 4 KiB, 1 MiB and
                  64 MiB: the output in GPU memory handed to cupy.from_dlpack /
                  torch.from_dlpack (zero-copy), against the output in CPU
                  memory copied to the device (cupy.asarray / tensor.cuda()),
                  as a GPU user would without GPU outputs; medians, in ms.
  allocation      one output allocation and free, as our allocator does per
                  output: cudaMalloc + cudaFree and cudaHostAlloc +
                  cudaFreeHost on our CUDA runtime (ctypes); and a whole
                  4 KiB request with CPU, pinned and GPU outputs.
  memory_growth   device memory in use (cudaMemGetInfo) before and after 1,000
                  requests with 1 MiB GPU outputs, each dropped: no growth
                  expected (our live-buffer count too, with the test hooks).

    python gpu/bench.py OUT.json
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import numpy  # noqa: E402

import tritonserver  # noqa: E402
from tritonserver import _native  # noqa: E402
from common import IDENTITY_LIBRARY, make_options, single  # noqa: E402

SIZES = {"4 KiB": 4 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}
RECORD: dict[str, Any] = {}


def save(out_path: str) -> None:
    try:
        with open(out_path) as f:
            previous = json.load(f)
    except (OSError, ValueError):
        previous = {}
    previous.update(RECORD)
    with open(out_path, "w") as f:
        json.dump(previous, f, indent=1, default=str)


def median_ms(fn: Callable[[], Any], sync: Callable[[], Any], runs: int) -> float:
    fn()  # warm-up (model instance, allocator, pools, kernels)
    times = []
    for _ in range(runs):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 4)


def our_runtime() -> ctypes.CDLL:
    """The CUDA runtime our allocator opened (named first in cuda_status())."""
    return ctypes.CDLL(_native.cuda_status().split(": ")[0])


def zero_copy(model: Any, cupy: Any, torch: Any) -> dict[str, Any]:
    results: dict[str, Any] = {}
    sync = cupy.cuda.runtime.deviceSynchronize
    for label, size in SIZES.items():
        runs = 10 if size >= 64 << 20 else 30
        data = cupy.arange(size // 4, dtype=cupy.float32)
        kept: list[Any] = []

        def infer(memory: str) -> Any:
            return single(model.infer(inputs={"INPUT0": data}, output_memory_type=memory)).outputs["OUTPUT0"]

        row = {
            "gpu_out_cupy_from_dlpack": median_ms(lambda: kept.append(cupy.from_dlpack(infer("gpu:0"))), sync, runs),
            "cpu_out_cupy_asarray": median_ms(
                lambda: kept.append(cupy.asarray(numpy.from_dlpack(infer("cpu")))), sync, runs),
        }
        check = kept[-1]
        assert bool((check == data).all()), "wrong values"
        kept.clear()
        if torch is not None:
            tsync = torch.cuda.synchronize
            row["gpu_out_torch_from_dlpack"] = median_ms(
                lambda: kept.append(torch.from_dlpack(infer("gpu:0"))), tsync, runs)
            row["cpu_out_torch_cuda"] = median_ms(
                lambda: kept.append(torch.from_numpy(numpy.from_dlpack(infer("cpu"))).cuda()), tsync, runs)
            kept.clear()
        row["cupy_device_copy"] = median_ms(lambda: kept.append(data.copy()), sync, runs)
        kept.clear()
        results[label] = row
        print(f"zero_copy {label}: {row}", flush=True)
    return results


def allocation(model: Any) -> dict[str, Any]:
    rt = our_runtime()
    results: dict[str, Any] = {}
    pointer = ctypes.c_void_p()
    for label, size in SIZES.items():
        runs = 200

        def device() -> None:
            assert rt.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)) == 0
            assert rt.cudaFree(pointer) == 0

        def pinned() -> None:
            assert rt.cudaHostAlloc(ctypes.byref(pointer), ctypes.c_size_t(size), 1) == 0  # portable
            assert rt.cudaFreeHost(pointer) == 0

        def timed(fn: Callable[[], None]) -> float:
            fn()
            start = time.perf_counter()
            for _ in range(runs):
                fn()
            return round((time.perf_counter() - start) / runs * 1e6, 2)

        results[label] = {"cudaMalloc_cudaFree_us": timed(device), "cudaHostAlloc_cudaFreeHost_us": timed(pinned)}
        print(f"allocation {label}: {results[label]}", flush=True)
    data = numpy.ones(1024, numpy.float32)  # 4 KiB: the allocation dominates the copy
    for memory in ("cpu", "cpu_pinned", "gpu:0"):
        ms = median_ms(lambda: single(model.infer(inputs={"INPUT0": data}, output_memory_type=memory)),
                       lambda: None, 200)
        results[f"request_4KiB_{memory}_output_ms"] = ms
        print(f"allocation: a 4 KiB request with its output in {memory}: {ms} ms", flush=True)
    return results


def memory_growth(model: Any, cupy: Any) -> dict[str, Any]:
    rt = our_runtime()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    hooks = getattr(_native, "testing", None)
    data = cupy.ones((1 << 20) // 4, dtype=cupy.float32)

    def used() -> int:
        cupy.cuda.runtime.deviceSynchronize()
        assert rt.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
        return total.value - free.value

    def requests(n: int) -> None:
        for _ in range(n):
            out = single(model.infer(inputs={"INPUT0": data}, output_memory_type="gpu:0")).outputs["OUTPUT0"]
            del out

    requests(10)
    before = used()
    start = time.perf_counter()
    requests(1000)
    seconds = time.perf_counter() - start
    after = used()
    result = {"used_before_mib": round(before / 2**20, 2), "used_after_mib": round(after / 2**20, 2),
              "growth_mib": round((after - before) / 2**20, 2), "requests": 1000,
              "ms_per_request": round(seconds, 3)}  # 1,000 requests: seconds = ms per request
    if hooks is not None:
        result["live_buffers_after"] = hooks.live_buffer_count()
    print(f"memory_growth: {result}", flush=True)
    return result


def main() -> None:
    out_path = sys.argv[1]
    RECORD.clear()
    try:
        os.remove(out_path)
    except OSError:
        pass
    tritonserver.load_core()
    RECORD["cuda_status"] = _native.cuda_status()
    try:
        import cupy
    except Exception as e:  # the dry run has no CuPy
        RECORD["summary"] = f"skipped: CuPy not importable ({type(e).__name__}: {e})"
        cupy = None
    if cupy is not None and _native.cuda_device_count() == 0:
        RECORD["summary"] = "skipped: no CUDA device"
    if "summary" in RECORD:
        save(out_path)
        print(RECORD["summary"])
        return
    try:
        import torch

        if not torch.cuda.is_available():
            torch = None
    except Exception:
        torch = None
    folder = tempfile.mkdtemp(prefix="gpu-bench-")
    try:
        os.makedirs(os.path.join(folder, "identity"))
        shutil.copy(IDENTITY_LIBRARY, os.path.join(folder, "identity"))
        server = tritonserver.Server(make_options(folder, server_id="gpu-bench", metrics=False))
        server.start(wait_until_ready=True, timeout=60)
        try:
            model = server.load("identity_fp32")
            for key, fn in (("zero_copy", lambda: zero_copy(model, cupy, torch)),
                            ("allocation", lambda: allocation(model)),
                            ("memory_growth", lambda: memory_growth(model, cupy))):
                try:
                    RECORD[key] = fn()
                except Exception as e:  # the next measurement still runs
                    RECORD[key] = f"ERROR {type(e).__name__}: {e}"
                    print(f"{key}: {RECORD[key]}", flush=True)
                save(out_path)
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    big = RECORD.get("zero_copy", {}).get("64 MiB", {}) if isinstance(RECORD.get("zero_copy"), dict) else {}
    growth = RECORD.get("memory_growth", {})
    RECORD["summary"] = (
        f"64 MiB: GPU output + cupy.from_dlpack {big.get('gpu_out_cupy_from_dlpack', '?')} ms, "
        f"CPU output + cupy.asarray {big.get('cpu_out_cupy_asarray', '?')} ms; device memory growth over "
        f"1,000 requests: {growth.get('growth_mib', '?') if isinstance(growth, dict) else growth} MiB"
    )
    save(out_path)
    print(RECORD["summary"])


if __name__ == "__main__":
    main()
