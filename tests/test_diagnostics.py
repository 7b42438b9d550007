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
