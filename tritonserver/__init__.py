"""tritonserver: the Triton Inference Server, embedded in your Python process.

The public API of NVIDIA's official in-process binding, so that code
written for it runs unchanged:

- ``Server`` (started with ``Options``, or its fields as keywords), its
  models (``Server.model``, ``load``, ``unload``, ``models``) and
  metadata, metrics (``Metric``, ``MetricFamily``);
- ``Model.infer`` (blocking, ``ResponseIterator``) and ``Model.async_infer``
  (asyncio, ``AsyncResponseIterator``), with ``InferenceRequest``,
  ``InferenceResponse``, ``Tensor`` and ``MemoryBuffer``;
- the enums (``DataType``, ``MemoryType``, ``ModelControlMode``, ...) and
  the errors (``TritonError`` and a subclass per core error code).

Beyond it: ``Server.bind`` serves a Python function as a model
(``TensorSpec`` declares its tensors, ``CallContext`` tells it about its
requests), and ``load_core`` picks the Triton core. ``python -m
tritonserver`` prints the core, backends and CUDA it finds. The user guide
is docs/user_guide.md; ``help(tritonserver.Server)`` and the others
describe each name.

Example (from a clone's root: examples/models holds the example models):
    >>> import numpy, tritonserver
    >>> with tritonserver.Server(model_repository="examples/models") as server:
    ...     a = numpy.array([1.0, 2.0], dtype=numpy.float32)  # add_sub takes FP32
    ...     for response in server.model("add_sub").infer(inputs={"INPUT0": a, "INPUT1": a}):
    ...         print(numpy.from_dlpack(response.outputs["OUTPUT0"]))
    [2. 4.]
"""




def _source_tree_without_extension() -> "str | None":
    """When this package is a source tree without the compiled extension
    (Python started in the repository root, whose tritonserver/ folder hides
    the installed package), the message that says what to do; else None."""
    import importlib.machinery
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    if any(os.path.exists(os.path.join(here, "_native" + suffix)) for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        return None  # built here: the extension itself failed to load
    root = os.path.dirname(here)
    elsewhere = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != root]
    spec = importlib.machinery.PathFinder.find_spec("tritonserver", elsewhere)
    installed = (f" (the installed package is at {os.path.dirname(spec.origin)})"
                 if spec is not None and spec.origin else " (after `make build`)")
    return (f"you are importing the source tree at {here}, which has no built extension (tritonserver._native): "
            f"run Python from another folder{installed}, e.g. `cd tests`, or install this tree in editable "
            f"mode with `make develop` (docs/development.md), which imports it with its built extension")


# Files of NVIDIA's official tritonserver package that this one does not
# have (both install into the same tritonserver/ folder): its extension
# (_c/ is ours too, with the names programs import from it) and a module.
_FOREIGN_FILES = ("_c/triton_bindings{suffix}", "_api/_allocators.py")


def _mixed_installation() -> "str | None":
    """When NVIDIA's tritonserver package left its files in this package's
    folder (both installed: this one last, since its __init__.py runs), the
    message that says what to do; else None. A few stat calls."""
    import importlib.machinery
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    candidates = dict.fromkeys(name.format(suffix=suffix) for name in _FOREIGN_FILES
                               for suffix in importlib.machinery.EXTENSION_SUFFIXES)
    found = [name for name in candidates if os.path.exists(os.path.join(here, name))]
    if not found:
        return None
    return (f"NVIDIA's tritonserver package and this one (tritonserver-binding) are both installed in {here} "
            f"(it holds NVIDIA's {', '.join(found)}): both write that folder, so the one installed last "
            "overwrote the other's files, and uninstalling either deletes files the other needs. Run "
            "`pip uninstall -y tritonserver tritonserver-binding`, then `pip install tritonserver-binding` "
            "(or NVIDIA's alone); see docs/user_guide.md, Install")


try:
    from . import _native as _native
except ImportError:
    _message = _mixed_installation() or _source_tree_without_extension()
    if _message is None:
        raise
    raise ImportError(_message) from None

_message = _mixed_installation()
if _message is not None:
    import warnings

    warnings.warn(_message, RuntimeWarning, stacklevel=2)
del _message

# Before anything imports grpc: gRPC's fork handlers off, unless set (see there).
from ._api import _grpc_fork_support as _grpc_fork_support
from ._api._bind import CallContext as CallContext
from ._api._bind import TensorSpec as TensorSpec
from ._api._dlpack import DLDeviceType as DLDeviceType
from ._api._enums import DataType as DataType
from ._api._enums import InstanceGroupKind as InstanceGroupKind
from ._api._enums import LogFormat as LogFormat
from ._api._enums import LogLevel as LogLevel
from ._api._enums import MemoryType as MemoryType
from ._api._enums import MetricFormat as MetricFormat
from ._api._enums import MetricKind as MetricKind
from ._api._enums import ModelBatchFlag as ModelBatchFlag
from ._api._enums import ModelControlMode as ModelControlMode
from ._api._enums import ModelTxnPropertyFlag as ModelTxnPropertyFlag
from ._api._enums import RateLimitMode as RateLimitMode
from ._api._errors import AlreadyExistsError as AlreadyExistsError
from ._api._errors import CancelledError as CancelledError
from ._api._errors import InternalError as InternalError
from ._api._errors import InvalidArgumentError as InvalidArgumentError
from ._api._errors import NotFoundError as NotFoundError
from ._api._errors import TritonError as TritonError
from ._api._errors import UnavailableError as UnavailableError
from ._api._errors import UnknownError as UnknownError
from ._api._errors import UnsupportedError as UnsupportedError
from ._api._logging import python_logging_callback as python_logging_callback
from ._api._memorybuffer import MemoryBuffer as MemoryBuffer
from ._api._metrics import Metric as Metric
from ._api._metrics import MetricFamily as MetricFamily
from ._api._model import Model as Model
from ._api._options import ModelLoadDeviceLimit as ModelLoadDeviceLimit
from ._api._options import Options as Options
from ._api._options import RateLimiterResource as RateLimiterResource
from ._api._request import InferenceRequest as InferenceRequest
from ._api._response import AsyncResponseIterator as AsyncResponseIterator
from ._api._response import InferenceResponse as InferenceResponse
from ._api._response import ResponseIterator as ResponseIterator
from ._api._server import ModelDictionary as ModelDictionary
from ._api._server import Server as Server
from ._api._tensor import Tensor as Tensor
from ._api._triton_core import load_core as _load_core


def load_core(path: "str | None" = None) -> str:
    """Load the Triton core now (normally done by ``Server.start()``) and
    return its path. ``path`` names a libtritonserver.so explicitly; otherwise
    TRITONSERVER_LIBRARY, /opt/tritonserver and the nvidia-pytriton wheel are
    searched, in that order."""
    return _load_core(path).library


# The name pip knows this package by (NVIDIA's package holds "tritonserver").
_DISTRIBUTION = "tritonserver-binding"


# The public names, as help(tritonserver), dir() and the API reference
# (docs/build_api.py) list them. (NVIDIA's package has an empty __all__,
# which leaves help() with nothing to show; `from tritonserver import *`
# now imports these.)
__all__ = [
    "AlreadyExistsError", "AsyncResponseIterator", "CallContext", "CancelledError", "DLDeviceType", "DataType",
    "InferenceRequest", "InferenceResponse", "InstanceGroupKind", "InternalError", "InvalidArgumentError",
    "LogFormat", "LogLevel", "MemoryBuffer", "MemoryType", "Metric", "MetricFamily", "MetricFormat", "MetricKind",
    "Model", "ModelBatchFlag", "ModelControlMode", "ModelDictionary", "ModelLoadDeviceLimit",
    "ModelTxnPropertyFlag", "NotFoundError", "Options", "RateLimitMode", "RateLimiterResource", "ResponseIterator",
    "Server", "Tensor", "TensorSpec", "TritonError", "UnavailableError", "UnknownError", "UnsupportedError",
    "load_core", "python_logging_callback",
]


def __dir__() -> list[str]:
    # __version__ too, which __getattr__ gives on demand.
    return sorted({*globals(), "__version__"})


def __getattr__(name: str) -> str:
    # __version__ on demand: importlib.metadata costs ~25 ms at import.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(_DISTRIBUTION)
        except PackageNotFoundError:  # running from a source tree
            return "UNKNOWN"
    raise AttributeError(f"module 'tritonserver' has no attribute {name!r}")
