"""What every client does the same way, whatever carries the request:
PyTriton's checks of the arguments, inputs by position mapped onto the
model's declared inputs, the batch axis that infer_sample adds and removes,
and a model's Triton configuration (a dict, as the server answers it) as
a TritonModelConfig."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy

from ..._api._datautils import numpy_types
from ..._api._enums import DataType
from ..model_config.common import DynamicBatcher, QueuePolicy, TimeoutAction
from ..model_config.triton_model_config import TensorSpec, TritonModelConfig
from .exceptions import (PyTritonClientInferenceServerError, PyTritonClientModelDoesntSupportBatchingError,
                         PyTritonClientValueError)

DEFAULT_INIT_TIMEOUT_S = 300.0
DEFAULT_INFERENCE_TIMEOUT_S = 60.0
DEFAULT_NETWORK_TIMEOUT_S = 60.0
_NUMPY_BY_TYPE = numpy_types()
Value = Union[str, int, bool]
Array = numpy.ndarray[Any, Any]
Inputs = Union[Tuple[Array, ...], Dict[str, Array]]


def check_inputs(inputs: Tuple[Any, ...], named: Dict[str, Any]) -> None:
    if not inputs and not named:
        raise PyTritonClientValueError("Provide input data")
    if not bool(inputs) ^ bool(named):
        raise PyTritonClientValueError("Use either positional either keyword method arguments convention")


def check_parameters(values: Optional[Dict[str, Value]]) -> None:
    if values is None:
        return
    if not isinstance(values, dict):
        raise PyTritonClientValueError("Parameters and headers must be a dictionary")
    for key, value in values.items():
        if not isinstance(key, str):
            raise PyTritonClientValueError("Parameter/header key must be a string")
        if not isinstance(value, (str, int, bool)):
            raise PyTritonClientValueError("Parameter/header value must be a string, integer or boolean")


def check_call(inputs: Tuple[Any, ...], named: Dict[str, Any], parameters: Optional[Dict[str, Value]],
               headers: Optional[Dict[str, Value]]) -> None:
    """The checks of infer_sample's and infer_batch's arguments."""
    check_inputs(inputs, named)
    check_parameters(parameters)
    check_parameters(headers)


def with_batch_axis(inputs: Tuple[Array, ...], named: Dict[str, Array]) -> Inputs:
    """infer_sample's inputs with a batch axis of 1 (for a batching model)."""
    if inputs:
        return tuple(data[numpy.newaxis, ...] for data in inputs)
    return {name: data[numpy.newaxis, ...] for name, data in named.items()}


def without_batch_axis(outputs: Dict[str, Array]) -> Dict[str, Array]:
    return {name: value[0] for name, value in outputs.items()}


def check_batching(config: TritonModelConfig) -> None:
    """infer_batch() needs a model that batches."""
    if config.max_batch_size <= 0:
        raise PyTritonClientModelDoesntSupportBatchingError(
            f"Model {config.model_name} doesn't support batching - use infer_sample method instead")


def named_inputs(config: TritonModelConfig, inputs: Inputs) -> Dict[str, Array]:
    """Inputs by name (those given by position in the declared order),
    checked as PyTriton checks them."""
    if isinstance(inputs, tuple):
        inputs = {spec.name: data for spec, data in zip(config.inputs or (), inputs)}
    for name, data in inputs.items():
        if not isinstance(data, numpy.ndarray):
            raise PyTritonClientValueError(f"Input {name} is not a numpy array. Got {type(data)} instead.")
        if data.dtype == object and data.size and not isinstance(data.reshape(-1)[0], bytes):
            raise RuntimeError(f"Numpy array for {name!r} input with dtype=object should contain encoded "
                               f"strings (e.g. into utf-8). Element type: {type(data.reshape(-1)[0])}")
        if data.dtype.type == numpy.str_:
            raise RuntimeError("Unicode inputs are not supported. Encode numpy array for "
                               f"{name!r} input (ex. with np.char.encode(array, 'utf-8')).")
    return inputs


def check_decoupled(config: TritonModelConfig, decoupled: bool, coupled_client: str, decoupled_client: str) -> None:
    """A coupled client refuses a decoupled model, and the other way round."""
    if config.decoupled and not decoupled:
        raise PyTritonClientInferenceServerError(f"Model config is decoupled. Use {decoupled_client} instead.")
    if decoupled and not config.decoupled:
        raise PyTritonClientInferenceServerError(f"Model config is coupled. Use {coupled_client} instead.")


def output_names(config: TritonModelConfig) -> List[str]:
    return [spec.name for spec in config.outputs or ()]


def model_config_of(name: str, config: Dict[str, Any]) -> TritonModelConfig:
    """A TritonModelConfig of a served model's configuration (the JSON form
    of Triton's model config, as the server, HTTP or gRPC, answers it)."""
    def specs(entries: Any) -> List[TensorSpec]:
        result = []
        for entry in entries or ():
            type_name = str(entry.get("data_type", "TYPE_FP32")).replace("TYPE_", "")
            data_type = DataType.BYTES if type_name == "STRING" else DataType[type_name]
            dtype: Any = numpy.bytes_ if data_type == DataType.BYTES else numpy.dtype(_NUMPY_BY_TYPE[data_type]).type
            result.append(TensorSpec(entry["name"], tuple(int(d) for d in entry.get("dims", ())), dtype,
                                     bool(entry.get("optional", False))))
        return result

    max_batch_size = int(config.get("max_batch_size", 0))
    decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled", False))
    return TritonModelConfig(model_name=name, max_batch_size=max_batch_size, batching=max_batch_size > 0,
                             batcher=_batcher_of(config.get("dynamic_batching")), decoupled=decoupled,
                             inputs=specs(config.get("input")), outputs=specs(config.get("output")))


def _batcher_of(batching: Optional[Dict[str, Any]]) -> Optional[DynamicBatcher]:
    """The DynamicBatcher of a config's "dynamic_batching" (JSON: 64-bit
    integers as strings), None without one."""
    if batching is None:
        return None

    def policy(entry: Optional[Dict[str, Any]]) -> Optional[QueuePolicy]:
        if entry is None:
            return None
        return QueuePolicy(timeout_action=TimeoutAction(entry.get("timeout_action", "REJECT")),
                           default_timeout_microseconds=int(entry.get("default_timeout_microseconds", 0)),
                           allow_timeout_override=bool(entry.get("allow_timeout_override", False)),
                           max_queue_size=int(entry.get("max_queue_size", 0)))

    priorities = batching.get("priority_queue_policy")
    return DynamicBatcher(
        max_queue_delay_microseconds=int(batching.get("max_queue_delay_microseconds", 0)),
        preferred_batch_size=[int(size) for size in batching.get("preferred_batch_size", [])] or None,
        preserve_ordering=bool(batching.get("preserve_ordering", False)),
        priority_levels=int(batching.get("priority_levels", 0)),
        default_priority_level=int(batching.get("default_priority_level", 0)),
        default_queue_policy=policy(batching.get("default_queue_policy")),
        priority_queue_policy={int(level): policy(entry) for level, entry in priorities.items()}  # type: ignore[misc]
        if priorities else None)
