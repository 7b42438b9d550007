"""The network transport of the sync clients: tritonclient.http or
tritonclient.grpc against a Triton's HTTP or gRPC endpoint (this package's
frontends, PyTriton's or NVIDIA's tritonserver). A decoupled model streams
over gRPC (one stream per call)."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ..model_config.triton_model_config import TritonModelConfig
from ._common import DEFAULT_NETWORK_TIMEOUT_S, Array, Value, model_config_of
from ._tritonclient import (LATEST, ReadinessPoll, auth_headers, inference_error, library, merged_headers,
                            request_tensors, result_arrays)
from ._url import ClientUrl
from .exceptions import (PyTritonClientInferenceServerError, PyTritonClientModelUnavailableError,
                         PyTritonClientTimeoutError)


class NetworkTransport:
    """One client's tritonclient connections to a server: one for the
    readiness and config calls (their timeout: min(60 s, init timeout)),
    one for inferences (the inference timeout)."""

    def __init__(self, url: ClientUrl, model_name: str, model_version: Optional[str], init_timeout_s: float,
                 inference_timeout_s: float, access_token: Optional[str]) -> None:
        self.url = url
        self._lib = library(url)
        self._model_name = model_name
        self._model_version = model_version or ""
        self._inference_timeout_s = inference_timeout_s
        self._network_timeout_s = min(DEFAULT_NETWORK_TIMEOUT_S, init_timeout_s)
        self._headers = auth_headers(url, access_token)
        self._grpc = url.scheme == "grpc"
        self._ids = itertools.count()
        self._streaming = threading.Lock()
        if self._grpc:  # timeouts per call
            self._general = self._infer_client = self._lib.InferenceServerClient(url.address)
        else:
            self._general = self._lib.InferenceServerClient(
                url.address, connection_timeout=self._network_timeout_s, network_timeout=self._network_timeout_s)
            self._infer_client = self._lib.InferenceServerClient(
                url.address, connection_timeout=inference_timeout_s, network_timeout=inference_timeout_s)

    def close(self) -> None:
        for client in {id(c): c for c in (self._general, self._infer_client)}.values():
            client.close()

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._grpc:
            kwargs["client_timeout"] = self._network_timeout_s
        return getattr(self._general, method)(*args, headers=self._headers or None, **kwargs)

    def _poll(self, ready: Any, deadline: float, timeout_s: float, what: str) -> None:
        poll = ReadinessPoll(self.url, deadline, timeout_s, what)
        while True:
            try:
                if ready():
                    return
                poll.not_ready()
            except Exception as e:
                poll.failed(e)
            time.sleep(poll.next_wait())

    def wait_for_server(self, timeout_s: float) -> None:
        self._poll(lambda: self._call("is_server_ready") and self._call("is_server_live"),
                   time.monotonic() + timeout_s, timeout_s, "server")

    def wait_for_model(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        self.wait_for_server(timeout_s)
        try:
            self._poll(lambda: self._call("is_model_ready", self._model_name, self._model_version), deadline,
                       timeout_s, f"model {self._model_name}/{self._model_version or LATEST}")
        except PyTritonClientTimeoutError as e:
            raise PyTritonClientTimeoutError(f"{e} {self._model_state()}") from None

    def _model_state(self) -> str:
        """What the server's repository index says of the model (for the timeout's message)."""
        try:
            index = self._call("get_model_repository_index")
        except Exception as e:  # e.g. a restricted API (ModelClient(access_token=...) reads it)
            return f"(The server's model repository index could not be read: {e})"
        entries = index if isinstance(index, list) else [
            {"name": m.name, "version": m.version, "state": m.state, "reason": m.reason} for m in index.models]
        found = [e for e in entries if e.get("name") == self._model_name]
        if not found:
            names = sorted({str(e.get("name")) for e in entries})
            return f"The server has no model {self._model_name!r} (its models: {', '.join(names) or 'none'})."
        return "Its state: " + "; ".join(
            f"version {e.get('version') or '?'}: {e.get('state') or 'LOADING'} {e.get('reason') or ''}".rstrip()
            for e in found) + "."

    def model_config(self, timeout_s: float) -> TritonModelConfig:
        from tritonclient.utils import InferenceServerException  # type: ignore[import-untyped]

        try:
            if self._grpc:
                config = self._call("get_model_config", self._model_name, self._model_version, as_json=True)["config"]
            else:
                config = self._call("get_model_config", self._model_name, self._model_version)
        except InferenceServerException as e:
            raise PyTritonClientModelUnavailableError(
                f"Model {self._model_name} is unavailable at {self.url.with_scheme}: {e.message()}") from None
        return model_config_of(self._model_name, config)

    def load_model(self, config: Optional[str] = None, files: Optional[Dict[str, bytes]] = None) -> None:
        self._general.load_model(self._model_name, config=config, files=files, headers=self._headers or None)

    def unload_model(self) -> None:
        self._general.unload_model(self._model_name, headers=self._headers or None)

    def responses(self, inputs: Dict[str, Array], output_names: List[str], parameters: Optional[Dict[str, Value]],
                  headers: Optional[Dict[str, Value]], decoupled: bool) -> Iterator[Dict[str, Array]]:
        wrapped, outputs = request_tensors(self._lib, inputs, output_names)
        if decoupled:
            return self._stream(wrapped, outputs, parameters, headers)  # a generator: nothing sent until read
        kwargs: Dict[str, Any] = {"client_timeout": self._inference_timeout_s} if self._grpc else {}
        try:
            result = self._infer_client.infer(
                model_name=self._model_name, model_version=self._model_version, inputs=wrapped, outputs=outputs,
                request_id=str(next(self._ids)), parameters=parameters,
                headers=merged_headers(self._headers, headers), **kwargs)
        except Exception as e:
            if not isinstance(e, OSError) and type(e).__name__ != "InferenceServerException":
                raise
            raise inference_error(e, self._inference_timeout_s) from e
        return iter((result_arrays(result),))

    def _stream(self, wrapped: List[Any], outputs: List[Any], parameters: Optional[Dict[str, Value]],
                headers: Optional[Dict[str, Value]]) -> Iterator[Dict[str, Array]]:
        """The responses of one request on a stream of its own, started when
        the iteration starts (so an iterator never read holds nothing)."""
        if not self._streaming.acquire(blocking=False):
            raise PyTritonClientInferenceServerError(
                "Inference is already in progress (a DecoupledModelClient streams one request at a time; "
                "read its responses to the end, or use one client per thread)")
        arrived: "queue.SimpleQueue[Tuple[Any, Any]]" = queue.SimpleQueue()
        finished = False
        try:
            try:
                self._infer_client.start_stream(callback=lambda result, error: arrived.put((result, error)),
                                                headers=merged_headers(self._headers, headers))
                self._infer_client.async_stream_infer(
                    model_name=self._model_name, model_version=self._model_version, inputs=wrapped,
                    outputs=outputs, request_id=str(next(self._ids)), parameters=parameters,
                    enable_empty_final_response=True)
            except Exception as e:
                if type(e).__name__ != "InferenceServerException":
                    raise
                raise inference_error(e, self._inference_timeout_s) from e
            while True:
                try:
                    result, error = arrived.get(timeout=self._inference_timeout_s)
                except queue.Empty:
                    raise PyTritonClientTimeoutError(
                        "Timeout occurred during inference request (no response of the stream within "
                        f"{self._inference_timeout_s} s)") from None
                if error is not None:
                    raise inference_error(error, self._inference_timeout_s)
                response = result.get_response()
                if response.outputs:
                    yield result_arrays(result)
                final = response.parameters.get("triton_final_response")
                if final is not None and final.bool_param:
                    finished = True
                    return
        finally:
            try:
                self._infer_client.stop_stream(cancel_requests=not finished)
            finally:
                self._streaming.release()
