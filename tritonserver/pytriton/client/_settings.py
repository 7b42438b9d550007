"""What the sync and the asyncio clients take from their constructors'
arguments, set up once for both: the url parsed (a decoupled client refuses
HTTP, as PyTriton's), the model, the timeouts (PyTriton's defaults), the
access token, and a model config given up front (used without asking the
server, and without waiting for the model when ensure_model_is_ready is
False)."""

from __future__ import annotations

from typing import Optional

from ..model_config.triton_model_config import TritonModelConfig
from ._common import DEFAULT_INFERENCE_TIMEOUT_S, DEFAULT_INIT_TIMEOUT_S
from ._url import ClientUrl
from .exceptions import PyTritonClientValueError


class ClientSettings:
    """The base of every client class: `_set_up()` is its constructor's first step."""

    _decoupled = False

    def _set_up(self, url: str, model_name: str, model_version: Optional[str], init_timeout_s: Optional[float],
                inference_timeout_s: Optional[float], model_config: Optional[TritonModelConfig],
                ensure_model_is_ready: bool, access_token: Optional[str]) -> None:
        self._triton_url = ClientUrl.parse(url)
        self._url = url
        if self._decoupled and self._triton_url.scheme == "http":
            raise PyTritonClientValueError(f"{type(self).__name__} is only supported for grpc protocol")
        self._model_name = model_name
        self._model_version = model_version or ""  # "": the server's latest
        self._init_timeout_s = DEFAULT_INIT_TIMEOUT_S if init_timeout_s is None else init_timeout_s
        self._inference_timeout_s = DEFAULT_INFERENCE_TIMEOUT_S if inference_timeout_s is None \
            else inference_timeout_s
        self._access_token = access_token
        self._model_config = model_config
        # a config given without ensure_model_is_ready: the first request goes without waiting
        self._model_ready = model_config is not None and not ensure_model_is_ready
