"""What the network clients, sync and asyncio, share about tritonclient:
its libraries by scheme (imported when first used), the request's inputs
and outputs as its objects, its results as arrays, its errors as
PyTriton's, the access token's header, and the readiness checks' backoff."""

from __future__ import annotations

import importlib
import time
from typing import Any, Dict, List, Optional

from ._common import Array
from ._url import ClientUrl
from .exceptions import (PyTritonClientClosedError, PyTritonClientError, PyTritonClientInferenceServerError,
                         PyTritonClientTimeoutError, PyTritonClientValueError)

ACCESS_HEADER = "triton-access-token"
LATEST = "<latest>"
FIRST_POLL_S, LAST_POLL_S = 0.01, 0.5  # readiness polls: from 10 ms, doubling, to 0.5 s


def library(url: ClientUrl, asyncio: bool = False) -> Any:
    """tritonclient.http / .grpc (or their .aio) for the url's scheme."""
    name = f"tritonclient.{url.scheme}" + (".aio" if asyncio else "")
    try:
        return importlib.import_module(name)
    except ImportError as e:
        extra = "http" if url.scheme == "http" else "grpc"
        raise PyTritonClientValueError(
            f"{url.with_scheme}: the {url.scheme.upper()} client needs {name}, which cannot be imported ({e}); "
            f"install it (pip install \"tritonclient[{extra}]\"), or use the other protocol") from None


def auth_headers(url: ClientUrl, access_token: Optional[str]) -> Dict[str, str]:
    """The access token's header as the server expects it over the url's protocol."""
    if access_token is None:
        return {}
    if not access_token:
        raise PyTritonClientValueError("access_token cannot be empty")
    if url.scheme == "grpc":
        return {f"triton-grpc-protocol-{ACCESS_HEADER}": access_token}
    return {ACCESS_HEADER: access_token}


def merged_headers(own: Dict[str, str], given: Optional[Dict[str, Any]]) -> Optional[Dict[str, str]]:
    """The request's headers: the access token's and the given ones (int and
    bool values as text, as HTTP and gRPC metadata carry them)."""
    return {**own, **{key: str(value) for key, value in (given or {}).items()}} or None


def request_tensors(lib: Any, inputs: Dict[str, Array], output_names: List[str]) -> tuple[List[Any], List[Any]]:
    """tritonclient's InferInput and InferRequestedOutput objects."""
    from tritonclient.utils import np_to_triton_dtype  # type: ignore[import-untyped]

    wrapped = []
    for name, data in inputs.items():
        infer_input = lib.InferInput(name, list(data.shape), np_to_triton_dtype(data.dtype))
        infer_input.set_data_from_numpy(data)
        wrapped.append(infer_input)
    return wrapped, [lib.InferRequestedOutput(name) for name in output_names]


def result_arrays(result: Any) -> Dict[str, Array]:
    """An InferResult's outputs as arrays, by name."""
    response = result.get_response()
    if isinstance(response, dict):  # HTTP
        names = [output["name"] for output in response.get("outputs", ())]
    else:
        names = [output.name for output in response.outputs]
    return {name: result.as_numpy(name) for name in names}


def inference_error(e: BaseException, timeout_s: float) -> PyTritonClientError:
    """A tritonclient error of an inference as PyTriton's."""
    from tritonclient.utils import InferenceServerException

    if isinstance(e, InferenceServerException):
        message = e.message() or str(e)
        if "Deadline Exceeded" in message or "DEADLINE_EXCEEDED" in str(e.status()):
            return PyTritonClientTimeoutError(
                f"Timeout occurred during inference request. Timeout: {timeout_s} s. Message: {message}")
        return PyTritonClientInferenceServerError(f"Error occurred during inference request. Message: {message}")
    # tritonclient.http: socket.timeout past the timeout, OSError when it cannot connect (as PyTriton: timeouts);
    # the asyncio clients: asyncio.TimeoutError
    return PyTritonClientTimeoutError(
        f"Timeout occurred during inference request. Timeout: {timeout_s} s. Message: {type(e).__name__}: {e}")


class ReadinessPoll:
    """One wait for the server or a model to be ready, as the sync and the
    asyncio clients poll: a check every 10 ms at first, doubling to 0.5 s,
    until `deadline` (time.monotonic()); then PyTritonClientTimeoutError
    naming `what`, the url and the last check's outcome. Each client loops
    ``while True``: run its check (return when ready), tell the outcome
    (`not_ready()` or `failed(e)`), sleep `next_wait()` (which raises past
    the deadline)."""

    def __init__(self, url: ClientUrl, deadline: float, timeout_s: float, what: str) -> None:
        self._url, self._deadline, self._timeout_s, self._what = url, deadline, timeout_s, what
        self._delay = FIRST_POLL_S
        self._last = "not ready"

    def not_ready(self) -> None:
        self._last = "not ready"

    def failed(self, error: Exception) -> None:
        """A check that raised (connection refused, unknown host, the server's
        error): not ready yet. A closed client's error is raised on."""
        if isinstance(error, PyTritonClientClosedError):
            raise error
        self._last = f"{type(error).__name__}: {error}"

    def next_wait(self) -> float:
        """Seconds to sleep before the next check."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise PyTritonClientTimeoutError(f"Waiting for {self._what} to be ready timed out after "
                                             f"{self._timeout_s} s ({self._url.with_scheme}: {self._last}).")
        wait = min(self._delay, left)
        self._delay = min(self._delay * 2, LAST_POLL_S)
        return wait
