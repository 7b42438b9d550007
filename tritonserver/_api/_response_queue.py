"""User response queues (``InferenceRequest.response_queue``).

Responses of such requests are fed to the user's queue by one dispatcher
thread, whether or not anyone iterates; Triton's threads never run Python.
Any object with ``put_nowait`` works: queue.SimpleQueue, queue.Queue,
asyncio.Queue (fed on its event loop).
"""

from __future__ import annotations

import atexit
import itertools
import sys
import threading
from typing import TYPE_CHECKING, Any, Optional

from .. import _core

if TYPE_CHECKING:
    import asyncio

    from ._model import Model
    from ._request import InferenceRequest

_lock = threading.Lock()
_tokens = itertools.count(1)
_targets: dict[int, tuple[Any, "Model", "InferenceRequest", Optional["asyncio.AbstractEventLoop"]]] = {}
_thread: Optional[threading.Thread] = None
_stopping = threading.Event()


def register_user_queue(request: "_core.Request", user_queue: Any, model: "Model",
                        inference_request: "InferenceRequest",
                        loop: Optional["asyncio.AbstractEventLoop"]) -> int:
    """Route the responses of `request` to `user_queue` too; returns the
    token (for unregister_user_queue if the request is never submitted)."""
    global _thread
    asyncio = sys.modules.get("asyncio")  # an asyncio.Queue implies asyncio is loaded
    if loop is None and asyncio is not None and isinstance(user_queue, asyncio.Queue):
        loop = getattr(user_queue, "_loop", None)
    with _lock:
        token = next(_tokens)
        _targets[token] = (user_queue, model, inference_request, loop)
        if _thread is None:
            _thread = threading.Thread(target=_run, name="tritonserver-response-queue", daemon=True)
            _thread.start()
    request.set_dispatch_token(token)
    return token


def unregister_user_queue(token: int) -> None:
    """Forget a registration whose request was refused."""
    with _lock:
        _targets.pop(token, None)


def _run() -> None:
    while not _stopping.is_set():
        item = _core.dispatch_pop(0.1)
        if item is not None:
            _deliver(*item)
        # Nothing of a delivered response stays bound here while waiting.
        item = None


def _deliver(token: int, core: "_core.Response") -> None:
    from ._response import InferenceResponse

    with _lock:
        target = _targets.get(token)
        if target is not None and core.final:
            del _targets[token]
    if target is None:
        return
    user_queue, model, inference_request, loop = target
    response = InferenceResponse._from_core(model, inference_request, core)
    try:
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(user_queue.put_nowait, response)
        else:
            user_queue.put_nowait(response)
    except Exception:  # a full or closed user queue must not stop delivery
        pass


@atexit.register
def _stop() -> None:
    # Before interpreter teardown, so the thread is not left inside the core.
    _stopping.set()
    if _thread is not None:
        _thread.join(timeout=1)
