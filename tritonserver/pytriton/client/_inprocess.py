"""`ModelClient` and `DecoupledModelClient` with PyTriton's methods
(``infer_sample``, ``infer_batch``, inputs by position or by name,
``parameters``, ``headers``, ``wait_for_model``, ``model_config``,
``close``), reaching a model of a `Triton` running in this process
through the in-process server, without a socket: the url is
``inprocess://`` (the only running Triton) or ``inprocess://<TritonConfig.id>``.
Headers that match the Triton's ``http_header_forward_pattern`` reach the
model as parameters, as the HTTP endpoint forwards them."""

from __future__ import annotations

import re
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy

from ..._api._datautils import numpy_types
from ..._api._enums import DataType
from ..._api._errors import TritonError
from ..exceptions import PyTritonError
from ..model_config.triton_model_config import TensorSpec, TritonModelConfig
from ..triton import Triton, running_triton
from ._deadlines import DEADLINES
from .exceptions import (PyTritonClientClosedError, PyTritonClientInferenceServerError,
                         PyTritonClientInvalidUrlError, PyTritonClientModelDoesntSupportBatchingError,
                         PyTritonClientModelUnavailableError, PyTritonClientTimeoutError, PyTritonClientValueError)

SCHEME = "inprocess://"
DEFAULT_INIT_TIMEOUT_S = 300.0
DEFAULT_INFERENCE_TIMEOUT_S = 60.0
_NUMPY_BY_TYPE = numpy_types()
Value = Union[str, int, bool]
Array = numpy.ndarray[Any, Any]


def _triton_id(url: str) -> str:
    if not isinstance(url, str) or not url.startswith(SCHEME):
        raise PyTritonClientInvalidUrlError(
            f"Invalid url {url!r}: this version of tritonserver.pytriton's clients reach a Triton of the same "
            f"process only, with the url '{SCHEME}' (or '{SCHEME}<TritonConfig.id>'); over HTTP or gRPC use "
            "PyTriton's own ModelClient or tritonclient against the Triton's ports")
    return url[len(SCHEME):].strip("/")


def _check_inputs(inputs: Tuple[Any, ...], named: Dict[str, Any]) -> None:
    if not inputs and not named:
        raise PyTritonClientValueError("Provide input data")
    if not bool(inputs) ^ bool(named):
        raise PyTritonClientValueError("Use either positional either keyword method arguments convention")


def _check_parameters(values: Optional[Dict[str, Value]]) -> None:
    if values is None:
        return
    if not isinstance(values, dict):
        raise PyTritonClientValueError("Parameters and headers must be a dictionary")
    for key, value in values.items():
        if not isinstance(key, str):
            raise PyTritonClientValueError("Parameter/header key must be a string")
        if not isinstance(value, (str, int, bool)):
            raise PyTritonClientValueError("Parameter/header value must be a string, integer or boolean")


def _model_config_of(name: str, config: Dict[str, Any]) -> TritonModelConfig:
    """A TritonModelConfig of a served model's configuration (a model of
    the repository, not bound)."""
    def specs(entries: Any) -> List[TensorSpec]:
        result = []
        for entry in entries or ():
            type_name = str(entry.get("data_type", "TYPE_FP32")).replace("TYPE_", "")
            data_type = DataType.BYTES if type_name == "STRING" else DataType[type_name]
            dtype: Any = numpy.bytes_ if data_type == DataType.BYTES else _NUMPY_BY_TYPE[data_type].type
            result.append(TensorSpec(entry["name"], tuple(int(d) for d in entry.get("dims", ())), dtype,
                                     bool(entry.get("optional", False))))
        return result

    max_batch_size = int(config.get("max_batch_size", 0))
    decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled", False))
    return TritonModelConfig(model_name=name, max_batch_size=max_batch_size, batching=max_batch_size > 0,
                             decoupled=decoupled, inputs=specs(config.get("input")),
                             outputs=specs(config.get("output")))


class ModelClient:
    """A client of one model of a Triton of this process (PyTriton's
    ModelClient's methods; the url ``inprocess://[<id>]``)."""

    _decoupled = False

    def __init__(self, url: str, model_name: str, model_version: Optional[str] = None, *, lazy_init: bool = True,
                 init_timeout_s: Optional[float] = None, inference_timeout_s: Optional[float] = None,
                 model_config: Optional[TritonModelConfig] = None, ensure_model_is_ready: bool = True,
                 access_token: Optional[str] = None) -> None:
        self._url = url
        self._id = _triton_id(url)
        self._model_name = model_name
        self._model_version = int(model_version) if model_version not in (None, "") else -1
        self._init_timeout_s = DEFAULT_INIT_TIMEOUT_S if init_timeout_s is None else init_timeout_s
        self._inference_timeout_s = DEFAULT_INFERENCE_TIMEOUT_S if inference_timeout_s is None \
            else inference_timeout_s
        self._model_config = model_config
        self._ensure_model_is_ready = ensure_model_is_ready
        self._closed = False
        self._triton: Optional[Triton] = None
        self._served: Optional[Tuple[Any, Any]] = None  # (server, model)
        self._output_names: Optional[List[str]] = None
        if not lazy_init:
            self._init()

    # -- PyTriton's API ---------------------------------------------------------------------
    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the client (later calls raise PyTritonClientClosedError)."""
        self._closed = True
        self._triton = None
        self._served = None

    def wait_for_server(self, timeout_s: float) -> None:
        """Wait until the Triton runs in this process."""
        self._target(timeout_s)

    def wait_for_model(self, timeout_s: float) -> None:
        """Wait until the model is ready (PyTritonClientTimeoutError after
        `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        triton = self._target(timeout_s)
        while True:
            try:
                if triton.server.model(self._model_name, self._model_version).ready():
                    return
            except TritonError:
                pass
            if time.monotonic() >= deadline:
                raise PyTritonClientTimeoutError(
                    f"Timeout while waiting for model {self._model_name} to be ready ({timeout_s} s)")
            time.sleep(0.01)  # the server has no readiness event to wait on

    @property
    def is_batching_supported(self) -> bool:
        return self.model_config.max_batch_size > 0

    @property
    def model_config(self) -> TritonModelConfig:
        """The model's configuration."""
        if self._model_config is None:
            self._init()
        assert self._model_config is not None
        return self._model_config

    def infer_sample(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,
                     headers: Optional[Dict[str, Value]] = None, **named_inputs: Array) -> Any:
        """Infer one sample (no batch axis: the client adds it, and removes
        it from the outputs, when the model batches)."""
        _check_inputs(inputs, named_inputs)
        _check_parameters(parameters)
        _check_parameters(headers)
        batching = self.is_batching_supported
        if batching:
            inputs = tuple(data[numpy.newaxis, ...] for data in inputs)
            named_inputs = {name: data[numpy.newaxis, ...] for name, data in named_inputs.items()}
        return self._infer(inputs or named_inputs, parameters, headers, debatch=batching)

    def infer_batch(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,
                    headers: Optional[Dict[str, Value]] = None, **named_inputs: Array) -> Any:
        """Infer a batch (the first axis of every input)."""
        _check_inputs(inputs, named_inputs)
        _check_parameters(parameters)
        _check_parameters(headers)
        if not self.is_batching_supported:
            raise PyTritonClientModelDoesntSupportBatchingError(
                f"Model {self.model_config.model_name} doesn't support batching - use infer_sample method instead")
        return self._infer(inputs or named_inputs, parameters, headers, debatch=False)

    # -- the in-process path ----------------------------------------------------------------
    def _target(self, timeout_s: float) -> Triton:
        if self._closed:
            raise PyTritonClientClosedError("ModelClient is closed")
        if self._triton is not None and self._triton.is_connected():
            return self._triton
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                found = running_triton(self._id)
            except PyTritonError as e:  # several run: the url must name one
                raise PyTritonClientInvalidUrlError(f"{self._url}: {e}") from None
            if found is not None:
                self._triton = found
                return found
            if time.monotonic() >= deadline:
                named = f"with id '{self._id}' " if self._id else ""
                raise PyTritonClientTimeoutError(
                    f"Waiting for the server at {self._url}: no Triton {named}runs in this process after "
                    f"{timeout_s} s (enter `with Triton(...) as triton:` or call triton.run() first)")
            time.sleep(0.01)  # a Triton of this process registers itself when it runs; nothing to wait on

    def _init(self) -> None:
        if self._ensure_model_is_ready:
            self.wait_for_model(self._init_timeout_s)
        triton = self._target(self._init_timeout_s)
        if self._model_config is None:
            bound = triton._models.get(self._model_name)
            if bound is not None:
                self._model_config = bound.triton_config
            else:
                try:
                    config = triton.server.model(self._model_name, self._model_version).config()
                except TritonError as e:
                    raise PyTritonClientModelUnavailableError(
                        f"Model {self._model_name} is unavailable: {e}") from None
                self._model_config = _model_config_of(self._model_name, config)

    def _model(self) -> Any:
        """The served model (looked up once; again after the Triton restarted)."""
        triton = self._target(self._init_timeout_s)
        if self._served is None or self._served[0] is not triton.server:
            try:
                self._served = (triton.server, triton.server.model(self._model_name, self._model_version))
            except TritonError as e:
                raise PyTritonClientModelUnavailableError(f"Model {self._model_name} is unavailable: {e}") from None
        return self._served[1]

    def _request(self, inputs: Union[Tuple[Any, ...], Dict[str, Any]], parameters: Optional[Dict[str, Value]],
                 headers: Optional[Dict[str, Value]]) -> Tuple[Any, Dict[str, Any]]:
        config = self.model_config
        if isinstance(inputs, tuple):
            inputs = {spec.name: data for spec, data in zip(config.inputs or (), inputs)}
        for name, data in inputs.items():
            if data.dtype == object and data.size and not isinstance(data.reshape(-1)[0], bytes):
                raise RuntimeError(f"Numpy array for {name!r} input with dtype=object should contain encoded "
                                   f"strings (e.g. into utf-8). Element type: {type(data.reshape(-1)[0])}")
            if data.dtype.type == numpy.str_:
                raise RuntimeError("Unicode inputs are not supported. Encode numpy array for "
                                   f"{name!r} input (ex. with np.char.encode(array, 'utf-8')).")
        model = self._model()
        merged: Dict[str, Value] = dict(parameters) if parameters else {}
        if headers:
            pattern = self._target(self._init_timeout_s)._config.http_header_forward_pattern
            if pattern:
                merged.update({k: v for k, v in headers.items() if re.match(pattern, k)})
        if self._output_names is None:
            self._output_names = [spec.name for spec in config.outputs or ()]
        return model, dict(inputs=inputs, parameters=merged, output_names=self._output_names)

    def _responses(self, inputs: Any, parameters: Any, headers: Any) -> Iterator[Dict[str, Array]]:
        model, kwargs = self._request(inputs, parameters, headers)
        try:
            iterator = model.infer(raise_on_error=False, **kwargs)
        except TritonError as e:
            raise PyTritonClientInferenceServerError(f"Error occurred during inference request. Message: {e}") \
                from None
        watch = DEADLINES.watch(iterator, self._inference_timeout_s)
        try:
            for response in iterator:
                if watch.expired:
                    raise PyTritonClientTimeoutError(
                        f"Timeout occurred during inference request. Timeout: {self._inference_timeout_s} s")
                if response.error is not None:
                    raise PyTritonClientInferenceServerError(
                        f"Error occurred during inference request. Message: {response.error}")
                if response.outputs:
                    # views of the response's buffers (kept alive by the arrays)
                    yield {name: numpy.asarray(tensor) for name, tensor in response.outputs.items()}
        finally:
            DEADLINES.finish(watch)

    def _infer(self, inputs: Any, parameters: Any, headers: Any, debatch: bool) -> Any:
        if self.model_config.decoupled:
            raise PyTritonClientInferenceServerError("Model config is decoupled. Use DecoupledModelClient instead.")
        result: Dict[str, Array] = {}
        for outputs in self._responses(inputs, parameters, headers):
            result = outputs
        return {name: value[0] for name, value in result.items()} if debatch else result


class DecoupledModelClient(ModelClient):
    """A client of a decoupled model: infer_sample / infer_batch return an
    iterator of the responses' outputs."""

    def _infer(self, inputs: Any, parameters: Any, headers: Any, debatch: bool) -> Any:
        if not self.model_config.decoupled:
            raise PyTritonClientInferenceServerError("Model config is coupled. Use ModelClient instead.")
        responses = self._responses(inputs, parameters, headers)
        if not debatch:
            return responses
        return ({name: value[0] for name, value in outputs.items()} for outputs in responses)
