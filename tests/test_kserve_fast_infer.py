"""The KServe infer route's native fast path (tritonserver._kserve.fast_infer,
cpp/kserve_infer.*): binary-tensor requests are built, submitted and
answered by the extension. Each request here is answered twice by the same
KServeRoutes, through the fast path and with it turned off (the Python
codec), and the two replies must be the same bytes: results over datatypes
and shapes, errors (status and message) over bad requests. Also: the fast
path takes what it claims to (counted), a body freed or refilled while its
request is in flight is safe, and nothing leaks over many requests."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import tracemalloc

import numpy
import pytest
import tritonclient.http as httpclient

from tritonserver import _native
from tritonserver._api._response import asyncio_waiters
from tritonserver._kserve import fast_infer
from tritonserver._kserve.routes import HEADER_LENGTH, KServeRoutes, Reply

from common import KSERVE_SAMPLES, assert_no_live_buffers, drain_deferred, kserve_over_http

MODELS = ("identity_fp32", "identity_multi", "identity_bytes", "identity_bf16", "echo_all_types",
          "raise_error", "streaming", "parameters")


@pytest.fixture(scope="module")
def routes(server, model):
    for name in MODELS:
        try:
            model(name)
        except pytest.skip.Exception:  # a python-backend model under numpy 2
            pass
    return KServeRoutes(server)


@pytest.fixture
def count_fast(monkeypatch):
    """What the fast path did with each request, in order: "declined" (the
    general path answered), "answered", or "raised" (an error of the core)."""
    outcomes: list[str] = []
    original = fast_infer.infer

    async def counting(*args, **kwargs):
        try:
            result = await original(*args, **kwargs)
        except BaseException:
            outcomes.append("raised")
            raise
        outcomes.append("declined" if result is None else "answered")
        return result

    monkeypatch.setattr(fast_infer, "infer", counting)
    return outcomes


def handle(loop, routes, model_name: str, body, headers: dict, fast: bool) -> Reply:
    fast_infer.enabled = fast
    try:
        return loop.run_until_complete(routes.handle("POST", f"/v2/models/{model_name}/infer", headers, body))
    finally:
        fast_infer.enabled = True


def both(loop, routes, model_name: str, body, headers: dict, count_fast, expect_fast: bool) -> Reply:
    """The reply of each path, asserted equal (status, headers, bytes);
    `expect_fast`: whether the fast path must have answered."""
    before = len(count_fast)
    fast = handle(loop, routes, model_name, body, headers, True)
    outcome = count_fast[before] if len(count_fast) > before else "not asked"
    assert outcome == "answered" if expect_fast else outcome in ("declined", "not asked"), outcome
    slow = handle(loop, routes, model_name, body, headers, False)
    assert fast == slow, (fast, slow)
    return fast


def client_body(inputs, outputs=None, **kwargs) -> tuple[bytes, dict[str, str]]:
    body, json_size = httpclient.InferenceServerClient.generate_request_body(inputs, outputs=outputs, **kwargs)
    return body, ({HEADER_LENGTH: str(json_size)} if json_size is not None else {})


def binary_input(name: str, datatype: str, array) -> httpclient.InferInput:
    item = httpclient.InferInput(name, list(array.shape), datatype)
    item.set_data_from_numpy(array, binary_data=True)
    return item


def result_of(reply: Reply) -> httpclient.InferResult:
    assert reply.status == 200, reply.body
    length = reply.headers.get(HEADER_LENGTH)
    return httpclient.InferResult.from_response_body(reply.body, header_length=int(length) if length else None)


# -- results equal to the Python path's -----------------------------------------

SAMPLES = {**KSERVE_SAMPLES,
           "BYTES": numpy.array([b"hello", "w\u00f6rld \u2603 \U0001f600".encode(), b"\x00\xff"], dtype=object)}
SUFFIX = {t: ("STRING" if t == "BYTES" else t) for t in SAMPLES}


def test_every_datatype_of_echo_all_types_matches_the_python_path(loop, routes, model, count_fast):
    model("echo_all_types")
    inputs = [binary_input(f"IN_{SUFFIX[t]}", t, a) for t, a in SAMPLES.items()]
    outputs = [httpclient.InferRequestedOutput(f"OUT_{SUFFIX[t]}", binary_data=True) for t in SAMPLES]
    body, headers = client_body(inputs, outputs, request_id="every-type")
    result = result_of(both(loop, routes, "echo_all_types", body, headers, count_fast, True))
    assert result.get_response()["id"] == "every-type"
    for datatype, sent in SAMPLES.items():
        got = result.as_numpy(f"OUT_{SUFFIX[datatype]}")
        assert result.get_output(f"OUT_{SUFFIX[datatype]}")["datatype"] == datatype
        if datatype == "BYTES":
            assert list(got) == list(sent)
        else:
            assert got.dtype == sent.dtype and numpy.array_equal(got, sent), datatype


@pytest.mark.parametrize("shapes", [((1, 1), (1, 1, 1), (1,)), ((3, 5), (2, 3, 4), (7,)), ((64, 300), (2, 2, 9000), (20000,))],
                         ids=["scalars", "small", "large"])
def test_shapes_and_ranks_of_identity_multi_match_the_python_path(loop, routes, count_fast, shapes):
    rng = numpy.random.default_rng(7)
    arrays = [rng.integers(-128, 127, shapes[0], dtype=numpy.int8),
              rng.standard_normal(shapes[1]).astype(numpy.float16),
              rng.integers(0, 2**64 - 1, shapes[2], dtype=numpy.uint64)]
    inputs = [binary_input(f"INPUT{i}", t, a) for i, (t, a) in enumerate(zip(("INT8", "FP16", "UINT64"), arrays))]
    body, headers = client_body(inputs, [httpclient.InferRequestedOutput(f"OUTPUT{i}", binary_data=True)
                                         for i in (2, 0, 1)])
    result = result_of(both(loop, routes, "identity_multi", body, headers, count_fast, True))
    assert sorted(o["name"] for o in result.get_response()["outputs"]) == ["OUTPUT0", "OUTPUT1", "OUTPUT2"]
    for i, sent in enumerate(arrays):
        got = result.as_numpy(f"OUTPUT{i}")
        assert got.dtype == sent.dtype and got.shape == sent.shape and numpy.array_equal(got, sent)


def test_binary_data_output_bytes_bf16_and_an_id_match_the_python_path(loop, routes, count_fast):
    # outputs=None: tritonclient asks every output as binary (binary_data_output).
    strings = numpy.array([b"", b"a" * 70_000, "\u00e9".encode()], dtype=object)
    body, headers = client_body([binary_input("INPUT0", "BYTES", strings)], request_id="\u00e9\"\\\n\x7f")
    result = result_of(both(loop, routes, "identity_bytes", body, headers, count_fast, True))
    assert list(result.as_numpy("OUTPUT0")) == list(strings)
    assert result.get_response()["id"] == "\u00e9\"\\\n\x7f"
    bits = numpy.array([0x3F80, 0xC000, 0x7F80], dtype=numpy.uint16)  # 1.0, -2.0, inf
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "BF16", "shape": [3],
                                     "parameters": {"binary_data_size": 6}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    reply = both(loop, routes, "identity_bf16", header + bits.tobytes(), {HEADER_LENGTH: str(len(header))},
                 count_fast, True)
    assert reply.body.endswith(bits.tobytes())


def test_a_named_outputs_own_binary_data_wins_over_binary_data_output(loop, routes, count_fast):
    """Named without binary_data (or with it false), an output is JSON even
    under binary_data_output (as the binary): the fast path leaves it to
    the Python path; named with it, or not named, it is binary data."""
    for outputs, fast in (([{"name": "OUTPUT0", "parameters": {"binary_data": False}}], False),
                          ([{"name": "OUTPUT0"}], False),
                          ([{"name": "OUTPUT0", "parameters": {"binary_data": True}}], True),
                          (None, True)):
        body, headers = _request(_header(_fp32(), outputs=outputs, parameters={"binary_data_output": True}), FOUR)
        reply = both(loop, routes, "identity_fp32", body, headers, count_fast, fast)
        assert reply.status == 200 and (HEADER_LENGTH in reply.headers) == fast, (outputs, reply)
        if not fast:
            assert json.loads(reply.body)["outputs"][0]["data"] == [0.0, 1.0, 2.0, 3.0]


def test_route_response_parameters_are_merged_as_the_python_path_does(loop, server, count_fast):
    routes = KServeRoutes(server, response_parameters={"replica": "n\u00f6de-\U0001f600", "weight": 0.1,
                                                       "big": 2**40, "ok": True, "nan": float("nan")})
    body, headers = client_body([binary_input("INPUT0", "FP32", numpy.arange(4, dtype=numpy.float32))])
    reply = both(loop, routes, "identity_fp32", body, headers, count_fast, True)
    header = json.loads(reply.body[: int(reply.headers[HEADER_LENGTH])])
    assert header["parameters"]["replica"] == "n\u00f6de-\U0001f600" and header["parameters"]["big"] == 2**40
    # A value json.dumps takes but the native writer does not: the Python path answers.
    routes = KServeRoutes(server, response_parameters={"list": [1, 2]})
    both(loop, routes, "identity_fp32", body, headers, count_fast, False)


def test_accept_encoding_compresses_the_fast_paths_reply_as_the_python_paths(loop, routes, count_fast):
    body, headers = client_body([binary_input("INPUT0", "FP32", numpy.zeros(4096, dtype=numpy.float32))],
                                [httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    for encoding in ("gzip", "deflate"):
        reply = both(loop, routes, "identity_fp32", body, {**headers, "accept-encoding": encoding}, count_fast, True)
        assert reply.headers.get("content-encoding") == encoding and len(reply.body) < 16384 / 4


def test_forwarded_headers_leave_the_request_to_the_python_path(loop, server, model, count_fast):
    model("parameters")  # a python model: skips where those cannot run
    routes = KServeRoutes(server, header_forward_pattern="^x-tenant$")
    body, headers = client_body([binary_input("INPUT0", "FP32", numpy.ones(2, dtype=numpy.float32))],
                                [httpclient.InferRequestedOutput("PARAMETERS", binary_data=True)])
    # A header that the pattern forwards becomes a request parameter: the Python path.
    result = result_of(both(loop, routes, "parameters", body, {**headers, "x-tenant": "a"}, count_fast, False))
    assert json.loads(result.as_numpy("PARAMETERS")[0]) == {"x-tenant": "a"}
    # None forwarded: the fast path.
    result = result_of(both(loop, routes, "parameters", body, {**headers, "x-other": "b"}, count_fast, True))
    assert json.loads(result.as_numpy("PARAMETERS")[0]) == {}


def test_requests_outside_the_fast_path_still_work(loop, routes, count_fast):
    array = numpy.arange(3, dtype=numpy.float32)
    json_input = httpclient.InferInput("INPUT0", [3], "FP32")
    json_input.set_data_from_numpy(array, binary_data=False)
    cases = [
        # JSON data in, JSON out
        client_body([json_input]),
        # binary in, an output asked as JSON
        client_body([binary_input("INPUT0", "FP32", array)],
                    [httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)]),
        # a request parameter the fast path does not pass
        client_body([binary_input("INPUT0", "FP32", array)], parameters={"custom": 1}),
        # sequence fields
        client_body([binary_input("INPUT0", "FP32", array)], sequence_id=0, priority=1),
    ]
    for body, headers in cases:
        result = result_of(both(loop, routes, "identity_fp32", body, headers, count_fast, False))
        assert numpy.array_equal(result.as_numpy("OUTPUT0"), array)


NO_OUTPUTS_CONFIG = """
name: "fast_infer_no_outputs"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU, count: 1 } ]
"""
NO_OUTPUTS_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[]) for _ in requests]
"""


def test_a_response_without_outputs_is_json_alone_as_in_the_python_path(loop, server, routes, tmp_path,
                                                                          count_fast):
    folder = tmp_path / "fast_infer_no_outputs"
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(NO_OUTPUTS_CONFIG)
    (folder / "1" / "model.py").write_text(NO_OUTPUTS_MODEL)
    server.register_model_repository(str(tmp_path))
    try:
        server.load("fast_infer_no_outputs")
        try:
            body, headers = client_body([binary_input("INPUT0", "FP32", numpy.ones(2, dtype=numpy.float32))])
            reply = both(loop, routes, "fast_infer_no_outputs", body, headers, count_fast, True)
            assert reply.headers == {"content-type": "application/json"}
            assert json.loads(reply.body)["outputs"] == []
        finally:
            server.unload("fast_infer_no_outputs", wait_until_unloaded=True)
    finally:
        server.unregister_model_repository(str(tmp_path))


# -- the same errors as the Python path -------------------------------------------

def _header(*inputs: dict, outputs=({"name": "OUTPUT0", "parameters": {"binary_data": True}},), **fields) -> bytes:
    document = {**fields, "inputs": list(inputs)}
    if outputs is not None:
        document["outputs"] = list(outputs)
    return json.dumps(document).encode()


def _fp32(n: int = 4, **fields) -> dict:
    entry = {"name": "INPUT0", "datatype": "FP32", "shape": [n], "parameters": {"binary_data_size": 4 * n}}
    return {k: v for k, v in {**entry, **fields}.items() if v is not None}


def _request(header: bytes, binary: bytes, header_length=None) -> tuple[bytes, dict[str, str]]:
    length = len(header) if header_length is None else header_length
    return header + binary, {HEADER_LENGTH: str(length)}


FOUR = numpy.arange(4, dtype=numpy.float32).tobytes()
DEEP = _header(_fp32(), x=None).replace(b"null", b"[" * 5000 + b"]" * 5000)


def _status_of_json_loads(header: bytes) -> int:
    """The general path's status for a valid request whose header is
    `header`: 400 where json.loads cannot read it (recursion), else 200."""
    try:
        json.loads(header)
    except RecursionError:
        return 400
    return 200


# (id, model, body and headers, expected status); each answered alike by both paths.
BAD = [
    ("unknown-input", "identity_fp32", _request(_header(_fp32(name="NOPE")), FOUR), 400),
    ("wrong-datatype-for-model", "identity_fp32",
     _request(_header(_fp32(datatype="INT32")), FOUR), 400),
    ("wrong-rank-for-model", "identity_fp32", _request(_header(_fp32(shape=[2, 2])), FOUR), 400),
    ("size-not-shape", "identity_fp32",
     _request(_header(_fp32(parameters={"binary_data_size": 12})), FOUR[:12]), 400),
    ("truncated-body", "identity_fp32", _request(_header(_fp32()), FOUR[:10]), 400),
    ("trailing-bytes", "identity_fp32", _request(_header(_fp32()), FOUR + b"x"), 400),
    ("header-length-past-body", "identity_fp32", _request(_header(_fp32()), FOUR, 10**6), 400),
    ("header-length-negative", "identity_fp32", _request(_header(_fp32()), FOUR, -1), 400),
    ("header-length-not-int", "identity_fp32", (_header(_fp32()) + FOUR, {HEADER_LENGTH: "12a"}), 400),
    ("header-not-json", "identity_fp32", _request(b"{nope", FOUR), 400),
    ("header-not-an-object", "identity_fp32", _request(b"[1]", b""), 400),
    ("duplicate-input", "identity_fp32", _request(_header(_fp32(), _fp32()), FOUR + FOUR), 400),
    ("missing-input", "identity_multi", _request(_header({**_fp32(), "name": "INPUT0", "datatype": "INT8",
                                                           "shape": [2, 8], "parameters": {"binary_data_size": 16}},
                                                          outputs=None, parameters={"binary_data_output": True}),
                                                  FOUR), 400),
    ("unknown-output", "identity_fp32",
     _request(_header(_fp32(), outputs=[{"name": "NOPE", "parameters": {"binary_data": True}}]), FOUR), 400),
    ("duplicate-output", "identity_fp32",
     _request(_header(_fp32(), outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}}] * 2), FOUR), 200),
    ("binary-data-not-bool", "identity_fp32",
     _request(_header(_fp32(), outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": 1}}]), FOUR), 400),
    ("binary-data-output-not-bool", "identity_fp32",
     _request(_header(_fp32(), outputs=None, parameters={"binary_data_output": "yes"}), FOUR), 400),
    ("negative-binary-size", "identity_fp32",
     _request(_header(_fp32(parameters={"binary_data_size": -4})), FOUR), 400),
    ("bool-binary-size", "identity_fp32",
     _request(_header(_fp32(n=1, parameters={"binary_data_size": True})), FOUR[:1]), 400),
    ("bool-dimension", "identity_fp32", _request(_header(_fp32(shape=[True, 4])), FOUR), 400),
    ("negative-dimension", "identity_fp32", _request(_header(_fp32(shape=[-4])), FOUR), 400),
    ("huge-dimension", "identity_fp32", _request(_header(_fp32(shape=[2**62, 2**62])), FOUR), 400),
    ("33-dimensions", "identity_fp32", _request(_header(_fp32(shape=[1] * 33)), FOUR), 400),
    ("unknown-datatype", "identity_fp32", _request(_header(_fp32(datatype="FP8")), FOUR), 400),
    ("shared-memory-input", "identity_fp32",
     _request(_header(_fp32(parameters={"binary_data_size": 16, "shared_memory_region": "r"})), FOUR), 400),
    ("shared-memory-output", "identity_fp32",
     _request(_header(_fp32(), outputs=[{"name": "OUTPUT0",
                                         "parameters": {"binary_data": True, "shared_memory_region": "r"}}]),
              FOUR), 400),
    ("nul-in-input-name", "identity_fp32", _request(_header(_fp32(name="INPUT0\x00x")), FOUR), 400),
    ("lone-surrogate-id", "identity_fp32", _request(_header(_fp32(), id="\ud800"), FOUR), 400),
    ("id-not-a-string", "identity_fp32", _request(_header(_fp32(), id=5), FOUR), 400),
    ("bytes-element-truncated", "identity_bytes",
     _request(_header({"name": "INPUT0", "datatype": "BYTES", "shape": [2], "parameters": {"binary_data_size": 9}}),
              b"\x01\x00\x00\x00a\x05\x00\x00\x00"), 400),
    ("bytes-too-many-bytes", "identity_bytes",
     _request(_header({"name": "INPUT0", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 6}}),
              b"\x01\x00\x00\x00ab"), 400),
    ("zero-size-input", "identity_fp32", _request(_header(_fp32(n=0)), b""), 200),
    ("model-error", "raise_error", _request(_header(_fp32()), FOUR), 500),
    ("decoupled-model", "streaming",
     _request(_header({"name": "COUNT", "datatype": "INT32", "shape": [1], "parameters": {"binary_data_size": 4}},
                      outputs=[{"name": "OUT", "parameters": {"binary_data": True}}]),
              numpy.array([2], dtype=numpy.int32).tobytes()), 501),
    ("unknown-model", "no_such_model", _request(_header(_fp32()), FOUR), 404),
    # JSON that json.loads (the general path's reader) and the fast path's
    # reader take differently: the fast path leaves it to the general one.
    # A key twice: the general path keeps the first value, as the binary.
    ("key-twice-the-last-wrong", "identity_fp32",
     _request(_header(_fp32()).replace(b'"binary_data_size": 16', b'"binary_data_size": 16, "binary_data_size": 12'),
              FOUR), 200),
    ("key-twice-the-first-wrong", "identity_fp32",
     _request(_header(_fp32()).replace(b'"binary_data_size": 16', b'"binary_data_size": 12, "binary_data_size": 16'),
              FOUR), 400),
    ("inputs-twice", "identity_fp32",
     _request(_header(_fp32()).replace(b'{"inputs": ', b'{"inputs": [], "inputs": '), FOUR), 400),
    # Nesting deeper than the fast path reads, in a field nobody reads: the
    # general path's json.loads answers (past its recursion limit 400, on
    # Pythons whose json has one at this depth).
    ("deep-nesting", "identity_fp32", _request(DEEP, FOUR), _status_of_json_loads(DEEP)),
    # NaN, which json.loads takes.
    ("nan-elsewhere", "identity_fp32", _request(_header(_fp32(), x=None).replace(b'null', b"NaN"), FOUR), 200),
    ("fractional-dimension", "identity_fp32", _request(_header(_fp32()).replace(b"[4]", b"[4.0]"), FOUR), 400),
]


RAISED_BY_THE_CORE = {"unknown-input", "wrong-datatype-for-model", "wrong-rank-for-model", "missing-input",
                      "unknown-output", "model-error"}


@pytest.mark.parametrize("case", BAD, ids=[case[0] for case in BAD])
def test_bad_requests_get_the_python_paths_status_and_message(loop, routes, model, count_fast, case):
    _, model_name, (body, headers), status = case
    if model_name in ("raise_error", "streaming"):
        model(model_name)  # skips where python models cannot run
    fast = handle(loop, routes, model_name, body, headers, True)
    slow = handle(loop, routes, model_name, body, headers, False)
    assert fast == slow, (fast, slow)
    assert fast.status == status, fast.body
    # The core's refusals and the model's error reach the client from the
    # fast path itself; every other bad request is left to the general path.
    assert count_fast[0] == ("raised" if case[0] in RAISED_BY_THE_CORE else "declined")
    if status != 200:
        assert set(json.loads(fast.body)) == {"error"}


def test_a_body_over_the_limit_is_refused_alike(loop, server, count_fast):
    routes = KServeRoutes(server, max_body_bytes=64)
    body, headers = _request(_header(_fp32()), FOUR)
    fast = handle(loop, routes, "identity_fp32", body, headers, True)
    assert fast == handle(loop, routes, "identity_fp32", body, headers, False)
    assert fast.status == 400 and count_fast.count("answered") == 0


# -- the body's lifetime -----------------------------------------------------------

LARGE = 1 << 18  # FP32 elements: 1 MiB, above the inputs copied at build (64 KiB)


def _submit(routes, model_name: str, body, header_length: int):
    """The fast path's native call, as fast_infer.infer makes it: the
    submitted stream."""
    model = routes.model(model_name)
    waiters_module = asyncio_waiters()
    loop = waiters_module.running_loop()
    stream = _native.kserve_infer(model._server._started(), model, model.name, model.version, body,
                                  header_length, {}, loop, waiters_module.for_loop(loop))
    assert stream is not None
    return stream


def _values(reply_body: bytes, header_length: int) -> numpy.ndarray:
    return numpy.frombuffer(reply_body, dtype=numpy.float32, offset=header_length)


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "bytes"])
@pytest.mark.parametrize("n", [16, LARGE], ids=["small", "large"])
def test_a_body_refilled_or_dropped_while_in_flight_is_safe(loop, routes, kind, n):
    sent = numpy.arange(n, dtype=numpy.float32)
    header = _header(_fp32(n=n))

    async def one():
        raw = bytearray(header + sent.tobytes())
        body = {"bytearray": raw, "memoryview": memoryview(raw), "bytes": bytes(raw)}[kind]
        stream = _submit(routes, "identity_fp32", body, len(header))
        # In flight: the caller refills its buffer, and drops it.
        raw[:] = b"\xff" * len(raw)
        del body, raw
        gc.collect()
        payload, length = await anext(stream)
        return payload, length

    for _ in range(20):
        payload, length = loop.run_until_complete(one())
        assert numpy.array_equal(_values(payload, length), sent)


def test_a_bytes_body_is_held_until_its_request_is_released_then_let_go(loop, routes):
    header = _header(_fp32(n=LARGE))
    body = header + numpy.ones(LARGE, dtype=numpy.float32).tobytes()
    base = sys.getrefcount(body)

    async def run():
        for _ in range(50):
            payload, length = await anext(_submit(routes, "identity_fp32", body, len(header)))
            assert _values(payload, length)[-1] == 1.0

    loop.run_until_complete(run())
    gc.collect()
    drain_deferred()
    assert sys.getrefcount(body) == base


def test_a_request_whose_task_is_cancelled_in_flight_is_let_go(loop, routes, count_fast):
    # As when the HTTP client goes away: the route's task is cancelled while
    # it awaits the response.
    header = _header(_fp32(n=LARGE))
    body = header + numpy.ones(LARGE, dtype=numpy.float32).tobytes()
    headers = {HEADER_LENGTH: str(len(header))}
    base = sys.getrefcount(body)

    async def cancelled_midway():
        for _ in range(20):
            task = asyncio.ensure_future(routes.handle("POST", "/v2/models/identity_fp32/infer", headers, body))
            await asyncio.sleep(0)  # one turn: the task ran up to its await of the response
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    loop.run_until_complete(cancelled_midway())
    assert count_fast == ["raised"] * 20  # each cancelled inside the fast path
    reply = handle(loop, routes, "identity_fp32", body, headers, True)
    assert _values(reply.body, int(reply.headers[HEADER_LENGTH]))[-1] == 1.0
    gc.collect()
    drain_deferred()
    assert sys.getrefcount(body) == base
    assert_no_live_buffers()


# -- no leak ------------------------------------------------------------------------

def test_many_requests_leak_nothing(loop, routes, count_fast):
    body, headers = client_body([binary_input("INPUT0", "FP32", numpy.arange(16, dtype=numpy.float32))],
                                [httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)], request_id="r")
    bad, bad_headers = _request(_header(_fp32(name="NOPE")), FOUR)

    async def run(n):
        for _ in range(n):
            assert (await routes.handle("POST", "/v2/models/identity_fp32/infer", headers, body)).status == 200
            assert (await routes.handle("POST", "/v2/models/identity_fp32/infer", bad_headers, bad)).status == 400

    loop.run_until_complete(run(300))
    gc.collect()
    drain_deferred()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        loop.run_until_complete(run(3000))
        gc.collect()
        drain_deferred()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert count_fast.count("answered") == 3300
    assert grown < 64 * 1024, f"{grown} bytes of Python memory kept over 3000 requests"
    assert_no_live_buffers()


# -- through tritonclient.http's client ---------------------------------------------

def test_tritonclient_http_reads_the_fast_paths_replies(routes, count_fast):
    if os.environ.get("TRITONSERVER_TEST_ASAN"):
        # As test_kserve_routes.py's client: gevent's greenlets crash under ASan.
        pytest.skip("tritonclient.http's gevent client (greenlet stack switching) crashes under ASan")
    array = numpy.arange(12, dtype=numpy.float32).reshape(12)
    strings = numpy.array([b"x", b"", "\u2603".encode()], dtype=object)
    with kserve_over_http(routes) as url:
        client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=30)
        try:
            result = client.infer("identity_fp32", [binary_input("INPUT0", "FP32", array)],
                                  outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)],
                                  request_id="via-client")
            assert numpy.array_equal(result.as_numpy("OUTPUT0"), array)
            assert result.get_response()["id"] == "via-client"
            assert result.get_response()["model_version"] == "1"
            result = client.infer("identity_bytes", [binary_input("INPUT0", "BYTES", strings)])
            assert list(result.as_numpy("OUTPUT0")) == list(strings)
        finally:
            client.close()
    assert count_fast.count("answered") == 2


# -- over KServeHttp, against NVIDIA's binary ------------------------------------------

# Requests the fast path takes (answered, or raised by the core), with the
# model they go to: KServeHttp must answer each with the binary's status.
AGAINST_THE_BINARY = [
    ("good", "identity_fp32", _request(_header(_fp32(), id="x"), FOUR)),
    ("good-bytes", "identity_bytes",
     _request(_header({"name": "INPUT0", "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 6}}),
              b"\x02\x00\x00\x00ab")),
    ("unknown-input", "identity_fp32", _request(_header(_fp32(name="NOPE")), FOUR)),
    ("wrong-datatype-for-model", "identity_fp32", _request(_header(_fp32(datatype="INT32")), FOUR)),
    ("wrong-rank-for-model", "identity_fp32", _request(_header(_fp32(shape=[2, 2])), FOUR)),
    ("unknown-output", "identity_fp32",
     _request(_header(_fp32(), outputs=[{"name": "NOPE", "parameters": {"binary_data": True}}]), FOUR)),
    # an output named without binary_data: JSON, whatever binary_data_output says (declined)
    ("named-output-json-under-binary_data_output", "identity_fp32",
     _request(_header(_fp32(), outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}}],
                      parameters={"binary_data_output": True}), FOUR)),
]


def _post(url: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, object]:
    """The status, and for a 200 the JSON header (parsed) and the binary
    data."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"http://{url}{path}", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            data = answer.read()
            length = int(answer.headers.get(HEADER_LENGTH, len(data)))  # none: a JSON reply
            return answer.status, (json.loads(data[:length]), data[length:])
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_kserve_http_answers_the_fast_paths_requests_with_the_binarys_status(server, model, count_fast):
    pytest.importorskip("uvicorn", reason="the serve extra (uvicorn, uvloop, httptools) is not installed")
    import common
    from tritonserver.frontend import KServeHttp

    for name in ("identity_fp32", "identity_bytes"):
        model(name)
    flags = ["--model-control-mode", "explicit", "--load-model=identity_fp32", "--load-model=identity_bytes"]
    with common.server_process(common.reference_command(), common.MODELS, flags) as binary, \
            KServeHttp(server, KServeHttp.Options(address="127.0.0.1", port=0)) as http:
        for case, model_name, (body, headers) in AGAINST_THE_BINARY:
            path = f"/v2/models/{model_name}/infer"
            theirs = _post(binary.http_url, path, body, headers)
            ours = _post(f"127.0.0.1:{http.port}", path, body, headers)
            assert ours[0] == theirs[0], (case, ours, theirs)
            if theirs[0] == 200:
                assert ours[1] == theirs[1], case  # the same JSON header (key order aside) and data
    assert count_fast.count("answered") == 2 and count_fast.count("raised") == 4
