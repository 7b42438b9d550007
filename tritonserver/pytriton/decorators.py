"""PyTriton's decorators of inference callables (``pytriton.decorators``),
with its semantics: `batch`, `sample`, `group_by_keys`, `group_by_values`
(with `ConstantPadder` as ``pad_fn``), `fill_optionals`, `first_value`,
`pad_batch`, `triton_context`; and `TritonContext` / `get_model_config`,
which decorators use to read the bound model's configuration."""

from __future__ import annotations

import collections
import dataclasses
import inspect
import itertools
import operator
from bisect import bisect_left
from collections.abc import MutableMapping
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

import numpy

from ._wrapping import decorator
from .exceptions import PyTritonBadParameterError, PyTritonRuntimeError, PyTritonValidationError
from .model_config.triton_model_config import TritonModelConfig

TRITON_CONTEXT_FIELD_NAME = "triton_context"
_SPECIAL_KEYS = ["__triton_context__"]

InputNames = List[str]
InferenceRequest = Dict[str, "numpy.ndarray[Any, Any]"]
InferenceRequests = Union[List[InferenceRequest], Tuple[InferenceRequest, ...]]
InferenceResult = Dict[str, "numpy.ndarray[Any, Any]"]
InferenceResults = Union[List[InferenceResult], Tuple[InferenceResult, ...]]


class _WrappedWithWrapper(NamedTuple):
    wrapped: Optional[Callable[..., Any]]
    wrapper: Optional[Callable[..., Any]]


def get_inference_request_batch_size(inference_request: InferenceRequest) -> int:
    """The batch size of a request: the first axis of its first input."""
    first = next(iter(inference_request.values()))
    return int(first.shape[0])


def _get_wrapt_stack(wrapped: Any) -> List[_WrappedWithWrapper]:
    """The decorator layers of a callable, outermost first."""
    stack = []
    current = wrapped
    while current is not None:
        stack.append(_WrappedWithWrapper(current, getattr(current, "_self_wrapper", None)))
        current = getattr(current, "__wrapped__", None)
    return stack


def _model_config_key(infer_callable: Any) -> str:
    while getattr(infer_callable, "_self_wrapper", None) is not None:  # a decorated layer: its innermost callable
        infer_callable = infer_callable.__wrapped__
    if inspect.ismethod(infer_callable) and infer_callable.__name__ == "__call__":
        infer_callable = infer_callable.__self__
    return str(infer_callable)


class ModelConfigDict(MutableMapping[Callable[..., Any], TritonModelConfig]):
    """The model configuration of each bound callable (keyed by the
    callable; a callable object and its ``__call__`` are one key)."""

    def __init__(self) -> None:
        self._data: Dict[str, TritonModelConfig] = {}
        self._keys: List[Callable[..., Any]] = []

    def __getitem__(self, infer_callable: Callable[..., Any]) -> TritonModelConfig:
        return self._data[self._get_model_config_key(infer_callable)]

    def __setitem__(self, infer_callable: Callable[..., Any], item: TritonModelConfig) -> None:
        self._keys.append(infer_callable)
        self._data[self._get_model_config_key(infer_callable)] = item

    def __delitem__(self, infer_callable: Callable[..., Any]) -> None:
        del self._data[self._get_model_config_key(infer_callable)]

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Callable[..., Any]]:
        return iter(self._keys)

    @staticmethod
    def _get_model_config_key(infer_callable: Callable[..., Any]) -> str:
        return _model_config_key(infer_callable)


@dataclasses.dataclass
class TritonContext:
    """What ``@triton_context`` passes: ``model_configs[infer_func]`` is the
    bound model's TritonModelConfig."""

    model_configs: ModelConfigDict = dataclasses.field(default_factory=ModelConfigDict)


def inject_triton_context(triton_context: TritonContext, model_callable: Callable[..., Any]) -> Callable[..., Any]:
    """Attach `triton_context` to a callable (to its object for a method),
    as bind() does."""
    if inspect.ismethod(model_callable):
        setattr(model_callable.__self__, "__triton_context__", triton_context)
    else:
        model_callable.__triton_context__ = triton_context  # type: ignore[attr-defined]
    return model_callable


def get_triton_context(wrapped: Any, instance: Any) -> TritonContext:
    """The TritonContext bind() attached to the callable."""
    caller = instance or wrapped
    if not hasattr(caller, "__triton_context__"):
        raise PyTritonValidationError("Wrapped function or object must bound with triton to get  __triton_context__")
    return caller.__triton_context__  # type: ignore[no-any-return]


def get_model_config(wrapped: Any, instance: Any) -> TritonModelConfig:
    """The model configuration of the bound callable."""
    return get_triton_context(wrapped, instance).model_configs[wrapped]


def convert_output(outputs: Union[Dict[str, Any], List[Any], Tuple[Any, ...]], wrapped: Any = None,
                   instance: Any = None, model_config: Optional[TritonModelConfig] = None) -> Dict[str, Any]:
    """Outputs given as a list or tuple (in the declared outputs' order) as a dict."""
    if isinstance(outputs, dict):
        return outputs
    if isinstance(outputs, (list, tuple)):
        if model_config is None:
            model_config = get_model_config(wrapped, instance)
        if len(outputs) != len(model_config.outputs or ()):
            raise PyTritonValidationError("Outputs length different than config outputs length")
        return {spec.name: output for spec, output in zip(model_config.outputs or (), outputs)}
    raise PyTritonValidationError(f"Unsupported output type {type(outputs)}.")


@decorator
def sample(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """For a model without batching: the one request's inputs as keyword
    arguments; the result (a dict, or a list/tuple in the outputs' order)
    is the request's response."""
    kwargs.update(args[0][0])
    outputs = wrapped(*args[1:], **kwargs)
    return [convert_output(outputs, wrapped, instance)]


@decorator
def batch(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """The requests' inputs concatenated on the batch axis, as keyword
    arguments; the result (a dict of batches, or a generator of them) split
    back into each request's rows. PyTritonValidationError when the requests
    have different sets of inputs (use @group_by_keys first); ValueError when
    an output's batch size is not the requests' total."""
    requests = args[0]
    names = requests[0].keys()
    for other in requests[1:]:
        if names != other.keys():
            raise PyTritonValidationError("Cannot batch requests with different set of inputs keys")
    joined = {name: numpy.concatenate([request[name] for request in requests]) for name in names}
    outputs = wrapped(*args[1:], **{**kwargs, **joined})

    def split(result: Any) -> List[Dict[str, Any]]:
        result = convert_output(result, wrapped, instance)
        sizes = [get_inference_request_batch_size(request) for request in requests]
        total = sum(sizes)
        mismatched = {name: tensor.shape for name, tensor in result.items() if tensor.shape[0] != total}
        if mismatched:
            raise ValueError(
                "Received output tensors with different batch sizes: "
                f"{', '.join(': '.join(map(str, item)) for item in mismatched.items())}. "
                f"Expected batch size: {total}. ")
        responses, start = [], 0
        for size in sizes:
            responses.append({name: tensor[start:start + size, ...] for name, tensor in result.items()})
            start += size
        return responses

    if inspect.isgenerator(outputs):
        return (split(item) for item in outputs)
    return split(outputs)


_BATCH_WRAPPER = batch.__wrapped__  # type: ignore[attr-defined]


def _value_key(value: Any) -> Any:
    """A hashable, orderable key of one sample's value."""
    if isinstance(value, numpy.ndarray):
        if value.dtype == numpy.object_ or value.dtype.type == numpy.bytes_:
            items = [item if isinstance(item, bytes) else str(item).encode() for item in value.reshape(-1)]
            return b"".join(len(item).to_bytes(4, "little") + item for item in items)
        return value.tobytes()
    return value


def group_by_values(*keys: str, pad_fn: Optional[Callable[[InferenceRequests], InferenceRequests]] = None) -> Any:
    """Split the batch (under @batch) into sub-batches whose samples have
    equal values of the `keys` inputs, call the function once per sub-batch
    and put its outputs back in the samples' order; ``pad_fn`` (e.g.
    ConstantPadder()) pads the sub-batches' outputs to one shape first."""

    def groups(request: InferenceRequest, size: int) -> Iterator[Tuple[Tuple[int, ...], InferenceRequest]]:
        indexed = [(i, tuple(_value_key(request[key][i]) for key in keys)) for i in range(size)]
        indexed.sort(key=operator.itemgetter(1))
        for _, group in itertools.groupby(indexed, key=operator.itemgetter(1)):
            indices, _ = zip(*group)
            yield indices, {name: value[indices, ...] for name, value in request.items()}

    @decorator
    def wrapper(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        inner = [layer.wrapper for layer in _get_wrapt_stack(wrapped) if layer.wrapper is not None]
        if _BATCH_WRAPPER in inner:
            raise PyTritonRuntimeError("The @group_by_values decorator must be used after the @batch decorator.")
        request = {k: v for k, v in kwargs.items() if k not in _SPECIAL_KEYS}
        special = {k: v for k, v in kwargs.items() if k in _SPECIAL_KEYS}
        size = get_inference_request_batch_size(request)
        results = [(indices, wrapped(*args, **sub, **special)) for indices, sub in groups(request, size)]
        if pad_fn is not None:
            indices_list, outputs = tuple(map(tuple, zip(*results)))
            results = list(zip(indices_list, pad_fn(outputs)))
        first = results[0][1]
        merged = {name: numpy.zeros((size,) + data.shape[1:], dtype=data.dtype) for name, data in first.items()}
        for indices, outputs in results:
            for name, data in outputs.items():
                merged[name][indices, ...] = data
        return merged

    return wrapper


class ConstantPadder:
    """A ``pad_fn`` of @group_by_values: pads every output of the groups to
    the largest shape among them with ``pad_value`` (b"" for strings), so
    that they join into one batch."""

    def __init__(self, pad_value: Any = 0) -> None:
        self.pad_value = pad_value

    def __call__(self, batches_list: InferenceResults) -> InferenceResults:
        def padded_shape(batches: List[Any]) -> Tuple[int, ...]:
            return tuple(numpy.max([b.shape[1:] for b in batches if b is not None], axis=0))

        def padded_dtype(batches: List[Any]) -> Any:
            dtypes = [b.dtype for b in batches if b is not None]
            result = dtypes[0]
            if not all(d.kind == result.kind for d in dtypes):
                raise PyTritonRuntimeError("All input arrays for given input name must have the same dtype.")
            if result.kind in "SU":
                return numpy.dtype(f"{result.str[:2]}{max(int(d.str[2:]) for d in dtypes)}")
            if not all(d == result for d in dtypes):
                raise PyTritonRuntimeError("All input arrays for given input name must have the same dtype.")
            return result

        names = list(collections.OrderedDict.fromkeys(name for b in batches_list for name in b.keys()))
        by_name: Dict[str, List[Any]] = {name: [b.get(name) for b in batches_list] for name in names}
        for batches in by_name.values():
            shape, dtype = padded_shape(batches), padded_dtype(batches)
            for i, array in enumerate(batches):
                if array is not None:
                    batches[i] = numpy.pad(
                        array, [(0, 0)] + [(0, b - a) for a, b in zip(array.shape[1:], shape)], mode="constant",
                        constant_values=self.pad_value if dtype.kind not in "SUO" else b"").astype(dtype)
        return [{name: batches[i] for name, batches in by_name.items() if batches[i] is not None}
                for i in range(len(batches_list))]


@decorator
def group_by_keys(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Call the function once per group of requests with the same set of
    inputs (e.g. before @batch, with optional inputs); the responses come
    back in the requests' order."""
    requests = args[0]
    indexed = [(i, tuple(sorted(request.keys())), request) for i, request in enumerate(requests)]
    indexed.sort(key=operator.itemgetter(1))
    answered: List[Tuple[int, Any]] = []
    for _, group in itertools.groupby(indexed, key=operator.itemgetter(1)):
        indices, _keys, members = zip(*group)
        outputs = wrapped(list(members), *args[1:], **kwargs)
        answered.extend(zip(indices, outputs))
    answered.sort(key=operator.itemgetter(0))
    return [response for _, response in answered]


def fill_optionals(**defaults: "numpy.ndarray[Any, Any]") -> Any:
    """Fill the optional inputs a request left out with `defaults` (NumPy
    arrays without the batch axis, repeated over the request's batch when
    the model batches). The defaults are checked against the inputs'
    declarations at the first call (PyTritonBadParameterError)."""

    def verify(config: TritonModelConfig) -> None:
        inputs = {spec.name: spec for spec in config.inputs or ()}
        unknown = sorted(set(defaults) - set(inputs))
        if unknown:
            raise PyTritonBadParameterError(f"Could not found {', '.join(unknown)} inputs")
        not_arrays = {k: v for k, v in defaults.items() if not isinstance(v, numpy.ndarray)}
        if not_arrays:
            raise PyTritonBadParameterError(
                f"Could not use {', '.join(f'{k}={v}' for k, v in not_arrays.items())} defaults "
                "as they are not NumPy arrays")
        bad_dtypes = {k: (v.dtype, inputs[k].dtype) for k, v in defaults.items() if v.dtype != inputs[k].dtype}
        if bad_dtypes:
            listed = [f"{k}: dtype={have} expected_dtype={want}" for k, (have, want) in bad_dtypes.items()]
            raise PyTritonBadParameterError(
                f"Could not use {', '.join(listed)} defaults as they have different than input signature dtypes")

        def matches(have: Tuple[int, ...], want: Tuple[int, ...]) -> bool:
            return len(have) == len(want) and all(w == -1 or h == w for h, w in zip(have, want))

        bad_shapes = {k: (v.shape, inputs[k].shape) for k, v in defaults.items() if not matches(v.shape, inputs[k].shape)}
        if bad_shapes:
            listed = [f"{k}: shape={have} expected_shape={want}" for k, (have, want) in bad_shapes.items()]
            raise PyTritonBadParameterError(
                f"Could not use {', '.join(listed)} defaults as they have different than input signature shapes")

    @decorator
    def wrapper(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        config = get_model_config(wrapped, instance)
        verify(config)
        (requests,) = args
        for request in requests:
            for name, value in defaults.items():
                if name in request:
                    continue
                if config.batching:
                    size = get_inference_request_batch_size(request)
                    value = numpy.tile(value, (size,) + (1,) * value.ndim)
                request[name] = value
        return wrapped(*args, **kwargs)

    return wrapper


@decorator
def triton_context(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Pass the TritonContext as the keyword argument ``triton_context``
    (``triton_context.model_configs[infer_func]``: the model's
    configuration)."""
    kwargs[TRITON_CONTEXT_FIELD_NAME] = get_triton_context(wrapped, instance)
    return wrapped(*args, **kwargs)


@decorator
def pad_batch(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Pad the batch (under @batch) to the nearest preferred batch size (or
    max_batch_size) by repeating its last row."""
    inputs = {k: v for k, v in kwargs.items() if k != "__triton_context__"}
    first = next(iter(inputs.values()))
    config = get_model_config(wrapped, instance)
    sizes = [] if config.batcher is None or config.batcher.preferred_batch_size is None \
        else sorted(config.batcher.preferred_batch_size)
    sizes.append(config.max_batch_size)
    target = sizes[bisect_left(sizes, first.shape[0])]
    padded = {}
    for name, array in inputs.items():
        repeats = numpy.ones(array.shape[0], dtype=numpy.int64)
        repeats[-1] = target - array.shape[0] + 1
        padded[name] = numpy.repeat(array, repeats, axis=0)
    kwargs.update(padded)
    return wrapped(*args, **kwargs)


def first_value(*keys: str, squeeze_single_values: bool = True, strict: bool = True) -> Any:
    """Replace each of the `keys` inputs with its first value (e.g. a
    parameter sent as an input: under @batch, or over a list of requests);
    ``strict``: PyTritonRuntimeError unless all its values are equal;
    ``squeeze_single_values``: a one-element value becomes a scalar. Only
    for batching models."""
    not_allowed = [key for key in keys if key in _SPECIAL_KEYS]
    if not_allowed:
        raise PyTritonBadParameterError(
            f"The keys {', '.join(not_allowed)} are not allowed as keys for @first_value wrapper. "
            f"The set of not allowed keys are {', '.join(_SPECIAL_KEYS)}")

    @decorator
    def wrapper(wrapped: Any, instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        config = get_model_config(wrapped, instance)
        if not config.batching:
            raise PyTritonRuntimeError("The @first_value decorator can only be used with models that support batching.")

        def replace(request: Any) -> Any:
            for name in keys:
                if name not in request:
                    continue
                values = request[name]
                if strict:
                    unique = numpy.unique(values, axis=None if values.dtype == object else 0)
                    if len(unique) > 1:
                        raise PyTritonRuntimeError(
                            f"The values on the {name!r} input are not equal. To proceed, either disable strict "
                            "mode in @first_value wrapper or ensure that the values always are consistent. "
                            f"The current values of {name!r} are {request[name]!r}.")
                value = values[0]
                if squeeze_single_values and not numpy.isscalar(value) and all(d == 1 for d in value.shape):
                    value = numpy.squeeze(value)[()]
                request[name] = value
            return request

        if set(kwargs) - set(_SPECIAL_KEYS):
            return wrapped(*args, **replace(kwargs))
        requests, *others = args
        return wrapped([replace(request) for request in requests], *others, **kwargs)

    return wrapper
