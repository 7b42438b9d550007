"""How a bound PyTriton inference callable serves Triton's requests, as
PyTriton's proxy model does, in this process: each call gets a list of
`Request` (one per request of the batch Triton's scheduler formed) and
returns a list of dicts of arrays, one per request (a decoupled model's
callable yields such lists, each one response of every request). Outputs are
checked as PyTriton checks them (with ``strict=True`` against the declared
dtype and shape too), converted to the declared dtype, and only the outputs
each request asked for are sent. An exception in the callable fails every
request of the call with the exception's traceback in the message, worded
as PyTriton's ("Failed to process the request(s) for model '<instance>',
message: TritonModelException: Model execute error: Traceback ..."; a
decoupled model's stream ends with an error response carrying the
traceback); a `PyTritonUnrecoverableError` also stops the Triton object that
bound it."""

from __future__ import annotations

import inspect
import logging
import traceback
from typing import Any, Callable, Dict, List

import numpy

from .._api import _errors
from .._python_models import pb_utils
from .._python_models._awaiting import OwnLoop
from .._python_models._bound import _close, _drain_async
from .proxy.types import Request
from .exceptions import PyTritonUnrecoverableError
from .model_config.generator import is_bytes_dtype
from .model_config.triton_model_config import TritonModelConfig

LOGGER = logging.getLogger("tritonserver.pytriton")
_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
_ALLOWED_KINDS = "biufOSU"


class Runtime:
    """Serves one model instance of a bound PyTriton callable."""

    def __init__(self, infer_func: Callable[..., Any], config: TritonModelConfig, strict: bool,
                 on_unrecoverable: Callable[[str], None]) -> None:
        self._fn = infer_func
        self._config = config
        self._strict = strict
        self._on_unrecoverable = on_unrecoverable
        self._inputs = [spec.name for spec in config.inputs or ()]
        self._outputs = {spec.name: spec for spec in config.outputs or ()}
        self._dtypes = {spec.name: numpy.dtype(object) if is_bytes_dtype(spec.dtype) else numpy.dtype(spec.dtype)
                        for spec in config.outputs or ()}
        self._types = {name: int(pb_utils._triton_type(dtype) or 0) for name, dtype in self._dtypes.items()}
        self._loop = OwnLoop()
        # Served on the core's requests themselves, not pb_utils requests
        # (the bound model looks for this): a decoupled model's stream
        # through each request's response sender.
        self.execute_natives: Callable[[List[Any]], None] = (
            self._stream if config.decoupled else self._execute_natives)

    def _failed(self, error: BaseException) -> pb_utils.TritonError:
        message = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        if isinstance(error, PyTritonUnrecoverableError):
            LOGGER.error("Unrecoverable error thrown during handling requests of model '%s'. Shutting down "
                         "Triton Inference Server. %s", self._config.model_name, message)
            self._on_unrecoverable(message)
        else:
            LOGGER.warning("Exception while performing inference on model '%s': %s", self._config.model_name,
                           message)
        return pb_utils.TritonError(message)

    def _native_requests(self, natives: List[Any]) -> List[Request]:
        """The Request of each core request: its inputs as arrays, its
        parameters as a dict, the outputs it asked for."""
        result = []
        for native in natives:
            data = {}
            for name in self._inputs:
                value = native.input_value(name)
                if value is None:
                    continue
                if type(value) is not numpy.ndarray:  # e.g. in GPU memory: as_numpy() says why not
                    value = native.input_tensor(name).as_numpy()
                data[name] = value
            result.append(Request(data=data, parameters=native.parameters(),
                                  requested_output_names=native.requested_output_names()))
        return result

    def _outputs_of(self, wrapped: List[Request]) -> List[Dict[str, Any]]:
        """The callable's outputs for the requests `wrapped`, checked and
        converted (_arrays); its exception raised as PyTriton's proxy model
        raises it from execute: the requests get "Failed to process the
        request(s) for model '<instance>', message: TritonModelException:
        Model execute error: <traceback>"."""
        try:
            result = self._fn(wrapped)
            if type(result) is not list and inspect.isawaitable(result):
                result = self._loop.run_to_end(result)
            self._validate(result, len(wrapped))
            return [self._arrays(request, outputs) for request, outputs in zip(wrapped, result)]
        except Exception as e:
            raise pb_utils.TritonModelException(f"Model execute error: {self._failed(e).message()}") from None

    def _execute_natives(self, natives: List[Any]) -> None:
        """execute() on the core's requests, without pb_utils objects: the
        same Requests reach the callable, the same outputs the clients, and
        an exception raised here fails the batch as one raised by execute()."""
        for native, arrays in zip(natives, self._outputs_of(self._native_requests(natives))):
            try:
                native.send_arrays(arrays, self._types)
            except Exception as e:  # noqa: BLE001 - the native send's refusal, for this request alone
                code = _errors.code_of(e)
                native.fail_if_unanswered(pb_utils.TritonError.INTERNAL if code is None else code,
                                          f"model '{self._config.model_name}': {e}")

    def _stream(self, natives: List[Any]) -> None:
        """A decoupled model's execute: each list the callable yields is one
        response of every request; the final flag follows the last (or an
        error response, if the callable raised)."""
        senders = [native.response_sender() for native in natives]
        produced: Any = None
        try:
            wrapped = self._native_requests(natives)
            produced = self._fn(wrapped)
            if inspect.isawaitable(produced):
                produced = self._loop.run_to_end(produced)
            if inspect.isasyncgen(produced):
                items: Any = _drain_async(self._loop, produced)
            elif inspect.isgenerator(produced):
                items = produced
            else:
                items = [produced]  # a list of responses: one response of each request
            for item in items:
                if all(sender.is_cancelled() for sender in senders):
                    _close(produced, self._loop)
                    cancelled = (pb_utils.TritonError.CANCELLED, f"model '{self._config.model_name}': cancelled")
                    for sender in senders:
                        sender.send((), cancelled, _FINAL, {})
                    return
                self._validate(item, len(wrapped))
                for sender, request, outputs in zip(senders, wrapped, item):
                    sender.send(self._tensors(request, outputs), None, 0, {})
        except Exception as e:
            error = self._failed(e)
            for sender in senders:
                sender.send((), (error.code(), error.message()), _FINAL, {})
            return
        for sender in senders:
            sender.send_flags(_FINAL)

    def _arrays(self, request: Request, outputs: Dict[str, Any]) -> Dict[str, Any]:
        """The outputs a request gets: those declared and asked for, in
        their declared dtype."""
        wanted = request.requested_output_names
        arrays = {}
        for name, value in outputs.items():
            if name not in self._dtypes or (wanted is not None and name not in wanted):
                continue
            dtype = self._dtypes[name]
            if dtype.kind == "O" and value.dtype.kind == "U":
                value = numpy.char.encode(value, "utf-8")
            arrays[name] = value.astype(dtype, copy=False)
        return arrays

    def _tensors(self, request: Request, outputs: Dict[str, Any]) -> List[Any]:
        return [pb_utils.Tensor(n, a) for n, a in self._arrays(request, outputs).items()]

    # -- PyTriton's checks of what the callable returned --------------------------------------
    def _validate(self, outputs: Any, requests_number: int) -> None:
        name = self._config.model_name
        if not isinstance(outputs, list):
            raise ValueError(f"Outputs returned by `{name}` model callable must be list of response dicts with "
                             f"numpy arrays. Got outputs={outputs} instead.")
        if len(outputs) != requests_number:
            raise ValueError(f"Number of outputs returned by `{name}` inference callable ({len(outputs)}) does "
                             f"not match number of requests ({requests_number}) received from Triton.")
        for response in outputs:
            if not isinstance(response, dict):
                raise ValueError(f"Outputs returned by `{name}` model callable must be list of response dicts "
                                 f"with numpy arrays. Got response={response} instead.")
            for output_name, value in response.items():
                if not (type(output_name) is str and type(value) is numpy.ndarray and value.dtype.kind in "biuf"):
                    self._validate_data(output_name, value)  # the common case passes it: not called
                if self._strict:
                    self._validate_declared(output_name, value)

    def _validate_data(self, output_name: Any, value: Any) -> None:
        name = self._config.model_name
        if not isinstance(output_name, str):
            raise ValueError(f"Not all keys returned by `{name}` model callable are string")
        if not isinstance(value, numpy.ndarray):
            raise ValueError(f"Not all values returned by `{name}` model callable are numpy arrays")
        if value.dtype.kind not in _ALLOWED_KINDS:
            raise ValueError(f"Only bool, numeric, string, unicode and object arrays are supported by Triton "
                             f"(dtype.kind: {_ALLOWED_KINDS}). Returned `{output_name}` for model `{name}` has "
                             f"`{value.dtype.kind}` dtype.kind.")
        if value.dtype.kind == "O" and value.size:
            first = value.item(0)
            if isinstance(first, str):
                raise ValueError("Use string/byte-string instead of object for passing string in NumPy array "
                                 f"from model `{name}`.")
            if not isinstance(first, bytes):
                raise ValueError(f"Only bytes as objects dtype are supported by PyTriton. Returned "
                                 f"`{output_name}` from `{name}` has `{type(first)}` type.")

    def _validate_declared(self, output_name: str, value: Any) -> None:
        name = self._config.model_name
        spec = self._outputs.get(output_name)
        if spec is None:
            raise ValueError(f"Returned output `{output_name}` is not defined in model config for model `{name}`.")
        bytes_types = (bytes, object, numpy.bytes_, numpy.object_)
        if (value.dtype.kind not in "OSU" and not numpy.issubdtype(value.dtype, spec.dtype)) or \
                (value.dtype.kind in "OSU" and spec.dtype not in bytes_types):
            raise ValueError(f"Returned output `{output_name}` for model `{name}` has invalid type. Returned: "
                             f"{value.dtype} ({value.dtype.kind}). Expected: {spec.dtype}.")
        shape = value.shape[1:] if self._config.batching else value.shape
        if len(shape) != len(spec.shape):
            raise ValueError(f"Returned output `{output_name}` for model `{name}` has invalid shapes. Returned: "
                             f"{shape}. Expected: {spec.shape}.")
        if any(x != y != -1 for x, y in zip(shape, spec.shape)):
            raise ValueError(f"Returned output `{output_name}` for model `{name}` has invalid shapes at one or "
                             f"more positions. Returned: {shape}. Expected: {spec.shape}.")

    def finalize(self) -> None:
        self._loop.close()
