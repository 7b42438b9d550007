"""Smoke tests for an installed wheel: they need no Triton core (cibuildwheel
runs them in a container where none can be installed); the last one starts a
server and runs one inference when a core is present."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy
import pytest

import tritonserver
from tritonserver import _native

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=HERE)


def test_import_and_public_names():
    assert tritonserver.__version__
    for name in ("Server", "Options", "Model", "InferenceRequest", "InferenceResponse", "Tensor",
                 "MemoryBuffer", "DataType", "MemoryType", "TritonError", "UnsupportedError"):
        assert hasattr(tritonserver, name), name
    assert tritonserver.DataType.FP32 == 11


def _needed(path: str) -> list[str]:
    """DT_NEEDED of a shared object: the test build's own ELF reader, else readelf."""
    hooks = getattr(_native, "testing", None)
    if hooks is not None:
        return list(hooks.elf_needed(path))
    if shutil.which("readelf") is None:
        pytest.skip("no readelf, and the extension has no test hooks")
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"Shared library: \[(.*)\]", out)


def test_extension_needs_no_cuda_or_triton_library():
    names = _needed(_native.__file__)
    allowed = ("libstdc++", "libgcc_s", "libc.so", "libm.so", "libdl.so", "ld-linux", "libpthread")
    assert names and all(n.startswith(allowed) for n in names), names


def test_third_party_notices_ship_with_the_package():
    """The license texts of the code compiled into the native libraries are
    installed beside them, one section per part the extension was built with."""
    path = os.path.join(os.path.dirname(tritonserver.__file__), "THIRD_PARTY_NOTICES.txt")
    with open(path, encoding="utf-8") as notices:
        text = notices.read()
    sections = dict(re.findall(r"^==== (\S+) \([^\n]*\)\n\n(.*?)(?=\n==== |\Z)", text, re.M | re.S))
    expected = {"nanobind", "robin-map", "yyjson"}
    expected |= {"llhttp"} if hasattr(_native, "HttpTransport") else set()
    expected |= {"nghttp2", "zlib"} if hasattr(_native, "GrpcTransport") else set()
    assert set(sections) == expected
    grants = ("Permission is hereby granted", "Redistribution", "Permission is granted to anyone")  # MIT, BSD, zlib
    for name, body in sections.items():
        assert "Copyright" in body and any(grant in body for grant in grants), name
        assert "/*" not in body and "*/" not in body, name  # a header comment's markers removed


@pytest.mark.skipif(os.environ.get("TRITONSERVER_WHEEL_CHECK") != "1",
                    reason="checks a wheel (tests/check_wheel.sh sets TRITONSERVER_WHEEL_CHECK=1)")
def test_wheel_has_no_test_hooks():
    assert not hasattr(_native, "testing")


def test_tensor_round_trip_without_a_core():
    data = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    tensor = tritonserver.Tensor.from_dlpack(data)
    assert tensor.data_type == tritonserver.DataType.FP32 and list(tensor.shape) == [2, 3]
    numpy.testing.assert_array_equal(numpy.from_dlpack(tensor), data)


def test_clear_error_without_a_core(tmp_path):
    done = _run(f"""
        import sys, tritonserver
        sys.path[:] = [p for p in sys.path if "-packages" not in p]
        try:
            tritonserver.Server(model_repository={str(tmp_path)!r}).start()
        except tritonserver.UnavailableError as e:
            print("UNAVAILABLE", e)
    """)
    assert "UNAVAILABLE" in done.stdout, done.stderr[-2000:]
    assert "pip install --no-deps nvidia-pytriton==0.7.0" in done.stdout


def _core_available() -> bool:
    try:
        tritonserver.load_core()
        return True
    except tritonserver.UnavailableError:
        return False


# No marks of the repository's own here (python_backend, ...): tests/check_wheel.sh
# runs this file without pyproject.toml, where they are unknown.
@pytest.mark.skipif(not _core_available(), reason="no Triton core installed (cibuildwheel container)")
def test_start_and_one_inference():
    models = os.path.join(os.path.dirname(HERE), "examples", "models")
    with tritonserver.Server(model_repository=models) as server:
        response = next(iter(server.model("text_stats").infer(inputs={"TEXT": ["wheel"]})))
        assert numpy.from_dlpack(response.outputs["LENGTH"]).tolist() == [5]


def test_runs_without_the_repository_pytest_configuration(tmp_path):
    # tests/check_wheel.sh runs this file in a folder of its own, without
    # pyproject.toml and its list of marks: a mark of the repository's own
    # was a PytestUnknownMarkWarning there.
    shutil.copy(os.path.abspath(__file__), tmp_path / "test_wheel_smoke.py")
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-W", "error::pytest.PytestUnknownMarkWarning", "test_wheel_smoke.py"],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "test_start_and_one_inference" in done.stdout
