"""KServe v2 inference bodies to and from NumPy.

Requests are JSON, optionally followed by raw tensor bytes (Triton's binary
tensor data extension: the ``Inference-Header-Content-Length`` header gives
the JSON's length, and each binary input says its ``binary_data_size``).
Responses are JSON, with the outputs that asked for it (or all, with the
request parameter ``binary_data_output``) as raw bytes after the JSON.
With the request's shared-memory uses (``shared_memory.RegionUses``, which
hold each region the request names in use), inputs may be read from
registered regions and outputs written into them
(the ``shared_memory_region``/``_offset``/``_byte_size`` parameters of
Triton's shared-memory extension); without one those parameters are
refused. ``decode_generate``/``encode_generate``: the bodies of Triton's
generate extension (inputs by name in one JSON object, outputs as JSON).
"""

from __future__ import annotations

import ctypes
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union, cast

import numpy

from .._api._datautils import ELEMENT_TYPES, deserialize_bytes
from .._api._enums import DataType, MemoryType, RequestFlag
from .._api._errors import InternalError, TritonError, UnsupportedError
from .._api._memorybuffer import MemoryBuffer
from .._api._request import RawInput
from .._api._checks import text as _text
from .._api._tensor import Tensor

ParameterValue = Union[str, int, float, bool]

# Protocol datatype name (the DataType's name) -> (Triton type, NumPy dtype
# of its elements, little-endian), from the element-type table. BF16
# travels as its raw 16-bit patterns (NumPy has no bfloat16).
DATATYPES: dict[str, tuple[DataType, Any]] = {
    t.name: (t, numpy.dtype(numpy.bool_) if kind == "b" else numpy.dtype(f"<{kind or 'u'}{bits // 8}"))
    for t, (kind, _, bits) in ELEMENT_TYPES.items()
}
DATATYPES["BYTES"] = (DataType.BYTES, numpy.dtype(object))
_NAMES = {data_type: name for name, (data_type, _) in DATATYPES.items()}

# Request parameters that set fields of the request (as Triton's own HTTP
# endpoint does) rather than reach the model.
_SEQUENCE_FLAGS = {"sequence_start": RequestFlag.SEQUENCE_START, "sequence_end": RequestFlag.SEQUENCE_END}

# The raw binary request's one input until the core gives it the model's
# input name (the binary's name for it, seen in the core's errors).
RAW_INPUT_NAME = "raw_input"

# Request parameters starting with this are Triton's own: the binary refuses
# them in a request (HTTP: any; gRPC: all but a few it reads).
RESERVED_PARAMETER_PREFIX = "triton_"

# The most dimensions a shape may have: NumPy 1's limit (NumPy 2 allows 64).
MAX_DIMS = 32


class ProtocolError(Exception):
    """A request the protocol refuses: ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def bad_request(message: str) -> ProtocolError:
    return ProtocolError(400, message)


class JsonObject(dict[str, Any]):
    """A JSON object read as the binary reads one (RapidJSON's lookup): a
    key given more than once keeps its first value; `pairs` holds every
    member in order, repeats included."""

    pairs: list[tuple[str, Any]]


def _json_object(pairs: list[tuple[str, Any]]) -> JsonObject:
    document = JsonObject()
    for key, value in pairs:
        document.setdefault(key, value)
    document.pairs = pairs
    return document


def load_json(text: bytes) -> Any:
    """A request body's JSON, its objects as `JsonObject`s; raises what
    `json.loads` raises."""
    return json.loads(text, object_pairs_hook=_json_object)


def dump_json(document: Any) -> bytes:
    """A reply's JSON, compact as the binary writes it."""
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _already_exists(request_id: Optional[str], name: str) -> ProtocolError:
    """An input given twice: the core's refusal, as the binary answers it."""
    return bad_request(f"[request id: {request_id or '<id_unknown>'}] input '{name}' already exists in request")


def _invalid_parameter(key: str) -> str:
    """The binary's refusal of a request parameter that is no string,
    number or boolean."""
    return f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'."


@dataclass
class DecodedRequest:
    """What an infer body asks for, ready for ``Model.async_infer``."""

    inputs: dict[str, Any]
    request_id: Optional[str] = None
    parameters: dict[str, ParameterValue] = field(default_factory=dict)
    output_names: Optional[list[str]] = None
    binary_outputs: set[str] = field(default_factory=set)
    all_outputs_binary: bool = False
    # output name -> (region, offset, byte_size): written into shared memory
    shm_outputs: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    # correlation_id, flags, priority, timeout: from the protocol's parameters
    fields: dict[str, Any] = field(default_factory=dict)

    def wants_binary(self, name: str) -> bool:
        """An output asked for by name is binary data when it asks so
        itself (its own 'binary_data', false by default); the others when
        the request's 'binary_data_output' says so (as the binary)."""
        if self.output_names and name in self.output_names:
            return name in self.binary_outputs
        return self.all_outputs_binary


# -- requests ----------------------------------------------------------------

def decode_request(body: bytes, header_length: Optional[int] = None,
                   shared_memory: Optional[Any] = None) -> DecodedRequest:
    """Parse an infer request body; raises ProtocolError (400) when it is
    not a valid request. `shared_memory`: the request's RegionUses, through
    which inputs and outputs in shared memory are viewed (None: refused).

    A JSON header of length 0 (Inference-Header-Content-Length: 0, or an
    empty body without that header) makes the raw binary request, as in
    the binary: the whole body is the data of the model's only input, its
    datatype and shape deduced by the core, and every output is binary."""
    if header_length is None:
        header_length = len(body)
    if not 0 <= header_length <= len(body):
        raise bad_request(
            f"Inference-Header-Content-Length {header_length} is outside the body of {len(body)} bytes"
        )
    if header_length == 0:
        return DecodedRequest({RAW_INPUT_NAME: RawInput(bytes(body))}, all_outputs_binary=True)
    try:
        document = load_json(body[:header_length])
    except (ValueError, UnicodeDecodeError) as error:
        raise bad_request(f"the request body is not valid JSON: {error}") from None
    except RecursionError:
        raise bad_request(
            "the request body's JSON nests too deeply to parse (tensor data needs one level per dimension)"
        ) from None
    if not isinstance(document, dict):
        raise bad_request("the request body must be a JSON object")
    binary = memoryview(body)[header_length:]

    request_id = document.get("id")
    if request_id is not None:
        if not isinstance(request_id, str):
            raise bad_request("'id' must be a string")
        core_text("'id'", request_id)
    parameters = _parameters(document.get("parameters"), "the request", reserved=True)
    all_binary = parameters.pop("binary_data_output", False)
    if not isinstance(all_binary, bool):
        raise bad_request("parameter 'binary_data_output' must be a boolean")
    fields = _request_fields(parameters)

    entries = document.get("inputs")
    if not isinstance(entries, list):  # an empty one is the core's to judge (all inputs may be optional)
        raise bad_request("'inputs' must be a list of the request's input tensors (JSON objects)")
    inputs: dict[str, Any] = {}
    offset = 0
    for entry in entries:
        name, value, used = _decode_input(entry, binary[offset:], shared_memory)
        if name in inputs:
            raise _already_exists(request_id, name)
        inputs[name] = value
        offset += used
    if offset != len(binary):
        raise bad_request(f"{len(binary) - offset} bytes of binary data follow the inputs unclaimed")

    output_names, binary_outputs, shm_outputs = _requested_outputs(document.get("outputs"), shared_memory)
    return DecodedRequest(inputs, request_id, parameters, output_names, binary_outputs, all_binary,
                          fields=fields, shm_outputs=shm_outputs)


def _request_fields(parameters: dict[str, ParameterValue]) -> dict[str, Any]:
    """Take sequence_id/_start/_end, priority and timeout (µs) out of the
    parameters, as InferenceRequest fields."""
    fields: dict[str, Any] = {}
    sequence_id: Optional[ParameterValue] = parameters.pop("sequence_id", None)
    if sequence_id is not None:
        if not (type(sequence_id) is str or (type(sequence_id) is int and 0 <= sequence_id < 2**64)):
            raise bad_request("parameter 'sequence_id' must be a string or an integer from 0 to 2**64 - 1")
        if type(sequence_id) is str:
            core_text("parameter 'sequence_id'", sequence_id)
        fields["correlation_id"] = sequence_id
    flags = 0
    for name, flag in _SEQUENCE_FLAGS.items():
        value = parameters.pop(name, False)
        if not isinstance(value, bool):
            raise bad_request(f"parameter '{name}' must be a boolean")
        flags |= flag if value else 0
    if flags:
        fields["flags"] = flags
    for name in ("priority", "timeout"):
        if name not in parameters:
            continue
        value = parameters.pop(name)
        if type(value) is not int or not 0 <= value < 2**64:
            raise bad_request(f"parameter '{name}' must be an integer from 0 to 2**64 - 1")
        fields[name] = value
    return fields


def core_text(what: str, value: str, where: str = "") -> str:
    """A name, id or parameter that reaches the core as a C string: refused
    (400) with a NUL, which would cut it short, or a lone surrogate, which
    has no UTF-8 form (the API's own rule, `_api._request._text`)."""
    try:
        return _text(what, value)
    except ValueError as error:
        raise bad_request(
            f"{where + ': ' if where else ''}{error}; names, ids and parameters reach the core as C strings"
        ) from None


def _parameters(value: Any, where: str, reserved: bool = False) -> dict[str, ParameterValue]:
    """`value`, the 'parameters' of `where`, checked in order as the binary
    does; `reserved`: the names starting with 'triton_' are refused (a
    request's own parameters)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(f"'parameters' of {where} must be a JSON object")
    for key, item in value.items():
        core_text("parameter name", key, where)
        if reserved and key.startswith(RESERVED_PARAMETER_PREFIX):
            raise bad_request(f"parameter keys starting with '{RESERVED_PARAMETER_PREFIX}' are reserved for Triton "
                              "usage and should not be specified.")
        if not isinstance(item, (str, int, float, bool)):
            raise bad_request(_invalid_parameter(key))
        if isinstance(item, str):
            core_text(f"parameter '{key}'", item, where)
    return dict(value)


def _tensor_parameters(value: Any, where: str, shared_memory: Optional[Any]) -> dict[str, ParameterValue]:
    """An input's or requested output's parameters. Without shared-memory
    uses Triton's shared-memory extension is refused: an output asked
    into a region would be answered inline while the client reads its
    region."""
    parameters = _parameters(value, where)
    shared = [key for key in parameters if key.startswith("shared_memory_")]
    if shared and shared_memory is None:
        raise bad_request(
            f"{where}: the shared-memory extension is not supported here (parameter '{shared[0]}'): "
            "send inputs in the body (JSON 'data' or binary_data_size) and read outputs from the response"
        )
    return parameters


SHM_PARAMETERS = ("shared_memory_region", "shared_memory_offset", "shared_memory_byte_size")


def _shm_location(parameters: dict[str, ParameterValue], where: str) -> Optional[tuple[str, int, int]]:
    """(region, offset, byte_size) of a tensor in shared memory, None when
    its parameters name no region."""
    unknown = [key for key in parameters if key.startswith("shared_memory_") and key not in SHM_PARAMETERS]
    if unknown:
        raise bad_request(f"{where}: unknown shared-memory parameter '{unknown[0]}' (one of {', '.join(SHM_PARAMETERS)})")
    region = parameters.get("shared_memory_region")
    if region is None:
        if "shared_memory_byte_size" in parameters or "shared_memory_offset" in parameters:
            raise bad_request(f"{where}: 'shared_memory_byte_size' and 'shared_memory_offset' need a "
                              "'shared_memory_region'")
        return None
    if not isinstance(region, str):
        raise bad_request(f"{where}: Unable to parse 'shared_memory_region': it must be a string")
    values = []
    for key in ("shared_memory_offset", "shared_memory_byte_size"):
        value = parameters.get(key, 0)
        if type(value) is not int or not 0 <= value < 2**64:
            raise bad_request(f"{where}: Unable to parse '{key}': it must be an integer from 0 to 2**64 - 1")
        values.append(value)
    if "shared_memory_byte_size" not in parameters:
        raise bad_request(f"{where}: 'shared_memory_byte_size' is required with 'shared_memory_region'")
    if "binary_data_size" in parameters:  # an output's binary_data is moot: its data goes to the region
        raise bad_request(f"{where}: shared memory and binary data are exclusive (give one of "
                          "'shared_memory_region' and 'binary_data_size')")
    return region, values[0], values[1]


def _shm_view(shared_memory: Any, location: tuple[str, int, int], where: str) -> memoryview:
    """The bytes of a region, errors naming the tensor (the registry's are
    TritonErrors: a 400 for bad offsets, 404 for an unknown region)."""
    region, offset, byte_size = location
    try:
        return cast("memoryview", shared_memory.view(region, offset, byte_size))
    except TritonError as error:
        raise type(error)(f"{where}: {error}") from None


def _decode_input(entry: Any, binary: memoryview, shared_memory: Optional[Any] = None) -> tuple[str, Any, int]:
    """One input: its name, the array (or Tensor for BF16) and the number
    of binary bytes it used."""
    if not isinstance(entry, dict):
        raise bad_request("each input must be a JSON object")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request("each input needs a 'name' string")
    core_text("input name", name)
    datatype = entry.get("datatype")
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise bad_request(
            f"input '{name}': unknown datatype {datatype!r} (one of {', '.join(DATATYPES)})"
        )
    shape = _checked_shape(name, entry.get("shape"), DATATYPES[datatype][1].itemsize)
    count = math.prod(shape)
    parameters = _tensor_parameters(entry.get("parameters"), f"input '{name}'", shared_memory)
    location = _shm_location(parameters, f"input '{name}'")
    if location is not None:
        if "data" in entry:
            raise bad_request(f"input '{name}': 'data' and 'shared_memory_region' are exclusive")
        with _shm_view(shared_memory, location, f"input '{name}'") as view:
            raw = bytes(view)  # a copy: the region may change once the call returns
        array = _from_binary(name, datatype, shape, count, raw)
        return name, _as_input(datatype, array), 0
    size = parameters.get("binary_data_size")
    if size is not None:
        if type(size) is not int or size < 0:
            raise bad_request(f"input '{name}': 'binary_data_size' must be a non-negative integer")
        if size > len(binary):
            raise bad_request(
                f"input '{name}': binary_data_size {size} exceeds the {len(binary)} bytes left in the body"
            )
        array = _from_binary(name, datatype, shape, count, bytes(binary[:size]))
        return name, _as_input(datatype, array), size
    if "data" not in entry:
        raise bad_request(f"input '{name}' has neither 'data' nor a 'binary_data_size' parameter")
    if not isinstance(entry["data"], list):  # the binary's 500, then the cause
        raise ProtocolError(500, "Unable to parse 'data': attempt to access JSON non-array as array: input "
                                 f"'{name}': 'data' is a JSON list of the tensor's elements")
    array = _from_json(name, datatype, shape, count, entry["data"])
    return name, _as_input(datatype, array), 0


def _checked_shape(name: str, shape: Any, itemsize: int) -> list[int]:
    """A shape NumPy can make an array of (an empty one too)."""
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise bad_request(f"input '{name}': 'shape' must be a list of non-negative integers")
    if len(shape) > MAX_DIMS:
        raise bad_request(f"input '{name}': its shape has {len(shape)} dimensions, more than the {MAX_DIMS} allowed")
    if math.prod(d for d in shape if d) * itemsize >= 2**63:
        raise bad_request(
            f"input '{name}': shape {shape} is too large: its non-zero dimensions times the "
            f"{itemsize}-byte element size exceed 2**63 - 1 bytes"
        )
    return shape


def _from_binary(name: str, datatype: str, shape: list[int], count: int, raw: bytes) -> Any:
    if datatype == "BYTES":
        try:
            items = deserialize_bytes(raw, count)
        except Exception as error:
            raise bad_request(f"input '{name}': {error}") from None
        if sum(4 + len(item) for item in items) != len(raw):
            raise bad_request(f"input '{name}': BYTES data is longer than {count} elements")
        return _object_array(items, shape)
    dtype = DATATYPES[datatype][1]
    if len(raw) != count * dtype.itemsize:  # the core's refusal, the binary's words
        return core_judged(datatype, shape, numpy.frombuffer(raw, dtype=numpy.uint8))
    return numpy.frombuffer(raw, dtype=dtype).reshape(shape)


def core_judged(datatype: str, shape: list[int], raw: Any) -> Tensor:
    """Raw little-endian bytes (a uint8 array, which the Tensor holds) as an
    input of `datatype` and `shape`, whatever their size: the core checks
    them against the model with its own messages, as the binary answers
    ("input byte size mismatch for input ...", after a datatype the model
    does not take)."""
    kind = DATATYPES.get(datatype)
    data_type = kind[0] if kind is not None else DataType.INVALID
    pointer = raw.__array_interface__["data"][0]
    return Tensor(data_type, shape, MemoryBuffer(pointer, MemoryType.CPU, 0, raw.nbytes, raw))


# Element checks for JSON data: the Python type each datatype accepts.
def _is_bool(item: Any) -> bool:
    return type(item) is bool


def _is_int(item: Any) -> bool:
    return type(item) is int


def _is_number(item: Any) -> bool:
    return type(item) in (int, float)


def _is_string(item: Any) -> bool:
    return type(item) is str


# Datatype -> (check, what its data must be, the binary's refusal of an
# element of another JSON type; the integer types' are in _json_element).
_JSON_ELEMENT: dict[str, tuple[Callable[[Any], bool], str, str]] = {
    "BOOL": (_is_bool, "booleans", "Unable to parse 'data': attempt to access JSON non-boolean as boolean"),
    "FP16": (_is_number, "numbers", "Unable to parse 'data': attempt to access JSON non-number as double"),
    "FP32": (_is_number, "numbers", "Unable to parse 'data': attempt to access JSON non-number as double"),
    "FP64": (_is_number, "numbers", "Unable to parse 'data': attempt to access JSON non-number as double"),
    "BF16": (_is_number, "numbers", "Unable to parse 'data': attempt to access JSON non-number as double"),
    "BYTES": (_is_string, "strings", "Unable to parse JSON bytes array: attempt to access JSON non-string as string"),
}
_FLOAT_TYPES = frozenset(t for t, (check, _, _) in _JSON_ELEMENT.items() if check is _is_number)


def _json_element(datatype: str) -> tuple[Callable[[Any], bool], str, str]:
    if datatype in _JSON_ELEMENT:
        return _JSON_ELEMENT[datatype]
    kind = "unsigned-integer" if datatype.startswith("U") else "signed-integer"
    return _is_int, "integers", f"Unable to parse 'data': attempt to access JSON non-{kind} as {kind}"


def _from_json(name: str, datatype: str, shape: list[int], count: int, data: Any) -> Any:
    flat = _flatten(data)
    if len(flat) != count:
        raise bad_request(f"input '{name}': {len(flat)} elements of data for shape {shape} ({count} elements)")
    check, kind, refusal = _json_element(datatype)
    for item in flat:
        if not check(item):  # the binary's 500, then the cause
            raise ProtocolError(500, f"{refusal}: input '{name}': {datatype} data must be {kind}, got {item!r}")
    if datatype == "BYTES":
        return _object_array([_utf8(name, item) for item in flat], shape)
    if datatype in _FLOAT_TYPES:
        return _float_array(name, datatype, flat).reshape(shape)
    dtype = DATATYPES[datatype][1]
    if dtype.kind in "iu" and flat:
        info = numpy.iinfo(dtype)
        if min(flat) < info.min or max(flat) > info.max:
            index = next(i for i, item in enumerate(flat) if not info.min <= item <= info.max)
            raise _out_of_range(name, datatype, index, flat[index])
    return numpy.array(flat, dtype=dtype).reshape(shape)


def _utf8(name: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise bad_request(
            f"input '{name}': BYTES string {text!r} is not valid Unicode text ({error.reason} at index "
            f"{error.start}); send arbitrary bytes as binary data (binary_data_size)"
        ) from None


def _float_array(name: str, datatype: str, flat: list[Any]) -> Any:
    """JSON numbers as an FP16, FP32 or FP64 array (BF16: its bit patterns).
    A number beyond the type's range is refused, as an integer beyond an
    integer type's is, rather than sent as infinity (JSON's own Infinity
    passes)."""
    try:
        values = numpy.array(flat, dtype=numpy.float64)
    except OverflowError:  # an integer beyond even float64
        index = next(i for i, item in enumerate(flat) if type(item) is int and abs(item) > _FLOAT64_MAX)
        raise _out_of_range(name, datatype, index, flat[index]) from None
    with numpy.errstate(over="ignore"):
        if datatype == "BF16":
            result = _to_bf16_bits(values.astype(numpy.float32))
            as_float = _from_bf16_bits(result)
        else:
            result = as_float = values.astype(DATATYPES[datatype][1])
    overflow = numpy.isinf(as_float) & numpy.isfinite(values)
    if overflow.any():
        index = int(numpy.argmax(overflow))
        raise _out_of_range(name, datatype, index, flat[index])
    return result


_FLOAT64_MAX = float(numpy.finfo(numpy.float64).max)


def _out_of_range(name: str, datatype: str, index: int, value: Any) -> ProtocolError:
    text = repr(value)
    if len(text) > 24:
        text = f"{text[:12]}... ({len(text)} characters)"
    return bad_request(f"input '{name}': element {index}, {text}, is out of range for {datatype}")


def _flatten(data: Any) -> list[Any]:
    """Row-major elements of (possibly nested) JSON lists."""
    if not isinstance(data, list):
        return [data]
    flat: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat


def _object_array(items: list[bytes], shape: list[int]) -> Any:
    array = numpy.empty(len(items), dtype=object)
    array[:] = items
    return array.reshape(shape)


def _to_bf16_bits(values: Any) -> Any:
    """float32 -> bfloat16 bit patterns, rounding to nearest even."""
    bits = values.view(numpy.uint32).astype(numpy.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(numpy.uint16)


def _from_bf16_bits(bits: Any) -> Any:
    return (bits.astype(numpy.uint32) << 16).view(numpy.float32)


def _as_input(datatype: str, array: Any) -> Any:
    """BF16 bit patterns need a Tensor to say their type; the rest go as is."""
    if datatype != "BF16" or isinstance(array, Tensor):
        return array
    array = numpy.ascontiguousarray(array)
    pointer = array.__array_interface__["data"][0]
    memory = MemoryBuffer(pointer, MemoryType.CPU, 0, array.nbytes, array)
    return Tensor(DataType.BF16, list(array.shape), memory)


def _requested_outputs(value: Any, shared_memory: Optional[Any] = None
                       ) -> tuple[Optional[list[str]], set[str], dict[str, tuple[str, int, int]]]:
    if value is None:
        return None, set(), {}
    if not isinstance(value, list):
        raise bad_request("'outputs' must be a list")
    names: list[str] = []
    binary: set[str] = set()
    shm: dict[str, tuple[str, int, int]] = {}
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise bad_request("each requested output must be a JSON object with a 'name' string")
        name = core_text("output name", entry["name"])
        parameters = _tensor_parameters(entry.get("parameters"), f"output '{name}'", shared_memory)
        location = _shm_location(parameters, f"output '{name}'")
        if location is not None:
            with _shm_view(shared_memory, location, f"output '{name}'"):
                pass  # checked now (region, offset, size), written once the response is there
            shm[name] = location
        if parameters.get("classification"):
            raise bad_request(f"output '{name}': the classification extension is not supported")
        wants_binary = parameters.get("binary_data", False)
        if not isinstance(wants_binary, bool):
            raise bad_request(f"output '{name}': 'binary_data' must be a boolean")
        if wants_binary and location is not None:
            raise bad_request("Output can't set both 'shared_memory_region' and 'binary_data'")  # the binary's words
        if wants_binary:
            binary.add(name)
        names.append(name)
    return names, binary, shm


# -- responses ---------------------------------------------------------------

def encode_response(
    model_name: str,
    model_version: Optional[int],
    request: DecodedRequest,
    outputs: dict[str, Tensor],
    parameters: Optional[dict[str, Any]] = None,
    shared_memory: Optional[Any] = None,
) -> tuple[bytes, Optional[int]]:
    """The response body, and the JSON's length when binary data follows
    (the value of the Inference-Header-Content-Length header). Outputs
    asked into shared memory are written there (through `shared_memory`,
    the request's RegionUses) and carry no data."""
    document: dict[str, Any] = {"model_name": model_name}
    if model_version is not None:
        document["model_version"] = str(model_version)
    if request.request_id:
        document["id"] = request.request_id
    if parameters:
        document["parameters"] = parameters
    entries = []
    chunks: list[bytes] = []
    for name, tensor in outputs.items():
        datatype = _NAMES[DataType(tensor.data_type)]
        entry: dict[str, Any] = {"name": name, "datatype": datatype, "shape": [int(d) for d in tensor.shape]}
        location = request.shm_outputs.get(name)
        if location is not None:
            _write_shm(shared_memory, location, name, _raw_bytes(tensor))
        elif request.wants_binary(name):
            raw = _raw_bytes(tensor)
            entry["parameters"] = {"binary_data_size": len(raw)}
            if raw:  # an empty one adds no data: with only such, the reply is JSON (as the binary's)
                chunks.append(raw)
        else:
            entry["data"] = _json_data(name, datatype, tensor)
        entries.append(entry)
    document["outputs"] = entries
    header = dump_json(document)
    if not chunks:
        return header, None
    return header + b"".join(chunks), len(header)


def _write_shm(shared_memory: Any, location: tuple[str, int, int], name: str, raw: bytes) -> None:
    if len(raw) > location[2]:
        raise InternalError(
            f"shared memory size specified with the request for output '{name}' ({location[2]} bytes) should "
            f"be at least {len(raw)} bytes to hold the results"
        )
    with _shm_view(shared_memory, (location[0], location[1], len(raw)), f"output '{name}'") as view:
        view[:] = raw


def _raw_bytes(tensor: Tensor) -> bytes:
    host = tensor.to_host()
    return ctypes.string_at(host.data_ptr, host.size) if host.size else b""


def _json_data(name: str, datatype: str, tensor: Tensor) -> list[Any]:
    array = output_array(tensor).reshape(-1)
    if datatype == "BYTES":
        try:
            return [item.decode("utf-8") for item in array]
        except UnicodeDecodeError:
            raise bad_request(
                f"output '{name}' holds bytes that are not UTF-8 text; request it with "
                "the 'binary_data' parameter"
            ) from None
    if datatype == "BF16":
        array = _from_bf16_bits(array)
    values: list[Any] = array.tolist()
    return values


def output_array(tensor: Tensor) -> Any:
    """A host output as NumPy: a view of its memory (no copy) for numeric
    types, an object array of ``bytes`` for BYTES, and the raw 16-bit
    patterns (uint16) for BF16, which NumPy cannot represent."""
    if tensor.data_type == DataType.BYTES:
        return tensor.to_bytes_array()
    if tensor.data_type == DataType.BF16:
        return numpy.frombuffer(_raw_bytes(tensor), dtype=numpy.uint16).reshape([int(d) for d in tensor.shape])
    return numpy.from_dlpack(tensor.to_host())


def error_body(message: str) -> bytes:
    """The protocol's error body."""
    return dump_json({"error": message})


def parse_header_length(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise bad_request(f"Inference-Header-Content-Length {value!r} is not an integer") from None



# -- the generate extension ----------------------------------------------------

@dataclass
class GenerateRequest:
    """What a generate body asks for: inputs by name, the other keys as
    request parameters."""

    inputs: dict[str, Any]
    parameters: dict[str, ParameterValue]
    request_id: Optional[str] = None


def decode_generate(model_name: str, body: bytes, metadata: dict[str, Any]) -> GenerateRequest:
    """A generate body: one JSON object whose keys are the model's inputs
    (a value or a list of values, shaped to the input's shape, its one
    variable dimension taking the count, as Triton's binary does), "id",
    and request parameters (strings, numbers, booleans), given as keys of
    their own or as the members of a "parameters" object (as the binary
    takes them)."""
    try:
        document = load_json(body) if body else _json_object([])
    except (ValueError, UnicodeDecodeError) as error:
        raise bad_request(f"the generate request body is not valid JSON: {error}") from None
    except RecursionError:
        raise bad_request("the generate request body nests too deeply") from None
    if not isinstance(document, JsonObject):
        raise bad_request("the generate request body must be a JSON object (input names and parameters as keys)")
    specs = {spec["name"]: spec for spec in metadata.get("inputs", [])}
    request_id = document.get("id")
    if request_id is not None:
        if not isinstance(request_id, str):
            raise ProtocolError(500, "Unable to parse 'id': attempt to access JSON non-string as string")
        core_text("'id'", request_id)
    inputs: dict[str, Any] = {}
    parameters: dict[str, ParameterValue] = {}
    # In order, as the binary converts them: an input given twice is refused
    # there, another key given twice keeps its first value.
    seen: set[str] = set()
    for key, value in document.pairs:
        spec = specs.get(key)
        if spec is None:
            if key not in seen and key != "id":
                parameters.update(_generate_parameters(model_name, specs, key, value))
            seen.add(key)
            continue
        if key in inputs:
            raise _already_exists(request_id, key)
        datatype = spec["datatype"]
        flat = _flatten(value)  # an element that is no value is refused by its type (the binary's 500)
        shape = _generate_shape(key, [int(d) for d in spec["shape"]], len(flat))
        array = _from_json(key, datatype, shape, len(flat), flat)
        inputs[key] = _as_input(datatype, array)
    return GenerateRequest(inputs, parameters, request_id)


def _generate_parameters(model_name: str, specs: dict[str, Any], key: str, value: Any) -> dict[str, ParameterValue]:
    """The request parameters a generate key that is no input gives: itself,
    or the members of "parameters" (refused as the binary refuses them)."""
    if key != "parameters":
        if type(value) not in (str, int, float, bool):
            raise bad_request(f"{_invalid_parameter(key)} ('{key}' is no input of model '{model_name}', whose inputs "
                              f"are {', '.join(specs) or 'none'})")
        return {key: _generate_parameter(key, value)}
    if not isinstance(value, dict):
        raise ProtocolError(500, "Expected JSON object for keyword: 'parameters': attempt to access JSON non-object "
                                 f"as object: give the request parameters of model '{model_name}' as one JSON object "
                                 "(or each as a key of its own)")
    for name, item in value.items():
        if type(item) not in (str, int, float, bool):
            raise bad_request(f"Converting keyword: 'parameters': {_invalid_parameter(name)}")
    return {name: _generate_parameter(name, item) for name, item in value.items()}


def _generate_parameter(key: str, value: ParameterValue) -> ParameterValue:
    """A generate request parameter (a string, number or boolean), checked
    for the core: its name and a string value as C strings, an integer as
    64 bits."""
    core_text("parameter name", key)
    if isinstance(value, str):
        core_text(f"parameter '{key}'", value)
    if type(value) is int and not -(2**63) <= value < 2**63:
        raise bad_request(f"parameter '{key}': {value} does not fit a 64-bit integer")
    return value


def _generate_shape(name: str, shape: list[int], count: int) -> list[int]:
    """The input's shape with its variable (-1) dimensions filled: the
    fixed ones divide `count`, the innermost variable one takes the rest,
    the others are 1 (Triton's rule)."""
    left = count
    for dim in shape:
        if dim != -1:
            if dim == 0 or left % dim:
                raise bad_request(f"The schema can not convert input '{name}' to tensor with proper shape "
                                  f"({count} values for shape {shape})")
            left //= dim
    filled = list(shape)
    for index in range(len(filled) - 1, -1, -1):
        if filled[index] == -1:
            filled[index], left = left, 1
    if left != 1:
        raise bad_request(f"The schema can not convert input '{name}' to tensor with proper shape "
                          f"({count} values for shape {shape})")
    return filled


def encode_generate(model_name: str, model_version: Optional[int], request_id: Optional[str],
                    outputs: dict[str, Tensor], parameters: dict[str, Any]) -> dict[str, Any]:
    """One generate response: each output by name (a value when it holds
    one element, else a flat list), the response parameters, model_name,
    model_version and id."""
    document: dict[str, Any] = {}
    for name, value in parameters.items():
        if isinstance(value, bytes):
            raise UnsupportedError(f"Response parameter '{name}' has type 'TRITONSERVER_PARAMETER_BYTES' which is "
                                   "not currently supported")
        document[name] = value
    for name, tensor in outputs.items():
        values = _json_data(name, _NAMES[DataType(tensor.data_type)], tensor)
        document[name] = values[0] if len(values) == 1 else values
    if request_id:
        document["id"] = request_id
    document["model_name"] = model_name
    if model_version is not None:
        document["model_version"] = str(model_version)
    return document
