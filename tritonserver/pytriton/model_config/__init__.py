"""PyTriton's model configuration (``pytriton.model_config``): `Tensor`,
`ModelConfig`, `DynamicBatcher`, `QueuePolicy`, `TimeoutAction`,
`DeviceKind`, with PyTriton's fields and defaults (its submodules too:
``common``, ``tensor``, ``model_config``, ``triton_model_config``)."""

from .common import DeviceKind, DynamicBatcher, QueuePolicy, TimeoutAction
from .model_config import ModelConfig
from .tensor import Tensor

__all__ = ["DeviceKind", "DynamicBatcher", "ModelConfig", "QueuePolicy", "Tensor", "TimeoutAction"]
