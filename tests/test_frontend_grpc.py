"""KServeGrpc (tritonserver.frontend): Triton's GRPCInferenceService and
grpc.health.v1 served from an embedded Server, driven by NVIDIA's own
clients (tritonclient.grpc: sync, asyncio, streaming) over loopback."""

from __future__ import annotations

import asyncio
import gzip
import json
import queue
import random
import socket
import sys
import threading
import time
import zlib

import numpy
import pytest

grpc = pytest.importorskip("grpc", reason="the serve extra (grpcio) is not installed")
grpcclient = pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed")
pytest.importorskip("grpc_health", reason="the serve extra (grpcio-health-checking) is not installed")

import tritonclient.grpc.aio as aioclient  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

import tritonserver  # noqa: E402
from tritonserver import TensorSpec  # noqa: E402
from tritonserver.frontend import KServeGrpc  # noqa: E402

from common import ROOT, call_with_deadline, kserve_grpc, make_options, wait_for  # noqa: E402

MODELS_LOADED = ("add_sub", "identity_fp32", "identity_bytes", "streaming", "parameters")


class Cancellable:
    """A bound decoupled function that streams until its request is
    cancelled, and says so (`started`, `saw_cancel`)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.saw_cancel = threading.Event()

    def __call__(self, X, context):
        self.started.set()
        i = 0
        deadline = time.monotonic() + 60
        while not context.cancelled():
            if time.monotonic() > deadline:
                return
            yield {"Y": X + i}
            i += 1
            time.sleep(0.01)
        self.saw_cancel.set()


@pytest.fixture(scope="module", params=["grpcio", "native"])
def transport(request):
    """Every test runs on both of KServeGrpc's transports."""
    from tritonserver.frontend import _native_grpc

    if request.param == "native" and not _native_grpc.available():
        pytest.skip("this build has no native gRPC transport (TRITONSERVER_NATIVE_GRPC=OFF)")
    return request.param


@pytest.fixture(scope="module")
def served(backend_directory, tmp_path_factory, transport):
    """(server, frontend, url): a server running python models in-process,
    with repository models and bound functions, served by KServeGrpc."""
    server = tritonserver.Server(make_options(backend_directory, server_id="grpc", python_models="in-process",
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    for name in MODELS_LOADED:
        server.load(name)
    server.bind("bound_add", lambda A, B: {"SUM": A + B},
                inputs=[TensorSpec("A", numpy.int32, (-1,)), TensorSpec("B", numpy.int32, (-1,))],
                outputs=[TensorSpec("SUM", numpy.int32, (-1,))])

    def count(N):
        for i in range(int(N[0])):
            yield {"OUT": numpy.array([i], numpy.int32)}

    server.bind("bound_count", count, inputs=[TensorSpec("N", numpy.int32, (1,))],
                outputs=[TensorSpec("OUT", numpy.int32, (1,))])
    cancellable = Cancellable()
    server.bind("bound_endless", cancellable, inputs=[TensorSpec("X", numpy.float32, (1,))],
                outputs=[TensorSpec("Y", numpy.float32, (1,))])
    server.cancellable = cancellable
    try:
        with kserve_grpc(server, transport=transport) as frontend:
            yield server, frontend, f"127.0.0.1:{frontend.port}"
    finally:
        call_with_deadline(server.stop, 60)


@pytest.fixture
def client(served):
    with grpcclient.InferenceServerClient(served[2]) as c:
        yield c


def _input(name, array, datatype=None):
    tensor = grpcclient.InferInput(name, list(array.shape), datatype or _datatype(array))
    tensor.set_data_from_numpy(array)
    return tensor


def _datatype(array):
    return "BYTES" if array.dtype == object else {"float32": "FP32", "int32": "INT32"}[str(array.dtype)]


def _code(call):
    with pytest.raises(InferenceServerException) as caught:
        call()
    return caught.value.status(), caught.value.message()


def _add_sub_inputs(a, b):
    return [_input("INPUT0", numpy.asarray(a, numpy.float32)), _input("INPUT1", numpy.asarray(b, numpy.float32))]


def _native_infers(frontend):
    """How many ModelInfer calls the native transport served on its native
    path (None on the grpcio transport)."""
    native = frontend._native
    return None if native is None else native.native_infers


# -- the call table -------------------------------------------------------------

def test_health_metadata_config_statistics_and_repository(served, client):
    server = served[0]
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("add_sub") and client.is_model_ready("add_sub", "1")
    assert not client.is_model_ready("no_such_model")
    metadata = client.get_server_metadata()
    assert (metadata.name, metadata.version) == (server.metadata()["name"], server.metadata()["version"])
    assert "system_shared_memory" in metadata.extensions and "trace" not in metadata.extensions
    model = client.get_model_metadata("add_sub", as_json=True)
    assert model["name"] == "add_sub" and model["versions"] == ["1"] and model["platform"] == "python"
    assert [(t["name"], t["datatype"], t["shape"]) for t in model["inputs"]] == [
        ("INPUT0", "FP32", ["-1"]), ("INPUT1", "FP32", ["-1"])]
    config = client.get_model_config("add_sub").config  # a ModelConfig proto
    assert config.name == "add_sub" and config.backend == "python"
    assert [i.name for i in config.input] == ["INPUT0", "INPUT1"]
    assert client.get_model_config("streaming").config.model_transaction_policy.decoupled
    client.infer("add_sub", _add_sub_inputs([1, 2], [3, 4]))
    statistics = client.get_inference_statistics("add_sub", as_json=True)["model_stats"][0]
    assert statistics["name"] == "add_sub" and int(statistics["inference_stats"]["success"]["count"]) >= 1
    all_models = client.get_inference_statistics(as_json=True)["model_stats"]
    assert {"add_sub", "bound_add"} <= {s["name"] for s in all_models}
    index = {m["name"]: m for m in client.get_model_repository_index(as_json=True)["models"]}
    assert index["add_sub"]["state"] == "READY" and index["add_sub"]["version"] == "1"
    assert "sleep" in index  # in the repository, not loaded


def test_load_with_config_and_files_then_unload(served, client):
    server = served[0]
    config = json.dumps({"backend": "python", "max_batch_size": 0,
                         "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
                                   {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [-1]}],
                         "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
                                    {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [-1]}]})
    source = (__import__("common").MODELS / "add_sub" / "1" / "model.py").read_bytes()
    client.load_model("grpc_loaded", config=config, files={"file:1/model.py": source})
    assert client.is_model_ready("grpc_loaded")
    result = client.infer("grpc_loaded", _add_sub_inputs([5], [2]))
    assert result.as_numpy("OUTPUT0").tolist() == [7] and result.as_numpy("OUTPUT1").tolist() == [3]
    client.unload_model("grpc_loaded")
    assert wait_for(lambda: not server.model("grpc_loaded").ready())
    # as the binary: an unknown name is INTERNAL to load (the message names the repositories), OK to unload
    status, message = _code(lambda: client.load_model("no_such_model"))
    assert status == "StatusCode.INTERNAL" and "no model named 'no_such_model'" in message
    client.unload_model("no_such_model")


def test_infer_raw_typed_bytes_and_requested_outputs(served, client):
    result = client.infer("add_sub", _add_sub_inputs([1, 2, 3], [1, 1, 1]), request_id="r1",
                          outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
    assert result.get_response().id == "r1" and result.get_response().model_version == "1"
    assert [o.name for o in result.get_response().outputs] == ["OUTPUT1"]
    assert result.as_numpy("OUTPUT1").tolist() == [0, 1, 2] and result.as_numpy("OUTPUT0") is None
    words = numpy.array([b"a", b"", b"\x00\xffbytes"], dtype=object)
    assert client.infer("identity_bytes", [_input("INPUT0", words)]).as_numpy("OUTPUT0").tolist() == words.tolist()
    # typed contents (what other clients send), through the generated stub itself
    import grpc as grpc_module

    with grpc_module.insecure_channel(served[2]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="add_sub")
        for name, values in (("INPUT0", [1.5, 2.5]), ("INPUT1", [0.5, 0.5])):
            tensor = request.inputs.add(name=name, datatype="FP32", shape=[2])
            tensor.contents.fp32_contents.extend(values)
        response = stub.ModelInfer(request)
        assert numpy.frombuffer(response.raw_output_contents[0], numpy.float32).tolist() == [2.0, 3.0]
        request = service_pb2.ModelInferRequest(model_name="identity_bytes")
        request.inputs.add(name="INPUT0", datatype="BYTES", shape=[2]).contents.bytes_contents.extend([b"x", b"yz"])
        raw = stub.ModelInfer(request).raw_output_contents[0]
        assert raw == b"\x01\x00\x00\x00x\x02\x00\x00\x00yz"
        # FP32 contents for an INT32 input: the binary's message
        request = service_pb2.ModelInferRequest(model_name="bound_add")
        request.inputs.add(name="A", datatype="INT32", shape=[1]).contents.fp32_contents.append(1.0)
        with pytest.raises(grpc_module.RpcError) as caught:
            stub.ModelInfer(request)
        assert caught.value.code() == grpc_module.StatusCode.INVALID_ARGUMENT
        assert "of type 'FP32', expected datatype 'INT32'" in caught.value.details()


def test_request_parameters_and_forwarded_headers_reach_the_model(served, transport):
    server = served[0]
    with kserve_grpc(server, forward_header_pattern="^x-fwd-", transport=transport) as frontend:
        with grpcclient.InferenceServerClient(f"127.0.0.1:{frontend.port}") as c:
            result = c.infer("parameters", [_input("INPUT0", numpy.zeros(1, numpy.float32))],
                             parameters={"temperature": 0.5, "n": 3, "flag": True, "who": "me"},
                             headers={"x-fwd-tenant": "t1", "x-fwd-note": "  spaced ", "x-other": "no"})
    seen = json.loads(result.as_numpy("PARAMETERS")[0])
    # values as sent, spaces around them included (as grpc's server takes them)
    assert seen == {"temperature": 0.5, "n": 3, "flag": True, "who": "me", "x-fwd-tenant": "t1",
                    "x-fwd-note": "  spaced "}


def test_bound_functions_served(client):
    result = client.infer("bound_add", [_input("A", numpy.array([1, 2], numpy.int32)),
                                        _input("B", numpy.array([10, 20], numpy.int32))])
    assert result.as_numpy("SUM").tolist() == [11, 22]


def test_asyncio_client_infer_and_stream(served):
    async def main():
        async with aioclient.InferenceServerClient(served[2]) as c:
            assert await c.is_server_ready()
            results = await asyncio.gather(*[
                c.infer("add_sub", _add_sub_inputs([i], [1])) for i in range(8)])
            sums = [r.as_numpy("OUTPUT0").tolist() for r in results]

            async def requests():
                yield {"model_name": "bound_count", "inputs": [_input("N", numpy.array([3], numpy.int32))],
                       "request_id": "s1"}

            outs = []
            async for result, error in c.stream_infer(requests()):
                assert error is None
                outs.append(int(result.as_numpy("OUT")[0]))
                if len(outs) == 3:
                    break
            return sums, outs

    sums, outs = asyncio.run(main())
    assert sums == [[i + 1] for i in range(8)]
    assert outs == [0, 1, 2]


def _stream(url, requests, expect, timeout=30):
    """Send `requests` (kwargs of async_stream_infer) on one stream; the
    (result, error) pairs until `expect` of them came."""
    got: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(url) as c:
        c.start_stream(callback=lambda result, error: got.put((result, error)))
        for kwargs in requests:
            c.async_stream_infer(**kwargs)
        out = [got.get(timeout=timeout) for _ in range(expect)]
        c.stop_stream()
    return out


def test_stream_decoupled_python_model_with_empty_final_response(served):
    count = _input("COUNT", numpy.array([3], numpy.int32))
    got = _stream(served[2], [dict(model_name="streaming", inputs=[count], request_id="a",
                                   enable_empty_final_response=True)], 4)
    assert all(error is None for _, error in got)
    values = [r.as_numpy("OUT") for r, _ in got]
    assert [v.tolist() for v in values[:3]] == [[0], [1], [2]] and values[3] is None
    finals = [r.get_response().parameters["triton_final_response"].bool_param for r, _ in got]
    assert finals == [False, False, False, True]
    assert {r.get_response().id for r, _ in got} == {"a"}
    # without the parameter: only the 3 responses (then a later request's answer)
    got = _stream(served[2], [dict(model_name="streaming", inputs=[count]),
                              dict(model_name="add_sub", inputs=_add_sub_inputs([1], [1]), request_id="after")], 4)
    assert sorted(r.get_response().id for r, _ in got) == ["", "", "", "after"]


def test_stream_errors_go_in_the_stream_and_it_goes_on(served):
    got = _stream(served[2], [dict(model_name="no_such_model", inputs=_add_sub_inputs([1], [1]), request_id="bad"),
                              dict(model_name="add_sub", inputs=_add_sub_inputs([2], [1]), request_id="good")], 2)
    by_id = {}
    for result, error in got:
        by_id["bad" if error is not None else result.get_response().id] = (result, error)
    assert "no_such_model" in by_id["bad"][1].message()
    assert by_id["good"][0].as_numpy("OUTPUT0").tolist() == [3]


@pytest.mark.parametrize("then", ["reads", "cancels"])
def test_a_stream_client_that_reads_nothing_is_stopped_then_gets_every_response(served, then):
    """ModelStreamInfer from a client that sends and does not read: the call
    stops reading its requests once it holds 256 in the core or 16 MiB of
    unwritten responses, and HTTP/2's flow control then stops the client
    (NVIDIA's binary reads them all: its memory grows without end). Once the
    client reads, every response comes; if it cancels instead, the server
    serves the next stream."""
    from tritonserver._kserve.stream_flow import MAX_IN_FLIGHT, MAX_QUEUED_BYTES

    server, count = served[0], 3000
    calls = []

    def quadruple(X):  # 16 KiB in, 64 KiB out
        calls.append(int(X[0]))
        return {"Y": numpy.tile(X, 4)}

    name = f"quadruple_{then}"
    server.bind(name, quadruple, inputs=[TensorSpec("X", numpy.int32, (-1,))], outputs=[TensorSpec("Y", numpy.int32, (-1,))])
    sent = []

    def requests():
        for i in range(count):
            request = service_pb2.ModelInferRequest(model_name=name, id=str(i))
            request.inputs.add(name="X", datatype="INT32", shape=[4096])
            request.raw_input_contents.append(numpy.full(4096, i, numpy.int32).tobytes())
            sent.append(i)
            yield request

    with grpc.insecure_channel(served[2]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        stream = stub.ModelStreamInfer(requests(), timeout=120)
        # Not read: the calls stop short of all (a deadline can only show that they stop).
        assert not wait_for(lambda: len(calls) >= count, seconds=3), "every request was read"
        # Answered so far: at most 256 in the core, 16 MiB of responses in the call, as many in the native
        # transport, and what the sockets and the client's gRPC (its own flow-control window) hold unread.
        assert len(calls) < MAX_IN_FLIGHT + 2 * MAX_QUEUED_BYTES // 65536 + 512 < count, len(calls)
        assert len(sent) < count, "the client was never stopped"
        if then == "cancels":
            stream.cancel()
            sent.clear()
            count = 3
            answers = list(stub.ModelStreamInfer(requests(), timeout=60))
            assert sorted(int(r.infer_response.id) for r in answers) == [0, 1, 2]
            return
        got = {}
        for response in stream:
            assert not response.error_message, response.error_message
            got[int(response.infer_response.id)] = numpy.frombuffer(
                response.infer_response.raw_output_contents[0], numpy.int32)
    assert sorted(got) == list(range(count))
    assert all(y.size == 16384 and (y == i).all() for i, y in got.items())
    assert sorted(calls) == list(range(count))


HOLDING_MODEL = """
import numpy
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.held = []

    def execute(self, requests):
        for request in requests:
            self.held.append(request.get_response_sender())
            if int(pb_utils.get_input_tensor_by_name(request, "END").as_numpy()[0]):
                for i, sender in enumerate(self.held):
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", numpy.array([i], numpy.int32))]),
                                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                self.held = []
        return None
"""


def test_a_decoupled_model_may_hold_more_requests_of_a_stream_than_its_cap(served, client):
    """A decoupled model that answers every request of the stream once a
    later one (END=1) comes: 400 held requests, past the 256 a call keeps
    in the core for other models, all answered (a decoupled model's
    requests are not counted against the cap)."""
    from tritonserver._kserve.stream_flow import MAX_IN_FLIGHT

    count = MAX_IN_FLIGHT + 144
    config = json.dumps({"backend": "python", "max_batch_size": 0,
                         "model_transaction_policy": {"decoupled": True},
                         "input": [{"name": "END", "data_type": "TYPE_INT32", "dims": [1]}],
                         "output": [{"name": "I", "data_type": "TYPE_INT32", "dims": [1]}]})
    client.load_model("holding", config=config, files={"file:1/model.py": HOLDING_MODEL.encode()})

    def requests():
        for i in range(count):
            request = service_pb2.ModelInferRequest(model_name="holding", id=str(i))
            request.inputs.add(name="END", datatype="INT32", shape=[1])
            request.raw_input_contents.append(numpy.int32(i == count - 1).tobytes())
            yield request

    try:
        with grpc.insecure_channel(served[2]) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            answers = list(stub.ModelStreamInfer(requests(), timeout=60))
    finally:
        client.unload_model("holding")
    assert sorted(int(a.infer_response.id) for a in answers) == list(range(count))
    assert not any(a.error_message for a in answers)


def _native_stream_infers(frontend):
    native = frontend._native
    return None if native is None else native.native_stream_infers


def _raw_request(model, request_id="", version="", outputs=(), **inputs):
    request = service_pb2.ModelInferRequest(model_name=model, id=request_id, model_version=version)
    for name, array in inputs.items():
        request.inputs.add(name=name, datatype=_datatype(array), shape=list(array.shape))
        request.raw_input_contents.append(array.tobytes())
    for name in outputs:
        request.outputs.add(name=name)
    return request


def _twice_given(typed: bool):
    """identity_fp32 with INPUT0 given twice (1.0, then 2.0)."""
    request = service_pb2.ModelInferRequest(model_name="identity_fp32")
    for value in (1.0, 2.0):
        tensor = request.inputs.add(name="INPUT0", datatype="FP32", shape=[1])
        if typed:
            tensor.contents.fp32_contents.append(value)
        else:
            request.raw_input_contents.append(numpy.float32(value).tobytes())
    return request


def _twice_given_answers(url: str) -> list:
    """ModelInfer's (code, details) and ModelStreamInfer's messages (then
    a good one's) for _twice_given, raw and typed."""
    answers = []
    with grpc.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for typed in (False, True):
            with pytest.raises(grpc.RpcError) as caught:
                stub.ModelInfer(_twice_given(typed), timeout=60)
            answers.append((caught.value.code(), caught.value.details()))
            good = _raw_request("identity_fp32", "good", INPUT0=numpy.ones(1, numpy.float32))
            answers.append([(r.error_message, r.infer_response.id)
                            for r in stub.ModelStreamInfer(iter([_twice_given(typed), good]), timeout=60)])
    return answers


def _without_request_id(text: str) -> str:
    return text.removeprefix("[request id: <id_unknown>] ")


def test_an_input_given_twice_is_refused_as_by_the_binary(served):
    """INVALID_ARGUMENT (an error message in a stream, which goes on), on
    either transport, raw or typed contents: not one of the two silently.
    The binary's answers are the same (the test below compares them)."""
    answers = _twice_given_answers(served[2])
    for unary, stream in zip(answers[::2], answers[1::2]):
        assert unary[0] == grpc.StatusCode.INVALID_ARGUMENT
        assert unary[1].startswith("input 'INPUT0' already exists in request")
        assert "identity_fp32" in unary[1]
        assert stream == [(unary[1], ""), ("", "good")]


def test_an_input_given_twice_gets_the_binarys_answer(served):
    import common

    flags = ["--model-control-mode", "explicit", "--load-model=identity_fp32"]
    with common.server_process(common.reference_command(), common.MODELS, flags) as binary:
        theirs = _twice_given_answers(binary.grpc_url)
    ours = _twice_given_answers(served[2])
    for mine, binarys in zip(ours[::2], theirs[::2]):  # ModelInfer: the binary's code and words, then the fix
        assert mine[0] == binarys[0] and mine[1].startswith(_without_request_id(binarys[1])), (mine, binarys)
    for mine, binarys in zip(ours[1::2], theirs[1::2]):
        assert [(bool(error), id) for error, id in mine] == [(bool(error), id) for error, id in binarys]
        assert mine[0][0].startswith(_without_request_id(binarys[0][0]))


def test_stream_messages_served_natively_answer_as_the_servicer(served, transport):
    """ModelStreamInfer's plain messages (raw inputs, a model that is not
    decoupled) are served by the native transport without the servicer
    (counted), and each answer is the servicer's for the same request: the
    same stream sent with triton_grpc_error (which keeps every message on
    the servicer) gives equal messages; a model's error reads as the
    servicer words it (a typed-contents twin, which the native path leaves
    to the servicer, fails the same way)."""
    server, frontend, url = served
    server.load("raise_error")
    one = numpy.array([1, 2], numpy.float32)
    plain = [
        _raw_request("add_sub", "a", INPUT0=one, INPUT1=one),
        _raw_request("add_sub", "", "1", INPUT0=one * 3, INPUT1=one),
        _raw_request("add_sub", "c", outputs=["OUTPUT1"], INPUT0=one, INPUT1=one * 5),
        _raw_request("identity_fp32", "d", INPUT0=numpy.zeros(0, numpy.float32)),
        _raw_request("bound_add", "e", A=numpy.arange(3, dtype=numpy.int32), B=numpy.ones(3, numpy.int32)),
    ]
    failing = _raw_request("raise_error", "f", INPUT0=one)
    typed = service_pb2.ModelInferRequest(model_name="raise_error", id="f")
    typed.inputs.add(name="INPUT0", datatype="FP32", shape=[2]).contents.fp32_contents.extend([1, 2])
    with grpc.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        before = _native_stream_infers(frontend)
        native = {r.infer_response.id: r for r in stub.ModelStreamInfer(iter(plain + [failing]), timeout=60)}
        served_natively = _native_stream_infers(frontend)
        by_servicer = {r.infer_response.id: r
                       for r in stub.ModelStreamInfer(iter(plain), metadata=[("triton_grpc_error", "true")], timeout=60)}
        [twin] = list(stub.ModelStreamInfer(iter([typed]), timeout=60))
    if transport == "native":
        assert served_natively - before == len(plain) + 1
        assert _native_stream_infers(frontend) == served_natively  # the other two streams: the servicer's
    assert set(native) == {"a", "", "c", "d", "e", "f"}
    for key, answer in by_servicer.items():
        assert native[key] == answer, key
    assert native["c"].infer_response.outputs[0].name == "OUTPUT1" and len(native["c"].infer_response.outputs) == 1
    assert native["f"].error_message and native["f"] == twin


def test_decoupled_stream_messages_served_natively_answer_as_the_servicer(served, transport):
    """A decoupled model's plain stream messages are served natively too
    (counted): every response with outputs a message, an error a message,
    the empty final response a message only when the request asks
    (triton_enable_empty_final_response), each with its
    triton_final_response; each request's messages equal, in order, what
    the servicer answers for the same requests (sent with a request
    parameter, which keeps a stream on the servicer)."""
    server, frontend, url = served

    def failing(N):
        yield {"OUT": numpy.array([7], numpy.int32)}
        raise ValueError(f"failing after one response of {int(N[0])}")

    server.bind("bound_failing", failing, inputs=[TensorSpec("N", numpy.int32, (1,))],
                outputs=[TensorSpec("OUT", numpy.int32, (1,))])

    def request(model, request_id, empty_final=None, tagged=False, **inputs):
        message = _raw_request(model, request_id, **inputs)
        if empty_final is not None:
            message.parameters["triton_enable_empty_final_response"].bool_param = empty_final
        if tagged:
            message.parameters["tag"].string_param = "servicer"
        return message

    def stream(tagged):
        requests = [
            request("bound_count", "a", N=numpy.array([3], numpy.int32), tagged=tagged),
            request("bound_count", "b", True, N=numpy.array([2], numpy.int32), tagged=tagged),
            request("bound_count", "c", True, N=numpy.array([0], numpy.int32), tagged=tagged),
            request("streaming", "d", False, COUNT=numpy.array([4], numpy.int32), tagged=tagged),
            request("bound_failing", "e", True, N=numpy.array([1], numpy.int32), tagged=tagged),
            request("add_sub", "f", INPUT0=numpy.ones(2, numpy.float32), INPUT1=numpy.ones(2, numpy.float32),
                    tagged=tagged),
        ]
        with grpc.insecure_channel(url) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            answers: dict = {}
            for answer in stub.ModelStreamInfer(iter(requests), timeout=60):
                answers.setdefault(answer.infer_response.id, []).append(answer)
        return answers

    try:
        before = _native_stream_infers(frontend)
        native = stream(tagged=False)
        served_natively = _native_stream_infers(frontend)
        by_servicer = stream(tagged=True)
    finally:
        server.unload("bound_failing")
    if transport == "native":
        assert served_natively - before == 6
        assert _native_stream_infers(frontend) == served_natively
    assert native == by_servicer
    final = [[a.infer_response.parameters["triton_final_response"].bool_param for a in native[key]]
             for key in "abcdef"]
    assert final == [[False] * 3, [False] * 2 + [True], [True], [False] * 4, [False, True], [True]]
    assert native["c"][0].infer_response.model_name == "bound_count" and not native["c"][0].infer_response.outputs
    assert "failing after one response of 1" in native["e"][1].error_message


def test_a_stream_ends_after_its_answers(served, transport):
    """The client half-closes at once; the stream's status comes only after
    the answers of its requests, the natively served ones included (the
    servicer, which saw none of them, gives its status first)."""
    server, frontend, url = served
    server.load("sleep")
    requests = [_raw_request("sleep", str(i), SECONDS=numpy.array([0.2], numpy.float32)) for i in range(3)]
    with grpc.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        answers = list(stub.ModelStreamInfer(iter(requests), timeout=60))
    assert sorted(a.infer_response.id for a in answers) == ["0", "1", "2"]
    assert all(not a.error_message for a in answers)


def test_a_stream_of_messages_larger_than_its_window_and_backlog_flows(served):
    """ModelStreamInfer with 20 MiB requests and responses (past the 4 MiB
    stream window the native transport announces, and the 16 MiB backlog
    past which a call stops reading): read as they come, all arrive."""
    count, size = 3, 20 * 1024 * 1024 // 4

    def requests():
        for i in range(count):
            request = service_pb2.ModelInferRequest(model_name="identity_fp32", id=str(i))
            request.inputs.add(name="INPUT0", datatype="FP32", shape=[size])
            request.raw_input_contents.append(numpy.full(size, i, numpy.float32).tobytes())
            yield request

    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    with grpc.insecure_channel(served[2], options=options) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        got = [(int(r.infer_response.id), numpy.frombuffer(r.infer_response.raw_output_contents[0], numpy.float32))
               for r in stub.ModelStreamInfer(requests(), timeout=120)]
    # in order (the model has one instance), though the first may be served
    # natively and the next by the servicer (the stream's backlog full)
    assert [(i, y.size, float(y[0]), float(y[-1])) for i, y in got] == [(i, size, i, i) for i in range(count)]


def test_a_stream_submits_its_messages_in_order(served):
    """A stream's messages reach the core in the order sent, whichever path
    serves each (messages the native path takes, plain ones, alternate with
    ones it leaves to the servicer, with a request parameter), and their
    answers are written in the order sent, as from NVIDIA's binary (the
    model is not decoupled)."""
    one, count = numpy.ones(4, numpy.float32), 300

    def requests():
        for i in range(count):
            request = _raw_request("identity_fp32", str(i), INPUT0=one * i)
            if i % 3 == 0:
                request.parameters["tag"].string_param = "servicer"
            yield request

    with grpc.insecure_channel(served[2]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        answers = list(stub.ModelStreamInfer(requests(), timeout=60))
    assert [a.error_message for a in answers] == [""] * count
    assert [a.infer_response.id for a in answers] == [str(i) for i in range(count)]


ACCUMULATOR_MODEL = """
import numpy
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            sequence = int(pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy()[0])
            if pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0]:
                self.sums[sequence] = 0
            self.sums[sequence] += int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0])
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT", numpy.array([self.sums[sequence]], numpy.int32))]))
        return responses
"""


def test_sequences_over_one_stream_answer_each_step_in_order(served, client):
    """Two sequences interleaved on one stream (tritonclient's start_stream
    and async_stream_infer with sequence_id/start/end, as NVIDIA's sequence
    stream example sends them) to an accumulating model: each step's answer
    is the running sum, and each sequence's answers come in step order (the
    example matches answers to steps by arrival; request ids name the
    sequence only)."""
    config = json.dumps({
        "backend": "python", "max_batch_size": 0,
        "sequence_batching": {"max_sequence_idle_microseconds": 10000000, "control_input": [
            {"name": "START", "control": [{"kind": "CONTROL_SEQUENCE_START", "int32_false_true": [0, 1]}]},
            {"name": "CORRID", "control": [{"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}]}]},
        "input": [{"name": "INPUT", "data_type": "TYPE_INT32", "dims": [1]}],
        "output": [{"name": "OUTPUT", "data_type": "TYPE_INT32", "dims": [1]}]})
    client.load_model("accumulator", config=config, files={"file:1/model.py": ACCUMULATOR_MODEL.encode()})
    steps = 80
    answers: "queue.SimpleQueue" = queue.SimpleQueue()
    try:
        client.start_stream(callback=lambda result, error: answers.put((result, error)))
        try:
            for step in range(steps):
                for sequence in (1001, 1002):
                    value = numpy.array([step if sequence == 1001 else 2 * step], numpy.int32)
                    client.async_stream_infer("accumulator", [_input("INPUT", value)], request_id=str(sequence),
                                              sequence_id=sequence, sequence_start=step == 0,
                                              sequence_end=step == steps - 1)
            got: dict = {"1001": [], "1002": []}
            for _ in range(2 * steps):
                result, error = answers.get(timeout=60)
                assert error is None, error
                got[result.get_response().id].append(int(result.as_numpy("OUTPUT")[0]))
        finally:
            client.stop_stream()
    finally:
        client.unload_model("accumulator")
    sums = [sum(range(step + 1)) for step in range(steps)]
    assert got == {"1001": sums, "1002": [2 * total for total in sums]}


class Gate:
    """A bound model that is not decoupled and answers each request only
    once the test opens it (`opened`), so that it is a stream's earlier
    request still in the core while later ones are answered."""

    def __init__(self, server, name):
        self.opened = threading.Event()
        self.name = name
        server.bind(name, self, inputs=[TensorSpec("X", numpy.float32, (-1,))],
                    outputs=[TensorSpec("Y", numpy.float32, (-1,))])

    def __call__(self, X):
        self.opened.wait(60)
        return {"Y": X}


def _inference_count(server, model):
    return server.model(model).statistics()["model_stats"][0]["inference_count"]


def _tagged(request):
    """`request` with a request parameter: the native transport leaves it
    (and the stream's later messages) to the servicer."""
    request.parameters["tag"].string_param = "servicer"
    return request


@pytest.mark.parametrize("route", ["plain", "servicer", "mixed"])
def test_a_stream_answers_a_model_that_is_not_decoupled_in_request_order(served, route):
    """As the binary (src/grpc/stream_infer_handler.cc queues a request of
    a model that is not decoupled as it reads it and writes the queue's
    head only): an earlier request still in the core holds back the answer
    of a later one already done, and a decoupled model's responses are
    written as they come. Each route: plain messages (on the native
    transport, served by it), every message with a request parameter (by
    the servicer), or the held request plain and the later ones by the
    servicer (whose answer waits behind the native transport's own)."""
    server, frontend, url = served
    gate = Gate(server, f"gated_{route}")
    one = numpy.ones(2, numpy.float32)
    held = _raw_request(gate.name, "held", X=one)
    decoupled = _raw_request("streaming", "d", COUNT=numpy.array([2], numpy.int32))
    later = _raw_request("identity_fp32", "a", INPUT0=one)
    if route == "servicer":
        held = _tagged(held)
    if route in ("servicer", "mixed"):
        decoupled, later = _tagged(decoupled), _tagged(later)
    answered = _inference_count(server, "identity_fp32")
    native_before = _native_stream_infers(frontend)
    try:
        with grpc.insecure_channel(url) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            answers = stub.ModelStreamInfer(iter([held, decoupled, later]), timeout=60)
            first = [next(answers), next(answers)]  # the decoupled model's, the held request still in the core
            assert wait_for(lambda: _inference_count(server, "identity_fp32") == answered + 1, 30)
            gate.opened.set()
            rest = list(answers)
    finally:
        gate.opened.set()
    if native_before is not None:  # how many the native transport served itself
        assert _native_stream_infers(frontend) - native_before == {"plain": 3, "servicer": 0, "mixed": 1}[route]
    assert [(a.error_message, a.infer_response.id) for a in first + rest] == [
        ("", "d"), ("", "d"), ("", "held"), ("", "a")]
    assert numpy.frombuffer(rest[1].infer_response.raw_output_contents[0], numpy.float32).tolist() == [1, 1]


def test_triton_grpc_error_ends_a_stream_at_a_models_error_only(served):
    """With the metadata triton_grpc_error: true, a request refused before
    the model runs (the binary's errors of issuing it: an unknown model, an
    input's byte size, a missing input) is a message with error_message
    and the stream goes on, ending OK; the model's error ends the stream
    with its status at once, before the answers of earlier requests still
    in the core, as the binary's StreamInferResponseComplete finishes it."""
    server, _, url = served
    server.load("raise_error")
    one = numpy.ones(2, numpy.float32)
    refused = [
        _raw_request("no_such_model", "c", INPUT0=one),
        _raw_request("identity_fp32", "b", INPUT0=one),
        service_pb2.ModelInferRequest(model_name="streaming", id="x"),
        _raw_request("identity_fp32", "a", INPUT0=one),
    ]
    refused[1].inputs[0].shape[:] = [3]
    metadata = [("triton_grpc_error", "true")]
    with grpc.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        answers = list(stub.ModelStreamInfer(iter(refused), metadata=metadata, timeout=60))
        assert [a.infer_response.id for a in answers] == ["c", "b", "x", "a"]
        assert [bool(a.error_message) for a in answers] == [True, True, True, False]
        assert "no_such_model" in answers[0].error_message
        assert answers[1].error_message.startswith("[request id: b] input byte size mismatch for input 'INPUT0'")
        assert "missing required input(s) ['COUNT']" in answers[2].error_message
        gate = Gate(server, "gated_grpc_error")
        try:
            failing = [_raw_request(gate.name, "held", X=one), _raw_request("raise_error", "r", INPUT0=one),
                       _raw_request("identity_fp32", "a", INPUT0=one)]
            calls = stub.ModelStreamInfer(iter(failing), metadata=metadata, timeout=60)
            with pytest.raises(grpc.RpcError) as caught:
                list(calls)
            assert not gate.opened.is_set()  # ended with the held request still in the core
        finally:
            gate.opened.set()
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert caught.value.details() == "raise_error model: deliberate failure"


def _stream_answers(url, requests, metadata=None):
    """A stream's messages as (error_message, id, model_name), then its end
    as ("END", code name)."""
    out = []
    with grpc.insecure_channel(url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            for answer in stub.ModelStreamInfer(iter(requests), metadata=metadata, timeout=60):
                out.append((answer.error_message, answer.infer_response.id, answer.infer_response.model_name))
            out.append(("END", "OK"))
        except grpc.RpcError as error:
            out.append(("END", error.code().name))
    return out


def test_stream_order_and_triton_grpc_error_as_the_binary(served):
    """The same streams to NVIDIA's binary and to this server give the same
    messages in the same order and end the same: a slow request's answer
    before a later one's, a decoupled model's before both; errors of
    issuing a request in the stream under triton_grpc_error, a model's
    error ending it."""
    import common

    server = served[0]
    for name in ("sleep", "raise_error"):
        server.load(name)
    one = numpy.ones(2, numpy.float32)
    slow = _raw_request("sleep", "slow", SECONDS=numpy.ones(1, numpy.float32))
    later = _raw_request("identity_fp32", "a", INPUT0=one)
    decoupled = service_pb2.ModelInferRequest(model_name="streaming", id="d")
    decoupled.inputs.add(name="COUNT", datatype="INT32", shape=[1]).contents.int_contents.append(2)
    mismatch = _raw_request("identity_fp32", "b", INPUT0=one)
    mismatch.inputs[0].shape[:] = [3]
    metadata = [("triton_grpc_error", "true")]
    streams = [
        ([slow, later], None),
        ([slow, decoupled, later], None),
        ([slow, _raw_request("no_such_model", "c", INPUT0=one), later], None),
        # (a decoupled model's refusal is left out: the binary's answer to
        # it varies from run to run, the message then the next answer and
        # OK, or UNAVAILABLE, or the stream left open with the next answer
        # unwritten; test_triton_grpc_error_ends_a_stream_at_a_models_error_only
        # checks this server's)
        ([mismatch, _raw_request("no_such_model", "c", INPUT0=one), later], metadata),
        ([_raw_request("raise_error", "r", INPUT0=one), later], metadata),
    ]
    flags = ["--model-control-mode", "explicit"] + [f"--load-model={name}" for name in
                                                    ("identity_fp32", "streaming", "sleep", "raise_error")]
    with common.server_process(common.reference_command(), common.MODELS, flags) as binary:
        theirs = [_stream_answers(binary.grpc_url, requests, metadata) for requests, metadata in streams]
    ours = [_stream_answers(served[2], requests, metadata) for requests, metadata in streams]
    for mine, binarys in zip(ours, theirs):
        assert [entry[1:] for entry in mine] == [entry[1:] for entry in binarys]
        for (error, *_), (expected, *_) in zip(mine, binarys):
            assert error.startswith(expected), (error, expected)
    assert [entry[1] for entry in ours[1]] == ["d", "d", "slow", "a", "OK"]


def test_model_infer_refuses_decoupled_models(client):
    status, message = _code(lambda: client.infer("streaming", [_input("COUNT", numpy.array([1], numpy.int32))]))
    assert status == "StatusCode.UNIMPLEMENTED"
    assert message == "ModelInfer RPC doesn't support models with decoupled transaction policy"


def test_errors_have_the_binarys_status_codes(served, client):
    server = served[0]
    # unknown model: the core's class, as the binary maps it
    status, message = _code(lambda: client.infer("no_such_model", _add_sub_inputs([1], [1])))
    try:
        server.model("no_such_model").transaction_properties()
    except tritonserver.TritonError as error:
        expected = {tritonserver.InvalidArgumentError: "INVALID_ARGUMENT",
                    tritonserver.NotFoundError: "NOT_FOUND"}[type(error)]
    assert status == f"StatusCode.{expected}" and "no_such_model" in message
    # bad input: raw data of the wrong size (the core's check, as in the binary)
    with grpc.insecure_channel(served[2]) as channel:
        request = service_pb2.ModelInferRequest(model_name="add_sub")
        request.inputs.add(name="INPUT0", datatype="FP32", shape=[3])
        request.inputs.add(name="INPUT1", datatype="FP32", shape=[3])
        request.raw_input_contents.extend([b"\x00" * 8, b"\x00" * 12])
        with pytest.raises(grpc.RpcError) as caught:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "INPUT0" in caught.value.details()
    # a reserved parameter (sent raw: newer tritonclients refuse it before sending)
    with grpc.insecure_channel(served[2]) as channel:
        request = service_pb2.ModelInferRequest(model_name="add_sub")
        for name in ("INPUT0", "INPUT1"):
            request.inputs.add(name=name, datatype="FP32", shape=[1])
        request.raw_input_contents.extend([b"\x00" * 4, b"\x00" * 4])
        request.parameters["triton_x"].bool_param = True
        with pytest.raises(grpc.RpcError) as caught:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "reserved for Triton usage" in caught.value.details()
    status, message = _code(lambda: client.get_model_metadata("add_sub", model_version="x"))
    assert status == "StatusCode.INVALID_ARGUMENT" and "failed to get model version" in message
    status, message = _code(lambda: client.get_inference_statistics("no_such_model"))
    assert status == "StatusCode.INVALID_ARGUMENT"
    status, message = _code(lambda: client.get_trace_settings())
    assert status == "StatusCode.UNAVAILABLE" and "does not support trace" in message
    for name, handle, size in (("c", b"\x00" * 64, 16), ("", b"", 0)):  # the binary's code and words, then why
        status, message = _code(lambda: client.register_cuda_shared_memory(name, handle, 0, size))
        assert status == "StatusCode.INVALID_ARGUMENT", message
        assert message.startswith("failed to register shared memory region: invalid args: ") and \
            "GPUs not supported" in message
    # a key shm_open would not open: INTERNAL, the binary's words, then why (was INVALID_ARGUMENT)
    status, message = _code(lambda: client.register_system_shared_memory("", "", 0))
    assert status == "StatusCode.INTERNAL" and message.startswith("Unable to open shared memory region: '': ")
    assert client.get_cuda_shared_memory_status(as_json=True) == {}
    status, _ = _code(lambda: client.get_cuda_shared_memory_status("c"))
    assert status == "StatusCode.NOT_FOUND"
    assert client.is_server_ready()  # and it keeps serving


def test_log_settings_get_and_update(client):
    settings = client.get_log_settings(as_json=True)["settings"]
    assert set(settings) == {"log_file", "log_info", "log_warning", "log_error", "log_verbose_level", "log_format"}
    updated = client.update_log_settings({"log_format": "ISO8601"}, as_json=True)["settings"]
    assert updated["log_format"]["string_param"] == "ISO8601"
    client.update_log_settings({"log_format": "default"})
    status, message = _code(lambda: client.update_log_settings({"log_file": "/tmp/x"}))
    assert status == "StatusCode.UNIMPLEMENTED" and "log file location" in message
    status, message = _code(lambda: client.update_log_settings({"log_format": "fancy"}))
    assert status == "StatusCode.INVALID_ARGUMENT" and "invalid argument for log_format, got: fancy" == message


def test_system_shared_memory_inputs_and_outputs(served, client):
    from multiprocessing import shared_memory

    region = shared_memory.SharedMemory(f"grpc_test_{id(client)}", create=True, size=64)
    key = "/" + region.name
    memory = numpy.ndarray((16,), numpy.float32, region.buf)
    try:
        memory[:4] = [1, 2, 3, 4]
        client.register_system_shared_memory("io", key, 64)
        status = client.get_system_shared_memory_status(as_json=True)["regions"]["io"]
        assert status["key"] == key and int(status["byte_size"]) == 64
        def shm_inputs(offset=0):
            inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), _input("INPUT1", numpy.ones(4, numpy.float32))]
            inputs[0].set_shared_memory("io", 16, offset=offset)
            return inputs

        def shm_outputs(byte_size):
            outputs = [grpcclient.InferRequestedOutput("OUTPUT0"), grpcclient.InferRequestedOutput("OUTPUT1")]
            outputs[0].set_shared_memory("io", byte_size, offset=32)
            return outputs

        result = client.infer("add_sub", shm_inputs(), outputs=shm_outputs(16))
        assert memory[8:12].tolist() == [2, 3, 4, 5]
        assert result.as_numpy("OUTPUT1").tolist() == [0, 1, 2, 3]
        # offsets outside the region: INVALID_ARGUMENT, the binary's text
        code, message = _code(lambda: client.infer("add_sub", shm_inputs(offset=56)))
        assert code == "StatusCode.INVALID_ARGUMENT"
        assert message == "Invalid offset + byte size for shared memory region: 'io'"
        # an output region too small: INTERNAL, the binary's text
        code, message = _code(lambda: client.infer("add_sub", shm_inputs(), outputs=shm_outputs(8)))
        assert code == "StatusCode.INTERNAL" and "should be at least 16 bytes" in message, message
        code, _ = _code(lambda: client.register_system_shared_memory("io", key, 64))
        assert code == "StatusCode.ALREADY_EXISTS"
        code, _ = _code(lambda: client.register_system_shared_memory("bad", "/etc/passwd", 64))
        assert code == "StatusCode.INTERNAL"  # the binary's: shm_open does not open it
        client.unregister_system_shared_memory("io")
        assert client.get_system_shared_memory_status(as_json=True) == {}
        code, message = _code(lambda: client.infer("add_sub", shm_inputs()))
        assert code == "StatusCode.NOT_FOUND" and message == "Unable to find shared memory region: 'io'"
    finally:
        client.unregister_system_shared_memory()
        del memory
        region.close()
        region.unlink()


def test_grpc_health_v1_check(served):
    with grpc.insecure_channel(served[2]) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        answer = stub.Check(health_pb2.HealthCheckRequest(service=""))
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_one_inference_proto_package_beside_tritonclient():
    """The service runs on tritonclient's generated modules: this process
    imported tritonclient.grpc (above) and serves, with one copy of the
    `inference` package's descriptors."""
    from google.protobuf import descriptor_pool

    from tritonserver._kserve.grpc_service import generated_modules

    pb, _, _ = generated_modules()
    assert pb is service_pb2
    assert descriptor_pool.Default().FindFileByName("grpc_service.proto") is service_pb2.DESCRIPTOR
    assert not [name for name in sys.modules if name.startswith("tritonserver") and name.endswith("_pb2")]


# -- cancellation and stopping ----------------------------------------------------

def _cancellation_seen(server):
    cancellable = server.cancellable
    assert wait_for(cancellable.saw_cancel.is_set, 30), "the bound function never saw its request cancelled"
    cancellable.started.clear()
    cancellable.saw_cancel.clear()


def test_a_cancelled_stream_cancels_its_request_in_the_core(served):
    server, _, url = served
    with grpcclient.InferenceServerClient(url) as c:
        c.start_stream(callback=lambda result, error: None)
        c.async_stream_infer("bound_endless", [_input("X", numpy.zeros(1, numpy.float32))])
        assert server.cancellable.started.wait(30)
        c.stop_stream(cancel_requests=True)
    _cancellation_seen(server)


def test_a_client_that_goes_away_cancels_its_request(served):
    server, _, url = served
    channel = grpc.insecure_channel(url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    request = service_pb2.ModelInferRequest(model_name="bound_endless")
    request.inputs.add(name="X", datatype="FP32", shape=[1]).contents.fp32_contents.append(0)
    calls = stub.ModelStreamInfer(iter([request]))
    next(calls)  # the first response came: the request runs
    channel.close()  # the connection goes
    _cancellation_seen(server)


@pytest.mark.parametrize("data", ["typed", "raw"])
def test_a_cancelled_future_cancels_its_request(served, data):
    """ModelInfer of a model that waits (the python `sleep` model in the
    stub would not look; a bound function waiting on cancellation does):
    the client's future.cancel() reaches the core (raw inputs: on the
    native transport, its native ModelInfer path)."""
    server, frontend, url = served
    release = threading.Event()
    seen = threading.Event()
    entered = threading.Event()

    def wait(X, context):
        entered.set()
        while not context.cancelled() and not release.is_set():
            time.sleep(0.005)
        if context.cancelled():
            seen.set()
        return {"Y": X}

    server.bind("bound_wait", wait, inputs=[TensorSpec("X", numpy.float32, (1,))],
                outputs=[TensorSpec("Y", numpy.float32, (1,))])
    try:
        with grpc.insecure_channel(url) as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            request = service_pb2.ModelInferRequest(model_name="bound_wait")
            if data == "typed":
                request.inputs.add(name="X", datatype="FP32", shape=[1]).contents.fp32_contents.append(0)
            else:
                request.inputs.add(name="X", datatype="FP32", shape=[1])
                request.raw_input_contents.append(b"\0" * 4)
            before = _native_infers(frontend)
            future = stub.ModelInfer.future(request)
            assert entered.wait(30)  # the function runs
            if before is not None:
                assert _native_infers(frontend) == before + (data == "raw")
            assert future.cancel()
            assert seen.wait(30), "the bound function never saw the cancellation"
    finally:
        release.set()
        server.unbind("bound_wait", timeout=30)


def test_stop_lets_an_rpc_in_flight_finish(served, transport):
    server = served[0]
    release = threading.Event()
    entered = threading.Event()

    def slow(X):
        entered.set()
        release.wait(30)
        return {"Y": X + 1}

    server.bind("bound_slow", slow, inputs=[TensorSpec("X", numpy.float32, (1,))],
                outputs=[TensorSpec("Y", numpy.float32, (1,))])
    try:
        frontend = KServeGrpc(server, KServeGrpc.Options(address="127.0.0.1", port=0, transport=transport))
        frontend.start()
        c = grpcclient.InferenceServerClient(f"127.0.0.1:{frontend.port}")
        results: queue.Queue = queue.Queue()
        c.async_infer("bound_slow", [_input("X", numpy.zeros(1, numpy.float32))],
                      callback=lambda result, error: results.put((result, error)))
        assert entered.wait(30)
        stopper = threading.Thread(target=frontend.stop)
        stopper.start()

        def refused():
            try:
                socket.create_connection(("127.0.0.1", frontend.port), timeout=5).close()
            except (ConnectionRefusedError, ConnectionResetError):  # grpcio's socket may reset as it closes
                return True
            return False

        assert wait_for(refused, 30)  # no longer listening
        # a new call on the open connection is refused too (GOAWAY), not served: UNAVAILABLE as from
        # the binary; grpcio's server, shutting down, answers a call that races its GOAWAY CANCELLED
        refusals = {"StatusCode.UNAVAILABLE"} | ({"StatusCode.CANCELLED"} if transport == "grpcio" else set())
        assert _code(lambda: c.is_server_live())[0] in refusals
        # stop() is waiting on the call in flight: it has not returned
        assert stopper.is_alive()
        release.set()
        stopper.join(60)
        assert not stopper.is_alive()
        result, error = results.get(timeout=30)
        assert error is None and result.as_numpy("Y").tolist() == [1]
        c.close()
    finally:
        release.set()
        server.unbind("bound_slow", timeout=30)


# -- options -----------------------------------------------------------------------

def test_restricted_protocols_need_their_header(served, transport):
    server = served[0]
    # the binary's flag text, and the serve command's triples
    assert (KServeGrpc.Options(restricted_protocols=["model-repository,health:admin=yes"]).restrictions
            == KServeGrpc.Options(restricted_protocols=[("model-repository,health", "admin", "yes")]).restrictions)
    with kserve_grpc(server, restricted_protocols=["model-repository,health:admin=yes"],
                     transport=transport) as frontend:
        url = f"127.0.0.1:{frontend.port}"
        with grpcclient.InferenceServerClient(url) as c:
            status, message = _code(lambda: c.get_model_repository_index())
            assert status == "StatusCode.UNAVAILABLE"
            assert message == "This protocol is restricted, expecting header 'triton-grpc-protocol-admin'"
            assert _code(lambda: c.is_server_live())[0] == "StatusCode.UNAVAILABLE"
            assert c.get_model_repository_index(headers={"triton-grpc-protocol-admin": "yes"}).models
            assert c.is_server_live(headers={"triton-grpc-protocol-admin": "yes"})
            assert c.get_model_metadata("add_sub").name == "add_sub"  # metadata: not restricted
        with grpc.insecure_channel(url) as channel:
            with pytest.raises(grpc.RpcError) as caught:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_restricted_stream_is_refused_as_it_opens(served, transport):
    """A ModelStreamInfer without the restricted header ends UNAVAILABLE
    before any request is sent, as on the binary (the native transport
    waited for a first message)."""
    with kserve_grpc(served[0], restricted_protocols=["inference:infer-key=yes"], transport=transport) as frontend:
        with grpc.insecure_channel(f"127.0.0.1:{frontend.port}") as channel:
            stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
            never = threading.Event()

            def requests():
                never.wait()  # none sent: the server ends the call meanwhile
                return
                yield

            call = stub.ModelStreamInfer(requests(), timeout=20)  # else DEADLINE_EXCEEDED
            try:
                with pytest.raises(grpc.RpcError) as caught:
                    next(call)
            finally:
                never.set()
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    assert caught.value.details() == "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'"


def test_compressed_infer_responses(served, transport, level):
    """infer_compression_level LOW, MED, HIGH: tritonclient (which accepts
    gzip and deflate) reads the compressed answers of ModelInfer and of a
    stream. On the native transport, as the binary (a raw look at the
    answer's message: the compressed flag, then the encoding's magic): of
    gzip and deflate, those the client's grpc-accept-encoding names, LOW
    the first, MED the middle one, HIGH the last; uncompressed for a client
    that names neither; the other RPCs' answers are never compressed.
    Before, the native transport refused the option."""
    server = served[0]
    with kserve_grpc(server, infer_compression_level=level, transport=transport) as frontend:
        url = f"127.0.0.1:{frontend.port}"
        with grpcclient.InferenceServerClient(url) as c:
            result = c.infer("add_sub", _add_sub_inputs(numpy.zeros(1000), numpy.ones(1000)),
                             compression_algorithm="gzip")
            assert result.as_numpy("OUTPUT0").tolist() == [1.0] * 1000
            got = queue.Queue()
            c.start_stream(callback=lambda result, error: got.put((result, error)))
            try:
                c.async_stream_infer("add_sub", _add_sub_inputs(numpy.zeros(1000), numpy.full(1000, 2.0)))
                result, error = got.get(timeout=60)
            finally:
                c.stop_stream()
            assert error is None and result.as_numpy("OUTPUT0").tolist() == [2.0] * 1000
        if transport == "grpcio":
            return  # grpcio's set_compression picks gzip whatever the client accepts
        expected = _BINARY_RESPONSE_ENCODINGS[level.name]
        before = (frontend._native.native_infers, frontend._native.native_stream_infers)
        for kind in ("unary", "stream", "servicer"):
            assert {accept: _response_encoding(url, accept, kind) for accept in expected} == expected, kind
        # the native paths' answers (their sinks compress them) and the servicer's (the transport does)
        assert frontend._native.native_infers == before[0] + len(expected)
        assert frontend._native.native_stream_infers == before[1] + len(expected)
        live = _raw_call(url, "/inference.GRPCInferenceService/ServerLive", _message(b""),
                         [("grpc-accept-encoding", "identity,deflate,gzip")])
        assert live.status == 0 and live.data[:1] == b"\x00" and "grpc-encoding" not in live.headers


# What NVIDIA's 2.51 binary answers at each --grpc-infer-response-compression-level
# (low, medium, high) to a client whose grpc-accept-encoding is each key:
# the encoding of its ModelInfer answer (test_compression_as_the_binary
# compares MED).
_BINARY_RESPONSE_ENCODINGS = {
    "LOW": {"identity,deflate,gzip": "gzip", "gzip": "gzip", "deflate": "deflate", "identity": "identity",
            None: "identity"},
    "MED": {"identity,deflate,gzip": "deflate", "gzip": "gzip", "deflate": "deflate", "identity": "identity",
            None: "identity"},
    "HIGH": {"identity,deflate,gzip": "deflate", "gzip": "gzip", "deflate": "deflate", "identity": "identity",
             None: "identity"},
}


@pytest.fixture(params=["LOW", "MED", "HIGH"])
def level(request):
    return KServeGrpc.Grpc_compression_level[request.param]


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests_are_served(served, transport, algorithm):
    """tritonclient's compression_algorithm gzip and deflate (grpc-encoding;
    each message compressed) on ModelInfer and on a stream: served as
    uncompressed ones, on both transports, by the native paths on the
    native one. Before, the native transport refused them UNIMPLEMENTED."""
    server, frontend, url = served
    before = (frontend._native.native_infers, frontend._native.native_stream_infers) if transport == "native" else None
    with grpcclient.InferenceServerClient(url) as c:
        result = c.infer("add_sub", _add_sub_inputs(numpy.zeros(300_000), numpy.ones(300_000)),
                         compression_algorithm=algorithm)
        assert result.as_numpy("OUTPUT0")[:3].tolist() == [1.0] * 3 and len(result.as_numpy("OUTPUT0")) == 300_000
        got = queue.Queue()
        c.start_stream(callback=lambda result, error: got.put((result, error)), compression_algorithm=algorithm)
        try:
            for i in range(3):
                c.async_stream_infer("add_sub", _add_sub_inputs(numpy.zeros(100_000), numpy.full(100_000, i)))
            answers = [got.get(timeout=60) for _ in range(3)]
        finally:
            c.stop_stream()
        assert [(error, result.as_numpy("OUTPUT0")[0]) for result, error in answers] == [(None, i) for i in range(3)]
        assert c.get_model_metadata("add_sub").name == "add_sub"  # the other RPCs read as before
    # any RPC's message may be compressed (the servicer's, here)
    request = service_pb2.ModelMetadataRequest(name="add_sub").SerializeToString()
    packed = gzip.compress(request) if algorithm == "gzip" else zlib.compress(request)
    call = _raw_call(url, "/inference.GRPCInferenceService/ModelMetadata", _message(packed, compressed=True),
                     [("grpc-encoding", algorithm)])
    assert call.status == 0 and service_pb2.ModelMetadataResponse.FromString(call.data[5:]).name == "add_sub"
    if before is not None:
        assert frontend._native.native_infers == before[0] + 1
        assert frontend._native.native_stream_infers == before[1] + 3


def test_compression_refusals_on_the_native_transport(served, transport, monkeypatch):
    """What the native transport refuses of compressed messages, with the
    binary's status codes (test_compression_as_the_binary compares them):
    a grpc-encoding it does not know, INTERNAL (the binary resets the
    stream INTERNAL_ERROR), naming what it accepts; a compressed message
    on a call without grpc-encoding, INTERNAL; one that is not gzip,
    INTERNAL with the binary's words; and one under the message limit
    that inflates past it, RESOURCE_EXHAUSTED without being inflated
    further. The connection serves on."""
    if transport != "native":
        pytest.skip("the native transport's own refusals")
    from tritonserver.frontend import _kserve_grpc

    monkeypatch.setattr(_kserve_grpc, "MAX_MESSAGE_BYTES", 1 << 20)
    with kserve_grpc(served[0], transport="native") as frontend:
        url = f"127.0.0.1:{frontend.port}"
        answers = _refusal_answers(url, _bomb(4 << 20))
        assert answers["unknown encoding"][0] == grpc.StatusCode.INTERNAL.value[0]
        assert "grpc-encoding 'snappy' is not an encoding this server decompresses" in answers["unknown encoding"][1]
        assert "identity, deflate, gzip" in answers["unknown encoding"][1]
        assert answers["compressed without encoding"][0] == grpc.StatusCode.INTERNAL.value[0]
        assert "grpc-encoding" in answers["compressed without encoding"][1]
        assert answers["not gzip"] == (grpc.StatusCode.INTERNAL.value[0], answers["not gzip"][1])
        assert answers["not gzip"][1].startswith("Unexpected error decompressing data for algorithm gzip")
        assert answers["past the limit once inflated"] == (
            grpc.StatusCode.RESOURCE_EXHAUSTED.value[0],
            f"Received message larger than max (over {1 << 20} once decompressed vs. {1 << 20})")
        with grpcclient.InferenceServerClient(url) as c:
            assert c.is_server_live()


@pytest.mark.python_stub  # the binary serves add_sub on the stub (numpy<2)
def test_compression_as_the_binary(served, transport, monkeypatch):
    """NVIDIA's binary at --grpc-infer-response-compression-level medium and
    the native transport at MED: the same answers to gzip and deflate
    requests (unary and streamed), the same response encodings for each
    grpc-accept-encoding (a ModelInfer's, a stream's), and the same status codes for a grpc-encoding
    neither knows, a compressed message without one, a message that is not
    gzip, and a message over the limit (2 GiB - 1) once inflated."""
    import common
    from tritonserver.frontend import _kserve_grpc

    if transport != "native":
        pytest.skip("the native transport against the binary")
    bomb = _bomb(2**31 + (32 << 20))
    with common.server_process(common.reference_command(), common.MODELS,
                               ["--model-control-mode", "explicit", "--load-model=add_sub",
                                "--grpc-infer-response-compression-level=medium"]) as binary:
        theirs = _compression_answers(binary.grpc_url, bomb)
    # ours at a limit of 1 MiB: the same refusal, without inflating 2 GiB here
    monkeypatch.setattr(_kserve_grpc, "MAX_MESSAGE_BYTES", 1 << 20)
    with kserve_grpc(served[0], transport="native",
                     infer_compression_level=KServeGrpc.Grpc_compression_level.MED) as frontend:
        ours = _compression_answers(f"127.0.0.1:{frontend.port}", _bomb(4 << 20))
    assert theirs["encodings"] == _BINARY_RESPONSE_ENCODINGS["MED"]
    assert theirs["past the limit once inflated"][0] == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    for key, value in theirs.items():
        if key in _REFUSALS:  # the code; the words: the binary's, or ours naming the cause and the fix
            assert ours[key][0] == value[0], (key, ours[key], value)
        else:
            assert ours[key] == value, key
    assert ours["not gzip"][1].startswith(theirs["not gzip"][1])


_REFUSALS = ("unknown encoding", "compressed without encoding", "not gzip", "past the limit once inflated")


def _compression_answers(url, bomb):
    """What a server at compression level MED answers: tritonclient's gzip
    and deflate requests' results, its answers' encodings for each
    grpc-accept-encoding, and the refusals (_refusal_answers)."""
    answers = {}
    with grpcclient.InferenceServerClient(url) as c:
        for algorithm in ("gzip", "deflate"):
            result = c.infer("add_sub", _add_sub_inputs(numpy.arange(1000), numpy.ones(1000)),
                             compression_algorithm=algorithm)
            answers[f"{algorithm} unary"] = result.as_numpy("OUTPUT1").tolist()
            got = queue.Queue()
            c.start_stream(callback=lambda result, error: got.put((result, error)), compression_algorithm=algorithm)
            try:
                c.async_stream_infer("add_sub", _add_sub_inputs(numpy.arange(1000), numpy.full(1000, 3.0)))
                result, error = got.get(timeout=60)
            finally:
                c.stop_stream()
            answers[f"{algorithm} stream"] = (error, result.as_numpy("OUTPUT0").tolist())
    answers["encodings"] = {accept: _response_encoding(url, accept) for accept in _BINARY_RESPONSE_ENCODINGS["MED"]}
    answers["stream and typed encodings"] = {(kind, accept): _response_encoding(url, accept, kind)
                                             for kind in ("stream", "servicer") for accept in ("gzip", "deflate")}
    answers.update(_refusal_answers(url, bomb))
    return answers


def _refusal_answers(url, bomb):
    """(grpc status code, message) of the compressed messages a server
    refuses: a grpc-encoding it does not know, a compressed message without
    one, one that is not gzip, and `bomb` (gzip)."""
    infer = "/inference.GRPCInferenceService/ModelInfer"
    message = service_pb2.ModelInferRequest(model_name="add_sub").SerializeToString()
    calls = {
        "unknown encoding": _raw_call(url, infer, _message(message), [("grpc-encoding", "snappy")]),
        "compressed without encoding": _raw_call(url, infer, _message(gzip.compress(message), compressed=True)),
        "not gzip": _raw_call(url, infer, _message(zlib.compress(message), compressed=True),
                              [("grpc-encoding", "gzip")]),
        "past the limit once inflated": _raw_call(url, infer, _message(bomb, compressed=True),
                                                  [("grpc-encoding", "gzip")]),
    }
    return {key: (call.status, call.headers.get("grpc-message", "")) for key, call in calls.items()}


def _bomb(size):
    """A gzip stream of `size` zero bytes (about a thousandth of that)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1 << 24)
    parts = [compressor.compress(chunk) for _ in range(size >> 24)]
    return b"".join(parts) + compressor.compress(bytes(size & ((1 << 24) - 1))) + compressor.flush()


def _message(payload, compressed=False):
    """A gRPC message: its prefix (the compressed flag, the length), then `payload`."""
    return bytes([1 if compressed else 0]) + len(payload).to_bytes(4, "big") + payload


def _response_encoding(url, accept, kind="unary"):
    """The encoding of an infer answer (add_sub, compressible) to a client
    whose grpc-accept-encoding is `accept` (None: no such header): "identity"
    for an uncompressed message, else its magic's: "gzip" or "deflate"
    (zlib's format); the grpc-encoding header says the same. `kind`: a
    ModelInfer with raw inputs ("unary"), the same in a ModelStreamInfer
    ("stream"; on the native transport both take its native paths), or a
    ModelInfer with typed contents ("servicer": the servicer's answer)."""
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    for name in ("INPUT0", "INPUT1"):
        tensor = request.inputs.add(name=name, datatype="FP32", shape=[1000])
        if kind == "servicer":
            tensor.contents.fp32_contents.extend([1.0] * 1000)
        else:
            request.raw_input_contents.append(numpy.ones(1000, numpy.float32).tobytes())
    extra = [] if accept is None else [("grpc-accept-encoding", accept)]
    path = "/inference.GRPCInferenceService/" + ("ModelStreamInfer" if kind == "stream" else "ModelInfer")
    call = _raw_call(url, path, _message(request.SerializeToString()), extra)
    assert call.status == 0, call
    body = call.data[5:]
    encoding = "identity" if call.data[0] == 0 else "gzip" if body[:2] == b"\x1f\x8b" else "deflate"
    if encoding != "identity":
        assert call.headers["grpc-encoding"] == encoding
    payload = body if encoding == "identity" else gzip.decompress(body) if encoding == "gzip" else zlib.decompress(body)
    if kind == "stream":
        response = service_pb2.ModelStreamInferResponse.FromString(payload).infer_response
    else:
        response = service_pb2.ModelInferResponse.FromString(payload)
    assert numpy.frombuffer(response.raw_output_contents[0], numpy.float32).tolist() == [2.0] * 1000
    return encoding


class _RawCall:
    """A call's answer as a raw HTTP/2 client saw it: its headers (response
    headers and trailers), its DATA, and its grpc status (a stream reset's
    HTTP/2 error code read as gRPC clients read it)."""

    def __init__(self):
        self.headers, self.data, self.status = {}, b"", None

    def __repr__(self):
        return f"_RawCall(status={self.status}, headers={self.headers}, data={self.data[:20]!r})"


# HTTP/2 error codes of RST_STREAM -> gRPC status, as gRPC clients map them
# (PROTOCOL-HTTP2.md: REFUSED_STREAM UNAVAILABLE, CANCEL CANCELLED,
# ENHANCE_YOUR_CALM RESOURCE_EXHAUSTED, INADEQUATE_SECURITY
# PERMISSION_DENIED, the others INTERNAL).
_RESET_STATUS = {7: 14, 8: 1, 11: 8, 12: 7}


def _raw_call(url, path, data, extra=()):
    """One call of a raw HTTP/2 client on a connection of its own: headers
    (`extra` added), then `data` within the server's flow-control windows;
    returns its _RawCall once the call ends (headers decoded with hpack)."""
    hpack = pytest.importorskip("hpack", reason="hpack (the dependency group test) reads HTTP/2 headers")
    host, port = url.split(":")
    answer, decoder = _RawCall(), hpack.Decoder()
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(60)
        headers = _literal_headers([(":method", "POST"), (":scheme", "http"), (":path", path),
                                    (":authority", "localhost"), ("content-type", "application/grpc"),
                                    ("te", "trailers"), *extra])
        sock.sendall(_PREFACE + _frame(4, 0, 0) + _frame(1, 0x4, 1, headers))
        windows, initial, max_frame, sent, buffer = [65535, 65535], 65535, 16384, 0, b""
        while True:
            while sent < len(data) and min(windows) > 0:
                n = min(max_frame, *windows, len(data) - sent)
                sock.sendall(_frame(0, 0x1 if sent + n == len(data) else 0, 1, data[sent:sent + n]))
                sent += n
                windows = [w - n for w in windows]
            chunk = sock.recv(1 << 20)
            assert chunk, f"the server closed the connection: {answer}"
            buffer += chunk
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                size = int.from_bytes(buffer[:3], "big")
                kind, flags, stream = buffer[3], buffer[4], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                payload, buffer = buffer[9:9 + size], buffer[9 + size:]
                if kind == 4 and not flags & 0x1:  # SETTINGS: acknowledged
                    for at in range(0, len(payload), 6):
                        key = int.from_bytes(payload[at:at + 2], "big")
                        value = int.from_bytes(payload[at + 2:at + 6], "big")
                        if key == 4:
                            windows[1] += value - initial
                            initial = value
                        elif key == 5:
                            max_frame = value
                    sock.sendall(_frame(4, 0x1, 0))
                elif kind == 8:  # WINDOW_UPDATE
                    windows[0 if stream == 0 else 1] += int.from_bytes(payload, "big") & 0x7FFFFFFF
                elif kind == 6 and not flags & 0x1:  # PING
                    sock.sendall(_frame(6, 0x1, 0, payload))
                assert kind != 7, f"the server sent GOAWAY: {answer}"
                if stream != 1:
                    continue
                if kind == 1:
                    block = payload[5:] if flags & 0x20 else payload  # PRIORITY's fields
                    answer.headers.update(decoder.decode(block))
                elif kind == 0:
                    answer.data += payload
                elif kind == 3:
                    answer.status = _RESET_STATUS.get(int.from_bytes(payload, "big"), 13)
                    return answer
                if kind in (0, 1) and flags & 0x1:
                    answer.status = int(answer.headers["grpc-status"])
                    return answer


def test_the_default_transport_is_native_unless_an_option_needs_grpcio():
    """Options() picks the native transport where the build has it (a
    compression level too); an option only grpcio serves (TLS, keepalive) picks grpcio,
    and says so in Options.transport; asked for, native refuses them."""
    from tritonserver.frontend import _native_grpc

    native = "native" if _native_grpc.available() else "grpcio"
    assert KServeGrpc.Options().transport == native
    assert KServeGrpc.Options(port=0, infer_thread_count=4).transport == native
    assert KServeGrpc.Options(infer_compression_level=KServeGrpc.Grpc_compression_level.LOW).transport == native
    for needs_grpcio in (dict(use_ssl=True, server_cert="c", server_key="k"),
                         dict(keepalive_time_ms=1000), dict(max_connection_age_ms=5000)):
        assert KServeGrpc.Options(**needs_grpcio).transport == "grpcio", needs_grpcio
    if native == "native":
        with pytest.raises(tritonserver.InvalidArgumentError, match="keepalive_time_ms 1000 .*transport='grpcio'"):
            KServeGrpc.Options(keepalive_time_ms=1000, transport="native")


def test_bad_options_and_a_port_in_use(served, transport):
    server = served[0]
    for options, field in ((dict(port=-1), "port"), (dict(keepalive_time_ms="1"), "keepalive_time_ms"),
                           (dict(restricted_protocols=["nothing:k=v"]), "restricted_protocols"),
                           (dict(restricted_protocols=["health"]), "restricted_protocols"),
                           (dict(restricted_protocols=["health:a=b", "health:c=d"]),
                            "restricted protocol 'health' can not be specified in multiple config groups"),
                           (dict(restricted_protocols=["model-reposit:a=b"]),
                            "unknown restricted protocol 'model-reposit'"),
                           (dict(forward_header_pattern="x-(?U)a"), "forward_header_pattern 'x-\\(\\?U\\)a' is not a "
                                                                    "regular expression"),
                           (dict(infer_compression_level=7), "infer_compression_level"),
                           (dict(use_ssl=True), "use_ssl")):
        with pytest.raises(tritonserver.InvalidArgumentError, match=field):
            KServeGrpc.Options(**options)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        frontend = KServeGrpc(server, KServeGrpc.Options(address="127.0.0.1", port=port, transport=transport))
        with pytest.raises(tritonserver.UnavailableError, match=f"127.0.0.1:{port}"):
            frontend.start()
    assert frontend.port is None


@pytest.mark.parametrize("re2, python", [
    ("my_header.*", "my_header.*"),
    ("(?-i)MY_HEADER.*", "(?-i:MY_HEADER.*)"),
    ("(?i)(?-i)MY_HEADER.*", "(?i:(?-i:MY_HEADER.*))"),  # what the binary's flag makes of it: "(?i)" first
    ("a(?i)b|c", "a(?i:b)|(?i:c)"),  # to the end of the group: the alternatives after it too
    ("(x(?i)y|z)w", "(x(?i:y)|(?i:z))w"),
    ("(?i)a(?-i)b|c", "(?i:a(?-i:b))|(?i:(?-i:c))"),
    ("(?s:a.b)(?m)^x", "(?s:a.b)(?m:^x)"),  # a scoped group as written
    (r"[(?i)|]\(?i\)", r"[(?i)|]\(?i\)"),  # in a class, escaped: literal
])
def test_re2_inline_flags_become_pythons_scoped_groups(re2, python):
    """A forward pattern is RE2's (the binary's): its inline flag groups
    set flags to the end of their group, which Python writes as scoped
    groups."""
    import re

    from tritonserver._kserve.header_pattern import re2_to_python

    assert re2_to_python(re2) == python
    re.compile(python)


def test_forward_patterns_match_as_re2_does():
    from tritonserver._kserve.header_pattern import compile_header_pattern

    pattern = compile_header_pattern("(?i)(?-i)x-(?i)FWD-A|(?-i)X-FWD-B", "pattern")
    assert [name for name in ("x-fwd-a", "x-FWD-a2", "X-fwd-a", "x-fwd-b", "X-FWD-B") if pattern.search(name)] \
        == ["x-fwd-a", "x-FWD-a2", "X-FWD-B"]
    assert compile_header_pattern("", "pattern") is None
    assert KServeGrpc.Options(forward_header_pattern="(?-i)MY_HEADER.*").forward_header_pattern == "(?-i)MY_HEADER.*"


def test_ssl_and_mutual_authentication(served, tmp_path, transport):
    """use_ssl with a server certificate; use_mutual_auth refuses a client
    without a certificate of root_cert's authority."""
    import shutil
    import subprocess

    if transport == "native":  # no TLS: refused, never ignored
        with pytest.raises(tritonserver.InvalidArgumentError, match="use_ssl .*transport='grpcio'"):
            KServeGrpc.Options(use_ssl=True, server_cert="c", server_key="k", transport=transport)
        return

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make certificates")

    def make(name, *extra):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-keyout", str(tmp_path / f"{name}.key"), "-out", str(tmp_path / f"{name}.crt"),
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", *extra],
                       check=True, capture_output=True)
        return str(tmp_path / f"{name}.key"), str(tmp_path / f"{name}.crt")

    server_key, server_cert = make("server")
    client_key, client_cert = make("client")
    with kserve_grpc(served[0], use_ssl=True, server_cert=server_cert, server_key=server_key) as frontend:
        with grpcclient.InferenceServerClient(f"localhost:{frontend.port}", ssl=True,
                                              root_certificates=server_cert) as c:
            assert c.infer("add_sub", _add_sub_inputs([1], [2])).as_numpy("OUTPUT0").tolist() == [3]
    with kserve_grpc(served[0], use_ssl=True, server_cert=server_cert, server_key=server_key,
                     root_cert=client_cert, use_mutual_auth=True) as frontend:
        url = f"localhost:{frontend.port}"
        with grpcclient.InferenceServerClient(url, ssl=True, root_certificates=server_cert,
                                              private_key=client_key, certificate_chain=client_cert) as c:
            assert c.is_server_live()
        with grpcclient.InferenceServerClient(url, ssl=True, root_certificates=server_cert) as c:
            with pytest.raises(InferenceServerException):
                c.is_server_live()


def test_every_served_models_config_is_a_model_config(served, client):
    for name in (*MODELS_LOADED, "bound_add", "bound_count", "bound_endless"):
        config = client.get_model_config(name, as_json=True)["config"]
        assert config["name"] == name
        assert [i["name"] for i in config["input"]] == [i["name"] for i in served[0].model(name).config()["input"]]


def test_context_manager_and_restart_as_tritonfrontend_is_used(served, transport):
    """As NVIDIA's tritonfrontend docs use it: `with KServeGrpc(server,
    options):`; a stopped frontend starts again."""
    options = KServeGrpc.Options(address="127.0.0.1", port=0, transport=transport)
    frontend = KServeGrpc(served[0], options)
    for _ in range(2):
        with frontend:
            with grpcclient.InferenceServerClient(f"127.0.0.1:{frontend.port}") as c:
                assert c.is_server_live()
    with pytest.raises(tritonserver.InvalidArgumentError, match="KServeGrpc.Options"):
        KServeGrpc(served[0], {"port": 0})


def test_a_region_is_free_to_unregister_once_the_answer_came(served, client):
    """Inputs of 1 MiB in a region are passed to the core without a copy:
    the answer (ModelInfer's, a stream's final response) comes once the core
    let go of them, so the client may unregister the region at once, as
    with the binary (before: 'currently in use' about 4 times in 5)."""
    from multiprocessing import shared_memory

    count = 1 << 18
    region = shared_memory.SharedMemory(f"grpc_free_{id(client)}", create=True, size=count * 4)
    try:
        def inputs():
            made = []
            for name in ("INPUT0", "INPUT1"):
                tensor = grpcclient.InferInput(name, [count], "FP32")
                tensor.set_shared_memory("big", count * 4)
                made.append(tensor)
            return made

        for _ in range(10):
            client.register_system_shared_memory("big", "/" + region.name, count * 4)
            client.infer("add_sub", inputs())
            client.unregister_system_shared_memory("big")
        for _ in range(5):
            client.register_system_shared_memory("big", "/" + region.name, count * 4)
            [(result, error)] = _stream(served[2], [dict(model_name="add_sub", inputs=inputs())], 1)
            assert error is None
            client.unregister_system_shared_memory("big")
    finally:
        client.unregister_system_shared_memory()
        region.close()
        region.unlink()


def _shared_memory_with_a_request_in_flight(command: list[str], tmp_path, flags: list[str] = ()) -> dict:
    """What a server (`command`: the binary or this package's serve) answers
    over gRPC about regions a ModelInfer uses while it is in flight (`gate`
    holds it until the test releases it): its input from region 'in', its
    output into 'out', 'free' unused. Then: a refused request's regions
    are free at once, and a request its client cancelled frees its regions
    (once the model ended, with the binary). Each error is (code name,
    message)."""
    import common
    import tritonclient.utils.shared_memory as shm

    repo, started, release = common.gate_model_repository(tmp_path)

    def answer(call):
        try:
            call()
            return "ok"
        except InferenceServerException as error:
            return (error.status(), _without_request_id(error.message()))

    def request(output_region="out"):
        seconds = grpcclient.InferInput("SECONDS", [1], "FP32")
        seconds.set_shared_memory("in", 4)
        out = grpcclient.InferRequestedOutput("OUT")
        out.set_shared_memory(output_region, 4)
        return {"inputs": [seconds], "outputs": [out]}

    seen: dict = {}
    names = ("in", "out", "free")
    keys = {name: f"/grpc_in_use_{id(seen)}_{tmp_path.name}_{name}" for name in names}
    regions = [shm.create_shared_memory_region(name, keys[name], 4) for name in names]
    with common.server_process(command, repo, flags) as served, \
            grpcclient.InferenceServerClient(served.grpc_url) as client:
        def register(*which):
            for name in which:
                client.register_system_shared_memory(name, keys[name], 4)

        def registered():
            return sorted(client.get_system_shared_memory_status(as_json=True).get("regions", {}))

        try:
            shm.set_shared_memory_region(regions[0], [numpy.array([2.5], numpy.float32)])
            register("out", "in", "free")
            in_flight = threading.Thread(target=lambda: seen.setdefault(
                "in-flight infer", answer(lambda: client.infer("gate", **request(), client_timeout=60))))
            in_flight.start()
            try:
                assert wait_for(started.exists, 60)
                seen["unregister out"] = answer(lambda: client.unregister_system_shared_memory("out"))
                seen["unregister in"] = answer(lambda: client.unregister_system_shared_memory("in"))
                seen["unregister free"] = answer(lambda: client.unregister_system_shared_memory("free"))
                register("free")
                seen["unregister all"] = answer(lambda: client.unregister_system_shared_memory())
                seen["registered while in flight"] = registered()
                seen["request still in flight"] = in_flight.is_alive()
            finally:
                release.touch()
                in_flight.join(60)
            seen["output written"] = shm.get_contents_as_numpy(regions[1], numpy.float32, [1]).tolist()
            seen["unregister all once answered"] = answer(lambda: client.unregister_system_shared_memory())
            # a request refused (its output region unknown) once its input region was taken
            register("in", "out")
            seen["refused infer"] = answer(lambda: client.infer("gate", **request("nope")))[0]
            seen["unregister in once refused"] = answer(lambda: client.unregister_system_shared_memory("in"))
            # a request its client cancels while the model runs
            register("in")
            started.unlink()
            release.unlink()
            call = client.async_infer("gate", callback=lambda *_: None, **request())
            assert wait_for(started.exists, 60)
            call.cancel()
            release.touch()
            seen["regions free once cancelled"] = wait_for(
                lambda: answer(lambda: client.unregister_system_shared_memory()) == "ok", 60)
            seen["registered in the end"] = registered()
        finally:
            for region in regions:
                shm.destroy_shared_memory_region(region)
    return seen


@pytest.mark.python_stub
def test_regions_of_a_request_in_flight_are_in_use_as_the_binarys(tmp_path):
    """A region a ModelInfer in flight reads or writes can not be
    unregistered: INTERNAL "Cannot unregister shared memory region '...',
    it is currently in use." (unregistering all: the others go, and the
    binary's "Failed to unregister the following system shared memory
    regions: in ,out ,"), and the request writes its output into its
    region. The package used to refuse only the inputs (while the core held
    them), with other words, and unregister the output region. On both
    transports."""
    import common

    theirs = _shared_memory_with_a_request_in_flight(common.reference_command(), tmp_path / "binary")
    assert theirs["unregister out"] == (
        "StatusCode.INTERNAL", "Cannot unregister shared memory region 'out', it is currently in use."), theirs
    assert theirs["unregister all"] == (
        "StatusCode.INTERNAL", "Failed to unregister the following system shared memory regions: in ,out ,"), theirs
    assert theirs["output written"] == [1.0] and theirs["request still in flight"], theirs
    for transport in ("native", "grpcio"):
        ours = _shared_memory_with_a_request_in_flight(common.package_serve_command(), tmp_path / transport,
                                                       ["--grpc-transport", transport])
        for key, value in theirs.items():
            mine = ours[key]
            if isinstance(value, tuple):  # the binary's code and words, then the cause
                assert mine[0] == value[0] and mine[1].startswith(value[1]), (transport, key, mine, value)
            else:
                assert mine == value, (transport, key, mine, value)


def test_hostile_requests_are_invalid_argument_and_the_server_keeps_serving(served):
    def infer(**fields):
        request = service_pb2.ModelInferRequest(model_name=fields.pop("model_name", "add_sub"), **fields)
        return request

    def with_inputs(request, shape, raw, names=("INPUT0", "INPUT1"), datatype="FP32"):
        for name in names:
            request.inputs.add(name=name, datatype=datatype, shape=shape)
            request.raw_input_contents.append(raw)
        return request

    empty_contents = infer(model_name="identity_fp32")
    empty_contents.inputs.add(name="INPUT0", datatype="FP32", shape=[2]).contents.SetInParent()
    cases = [
        with_inputs(infer(), [1] * 40, b"\0" * 4),                      # more dimensions than NumPy's
        with_inputs(infer(), [2**61], b"\0" * 8),                        # a shape far past the data
        with_inputs(infer(), [-3], b"\0" * 8),                           # a negative dimension
        with_inputs(infer(model_name="identity_bytes"), [2], b"\x01\0\0\0a", names=("INPUT0",), datatype="BYTES"),
        infer(model_name="add_sub\0x"),                                  # NUL in a name
        infer(id="a\0b"),
        with_inputs(infer(), [1], b"\0" * 4, names=("IN\0PUT0",)),
        empty_contents,                                                  # `contents` without values: no data
    ]
    with grpc.insecure_channel(served[2]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        for request in cases:
            with pytest.raises(grpc.RpcError) as caught:
                stub.ModelInfer(request)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (request, caught.value.details())
            [answer] = list(stub.ModelStreamInfer(iter([request])))
            assert answer.error_message
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="a\0b"))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert stub.ServerLive(service_pb2.ServerLiveRequest()).live


# -- raw HTTP/2: what no well-behaved client sends ----------------------------------

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _literal_headers(pairs):
    """An HPACK header block of literals (never indexed, no Huffman)."""
    block = b""
    for name, value in pairs:
        block += b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()
    return block


def _grpc_call_frames(path, data, stream=1):
    headers = _literal_headers([(":method", "POST"), (":scheme", "http"), (":path", path),
                                (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")])
    return _frame(1, 0x4, stream, headers) + _frame(0, 0x1, stream, data)


def _read_frames(sock, until):
    """Frames (kind, flags, stream, payload) read until `until(frame)` is
    true; None when the server closed the connection first."""
    sock.settimeout(30)
    buffer = b""
    while True:
        while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
            size = int.from_bytes(buffer[:3], "big")
            frame = (buffer[3], buffer[4], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF, buffer[9:9 + size])
            buffer = buffer[9 + size:]
            if until(frame):
                return frame
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buffer += chunk


@pytest.mark.parametrize("prefix", [b"\x00\xff\xff\xff\xff", b"\x01\x00\x00\x00\x04"],
                         ids=["a-length-over-the-limit", "a-compressed-message"])
def test_a_message_the_server_does_not_take_ends_its_call_not_the_connection(served, client, prefix):
    """A message prefix claiming more than the 2 GiB - 1 limit, or a
    compressed message (no grpc-encoding agreed): the call ends (its status
    in a HEADERS frame, or a reset), the connection and the server go on."""
    host, port = served[2].split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(_PREFACE + _frame(4, 0, 0) + _grpc_call_frames(
            "/inference.GRPCInferenceService/ModelInfer", prefix + b"x" * 4))
        ended = _read_frames(sock, lambda f: f[0] == 7 or (f[2] == 1 and (f[0] == 3 or (f[0] == 1 and f[1] & 1))))
        assert ended is not None and ended[0] != 7, "the server closed the connection or sent GOAWAY"
        # the same connection serves the next call (ServerLive: an empty message)
        sock.sendall(_grpc_call_frames("/inference.GRPCInferenceService/ServerLive", b"\x00" * 5, stream=3))
        answer = _read_frames(sock, lambda f: f[0] == 7 or (f[2] == 3 and f[0] == 0))
        assert answer is not None and answer[0] == 0 and answer[3][:1] == b"\x00"
    assert client.is_server_live()


def test_oversized_metadata_is_refused_and_a_continuation_flood_ends_the_connection(served, client, transport):
    """Request headers past 16 KiB (gRPC's servers' hard limit): the call
    ends RESOURCE_EXHAUSTED, the rest is not kept. A header block spread
    over more CONTINUATION frames than nghttp2 takes (CVE-2024-28182: a
    flood that grew the server's memory): that connection ends. The
    server serves on."""
    with grpc.insecure_channel(served[2]) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ServerLive(service_pb2.ServerLiveRequest(), metadata=[("x-big", "v" * 20000)])
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, caught.value.details()
        assert stub.ServerLive(service_pb2.ServerLiveRequest(), metadata=[("x-small", "v" * 1000)]).live
    if transport == "native":
        host, port = served[2].split(":")
        with socket.create_connection((host, int(port))) as sock:
            headers = _literal_headers([(":method", "POST"), (":scheme", "http"),
                                        (":path", "/inference.GRPCInferenceService/ServerLive"),
                                        (":authority", "localhost"), ("content-type", "application/grpc")])
            flood = b"".join(_frame(9, 0, 1, _literal_headers([(f"x-{i}", "v" * 100)])) for i in range(100))
            try:
                sock.sendall(_PREFACE + _frame(4, 0, 0) + _frame(1, 0, 1, headers) + flood)
            except OSError:
                pass  # closed while sending
            assert _read_frames(sock, lambda f: False) is None  # closed (after a GOAWAY)
    assert client.is_server_live()


def test_garbage_on_the_socket_closes_that_connection_only(served, client):
    host, port = served[2].split(":")
    for garbage in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", bytes(range(256)) * 8, _PREFACE + b"\xff" * 64):
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(garbage)
            assert _read_frames(sock, lambda f: False) is None  # closed (after a GOAWAY, where it can)
    assert client.is_server_live()
    assert client.infer("add_sub", _add_sub_inputs([1], [2])).as_numpy("OUTPUT0").tolist() == [3]


def test_a_client_that_leaves_mid_stream_and_the_server_goes_on(served, client):
    """A raw client opens ModelStreamInfer, sends half a message and goes:
    the server keeps serving others."""
    host, port = served[2].split(":")
    request = service_pb2.ModelInferRequest(model_name="add_sub").SerializeToString()
    for _ in range(3):
        with socket.create_connection((host, int(port))) as sock:
            headers = _literal_headers([(":method", "POST"), (":scheme", "http"),
                                        (":path", "/inference.GRPCInferenceService/ModelStreamInfer"),
                                        (":authority", "localhost"), ("content-type", "application/grpc")])
            whole = b"\x00" + len(request).to_bytes(4, "big") + request
            sock.sendall(_PREFACE + _frame(4, 0, 0) + _frame(1, 0x4, 1, headers) + _frame(0, 0, 1, whole[:3]))
    assert client.infer("add_sub", _add_sub_inputs([1], [2])).as_numpy("OUTPUT0").tolist() == [3]


PARAMETERS_MODEL = """
import numpy
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", x * 2), pb_utils.Tensor("Z", numpy.zeros((0, 3), numpy.int64))],
                parameters={"text": "caf\u00e9", "empty": "", "count": -7, "big": 2**62, "yes": True,
                            "no": False, "zero": 0}))
        return responses
"""


def test_a_long_error_reaches_the_client_cut_to_fit(served, transport):
    """gRPC clients refuse a status past 8 KiB of metadata (they would
    report RESOURCE_EXHAUSTED "Stream removed"): a long error message
    reaches them cut to fit, with its code, saying how much was cut; on
    the native path and the servicer's alike."""
    server, frontend, url = served
    said = {}

    def fails(X):
        raise ValueError(said["text"])

    server.bind("bound_long_error", fails, inputs=[TensorSpec("X", numpy.float32, (1,))],
                outputs=[TensorSpec("Y", numpy.float32, (1,))])
    try:
        with grpc.insecure_channel(url) as channel:
            call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
            raw = service_pb2.ModelInferRequest(model_name="bound_long_error")
            raw.inputs.add(name="X", datatype="FP32", shape=[1])
            raw.raw_input_contents.append(b"\0" * 4)
            typed = service_pb2.ModelInferRequest(model_name="bound_long_error")
            typed.inputs.add(name="X", datatype="FP32", shape=[1]).contents.fp32_contents.append(0)
            for text in ("caf\u00e9 " * 1000, "x" * 20000, "short"):
                said["text"] = text
                for request in (raw, typed):
                    with pytest.raises(grpc.RpcError) as caught:
                        call(request.SerializeToString())
                    assert caught.value.code() == grpc.StatusCode.INTERNAL, caught.value.details()
                    details = caught.value.details()
                    assert details.startswith("model 'bound_long_error': ValueError: " + text[:100])
                    if text == "short":
                        assert details.endswith(": short")
                    else:
                        shown = details[len("model 'bound_long_error': ValueError: "):details.rindex(" [... ")]
                        assert text.startswith(shown)
                        cut = len("model 'bound_long_error': ValueError: ") + len(text) - details.rindex(" [... ")
                        assert details.endswith(f" [... {cut} more characters cut by the server: gRPC clients "
                                                "refuse status messages past 8 KiB]")
                        assert len(details.encode()) < 8192
    finally:
        server.unbind("bound_long_error", timeout=30)


def _wire_varint(value):
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _wire_field(number, value):
    """One protobuf field: bytes length-delimited, an int a varint."""
    if isinstance(value, int):
        return _wire_varint(number << 3) + _wire_varint(value)
    return _wire_varint(number << 3 | 2) + _wire_varint(len(value)) + value


def _wire_input(name=b"INPUT0", datatype=b"FP32", shape=(4,), packed=True, extra=b""):
    """An InferInputTensor's bytes (the shape packed or one field per dimension)."""
    dims = (_wire_field(3, b"".join(_wire_varint(d & (2**64 - 1)) for d in shape)) if packed
            else b"".join(_wire_field(3, d & (2**64 - 1)) for d in shape))
    return _wire_field(1, name) + _wire_field(2, datatype) + dims + extra


def test_the_native_infer_path_reads_the_wire_format_as_protobuf_does(served, transport):
    """The native transport reads a ModelInferRequest itself: messages
    written in every form protobuf accepts (a field twice, the shape
    unpacked, fields in any order) are served natively with the servicer's
    answer; one it does not cover (unknown fields, typed contents, other
    parameters, non-UTF-8 or NUL names, a version that is not plain digits,
    a truncated message) goes to the servicer, whose answer it gets."""
    from tritonserver._kserve.grpc_service import GrpcInferenceService
    from tritonserver.frontend._native_grpc import Abort, Context

    server, frontend, url = served
    service = GrpcInferenceService(server)
    data = numpy.arange(4, dtype=numpy.float32).tobytes()
    ones = numpy.ones(4, numpy.float32).tobytes()
    add_sub = (_wire_field(1, b"add_sub") + _wire_field(5, _wire_input(b"INPUT0", shape=(4,)))
               + _wire_field(5, _wire_input(b"INPUT1", shape=(4,))))
    identity = _wire_field(1, b"identity_fp32") + _wire_field(5, _wire_input())
    parameter = _wire_field(4, _wire_field(1, b"triton_enable_empty_final_response") + _wire_field(2, _wire_field(1, 1)))
    native = {
        "plain": identity + _wire_field(7, data),
        "raw before its input, the id last": _wire_field(7, data) + identity + _wire_field(3, b"r\xc3\xa9"),
        "the shape unpacked": _wire_field(1, b"identity_fp32") + _wire_field(5, _wire_input(packed=False))
                              + _wire_field(7, data),
        "the model name twice (the last counts)": _wire_field(1, b"nothing") + identity + _wire_field(7, data),
        "a version of digits": identity + _wire_field(2, b"01") + _wire_field(7, data),
        "perf_analyzer's parameter": parameter + add_sub + _wire_field(7, data) + _wire_field(7, ones),
        "an output asked": add_sub + _wire_field(6, _wire_field(1, b"OUTPUT1")) + _wire_field(7, data)
                           + _wire_field(7, ones),
    }
    declined = {
        "an unknown field": identity + _wire_field(7, data) + _wire_field(15, 1),
        "an unknown field of an input": _wire_field(1, b"identity_fp32")
                                        + _wire_field(5, _wire_input(extra=_wire_field(9, b"x"))) + _wire_field(7, data),
        "a known field of another wire type": identity + _wire_field(7, data) + _wire_field(3, 5),
        "typed contents beside raw": _wire_field(1, b"identity_fp32")
                                     + _wire_field(5, _wire_input(extra=_wire_field(5, b""))) + _wire_field(7, data),
        "an input parameter": _wire_field(1, b"identity_fp32") + _wire_field(
            5, _wire_input(extra=_wire_field(4, _wire_field(1, b"k") + _wire_field(2, _wire_field(2, 3)))))
            + _wire_field(7, data),
        "another request parameter": identity + _wire_field(7, data) + _wire_field(
            4, _wire_field(1, b"priority") + _wire_field(2, _wire_field(2, 1))),
        "an output parameter": add_sub + _wire_field(6, _wire_field(1, b"OUTPUT1") + _wire_field(
            2, _wire_field(1, b"binary_data") + _wire_field(2, _wire_field(1, 1)))) + _wire_field(7, data)
            + _wire_field(7, ones),
        "a version with a sign": identity + _wire_field(2, b"+1") + _wire_field(7, data),
        "a version past int64": identity + _wire_field(2, b"9223372036854775808") + _wire_field(7, data),
        "a NUL in an input name": _wire_field(1, b"identity_fp32") + _wire_field(5, _wire_input(b"INPUT0\0"))
                                  + _wire_field(7, data),
        "a negative dimension": _wire_field(1, b"identity_fp32") + _wire_field(5, _wire_input(shape=(-1, 4)))
                                + _wire_field(7, data),
        "raw contents short of the shape": identity + _wire_field(7, data[:12]),
        "one raw too many": identity + _wire_field(7, data) + _wire_field(7, data),
        "BYTES": _wire_field(1, b"identity_fp32") + _wire_field(5, _wire_input(datatype=b"BYTES", shape=(1,)))
                 + _wire_field(7, b"\1\0\0\0x"),
        "not UTF-8": identity + _wire_field(7, data) + _wire_field(3, b"\xff"),
        "truncated": (identity + _wire_field(7, data))[:-2],
        "a varint past 64 bits": identity + _wire_field(7, data) + _wire_varint(3 << 3) + b"\xff" * 10 + b"\x01",
    }

    def servicer_answer(message):
        async def call():
            try:
                request = service_pb2.ModelInferRequest.FromString(message)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError: answered by the transport, not here
                return None
            try:
                return (await service.ModelInfer(request, Context(()))).SerializeToString()
            except Abort as abort:
                return abort.code, abort.details
        return asyncio.run(call())

    with grpc.insecure_channel(url) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        for cases, taken in ((native, 1), (declined, 0)):
            for label, message in cases.items():
                before = _native_infers(frontend)
                try:
                    answer = call(message)
                except grpc.RpcError as error:
                    answer = error.code().value[0], error.details()
                expected = servicer_answer(message)
                if expected is None:  # protobuf cannot read it
                    assert answer[0] != grpc.StatusCode.OK.value[0], label
                else:
                    assert answer == expected, label
                if before is not None:
                    assert _native_infers(frontend) == before + taken, label
    # Mutated messages (a byte changed, inserted or dropped, a cut, a span
    # repeated): whichever path takes each, the answer is the servicer's.
    rng = random.Random(41)
    with grpc.insecure_channel(url) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        for _ in range(300):
            message = bytearray(rng.choice(list(native.values())))
            at = rng.randrange(len(message))
            kind = rng.randrange(5)
            if kind == 0:
                message[at] = rng.randrange(256)
            elif kind == 1:
                message.insert(at, rng.randrange(256))
            elif kind == 2:
                del message[at]
            elif kind == 3:
                del message[at:]
            else:
                message[at:at] = message[at:at + rng.randrange(1, 12)]
            try:
                answer = call(bytes(message))
            except grpc.RpcError as error:
                answer = error.code().value[0], error.details()
            expected = servicer_answer(bytes(message))
            if expected is None:
                assert answer[0] != grpc.StatusCode.OK.value[0], bytes(message)
            else:
                assert answer == expected, bytes(message)
    # The same messages, and mutations of them, each on a stream of its own:
    # whichever path takes each, the stream's messages (or its status where
    # protobuf cannot read it) are the servicer's.

    def servicer_stream(message):
        async def call():
            try:
                request = service_pb2.ModelInferRequest.FromString(message)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError
                return None

            async def requests():
                yield request
            return [m.SerializeToString() async for m in service.ModelStreamInfer(requests(), Context(()))]
        return asyncio.run(call())

    stream_cases = list(native.values()) + list(declined.values())
    for _ in range(150):
        message = bytearray(rng.choice(list(native.values())))
        at = rng.randrange(len(message))
        message[at:at + rng.randrange(0, 3)] = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 3)))
        stream_cases.append(bytes(message))
    before = _native_stream_infers(frontend)
    with grpc.insecure_channel(url) as channel:
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer")
        for message in stream_cases:
            expected = servicer_stream(message)
            try:
                answer = list(stream(iter([message]), timeout=60))
            except grpc.RpcError as error:
                assert expected is None, (message, error)
                continue
            assert expected is not None, message
            assert [service_pb2.ModelStreamInferResponse.FromString(m) for m in answer] == \
                [service_pb2.ModelStreamInferResponse.FromString(m) for m in expected], message
    if before is not None:
        assert _native_stream_infers(frontend) - before >= len(native)  # the plain ones, and mutations still plain
    # what the native ones answered: the identity's input, add_sub's sum and difference
    with grpc.insecure_channel(url) as channel:
        reply = service_pb2.ModelInferResponse.FromString(
            channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")(native["an output asked"]))
    assert [o.name for o in reply.outputs] == ["OUTPUT1"]
    numpy.testing.assert_array_equal(numpy.frombuffer(reply.raw_output_contents[0], numpy.float32),
                                     numpy.arange(4, dtype=numpy.float32) - 1)


def test_the_native_infer_path_answers_as_the_servicer(served, transport):
    """The plain ModelInfer (raw inputs, no parameters) is served without the
    servicer on the native transport; its answers, results and errors, are
    the servicer's own, byte for byte; anything else goes to the servicer."""
    from tritonserver._kserve.grpc_service import GrpcInferenceService
    from tritonserver.frontend._native_grpc import Abort, Context

    server, frontend, url = served
    service = GrpcInferenceService(server)

    def servicer_answer(request):
        async def call():
            try:
                return (await service.ModelInfer(request, Context(()))).SerializeToString()
            except Abort as abort:
                return abort.code, abort.details
        return asyncio.run(call())

    def failing(X):
        raise ValueError("no X today")

    server.bind("bound_fails", failing, inputs=[TensorSpec("X", numpy.float32, (1,))],
                outputs=[TensorSpec("Y", numpy.float32, (1,))])
    # response parameters of every kind, an empty output, a version: written natively alike
    server.load("with_parameters", {"config": json.dumps({
        "backend": "python", "max_batch_size": 0,
        "input": [{"name": "X", "data_type": "TYPE_FP64", "dims": [-1]}],
        "output": [{"name": "Y", "data_type": "TYPE_FP64", "dims": [-1]},
                   {"name": "Z", "data_type": "TYPE_INT64", "dims": [-1, 3]}]}),
        "file:1/model.py": PARAMETERS_MODEL.encode()})
    try:
        plain = service_pb2.ModelInferRequest(model_name="add_sub", id="r1")
        plain.parameters["triton_enable_empty_final_response"].bool_param = True  # as perf_analyzer sends
        for name in ("INPUT0", "INPUT1"):
            plain.inputs.add(name=name, datatype="FP32", shape=[3])
            plain.raw_input_contents.append(numpy.array([1, 2, 3], numpy.float32).tobytes())
        asked = service_pb2.ModelInferRequest()
        asked.CopyFrom(plain)
        asked.outputs.add(name="OUTPUT1")
        versioned = service_pb2.ModelInferRequest(model_name="identity_fp32", model_version="1")
        versioned.inputs.add(name="INPUT0", datatype="FP32", shape=[4])
        versioned.raw_input_contents.append(numpy.arange(4, dtype=numpy.float32).tobytes())
        fails = service_pb2.ModelInferRequest(model_name="bound_fails")
        fails.inputs.add(name="X", datatype="FP32", shape=[1])
        fails.raw_input_contents.append(b"\0" * 4)
        short = service_pb2.ModelInferRequest()
        short.CopyFrom(versioned)
        short.raw_input_contents[0] = b"\0" * 3  # not the shape's size: the servicer's path
        refused = service_pb2.ModelInferRequest()
        refused.CopyFrom(versioned)
        refused.inputs[0].shape[:] = [2, 2]  # the core refuses the submission: the servicer words it
        parameters = service_pb2.ModelInferRequest(model_name="with_parameters", model_version="1", id="p")
        parameters.inputs.add(name="X", datatype="FP64", shape=[2])
        parameters.raw_input_contents.append(numpy.array([1.5, -2], numpy.float64).tobytes())
        native_cases = (plain, asked, versioned, fails, parameters)
        before = _native_infers(frontend)
        with grpc.insecure_channel(url) as channel:
            call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
            for request in (*native_cases, short, refused):
                expected = servicer_answer(request)
                try:
                    answer = call(request.SerializeToString())
                except grpc.RpcError as error:
                    answer = error.code().value[0], error.details()
                if request is parameters:  # a map: its entries in any order
                    answer, expected = (service_pb2.ModelInferResponse.FromString(a) for a in (answer, expected))
                    assert answer.parameters["text"].string_param == "caf\u00e9"
                    assert answer.parameters["big"].int64_param == 2**62
                    assert list(answer.outputs[1].shape) == [0, 3]
                assert answer == expected, request
        if before is not None:
            assert _native_infers(frontend) == before + len(native_cases)
    finally:
        server.unbind("bound_fails", timeout=30)
        server.unload("with_parameters", wait_until_unloaded=True)


def test_a_bytes_response_parameter_is_refused_as_the_binary_refuses_it():
    """The backend API sets no BYTES response parameter, but the core's
    response API can carry one: the binary then answers UNSUPPORTED, and so
    do the servicer and the native writer (cpp/infer_response_message.h),
    instead of writing the value's repr as a string."""
    from tritonserver._kserve.grpc_service import BYTES_PARAMETER_REFUSED, _set_parameter

    message = service_pb2.ModelInferResponse()
    with pytest.raises(tritonserver.UnsupportedError, match="TRITONSERVER_PARAMETER_BYTES' is not currently supported"):
        _set_parameter(message.parameters["raw"], b"\x00\x01")
    assert BYTES_PARAMETER_REFUSED in (ROOT / "cpp" / "infer_response_message.h").read_text()  # one wording
    _set_parameter(message.parameters["text"], "x")  # the other kinds as before
    assert message.parameters["text"].string_param == "x"


def _unload_with_a_request_in_flight(command: list[str], tmp_path) -> dict:
    """What a server (`command`: the binary or this package's serve) answers
    over gRPC while `gate` is unloaded with one request of it in flight (held
    until the test releases it). Each error is (code name, message)."""
    import common

    repo, started, release = common.gate_model_repository(tmp_path)
    common.copy_model("identity_fp32", repo)
    flags = ["--model-control-mode", "explicit", "--load-model=gate", "--exit-timeout-secs=90"]
    seconds = [_input("SECONDS", numpy.array([0.0], dtype=numpy.float32))]

    def answer(call):
        try:
            return call()
        except InferenceServerException as error:
            return (error.status(), _without_request_id(error.message()))

    seen: dict = {}
    with common.server_process(command, repo, flags) as served, \
            grpcclient.InferenceServerClient(served.grpc_url) as client:
        in_flight = threading.Thread(target=lambda: seen.setdefault(
            "in-flight infer", answer(lambda: client.infer("gate", seconds, client_timeout=60).as_numpy("OUT").tolist())))
        in_flight.start()
        try:
            assert wait_for(started.exists, 60)
            seen["unload"] = answer(lambda: client.unload_model("gate", client_timeout=60))
            seen["unload answered while the request runs"] = in_flight.is_alive()
            seen["index"] = [(m.name, m.version, m.state) for m in client.get_model_repository_index().models
                             if m.name == "gate"]
            seen["model ready"] = client.is_model_ready("gate")
            seen["server ready"] = client.is_server_ready()
            seen["metadata"] = answer(lambda: client.get_model_metadata("gate"))
            seen["config"] = answer(lambda: client.get_model_config("gate"))
            seen["new infer"] = answer(lambda: client.infer("gate", seconds))
            seen["new infer of version 1"] = answer(lambda: client.infer("gate", seconds, model_version="1"))
            seen["load of another model"] = answer(lambda: client.load_model("identity_fp32", client_timeout=60))
            seen["statistics"] = answer(lambda: str(client.get_inference_statistics("gate")))
            seen["statistics of every model"] = sorted(
                s.name + "/" + s.version for s in client.get_inference_statistics().model_stats)
            seen["request still in flight"] = in_flight.is_alive()
        finally:
            release.touch()
            in_flight.join(60)

        def gone():
            return [m.state for m in client.get_model_repository_index().models if m.name == "gate"] == ["UNAVAILABLE"]

        seen["unloaded in the end"] = wait_for(gone, 60)
    return seen


@pytest.mark.python_stub
def test_a_model_unloaded_with_a_request_in_flight_reads_as_the_binarys(tmp_path):
    """RepositoryModelUnload answers at once, as the binary's; meanwhile the
    model is UNLOADING, ModelReady and (strict readiness) ServerReady false,
    metadata, config and a new ModelInfer NOT_FOUND, and another model loads.
    It used to answer once the request ended (the package's drain), with
    the model READY and new requests UNAVAILABLE meanwhile."""
    import common

    theirs = _unload_with_a_request_in_flight(common.reference_command(), tmp_path / "binary")
    ours = _unload_with_a_request_in_flight(common.package_serve_command(), tmp_path / "package")
    assert theirs["unload answered while the request runs"] and theirs["request still in flight"], theirs
    assert theirs["index"] == [("gate", "1", "UNLOADING")], theirs
    for key, value in theirs.items():
        mine = ours[key]
        if isinstance(value, tuple) and isinstance(mine, tuple) and len(value) == 2 and isinstance(value[1], str):
            assert mine[0] == value[0] and mine[1].startswith(value[1]), (key, mine, value)
        else:
            assert mine == value, (key, mine, value)
