"""The CUDA runtime search (cpp/cuda_runtime.cc, `_load_cuda`): every
candidate is tried until one sees a device, and `cuda_status()` names each
one passed over with its reason. Runs without a GPU (child processes: the
search happens once per process)."""

from __future__ import annotations

import pytest

from tritonserver import _native
from common import has_gpu, run_script


def test_each_failed_candidate_is_named_with_its_reason(tmp_path):
    rc, out, err = run_script("""
        from tritonserver import _native
        print(_native.cuda_load(["/nonexistent/libcudart.so.99", "libm.so.6"]))
        print(_native.cuda_status())
        print(_native.cuda_load(["libcudart.so.12"]))  # later calls: the first result
    """, tmp_path, timeout=60)
    assert rc == 0, err
    count, status, again = out.splitlines()
    assert count == "0" and again == "0"
    assert status.startswith("no CUDA runtime sees a device (")
    assert "/nonexistent/libcudart.so.99: " in status and "cannot open shared object file" in status
    assert "libm.so.6: lacks CUDA runtime functions: cudaGetDeviceCount" in status


def test_status_names_every_runtime_tried_when_none_sees_a_device():
    if has_gpu():
        status = _native.cuda_status()
        assert " device(s)" in status and "libcudart" in status
        return
    status = _native.cuda_status()
    assert "no CUDA runtime sees a device (" in status  # led by "no NVIDIA driver found" without one
    # The system names come last in the list: all were tried, not only the first.
    for soname in ("libcudart.so.12: ", "libcudart.so.13: ", "libcudart.so: "):
        assert soname in status, status
    assert status.index("libcudart.so.12: ") < status.index("libcudart.so.13: ")


@pytest.mark.parametrize("memory", ["gpu", "gpu:0"])
def test_gpu_request_without_a_device_names_why(model, memory):
    if has_gpu():
        pytest.skip("a GPU is present")
    import numpy
    import tritonserver

    with pytest.raises(tritonserver.UnsupportedError, match="no CUDA runtime sees a device"):
        model("identity_fp32").infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, output_memory_type=memory)
