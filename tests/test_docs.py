"""Every Python block of the user guide runs, in order, in one namespace, from
the repository root (blocks starting with `# requires: gpu` only with a GPU,
`# requires: jax` only where jax is installed)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re

import pytest

import tritonserver

from common import ROOT, has_gpu

GUIDE = ROOT / "docs" / "user_guide.md"


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_the_guide_has_code():
    assert len(python_blocks(GUIDE)) >= 6


@pytest.mark.python_backend
def test_user_guide_blocks_run(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "__guide__"}
    ran = 0
    for number, block in enumerate(python_blocks(GUIDE), 1):
        if block.startswith("# requires: gpu") and not has_gpu():
            continue
        if block.startswith("# requires: jax") and importlib.util.find_spec("jax") is None:
            continue
        if block.startswith("# requires: torch") and importlib.util.find_spec("torch") is None:
            continue
        try:
            exec(compile(block, f"{GUIDE.name} block {number}", "exec"), namespace)
        except Exception as e:  # name the block, then fail
            pytest.fail(f"user guide block {number} failed: {type(e).__name__}: {e}\n{block}")
        ran += 1
    out = capsys.readouterr().out
    assert ran >= 6
    assert "[5 5]" in out                 # quickstart: lengths of "hello", "wörld"
    assert "bound: [[3. 3. 3. 3.]]" in out  # Server.bind with a request parameter
    assert "no CUDA here" in out or has_gpu()
    assert os.getcwd() == str(ROOT)


def test_api_reference_builds_with_every_public_name_documented(tmp_path):
    import runpy

    build = runpy.run_path(str(ROOT / "docs" / "build_api.py"))["build"]
    text, missing = build()
    assert missing == []
    for name in ("Server", "Options", "InferenceRequest", "Tensor", "MemoryBuffer", "TritonError"):
        assert f"## {name}" in text


def test_the_site_builds_with_no_warnings():
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (make docs installs it)")
    import runpy
    import subprocess
    import sys

    site = runpy.run_path(str(ROOT / "docs" / "build_site.py"))
    site["stage"]()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    pages = {p.name for p in (ROOT / "build" / "site").glob("*.html")}
    assert {"index.html", "user_guide.html", "api.html", "design.html", "changelog.html"} <= pages
    api = (ROOT / "build" / "site" / "api.html").read_text()
    assert '<h2 id="server' in api and '<h2 id="inferencerequest' in api


def test_the_package_docstring_example_runs(monkeypatch):
    """help(tritonserver)'s example (FP32 inputs for an FP32 model) runs as
    written, from the repository root."""
    import doctest

    monkeypatch.chdir(ROOT)
    result = doctest.testmod(tritonserver, verbose=False)
    assert result.attempted >= 2 and result.failed == 0
