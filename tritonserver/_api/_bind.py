"""Serving a Python callable as a Triton model in this process
(``Server.bind``).

A bound callable becomes a python model run in-process (by the package's
backend library, present in every server's backend folder under the name
``tritonserver_python``, whichever way ``Options.python_models`` runs
python-backend models): ``bind``
writes its model config (inputs, outputs, batching, instances, decoupled)
and a one-line model.py, loads them from memory (``Server.load`` with
``file:`` contents), and the in-process runtime
(``tritonserver/_python_models/_bound.py``) calls the callable with NumPy
arrays. Triton's scheduler, dynamic batcher, statistics and metrics apply as
to any model; no process, socket or copy sits between them.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import tempfile
import threading
import uuid
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

import numpy

from ._datautils import numpy_to_triton_dtype, numpy_types
from ._enums import DataType, ModelControlMode
from ._errors import AlreadyExistsError, InvalidArgumentError, UnavailableError, UnsupportedError
from ._python_backend_layout import BOUND_BACKEND

if TYPE_CHECKING:
    from ._model import Model
    from ._server import Server

# The model-config parameter that names a binding (its token) to the runtime.
BINDING_PARAMETER = "tritonserver.binding"
# The model.py of every bound model: the runtime's model class.
MODEL_PY = b"from tritonserver._python_models._bound import TritonPythonModel  # noqa: F401\n"


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a bound callable.

    ``dtype``: a NumPy dtype or type (``numpy.float32``, ``"int64"``,
    ``bool``), a ``tritonserver.DataType``, or ``bytes`` / ``str`` /
    ``object`` / ``DataType.BYTES`` for variable-length byte strings (BYTES:
    the callable sees object arrays of ``bytes``). ``shape``: the dimensions
    of one request's tensor, -1 for any size; with ``max_batch_size > 0`` the
    batch dimension is not part of it (Triton adds it)."""

    name: str
    dtype: Any
    shape: Sequence[int] = (-1,)

    def data_type(self) -> DataType:
        """The Triton data type; TypeError/UnsupportedError naming the tensor
        when there is none NumPy can hold."""
        dtype = self.dtype
        if isinstance(dtype, DataType):
            result = dtype
        elif dtype in (bytes, str, object) or (isinstance(dtype, str) and dtype.upper() == "BYTES"):
            result = DataType.BYTES
        else:
            try:
                result = numpy_to_triton_dtype(numpy.dtype(dtype))
            except TypeError as e:
                raise TypeError(f"TensorSpec '{self.name}': dtype {dtype!r} is not a NumPy dtype, a "
                                f"tritonserver.DataType or bytes ({e})") from None
        if result in (DataType.BF16, DataType.INVALID):
            raise UnsupportedError(
                f"TensorSpec '{self.name}': {result.name} has no NumPy type, so a bound callable cannot take or "
                "return it; declare FP16 or FP32 and convert in the callable")
        return result

    def numpy_dtype(self) -> numpy.dtype[Any]:
        """The NumPy dtype the callable sees (object for BYTES)."""
        data_type = self.data_type()
        if data_type == DataType.BYTES:
            return numpy.dtype(object)
        return numpy.dtype(self.dtype if not isinstance(self.dtype, DataType) else _NUMPY_BY_TYPE[data_type])

    def config(self) -> dict[str, Any]:
        """The model-config entry (``name``, ``data_type``, ``dims``)."""
        if not isinstance(self.name, str) or not self.name or "\0" in self.name:
            raise ValueError(f"TensorSpec name must be a non-empty str without NUL, not {self.name!r}")
        dims = list(self.shape)
        if not dims or any(isinstance(d, bool) or not isinstance(d, int) or d < -1 or d == 0 for d in dims):
            raise ValueError(f"TensorSpec '{self.name}': shape must be a non-empty sequence of positive ints or "
                             f"-1 (any size), not {self.shape!r}")
        return {"name": self.name, "data_type": f"TYPE_{_CONFIG_NAMES.get(self.data_type(), self.data_type().name)}",
                "dims": dims}


_NUMPY_BY_TYPE = numpy_types()
# Model-config spellings that differ from the DataType names.
_CONFIG_NAMES = {DataType.BYTES: "STRING"}


class CallContext:
    """What a bound callable learns about the requests of one call, when it
    takes a ``context`` argument: their ``parameters`` (one dict per request,
    in batch order), their ``request_ids``, and ``cancelled()``.

    The requests of one call always have equal parameters: with batching, a
    batch whose requests differ in their parameters is split into one call
    per distinct set (requests with equal parameters are still batched), so
    ``context.parameters[0]`` holds every request's parameters."""

    __slots__ = ("_requests",)

    def __init__(self, requests: list[Any]) -> None:  # triton_python_backend_utils.InferenceRequest
        self._requests = requests

    @property
    def parameters(self) -> list[dict[str, Any]]:
        """Each request's parameters (a dict per request, all equal: see
        the class)."""
        return [json.loads(r.parameters()) for r in self._requests]

    @property
    def request_ids(self) -> list[str]:
        """Each request's id ('' when it has none)."""
        return [r.request_id() for r in self._requests]

    def cancelled(self) -> bool:
        """True when every request of this call was cancelled by its client
        (a long or streaming call may then stop early)."""
        return all(r.is_cancelled() for r in self._requests)


@dataclass
class Binding:
    """What the runtime needs to serve one bound callable."""

    model_name: str
    fn: Callable[..., Any]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int
    decoupled: bool
    kind: str  # "function", "coroutine", "generator" or "async generator"
    wants_context: bool
    output_dtypes: dict[str, numpy.dtype[Any]]
    repository: str  # the server's folder of bound models
    # An execute handler of its own (tritonserver.pytriton): called as
    # runtime(binding, initialize_args) once per model instance, it returns an
    # object whose execute(requests) serves the pb_utils requests, or whose
    # execute_natives(natives), where not None, serves the core's requests
    # themselves (and whose finalize(), if any, runs at unload); None: the
    # callable is called with arrays, as described above.
    runtime: Optional[Callable[["Binding", dict[str, str]], Any]] = None


_lock = threading.Lock()
_bindings: dict[str, Binding] = {}
# Each server's repository of bound models (a temporary folder registered
# with it): bound models are in the server's model index like any other.
_repositories: "weakref.WeakKeyDictionary[Server, str]" = weakref.WeakKeyDictionary()


def binding(token: str) -> Optional[Binding]:
    """The binding a model config names, if it is still bound."""
    with _lock:
        return _bindings.get(token)


def _kind(fn: Callable[..., Any]) -> str:
    target = fn if inspect.isroutine(fn) else getattr(fn, "__call__", fn)
    if inspect.isasyncgenfunction(target):
        return "async generator"
    if inspect.isgeneratorfunction(target):
        return "generator"
    if inspect.iscoroutinefunction(target):
        return "coroutine"
    return "function"


def _wants_context(fn: Callable[..., Any]) -> bool:
    try:
        return "context" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # no signature (a builtin)
        return False


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`base` updated by `extra`, recursively for dicts."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def bind(server: "Server", model_name: str, fn: Callable[..., Any], *, inputs: Sequence[TensorSpec],
         outputs: Sequence[TensorSpec], max_batch_size: int = 0, dynamic_batching: Optional[bool] = None,
         preferred_batch_sizes: Sequence[int] = (), max_queue_delay_us: int = 0, instances: int = 1,
         decoupled: Optional[bool] = None, config: Optional[Mapping[str, Any]] = None,
         runtime: Optional[Callable[[Binding, dict[str, str]], Any]] = None) -> "Model":
    """Server.bind's work; see its docstring. `runtime`: see Binding.runtime
    (then `decoupled` is as given, whatever kind of callable `fn` is)."""
    if not isinstance(model_name, str) or not model_name or "\0" in model_name or "/" in model_name:
        raise ValueError(f"bind(): model_name must be a non-empty str without NUL or '/', not {model_name!r}")
    if not callable(fn):
        raise TypeError(f"bind('{model_name}'): fn must be callable, not {type(fn).__name__}")
    for label, value in (("max_batch_size", max_batch_size), ("max_queue_delay_us", max_queue_delay_us)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"bind('{model_name}'): {label} must be an int >= 0, not {value!r}")
    if isinstance(instances, bool) or not isinstance(instances, int) or instances < 1:
        raise ValueError(f"bind('{model_name}'): instances must be an int >= 1, not {instances!r}")
    specs: dict[str, tuple[TensorSpec, ...]] = {}
    for label, given in (("inputs", inputs), ("outputs", outputs)):
        if isinstance(given, TensorSpec) or not isinstance(given, Sequence) or not given or \
                not all(isinstance(s, TensorSpec) for s in given):
            raise TypeError(f"bind('{model_name}'): {label} must be a non-empty list of tritonserver.TensorSpec")
        specs[label] = tuple(given)
    # (a runtime of its own, as Triton, lets an output share an input's name)
    groups = [specs["inputs"], specs["outputs"]] if runtime is not None else [specs["inputs"] + specs["outputs"]]
    duplicated = sorted({n for group in groups for n in [s.name for s in group] if [s.name for s in group].count(n) > 1})
    if duplicated:
        raise ValueError(f"bind('{model_name}'): tensor names must be unique, {duplicated} repeat")
    kind = _kind(fn)
    streaming = kind in ("generator", "async generator")
    if decoupled is None:
        decoupled = streaming
    if runtime is None and decoupled != streaming:
        raise ValueError(f"bind('{model_name}'): decoupled={decoupled} needs a "
                         f"{'generator (yield one dict of outputs per response)' if decoupled else 'function that returns one dict of outputs'}"
                         f", but fn is a {kind}")
    if dynamic_batching is None:
        dynamic_batching = max_batch_size > 0
    if dynamic_batching and max_batch_size == 0:
        raise ValueError(f"bind('{model_name}'): dynamic_batching needs max_batch_size > 0")
    bad_sizes = [s for s in preferred_batch_sizes if not isinstance(s, int) or not 0 < s <= max_batch_size]
    if bad_sizes:
        raise ValueError(f"bind('{model_name}'): preferred_batch_sizes must lie in 1..max_batch_size "
                         f"({max_batch_size}), not {bad_sizes}")

    token = uuid.uuid4().hex
    model_config: dict[str, Any] = {
        "name": model_name,
        "backend": BOUND_BACKEND,  # the package's library: in-process, whatever Options.python_models says
        "max_batch_size": max_batch_size,
        "input": [s.config() for s in specs["inputs"]],
        "output": [s.config() for s in specs["outputs"]],
        "instance_group": [{"kind": "KIND_CPU", "count": instances}],
        "parameters": {BINDING_PARAMETER: {"string_value": token}},
    }
    if dynamic_batching:
        model_config["dynamic_batching"] = {"preferred_batch_size": list(preferred_batch_sizes),
                                            "max_queue_delay_microseconds": max_queue_delay_us}
    if decoupled:
        model_config["model_transaction_policy"] = {"decoupled": True}
    if config is not None:
        if not isinstance(config, Mapping):
            raise TypeError(f"bind('{model_name}'): config must be a dict of model-config fields")
        _merge(model_config, config)
        model_config["parameters"][BINDING_PARAMETER] = {"string_value": token}
        ragged = [entry.get("name") for entry in model_config.get("input", ())
                  if isinstance(entry, Mapping) and entry.get("allow_ragged_batch")]
        if ragged:
            raise ValueError(f"bind('{model_name}'): input(s) {ragged} have allow_ragged_batch, which a bound "
                             "callable cannot take: it gets each input as one array, the batch's requests "
                             "joined on axis 0, and requests of different shapes do not join; leave "
                             "allow_ragged_batch out (Triton still batches requests of one shape together; "
                             "max_batch_size=0 makes one call per request)")
        cpu_only = model_config["parameters"].get("FORCE_CPU_ONLY_INPUT_TENSORS", {})
        if max_batch_size > 0 and str(cpu_only.get("string_value", "yes")).strip().lower() == "no":
            raise ValueError(f"bind('{model_name}'): inputs left in GPU memory (FORCE_CPU_ONLY_INPUT_TENSORS "
                             "\"no\") cannot be joined into batches; bind with max_batch_size=0, or let inputs "
                             "be copied to the host")

    repository = _repository(server, model_name)
    entry = Binding(model_name, fn, specs["inputs"], specs["outputs"], max_batch_size, decoupled, kind,
                    _wants_context(fn), {s.name: s.numpy_dtype() for s in specs["outputs"]}, repository, runtime)
    if any(key[0] == model_name for key in server.models()) and \
            not os.path.isdir(os.path.join(repository, model_name)):
        raise AlreadyExistsError(f"bind('{model_name}'): the server's model repository has a model of that name; "
                                 "bind under another name")
    os.makedirs(os.path.join(repository, model_name, "1"), exist_ok=True)
    with open(os.path.join(repository, model_name, "1", "model.py"), "wb") as f:
        f.write(MODEL_PY)
    with _lock:
        _bindings[token] = entry
    try:
        model = server.load(model_name, {"config": json.dumps(model_config)})
    except BaseException:
        with _lock:
            _bindings.pop(token, None)
        raise
    # A rebound name replaces the model: the earlier bindings of it go.
    with _lock:
        for old in [t for t, b in _bindings.items()
                    if b.model_name == model_name and b.repository == repository and t != token]:
            del _bindings[old]
    return model


def _repository(server: "Server", model_name: str) -> str:
    """The server's folder of bound models, made and registered once.
    UnavailableError when the server's mode lets no model be added by name
    (NONE, POLL): registering a repository and loading need EXPLICIT."""
    server._started()
    mode = server._control_mode
    if mode != ModelControlMode.EXPLICIT:
        raise UnavailableError(
            f"bind({model_name!r}): a bound function is loaded into the server by name, which a server with "
            f"model_control_mode={mode.name} refuses (the core loads only its repository's models, by itself); "
            "create the server with model_control_mode=ModelControlMode.EXPLICIT (startup_models=['*'] loads "
            "every repository model at start, as NONE does), or without a model_repository to serve bound "
            "functions only")
    with _lock:
        folder = _repositories.get(server)
    if folder is None:
        folder = tempfile.mkdtemp(prefix="tritonserver-bound-")
        try:
            server.register_model_repository(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        with _lock:
            _repositories[server] = folder
    return folder


def release(server: "Server") -> None:
    """After `server` stopped: its bound models' folder and bindings go."""
    with _lock:
        folder = _repositories.pop(server, None)
    if folder is None:
        return
    with _lock:
        for token in [t for t, b in _bindings.items() if b.repository == folder]:
            del _bindings[token]
    shutil.rmtree(folder, ignore_errors=True)


def forget(server: "Server", model_name: str) -> None:
    """Drop the bindings of `model_name` and its folder (after its unload)."""
    with _lock:
        folder = _repositories.get(server)
        for token in [t for t, b in _bindings.items() if b.model_name == model_name and b.repository == folder]:
            del _bindings[token]
    if folder is not None:
        shutil.rmtree(os.path.join(folder, model_name), ignore_errors=True)


def bound_folder(server: "Server") -> Optional[str]:
    """The server's folder of bound models (None before the first bind)."""
    with _lock:
        return _repositories.get(server)


def check_bound(server: "Server", model_name: str) -> None:
    """InvalidArgumentError unless `model_name` is bound on `server`."""
    with _lock:
        folder = _repositories.get(server)
        if any(b.model_name == model_name and b.repository == folder for b in _bindings.values()):
            return
    raise InvalidArgumentError(f"unbind('{model_name}'): no callable is bound to that name (use unload() for "
                               "repository models)")
