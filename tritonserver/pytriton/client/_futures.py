"""`FuturesModelClient`: PyTriton's client that returns a
concurrent.futures.Future per call; its worker threads (up to
`max_workers`, made as the queue fills) each hold a ModelClient of their
own (tritonclient's sync clients are not shared between threads), the
first one's model config reused by the others."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Dict, List, Optional, Tuple

from ..model_config.triton_model_config import TritonModelConfig
from ._common import DEFAULT_INIT_TIMEOUT_S, Value
from ._model_client import ModelClient
from ._url import ClientUrl
from .exceptions import PyTritonClientClosedError, PyTritonClientQueueFullError

_CLOSE = object()
Work = Tuple[Any, Any, str, Any]  # (future, None) | (_CLOSE, ...)


class FuturesModelClient:
    """A client whose calls return Futures: ``infer_sample``, ``infer_batch``,
    ``wait_for_model``, ``model_config``; ``close(wait=True)`` and the
    context manager."""

    def __init__(self, url: str, model_name: str, model_version: Optional[str] = None, *,
                 max_workers: Optional[int] = 128, max_queue_size: Optional[int] = 128, non_blocking: bool = False,
                 init_timeout_s: Optional[float] = None, inference_timeout_s: Optional[float] = None,
                 access_token: Optional[str] = None) -> None:
        if max_workers is not None and max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        if max_queue_size is not None and max_queue_size <= 0:
            raise ValueError("max_queue_size must be greater than 0")
        self._client_args: Tuple[Any, ...] = (url, model_name, model_version)
        self._client_kwargs: Dict[str, Any] = dict(
            init_timeout_s=DEFAULT_INIT_TIMEOUT_S if init_timeout_s is None else init_timeout_s,
            inference_timeout_s=inference_timeout_s, access_token=access_token)
        ClientUrl.parse(url)  # a bad url fails here
        self._max_workers = max_workers
        self._non_blocking = non_blocking
        self._inference_timeout_s = inference_timeout_s
        self._queue: "queue.Queue[Work]" = queue.Queue(maxsize=max_queue_size or 0)
        self._threads: List[threading.Thread] = []
        self._idle = 0  # workers waiting for work
        self._queued = 0  # calls submitted that no worker has taken yet
        self._lock = threading.Lock()
        self._closed = False
        self._model_config: Optional[TritonModelConfig] = None

    def __enter__(self) -> "FuturesModelClient":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self, wait: bool = True) -> None:
        """Stop the workers once the queued calls are done (`wait`: join them)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put((_CLOSE, None, "", None))
        if wait:
            for thread in threads:
                thread.join()

    def wait_for_model(self, timeout_s: float) -> "Future[None]":
        """A Future done when the model is ready (PyTritonClientTimeoutError past `timeout_s`)."""
        return self._submit("wait_for_model", timeout_s)

    def model_config(self) -> "Future[TritonModelConfig]":
        """A Future of the model's configuration."""
        return self._submit("model_config", None)

    def infer_sample(self, *inputs: Any, parameters: Optional[Dict[str, Value]] = None,
                     headers: Optional[Dict[str, Value]] = None, **named: Any) -> "Future[Dict[str, Any]]":
        """A Future of ModelClient.infer_sample's result."""
        return self._submit("infer_sample", (inputs, parameters, headers, named))

    def infer_batch(self, *inputs: Any, parameters: Optional[Dict[str, Value]] = None,
                    headers: Optional[Dict[str, Value]] = None, **named: Any) -> "Future[Dict[str, Any]]":
        """A Future of ModelClient.infer_batch's result."""
        return self._submit("infer_batch", (inputs, parameters, headers, named))

    def _submit(self, name: str, request: Any) -> "Future[Any]":
        future: "Future[Any]" = Future()
        with self._lock:
            if self._closed:
                raise PyTritonClientClosedError("FutureModelClient is already closed")
            # A worker more while the calls waiting outnumber the idle workers
            # (a burst of calls runs concurrently, up to max_workers).
            self._queued += 1
            if self._queued > self._idle and (self._max_workers is None or len(self._threads) < self._max_workers):
                thread = threading.Thread(target=self._work, name=f"FuturesModelClient-{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)
                self._idle += 1
                thread.start()
        try:
            if self._non_blocking:
                self._queue.put_nowait((future, None, name, request))
            else:
                self._queue.put((future, None, name, request), timeout=self._inference_timeout_s)
        except queue.Full:
            with self._lock:
                self._queued -= 1
            raise PyTritonClientQueueFullError("Queue is full") from None
        return future

    def _client(self) -> ModelClient:
        with self._lock:
            config = self._model_config
        if config is None:
            return ModelClient(*self._client_args, **self._client_kwargs)
        return ModelClient(*self._client_args, model_config=config, ensure_model_is_ready=False,
                           **self._client_kwargs)

    def _work(self) -> None:
        client: Optional[ModelClient] = None
        try:
            while True:
                future, _, name, request = self._queue.get()
                if future is _CLOSE:
                    return
                with self._lock:
                    self._idle -= 1
                    self._queued -= 1
                try:
                    if future.set_running_or_notify_cancel():
                        if client is None:
                            client = self._client()
                        future.set_result(self._run(client, name, request))
                except BaseException as e:  # the caller's error, in its future
                    future.set_exception(e)
                finally:
                    with self._lock:
                        self._idle += 1
                        if client is not None and client._model_config is not None and self._model_config is None:
                            self._model_config = client._model_config
        finally:
            if client is not None:
                client.close()

    @staticmethod
    def _run(client: ModelClient, name: str, request: Any) -> Any:
        if name == "wait_for_model":
            return client.wait_for_model(request)
        if name == "model_config":
            return client.model_config
        inputs, parameters, headers, named = request
        method = client.infer_sample if name == "infer_sample" else client.infer_batch
        return method(*inputs, parameters=parameters, headers=headers, **named)
