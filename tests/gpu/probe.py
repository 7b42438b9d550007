"""The GPU check's probe (run by run_gpu_checks.sh): what the process sees.

Records, in a JSON file: the tritonserver imported (it must come from the
bundle's install folder), the Triton core, the CUDA runtime our allocator
opened, the driver and GPUs, CuPy's and PyTorch's versions and CUDA runtimes,
every libcudart / libcuda mapped into this one process after CuPy and torch
have touched the GPU (/proc/self/maps), and whether device pointers pass
between the runtimes (our allocator's memory read by CuPy and torch, CuPy's
memory copied by ours). Fails only when the package or the core is unusable.

    python probe.py SITE_FOLDER OUT.json
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import subprocess
import sys
from typing import Any


def mapped_libraries(*prefixes: str) -> list[str]:
    """Files whose name starts with one of `prefixes` mapped into this process."""
    found: list[str] = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path and os.path.basename(path).startswith(prefixes) and path not in found:
                found.append(path)
    return found


def driver() -> dict[str, Any]:
    info: dict[str, Any] = {}
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
            info["cuda_driver_api"] = f"{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError as e:
        info["libcuda"] = f"not loadable: {e}"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.SubprocessError) as e:
        info["nvidia_smi"] = f"unavailable: {e}"
    return info


def attempt(record: dict[str, Any], key: str, fn: Any) -> None:
    try:
        record[key] = fn()
    except Exception as e:  # recorded, not fatal: the tests say the rest
        record[key] = f"ERROR {type(e).__name__}: {e}"


def main() -> None:
    site, out_path = sys.argv[1], sys.argv[2]
    import numpy
    import tritonserver
    from tritonserver import _native

    record: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "tritonserver": f"{tritonserver.__version__} from {os.path.dirname(tritonserver.__file__)}",
    }
    if not os.path.realpath(tritonserver.__file__).startswith(os.path.realpath(site) + os.sep):
        raise SystemExit(f"tritonserver was imported from {tritonserver.__file__}, not from the bundle in {site}")
    record["core"] = tritonserver.load_core()
    record["allocator_cuda_runtime"] = _native.cuda_status()
    record["cuda_devices"] = _native.cuda_device_count()
    record["driver"] = driver()
    gpu = _native.cuda_device_count() > 0
    data = numpy.arange(1024, dtype=numpy.float32)
    ours = None
    if gpu:
        ours = tritonserver.Tensor.from_dlpack(data).to_device("gpu:0")  # our runtime's cudaMalloc + cudaMemcpy

    try:
        import cupy

        record["cupy"] = cupy.__version__
        attempt(record, "cupy_cuda_runtime", lambda: cupy.cuda.runtime.runtimeGetVersion())
        if gpu:
            attempt(record, "cupy_reads_our_memory",
                    lambda: bool((cupy.asnumpy(cupy.from_dlpack(ours)) == data).all()))
            theirs = cupy.arange(1024, dtype=cupy.float32)
            attempt(record, "our_runtime_reads_cupy_memory",
                    lambda: bool((numpy.from_dlpack(tritonserver.Tensor.from_dlpack(theirs).to_host()) == data).all()))
    except ImportError as e:
        record["cupy"] = f"not installed ({e})"
    try:
        import torch

        record["torch"] = torch.__version__
        record["torch_cuda"] = str(torch.version.cuda)
        record["torch_cuda_available"] = torch.cuda.is_available()
        if gpu and torch.cuda.is_available():
            attempt(record, "torch_reads_our_memory",
                    lambda: bool((torch.from_dlpack(ours).cpu().numpy() == data).all()))
    except ImportError as e:
        record["torch"] = f"not installed ({e})"
    record["libcudart_mapped"] = mapped_libraries("libcudart")
    record["libcuda_mapped"] = mapped_libraries("libcuda.so", "libcuda-")
    json.dump(record, open(out_path, "w"), indent=1)
    for key, value in record.items():
        print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
