"""`TritonModelConfig`: a bound model's whole configuration, as
``@triton_context`` gives it (PyTriton's
``pytriton.model_config.triton_model_config``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .common import DeviceKind, DynamicBatcher


@dataclasses.dataclass
class ResponseCache:
    """Triton's response cache setting of a model."""

    enable: bool


@dataclasses.dataclass
class TensorSpec:
    """A named input or output of `TritonModelConfig`."""

    name: str
    shape: Tuple[int, ...]
    dtype: Any  # a NumPy scalar type, or bytes / object
    optional: Optional[bool] = False


@dataclasses.dataclass
class TritonModelConfig:
    """A bound model's whole configuration, as ``@triton_context``'s
    ``model_configs[infer_func]`` gives it."""

    model_name: str
    model_version: int = 1
    max_batch_size: int = 4
    batching: bool = True
    batcher: Optional[DynamicBatcher] = None
    instance_group: Dict[DeviceKind, Optional[int]] = dataclasses.field(default_factory=dict)
    decoupled: bool = False
    backend_parameters: Dict[str, str] = dataclasses.field(default_factory=dict)
    inputs: Optional[Sequence[TensorSpec]] = None
    outputs: Optional[Sequence[TensorSpec]] = None
    response_cache: Optional[ResponseCache] = None
    model_warmup: Optional[List[Any]] = None

    @property
    def backend(self) -> str:
        return "python"
