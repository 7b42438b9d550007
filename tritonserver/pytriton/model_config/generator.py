"""A bind()'s TritonModelConfig, checked as PyTriton checks it, and the
Triton model-config fields written from it as PyTriton writes them."""

from __future__ import annotations

from typing import Any, Dict, Sequence

import numpy

from ..._api._datautils import numpy_to_triton_dtype
from ..._api._enums import DataType
from ..._api._errors import InvalidArgumentError
from ..exceptions import PyTritonBadParameterError
from .common import DeviceKind, DynamicBatcher, QueuePolicy
from .model_config import ModelConfig
from .tensor import Tensor
from .triton_model_config import ResponseCache, TensorSpec, TritonModelConfig


_BYTES_TYPES = (bytes, object, numpy.bytes_, numpy.object_, str, numpy.str_)


def is_bytes_dtype(dtype: Any) -> bool:
    """Whether a Tensor dtype is Triton's BYTES."""
    return dtype in _BYTES_TYPES


def triton_data_type(dtype: Any, what: str) -> str:
    """The config's ``TYPE_...`` of a Tensor dtype; PyTritonBadParameterError
    naming `what` when Triton has none."""
    if is_bytes_dtype(dtype):
        return "TYPE_STRING"
    try:
        data_type = numpy_to_triton_dtype(numpy.dtype(dtype))
    except (TypeError, InvalidArgumentError):
        data_type = None
    if data_type is None or data_type in (DataType.INVALID, DataType.BYTES):
        raise PyTritonBadParameterError(f"{what}: dtype {dtype!r} has no Triton data type (use a NumPy bool, "
                                        "integer or float type, or numpy.bytes_ / bytes / object for strings)")
    return f"TYPE_{data_type.name}"


def triton_model_config(model_name: str, config: ModelConfig, inputs: Sequence[Tensor],
                        outputs: Sequence[Tensor], instances: int) -> TritonModelConfig:
    """The TritonModelConfig of a bind() (default tensor names filled in),
    checked as PyTriton checks it."""
    if not isinstance(config, ModelConfig):
        raise PyTritonBadParameterError(f"Model '{model_name}': config must be a ModelConfig, "
                                        f"not {type(config).__name__}")
    if config.batching and config.max_batch_size < 1:
        raise PyTritonBadParameterError("The `max_batch_size` must be greater or equal to 1.")
    if config.model_warmup:
        raise PyTritonBadParameterError(
            f"Model '{model_name}': ModelConfig.model_warmup is not supported by tritonserver.pytriton (a bound "
            "function is loaded in this process, with nothing to warm up between it and the server); call the "
            "function once yourself before serving if it needs warming up")
    specs = {}
    for label, tensors, prefix in (("inputs", inputs, "INPUT"), ("outputs", outputs, "OUTPUT")):
        if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence) or \
                not all(isinstance(t, Tensor) for t in tensors):
            raise PyTritonBadParameterError(f"Model '{model_name}': {label} must be a list of Tensor")
        specs[label] = [TensorSpec(name=t.name or f"{prefix}_{i}", shape=tuple(t.shape), dtype=t.dtype,
                                   optional=bool(t.optional) if label == "inputs" else t.optional)
                        for i, t in enumerate(tensors, start=1)]
    optional_outputs = [s.name for s in specs["outputs"] if s.optional]
    if optional_outputs:
        raise PyTritonBadParameterError("Optional flag for outputs is not supported. "
                                        f"Outputs marked as optional: {', '.join(optional_outputs)}.")
    return TritonModelConfig(
        model_name=model_name, batching=config.batching,
        max_batch_size=config.max_batch_size if config.batching else 0,
        batcher=config.batcher, instance_group={DeviceKind.KIND_CPU: instances}, decoupled=config.decoupled,
        inputs=specs["inputs"], outputs=specs["outputs"],
        response_cache=ResponseCache(enable=True) if config.response_cache else None)


def _queue_policy(policy: QueuePolicy) -> Dict[str, Any]:
    return {"timeout_action": policy.timeout_action.value,
            "default_timeout_microseconds": int(policy.default_timeout_microseconds),
            "allow_timeout_override": bool(policy.allow_timeout_override),
            "max_queue_size": int(policy.max_queue_size)}


def model_config_json(config: TritonModelConfig) -> Dict[str, Any]:
    """The Triton model-config fields of `config` (inputs, outputs,
    batching, batcher, response cache), as PyTriton writes them."""
    def tensor(spec: TensorSpec, what: str) -> Dict[str, Any]:
        dims = list(spec.shape)
        if not dims or any(isinstance(d, bool) or not isinstance(d, (int, numpy.integer)) or d < -1 or d == 0
                           for d in dims):
            raise PyTritonBadParameterError(f"Model '{config.model_name}': {what} '{spec.name}' has shape "
                                            f"{spec.shape!r}; a shape is a non-empty tuple of sizes >= 1 or -1")
        entry: Dict[str, Any] = {"name": spec.name, "data_type": triton_data_type(spec.dtype, f"{what} '{spec.name}'"),
                 "dims": [int(d) for d in dims]}
        if spec.optional:
            entry["optional"] = True
        return entry

    result: Dict[str, Any] = {
        "max_batch_size": config.max_batch_size,
        "input": [tensor(s, "input") for s in config.inputs or ()],
        "output": [tensor(s, "output") for s in config.outputs or ()],
    }
    batcher = config.batcher
    if config.batching and isinstance(batcher, DynamicBatcher):
        dynamic: Dict[str, Any] = {}
        if batcher.max_queue_delay_microseconds > 0:
            dynamic["max_queue_delay_microseconds"] = int(batcher.max_queue_delay_microseconds)
        if batcher.preferred_batch_size:
            dynamic["preferred_batch_size"] = [int(b) for b in batcher.preferred_batch_size]
        if batcher.preserve_ordering:
            dynamic["preserve_ordering"] = True
        if batcher.priority_levels:
            dynamic["priority_levels"] = int(batcher.priority_levels)
        if batcher.default_priority_level:
            if batcher.default_priority_level > batcher.priority_levels:
                raise PyTritonBadParameterError(
                    f"The `default_priority_level` must be between 1 and {batcher.priority_levels}.")
            dynamic["default_priority_level"] = int(batcher.default_priority_level)
        if batcher.default_queue_policy:
            dynamic["default_queue_policy"] = _queue_policy(batcher.default_queue_policy)
        if batcher.priority_queue_policy:
            if not batcher.priority_levels:
                raise PyTritonBadParameterError("Provide the `priority_levels` if you want to define "
                                                "`priority_queue_policy` for Dynamic Batching.")
            policies = {}
            for priority, policy in batcher.priority_queue_policy.items():
                if priority < 0 or priority > batcher.priority_levels:
                    raise PyTritonBadParameterError(f"Invalid `priority`={priority} provided. The value must be "
                                                    f"between 1 and {batcher.priority_levels}.")
                policies[str(int(priority))] = _queue_policy(policy)
            dynamic["priority_queue_policy"] = policies
        result["dynamic_batching"] = dynamic
    if config.response_cache is not None:
        result["response_cache"] = {"enable": bool(config.response_cache.enable)}
    return result
