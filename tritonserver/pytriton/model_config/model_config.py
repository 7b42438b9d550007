"""`ModelConfig`: how a bound callable is served (PyTriton's
``pytriton.model_config.model_config``)."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional

from .common import DynamicBatcher


@dataclasses.dataclass
class ModelConfig:
    """How a bound inference callable is served: ``batching`` (the first
    axis of every input and output is the batch), ``max_batch_size``,
    ``batcher`` (Triton's dynamic batcher; None: one request a call, as
    Triton's default scheduler), ``response_cache`` (Triton's response
    cache, which needs the server's cache_config), ``decoupled`` (the
    callable yields any number of responses per request)."""

    batching: bool = True
    max_batch_size: int = 4
    batcher: DynamicBatcher = dataclasses.field(default_factory=DynamicBatcher)
    response_cache: bool = False
    decoupled: bool = False
    model_warmup: Optional[List[Any]] = None
