"""examples/ray_serve.py (make ray-demo) runs: it starts its own local Ray
cluster, serves add_sub on two replicas and queries it over HTTP and a
handle (make test-ray; deselected from the main suite)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from common import ROOT

pytestmark = pytest.mark.ray


def test_ray_serve_example_runs():
    pytest.importorskip("ray", reason="make test-ray installs ray[serve]")
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "ray_serve.py")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "GET /v2/health/ready -> 200" in run.stdout
    assert "'OUTPUT0': [11.0, 22.0, 33.0, 44.0]" in run.stdout
    assert "handle.infer x8 -> all correct" in run.stdout
