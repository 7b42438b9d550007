"""`Tensor`: an input or output of a bound callable (PyTriton's
``pytriton.model_config.tensor``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Tuple, Type, Union

import numpy


@dataclasses.dataclass(frozen=True)
class Tensor:
    """An input or output: ``shape`` without the batch axis (-1: any size),
    ``dtype`` a NumPy type (``numpy.bytes_``, ``bytes`` or ``object`` for
    BYTES), ``name`` (default ``INPUT_<n>`` / ``OUTPUT_<n>``, n counted from
    1 in the declaration order), ``optional`` (inputs only: a request may
    leave it out, and the callable's request then lacks it)."""

    shape: Tuple[int, ...]
    dtype: Union["numpy.dtype[Any]", Type["numpy.dtype[Any]"], Type[object]]
    name: Optional[str] = None
    optional: Optional[bool] = False

    def __post_init__(self) -> None:
        if isinstance(self.dtype, numpy.dtype):
            object.__setattr__(self, "dtype", self.dtype.type)
