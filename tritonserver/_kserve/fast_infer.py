"""The fast path of the KServe infer route: the common request (binary
tensors in, binary outputs out; see cpp/kserve_infer.h for what it covers)
is built, submitted and answered by one native call, whose stream's result
is the whole response body (the JSON header read natively too). Python
here only awaits.

``infer()`` returns None for anything else, before the core sees the
request: the route then takes the general codec (codec.py), which checks
the request and words every error. So both paths answer a bad request
alike, by construction. ``enabled = False`` turns the fast path off (tests
and benchmarks compare both paths).
"""

from __future__ import annotations

from typing import Any, Optional

from .. import _native
from .._api._model import Model
from .._api._response import asyncio_waiters

enabled = True


async def infer(
    model: Model,
    body: Any,
    header_length: Optional[str],
    content_encoding: Optional[str],
    max_body_bytes: int,
    route_parameters: dict[str, Any],
) -> Optional[tuple[bytes, Optional[int]]]:
    """The response body of an infer request and the length of its JSON
    header (None when no binary data follows it), or None when the request
    is not the fast path's."""
    if not enabled or header_length is None or content_encoding is not None or len(body) > max_body_bytes:
        return None
    try:
        length = int(header_length)
    except ValueError:
        return None  # the general path words the error
    if not 0 <= length <= len(body):
        return None
    waiters_module = asyncio_waiters()
    loop = waiters_module.running_loop()
    stream = _native.kserve_infer(
        model._server._started(), model, model.name, model.version, body, length,
        route_parameters, loop, waiters_module.for_loop(loop),
    )
    if stream is None:
        return None
    try:
        result = await anext(stream)
        while result is None:  # a response without outputs that is not the last
            result = await anext(stream)
    except BaseException:
        stream.cancel()  # e.g. this task was cancelled (the client went away): so is the request
        raise
    return result  # type: ignore[no-any-return]
