"""The `Request` an inference callable receives: PyTriton's
(``pytriton.proxy.types.Request``), a dict-like view of the request's inputs
(``request["x"]``, ``request.keys()``, ...; an optional input the client did
not send is absent) with its ``parameters`` and ``requested_output_names``."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterator, List, Optional, Union

import numpy

Array = numpy.ndarray[Any, Any]


@dataclasses.dataclass
class Request:
    """One inference request: ``data`` maps each input sent to its NumPy
    array (with the batch axis when the model batches); ``parameters`` are
    the request's parameters (with headers forwarded by the frontends'
    header pattern); ``requested_output_names``: the outputs the client
    asked for (the others are not sent back)."""

    data: Dict[str, Array]
    parameters: Optional[Dict[str, Union[str, int, bool]]] = None
    span: Optional[Any] = None  # PyTriton's telemetry span: always None here
    requested_output_names: Optional[List[str]] = None

    def __getitem__(self, input_name: str) -> Array:
        return self.data[input_name]

    def __setitem__(self, input_name: str, input_data: Array) -> None:
        self.data[input_name] = input_data

    def __delitem__(self, input_name: str) -> None:
        del self.data[input_name]

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __contains__(self, input_name: object) -> bool:
        return input_name in self.data

    def items(self) -> Any:
        return self.data.items()

    def keys(self) -> Any:
        return self.data.keys()

    def values(self) -> Any:
        return self.data.values()


Requests = List[Request]
