"""The model class of every bound callable (``Server.bind``): a python
model run in-process whose ``execute`` calls the callable with NumPy arrays
and turns what it returns (or yields) into responses.

With ``max_batch_size > 0`` one call takes every request of the batch
Triton's scheduler formed, concatenated on axis 0, and its outputs are split
back by each request's batch size; for a callable that takes a ``context``
the batch is split first into calls of requests with equal parameters. Outputs are checked against their
declarations (name, dtype, shape) and a mismatch is an error response naming
the output; the callable's exception is an error response of the requests of
that call, with the class of a ``tritonserver.TritonError`` it raised.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any, Optional

import numpy

from .._api import _errors
from .._api._bind import BINDING_PARAMETER, Binding, CallContext, TensorSpec, binding
from . import pb_utils
from ._awaiting import OwnLoop
from ._device_array import DeviceArray, is_on_device

_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
_OBJECT = numpy.dtype(object)


class _CallError(Exception):
    """A failure of one call, with the python backend's error code."""

    def __init__(self, message: str, code: int = pb_utils.TritonError.INTERNAL) -> None:
        super().__init__(message)
        self.code = code


class TritonPythonModel:
    """Serves one bound callable (named by the model config's parameter)."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        name = args["model_name"]
        token = config.get("parameters", {}).get(BINDING_PARAMETER, {}).get("string_value", "")
        found = binding(token)
        if found is None:
            raise pb_utils.TritonModelException(
                f"model '{name}' was made by Server.bind() and its callable is no longer bound in this process "
                "(bind it again)")
        self.binding: Binding = found
        self._loop = OwnLoop()
        # A binding with a runtime of its own (tritonserver.pytriton) is
        # served by it, on the native requests (its execute_natives).
        self._runtime = found.runtime(found, args) if found.runtime is not None else None
        # Calls of a plain function (not streaming, no context) take the
        # runtime's native path: arrays in, output bytes out, no pb_utils
        # objects between (the runtime looks for this attribute).
        self._output_types = {name: int(pb_utils._triton_type(dtype) or 0)
                              for name, dtype in found.output_dtypes.items()}
        fast = found.kind == "function" and not found.decoupled and not found.wants_context and self._runtime is None
        # (a runtime of its own may serve the native requests itself)
        self._tritonserver_execute_natives = (self._execute_natives if fast
                                              else getattr(self._runtime, "execute_natives", None))

    # -- one call ----------------------------------------------------------------------------
    def execute(self, requests: list[pb_utils.InferenceRequest]) -> Optional[list[pb_utils.InferenceResponse]]:
        groups = self._calls(requests)
        if self.binding.decoupled:
            for group in groups:
                self._stream(group)
            return None
        if len(groups) == 1:
            return self._call(groups[0])
        answered: dict[int, pb_utils.InferenceResponse] = {}
        for group in groups:
            for request, response in zip(group, self._call(group)):
                answered[id(request)] = response
        return [answered[id(r)] for r in requests]  # in the requests' order

    def _calls(self, requests: list[pb_utils.InferenceRequest]) -> list[list[pb_utils.InferenceRequest]]:
        """The requests of each call: one request a call without batching;
        with batching the whole batch, split, for a callable that takes a
        context, into one call per distinct set of request parameters (in
        order of first appearance), so that every request of a call has the
        same parameters and ``context.parameters[0]`` is each one's."""
        b = self.binding
        if b.max_batch_size == 0:
            return [[r] for r in requests]
        if not b.wants_context or len(requests) == 1:
            return [requests]
        by_parameters: dict[str, list[pb_utils.InferenceRequest]] = {}
        for request in requests:
            by_parameters.setdefault(_parameters_key(request), []).append(request)
        return list(by_parameters.values())

    def _execute_natives(self, natives: list[Any]) -> None:
        """execute() of a plain function on the native requests: each call's
        error, or a failure to send, is an error response of its requests."""
        b = self.binding
        for group in ([natives] if b.max_batch_size > 0 else [[n] for n in natives]):
            try:
                kwargs, sizes = self._inputs(group, _native_input)
                result = b.fn(**kwargs)
                if not isinstance(result, dict) and inspect.isawaitable(result):
                    result = self._loop.run_to_end(result)
                rows = _rows(self._outputs(result, sum(sizes)), sizes)
            except Exception as e:
                error = _error(b, e)
                for native in group:
                    native.fail_if_unanswered(error.code(), error.message())
                continue
            for native, arrays in zip(group, rows):
                try:
                    native.send_arrays(arrays, self._output_types)
                except _errors.TritonError as e:  # the native send's own, naming the model
                    error = _error(b, e)
                    native.fail_if_unanswered(error.code(), error.message())
                except Exception as e:
                    native.fail_if_unanswered(pb_utils.TritonError.INTERNAL, f"model '{b.model_name}': {e}")

    def _inputs(self, requests: list[Any], read: Any = None) -> tuple[dict[str, Any], list[int]]:
        """The callable's keyword arrays, and each request's batch size;
        `read(request, name)` gives an input's array (default: of a
        pb_utils request)."""
        b = self.binding
        read = read or _request_input
        per_request: list[dict[str, numpy.ndarray[Any, Any]]] = []
        for request in requests:
            arrays = {}
            for spec in b.inputs:
                array = read(request, spec.name)
                if array is None:  # Triton checks required inputs; kept for safety
                    raise _CallError(f"model '{b.model_name}': input '{spec.name}' is missing",
                                     pb_utils.TritonError.INVALID_ARG)
                arrays[spec.name] = array
            per_request.append(arrays)
        if b.max_batch_size == 0:
            return per_request[0], [0]
        sizes = [int(next(iter(arrays.values())).shape[0]) for arrays in per_request]
        if len(per_request) == 1:
            return per_request[0], sizes
        joined = {spec.name: numpy.concatenate([arrays[spec.name] for arrays in per_request])
                  for spec in b.inputs}
        return joined, sizes

    def _invoke(self, requests: list[pb_utils.InferenceRequest], kwargs: dict[str, Any]) -> Any:
        if self.binding.wants_context:
            kwargs["context"] = CallContext(requests)
        return self.binding.fn(**kwargs)

    def _call(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        """One call of a plain or async callable: one response per request."""
        try:
            kwargs, sizes = self._inputs(requests)
            result = self._invoke(requests, kwargs)
            if inspect.isawaitable(result):
                result = self._loop.run_to_end(result)
            return self._split(self._outputs(result, sum(sizes)), sizes)
        except Exception as e:
            error = _error(self.binding, e)
            return [pb_utils.InferenceResponse(error=error) for _ in requests]

    def _stream(self, requests: list[pb_utils.InferenceRequest]) -> None:
        """One call of a generator: each yielded dict is one response of
        every request of the call; the final flag follows the last."""
        senders = [r.get_response_sender() for r in requests]
        try:
            kwargs, sizes = self._inputs(requests)
            produced = self._invoke(requests, kwargs)
            if inspect.isasyncgen(produced):
                items = _drain_async(self._loop, produced)
            else:
                items = produced
            for item in items:
                if all(r.is_cancelled() for r in requests):
                    _close(produced, self._loop)
                    raise _CallError(f"model '{self.binding.model_name}': cancelled",
                                     pb_utils.TritonError.CANCELLED)
                for sender, response in zip(senders, self._split(self._outputs(item, sum(sizes)), sizes)):
                    sender.send(response)
        except Exception as e:
            error = _error(self.binding, e)
            for sender in senders:
                sender.send(pb_utils.InferenceResponse(error=error), flags=_FINAL)
            return
        for sender in senders:
            sender.send(flags=_FINAL)

    # -- outputs -----------------------------------------------------------------------------
    def _outputs(self, result: Any, batch: int) -> dict[str, numpy.ndarray[Any, Any]]:
        """The callable's result checked against the declared outputs."""
        b = self.binding
        if type(result) is not dict and not isinstance(result, Mapping):
            raise _CallError(f"model '{b.model_name}': the bound callable must return a dict of output arrays "
                             f"({', '.join(repr(s.name) for s in b.outputs)}), not {type(result).__name__}")
        unknown = [] if result.keys() == b.output_dtypes.keys() else sorted(set(result) - set(b.output_dtypes))
        if unknown:
            raise _CallError(f"model '{b.model_name}': the bound callable returned output(s) {unknown}, which "
                             f"are not declared (declared: {[s.name for s in b.outputs]})")
        checked = {}
        for spec in b.outputs:
            if spec.name not in result:
                raise _CallError(f"model '{b.model_name}': the bound callable returned no output "
                                 f"'{spec.name}' (it returned {sorted(result)})")
            checked[spec.name] = _checked_array(b, spec, result[spec.name], batch)
        return checked

    def _split(self, outputs: dict[str, numpy.ndarray[Any, Any]], sizes: list[int]) -> list[pb_utils.InferenceResponse]:
        """One response per request: its rows of each output."""
        return [pb_utils.InferenceResponse([pb_utils.Tensor(n, a) for n, a in arrays.items()])
                for arrays in _rows(outputs, sizes)]

    def finalize(self) -> None:
        finalize = getattr(self._runtime, "finalize", None)
        if finalize is not None:
            finalize()
        self._loop.close()


def _rows(outputs: dict[str, numpy.ndarray[Any, Any]], sizes: list[int]) -> list[dict[str, numpy.ndarray[Any, Any]]]:
    """Each request's rows of every output (a call's requests in order,
    `sizes` rows each; one request: the outputs themselves)."""
    if len(sizes) == 1:
        return [outputs]
    rows, start = [], 0
    for size in sizes:
        rows.append({name: array[start:start + size] for name, array in outputs.items()})
        start += size
    return rows


def _parameters_key(request: pb_utils.InferenceRequest) -> str:
    """A request's parameters as a key equal for equal parameters (keys in
    any order; 3 and 3.0 differ, as their types do)."""
    return json.dumps(json.loads(request.parameters()), sort_keys=True)


def _request_input(request: pb_utils.InferenceRequest, name: str) -> Any:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor._array  # a NumPy array, or a DeviceArray


def _native_input(native: Any, name: str) -> Any:
    return native.input_value(name)


def _checked_array(b: Binding, spec: TensorSpec, value: Any, batch: int) -> Any:
    """`value` as the declared output's array (a DeviceArray for one in GPU
    memory); _CallError naming it when its dtype or shape does not fit the
    declaration."""
    expected = b.output_dtypes[spec.name]
    if type(value) is numpy.ndarray and value.dtype is expected:
        array = value  # as declared: nothing to convert
    else:
        array = _declared_dtype(b, spec, value, expected)
    dims = [batch, *spec.shape] if b.max_batch_size > 0 else spec.shape
    shape = array.shape
    fits = len(shape) == len(dims)
    if fits:
        for d, size in zip(dims, shape):
            if d != -1 and d != size:
                fits = False
                break
    if not fits:
        declared = ["batch" if i == 0 and b.max_batch_size > 0 else d for i, d in enumerate(dims)]
        raise _CallError(f"model '{b.model_name}': output '{spec.name}' has shape {list(shape)}, which does not fit "
                         f"its declaration {declared} (-1: any size" +
                         (f"; batch: the {batch} rows of this call's requests" if b.max_batch_size > 0 else "") +
                         ")")
    return array


def _declared_dtype(b: Binding, spec: TensorSpec, value: Any, expected: numpy.dtype[Any]) -> Any:
    """`value` as an array of the declared output's dtype; _CallError naming
    it when it is of another."""
    array: Any
    if isinstance(value, numpy.ndarray):
        array = value
    elif hasattr(value, "__dlpack__") and expected != _OBJECT:
        if is_on_device(value):  # CuPy arrays, torch CUDA tensors: copied once, when sent
            try:
                array = DeviceArray.of_dlpack(value, f"model '{b.model_name}': output '{spec.name}'")
            except ValueError as e:
                raise _CallError(str(e), pb_utils.TritonError.INVALID_ARG) from None
        else:
            array = numpy.from_dlpack(value)  # torch CPU tensors and the like: no copy
    elif expected == _OBJECT:
        array = _read_array(b, spec, value, expected, expected)
    else:
        array = _exact_array(b, spec, value, expected)
    if expected == _OBJECT:
        if array.dtype.kind not in "OSU":
            raise _CallError(f"model '{b.model_name}': output '{spec.name}' is declared BYTES but the callable "
                             f"returned {array.dtype} (return bytes or str objects)")
        if array.dtype.kind == "U":
            array = numpy.array([s.encode() for s in array.reshape(-1)], dtype=object).reshape(array.shape)
    elif array.dtype != expected:
        raise _CallError(f"model '{b.model_name}': output '{spec.name}' is declared {expected} but the callable "
                         f"returned {array.dtype} (convert it, e.g. array.astype(numpy.{expected}))")
    return array


# The kinds of values (NumPy dtype kinds) a numeric output of each kind
# takes from a list or scalar: bools and integers into integers, any of
# those into floats (rounded as floats round); values are then checked to
# survive the conversion (no wrap-around, no overflow to infinity).
_KINDS_TAKEN = {"b": "b", "i": "biu", "u": "biu", "f": "biuf"}
_KIND_NAMES = {"b": "bools", "i": "integers", "u": "integers", "f": "floats", "c": "complex numbers",
               "U": "str", "S": "bytes", "O": "Python objects"}


def _read_array(b: Binding, spec: TensorSpec, value: Any, dtype: Optional[numpy.dtype[Any]],
                expected: numpy.dtype[Any]) -> Any:
    """numpy.asarray(value, dtype), or _CallError saying the output cannot
    be read as `expected`."""
    try:
        return numpy.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise _CallError(f"model '{b.model_name}': output '{spec.name}' cannot be read as {expected} ({e})",
                         pb_utils.TritonError.INVALID_ARG) from None


def _exact_array(b: Binding, spec: TensorSpec, value: Any, expected: numpy.dtype[Any]) -> Any:
    """A numeric output given as a list, scalar or the like (not an array)
    as an array of `expected`, when its values convert to it exactly; else
    _CallError naming the output, the declared type and the values' kind
    (the same values as an ndarray of their own dtype are refused too)."""
    values = _read_array(b, spec, value, None, expected)
    if values.dtype == expected:
        return values
    if values.size == 0:  # no values to change
        return values.astype(expected)
    kind = f"{_KIND_NAMES.get(values.dtype.kind, 'values')} ({values.dtype})"
    if values.dtype.kind in _KINDS_TAKEN[expected.kind]:
        with numpy.errstate(over="ignore", invalid="ignore"):
            converted = values.astype(expected)
        if expected.kind == "f":
            exact = bool(numpy.array_equal(numpy.isinf(converted), numpy.isinf(values)))
        else:
            exact = bool(numpy.array_equal(converted, values))
        if exact:
            return converted
        kind += f" outside the range of {expected}"
    hint = f"numpy.rint(values).astype(numpy.{expected})" if values.dtype.kind == "f" else \
        f"numpy.asarray(values, dtype=numpy.{expected}) where that is meant"
    raise _CallError(f"model '{b.model_name}': output '{spec.name}' is declared {expected} but the callable "
                     f"returned a {type(value).__name__} holding {kind}, which {expected} cannot hold exactly "
                     f"(return values that fit, or an array of {expected} converted as meant, e.g. {hint})")


def _error(b: Binding, error: BaseException) -> pb_utils.TritonError:
    """A call's exception as an error response's error."""
    if isinstance(error, _CallError):
        return pb_utils.TritonError(str(error), error.code)
    if isinstance(error, pb_utils.TritonError):
        return error
    code = _errors.code_of(error)
    if code is not None:
        return pb_utils.TritonError(str(error), code)
    return pb_utils.TritonError(f"model '{b.model_name}': {type(error).__name__}: {error}",
                                pb_utils.TritonError.INTERNAL)


def _drain_async(loop: OwnLoop, generator: Any) -> Any:
    """An async generator's items, one at a time, on `loop`."""
    while True:
        try:
            item = loop.run_to_end(generator.__anext__())
        except StopAsyncIteration:
            return
        yield item


def _close(generator: Any, loop: OwnLoop) -> None:
    """Close a generator the caller stops early (its finally blocks run)."""
    if inspect.isasyncgen(generator):
        loop.run_to_end(generator.aclose())
    else:
        generator.close()
