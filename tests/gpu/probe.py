"""The GPU check's probe (run by run_gpu_checks.sh): what the process sees.

Records, in a JSON file: the machine (kernel, driver, MIG and compute mode),
the tritonserver imported (it must come from the bundle's install folder),
the Triton core, the CUDA runtime our allocator opened (and every runtime
passed over, with its reason), the GPUs, CuPy's and PyTorch's versions and
CUDA runtimes, every libcudart / libcuda mapped into this one process after
CuPy and torch have touched the GPU (/proc/self/maps), and whether device
pointers pass between the runtimes (our allocator's memory read by CuPy and
torch, CuPy's memory copied by ours).

Never stops the run: each step's exception is recorded under its key (as
"ERROR <type>: <message>") and the next step runs; the JSON file is
rewritten after every step, so a native crash leaves what was learnt before
it, and `steps` names the step that was running. Exit status 0 always,
except when the process itself dies (run_gpu_checks.sh records that).

    python probe.py SITE_FOLDER OUT.json
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import subprocess
import sys
import traceback
from typing import Any, Callable

RECORD: dict[str, Any] = {"steps": []}
OUT_PATH = ""


def save() -> None:
    try:
        with open(OUT_PATH + ".tmp", "w") as f:
            json.dump(RECORD, f, indent=1, default=str)
        os.replace(OUT_PATH + ".tmp", OUT_PATH)
    except Exception as e:  # the log still has it
        print(f"probe: cannot write {OUT_PATH}: {e}", flush=True)


def step(key: str, fn: Callable[[], Any]) -> Any:
    """Run one step; record its value, or its error, and go on."""
    RECORD["steps"].append(f"{key}: running")
    save()
    print(f"probe: {key} ...", flush=True)
    try:
        value = fn()
    except BaseException as e:  # noqa: BLE001 - SystemExit and all: recorded, never fatal
        if isinstance(e, KeyboardInterrupt):
            raise
        value = f"ERROR {type(e).__name__}: {e}"
        traceback.print_exc()
    RECORD[key] = value
    RECORD["steps"][-1] = f"{key}: done"
    save()
    print(f"{key:32} {value}", flush=True)
    return value


def run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unavailable: {e}"
    return (done.stdout.strip() or done.stderr.strip() or f"(no output, status {done.returncode})")


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


def driver_api_version() -> str:
    libcuda = ctypes.CDLL("libcuda.so.1")
    version = ctypes.c_int(0)
    rc = libcuda.cuDriverGetVersion(ctypes.byref(version))
    if rc != 0:
        return f"cuDriverGetVersion failed: {rc}"
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def machine() -> dict[str, Any]:
    return {
        "uname_r": platform.release(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"),
        "nvidia_smi": run(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,memory.used,"
                           "mig.mode.current,compute_mode,persistence_mode,pci.bus_id",
                           "--format=csv,noheader"]),
        "nvidia_smi_L": run(["nvidia-smi", "-L"]),
    }


def main() -> None:
    global OUT_PATH
    site, OUT_PATH = sys.argv[1], sys.argv[2]
    RECORD["python"] = sys.version.split()[0]
    RECORD["platform"] = platform.platform()
    step("machine", machine)
    step("cuda_driver_api", driver_api_version)
    numpy = None
    tritonserver = None
    native = None

    def imports() -> str:
        nonlocal numpy, tritonserver, native
        import numpy as np
        import tritonserver as ts
        from tritonserver import _native as nat

        numpy, tritonserver, native = np, ts, nat
        where = os.path.realpath(ts.__file__)
        ok = where.startswith(os.path.realpath(site) + os.sep)
        return f"numpy {np.__version__}; tritonserver {ts.__version__} from {os.path.dirname(where)}" + (
            "" if ok else f" -- NOT the bundle's (expected under {site})")

    step("imports", imports)
    if tritonserver is None or native is None or numpy is None:
        RECORD["problem"] = "tritonserver or numpy cannot be imported"
        save()
        return
    RECORD["numpy"] = numpy.__version__
    RECORD["tritonserver"] = f"{tritonserver.__version__} from {os.path.dirname(tritonserver.__file__)}"
    RECORD["bundle_import"] = os.path.realpath(tritonserver.__file__).startswith(os.path.realpath(site) + os.sep)
    step("core", lambda: str(tritonserver.load_core()))
    step("allocator_cuda_runtime", native.cuda_status)
    devices = step("cuda_devices", native.cuda_device_count)
    gpu = isinstance(devices, int) and devices > 0
    data = numpy.arange(1024, dtype=numpy.float32)
    ours: dict[str, Any] = {}

    if gpu:
        def our_copy() -> bool:
            # our runtime's cudaMalloc + cudaMemcpy, then back with cudaMemcpy
            ours["tensor"] = tritonserver.Tensor.from_dlpack(data).to_device("gpu:0")
            return bool((numpy.from_dlpack(ours["tensor"].to_host()) == data).all())

        step("our_runtime_round_trip", our_copy)

    cupy = None

    def import_cupy() -> str:
        nonlocal cupy
        import cupy as cp

        cupy = cp
        return cp.__version__

    step("cupy", import_cupy)
    if cupy is not None:
        step("cupy_cuda_runtime", lambda: cupy.cuda.runtime.runtimeGetVersion())
        if gpu:
            step("cupy_first_kernel", lambda: int(cupy.arange(10).sum()))  # NVRTC compile + cache
            if "tensor" in ours:
                step("cupy_reads_our_memory",
                     lambda: bool((cupy.asnumpy(cupy.from_dlpack(ours["tensor"])) == data).all()))

            def ours_reads_cupy() -> bool:
                theirs = cupy.arange(1024, dtype=cupy.float32)
                return bool((numpy.from_dlpack(tritonserver.Tensor.from_dlpack(theirs).to_host()) == data).all())

            step("our_runtime_reads_cupy_memory", ours_reads_cupy)

    torch = None

    def import_torch() -> str:
        nonlocal torch
        import torch as t

        torch = t
        RECORD["torch_cuda"] = str(t.version.cuda)
        return t.__version__

    step("torch", import_torch)
    if torch is not None:
        available = step("torch_cuda_available", lambda: torch.cuda.is_available())
        if gpu and available is True and "tensor" in ours:
            step("torch_reads_our_memory",
                 lambda: bool((torch.from_dlpack(ours["tensor"]).cpu().numpy() == data).all()))

    def import_jax() -> str:
        import jax

        return f"{jax.__version__}, devices {jax.devices()}"

    step("jax", import_jax)
    step("libcudart_mapped", lambda: mapped_libraries("libcudart"))
    step("libcuda_mapped", lambda: mapped_libraries("libcuda.so", "libcuda-"))
    ours.clear()
    step("finished", lambda: True)


if __name__ == "__main__":
    main()
