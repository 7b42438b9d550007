"""`python -m tritonserver` reports the distribution, glibc, numpy and the
core it found (the first thing a user runs when something does not work)."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys

import numpy
import pytest

import tritonserver


@pytest.mark.parametrize("args, status, expected", [
    (["--version"], 0, "tritonserver "),
    (["--help"], 0, "usage: python -m tritonserver"),
    (["--no-such-option"], 2, "unrecognized arguments: --no-such-option"),
])
def test_python_m_tritonserver_parses_its_arguments(tmp_path, args, status, expected):
    proc = subprocess.run([sys.executable, "-m", "tritonserver", *args], capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path))
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert expected in proc.stdout + proc.stderr
    assert "Triton core:" not in proc.stdout  # no report for these


def test_python_m_tritonserver_reports_the_environment(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITONSERVER_LIBRARY"}
    proc = subprocess.run([sys.executable, "-m", "tritonserver"], capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"(?m)^  installed as: tritonserver-binding \S+$", out), out
    assert f"glibc: {platform.libc_ver()[1]} (enough" in out, out
    assert f"numpy: {numpy.__version__} (" in out, out
    assert f"Triton core: {tritonserver.load_core()}" in out, out
    assert not proc.stderr.strip(), proc.stderr


def _nvidia_driver_installed() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_python_m_tritonserver_names_a_missing_driver(tmp_path):
    # Without a driver the CUDA runtime answers cudaErrorInsufficientDriver,
    # whose text, "CUDA driver version is insufficient for CUDA runtime
    # version", the report used to print as is: it sent users to update a
    # driver they do not have.
    if _nvidia_driver_installed():
        pytest.skip("an NVIDIA driver is installed here")
    proc = subprocess.run([sys.executable, "-m", "tritonserver"], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("CUDA:")]
    assert line.startswith("CUDA: 0 device(s) — no NVIDIA driver found (the CUDA runtime finds no libcuda.so.1: "
                           "this machine has no NVIDIA GPU, or its driver is not installed); no CUDA runtime sees a "
                           "device ("), line
    assert "driver version is insufficient" not in line, line
    assert "cudaGetDeviceCount: no NVIDIA driver (error 35)" in line, line
