"""`AsyncioModelClient` and `AsyncioDecoupledModelClient`: PyTriton's
asyncio clients, over tritonclient.http.aio / tritonclient.grpc.aio (a
decoupled model streams over gRPC), or for ``inprocess://`` the server's
own asyncio requests (answered on the caller's event loop; the waits for
the server, the model and its config run on a worker thread). Nothing
connects before the first awaited call (``async with`` with
``lazy_init=False`` waits for the model there)."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Optional

from ..model_config.triton_model_config import TritonModelConfig
from ._common import (DEFAULT_NETWORK_TIMEOUT_S, Array, Inputs, Value, check_batching, check_call, check_decoupled,
                      model_config_of, named_inputs, output_names, with_batch_axis, without_batch_axis)
from ._inprocess import InProcessTransport
from ._model_client import DecoupledModelClient, ModelClient
from ._settings import ClientSettings
from ._tritonclient import (LATEST, ReadinessPoll, auth_headers, inference_error, library, merged_headers,
                            request_tensors, result_arrays)
from ._url import INPROCESS
from .exceptions import (PyTritonClientClosedError, PyTritonClientModelUnavailableError,
                         PyTritonClientTimeoutError)


class AsyncioModelClient(ClientSettings):
    """An asyncio client of one model (``await client.infer_sample(...)``)."""

    def __init__(self, url: str, model_name: str, model_version: Optional[str] = None, *, lazy_init: bool = True,
                 init_timeout_s: Optional[float] = None, inference_timeout_s: Optional[float] = None,
                 model_config: Optional[TritonModelConfig] = None, ensure_model_is_ready: bool = True,
                 access_token: Optional[str] = None) -> None:
        self._set_up(url, model_name, model_version, init_timeout_s, inference_timeout_s, model_config,
                     ensure_model_is_ready, access_token)
        self._network_timeout_s = min(DEFAULT_NETWORK_TIMEOUT_S, self._init_timeout_s)
        self._headers = auth_headers(self._triton_url, access_token)
        self._grpc = self._triton_url.scheme == "grpc"
        self._lazy_init = lazy_init
        self._ids = itertools.count()
        self._closed = False
        self._lib: Any = None
        self._general: Any = None  # tritonclient aio clients, made in the event loop on first use
        self._infer_client: Any = None
        self._sync: Optional[ModelClient] = None  # inprocess://

    async def __aenter__(self) -> "AsyncioModelClient":
        try:
            if not self._lazy_init:
                await self._init()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the client's connections (later calls raise PyTritonClientClosedError)."""
        self._closed = True
        clients = {id(c): c for c in (self._general, self._infer_client) if c is not None}
        self._general = self._infer_client = None
        for client in clients.values():
            await client.close()
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    # -- what connects ------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise PyTritonClientClosedError(f"{type(self).__name__} is closed")

    def _in_process(self) -> Optional[ModelClient]:
        self._check_open()
        if self._triton_url.scheme != INPROCESS:
            return None
        if self._sync is None:
            cls = DecoupledModelClient if self._decoupled else ModelClient
            self._sync = cls(self._url, self._model_name, self._model_version or None,
                             init_timeout_s=self._init_timeout_s, inference_timeout_s=self._inference_timeout_s,
                             model_config=self._model_config, ensure_model_is_ready=not self._model_ready)
        return self._sync

    def _in_process_transport(self) -> Optional[InProcessTransport]:
        """The in-process transport (inprocess://), None for a network url."""
        sync = self._in_process()
        if sync is None:
            return None
        transport = sync._open()
        assert isinstance(transport, InProcessTransport)
        return transport

    def _clients(self) -> Any:
        self._check_open()
        if self._general is None:
            self._lib = library(self._triton_url, asyncio=True)
            address = self._triton_url.address
            if self._grpc:
                self._general = self._infer_client = self._lib.InferenceServerClient(address)
            else:
                self._general = self._lib.InferenceServerClient(address, conn_timeout=self._network_timeout_s)
                self._infer_client = self._lib.InferenceServerClient(address, conn_timeout=self._inference_timeout_s)
        return self._general

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        client = self._clients()
        return await asyncio.wait_for(getattr(client, method)(*args, headers=self._headers or None, **kwargs),
                                      self._network_timeout_s)

    async def _poll(self, ready: Callable[[], Awaitable[bool]], deadline: float, timeout_s: float,
                    what: str) -> None:
        poll = ReadinessPoll(self._triton_url, deadline, timeout_s, what)
        while True:
            try:
                if await ready():
                    return
                poll.not_ready()
            except Exception as e:
                poll.failed(e)
            await asyncio.sleep(poll.next_wait())

    # -- PyTriton's API -----------------------------------------------------------------------
    async def wait_for_server(self, timeout_s: float) -> None:
        """Wait until the server is live and ready (PyTritonClientTimeoutError after `timeout_s`)."""
        sync = self._in_process()
        if sync is not None:
            return await asyncio.to_thread(sync.wait_for_server, timeout_s)

        async def ready() -> bool:
            return bool(await self._call("is_server_ready")) and bool(await self._call("is_server_live"))

        await self._poll(ready, time.monotonic() + timeout_s, timeout_s, "server")

    async def wait_for_model(self, timeout_s: float) -> None:
        """Wait until the server and the model are ready (PyTritonClientTimeoutError after `timeout_s`)."""
        sync = self._in_process()
        if sync is not None:
            return await asyncio.to_thread(sync.wait_for_model, timeout_s)
        deadline = time.monotonic() + timeout_s
        await self.wait_for_server(timeout_s)

        async def ready() -> bool:
            return bool(await self._call("is_model_ready", self._model_name, self._model_version))

        await self._poll(ready, deadline, timeout_s, f"model {self._model_name}/{self._model_version or LATEST}")

    @property
    async def model_config(self) -> TritonModelConfig:
        """The model's configuration (waits for the model to be ready, at most init_timeout_s)."""
        if self._model_config is None:
            await self._init()
        assert self._model_config is not None
        return self._model_config

    async def _init(self) -> None:
        sync = self._in_process()
        if sync is not None:
            self._model_config = await asyncio.to_thread(lambda: sync.model_config)
            self._model_ready = True
            return
        if not self._model_ready:
            await self.wait_for_model(self._init_timeout_s)
            self._model_ready = True
        if self._model_config is None:
            from tritonclient.utils import InferenceServerException  # type: ignore[import-untyped]

            try:
                if self._grpc:
                    config = (await self._call("get_model_config", self._model_name, self._model_version,
                                               as_json=True))["config"]
                else:
                    config = await self._call("get_model_config", self._model_name, self._model_version)
            except InferenceServerException as e:
                raise PyTritonClientModelUnavailableError(
                    f"Model {self._model_name} is unavailable at {self._triton_url.with_scheme}: "
                    f"{e.message()}") from None
            self._model_config = model_config_of(self._model_name, config)

    async def _prepared(self, inputs: Inputs) -> tuple[TritonModelConfig, Dict[str, Array]]:
        self._check_open()
        if not self._model_ready:
            await self._init()
        config = await self.model_config
        check_decoupled(config, self._decoupled, "AsyncioModelClient", "AsyncioDecoupledModelClient")
        return config, named_inputs(config, inputs)

    async def infer_sample(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,
                           headers: Optional[Dict[str, Value]] = None, **named: Array) -> Any:
        """Infer one sample (no batch axis: the client adds it, and removes
        it from the outputs, when the model batches)."""
        check_call(inputs, named, parameters, headers)
        batching = (await self.model_config).max_batch_size > 0
        result = await self._infer(with_batch_axis(inputs, named) if batching else (inputs or named),
                                   parameters, headers)
        return without_batch_axis(result) if batching else result

    async def infer_batch(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,
                          headers: Optional[Dict[str, Value]] = None, **named: Array) -> Any:
        """Infer a batch (the first axis of every input)."""
        check_call(inputs, named, parameters, headers)
        check_batching(await self.model_config)
        return await self._infer(inputs or named, parameters, headers)

    async def _infer(self, inputs: Inputs, parameters: Optional[Dict[str, Value]],
                     headers: Optional[Dict[str, Value]]) -> Dict[str, Array]:
        config, arrays = await self._prepared(inputs)
        transport = self._in_process_transport()
        if transport is not None:
            return await transport.async_result(arrays, parameters, headers)
        self._clients()
        wrapped, outputs = request_tensors(self._lib, arrays, output_names(config))
        kwargs: Dict[str, Any] = {"client_timeout": self._inference_timeout_s} if self._grpc else {}
        try:
            result = await self._infer_client.infer(
                model_name=self._model_name, model_version=self._model_version, inputs=wrapped, outputs=outputs,
                request_id=str(next(self._ids)), parameters=parameters,
                headers=merged_headers(self._headers, headers), **kwargs)
        except Exception as e:
            if not isinstance(e, (OSError, asyncio.TimeoutError)) and type(e).__name__ != "InferenceServerException":
                raise
            raise inference_error(e, self._inference_timeout_s) from e
        return result_arrays(result)


class AsyncioDecoupledModelClient(AsyncioModelClient):
    """An asyncio client of a decoupled model (gRPC, or in-process):
    ``async for outputs in client.infer_sample(...)``."""

    _decoupled = True

    async def infer_sample(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,  # type: ignore[override]
                           headers: Optional[Dict[str, Value]] = None, **named: Array) -> AsyncIterator[Dict[str, Array]]:
        """The responses' outputs of one sample, as they arrive."""
        check_call(inputs, named, parameters, headers)
        batching = (await self.model_config).max_batch_size > 0
        async for outputs in self._stream(with_batch_axis(inputs, named) if batching else (inputs or named),
                                          parameters, headers):
            yield without_batch_axis(outputs) if batching else outputs

    async def infer_batch(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,  # type: ignore[override]
                          headers: Optional[Dict[str, Value]] = None, **named: Array) -> AsyncIterator[Dict[str, Array]]:
        """The responses' outputs of a batch, as they arrive."""
        check_call(inputs, named, parameters, headers)
        check_batching(await self.model_config)
        async for outputs in self._stream(inputs or named, parameters, headers):
            yield outputs

    async def _stream(self, inputs: Inputs, parameters: Optional[Dict[str, Value]],
                      headers: Optional[Dict[str, Value]]) -> AsyncIterator[Dict[str, Array]]:
        config, arrays = await self._prepared(inputs)
        transport = self._in_process_transport()
        if transport is not None:
            async for item in transport.async_responses(arrays, parameters, headers):
                yield item
            return
        self._clients()
        wrapped, outputs = request_tensors(self._lib, arrays, output_names(config))
        request = dict(model_name=self._model_name, model_version=self._model_version, inputs=wrapped,
                       outputs=outputs, request_id=str(next(self._ids)), parameters=parameters)

        async def requests() -> AsyncIterator[Dict[str, Any]]:
            yield request

        responses = self._infer_client.stream_infer(inputs_iterator=requests(),
                                                    headers=merged_headers(self._headers, headers))
        finished = False
        try:
            while True:
                try:
                    result, error = await asyncio.wait_for(responses.__anext__(), self._inference_timeout_s)
                except StopAsyncIteration:
                    finished = True
                    return
                except asyncio.TimeoutError:
                    raise PyTritonClientTimeoutError(
                        f"Timeout while waiting for model {self._model_name} to return next response "
                        f"{self._inference_timeout_s}s") from None
                if error is not None:
                    raise inference_error(error, self._inference_timeout_s)
                arrays_out = result_arrays(result)
                if arrays_out:
                    yield arrays_out
        except Exception as e:
            if type(e).__name__ != "InferenceServerException":
                raise
            raise inference_error(e, self._inference_timeout_s) from e
        finally:
            if not finished:
                responses.cancel()
