"""Finding the Triton core: the nvidia-pytriton wheel's core, the
TRITONSERVER_LIBRARY variable, the error when no core is visible, and the
python backend link folder. Scenarios that need a process without a loaded
core run in a child interpreter."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import tritonserver
from tritonserver import _native
from tritonserver._api import _triton_core
from common import MODELS, ROOT, hooks, run_script

NGC_CORE = "/opt/tritonserver/lib/libtritonserver.so"
INSTALL_HINT = "pip install --no-deps nvidia-pytriton==0.7.0"

needs_wheel_core = pytest.mark.skipif(
    bool(os.environ.get("TRITONSERVER_LIBRARY")) or os.path.isfile(NGC_CORE),
    reason="another core (TRITONSERVER_LIBRARY or /opt/tritonserver) takes precedence here",
)


def run_child(code: str, cwd: pathlib.Path, **env_overrides: str | None) -> dict:
    """Run `code` in a fresh interpreter; it prints one JSON line last."""
    env = {k: v for k, v in os.environ.items() if k != "TRITONSERVER_LIBRARY"}
    for key, value in env_overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"child failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def wheel_core() -> str:
    install = _triton_core.find_core()
    assert install.source == "nvidia-pytriton", install
    return install.library


# -- the core this process uses -------------------------------------------------------

@needs_wheel_core
def test_load_core_returns_the_nvidia_pytriton_core():
    path = tritonserver.load_core()
    assert isinstance(path, str)
    assert os.path.isfile(path)
    library = pathlib.Path(path)
    assert library.name.startswith("libtritonserver") and ".so" in library.name
    assert library.parent.name == "nvidia_pytriton.libs"
    assert any(pathlib.Path(p) == library.parent.parent for p in sys.path if p)
    assert _triton_core.loaded_core().source == "nvidia-pytriton"


def test_load_core_is_loaded_once():
    first = tritonserver.load_core()
    assert tritonserver.load_core() == first
    assert _native.triton_loaded()
    assert hooks().loaded_core_path() == first


# -- no core visible ---------------------------------------------------------------

NO_CORE_CHILD = """
    import json, os, sys
    import tritonserver
    sys.path[:] = [p for p in sys.path if "site-packages" not in p and "dist-packages" not in p]
    repository = os.getcwd()
    results = {}
    for case, value in (("missing_env", os.environ.get("MISSING_LIBRARY")), ("unset_env", None)):
        if value is None:
            os.environ.pop("TRITONSERVER_LIBRARY", None)
        else:
            os.environ["TRITONSERVER_LIBRARY"] = value
        server = tritonserver.Server(model_repository=repository)
        try:
            server.start()
            results[case] = None
            server.stop()
            continue
        except Exception as e:
            error = [type(e).__name__, type(e).__module__, str(e)]
        try:
            server.ready()
            still = "started"
        except tritonserver.InvalidArgumentError as e:
            still = str(e)
        results[case] = {"error": error, "after": still}
    try:
        tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, "no_core_family", "x")
        results["metric_family"] = None
    except Exception as e:
        results["metric_family"] = [type(e).__name__, str(e)]
    print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def no_core(tmp_path_factory):
    if os.path.isfile(NGC_CORE):
        pytest.skip("an NGC core in /opt/tritonserver is always visible here")
    cwd = tmp_path_factory.mktemp("no_core")
    missing = str(cwd / "nowhere" / "libtritonserver.so")
    return missing, run_child(NO_CORE_CHILD, cwd, MISSING_LIBRARY=missing)


def test_no_core_is_unavailable_with_install_hint(no_core):
    _, results = no_core
    result = results["unset_env"]
    assert result is not None, "the server started without any core visible"
    name, module, message = result["error"]
    assert (name, module) == ("UnavailableError", "tritonserver")
    assert INSTALL_HINT in message
    # Every place tried is listed.
    assert "TRITONSERVER_LIBRARY" in message
    assert NGC_CORE in message
    assert "nvidia_pytriton" in message or "nvidia-pytriton" in message
    assert result["after"] == "Server not started"


def test_missing_tritonserver_library_file_is_reported(no_core):
    missing, results = no_core
    result = results["missing_env"]
    assert result is not None, "the server started without any core visible"
    name, _, message = result["error"]
    assert name == "UnavailableError"
    assert missing in message
    assert "TRITONSERVER_LIBRARY" in message
    assert INSTALL_HINT in message


def test_metric_family_without_core_is_unavailable(no_core):
    _, results = no_core
    assert results["metric_family"] is not None
    name, message = results["metric_family"]
    assert name == "UnavailableError"
    assert INSTALL_HINT in message


# -- TRITONSERVER_LIBRARY and explicit paths ------------------------------------------

@needs_wheel_core
def test_tritonserver_library_variable_selects_the_core(tmp_path):
    library = wheel_core()
    result = run_child("""
        import json, tritonserver
        from tritonserver._api import _triton_core
        path = tritonserver.load_core()
        print(json.dumps([path, _triton_core.loaded_core().source]))
    """, tmp_path, TRITONSERVER_LIBRARY=library)
    assert result == [library, "TRITONSERVER_LIBRARY"]


@needs_wheel_core
def test_explicit_path_loads_that_core(tmp_path):
    library = wheel_core()
    result = run_child(f"""
        import json, tritonserver
        from tritonserver._api import _triton_core
        path = tritonserver.load_core({library!r})
        print(json.dumps([path, _triton_core.loaded_core().source]))
    """, tmp_path)
    assert result == [library, "explicit path"]


def test_explicit_missing_path_is_not_silently_replaced(tmp_path):
    missing = str(tmp_path / "nowhere" / "libtritonserver.so")
    result = run_child(f"""
        import json, tritonserver
        try:
            print(json.dumps({{"loaded": tritonserver.load_core({missing!r})}}))
        except Exception as e:
            print(json.dumps({{"error": [type(e).__name__, str(e)]}}))
    """, tmp_path)
    assert "error" in result, f"load_core({missing!r}) loaded another core: {result}"
    name, message = result["error"]
    assert name == "UnavailableError"
    assert missing in message


# -- the python backend link folder ------------------------------------------------

@needs_wheel_core
def test_python_backend_directory_holds_the_stub_for_this_python():
    install = _triton_core.load_core()
    folder = _triton_core.python_backend_directory(install)
    assert folder is not None
    python = pathlib.Path(folder) / "python"
    assert python.is_dir()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = python / "triton_python_backend_stub"
    assert stub.is_file()
    assert os.access(stub, os.X_OK)
    assert stub.resolve().parent.name == version
    assert (python / "libtriton_python.so").resolve().is_file()
    assert (python / "triton_python_backend_utils.py").resolve().is_file()
    assert (python / "libtriton_python.so").resolve() == pathlib.Path(install.python_backend[0]).resolve()
    # Made once: a second call reuses the same folder.
    assert _triton_core.python_backend_directory(install) == folder


def test_python_m_tritonserver_reports_the_core_it_would_use(tmp_path):
    """`python -m tritonserver` names the core, its versions, CUDA and backends."""
    import subprocess
    import sys

    import tritonserver

    done = subprocess.run([sys.executable, "-m", "tritonserver"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert f"Triton core: {tritonserver.load_core()}" in out
    assert "Triton 2.51.0, C API 1.34" in out
    assert "found via: nvidia-pytriton" in out
    assert "CUDA: " in out
    assert "python, linked for Python" in out


@pytest.mark.python_backend
def test_python_backend_without_a_stub_for_this_python_is_refused_clearly(tmp_path):
    """A core whose wheel has no stub for the running Python (nvidia-pytriton
    0.5.0 and 0.4.2 stop at 3.11): with python_models="stub", loading a
    python model raises UnsupportedError naming the versions it has, not the
    core's bare "stub not found"; with "auto" the model runs in-process."""
    install = _triton_core.find_core()
    if install.python_backend is None:
        pytest.skip("this core has no nvidia-pytriton python backend")
    tree = tmp_path / "site"
    (tree / "pytriton" / "tritonserver" / "python_backend_stubs").mkdir(parents=True)
    (tree / "nvidia_pytriton.libs").symlink_to(install.library_folder)
    real = pathlib.Path(install.python_backend[2]).parent
    for name in ("backends", "caches"):
        (tree / "pytriton" / "tritonserver" / name).symlink_to(real / name)
    other = "3.8" if sys.version_info[:2] != (3, 8) else "3.9"
    (tree / "pytriton" / "tritonserver" / "python_backend_stubs" / other).symlink_to(
        real / "python_backend_stubs" / other)
    library = tree / "nvidia_pytriton.libs" / os.path.basename(install.library)
    result = run_child(f"""
        import json, numpy, tritonserver
        server = tritonserver.Server(model_repository={str(MODELS)!r}, log_error=False, python_models="stub",
                                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
        server.start(wait_until_ready=True)
        try:
            server.load("add_sub")
            outcome = None
        except tritonserver.TritonError as e:
            outcome = [type(e).__name__, str(e)]
        server.stop()
        server = tritonserver.Server(model_repository={str(MODELS)!r}, log_error=False,
                                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
        server.start(wait_until_ready=True)
        server.load("add_sub")
        a = numpy.arange(4, dtype=numpy.float32)
        response = list(server.model("add_sub").infer(inputs={{"INPUT0": a, "INPUT1": a}}))[0]
        values = numpy.from_dlpack(response.outputs["OUTPUT0"]).tolist()
        mode = server.python_models
        del response
        server.stop()
        print(json.dumps([outcome, mode, values]))
    """, tmp_path, TRITONSERVER_LIBRARY=str(library))
    outcome, mode, values = result
    assert (mode, values) == ("in-process", [0, 2, 4, 6])  # "auto": served in-process
    assert outcome is not None, "a python model loaded without a stub for this Python"
    name, message = outcome
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert name == "UnsupportedError"
    assert f"has stubs for Python {other} only, not for this Python {version}" in message
    assert "triton_python_backend_stub is not found" in message  # the core's own words, kept


def test_the_install_hint_names_the_pinned_core():
    # The core pin is said once, in pyproject.toml's dependency group
    # `core` (read by the Makefile and the runner scripts); the hint the
    # package prints when no core is found must name that same wheel.
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(ROOT / "pyproject.toml", "rb") as f:
        (pin,) = tomllib.load(f)["dependency-groups"]["core"]
    assert _triton_core.INSTALL_HINT == f"pip install --no-deps {pin}" == INSTALL_HINT


def test_backend_folders_of_links_to_folders_gone_are_pruned(backend_directory, tmp_path):
    """Every server's backend folder is a folder of links in the user cache;
    one whose targets are gone (a deleted venv or temporary folder) is
    removed when the first server of a process starts, and a live one is
    kept."""
    cache = tmp_path / "cache"
    stale = cache / "tritonserver" / "backends-00000000-deadbeef-0" / "backends"
    stale.mkdir(parents=True)
    (stale / "python").symlink_to(tmp_path / "deleted-venv" / "python")
    code = f"""
import tritonserver
from common import make_options
with tritonserver.Server(make_options({backend_directory!r}, server_id="prune")) as server:
    print("ready", server.ready())
"""
    rc, out, err = run_script(code, tmp_path, timeout=120, env={"XDG_CACHE_HOME": str(cache)})
    assert rc == 0, err
    assert "ready True" in out
    assert not stale.parent.exists()
    live = [p for p in (cache / "tritonserver").glob("backends-*-*-*") if (p / "backends").is_dir()]
    assert live, "the server's own folder of links is kept"
