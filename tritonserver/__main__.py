"""``python -m tritonserver serve [flags]``: serve models over the network
with the flags of NVIDIA's tritonserver binary (tritonserver/_serve_command.py,
docs/serving.md).

``python -m tritonserver``: what this installation would use — the package
version, the Triton core found (path, Triton and C API versions), CUDA, and
the backends available. The first thing to run when something does not work.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile

import tritonserver
from tritonserver import _native
from tritonserver._api import _triton_core
from tritonserver._api._options import DEFAULT_BACKEND_DIRECTORY
from tritonserver._api._python_backend_layout import choose as choose_python_models


def _backends(install: _triton_core.CoreInstall) -> list[str]:
    found = []
    for folder in (DEFAULT_BACKEND_DIRECTORY, install.backend_directory):
        if folder and os.path.isdir(folder):
            found += [f"{name} ({folder})" for name in sorted(os.listdir(folder))
                      if os.path.isdir(os.path.join(folder, name))]
    links = _triton_core.python_backend_directory(install)
    if links:
        found.append(f"python, linked for Python {sys.version_info.major}.{sys.version_info.minor} ({links})")
    return found


def _installed_as() -> str:
    """The distribution that owns the imported package: ours, NVIDIA's (both
    write the `tritonserver` folder), or none (a source tree)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from tritonserver import _DISTRIBUTION

    try:
        ours = distribution(_DISTRIBUTION)
    except PackageNotFoundError:
        return "not installed by pip (a source tree?)"
    found = f"{_DISTRIBUTION} {ours.version}"
    try:
        nvidia = distribution("tritonserver")
    except PackageNotFoundError:
        return found
    return (f"{found}, but NVIDIA's tritonserver {nvidia.version} is installed too: both write the "
            "tritonserver folder; uninstall both, then install one (docs/user_guide.md, Install)")


def _glibc() -> str:
    name, version = platform.libc_ver()
    if name != "glibc":
        return f"not glibc ({name or 'unknown'}): the nvidia-pytriton core needs glibc 2.35+"
    major, _, minor = version.partition(".")
    ok = (int(major), int(minor or 0)) >= (2, 35)
    return f"{version} ({'enough' if ok else 'too old'} for the nvidia-pytriton core, which needs 2.35+)"


def _numpy() -> str:
    try:
        import numpy
    except ImportError:
        return "not installed (pip install numpy)"
    return f"{numpy.__version__} ({os.path.dirname(numpy.__file__)})"


def main(argv: "list[str] | None" = None) -> int:
    """Print the report (``--version``: the package version only); unknown
    arguments are an error (exit status 2)."""
    import argparse

    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["serve"]:
        from tritonserver._serve_command import serve

        return serve(arguments[1:])
    parser = argparse.ArgumentParser(
        prog="python -m tritonserver",
        description="What this tritonserver installation would use: the Triton core found (path, Triton and C "
                    "API versions), CUDA, the backends, numpy, and how python models would run. "
                    "`python -m tritonserver serve --help`: serve models over HTTP and gRPC.")
    parser.add_argument("--version", action="version", version=f"tritonserver {tritonserver.__version__}")
    parser.parse_args(arguments)
    print(f"tritonserver {tritonserver.__version__} on Python {platform.python_version()} ({sys.executable})")
    print(f"  installed as: {_installed_as()}")
    print(f"glibc: {_glibc()}")
    print(f"numpy: {_numpy()}")
    try:
        install = _triton_core.load_core()
    except tritonserver.TritonError as e:
        print(f"Triton core: none found\n{e}")
        return 1
    major, minor = _native.loaded_api_version()
    with tempfile.TemporaryDirectory() as repository:
        server = tritonserver.Server(model_repository=repository, server_id="probe",
                                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
        with server:
            version = server.metadata()["version"]
    print(f"Triton core: {install.library}")
    print(f"  found via: {install.source}; Triton {version}, C API {major}.{minor}")
    missing = _native.missing_functions()
    print("  every optional feature available" if not missing else "  features this core lacks (docs/cores.md):")
    for function, feature in missing:
        print(f"    {feature}: needs {function}")
    devices = _native.cuda_device_count()
    print(f"CUDA: {devices} device(s) — {_native.cuda_status()}")
    backends = _backends(install)
    print("Backends:" if backends else "Backends: none found")
    for line in backends:
        print(f"  {line}")
    if install.python_backend is not None:
        problem = _triton_core.python_stub_problem(install)
        if problem:
            print(f"  python backend stub unusable here (python models run in-process): {problem}")
    _report_numpy(install)
    return 0


def _report_numpy(install: _triton_core.CoreInstall) -> None:
    """numpy in the python backend stub's environment (numpy here is
    printed by main()), and how python-backend models would run
    (Options.python_models="auto") and why."""
    if install.python_backend is None:
        return
    try:
        _triton_core.prepare_stub_environment(install)  # as start() does
        report = _triton_core.stub_environment_report()
        choice = choose_python_models("auto", install)
    except tritonserver.TritonError as e:
        print(f"Python models: cannot run here: {e}")
        return
    if report is not None:
        numpy_seen = report.numpy_version or "not importable"
        print(f"Python backend stub environment: {report.python} (Python {report.python_version}, "
              f"numpy {numpy_seen}; this core's stub needs numpy<2)")
    way = "in-process" if choice.in_process else "through the stub"
    print(f"Python models: {way} (Options.python_models=\"auto\"): {choice.reason}")


if __name__ == "__main__":
    sys.exit(main())
