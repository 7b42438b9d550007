"""The python backend's layout: how a server runs python-backend models
(``Options.python_models``), and the backend folder laid out for that way.
(Not tritonserver/_python_models/, the runtime of in-process models.)
Python-backend models run
through the python backend's stub process, or in this interpreter (the
package's own backend library, tritonserver/_backend/libtriton_python.so,
laid out as the ``python`` backend of a backend folder in the user cache).

"auto" runs them in-process where the stub cannot run correctly (no stub
for this Python, or numpy 2 in the stub's environment: the stub of every
core on PyPI is built against numpy 1.x), and through the stub otherwise.
"""

from __future__ import annotations

import os
import sys
import zlib
from dataclasses import dataclass
from typing import Literal, Optional

from . import _triton_core
from ._errors import UnavailableError
from ._logging import INFO, package_log

PythonModelsMode = Literal["auto", "in-process", "stub"]
MODES: tuple[str, ...] = ("auto", "in-process", "stub")
IN_PROCESS = "in-process"
STUB = "stub"


@dataclass(frozen=True)
class PythonModels:
    """The way chosen (``mode``: "in-process" or "stub") and why."""

    mode: str
    reason: str

    @property
    def in_process(self) -> bool:
        return self.mode == IN_PROCESS


def backend_library() -> str:
    """The package's in-process python backend library, installed beside
    the extension (in an editable install too, where the Python files are
    the source tree's)."""
    from .. import _native

    return os.path.join(os.path.dirname(os.path.abspath(_native.__file__)), "_backend", "libtriton_python.so")


def _numpy_major_here() -> Optional[int]:
    """numpy's major version in this interpreter (None: no numpy)."""
    numpy = sys.modules.get("numpy")
    version = getattr(numpy, "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as distribution_version

            version = distribution_version("numpy")
        except Exception:  # not installed
            return None
    return int(str(version).split(".")[0])


def choose(requested: str, install: _triton_core.CoreInstall) -> PythonModels:
    """The way python models run for a server started with
    ``python_models=requested`` on `install` (the stub's environment is
    prepared already)."""
    if requested == IN_PROCESS:
        return PythonModels(IN_PROCESS, "Options.python_models is \"in-process\"")
    if requested == STUB:
        return PythonModels(STUB, "Options.python_models is \"stub\"")
    if install.python_backend is None:
        return PythonModels(STUB, "this Triton core's own python backend (not an nvidia-pytriton core)")
    problem = _triton_core.python_stub_problem(install)
    if problem is not None:
        return PythonModels(IN_PROCESS, problem)
    if _triton_core.stub_environment() == sys.prefix:
        major = _numpy_major_here()
        if major is not None and major >= 2:
            return PythonModels(IN_PROCESS, f"numpy {major}.x is installed here and the python backend stub "
                                "of every Triton core on PyPI needs numpy<2")
        return PythonModels(STUB, "the stub of this core runs in this environment (numpy<2)")
    report = _triton_core.stub_environment_report()
    if report is not None and report.problem is not None:
        return PythonModels(IN_PROCESS, report.problem)
    return PythonModels(STUB, f"the stub runs in {_triton_core.stub_environment()} "
                        f"(${_triton_core.STUB_ENVIRONMENT_VARIABLE})")


_announced: set[str] = set()


def announce(choice: PythonModels, requested: str) -> None:
    """One log record when "auto" chose in-process (once per reason)."""
    if requested == "auto" and choice.in_process and choice.reason not in _announced:
        _announced.add(choice.reason)
        package_log(INFO, "python-backend models run in-process (Options.python_models=\"auto\"): %s",
                    choice.reason)


# The package's backend library under a backend name of its own, present in
# every backend folder a server is given: models made by Server.bind() name
# it, so they run in-process whichever way python-backend models run.
BOUND_BACKEND = "tritonserver_python"


def package_backend_directory(base: Optional[str], in_process: bool) -> str:
    """The backend folder a server is given: a folder of links (in the user
    cache) to every backend of `base` (none when None), with the package's
    backend library as BOUND_BACKEND and, when `in_process`, as the python
    backend too (replacing `base`'s)."""
    library = backend_library()
    if not os.path.isfile(library):
        raise UnavailableError(
            f"the in-process python backend library {library} is missing from this tritonserver install: "
            "reinstall the package (pip install --force-reinstall tritonserver-binding)")
    # The library forwards to this extension's table: handed to it now,
    # before the core can load it (the core is loaded: build_core_options).
    from .. import _native

    problem = _native.attach_python_backend(library)
    if problem:
        raise UnavailableError(problem)
    key = f"{zlib.crc32(library.encode()):08x}"
    ours = {}
    for backend in ("python", BOUND_BACKEND):
        folder = _triton_core.make_cache_folder(f"inprocess-{key}", {f"libtriton_{backend}.so": library},
                                                subfolder=backend)
        if folder is None:
            raise UnavailableError(_NO_CACHE)
        ours[backend] = os.path.join(folder, backend)
    links = {}
    if base is not None and os.path.isdir(base):
        links = {name: os.path.join(os.path.abspath(base), name) for name in sorted(os.listdir(base))}
    if in_process:
        links["python"] = ours["python"]
    links[BOUND_BACKEND] = ours[BOUND_BACKEND]
    base_key = f"{zlib.crc32(os.path.realpath(base).encode()):08x}" if base else "none"
    overlay = _triton_core.make_cache_folder(f"backends-{key}-{base_key}-{int(in_process)}", links,
                                             subfolder="backends")
    if overlay is None:
        raise UnavailableError(_NO_CACHE)
    global _pruned
    if not _pruned:  # once per process: a listing of the cache folder
        _prune_stale_overlays(os.path.dirname(overlay))
        _pruned = True
    return os.path.join(overlay, "backends")


_pruned = False


def _prune_stale_overlays(cache: str) -> None:
    """Remove backend folders of links made for folders that are gone (a
    deleted virtualenv or temporary folder): each holds only links."""
    import shutil  # here: only when a server starts

    for name in os.listdir(cache):
        backends = os.path.join(cache, name, "backends")
        if not name.startswith("backends-") or not os.path.isdir(backends):
            continue
        try:
            entries = [os.path.join(backends, entry) for entry in os.listdir(backends)]
        except OSError:
            continue
        if any(os.path.islink(entry) and not os.path.exists(entry) for entry in entries):
            shutil.rmtree(os.path.join(cache, name), ignore_errors=True)


_NO_CACHE = ("python models in-process need a backend folder in the user cache folder ($XDG_CACHE_HOME or "
             "~/.cache) or the temporary folder, and neither can be written: make one of them writable")
