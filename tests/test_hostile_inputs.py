"""Hostile inputs: a catalogue of bad, odd or lying requests, each checked
for the outcome the library chose (accepted as is, accepted with one copy,
or refused with a clear exception class), and each followed by a good
request on the same model, which must still succeed.

The catalogue, with the messages, is docs/hostile_inputs.md."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import textwrap
import traceback

import numpy
import pytest

import tritonserver
from tritonserver import (
    DataType,
    InternalError,
    InvalidArgumentError,
    MemoryBuffer,
    MemoryType,
    NotFoundError,
    Tensor,
    TritonError,
    UnsupportedError,
)
from common import DLPackOnly, refused, run_script
from common import (
    address,
    as_numpy,
    call_with_deadline,
    MODELS,
    dedicated_server,
    has_gpu,
    identity,
    make_options,
    single,
)

HANG_S = 60  # generous: only there so a bug cannot hang the suite


def answer(request_fn):
    """The one response of request_fn() (deadline HANG_S); an unexpected
    exception is re-raised with the locals of its finished frames cleared
    (the reason is in `refused`)."""
    try:
        return call_with_deadline(lambda: single(request_fn()), HANG_S)
    except BaseException as e:
        traceback.clear_frames(e.__traceback__)
        raise


# -- the good request that must succeed after every bad one ---------------------------
def _good_inputs(name: str) -> dict:
    if name == "identity_fp32":
        return {"INPUT0": numpy.array([4.0, -1.0, 0.5], numpy.float32)}
    if name == "identity_bytes":
        return {"INPUT0": numpy.array([b"ok", b"", b"\xff\x00"], dtype=object)}
    if name == "identity_multi":
        return {"INPUT0": numpy.arange(6, dtype=numpy.int8).reshape(2, 3),
                "INPUT1": numpy.full((1, 2, 2), 1.5, numpy.float16),
                "INPUT2": numpy.array([2**64 - 1], numpy.uint64)}
    if name == "echo_all_types":
        return {"IN_STRING": numpy.array([b"still", b"serving"], dtype=object),
                "IN_INT32": numpy.array([7, -7], numpy.int32)}
    raise AssertionError(f"no good request for {name}")


def assert_serves(model: tritonserver.Model) -> None:
    """A well-formed request on `model` succeeds with the right outputs."""
    inputs = _good_inputs(model.name)
    response = answer(lambda: model.infer(inputs=inputs))
    assert response.error is None
    for name, sent in inputs.items():
        out_name = name.replace("INPUT", "OUTPUT") if name.startswith("INPUT") else "OUT_" + name[3:]
        tensor = response.outputs[out_name]
        got = tensor.to_bytes_array() if sent.dtype == object else as_numpy(tensor)
        assert got.shape == sent.shape
        assert got.tolist() == sent.tolist()


# -- which model, which version ------------------------------------------------------
def test_unknown_model_is_not_found(server, model):
    with refused(NotFoundError, match="unknown model: 'no_such_model'"):
        server.model("no_such_model").infer(inputs={"INPUT0": numpy.ones(3, numpy.float32)})
    assert_serves(model("identity_fp32"))


def test_unknown_version_is_not_found(server, model):
    m = model("identity_fp32")
    with refused(NotFoundError, match="version 7 is not found"):
        server.model("identity_fp32", 7).infer(inputs={"INPUT0": numpy.ones(3, numpy.float32)})
    assert_serves(m)
    assert_serves(server.model("identity_fp32", 1))  # the version that exists


# -- which inputs ----------------------------------------------------------------------
def test_missing_input(model):
    m = model("identity_fp32")
    with refused(InvalidArgumentError, match=r"missing required input\(s\) \['INPUT0'\]"):
        m.infer(inputs={})
    assert_serves(m)
    multi = model("identity_multi")
    partial = _good_inputs("identity_multi")
    del partial["INPUT1"]
    with refused(InvalidArgumentError, match="INPUT1"):
        multi.infer(inputs=partial)
    assert_serves(multi)


def test_extra_unknown_input(model):
    m = model("identity_fp32")
    inputs = {"INPUT0": numpy.ones(3, numpy.float32), "EXTRA": numpy.ones(3, numpy.float32)}
    with refused(InvalidArgumentError, match="expected 1 inputs but got 2 inputs"):
        m.infer(inputs=inputs)
    assert_serves(m)
    with refused(InvalidArgumentError, match="unexpected inference input ''"):
        m.infer(inputs={"": numpy.ones(3, numpy.float32)})
    assert_serves(m)


def test_input_name_that_is_not_a_string(model):
    m = model("identity_fp32")
    with refused(TypeError, match="input name must be a str, not int"):
        m.infer(inputs={0: numpy.ones(3, numpy.float32)})
    assert_serves(m)


NUL_CASES = {
    "input_name": (lambda m: {"inputs": {"INPUT0\x00ignored": numpy.ones(3, numpy.float32)}}, "input name"),
    "output_name": (lambda m: {"output_names": ["OUTPUT0\x00ignored"]}, "output name"),
    "request_id": (lambda m: {"request_id": "id\x00ignored"}, "InferenceRequest.request_id"),
    "correlation_id": (lambda m: {"correlation_id": "c\x00ignored"}, "InferenceRequest.correlation_id"),
    "parameter_name": (lambda m: {"parameters": {"key\x00ignored": 1}}, "parameter name"),
    "parameter_value": (lambda m: {"parameters": {"key": "value\x00ignored"}}, "parameter 'key'"),
}


@pytest.mark.parametrize("where", [*NUL_CASES, "model_name"])
def test_names_with_an_embedded_nul_are_refused(server, model, where):
    # Python refuses embedded NULs where a C string is made (open(),
    # os.environ, ...): ValueError. They must never be silently cut at the
    # NUL, which would name a different input, output or model.
    m = model("identity_fp32")
    data = numpy.ones(3, numpy.float32)
    if where == "model_name":
        with refused(ValueError, match="embedded null character in model name"):
            single(server.model("identity_fp32\x00ignored").infer(inputs={"INPUT0": data}))
    else:
        make, field = NUL_CASES[where]
        kwargs = {"inputs": {"INPUT0": data}, **make(m)}
        with refused(ValueError, match=f"embedded null character in {re.escape(field)}"):
            single(m.infer(**kwargs))
    assert_serves(m)


SURROGATE_CASES = {
    "parameter_name": ({"parameters": {"key\udc80": 1}}, r"parameter name 'key\\udc80'"),
    "parameter_value": ({"parameters": {"key": "value\udc80"}}, r"parameter 'key' 'value\\udc80'"),
    "input_name": ({"inputs": {"INPUT0\udc80": numpy.ones(3, numpy.float32)}}, r"input name 'INPUT0\\udc80'"),
    "output_name": ({"output_names": ["OUTPUT0\ud800"]}, r"output name 'OUTPUT0\\ud800'"),
    "request_id": ({"request_id": "id\udc80"}, r"request_id 'id\\udc80'"),
}


@pytest.mark.parametrize("where", SURROGATE_CASES)
def test_text_with_a_lone_surrogate_is_refused_naming_the_field(model, where):
    # A lone surrogate has no UTF-8 form: the binding's conversion failed
    # with a signature dump naming another setter. Now ValueError naming the
    # field.
    m = model("identity_fp32")
    given, field = SURROGATE_CASES[where]
    kwargs = {"inputs": {"INPUT0": numpy.ones(3, numpy.float32)}, **given}
    with refused(ValueError, match=field + r" is not valid Unicode text \(surrogates not allowed at index \d+\)"):
        single(m.infer(**kwargs))
    assert_serves(m)


SERVER_NUL_CASES = {
    "load_model_name": (lambda s: s.load("identity_fp32\x00-other"), r"load\(\): model_name"),
    "load_parameter_name": (lambda s: s.load("identity_fp32", {"config\x00x": "{}"}),
                            r"load\(\): parameter name"),
    "load_parameter_value": (lambda s: s.load("identity_fp32", {"config": '{"max_batch_size": 0}\x00x'}),
                             r"load\(\): parameter 'config'"),
    "unload": (lambda s: s.unload("identity_fp32\x00-other"), r"unload\(\): model name"),
    "register_path": (lambda s: s.register_model_repository(str(MODELS) + "\x00x"),
                      r"register_model_repository\(\): repository_path"),
    "register_mapping_key": (lambda s: s.register_model_repository(str(MODELS), {"identity_fp32\x00": "x"}),
                             r"register_model_repository\(\): name_mapping key"),
    "register_mapping_value": (lambda s: s.register_model_repository(str(MODELS), {"identity_fp32": "x\x00y"}),
                               r"register_model_repository\(\): name_mapping\['identity_fp32'\]"),
    "unregister_path": (lambda s: s.unregister_model_repository(str(MODELS) + "\x00x"),
                        r"unregister_model_repository\(\): repository_path"),
    "model_handle": (lambda s: s.model("identity_fp32\x00-other").ready(), r"model name"),
    "metric_family_name": (lambda s: tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, "nul\x00x", "d"),
                           r"MetricFamily name"),
    "metric_family_description": (
        lambda s: tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, "nul_description", "d\x00x"),
        r"MetricFamily description"),
    "metric_label": (lambda s: tritonserver.Metric(
        tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, "nul_label", "d"), {"k": "v\x00x"}),
        r"Metric label 'k'"),
}


def test_server_names_with_an_embedded_nul_are_refused(backend_directory):
    # Every string the package hands the core is a C string: one with a NUL
    # would be read cut at the NUL (unload("identity_fp32\x00-other") used to
    # unload identity_fp32). Each is refused with ValueError naming the
    # argument, and the model named by the cut string is left alone.
    with dedicated_server(backend_directory, "hostile-nul-names", ["identity_fp32"]) as srv:
        for case, (call, field) in SERVER_NUL_CASES.items():
            with refused(ValueError, match=f"embedded null character in {field}"):
                call(srv)
            assert srv.model("identity_fp32").ready(), case
        assert_serves(srv.model("identity_fp32"))
        assert ("x", -1) not in srv.models()


def test_options_with_an_embedded_nul_are_refused(backend_directory):
    srv = tritonserver.Server(make_options(backend_directory, server_id="nul\x00x"))
    with refused(ValueError, match=r"embedded null character in Options.server_id"):
        srv.start()
    srv = tritonserver.Server(make_options(backend_directory, server_id="options-nul",
                                           backend_configuration={"identity": {"k": "v\x00x"}}))
    with refused(ValueError, match=r"embedded null character in Options.backend_configuration"):
        srv.start()


# -- element type and shape ------------------------------------------------------------
@pytest.mark.parametrize(
    "model_name, value, message",
    [
        ("identity_fp32", numpy.ones(3, numpy.float64), "data-type is 'FP64', but model 'identity_fp32' expects 'FP32'"),
        ("identity_fp32", [1, 2], "data-type is 'INT64'"),  # a list of ints is INT64, never cast
        ("identity_bytes", numpy.ones(2, numpy.float32), "data-type is 'FP32', but model 'identity_bytes' expects 'BYTES'"),
        ("identity_bytes", [1, 2], "data-type is 'INT64'"),
    ],
    ids=["fp64_for_fp32", "int_list_for_fp32", "fp32_for_bytes", "int_list_for_bytes"],
)
def test_wrong_dtype(model, model_name, value, message):
    m = model(model_name)
    with refused(InvalidArgumentError, match=message):
        m.infer(inputs={"INPUT0": value})
    assert_serves(m)


@pytest.mark.parametrize(
    "value, got",
    [(numpy.ones((3, 1), numpy.float32), "[3,1]"), (numpy.float32(1.0), "[]"),
     (numpy.ones((1, 1, 1), numpy.float32), "[1,1,1]")],
    ids=["rank2", "scalar", "rank3"],
)
def test_wrong_rank(model, value, got):
    m = model("identity_fp32")
    with refused(InvalidArgumentError, match=r"unexpected shape for input 'INPUT0'.*Expected \[-1\], got " + re.escape(got)):
        m.infer(inputs={"INPUT0": value})
    assert_serves(m)


@pytest.mark.parametrize("declared, expected", [([100], 400), ([2], 8), ([2, 2], None)], ids=["larger", "smaller", "rank"])
def test_tensor_shape_disagreeing_with_its_byte_size(model, declared, expected):
    # Tensor(FP32, [100]) over a 16-byte buffer: Triton compares the byte
    # size with prod(shape) * 4 before anything reads the buffer.
    m = model("identity_fp32")
    tensor = Tensor(DataType.FP32, declared, MemoryBuffer.from_dlpack(numpy.ones(4, numpy.float32)))
    match = f"input byte size mismatch.*Expected {expected}, got 16" if expected else "unexpected shape"
    with refused(InvalidArgumentError, match=match):
        m.infer(inputs={"INPUT0": tensor})
    assert_serves(m)


def test_tensor_claiming_2gib_over_a_16_byte_buffer(model):
    # The declared shape says 2 GiB + 8 bytes; the buffer (from DLPack, so
    # its size is right) has 16: refused at infer(), nothing is read.
    m = model("identity_fp32")
    elements = 2**29 + 2
    tensor = Tensor(DataType.FP32, [elements], MemoryBuffer.from_dlpack(numpy.ones(4, numpy.float32)))
    with refused(InvalidArgumentError, match=f"Expected {elements * 4}, got 16"):
        m.infer(inputs={"INPUT0": tensor})
    assert_serves(m)


def test_memory_buffer_overstating_its_owner_is_refused(backend_directory, tmp_path):
    # A MemoryBuffer whose size (2 GiB + 8) exceeds what its owner, a
    # 16-byte NumPy array, holds; shape and size agree, so Triton would read
    # 2 GiB from a 16-byte allocation. The library knows the owner's extent
    # and refuses before Triton reads. In a subprocess: before that check,
    # this read out of bounds and killed the process (SIGSEGV).
    code = f"""
        import numpy, tritonserver
        from common import make_options
        from tritonserver import DataType, MemoryBuffer, MemoryType, Tensor
        server = tritonserver.Server(make_options({backend_directory!r}, server_id="hostile-overstate",
                                                  log_error=False, exit_timeout=5))
        server.start(wait_until_ready=True, timeout=60)
        m = server.load("identity_fp32")
        owner = numpy.ones(4, numpy.float32)
        elements = 2**29 + 2
        buffer = MemoryBuffer(owner.ctypes.data, MemoryType.CPU, 0, elements * 4, owner)
        try:
            list(m.infer(inputs={{"INPUT0": Tensor(DataType.FP32, [elements], buffer)}}))
            print("OUTCOME accepted")
        except tritonserver.InvalidArgumentError as e:
            print("OUTCOME InvalidArgumentError", e)
            del e
        good = list(m.infer(inputs={{"INPUT0": numpy.arange(3, dtype=numpy.float32)}}))
        print("GOOD", numpy.from_dlpack(good[0].outputs["OUTPUT0"]).tolist())
        server.stop()
    """
    rc, out, err = run_script(code, tmp_path, timeout=120)
    assert rc == 0, f"process died (rc {rc}): {err[-1500:]}"
    assert "OUTCOME InvalidArgumentError" in out, out
    assert "lies outside the memory of its owner" in out, out
    assert "GOOD [0.0, 1.0, 2.0]" in out, out


@pytest.mark.parametrize(
    "make",
    [pytest.param(lambda: (numpy.arange(5) * 1.5).astype(">f4"), id="contiguous"),
     pytest.param(lambda: (numpy.arange(10) - 3).astype(">f4")[::-2], id="reversed")],
)
def test_non_native_byte_order_is_accepted_with_one_copy(model, make):
    # A big-endian array is converted to native order (one copy); its bytes
    # are never handed to Triton as if they were little-endian.
    m = model("identity_fp32")
    data = make()
    assert data.dtype.byteorder == ">"
    tensor = Tensor._from_object(data)
    copy = tensor.memory_buffer.owner
    assert copy.dtype.isnative and copy.flags.c_contiguous and tensor.data_ptr != address(data)
    numpy.testing.assert_array_equal(identity(m, data), data.astype(numpy.float32))
    # Through DLPack, NumPy itself refuses to export non-native byte order.
    with refused(InvalidArgumentError, match="DLPack"):
        Tensor.from_dlpack(data)
    assert_serves(m)


# -- memory layouts ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: numpy.arange(40, dtype=numpy.float32)[3::4], id="step4"),
        pytest.param(lambda: numpy.arange(40, dtype=numpy.float32)[::-1], id="negative_stride"),
        pytest.param(lambda: numpy.arange(40, dtype=numpy.float32)[-3::-7], id="negative_step7"),
        pytest.param(lambda: numpy.arange(40, dtype=numpy.float32).reshape(8, 5)[:, 2], id="column"),
        pytest.param(lambda: numpy.broadcast_to(numpy.float32(2.5), (6,)), id="stride0"),
    ],
)
def test_non_contiguous_is_accepted_with_one_copy(model, make):
    m = model("identity_fp32")
    view = make()
    before = view.copy()
    assert not view.flags.c_contiguous
    tensor = Tensor._from_object(view)
    copy = tensor.memory_buffer.owner
    assert copy is not view and copy.flags.c_contiguous and tensor.data_ptr == address(copy)
    assert tensor.data_ptr != address(view) and tensor.size == view.nbytes
    numpy.testing.assert_array_equal(identity(m, view), before)
    numpy.testing.assert_array_equal(view, before)  # the source is never written
    assert_serves(m)


def test_negative_stride_dlpack_object_is_accepted_with_one_copy(model):
    m = model("identity_fp32")
    view = numpy.arange(30, dtype=numpy.float32)[::-3]
    tensor = Tensor._from_object(DLPackOnly(view))
    assert tensor.data_ptr != address(view) and tensor.size == view.nbytes
    numpy.testing.assert_array_equal(identity(m, DLPackOnly(view)), view)
    # MemoryBuffer.from_dlpack never copies: it refuses instead.
    with refused(InvalidArgumentError, match="contiguous"):
        MemoryBuffer.from_dlpack(view)
    assert_serves(m)


def test_fortran_order_is_accepted_with_one_copy(model):
    m = model("identity_multi")
    int8 = numpy.asfortranarray(numpy.arange(-6, 6, dtype=numpy.int8).reshape(3, 4))
    fp16 = numpy.asfortranarray(numpy.linspace(-1, 1, 24).astype(numpy.float16).reshape(2, 3, 4))
    assert not int8.flags.c_contiguous and not fp16.flags.c_contiguous
    for array in (int8, fp16):
        tensor = Tensor._from_object(array)
        assert tensor.data_ptr != address(array) and tensor.memory_buffer.owner.flags.c_contiguous
    inputs = {"INPUT0": int8, "INPUT1": fp16, "INPUT2": numpy.arange(3, dtype=numpy.uint64)}
    response = answer(lambda: m.infer(inputs=inputs))
    for k in range(3):
        out = as_numpy(response.outputs[f"OUTPUT{k}"])
        assert out.shape == inputs[f"INPUT{k}"].shape
        numpy.testing.assert_array_equal(out, inputs[f"INPUT{k}"])
    assert_serves(m)


def test_read_only_is_accepted_as_is(model):
    m = model("identity_fp32")
    frozen = numpy.frombuffer(numpy.arange(6, dtype=numpy.float32).tobytes(), dtype=numpy.float32)
    assert not frozen.flags.writeable
    tensor = Tensor._from_object(frozen)
    assert tensor.data_ptr == address(frozen) and tensor.memory_buffer.owner is frozen
    numpy.testing.assert_array_equal(identity(m, frozen), numpy.arange(6, dtype=numpy.float32))
    locked = numpy.arange(8, dtype=numpy.float32)
    locked.flags.writeable = False
    numpy.testing.assert_array_equal(identity(m, locked), numpy.arange(8, dtype=numpy.float32))
    assert_serves(m)


def test_zero_size_is_accepted(model):
    m = model("identity_fp32")
    for value in (numpy.ones(0, numpy.float32), Tensor.from_dlpack(numpy.ones(0, numpy.float32))):
        out = identity(m, value)
        assert out.shape == (0,) and out.dtype == numpy.float32
    assert_serves(m)
    multi = model("identity_multi")
    inputs = {"INPUT0": numpy.ones((0, 3), numpy.int8), "INPUT1": numpy.ones((2, 0, 1), numpy.float16),
              "INPUT2": numpy.ones(0, numpy.uint64)}
    response = answer(lambda: multi.infer(inputs=inputs))
    assert [as_numpy(response.outputs[f"OUTPUT{k}"]).shape for k in range(3)] == [(0, 3), (2, 0, 1), (0,)]
    assert_serves(multi)
    b = model("identity_bytes")
    out = answer(lambda: b.infer(inputs={"INPUT0": numpy.array([], dtype=object)}))
    assert out.outputs["OUTPUT0"].to_bytes_array().shape == (0,)
    assert_serves(b)


# -- BYTES -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "items",
    [[1, 22, -333], [1.5, None, True], ["é", b"\xff", 0]],
    ids=["ints", "float_none_bool", "mixed"],
)
def test_bytes_object_array_of_non_bytes_items(model, items):
    # As in the official binding, each item that is not bytes/str is sent as
    # str(item) in UTF-8 (str items are UTF-8 encoded, bytes pass as they are).
    b = model("identity_bytes")
    array = numpy.empty(len(items), dtype=object)
    array[:] = items
    expected = [i if isinstance(i, bytes) else str(i).encode("utf-8") for i in items]
    response = answer(lambda: b.infer(inputs={"INPUT0": array}))
    assert response.outputs["OUTPUT0"].to_bytes_array().tolist() == expected
    assert_serves(b)


def test_bytes_bytearray_items_pass_as_bytes(model):
    b = model("identity_bytes")
    array = numpy.empty(2, dtype=object)
    array[:] = [bytearray(b"ab\x00c"), bytearray()]
    response = answer(lambda: b.infer(inputs={"INPUT0": array}))
    assert response.outputs["OUTPUT0"].to_bytes_array().tolist() == [b"ab\x00c", b""]
    assert_serves(b)


def test_bytes_unencodable_str_is_a_unicode_error(model):
    b = model("identity_bytes")
    with refused(UnicodeEncodeError):  # a ValueError, as str.encode raises
        b.infer(inputs={"INPUT0": numpy.array(["ok", "\ud800"], dtype=object)})
    assert_serves(b)


def _raw_bytes_tensor(raw: bytes, shape: list) -> Tensor:
    return Tensor(DataType.BYTES, shape, MemoryBuffer.from_dlpack(numpy.frombuffer(raw, numpy.uint8)))


TWO_ELEMENTS = struct.pack("<I", 1) + b"a" + struct.pack("<I", 2) + b"bc"


@pytest.mark.parametrize(
    "raw, shape, message",
    [
        (TWO_ELEMENTS, [3], "expected 3 string elements for inference input 'INPUT0'.*got 2"),
        (TWO_ELEMENTS, [1], "unexpected number of string elements 2 for inference input 'INPUT0'"),
        (b"\x01\x00", [1], "incomplete string length indicator"),
        (struct.pack("<I", 1) + b"a" + b"zz", [1], "incomplete string length indicator"),
    ],
    ids=["count_larger", "count_smaller", "truncated_prefix", "trailing_garbage"],
)
def test_malformed_bytes_tensor_is_refused_by_triton(model, raw, shape, message):
    b = model("identity_bytes")
    with refused(InvalidArgumentError, match=message):
        b.infer(inputs={"INPUT0": _raw_bytes_tensor(raw, shape)})
    assert_serves(b)


def test_bytes_length_prefix_beyond_the_buffer(model):
    # One element whose 4-byte length says 2 GiB over a 6-byte buffer. The
    # Triton core lets it through (it checks element counts, not lengths);
    # the identity backend copies the 6 bytes as they are, and decoding the
    # output refuses them. The python backend refuses the input itself.
    raw = struct.pack("<I", 2**31) + b"xy"
    b = model("identity_bytes")
    response = answer(lambda: b.infer(inputs={"INPUT0": _raw_bytes_tensor(raw, [1])}))
    out = response.outputs["OUTPUT0"]
    assert out.size == len(raw)
    with refused(InvalidArgumentError, match="malformed BYTES tensor: truncated element"):
        out.to_bytes_array()
    assert_serves(b)
    echo = model("echo_all_types")
    with refused(InvalidArgumentError, match="incomplete string data"):
        call_with_deadline(lambda: list(echo.infer(inputs={"IN_STRING": _raw_bytes_tensor(raw, [1])})), HANG_S)
    assert_serves(echo)


# -- unconvertible values ---------------------------------------------------------------
@pytest.mark.parametrize(
    "value, message",
    [(None, "Input type NoneType not supported"), (memoryview(b"abcd"), "Input type memoryview not supported"),
     ([[1.0], [1.0, 2.0]], "Conversion from"), (numpy.ones(2, numpy.complex64), "Can't convert complex64")],
    ids=["none", "memoryview", "ragged", "complex"],
)
def test_unconvertible_values(model, value, message):
    m = model("identity_fp32")
    with refused(InvalidArgumentError, match=message):
        m.infer(inputs={"INPUT0": value})
    assert_serves(m)


# -- request fields and parameters ---------------------------------------------------------
@pytest.mark.parametrize(
    "fields, error",
    [({"request_id": 5}, TypeError), ({"flags": True}, TypeError), ({"priority": -1}, InvalidArgumentError),
     ({"correlation_id": -2}, InvalidArgumentError), ({"timeout": 1.5}, TypeError)],
    ids=["request_id_int", "flags_bool", "priority_negative", "correlation_negative", "timeout_float"],
)
def test_bad_request_fields(model, fields, error):
    m = model("identity_fp32")
    with refused(error, match=next(iter(fields))):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, **fields)
    assert_serves(m)


@pytest.mark.parametrize(
    "value",
    [None, {"nested": 1}, [1], b"raw", numpy.float32(1.0), 1 + 2j],
    ids=lambda v: type(v).__name__,
)
def test_unsupported_parameter_types(model, value):
    m = model("identity_fp32")
    with refused(InvalidArgumentError, match="parameter 'bad_key'"):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, parameters={"ok": 1, "bad_key": value})
    assert_serves(m)


@pytest.mark.parametrize(
    "kwargs",
    [{"parameters": {"too_big": 2**63}}, {"parameters": {"too_small": -(2**63) - 1}},
     {"timeout": 2**64}, {"priority": 2**64}, {"correlation_id": 2**64}, {"flags": 2**32}],
    ids=["int_param_2^63", "int_param_-2^63-1", "timeout_2^64", "priority_2^64", "correlation_2^64", "flags_2^32"],
)
def test_out_of_range_integers(model, kwargs):
    # Checked against the C width of each field, and refused naming it.
    m = model("identity_fp32")
    field = next(iter(kwargs["parameters"])) if "parameters" in kwargs else next(iter(kwargs))
    with refused(InvalidArgumentError, match=f"{field}.*does not fit in"):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, **kwargs)
    assert_serves(m)


# -- outputs -------------------------------------------------------------------------------
def test_unknown_output_name(model):
    m = model("identity_fp32")
    with refused(InvalidArgumentError, match="unexpected inference output 'NOPE' for model 'identity_fp32'"):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, output_names=["NOPE"])
    assert_serves(m)
    with refused(TypeError, match="output name must be a str, not int"):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, output_names=[0])
    assert_serves(m)


def test_duplicate_output_name_gives_one_output(model):
    m = model("identity_fp32")
    data = numpy.arange(3, dtype=numpy.float32)
    response = single(m.infer(inputs={"INPUT0": data}, output_names=["OUTPUT0", "OUTPUT0"]))
    assert list(response.outputs) == ["OUTPUT0"]
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), data)
    assert_serves(m)


@pytest.mark.parametrize("memory", ["gpu", "gpu:0", (MemoryType.GPU, 0)], ids=str)
def test_gpu_output_without_a_gpu(model, memory):
    if has_gpu():
        pytest.skip("a GPU is present: GPU outputs are valid here")
    m = model("identity_fp32")
    with refused(UnsupportedError, match="CUDA is not available"):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, output_memory_type=memory)
    assert_serves(m)


@pytest.mark.parametrize("memory", ["tpu", "gpu:x", "gpu:-1", "cpu:0:1", 3.5], ids=str)
def test_bad_output_memory_type(model, memory):
    m = model("identity_fp32")
    with refused(InvalidArgumentError, match="memory type|Memory Type"):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)}, output_memory_type=memory)
    assert_serves(m)


# -- a python model whose stub process dies -----------------------------------------------
@pytest.fixture(scope="module")
def crash_server(backend_directory):
    """A dedicated server with identity_fp32 and two python models whose
    stub process dies in execute(): os._exit(1), and SIGKILL."""
    srv = tritonserver.Server(make_options(backend_directory, server_id="hostile-crash", exit_timeout=2,
                                           log_error=False, python_models="stub"))
    srv.start(wait_until_ready=True, timeout=60)
    srv.load("identity_fp32")
    for name, death in [("crash_exit", "os._exit(1)"), ("crash_kill", "os.kill(os.getpid(), signal.SIGKILL)")]:
        config = {
            "name": name, "backend": "python", "max_batch_size": 0,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
            "instance_group": [{"kind": "KIND_CPU", "count": 1}],
        }
        source = textwrap.dedent(f"""
            import os
            import signal

            class TritonPythonModel:
                def execute(self, requests):
                    {death}
        """).encode()
        srv.load(name, {"config": json.dumps(config), "file:1/model.py": source})
    yield srv
    # The python backend cannot unload a model whose stub died: stop() waits
    # the exit timeout, then reports it (InternalError).
    try:
        call_with_deadline(srv.stop, 2 + 30)
    except TritonError:
        pass


@pytest.mark.parametrize("name", ["crash_exit", "crash_kill"])
@pytest.mark.python_stub
def test_python_stub_crash_ends_the_request_with_a_triton_error(crash_server, name):
    data = numpy.ones(2, numpy.float32)
    for attempt in range(2):  # the first request kills the stub; the second finds it dead
        with refused(InternalError, match="Stub process .* is not healthy"):
            call_with_deadline(lambda: list(crash_server.model(name).infer(inputs={"INPUT0": data})), HANG_S)
        assert_serves(crash_server.model("identity_fp32"))

    async def async_attempt():
        iterator = crash_server.model(name).async_infer(inputs={"INPUT0": data}, raise_on_error=False)
        return [r async for r in iterator]

    responses = asyncio.run(asyncio.wait_for(async_attempt(), HANG_S))
    assert len(responses) == 1 and responses[0].final
    assert isinstance(responses[0].error, InternalError)
    assert_serves(crash_server.model("identity_fp32"))


# -- a stopped server ----------------------------------------------------------------------
def test_request_on_a_stopped_server(backend_directory):
    srv = tritonserver.Server(make_options(backend_directory, server_id="hostile-stopped", log_error=False))
    srv.start(wait_until_ready=True, timeout=60)
    try:
        m = srv.load("identity_fp32")
        prepared = m.create_request(inputs={"INPUT0": numpy.ones(2, numpy.float32)})
        assert_serves(m)
    finally:
        call_with_deadline(srv.stop, 10 + 30)
    with refused(InvalidArgumentError, match="Server not started"):
        m.infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)})
    with refused(InvalidArgumentError, match="Server not started"):
        m.infer(prepared)
    with refused(InvalidArgumentError, match="Server not started"):
        srv.model("identity_fp32")
    with refused(InvalidArgumentError, match="Server not started"):
        m.ready()

    async def async_attempt():
        return m.async_infer(inputs={"INPUT0": numpy.ones(2, numpy.float32)})

    with refused(InvalidArgumentError, match="Server not started"):
        asyncio.run(async_attempt())
    # The same Server object and Model handle work again after a restart.
    srv.start(wait_until_ready=True, timeout=60)
    try:
        srv.load("identity_fp32")
        assert_serves(m)
        response = answer(lambda: m.infer(prepared))
        assert as_numpy(response.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]
    finally:
        call_with_deadline(srv.stop, 10 + 30)


@pytest.fixture
def stream_server(backend_directory):
    with dedicated_server(backend_directory, "hostile-iterators", ["identity_fp32", "streaming"]) as srv:
        yield srv


@pytest.mark.python_backend
def test_iterators_used_after_their_server_stopped(stream_server):
    srv = stream_server
    count = 20
    live = srv.model("streaming").infer(
        inputs={"COUNT": numpy.array([count], numpy.int32), "DELAY_MS": numpy.array([20], numpy.int32)})
    first = call_with_deadline(lambda: next(live), HANG_S)
    done = srv.model("identity_fp32").infer(inputs={"INPUT0": numpy.arange(3, dtype=numpy.float32)})
    kept = answer(lambda: done)
    pending = srv.model("identity_fp32").infer(inputs={"INPUT0": numpy.arange(4, dtype=numpy.float32)})

    async def start_async():
        return srv.model("identity_fp32").async_infer(inputs={"INPUT0": numpy.arange(5, dtype=numpy.float32)})

    loop = asyncio.new_event_loop()
    try:
        async_iterator = loop.run_until_complete(start_async())
        call_with_deadline(srv.stop, 10 + 30)  # waits for the live stream (well within exit_timeout)

        # The stream in flight at stop() is delivered in full, after stop().
        rest = call_with_deadline(lambda: list(live), HANG_S)
        assert [as_numpy(r.outputs["OUT"]).tolist() for r in [first, *rest[:-1]]] == [[i] for i in range(count)]
        assert rest[-1].final and rest[-1].error is None
        with pytest.raises(StopIteration):
            next(live)
        # An exhausted iterator stays exhausted; an undrained one still has its response.
        with pytest.raises(StopIteration):
            next(done)
        assert as_numpy(answer(lambda: pending).outputs["OUTPUT0"]).tolist() == [0, 1, 2, 3]

        async def drain():
            return [r async for r in async_iterator]

        [async_response] = loop.run_until_complete(asyncio.wait_for(drain(), HANG_S))
        assert as_numpy(async_response.outputs["OUTPUT0"]).tolist() == [0, 1, 2, 3, 4]
    finally:
        loop.close()
    # cancel() on the iterators of a stopped server is harmless.
    for iterator in (live, done, pending, async_iterator):
        iterator.cancel()
    assert as_numpy(kept.outputs["OUTPUT0"]).tolist() == [0, 1, 2]  # outputs outlive the server
