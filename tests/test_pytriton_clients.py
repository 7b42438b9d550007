"""tritonserver.pytriton's network clients (ModelClient, FuturesModelClient,
AsyncioModelClient, DecoupledModelClient, AsyncioDecoupledModelClient)
over HTTP and gRPC against a `Triton` serving bound functions on this
package's frontends (ports 0), and ModelClient against NVIDIA's
tritonserver binary."""

from __future__ import annotations

import asyncio
import pathlib
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
pytest.importorskip("grpc", reason="the serve extra (grpcio) is not installed")
pytest.importorskip("tritonclient.grpc", reason="tritonclient[grpc] is not installed")
pytest.importorskip("tritonclient.http", reason="tritonclient[http] is not installed")

from common import pytriton_config, reference_command, server_process  # noqa: E402

from tritonserver.pytriton.client import (  # noqa: E402
    AsyncioDecoupledModelClient,
    AsyncioModelClient,
    DecoupledModelClient,
    FuturesModelClient,
    ModelClient,
    PyTritonClientClosedError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from tritonserver.pytriton.decorators import batch  # noqa: E402
from tritonserver.pytriton.exceptions import PyTritonValidationError  # noqa: E402
from tritonserver.pytriton.model_config import DynamicBatcher, ModelConfig, Tensor  # noqa: E402
from tritonserver.pytriton.triton import Triton  # noqa: E402

FP32 = np.float32
MODELS = pathlib.Path(__file__).parent / "models"
RELEASE = threading.Event()  # lets the "slow" model answer


@batch
def _add_sub(a, b):
    return {"add": a + b, "sub": a - b}


def _echo(requests):
    # a parameter and a forwarded header back as outputs
    return [{"y": r["x"] * FP32(r.parameters.get("factor", 1)),
             "header": np.array([[str(r.parameters.get("x-tag", "")).encode()]] * len(r["x"]), dtype=object)}
            for r in requests]


@batch
def _count_up(n):
    for i in range(int(n[0][0])):
        yield {"i": np.array([[i]] * len(n), np.int32)}


def _count_from(requests):
    # decoupled, a parameter and a forwarded header read: "start" counts up to "stop"
    start = int(requests[0].parameters.get("start", 0))
    for i in range(start, int(requests[0].parameters.get("x-stop", start + 2))):
        yield [{"i": np.array([i], np.int32)} for _ in requests]


def _slow_stream(requests):
    yield [{"y": r["x"]} for r in requests]
    RELEASE.wait(60)
    yield [{"y": r["x"] + 1} for r in requests]


def _fails(requests):
    raise ValueError("the callable refuses")


def _slow(requests):
    RELEASE.wait(60)
    return [{"y": r["x"]} for r in requests]


def _no_batching(requests):
    return [{"y": r["x"] * 2} for r in requests]


GATHERED = 4
GATE = threading.Barrier(GATHERED)


def _gate(requests):
    # Answers once GATHERED calls are inside at once (on as many instances);
    # a call left alone breaks the barrier and fails.
    GATE.wait(30)
    return [{"y": r["x"]} for r in requests]


@pytest.fixture(scope="module")
def triton():
    config = pytriton_config(id="pytriton-clients", allow_http=True, allow_grpc=True, http_port=0, grpc_port=0,
                             http_address="127.0.0.1", grpc_address="127.0.0.1",
                             http_header_forward_pattern="x-.*", grpc_header_forward_pattern="x-.*")
    t = Triton(config=config)
    vector = dict(dtype=FP32, shape=(-1,))
    scalar = dict(dtype=FP32, shape=(1,))
    t.bind("add_sub", _add_sub, inputs=[Tensor(name="a", **vector), Tensor(name="b", **vector)],
           outputs=[Tensor(name="add", **vector), Tensor(name="sub", **vector)], config=ModelConfig(max_batch_size=8))
    t.bind("echo", _echo, inputs=[Tensor(name="x", **scalar)],
           outputs=[Tensor(name="y", **scalar), Tensor(name="header", dtype=np.bytes_, shape=(1,))])
    t.bind("count_up", _count_up, inputs=[Tensor(name="n", dtype=np.int32, shape=(1,))],
           outputs=[Tensor(name="i", dtype=np.int32, shape=(1,))], config=ModelConfig(decoupled=True))
    t.bind("count_from", _count_from, inputs=[Tensor(name="x", **scalar)],
           outputs=[Tensor(name="i", dtype=np.int32, shape=(1,))], config=ModelConfig(batching=False, decoupled=True))
    t.bind("slow_stream", _slow_stream, inputs=[Tensor(name="x", **scalar)], outputs=[Tensor(name="y", **scalar)],
           config=ModelConfig(batching=False, decoupled=True))
    t.bind("fails", _fails, inputs=[Tensor(name="x", **scalar)], outputs=[Tensor(name="y", **scalar)])
    t.bind("slow", _slow, inputs=[Tensor(name="x", **scalar)], outputs=[Tensor(name="y", **scalar)])
    t.bind("gate", [_gate] * GATHERED, inputs=[Tensor(name="x", **scalar)], outputs=[Tensor(name="y", **scalar)],
           config=ModelConfig(batching=False))
    t.bind("no_batching", _no_batching, inputs=[Tensor(name="x", **scalar)], outputs=[Tensor(name="y", **scalar)],
           config=ModelConfig(batching=False))
    with t:
        yield t


def _url(triton, protocol):
    http, grpc = (f.port for f in triton.frontends)
    return f"http://127.0.0.1:{http}" if protocol == "http" else f"grpc://127.0.0.1:{grpc}"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


A, B = np.array([1.0, 2.0], FP32), np.array([0.5, 0.5], FP32)
protocols = pytest.mark.parametrize("protocol", ["http", "grpc"])


@protocols
def test_model_client_infers_by_position_and_by_name(triton, protocol):
    with ModelClient(_url(triton, protocol), "add_sub", lazy_init=False) as client:
        assert client.is_batching_supported and client.model_config.max_batch_size == 8
        # The server's dynamic batcher, as PyTriton's client reads it from the config.
        assert client.model_config.batcher == DynamicBatcher(preferred_batch_size=[8])
        by_position = client.infer_sample(A, B)
        assert by_position["add"].tolist() == [1.5, 2.5] and by_position["sub"].tolist() == [0.5, 1.5]
        batch_result = client.infer_batch(a=np.stack([A, B]), b=np.stack([B, A]))
        assert batch_result["add"].shape == (2, 2) and batch_result["sub"].tolist() == [[0.5, 1.5], [-0.5, -1.5]]
    with ModelClient(_url(triton, protocol), "add_sub", model_version="1") as client:
        assert client.infer_sample(a=A, b=B)["add"].tolist() == [1.5, 2.5]


def test_localhost_is_http_on_the_given_port(triton):
    http = triton.frontends[0].port
    with ModelClient(f"localhost:{http}", "add_sub") as client:
        assert client.infer_sample(A, B)["add"].tolist() == [1.5, 2.5]


def test_http_transport_follows_kserve_http_or_the_config():
    from tritonserver.frontend import KServeHttp

    common = dict(allow_http=True, http_port=0, http_address="127.0.0.1", http_header_forward_pattern="x-.*")
    with pytest.raises(PyTritonValidationError, match="TritonConfig.http_transport"):
        Triton(config=pytriton_config(http_transport="h2", **common))
    for transport in (None, "native", "uvicorn"):
        with Triton(config=pytriton_config(http_transport=transport, **common)) as t:
            t.bind("echo", _echo, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
                   outputs=[Tensor(name="y", dtype=FP32, shape=(1,)), Tensor(name="header", dtype=np.bytes_, shape=(1,))])
            (http,) = t.frontends
            assert http.options.transport == (transport or KServeHttp.Options().transport)
            with ModelClient(f"http://127.0.0.1:{http.port}", "echo") as client:
                result = client.infer_sample(x=np.array([2.0], FP32), parameters={"factor": 3},
                                             headers={"x-tag": "seen"})
            assert result["y"].tolist() == [6.0] and result["header"].tolist() == [b"seen"]


@protocols
def test_parameters_and_forwarded_headers_reach_the_callable(triton, protocol):
    with ModelClient(_url(triton, protocol), "echo") as client:
        result = client.infer_sample(x=np.array([2.0], FP32), parameters={"factor": 3}, headers={"x-tag": "seen"})
        assert result["y"].tolist() == [6.0] and result["header"].tolist() == [b"seen"]


@protocols
def test_futures_client_returns_futures_from_several_workers(triton, protocol):
    with FuturesModelClient(_url(triton, protocol), "add_sub", max_workers=4) as client:
        assert client.wait_for_model(30).result() is None
        assert client.model_config().result().max_batch_size == 8
        futures = [client.infer_sample(np.array([float(i)], FP32), B[:1]) for i in range(16)]
        assert [f.result(30)["add"].tolist() for f in futures] == [[i + 0.5] for i in range(16)]
        assert client.infer_batch(a=A[None], b=B[None]).result()["sub"].tolist() == [[0.5, 1.5]]
    with pytest.raises(PyTritonClientClosedError):
        client.infer_sample(A, B)


@protocols
def test_futures_client_runs_a_burst_of_calls_at_once(triton, protocol):
    # GATHERED calls submitted together run together (one worker each, as
    # PyTriton's client runs them), not one after another behind one worker.
    with FuturesModelClient(_url(triton, protocol), "gate", max_workers=8) as client:
        for burst in range(2):  # the second burst finds the first's workers idle
            futures = [client.infer_sample(x=np.array([float(i)], FP32)) for i in range(GATHERED)]
            assert [f.result(60)["y"].tolist() for f in futures] == [[float(i)] for i in range(GATHERED)]


@protocols
def test_asyncio_client(triton, protocol):
    async def run():
        async with AsyncioModelClient(_url(triton, protocol), "add_sub", lazy_init=False) as client:
            results = await asyncio.gather(*(client.infer_sample(A, np.full(2, i, FP32)) for i in range(8)))
            assert [r["sub"].tolist() for r in results] == [[1.0 - i, 2.0 - i] for i in range(8)]
            assert (await client.infer_batch(a=A[None], b=B[None]))["add"].tolist() == [[1.5, 2.5]]
            assert (await client.model_config).max_batch_size == 8
        async with AsyncioModelClient(_url(triton, protocol), "echo") as client:
            result = await client.infer_sample(x=np.array([2.0], FP32), parameters={"factor": 4},
                                               headers={"x-tag": "aio"})
            assert result["y"].tolist() == [8.0] and result["header"].tolist() == [b"aio"]
        async with AsyncioModelClient(_url(triton, protocol), "no_batching") as client:
            assert (await client.infer_sample(x=np.array([2.0], FP32)))["y"].tolist() == [4.0]
            with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
                await client.infer_batch(x=np.array([[2.0]], FP32))

    asyncio.run(run())


def test_decoupled_clients_stream_over_grpc(triton):
    url = _url(triton, "grpc")
    with DecoupledModelClient(url, "count_up") as client:
        assert [r["i"].tolist() for r in client.infer_sample(np.array([3], np.int32))] == [[0], [1], [2]]
        # the client streams again once the previous stream was read
        assert [r["i"].tolist() for r in client.infer_sample(n=np.array([2], np.int32))] == [[0], [1]]

    async def run():
        async with AsyncioDecoupledModelClient(url, "count_up") as client:
            return [r["i"].tolist() async for r in client.infer_sample(np.array([4], np.int32))]

    assert asyncio.run(run()) == [[0], [1], [2], [3]]


def test_decoupled_clients_send_parameters_and_headers(triton):
    url, x = _url(triton, "grpc"), np.array([0.0], FP32)
    with DecoupledModelClient(url, "count_from") as client:
        responses = client.infer_sample(x, parameters={"start": 3}, headers={"x-stop": 6})  # an int header: "6"
        assert [r["i"].tolist() for r in responses] == [[3], [4], [5]]

    async def run():
        async with AsyncioDecoupledModelClient(url, "count_from") as client:
            return [r["i"].tolist() async for r in client.infer_sample(x=x, parameters={"start": 7})]

    assert asyncio.run(run()) == [[7], [8]]


def test_a_late_response_of_a_stream_times_out_and_the_server_serves_on(triton):
    url, x = _url(triton, "grpc"), np.array([1.0], FP32)

    def serves_on():  # once the late request is done (the model has one instance)
        with DecoupledModelClient(url, "slow_stream") as client:
            assert [r["y"].tolist() for r in client.infer_sample(x)] == [[1.0], [2.0]]

    RELEASE.clear()
    try:
        with DecoupledModelClient(url, "slow_stream", inference_timeout_s=0.5) as client:
            responses = client.infer_sample(x)
            assert next(responses)["y"].tolist() == [1.0]
            with pytest.raises(PyTritonClientTimeoutError):
                next(responses)
    finally:
        RELEASE.set()
    serves_on()

    async def run():
        async with AsyncioDecoupledModelClient(url, "slow_stream", inference_timeout_s=0.5) as client:
            seen = []
            with pytest.raises(PyTritonClientTimeoutError):
                async for r in client.infer_sample(x):
                    seen.append(r["y"].tolist())
            return seen

    RELEASE.clear()
    try:
        assert asyncio.run(run()) == [[1.0]]
    finally:
        RELEASE.set()
    serves_on()


def test_every_client_reaches_a_triton_of_this_process(triton):
    url = "inprocess://pytriton-clients"
    with FuturesModelClient(url, "add_sub") as client:
        assert client.infer_sample(A, B).result(30)["add"].tolist() == [1.5, 2.5]

    async def run():
        async with AsyncioModelClient(url, "add_sub") as client:
            assert (await client.infer_batch(a=A[None], b=B[None]))["sub"].tolist() == [[0.5, 1.5]]
        async with AsyncioDecoupledModelClient(url, "count_up") as client:
            return [r["i"].tolist() async for r in client.infer_sample(np.array([3], np.int32))]

    assert asyncio.run(run()) == [[0], [1], [2]]


def test_decoupled_and_coupled_clients_refuse_the_other_kind_of_model(triton):
    with pytest.raises(PyTritonClientValueError, match="only supported for grpc"):
        DecoupledModelClient(_url(triton, "http"), "count_up")
    with pytest.raises(PyTritonClientValueError, match="only supported for grpc"):
        AsyncioDecoupledModelClient(_url(triton, "http"), "count_up")
    with ModelClient(_url(triton, "grpc"), "count_up") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="Use DecoupledModelClient"):
            client.infer_sample(np.array([1], np.int32))
    with DecoupledModelClient(_url(triton, "grpc"), "add_sub") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="Use ModelClient"):
            list(client.infer_sample(A, B))


@protocols
def test_an_error_of_the_callable_is_an_inference_server_error(triton, protocol):
    with ModelClient(_url(triton, protocol), "fails") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="the callable refuses"):
            client.infer_sample(x=np.array([1.0], FP32))
    with ModelClient(_url(triton, protocol), "no_batching") as client:  # the server serves on
        assert client.infer_sample(x=np.array([1.0], FP32))["y"].tolist() == [2.0]
        with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
            client.infer_batch(x=np.array([[1.0]], FP32))


@protocols
def test_inference_timeout(triton, protocol):
    RELEASE.clear()
    try:
        with ModelClient(_url(triton, protocol), "slow", inference_timeout_s=0.5) as client:
            started = time.monotonic()
            with pytest.raises(PyTritonClientTimeoutError, match="Timeout occurred during inference request"):
                client.infer_sample(x=np.array([1.0], FP32))
            assert time.monotonic() - started < 10
    finally:
        RELEASE.set()
    with ModelClient(_url(triton, protocol), "slow") as client:  # the model serves on
        assert client.infer_sample(x=np.array([2.0], FP32))["y"].tolist() == [2.0]


def test_asyncio_inference_timeout(triton):
    async def run(protocol):
        async with AsyncioModelClient(_url(triton, protocol), "slow", inference_timeout_s=0.5) as client:
            with pytest.raises(PyTritonClientTimeoutError):
                await client.infer_sample(x=np.array([1.0], FP32))

    RELEASE.clear()
    try:
        for protocol in ("http", "grpc"):
            asyncio.run(run(protocol))
    finally:
        RELEASE.set()


@protocols
def test_a_model_that_is_not_there(triton, protocol):
    with ModelClient(_url(triton, protocol), "not_there", init_timeout_s=0.5,
                     access_token=triton.get_access_token()) as client:
        with pytest.raises(PyTritonClientTimeoutError, match="The server has no model 'not_there' \\(its models: "
                           "add_sub, count_from, count_up, echo, fails, gate, no_batching, slow, slow_stream\\)"):
            client.infer_sample(x=np.array([1.0], FP32))
    with ModelClient(_url(triton, protocol), "not_there", init_timeout_s=0.5) as client:
        with pytest.raises(PyTritonClientTimeoutError, match="Waiting for model not_there/<latest> to be ready "
                           "timed out after 0.5 s .*index could not be read.*restricted"):
            client.infer_sample(x=np.array([1.0], FP32))
    with ModelClient(_url(triton, protocol), "not_there", ensure_model_is_ready=False) as client:
        with pytest.raises(PyTritonClientTimeoutError, match="not_there"):
            client.wait_for_model(0.3)

    async def run():
        async with AsyncioModelClient(_url(triton, protocol), "not_there", init_timeout_s=0.5) as client:
            with pytest.raises(PyTritonClientTimeoutError, match="not_there"):
                await client.infer_sample(x=np.array([1.0], FP32))

    asyncio.run(run())


def test_a_model_config_of_a_model_that_is_not_there_is_unavailable(triton):
    from tritonserver.pytriton.client._network import NetworkTransport
    from tritonserver.pytriton.client._url import ClientUrl

    transport = NetworkTransport(ClientUrl.parse(_url(triton, "grpc")), "not_there", None, 5, 5, None)
    try:
        with pytest.raises(PyTritonClientModelUnavailableError, match="not_there"):
            transport.model_config(5)
    finally:
        transport.close()


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_no_server_at_the_url_times_out_naming_it(scheme):
    url = f"{scheme}://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    with pytest.raises(PyTritonClientTimeoutError, match="Waiting for server to be ready timed out") as caught:
        ModelClient(url, "add_sub", init_timeout_s=0.5, lazy_init=False)
    assert url in str(caught.value) and time.monotonic() - started < 10


@pytest.mark.parametrize("url", ["ftp://localhost:8000", "grpc://", "http://localhost:99999",
                                 "grpc://localhost:8001/path", 8000])
def test_bad_urls_are_refused(url):
    with pytest.raises(PyTritonClientInvalidUrlError, match="Invalid url"):
        ModelClient(url, "add_sub")
    with pytest.raises(PyTritonClientInvalidUrlError, match="Invalid url"):
        FuturesModelClient(url, "add_sub")
    with pytest.raises(PyTritonClientInvalidUrlError, match="Invalid url"):
        AsyncioModelClient(url, "add_sub")


def test_closed_clients_and_bad_arguments(triton):
    client = ModelClient(_url(triton, "grpc"), "add_sub")
    with pytest.raises(PyTritonClientValueError, match="either positional either keyword"):
        client.infer_sample(A, b=B)
    with pytest.raises(PyTritonClientValueError, match="Provide input data"):
        client.infer_sample()
    with pytest.raises(PyTritonClientValueError, match="must be a string, integer or boolean"):
        client.infer_sample(A, B, parameters={"p": 1.5})
    client.close()
    with pytest.raises(PyTritonClientClosedError, match="ModelClient is closed"):
        client.infer_sample(A, B)

    async def run():
        async with AsyncioModelClient(_url(triton, "http"), "add_sub") as aio:
            pass
        with pytest.raises(PyTritonClientClosedError):
            await aio.infer_sample(A, B)

    asyncio.run(run())


def test_model_client_against_nvidias_binary():
    # identity_fp32 (a C++ backend): the binary's python-backend stub needs numpy<2, these clients do not
    flags = ["--model-control-mode", "explicit", "--load-model", "identity_fp32"]
    with server_process(reference_command(), MODELS, flags) as server:
        for url in (f"http://{server.http_url}", f"grpc://{server.grpc_url}"):
            with ModelClient(url, "identity_fp32", init_timeout_s=60) as client:
                assert not client.is_batching_supported
                assert [s.name for s in client.model_config.inputs] == ["INPUT0"]
                assert client.infer_sample(A)["OUTPUT0"].tolist() == [1.0, 2.0]
                assert client.infer_sample(INPUT0=B)["OUTPUT0"].tolist() == [0.5, 0.5]
            with FuturesModelClient(url, "identity_fp32") as client:
                assert client.infer_sample(A).result(60)["OUTPUT0"].tolist() == [1.0, 2.0]

PYTRITON_PYTHON = pathlib.Path(__file__).resolve().parent.parent / ".venv-pytriton" / "bin" / "python"
PYTRITON_CLIENT = """
import json, sys
import numpy as np
from pytriton.client import DecoupledModelClient, ModelClient
from pytriton.client.exceptions import PyTritonClientInferenceServerError
http, grpc = sys.argv[1], sys.argv[2]
out = {}
for url in (http, grpc):
    with ModelClient(url, "add_sub", init_timeout_s=30) as client:
        r = client.infer_sample(np.array([1.0, 2.0], np.float32), np.array([0.5, 0.5], np.float32))
        b = client.infer_batch(a=np.ones((2, 1), np.float32), b=np.ones((2, 1), np.float32))
        out[url] = {"sample": {k: v.tolist() for k, v in r.items()}, "batch": {k: v.tolist() for k, v in b.items()}}
    with ModelClient(url, "echo") as client:
        r = client.infer_sample(x=np.array([2.0], np.float32), parameters={"factor": 3}, headers={"x-tag": "t"})
        out[url]["echo"] = {"y": r["y"].tolist(), "header": [h.decode() for h in r["header"].tolist()]}
    with ModelClient(url, "fails") as client:
        try:
            client.infer_sample(x=np.array([1.0], np.float32))
        except PyTritonClientInferenceServerError as e:
            out[url]["error"] = "the callable refuses" in str(e)
with DecoupledModelClient(grpc, "count_up") as client:
    out["stream"] = [r["i"].tolist() for r in client.infer_sample(np.array([3], np.int32))]
print(json.dumps(out))
"""


def test_pytritons_own_client_from_a_pytriton_environment(triton):
    """PyTriton 0.7's ModelClient and DecoupledModelClient, unchanged, in
    its own environment (numpy<2, `make bench-pytriton` makes it), against
    this package's frontends."""
    import json
    import subprocess

    if not PYTRITON_PYTHON.exists():
        pytest.skip(f"no PyTriton 0.7 environment at {PYTRITON_PYTHON.parent.parent} (make .venv-pytriton/.ready)")
    http, grpc = _url(triton, "http"), _url(triton, "grpc")
    run = subprocess.run([str(PYTRITON_PYTHON), "-c", PYTRITON_CLIENT, http, grpc], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    for url in (http, grpc):
        assert out[url]["sample"] == {"add": [1.5, 2.5], "sub": [0.5, 1.5]}
        assert out[url]["batch"] == {"add": [[2.0], [2.0]], "sub": [[0.0], [0.0]]}
        assert out[url]["echo"] == {"y": [6.0], "header": ["t"]}
        assert out[url]["error"] is True
    assert out["stream"] == [[0], [1], [2]]
