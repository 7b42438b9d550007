"""The GPU check's benchmark (run by run_gpu_checks.sh from tests/): a
64 MiB FP32 tensor through the identity backend with its output in GPU memory
and handed to CuPy with `cupy.from_dlpack`, against a CuPy copy of the same
size (device to device). Medians of a few runs; writes a JSON file. Without
a GPU or CuPy it records why and exits 0. A measurement, not a test.

    python gpu/bench.py OUT.json
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import tritonserver  # noqa: E402
from tritonserver import _native  # noqa: E402
from common import IDENTITY_LIBRARY, make_options, single  # noqa: E402

SIZE = 64 * 2**20
RUNS = 15


def timed(fn: Any, sync: Any) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    out_path = sys.argv[1]
    tritonserver.load_core()
    record: dict[str, Any] = {"bytes": SIZE, "runs": RUNS}
    try:
        import cupy
    except ImportError as e:
        record["summary"] = f"skipped: CuPy not installed ({e})"
        cupy = None
    if cupy is not None and _native.cuda_device_count() == 0:
        record["summary"] = "skipped: no CUDA device"
    if "summary" in record:
        json.dump(record, open(out_path, "w"))
        print(record["summary"])
        return
    folder = tempfile.mkdtemp(prefix="gpu-bench-")
    try:
        os.makedirs(os.path.join(folder, "identity"))
        shutil.copy(IDENTITY_LIBRARY, os.path.join(folder, "identity"))
        server = tritonserver.Server(make_options(folder, server_id="gpu-bench", metrics=False))
        server.start(wait_until_ready=True, timeout=60)
        try:
            server.load("identity_fp32")
            model = server.model("identity_fp32")
            data = cupy.arange(SIZE // 4, dtype=cupy.float32)
            sync = cupy.cuda.runtime.deviceSynchronize
            arrays: list[Any] = []

            def through_binding() -> None:
                response = single(model.infer(inputs={"INPUT0": data}, output_memory_type="gpu:0"))
                arrays.append(cupy.from_dlpack(response.outputs["OUTPUT0"]))

            def cupy_copy() -> None:
                arrays.append(data.copy())

            def measure(fn: Any) -> list[float]:
                fn()  # warm-up (model instance, allocator, CuPy's pool)
                assert bool((arrays[-1] == data).all())
                times = []
                for _ in range(RUNS):
                    arrays.clear()  # the previous result's memory is freed outside the timing
                    times.append(timed(fn, sync))
                arrays.clear()
                return times

            binding = measure(through_binding)
            copy = measure(cupy_copy)
            output = single(model.infer(inputs={"INPUT0": data}, output_memory_type="gpu:0")).outputs["OUTPUT0"]
            start = time.perf_counter()
            for _ in range(1000):
                cupy.from_dlpack(output)
            from_dlpack_us = (time.perf_counter() - start) * 1000
            record.update(binding_ms=statistics.median(binding), cupy_copy_ms=statistics.median(copy),
                          from_dlpack_only_us=from_dlpack_us)
            record["summary"] = (
                f"64 MiB: infer (GPU in, GPU out) + cupy.from_dlpack {record['binding_ms']:.2f} ms, "
                f"cupy copy {record['cupy_copy_ms']:.2f} ms (medians of {RUNS}); "
                f"cupy.from_dlpack alone {from_dlpack_us:.1f} us"
            )
            del output
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    json.dump(record, open(out_path, "w"), indent=1)
    print(record["summary"])


if __name__ == "__main__":
    main()
