"""The KServe v2 HTTP routes (tritonserver._kserve) against the real core,
without a web server: bodies are built and read by tritonclient's HTTP
codec (a client nobody here wrote), then handed to KServeRoutes.handle().
The same routes over real HTTP on a Ray cluster: test_ray_serve.py."""

from __future__ import annotations

import asyncio
import gzip
import json

import numpy
import pytest
import tritonclient.http as httpclient

import tritonserver
from tritonserver._kserve.routes import HEADER_LENGTH, KServeRoutes, Reply

from common import make_options

# One sample per JSON datatype of echo_all_types (IN_<T> -> OUT_<T>).
SAMPLES = {
    "BOOL": numpy.array([True, False, True]),
    "UINT8": numpy.array([0, 255], dtype=numpy.uint8),
    "UINT16": numpy.array([0, 65535], dtype=numpy.uint16),
    "UINT32": numpy.array([0, 2**32 - 1], dtype=numpy.uint32),
    "UINT64": numpy.array([0, 2**64 - 1], dtype=numpy.uint64),
    "INT8": numpy.array([-128, 127], dtype=numpy.int8),
    "INT16": numpy.array([-(2**15), 2**15 - 1], dtype=numpy.int16),
    "INT32": numpy.array([-(2**31), 2**31 - 1], dtype=numpy.int32),
    "INT64": numpy.array([-(2**63), 2**63 - 1], dtype=numpy.int64),
    "FP16": numpy.array([0.5, -1.25, 65504.0], dtype=numpy.float16),
    "FP32": numpy.array([1.5, -2.25, 3.0e38], dtype=numpy.float32),
    "FP64": numpy.array([1.0e-300, -2.5, 1.0e300], dtype=numpy.float64),
    "BYTES": numpy.array([b"hello", "wörld".encode(), b""], dtype=object),
}
# echo_all_types names its BYTES pair IN_STRING/OUT_STRING.
SUFFIX = {t: ("STRING" if t == "BYTES" else t) for t in SAMPLES}
EXPECTED_STATUS = {"bad": 400, "unknown": 404, "method": 405, "unavailable": 503}


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def routes(server, model):
    for name in ("echo_all_types", "identity_fp32", "identity_bf16", "add_sub", "parameters", "streaming"):
        try:
            model(name)
        except pytest.skip.Exception:  # a python-backend model under numpy 2: see call()
            pass
    return KServeRoutes(server)


def call(loop, routes: KServeRoutes, method: str, path: str, body: bytes = b"",
         headers: dict[str, str] | None = None) -> Reply:
    """routes.handle()."""
    return loop.run_until_complete(routes.handle(method, path, headers or {}, body))


def infer(loop, routes, model_name, inputs, outputs=None, **kwargs) -> httpclient.InferResult:
    """POST a body built by tritonclient; parse the reply with tritonclient."""
    body, json_size = httpclient.InferenceServerClient.generate_request_body(inputs, outputs=outputs, **kwargs)
    headers = {HEADER_LENGTH: str(json_size)} if json_size is not None else {}
    reply = call(loop, routes, "POST", f"/v2/models/{model_name}/infer", body, headers)
    assert reply.status == 200, reply.body
    length = reply.headers.get(HEADER_LENGTH)
    return httpclient.InferResult.from_response_body(reply.body, header_length=int(length) if length else None)


def client_input(name: str, datatype: str, array: numpy.ndarray, binary: bool) -> httpclient.InferInput:
    item = httpclient.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array, binary_data=binary)
    return item


def assert_error(reply: Reply, status: int) -> str:
    """The reply has `status` and the protocol's error body; its message."""
    assert reply.status == status, reply.body
    document = json.loads(reply.body)
    assert set(document) == {"error"} and document["error"]
    return str(document["error"])


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_every_datatype_round_trips(loop, routes, binary):
    inputs = [client_input(f"IN_{SUFFIX[t]}", t, a, binary) for t, a in SAMPLES.items()]
    outputs = [httpclient.InferRequestedOutput(f"OUT_{SUFFIX[t]}", binary_data=binary) for t in SAMPLES]
    result = infer(loop, routes, "echo_all_types", inputs, outputs, request_id="round-trip")
    assert result.get_response()["id"] == "round-trip"
    for datatype, sent in SAMPLES.items():
        got = result.as_numpy(f"OUT_{SUFFIX[datatype]}")
        assert result.get_output(f"OUT_{SUFFIX[datatype]}")["datatype"] == datatype
        if datatype == "BYTES":  # tritonclient gives JSON strings as str
            assert [x if isinstance(x, bytes) else x.encode() for x in got] == list(sent)
        else:
            assert got.dtype == sent.dtype and numpy.array_equal(got, sent), datatype


def test_json_data_may_be_nested_and_outputs_default_to_json(loop, routes):
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4],
                                   "data": [[1, 2.5], [3, 4]]}]}).encode()
    reply = call(loop, routes, "POST", "/v2/models/identity_fp32/infer", body)
    assert reply.status == 200 and HEADER_LENGTH not in reply.headers
    (output,) = json.loads(reply.body)["outputs"]
    assert output == {"name": "OUTPUT0", "datatype": "FP32", "shape": [4], "data": [1.0, 2.5, 3.0, 4.0]}


def test_binary_data_output_parameter_makes_every_output_binary(loop, routes):
    # (tritonclient will not send this parameter itself: it sets binary_data per output)
    a = numpy.arange(4, dtype=numpy.float32)
    body = json.dumps({"parameters": {"binary_data_output": True}, "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": a.tolist()},
        {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": (a * 3).tolist()}]}).encode()
    reply = call(loop, routes, "POST", "/v2/models/add_sub/infer", body)
    assert reply.status == 200, reply.body
    result = httpclient.InferResult.from_response_body(reply.body, header_length=int(reply.headers[HEADER_LENGTH]))
    assert result.get_output("OUTPUT0")["parameters"]["binary_data_size"] == 16
    numpy.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 4)
    numpy.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - a * 3)


def test_bf16_binary_and_json(loop, routes):
    values = numpy.array([1.0, -2.5, 0.15625, 3.0e38], dtype=numpy.float32)  # exact in bfloat16 but the last
    try:  # tritonclient r26.06+ takes BF16 as ml_dtypes.bfloat16; older ones truncate float32
        import ml_dtypes
        sent = values.astype(ml_dtypes.bfloat16)
    except ImportError:
        sent = values
    result = infer(loop, routes, "identity_bf16", [client_input("INPUT0", "BF16", sent, True)])
    got = result.as_numpy("OUTPUT0").astype(numpy.float32)
    numpy.testing.assert_array_equal(got[:3], values[:3])
    assert abs(got[3] - values[3]) / values[3] < 2**-7  # rounded to 8 significant bits
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "BF16", "shape": [3],
                                   "data": [1.0, -2.5, 0.15625]}]}).encode()
    reply = call(loop, routes, "POST", "/v2/models/identity_bf16/infer", body)
    assert reply.status == 200, reply.body
    assert json.loads(reply.body)["outputs"][0]["data"] == [1.0, -2.5, 0.15625]


def test_parameters_reach_the_model_and_request_fields_do_not(loop, routes):
    inputs = [client_input("INPUT0", "FP32", numpy.zeros(1, numpy.float32), False)]
    result = infer(loop, routes, "parameters", inputs, parameters={"key": "value", "n": 3},
                   priority=1, timeout=10**9)
    (text,) = result.as_numpy("PARAMETERS")
    assert json.loads(text) == {"key": "value", "n": 3}


def test_gzip_request_body(loop, routes):
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [7]}]})
    reply = call(loop, routes, "POST", "/v2/models/identity_fp32/infer", gzip.compress(body.encode()),
                 {"content-encoding": "gzip"})
    assert reply.status == 200 and json.loads(reply.body)["outputs"][0]["data"] == [7.0]


def test_metadata_config_and_health(loop, routes, server):
    reply = call(loop, routes, "GET", "/v2/models/add_sub")
    assert reply.status == 200 and json.loads(reply.body) == server.model("add_sub").metadata()
    reply = call(loop, routes, "GET", "/v2/models/add_sub/versions/1/config")
    assert reply.status == 200 and json.loads(reply.body)["name"] == "add_sub"
    assert call(loop, routes, "GET", "/v2/models/add_sub/ready").status == 200
    assert call(loop, routes, "GET", "/v2/health/live").status == 200
    assert call(loop, routes, "GET", "/v2/health/ready/").status == 200
    reply = call(loop, routes, "GET", "/v2")
    assert reply.status == 200 and json.loads(reply.body) == server.metadata()


def _body(*inputs: dict) -> bytes:
    return json.dumps({"inputs": list(inputs)}).encode()


FP32_ONE = {"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}

# (id, method, path, body, headers, expected status class)
BAD_REQUESTS = [
    ("not-json", "POST", "/v2/models/identity_fp32/infer", b"{nope", {}, "bad"),
    ("not-an-object", "POST", "/v2/models/identity_fp32/infer", b"[1]", {}, "bad"),
    ("no-inputs", "POST", "/v2/models/identity_fp32/infer", b"{}", {}, "bad"),
    ("unknown-datatype", "POST", "/v2/models/identity_fp32/infer",
     _body({**FP32_ONE, "datatype": "FP8"}), {}, "bad"),
    ("wrong-datatype-for-model", "POST", "/v2/models/identity_fp32/infer",
     _body({**FP32_ONE, "datatype": "INT32", "data": [1]}), {}, "bad"),
    ("count-mismatch", "POST", "/v2/models/identity_fp32/infer", _body({**FP32_ONE, "shape": [2]}), {}, "bad"),
    ("negative-dim", "POST", "/v2/models/identity_fp32/infer", _body({**FP32_ONE, "shape": [-1]}), {}, "bad"),
    ("string-for-fp32", "POST", "/v2/models/identity_fp32/infer", _body({**FP32_ONE, "data": ["x"]}), {}, "bad"),
    ("bool-for-fp32", "POST", "/v2/models/identity_fp32/infer", _body({**FP32_ONE, "data": [True]}), {}, "bad"),
    ("float-for-int8", "POST", "/v2/models/echo_all_types/infer",
     _body({"name": "IN_INT8", "datatype": "INT8", "shape": [1], "data": [1.5]}), {}, "bad"),
    ("out-of-range-int8", "POST", "/v2/models/echo_all_types/infer",
     _body({"name": "IN_INT8", "datatype": "INT8", "shape": [1], "data": [300]}), {}, "bad"),
    ("number-for-bytes", "POST", "/v2/models/echo_all_types/infer",
     _body({"name": "IN_STRING", "datatype": "BYTES", "shape": [1], "data": [5]}), {}, "bad"),
    ("unknown-input", "POST", "/v2/models/identity_fp32/infer", _body({**FP32_ONE, "name": "NOPE"}), {}, "bad"),
    ("duplicate-input", "POST", "/v2/models/identity_fp32/infer", _body(FP32_ONE, FP32_ONE), {}, "bad"),
    ("unknown-output", "POST", "/v2/models/identity_fp32/infer",
     json.dumps({"inputs": [FP32_ONE], "outputs": [{"name": "NOPE"}]}).encode(), {}, "bad"),
    ("nested-parameter", "POST", "/v2/models/identity_fp32/infer",
     json.dumps({"inputs": [FP32_ONE], "parameters": {"a": {"b": 1}}}).encode(), {}, "bad"),
    ("binary-size-overrun", "POST", "/v2/models/identity_fp32/infer",
     _body({**FP32_ONE, "data": None, "parameters": {"binary_data_size": 4}}) + b"\0\0",
     {HEADER_LENGTH: str(len(_body({**FP32_ONE, "data": None, "parameters": {"binary_data_size": 4}})))}, "bad"),
    ("header-length-not-int", "POST", "/v2/models/identity_fp32/infer", _body(FP32_ONE), {HEADER_LENGTH: "x"}, "bad"),
    ("trailing-binary", "POST", "/v2/models/identity_fp32/infer", _body(FP32_ONE) + b"junk",
     {HEADER_LENGTH: str(len(_body(FP32_ONE)))}, "bad"),
    ("bad-gzip", "POST", "/v2/models/identity_fp32/infer", b"not gzip", {"content-encoding": "gzip"}, "bad"),
    ("decoupled-model", "POST", "/v2/models/streaming/infer",
     _body({"name": "COUNT", "datatype": "INT32", "shape": [1], "data": [2]}), {}, "bad"),
    ("version-not-int", "GET", "/v2/models/add_sub/versions/one", b"", {}, "bad"),
    ("unknown-model", "POST", "/v2/models/no_such_model/infer", _body(FP32_ONE), {}, "unknown"),
    ("unknown-model-metadata", "GET", "/v2/models/no_such_model", b"", {}, "unknown"),
    ("unknown-route", "GET", "/v3/models", b"", {}, "unknown"),
    ("unknown-action", "GET", "/v2/models/add_sub/stats/extra", b"", {}, "unknown"),
    ("get-infer", "GET", "/v2/models/identity_fp32/infer", b"", {}, "method"),
    ("post-metadata", "POST", "/v2/models/identity_fp32", b"", {}, "method"),
]


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=[case[0] for case in BAD_REQUESTS])
def test_bad_requests_get_their_status_and_the_server_keeps_serving(loop, routes, case):
    _, method, path, body, headers, kind = case
    message = assert_error(call(loop, routes, method, path, body, headers), EXPECTED_STATUS[kind])
    assert len(message) > 10
    good = call(loop, routes, "POST", "/v2/models/identity_fp32/infer", _body(FP32_ONE))
    assert good.status == 200 and json.loads(good.body)["outputs"][0]["data"] == [1.0]


def test_only_the_listed_models_are_served(loop, server, routes):
    limited = KServeRoutes(server, models=["identity_fp32"])
    message = assert_error(call(loop, limited, "POST", "/v2/models/add_sub/infer", _body(FP32_ONE)), 404)
    assert "identity_fp32" in message
    assert call(loop, limited, "POST", "/v2/models/identity_fp32/infer", _body(FP32_ONE)).status == 200


def test_a_server_that_is_not_running_answers_503(loop, backend_directory):
    server = tritonserver.Server(make_options(backend_directory))  # never started
    routes = KServeRoutes(server)
    assert_error(call(loop, routes, "GET", "/v2/health/ready"), 503)
    assert_error(call(loop, routes, "POST", "/v2/models/identity_fp32/infer", _body(FP32_ONE)), 503)


def test_unloaded_model_is_not_ready(loop, backend_directory):
    server = tritonserver.Server(make_options(backend_directory, server_id="kserve-unload")).start(
        wait_until_ready=True, timeout=60)
    try:
        server.load("identity_fp32")
        routes = KServeRoutes(server)
        assert call(loop, routes, "GET", "/v2/models/identity_fp32/ready").status == 200
        server.unload("identity_fp32", wait_until_unloaded=True)
        assert_error(call(loop, routes, "GET", "/v2/models/identity_fp32/ready"), 503)
        status = call(loop, routes, "POST", "/v2/models/identity_fp32/infer", _body(FP32_ONE)).status
        assert status in (404, 503)  # the core reports an unloaded model as unknown or unavailable
    finally:
        server.stop()
