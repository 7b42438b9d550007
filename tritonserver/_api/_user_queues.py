"""User response queues (``InferenceRequest.response_queue``).

Responses of such requests are fed to the user's queue by one dispatcher
thread, whether or not anyone iterates; Triton's threads never run Python.
Any object with ``put_nowait`` works: queue.SimpleQueue, queue.Queue,
asyncio.Queue (fed on its event loop).

No response is dropped silently. A bounded queue that is full makes its
responses wait, in order, until there is room: the dispatcher keeps them
aside and retries (it never blocks, so other queues keep being fed); on an
event loop they wait in ``await queue.put(...)``. A queue whose put raises
anything else is reported: a record on the "tritonserver" logger, the
request is cancelled (its iterator ends with CancelledError), and a final
error response is offered to the queue; nothing more goes to that queue
for the request.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import sys
import threading
from typing import TYPE_CHECKING, Any, Optional

from .. import _native
from ._errors import InternalError

if TYPE_CHECKING:
    import asyncio

    from ._model import Model
    from ._request import InferenceRequest
    from ._response import InferenceResponse

_lock = threading.Lock()
_tokens = itertools.count(1)
_targets: dict[int, tuple[Any, "Model", "InferenceRequest", Optional["asyncio.AbstractEventLoop"],
                          "_native.Request"]] = {}
# Responses waiting for room in a full queue, by token, oldest first, with
# their queue and request: _full for queues fed by the dispatcher thread
# (only it touches _full), _full_on_loop for asyncio queues (each token's
# entry is touched only on its queue's event loop).
_Waiting = tuple[Any, "_native.Request", "collections.deque[InferenceResponse]"]
_full: dict[int, _Waiting] = {}
_full_on_loop: dict[int, _Waiting] = {}
_failed: set[int] = set()  # tokens whose queue raised: nothing more is put
_drains: set["asyncio.Task[None]"] = set()
# How often the dispatcher retries a full queue.
_RETRY_S = 0.005
_thread: Optional[threading.Thread] = None
_stopping = threading.Event()


def register_user_queue(request: "_native.Request", user_queue: Any, model: "Model",
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
        _targets[token] = (user_queue, model, inference_request, loop, request)
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
        item = _native.dispatch_pop(_RETRY_S if _full else 0.1)
        if item is not None:
            _deliver(*item)
        # Nothing of a delivered response stays bound here while waiting.
        item = None
        if _full:
            _retry_full_queues()


def _deliver(token: int, native: "_native.Response") -> None:

    with _lock:
        target = _targets.get(token)
        if target is not None and native.final:
            del _targets[token]
    if target is None:
        return
    user_queue, model, inference_request, loop, request = target
    # Made natively, by the API classes' own constructors (cpp/response_view.cc).
    response: InferenceResponse = native.inference_response(model, inference_request, False)
    if _skip_failed(token, response):
        return
    if loop is not None:
        try:
            loop.call_soon_threadsafe(_put_on_loop, token, user_queue, request, response)
        except RuntimeError as e:  # the loop is closed: nobody can consume
            _report(token, user_queue, request, response, e, offer=False)
        return
    waiting = _full.get(token)
    if waiting is not None:  # behind responses still waiting for room
        waiting[2].append(response)
        return
    _offer(token, user_queue, request, response)


def _skip_failed(token: int, response: "InferenceResponse") -> bool:
    """True when the token's queue raised before (forgotten at the final)."""
    if token not in _failed:
        return False
    if response.final:
        _failed.discard(token)
    return True


def _is_full_error(error: BaseException) -> bool:
    # A full queue.Queue / asyncio.Queue implies its module is loaded.
    full = tuple(getattr(sys.modules.get(name), cls, None) for name, cls in (("queue", "Full"),
                                                                            ("asyncio", "QueueFull")))
    return isinstance(error, tuple(c for c in full if isinstance(c, type)))


def _offer(token: int, user_queue: Any, request: "_native.Request", response: "InferenceResponse") -> bool:
    """Put `response` now (True), or keep it for a retry when the queue is
    full (False). A queue that raises otherwise is reported."""
    try:
        user_queue.put_nowait(response)
        return True
    except Exception as e:
        if _is_full_error(e):
            _full.setdefault(token, (user_queue, request, collections.deque()))[2].append(response)
            return False
        _report(token, user_queue, request, response, e)
        return True


def _retry_full_queues() -> None:
    """Dispatcher thread: offer waiting responses again, oldest first."""
    for token in list(_full):
        user_queue, request, waiting = _full.pop(token)
        while waiting and token not in _failed:
            if not _offer(token, user_queue, request, waiting.popleft()):
                # Still full: the rest stays behind that one, in order.
                _full[token][2].extend(waiting)
                break


def _put_on_loop(token: int, user_queue: Any, request: "_native.Request", response: "InferenceResponse") -> None:
    """On the queue's event loop: put now, or wait for room in a task,
    keeping the responses of a request in order."""
    if _skip_failed(token, response):
        return
    waiting = _full_on_loop.get(token)
    if waiting is not None:
        waiting[2].append(response)
        return
    try:
        user_queue.put_nowait(response)
        return
    except Exception as e:
        if not _is_full_error(e):
            _report(token, user_queue, request, response, e)
            return
    import asyncio

    entry = _full_on_loop[token] = (user_queue, request, collections.deque([response]))
    task = asyncio.get_running_loop().create_task(_wait_for_room(token, entry))
    _drains.add(task)
    task.add_done_callback(_drains.discard)


async def _wait_for_room(token: int, entry: _Waiting) -> None:
    user_queue, request, waiting = entry
    try:
        while waiting:
            await user_queue.put(waiting[0])
            waiting.popleft()
    except Exception as e:
        _full_on_loop.pop(token, None)
        _report(token, user_queue, request, waiting[0], e)
    finally:
        _full_on_loop.pop(token, None)


def _report(token: int, user_queue: Any, request: "_native.Request", response: "InferenceResponse",
            error: BaseException, offer: bool = True) -> None:
    """A user queue raised putting `response`: log it, cancel the request,
    offer the queue a final error response, and put nothing more into it
    for this request."""
    from ._response import InferenceResponse

    if not response.final:  # forgotten again when the final response passes
        _failed.add(token)
    import logging  # here, not at import (see _logging.py)

    logging.getLogger("tritonserver").error(
        "response queue %r raised %s: %s; responses of this request are no longer put into it, "
        "and the request is cancelled", user_queue, type(error).__name__, error, exc_info=error)
    try:
        request.cancel()
    except Exception:  # already complete
        pass
    if offer:
        notice = InferenceResponse(
            response.model, request_id=response.request_id,
            error=InternalError(f"the response queue raised {type(error).__name__}: {error}; "
                                "this request's later responses were not delivered to it"),
            final=True)
        try:
            user_queue.put_nowait(notice)
        except Exception:  # the same queue again: the log record is what is left
            pass


@atexit.register
def _stop() -> None:
    # Before interpreter teardown, so the thread is not left inside the core.
    _stopping.set()
    if _thread is not None:
        _thread.join(timeout=1)
