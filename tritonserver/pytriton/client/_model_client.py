"""`ModelClient` and `DecoupledModelClient`, the sync clients with
PyTriton's methods (``infer_sample``, ``infer_batch``, inputs by position
or by name, ``parameters``, ``headers``, ``wait_for_model``,
``wait_for_server``, ``model_config``, ``load_model``, ``unload_model``,
``close``, the context manager), over HTTP or gRPC (tritonclient) or to a
Triton of this process (``inprocess://``), by the url."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ..model_config.triton_model_config import TritonModelConfig
from ._common import (Array, Inputs, Value, check_batching, check_call, check_decoupled, named_inputs, output_names,
                      with_batch_axis, without_batch_axis)
from ._inprocess import InProcessTransport
from ._network import NetworkTransport
from ._settings import ClientSettings
from ._url import INPROCESS
from .exceptions import PyTritonClientClosedError

Transport = Union[InProcessTransport, NetworkTransport]


class ModelClient(ClientSettings):
    """A sync client of one model: ``ModelClient("localhost", "add_sub")``
    (HTTP, port 8000), ``"grpc://host:8001"``, ``"http://host:8000"``, or
    ``"inprocess://"`` for a Triton of this process."""

    def __init__(self, url: str, model_name: str, model_version: Optional[str] = None, *, lazy_init: bool = True,
                 init_timeout_s: Optional[float] = None, inference_timeout_s: Optional[float] = None,
                 model_config: Optional[TritonModelConfig] = None, ensure_model_is_ready: bool = True,
                 access_token: Optional[str] = None) -> None:
        self._set_up(url, model_name, model_version, init_timeout_s, inference_timeout_s, model_config,
                     ensure_model_is_ready, access_token)
        self._transport: Optional[Transport]
        if self._triton_url.scheme == INPROCESS:
            self._transport = InProcessTransport(self._triton_url, model_name, self._model_version,
                                                 self._inference_timeout_s)
        else:
            self._transport = NetworkTransport(self._triton_url, model_name, self._model_version,
                                               self._init_timeout_s, self._inference_timeout_s, access_token)
        self._outputs: Optional[Tuple[TritonModelConfig, List[str]]] = None  # the config checked, its outputs
        if not lazy_init:
            self._init()

    @classmethod
    def from_existing_client(cls, existing_client: "ModelClient") -> "ModelClient":
        """A new client of the same model and server, with the existing
        client's model config (so it does not ask the server again)."""
        return cls(existing_client._url, existing_client._model_name, existing_client._model_version,
                   init_timeout_s=existing_client._init_timeout_s,
                   inference_timeout_s=existing_client._inference_timeout_s,
                   model_config=existing_client._model_config,
                   ensure_model_is_ready=existing_client._model_config is None,
                   access_token=existing_client._access_token)

    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the client's connections (later calls raise PyTritonClientClosedError)."""
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    def _open(self) -> Transport:
        if self._transport is None:
            raise PyTritonClientClosedError(f"{type(self).__name__} is closed")
        return self._transport

    def wait_for_server(self, timeout_s: float) -> None:
        """Wait until the server is live and ready (PyTritonClientTimeoutError after `timeout_s`)."""
        self._open().wait_for_server(timeout_s)

    def wait_for_model(self, timeout_s: float) -> None:
        """Wait until the server and the model are ready (PyTritonClientTimeoutError after `timeout_s`)."""
        self._open().wait_for_model(timeout_s)

    def load_model(self, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        """Load the model (the server's explicit model control)."""
        self._open().load_model(config, files)

    def unload_model(self) -> None:
        """Unload the model (the server's explicit model control)."""
        self._open().unload_model()

    @property
    def is_batching_supported(self) -> bool:
        return self.model_config.max_batch_size > 0

    @property
    def model_config(self) -> TritonModelConfig:
        """The model's configuration (waits for the model to be ready, at
        most init_timeout_s, unless the client was given a config)."""
        if self._model_config is None:
            self._init()
        assert self._model_config is not None
        return self._model_config

    def _init(self) -> None:
        transport = self._open()
        deadline = time.monotonic() + self._init_timeout_s
        if not self._model_ready:
            transport.wait_for_model(self._init_timeout_s)
            self._model_ready = True
        if self._model_config is None:
            self._model_config = transport.model_config(max(0.0, deadline - time.monotonic()))

    def infer_sample(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,
                     headers: Optional[Dict[str, Value]] = None, **named: Array) -> Any:
        """Infer one sample (no batch axis: the client adds it, and removes
        it from the outputs, when the model batches)."""
        check_call(inputs, named, parameters, headers)
        batching = self.is_batching_supported
        given: Inputs = with_batch_axis(inputs, named) if batching else (inputs or named)
        return self._infer(given, parameters, headers, debatch=batching)

    def infer_batch(self, *inputs: Array, parameters: Optional[Dict[str, Value]] = None,
                    headers: Optional[Dict[str, Value]] = None, **named: Array) -> Any:
        """Infer a batch (the first axis of every input)."""
        check_call(inputs, named, parameters, headers)
        check_batching(self.model_config)
        return self._infer(inputs or named, parameters, headers, debatch=False)

    def _responses(self, inputs: Inputs, parameters: Optional[Dict[str, Value]],
                   headers: Optional[Dict[str, Value]]) -> Iterator[Dict[str, Array]]:
        transport = self._open()
        if not self._model_ready:
            self._init()
        config = self.model_config
        if self._outputs is None or self._outputs[0] is not config:
            check_decoupled(config, self._decoupled, "ModelClient", "DecoupledModelClient")
            self._outputs = (config, output_names(config))  # checked once per config
        return transport.responses(named_inputs(config, inputs), self._outputs[1], parameters, headers,
                                   self._decoupled)

    def _infer(self, inputs: Inputs, parameters: Optional[Dict[str, Value]], headers: Optional[Dict[str, Value]],
               debatch: bool) -> Any:
        result: Dict[str, Array] = {}
        for outputs in self._responses(inputs, parameters, headers):
            result = outputs
        return without_batch_axis(result) if debatch else result


class DecoupledModelClient(ModelClient):
    """A sync client of a decoupled model (gRPC, or in-process):
    infer_sample / infer_batch return an iterator of the responses'
    outputs, read as they arrive."""

    _decoupled = True

    def _infer(self, inputs: Inputs, parameters: Optional[Dict[str, Value]], headers: Optional[Dict[str, Value]],
               debatch: bool) -> Any:
        responses = self._responses(inputs, parameters, headers)
        if not debatch:
            return responses
        return (without_batch_axis(outputs) for outputs in responses)
