"""Finding, loading and preparing a Triton core.

Search order: an explicit path (``load_core(path)``), the
``TRITONSERVER_LIBRARY`` variable, an NGC-style install in
``/opt/tritonserver``, then the ``nvidia-pytriton`` wheel's bundled core.
When the core comes from that wheel, its python backend is made usable from
the running interpreter: a backend folder of symlinks in a user cache folder,
and the environment the backend's stub process inherits.
"""

from __future__ import annotations

import glob
import os
import sys
import sysconfig
import threading
import zlib
from dataclasses import dataclass
from typing import Optional

from .. import _native
from ._errors import InvalidArgumentError, UnavailableError, UnsupportedError
from ._logging import DEBUG, INFO, package_log

INSTALL_HINT = "pip install --no-deps nvidia-pytriton==0.7.0"
_NGC_ROOT = "/opt/tritonserver"


@dataclass(frozen=True)
class CoreInstall:
    """Where a Triton core and its companion folders are."""

    library: str
    source: str
    backend_directory: Optional[str] = None
    repo_agent_directory: Optional[str] = None
    cache_directory: Optional[str] = None
    # nvidia-pytriton layout: (libtriton_python.so, utils .py, stubs folder)
    python_backend: Optional[tuple[str, str, str]] = None

    @property
    def library_folder(self) -> str:
        return os.path.dirname(self.library)


_lock = threading.Lock()
_loaded: Optional[CoreInstall] = None


def _from_library(path: str, source: str) -> CoreInstall:
    """The install around a given libtritonserver: the nvidia-pytriton
    layout when it sits in that wheel's library folder, else an NGC-style
    tree (lib/, backends/, repoagents/, caches/ side by side)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(folder) == "nvidia_pytriton.libs":
        return _pytriton_install(os.path.dirname(folder), path, source)
    root = os.path.dirname(folder)
    return CoreInstall(
        library=path,
        source=source,
        backend_directory=os.path.join(root, "backends"),
        repo_agent_directory=os.path.join(root, "repoagents"),
        cache_directory=os.path.join(root, "caches"),
    )


def _pytriton_install(site: str, library: str, source: str) -> CoreInstall:
    tree = os.path.join(site, "pytriton", "tritonserver")
    python_dir = os.path.join(tree, "backends", "python")
    python_backend = None
    if os.path.isfile(os.path.join(python_dir, "libtriton_python.so")):
        python_backend = (
            os.path.join(python_dir, "libtriton_python.so"),
            os.path.join(python_dir, "triton_python_backend_utils.py"),
            os.path.join(tree, "python_backend_stubs"),
        )
    return CoreInstall(
        library=library,
        source=source,
        backend_directory=os.path.join(tree, "backends"),
        repo_agent_directory=None,
        cache_directory=os.path.join(tree, "caches"),
        python_backend=python_backend,
    )


def _pytriton_installs() -> list[tuple[str, Optional[CoreInstall]]]:
    """(place tried, install or None) for each sys.path entry."""
    found: list[tuple[str, Optional[CoreInstall]]] = []
    for entry in dict.fromkeys(p for p in sys.path if p and os.path.isdir(p)):
        libs = os.path.join(entry, "nvidia_pytriton.libs")
        if not os.path.isdir(libs):
            continue
        cores = sorted(glob.glob(os.path.join(libs, "libtritonserver*.so*")))
        found.append((libs, _pytriton_install(entry, cores[0], "nvidia-pytriton") if cores else None))
    return found


def find_core(path: Optional[str] = None) -> CoreInstall:
    """Locate a core without loading it; UnavailableError lists every place
    tried and how to install one."""
    if path is not None:
        # An explicit choice is never silently replaced by another core.
        if os.path.isfile(path):
            return _from_library(path, "explicit path")
        raise UnavailableError(
            f"No Triton core library at {path} (explicit path: no such file).\n"
            f"Install one with:\n  {INSTALL_HINT}"
        )
    tried: list[str] = []
    env = os.environ.get("TRITONSERVER_LIBRARY")
    if env:
        if os.path.isfile(env):
            return _from_library(env, "TRITONSERVER_LIBRARY")
        tried.append(f"{env} (TRITONSERVER_LIBRARY: no such file)")
    else:
        tried.append("$TRITONSERVER_LIBRARY (not set)")
    ngc = os.path.join(_NGC_ROOT, "lib", "libtritonserver.so")
    if os.path.isfile(ngc):
        return _from_library(ngc, _NGC_ROOT)
    tried.append(f"{ngc} (not found)")
    pytriton = _pytriton_installs()
    for place, install in pytriton:
        if install is not None:
            return install
        tried.append(f"{place} (no libtritonserver in it)")
    if not pytriton:
        tried.append("nvidia_pytriton.libs in each sys.path entry (nvidia-pytriton not installed)")
    raise UnavailableError(
        "No Triton core library (libtritonserver.so) was found. Tried:\n  - "
        + "\n  - ".join(tried)
        + f"\nInstall one with:\n  {INSTALL_HINT}\n"
        "or point TRITONSERVER_LIBRARY at an existing libtritonserver.so."
    )


def load_core(path: Optional[str] = None) -> CoreInstall:
    """Find and open the Triton core once per process; later calls return
    the loaded one. `path` names a libtritonserver.so explicitly."""
    global _loaded
    with _lock:
        if _loaded is not None:
            if path is not None and os.path.realpath(path) != os.path.realpath(_loaded.library):
                raise UnavailableError(
                    f"A Triton core is already loaded from {_loaded.library}; one process "
                    f"can use only one core, so {path} cannot be loaded too"
                )
            return _loaded
        install = find_core(path)
        companions = []
        if install.python_backend is not None:
            companions.append(install.python_backend[0])
        companions += glob.glob(os.path.join(install.cache_directory or "", "*", "*.so"))
        _native.load_triton(install.library, companions)
        _load_cuda(install)
        _loaded = install
        package_log(INFO, "Triton core %s (found via %s)", install.library, install.source)
        return install


def loaded_core() -> Optional[CoreInstall]:
    """The loaded core, if any."""
    return _loaded


def _load_cuda(install: CoreInstall) -> None:
    """Open one CUDA runtime (none is fine). The native side tries the
    candidates in order until one sees a device, and names each one passed
    over with its reason in `cuda_status()`: a runtime newer than the driver
    (cudaErrorInsufficientDriver) is then not taken for "no GPU". Order: the
    core's own copy (already loaded), else cuda-pathfinder's pick; then the
    CUDA wheels and the system, CUDA 12 (the core's major version, served by
    older drivers) before CUDA 13."""
    candidates = sorted(glob.glob(os.path.join(install.library_folder, "libcudart*.so*")))
    # cuda-pathfinder loads the runtime it finds as it looks: asked only when
    # the core brings none, so that no unused second runtime is mapped.
    if not candidates:
        try:
            from cuda import pathfinder  # type: ignore[import-not-found]

            candidates.append(pathfinder.load_nvidia_dynamic_lib("cudart").abs_path)
        except Exception:  # not installed, or no CUDA runtime it can find
            pass
    sites = list(dict.fromkeys(p for p in sys.path if p and os.path.isdir(p)))
    for pattern in (("nvidia", "cuda_runtime", "lib", "libcudart.so.12*"),
                    ("nvidia", "cu13", "lib", "libcudart.so.13*"),
                    ("nvidia", "cuda_runtime", "lib", "libcudart.so.*")):
        for site in sites:
            candidates += sorted(glob.glob(os.path.join(site, *pattern)))
    candidates += ["libcudart.so.12", "libcudart.so.13", "libcudart.so"]
    _native.cuda_load(list(dict.fromkeys(candidates)))


def python_backend_directory(install: CoreInstall) -> Optional[str]:
    """For an nvidia-pytriton core: a backend folder whose python/ holds
    links to the backend and to the stub for this Python, made once in a
    user cache folder. None when the install has no python backend for this
    Python version."""
    if install.python_backend is None:
        return None
    library, utils, stubs = install.python_backend
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = os.path.join(stubs, version, "triton_python_backend_stub")
    if not os.path.isfile(stub):
        return None
    # A cheap key (hashlib would load OpenSSL at every start): a clash only
    # makes _make_link_folder relink, as the links are checked.
    key = f"{zlib.crc32(library.encode()):08x}{zlib.crc32(stub.encode()):08x}"
    links = {"libtriton_python.so": library, "triton_python_backend_utils.py": utils,
             "triton_python_backend_stub": stub}
    folder = make_cache_folder(f"backends-{key}", links)
    if folder is not None:
        package_log(DEBUG, "python backend for Python %s linked in %s", version, folder)
    return folder


def make_cache_folder(name: str, links: dict[str, str], subfolder: str = "python") -> Optional[str]:
    """<user cache>/tritonserver/<name>/<subfolder>/ holding symlinks
    `links` (name -> target), made once (relinked when they differ); in the
    temporary folder when the cache folder is unusable. Returns
    <...>/<name>, or None when neither place can be written."""
    for base in (_cache_home(), None):
        if base is None:
            import tempfile  # only when the cache folder is unusable

            base = tempfile.gettempdir()
        folder = os.path.join(base, "tritonserver", name)
        try:
            _make_link_folder(folder, links, subfolder)
            return folder
        except OSError:
            continue
    return None


def python_stub_problem(install: CoreInstall) -> Optional[str]:
    """Why this install's python backend cannot run under this interpreter
    (its wheel has no stub for this Python version), or None."""
    if install.python_backend is None:
        return None
    stubs = install.python_backend[2]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if os.path.isfile(os.path.join(stubs, version, "triton_python_backend_stub")):
        return None
    have = sorted((v for v in (os.listdir(stubs) if os.path.isdir(stubs) else [])
                   if os.path.isfile(os.path.join(stubs, v, "triton_python_backend_stub"))),
                  key=lambda v: tuple(int(p) if p.isdigit() else 0 for p in v.split(".")))
    return (f"the python backend of the Triton core {install.library} has stubs for Python "
            f"{', '.join(have) or '(none)'} only, not for this Python {version}: run in an "
            f"environment with one of those versions, or use a core that has a {version} stub "
            f"({INSTALL_HINT} has 3.8-3.13)")


def explain_model_load_error(error: BaseException) -> None:
    """Raise UnsupportedError instead of the core's "stub not found" when
    the cause is a python backend without a stub for this Python."""
    install = _loaded
    if install is None or "triton_python_backend_stub" not in str(error):
        return
    problem = python_stub_problem(install)
    if problem is not None:
        raise UnsupportedError(f"{problem} (the core said: {error})") from error


def _cache_home() -> str:
    return os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")


def _make_link_folder(folder: str, links: dict[str, str], subfolder: str = "python") -> None:
    python_dir = os.path.join(folder, subfolder)
    if all(os.path.realpath(os.path.join(python_dir, n)) == os.path.realpath(t) for n, t in links.items()):
        return
    import tempfile  # here, not at import: the folder is usually made already

    os.makedirs(folder, exist_ok=True)
    # Build aside, then rename into place: concurrent processes never see a
    # half-made folder.
    staging = tempfile.mkdtemp(prefix=".python-", dir=folder)
    for name, target in links.items():
        os.symlink(target, os.path.join(staging, name))
    try:
        os.rename(staging, python_dir)
    except OSError:
        # Another process won, or a stale folder is in the way: replace it.
        stale = tempfile.mkdtemp(prefix=".stale-", dir=folder)
        try:
            os.rename(python_dir, os.path.join(stale, subfolder))
        except OSError:
            pass
        os.rename(staging, python_dir)


# Names a Python environment (a virtualenv folder) for the python backend's
# stub to run in, instead of the running one: its bin/ goes first on PATH.
STUB_ENVIRONMENT_VARIABLE = "TRITONSERVER_PYTHON_BACKEND_ENV"


def stub_environment() -> str:
    """The environment the python backend's stub is given: the folder named
    by TRITONSERVER_PYTHON_BACKEND_ENV, else this interpreter's sys.prefix."""
    named = os.environ.get(STUB_ENVIRONMENT_VARIABLE)
    if not named:
        return sys.prefix
    if not os.access(os.path.join(named, "bin", "python3"), os.X_OK):
        raise InvalidArgumentError(
            f"{STUB_ENVIRONMENT_VARIABLE}={named} does not name a Python environment "
            f"(no {os.path.join(named, 'bin', 'python3')}); name a virtualenv made with "
            f"python{sys.version_info.major}.{sys.version_info.minor} -m venv, with numpy<2 in it")
    return os.path.abspath(named)


def prepare_stub_environment(install: CoreInstall) -> None:
    """The python backend's stub inherits this process's environment: put
    the stub's environment's bin/ first on PATH (the stub finds its
    virtualenv that way: this one, or TRITONSERVER_PYTHON_BACKEND_ENV's) and
    make libpython and the core's libraries findable."""
    bin_dir = os.path.join(stub_environment(), "bin")
    path = os.environ.get("PATH", "").split(os.pathsep)
    if not path or path[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir, *[p for p in path if p and p != bin_dir]])
        package_log(INFO, "PATH starts with %s now (the python backend stub finds this environment)", bin_dir)
    wanted = [sysconfig.get_config_var("LIBDIR") or os.path.join(sys.base_prefix, "lib"),
              install.library_folder]
    current = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    missing = [p for p in wanted if p not in current]
    if missing:
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(current + missing)
        package_log(INFO, "LD_LIBRARY_PATH gained %s (libpython and the core's libraries, for the stub)",
                    os.pathsep.join(missing))


# -- numpy in the stub's environment ------------------------------------------
# The python backend stub of the nvidia-pytriton 0.7.0 core (Triton 2.51) is
# built against numpy 1.x: with numpy 2 in its environment, models load and
# then return garbage (no error), and BYTES models crash the stub.
_STUB_PROBE = ("import sys\n"
               "try:\n import numpy; v = numpy.__version__\n"
               "except Exception: v = ''\n"
               "print('%d.%d' % sys.version_info[:2], v)")
_probed: dict[str, tuple[str, str]] = {}


@dataclass(frozen=True)
class StubEnvironment:
    """What the python backend's stub would find: the python3 first on PATH
    (None if none), its Python version and numpy version ('' when numpy
    cannot be imported there), and why python-backend models cannot run
    correctly (None when they can)."""

    python: Optional[str]
    python_version: str
    numpy_version: str
    problem: Optional[str]


def stub_environment_report() -> Optional[StubEnvironment]:
    """For a loaded nvidia-pytriton core with a python backend: the stub's
    environment as it is now (PATH at this moment; the stub inherits it when
    a model loads). The probe runs that python once per path (cached). None
    for other cores."""
    install = _loaded
    if install is None or install.python_backend is None:
        return None
    import shutil  # here, not at import: only servers with a python backend need it
    import subprocess

    python = shutil.which("python3", path=os.environ.get("PATH", os.defpath))
    if python is None:
        return StubEnvironment(None, "", "", "no python3 on PATH for the python backend's stub")
    if python not in _probed:
        try:
            out = subprocess.run([python, "-c", _STUB_PROBE], capture_output=True, text=True, timeout=120,
                                 check=False).stdout.split()
        except (OSError, subprocess.SubprocessError):
            out = []
        _probed[python] = (out[0] if out else "?", out[1] if len(out) > 1 else "")
    python_version, numpy_version = _probed[python]
    ours = f"{sys.version_info.major}.{sys.version_info.minor}"
    in_process = "Options(python_models=\"in-process\") (or \"auto\") runs python models in this process instead"
    if sys.version_info >= (3, 13):  # numpy<2 has no wheels for 3.13 and later: no stub environment can work
        fix = f"Fix: {in_process}; numpy<2, which the stub needs, does not exist for Python {ours}."
    else:
        fix = (f"Fix: {in_process}; or make a virtualenv with numpy<2 (python{ours} -m venv ENV && "
               f"ENV/bin/pip install 'numpy<2' plus what your models import) and set "
               f"{STUB_ENVIRONMENT_VARIABLE}=ENV before the server starts (its bin/ is then put first on PATH "
               "for the stub).")
    problem = None
    if python_version != ours:
        problem = (f"the python backend's stub (built for Python {ours}) would run in {python} "
                   f"(Python {python_version}), the first python3 on PATH. {fix}")
    elif numpy_version and int(numpy_version.split(".")[0]) >= 2:
        problem = (f"the python backend's stub of this Triton core ({os.path.basename(install.library)}, "
                   f"from {install.source}: every core on PyPI has a stub built against numpy 1.x) needs "
                   f"numpy<2, but its environment ({python}, the first python3 on PATH) has numpy "
                   f"{numpy_version}: python-backend models would return wrong numbers or crash. {fix}")
    return StubEnvironment(python, python_version, numpy_version, problem)
