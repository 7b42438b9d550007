"""KServeHttp (tritonserver.frontend): the KServe v2 HTTP frontend on a real
Server, driven by NVIDIA's tritonclient.http (sync and asyncio), urllib and
raw sockets: the call table of tritonclient.http, the generate extension,
system shared memory, the model repository, logging, restricted APIs,
hostile requests and a stop with a request in flight."""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import json
import os
import select
import socket
import threading
import urllib.error
import urllib.request
import zlib

import numpy
import pytest

pytest.importorskip("uvicorn", reason="the serve extra (uvicorn, uvloop, httptools) is not installed")
pytest.importorskip("httptools", reason="the serve extra (uvicorn, uvloop, httptools) is not installed")
pytest.importorskip("uvloop", reason="the serve extra (uvicorn, uvloop, httptools) is not installed")

import tritonclient.http as httpclient  # noqa: E402
import tritonclient.http.aio as aiohttpclient  # noqa: E402
import tritonclient.utils.shared_memory as shm  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

import tritonserver  # noqa: E402
from tritonserver import TensorSpec  # noqa: E402
from tritonserver.frontend import KServeHttp  # noqa: E402

from common import dedicated_server, wait_for  # noqa: E402

MODELS = ["identity_fp32", "identity_bytes", "add_sub", "streaming", "parameters", "echo_all_types", "raise_error"]


@pytest.fixture(scope="module")
def server(backend_directory):
    """Python models in-process (the package's own runtime)."""
    with dedicated_server(backend_directory, "http-frontend", MODELS, python_models="in-process") as srv:
        yield srv


@pytest.fixture(scope="module", params=["uvicorn", "native"])
def transport(request):
    """Every test runs on both of KServeHttp's transports."""
    if request.param == "native" and not hasattr(tritonserver._native, "HttpTransport"):
        pytest.skip("this build has no native HTTP transport (TRITONSERVER_NATIVE_HTTP=OFF)")
    return request.param


@pytest.fixture(scope="module")
def http_options(transport):
    """KServeHttp.Options on the transport under test."""
    return functools.partial(KServeHttp.Options, transport=transport)


@pytest.fixture(scope="module")
def frontend(server, http_options):
    with KServeHttp(server, http_options(address="127.0.0.1", port=0)) as http:
        yield http


@pytest.fixture(scope="module")
def url(frontend):
    return f"127.0.0.1:{frontend.port}"


@pytest.fixture
def client(url):
    client = httpclient.InferenceServerClient(url, connection_timeout=30, network_timeout=30)
    yield client
    client.close()


def fp32_input(values, name="INPUT0", binary=True) -> httpclient.InferInput:
    array = numpy.asarray(values, dtype=numpy.float32)
    item = httpclient.InferInput(name, list(array.shape), "FP32")
    item.set_data_from_numpy(array, binary_data=binary)
    return item


def raw(url: str, method: str, path: str, body: bytes | None = None,
        headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with urllib: status, headers (lower-case names), body."""
    request = urllib.request.Request(f"http://{url}{path}", data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def error_of(status_and_body: tuple[int, dict, bytes], status: int) -> str:
    code, _, body = status_and_body
    assert code == status, (code, body)
    return json.loads(body)["error"]


def assert_serving(url: str) -> None:
    client = httpclient.InferenceServerClient(url, network_timeout=30)
    try:
        assert client.infer("identity_fp32", [fp32_input([7.0])]).as_numpy("OUTPUT0").tolist() == [7.0]
    finally:
        client.close()


# -- the tritonclient.http call table --------------------------------------------

def test_health_metadata_and_config(client, server):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("identity_fp32") and not client.is_model_ready("no_such_model")
    metadata = client.get_server_metadata()
    assert metadata["version"] == server.metadata()["version"]
    # exactly what is served: not CUDA shared memory, trace or classification
    assert set(metadata["extensions"]) == {
        "binary_tensor_data", "parameters", "sequence", "schedule_policy", "model_configuration", "statistics",
        "system_shared_memory", "model_repository", "model_repository(unload_dependents)", "logging"}
    assert client.get_model_metadata("add_sub") == server.model("add_sub").metadata()
    assert client.get_model_config("add_sub")["name"] == "add_sub"
    assert client.get_model_metadata("add_sub", model_version="1")["versions"] == ["1"]


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_binary_and_json(client, binary):
    inputs = [fp32_input([1.0, 2.0, 3.0, 4.0], "INPUT0", binary), fp32_input([1.0] * 4, "INPUT1", binary)]
    outputs = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)]
    result = client.infer("add_sub", inputs, outputs=outputs, request_id="r-1")
    assert result.get_response()["id"] == "r-1"
    assert result.as_numpy("OUTPUT0").tolist() == [2.0, 3.0, 4.0, 5.0]
    assert result.get_output("OUTPUT1") is None  # not asked for


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_request_and_response_compression(client, url, algorithm):
    result = client.infer("identity_fp32", [fp32_input(numpy.arange(64))], request_compression_algorithm=algorithm,
                          response_compression_algorithm=algorithm)
    assert result.as_numpy("OUTPUT0").tolist() == list(range(64))
    # the reply is compressed as asked (Accept-Encoding), and says so
    body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]}]}).encode()
    status, headers, payload = raw(url, "POST", "/v2/models/identity_fp32/infer", body,
                                   {"Accept-Encoding": algorithm})
    assert status == 200 and headers["content-encoding"] == algorithm
    inflated = gzip.decompress(payload) if algorithm == "gzip" else zlib.decompress(payload)
    assert json.loads(inflated)["outputs"][0]["data"] == [1.0, 2.0]


def test_async_infer_and_the_asyncio_client(client, url):
    pending = [client.async_infer("identity_fp32", [fp32_input([i])]) for i in range(8)]
    assert [p.get_result(timeout=60).as_numpy("OUTPUT0").tolist() for p in pending] == [[i] for i in range(8)]

    async def main():
        async with aiohttpclient.InferenceServerClient(url) as aio:
            assert await aio.is_server_ready()
            results = await asyncio.gather(*[aio.infer("identity_fp32", [fp32_input([i])]) for i in range(16)])
            return [r.as_numpy("OUTPUT0").tolist() for r in results]

    assert asyncio.run(main()) == [[i] for i in range(16)]


def test_statistics(client):
    def count() -> int:
        (stats,) = client.get_inference_statistics("identity_fp32")["model_stats"]
        return int(stats["inference_count"])

    before = count()
    for i in range(3):
        client.infer("identity_fp32", [fp32_input([i])])
    # the backend reports a request's statistics after sending its response
    assert wait_for(lambda: count() == before + 3)
    assert {"identity_fp32", "add_sub"} <= {s["name"] for s in client.get_inference_statistics()["model_stats"]}


def test_model_repository_index_load_with_config_and_files_and_unload(client):
    index = {entry["name"]: entry for entry in client.get_model_repository_index()}
    assert index["identity_fp32"]["state"] == "READY" and "bls" in index
    config = json.dumps({"name": "from_files", "backend": "identity", "max_batch_size": 0,
                         "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
                         "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]})
    client.load_model("from_files", config=config, files={"file:1/unused.txt": b"a model file"})
    assert client.is_model_ready("from_files")
    assert client.infer("from_files", [fp32_input([2.5])]).as_numpy("OUTPUT0").tolist() == [2.5]
    client.unload_model("from_files", unload_dependents=True)
    assert wait_for(lambda: not client.is_model_ready("from_files"))
    with pytest.raises(InferenceServerException) as refused:
        client.load_model("no_such_model")
    assert refused.value.status() == "500" and "no_such_model" in refused.value.message()  # the binary's class
    client.unload_model("no_such_model")  # as the binary: nothing to unload is no error


def test_load_refuses_bad_parameters_naming_them(url):
    path = "/v2/repository/models/identity_fp32/load"
    message = error_of(raw(url, "POST", path, json.dumps({"parameters": {"config": 5}}).encode()), 400)
    assert "'config' must be a string" in message
    message = error_of(raw(url, "POST", path, json.dumps({"parameters": {"file:1/x": "***"}}).encode()), 400)
    assert "'file:1/x' is not valid base64" in message
    message = error_of(raw(url, "POST", path, json.dumps({"parameters": {"config": "\ud800"}}).encode()), 400)
    assert "is not valid Unicode text" in message
    assert "not supported" in error_of(raw(url, "POST", "/v2/repository/other/models/x/load", b""), 501)


def test_system_shared_memory_inputs_and_outputs(client, url):
    key = f"/http_frontend_{id(client)}"
    region = shm.create_shared_memory_region("http_io", key, 32)
    try:
        shm.set_shared_memory_region(region, [numpy.arange(4, dtype=numpy.float32)])
        client.register_system_shared_memory("http_io", key, 32)
        (status,) = client.get_system_shared_memory_status("http_io")
        assert status == {"name": "http_io", "key": key, "offset": 0, "byte_size": 32}
        item = httpclient.InferInput("INPUT0", [4], "FP32")
        item.set_shared_memory("http_io", 16)
        output = httpclient.InferRequestedOutput("OUTPUT0")
        output.set_shared_memory("http_io", 16, offset=16)
        result = client.infer("identity_fp32", [item], outputs=[output])
        entry = result.get_output("OUTPUT0")
        assert entry == {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}  # no data, as the binary
        written = shm.get_contents_as_numpy(region, numpy.float32, [4], offset=16)
        assert written.tolist() == [0.0, 1.0, 2.0, 3.0]
        # an output larger than its region: refused, naming the sizes
        small = httpclient.InferRequestedOutput("OUTPUT0")
        small.set_shared_memory("http_io", 8, offset=16)
        with pytest.raises(InferenceServerException) as refused:
            client.infer("identity_fp32", [item], outputs=[small])
        assert "should be at least 16 bytes" in refused.value.message()
        # an output asked for in a region and as binary data: the binary's 400
        body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}],
                           "outputs": [{"name": "OUTPUT0", "parameters": {
                               "shared_memory_region": "http_io", "shared_memory_byte_size": 16,
                               "shared_memory_offset": 16, "binary_data": True}}]}).encode()
        assert error_of(raw(url, "POST", "/v2/models/identity_fp32/infer", body), 400) == \
            "Output can't set both 'shared_memory_region' and 'binary_data'"
        # offsets beyond the region
        bad = httpclient.InferInput("INPUT0", [4], "FP32")
        bad.set_shared_memory("http_io", 16, offset=24)
        with pytest.raises(InferenceServerException) as refused:
            client.infer("identity_fp32", [bad])
        assert refused.value.status() == "400" and "Invalid offset + byte size" in refused.value.message()
        client.unregister_system_shared_memory("http_io")
        assert client.get_system_shared_memory_status() == []
        with pytest.raises(InferenceServerException) as refused:
            client.infer("identity_fp32", [item])
        assert refused.value.status() == "404" and "http_io" in refused.value.message()
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(region)
    assert_serving(url)


def test_a_region_whose_file_was_truncated_is_refused_not_read(client, url):
    """A client truncates a region's file after registering it: reading or
    writing the mapping past the file's end would kill the server (SIGBUS);
    the request is refused with 400 naming the region, and the region
    serves again once its file has its size back."""
    key = f"/http_truncated_{id(client)}"
    region = shm.create_shared_memory_region("cut", key, 32)
    try:
        client.register_system_shared_memory("cut", key, 32)
        item = httpclient.InferInput("INPUT0", [4], "FP32")
        item.set_shared_memory("cut", 16)
        output = httpclient.InferRequestedOutput("OUTPUT0")
        output.set_shared_memory("cut", 16, offset=16)
        os.truncate(f"/dev/shm{key}", 0)
        for outputs in (None, [output]):
            with pytest.raises(InferenceServerException) as refused:
                client.infer("identity_fp32", [item], outputs=outputs)
            assert refused.value.status() == "400", refused.value.message()
            assert "shared memory region 'cut'" in refused.value.message()
            assert "is now 0 bytes" in refused.value.message()
        assert_serving(url)
        os.truncate(f"/dev/shm{key}", 32)
        shm.set_shared_memory_region(region, [numpy.arange(4, dtype=numpy.float32)])
        client.infer("identity_fp32", [item], outputs=[output])
        assert shm.get_contents_as_numpy(region, numpy.float32, [4], offset=16).tolist() == [0.0, 1.0, 2.0, 3.0]
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(region)


def test_a_request_head_past_64_kib_is_refused_before_it_is_kept(url, transport):
    """A header (or url) without end: the native transport refuses the
    request once its line and headers pass 64 KiB (400, naming the limit)
    and closes the connection, rather than keep what the client sends."""
    if transport != "native":
        pytest.skip("the native transport's limit (uvicorn's parser has its own)")
    host, port = url.split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.settimeout(30)
        try:
            sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Long: " + b"v" * (80 << 10))
        except OSError:
            pass  # closed while sending
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"larger than 65536 bytes" in answer
    assert_serving(url)


def test_shared_memory_keys_are_posix_names_not_paths(client, url):
    """A key shm_open would not open (a path, an empty key, JSON's lone
    surrogate) is refused with the binary's 500 and words, then the cause."""
    body = b'{"key": "/\\ud800", "offset": 0, "byte_size": 8}'
    assert "not a path" in error_of(raw(url, "POST", "/v2/systemsharedmemory/region/evil/register", body), 500)
    for key in ("/etc/passwd", "../x", "/a/b", ""):
        with pytest.raises(InferenceServerException) as refused:
            client.register_system_shared_memory("evil", key, 8)
        assert refused.value.status() == "500", refused.value.message()
        assert refused.value.message().startswith(f"Unable to open shared memory region: '{key}': ")
        assert "not a path" in refused.value.message()
    assert client.get_system_shared_memory_status() == []


def test_cuda_shared_memory_is_refused_as_by_a_binary_without_gpus(client, url):
    """The binary on a host without GPUs: the raw_handle checked (400, its
    words), then "failed to register shared memory region: invalid args"
    (400); this server adds why (it was "failed to register CUDA shared
    memory region: ..., GPUs not supported", for any request)."""
    assert client.get_cuda_shared_memory_status() == []
    with pytest.raises(InferenceServerException) as refused:
        client.register_cuda_shared_memory("gpu", base64.b64encode(b"\0" * 64), 0, 8)  # the client's form of it
    assert refused.value.status() == "400"
    assert refused.value.message().startswith("failed to register shared memory region: invalid args: ")
    assert "GPUs not supported" in refused.value.message()
    path = "/v2/cudasharedmemory/region/gpu/register"
    for document, message in (
            ({"device_id": 0, "byte_size": 8}, "Shared memory register request has no 'raw_handle' field"),
            ({"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 0},
             "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t"),
            ({"raw_handle": {"b64": "AAAAAAAAAAA="}, "device_id": 0, "byte_size": 8},  # 8 bytes, not 64
             "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")):
        assert error_of(raw(url, "POST", path, json.dumps(document).encode()), 400) == message
    client.unregister_cuda_shared_memory()


def _shared_memory_with_a_request_in_flight(command: list[str], tmp_path, flags: list[str] = ()) -> dict:
    """What a server (`command`: the binary or this package's serve) answers
    over HTTP about regions a request uses while it is in flight (`gate`
    holds it until the test releases it): its input from region 'in', its
    output into 'out', 'free' unused. Then: a refused request's regions
    are free at once, and a request whose client left frees its regions
    (once the model ended, with the binary). Each answer is (status,
    error or body)."""
    import common

    repo, started, release = common.gate_model_repository(tmp_path)
    infer_path = "/v2/models/gate/infer"

    def answer(reply):
        return (reply[0], json.loads(reply[2])["error"] if reply[0] >= 400 else reply[2].decode())

    def body(output_region="out"):
        return json.dumps({
            "inputs": [{"name": "SECONDS", "datatype": "FP32", "shape": [1],
                        "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": 4}}],
            "outputs": [{"name": "OUT", "parameters": {"shared_memory_region": output_region,
                                                       "shared_memory_byte_size": 4}}]}).encode()

    seen: dict = {}
    names = ("in", "out", "free")
    keys = {name: f"/http_in_use_{os.getpid()}_{tmp_path.name}_{name}" for name in names}
    regions = [shm.create_shared_memory_region(name, keys[name], 4) for name in names]
    with common.server_process(command, repo, flags) as served:
        url = served.http_url
        client = httpclient.InferenceServerClient(url, network_timeout=60)

        def register(*which):
            for name in which:
                client.register_system_shared_memory(name, keys[name], 4)

        def unregister(name=""):
            return answer(raw(url, "POST", f"/v2/systemsharedmemory{'/region/' + name if name else ''}/unregister",
                              b""))

        def registered():
            return [region["name"] for region in client.get_system_shared_memory_status()]

        try:
            shm.set_shared_memory_region(regions[0], [numpy.array([2.5], numpy.float32)])
            register("out", "in", "free")
            seen["registered"] = registered()
            in_flight = threading.Thread(
                target=lambda: seen.setdefault("in-flight infer", answer(raw(url, "POST", infer_path, body()))))
            in_flight.start()
            try:
                assert wait_for(started.exists, 60)
                seen["unregister out"] = unregister("out")
                seen["unregister in"] = unregister("in")
                seen["unregister free"] = unregister("free")
                register("free")
                seen["unregister all"] = unregister()
                seen["registered while in flight"] = registered()
                seen["request still in flight"] = in_flight.is_alive()
            finally:
                release.touch()
                in_flight.join(60)
            seen["output written"] = shm.get_contents_as_numpy(regions[1], numpy.float32, [1]).tolist()
            seen["unregister all once answered"] = unregister()
            # a request refused (its output region unknown) once its input region was taken
            register("in", "out")
            seen["refused infer"] = answer(raw(url, "POST", infer_path, body("nope")))[0]
            seen["unregister in once refused"] = unregister("in")
            # a request whose client leaves while the model runs
            register("in")
            started.unlink()
            release.unlink()
            with socket.create_connection(("127.0.0.1", served.http_port)) as sock:
                payload = body()
                sock.sendall(f"POST {infer_path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(payload)}\r\n"
                             "\r\n".encode() + payload)
                assert wait_for(started.exists, 60)
            release.touch()
            seen["regions free once the client left"] = wait_for(lambda: unregister() == (200, ""), 60)
            seen["registered in the end"] = registered()
        finally:
            client.close()
            for region in regions:
                shm.destroy_shared_memory_region(region)
    return seen


@pytest.mark.python_stub
def test_regions_of_a_request_in_flight_are_in_use_as_the_binarys(tmp_path):
    """A region a request in flight reads or writes can not be unregistered:
    500 "Cannot unregister shared memory region '...', it is currently in
    use." (unregistering all: the others go, and the binary's "Failed to
    unregister the following system shared memory regions: in ,out ,"),
    and the request writes its output into its region. The package used to
    unregister them (a region counted in use only while a view of it was
    alive) and fail the request with 404, the region left unwritten. On
    both transports; statuses list regions by name, as the binary's."""
    import common

    theirs = _shared_memory_with_a_request_in_flight(common.reference_command(), tmp_path / "binary")
    assert theirs["unregister out"] == (500, "Cannot unregister shared memory region 'out', it is currently in use.")
    assert theirs["unregister all"] == (
        500, "Failed to unregister the following system shared memory regions: in ,out ,"), theirs
    assert theirs["output written"] == [1.0] and theirs["request still in flight"], theirs
    for transport in ("native", "uvicorn"):
        ours = _shared_memory_with_a_request_in_flight(common.package_serve_command(), tmp_path / transport,
                                                       ["--http-transport", transport])
        for key, value in sorted(theirs.items(), key=lambda item: item[0].startswith("registered")):  # those last
            mine = ours[key]
            if isinstance(value, tuple) and value[0] >= 400:  # the binary's status and words, then the cause
                assert mine[0] == value[0] and mine[1].startswith(value[1]), (transport, key, mine, value)
            else:
                assert mine == value, (transport, key, mine, value)


def test_log_settings(client, server):
    settings = client.get_log_settings()
    assert not server.options.log_error  # dedicated_server's
    assert settings == {"log_file": "", "log_info": False, "log_warning": False, "log_error": False,
                        "log_verbose_level": 0, "log_format": "default"}
    try:
        changed = client.update_log_settings({"log_verbose_level": 1, "log_format": "ISO8601"})
        assert changed == {**settings, "log_verbose_level": 1, "log_format": "ISO8601"}
        assert client.get_log_settings() == changed
    finally:
        assert client.update_log_settings({"log_verbose_level": 0, "log_format": "default"}) == settings
    with pytest.raises(InferenceServerException) as refused:
        client.update_log_settings({"log_file": "/tmp/x.log"})
    assert refused.value.status() == "501" and "log file location can not be updated" in refused.value.message()
    with pytest.raises(InferenceServerException) as refused:
        client.update_log_settings({"log_info": "yes"})
    assert refused.value.status() == "400" and "log_info" in refused.value.message()
    assert client.get_log_settings() == settings


def test_trace_is_refused_clearly(client):
    with pytest.raises(InferenceServerException) as refused:
        client.get_trace_settings()
    assert refused.value.status() == "501" and "trace is not supported" in refused.value.message()


def test_errors_have_the_binarys_status_codes(client, url):
    with pytest.raises(InferenceServerException) as refused:
        client.infer("no_such_model", [fp32_input([1.0])])
    assert refused.value.status() == "404" and "no_such_model" in refused.value.message()
    with pytest.raises(InferenceServerException) as refused:
        client.infer("identity_fp32", [fp32_input([1.0], name="NOPE")])
    assert refused.value.status() == "400" and "NOPE" in refused.value.message()
    count = httpclient.InferInput("COUNT", [1], "INT32")
    count.set_data_from_numpy(numpy.array([2], dtype=numpy.int32))
    with pytest.raises(InferenceServerException) as refused:
        client.infer("streaming", [count])
    assert refused.value.status() == "501"
    assert "doesn't support models with decoupled transaction policy" in refused.value.message()
    assert error_of(raw(url, "GET", "/v2/models/identity_fp32/infer"), 405)
    assert error_of(raw(url, "GET", "/v2/nothing"), 404) .startswith("Not Found")
    assert error_of(raw(url, "GET", "/v2/models/no_such_model/ready"), 400)


# -- generate ----------------------------------------------------------------------

def test_generate_and_generate_stream(url):
    body = json.dumps({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1], "id": "g"}).encode()
    status, headers, payload = raw(url, "POST", "/v2/models/add_sub/generate", body)
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(payload) == {"OUTPUT0": [2.0, 3.0, 4.0, 5.0], "OUTPUT1": [0.0, 1.0, 2.0, 3.0], "id": "g",
                                   "model_name": "add_sub", "model_version": "1"}
    status, headers, payload = raw(url, "POST", "/v2/models/streaming/generate_stream",
                                   json.dumps({"COUNT": 3}).encode())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [json.loads(chunk[len(b"data: "):]) for chunk in payload.split(b"\n\n") if chunk]
    assert [event["OUT"] for event in events] == [0, 1, 2]
    # a non-decoupled model streams its one response
    status, _, payload = raw(url, "POST", "/v2/models/add_sub/generate_stream", body)
    assert status == 200 and payload.startswith(b"data: {") and payload.endswith(b"\n\n")
    # a decoupled model on generate: the binary's refusal
    message = error_of(raw(url, "POST", "/v2/models/streaming/generate", json.dumps({"COUNT": 2}).encode()), 500)
    assert "use generate stream" in message
    message = error_of(raw(url, "POST", "/v2/models/add_sub/generate", json.dumps({"INPUT0": {"a": 1}}).encode()),
                       500)  # the binary's code and words, then the input
    assert message.startswith("Unable to parse 'data': attempt to access JSON non-number as double") and "INPUT0" in message


def _generated_parameters(url: str, body: dict) -> dict:
    status, _, payload = raw(url, "POST", "/v2/models/parameters/generate", json.dumps(body).encode())
    assert status == 200, payload
    return json.loads(json.loads(payload)["PARAMETERS"])


def test_generate_takes_a_parameters_object_as_the_requests_parameters(url):
    """As the binary: the members of "parameters" are request parameters,
    beside the keys that are no input; a member that is no string, number
    or boolean is refused (400), a "parameters" that is no object too (500)."""
    assert _generated_parameters(url, {"INPUT0": [1.0], "parameters": {"stream": False, "temperature": 0,
                                                                        "tag": "x"}}) == {
        "stream": False, "temperature": 0, "tag": "x"}
    assert _generated_parameters(url, {"INPUT0": [1.0], "top": 1, "parameters": {"tag": "x"}}) == {"top": 1,
                                                                                                   "tag": "x"}
    assert _generated_parameters(url, {"INPUT0": [1.0], "parameters": {}}) == {}
    status, headers, payload = raw(url, "POST", "/v2/models/parameters/generate_stream",
                                   json.dumps({"INPUT0": [1.0], "parameters": {"n": 2.5}}).encode())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert json.loads(json.loads(payload[len(b"data: "):])["PARAMETERS"]) == {"n": 2.5}
    for action in ("generate", "generate_stream"):
        for nested in ({"a": {"b": 1}}, {"a": [1]}, {"a": None}):
            message = error_of(raw(url, "POST", f"/v2/models/parameters/{action}",
                                   json.dumps({"INPUT0": [1.0], "parameters": nested}).encode()), 400)
            assert message == ("Converting keyword: 'parameters': parameter 'a' has invalid type. It should be either "
                               "'int', 'bool', or 'string'.")
        # not an object: the binary's 500 and words, then the cause
        message = error_of(raw(url, "POST", f"/v2/models/parameters/{action}",
                               json.dumps({"INPUT0": [1.0], "parameters": 5}).encode()), 500)
        assert message.startswith("Expected JSON object for keyword: 'parameters'") and "model 'parameters'" in message


def test_generate_answers_a_models_failure_with_400_and_generate_stream_as_an_event(url):
    """As the binary: the model's error is a 400; generate_stream's is
    that one server-sent event."""
    body = json.dumps({"INPUT0": [1.0]}).encode()
    message = error_of(raw(url, "POST", "/v2/models/raise_error/generate", body), 400)
    assert message == "raise_error model: deliberate failure"
    status, headers, payload = raw(url, "POST", "/v2/models/raise_error/generate_stream", body)
    assert status == 400 and headers["content-type"] == "text/event-stream; charset=utf-8"
    assert payload.startswith(b"data: ") and payload.endswith(b"\n\n")
    assert json.loads(payload[len(b"data: "):]) == {"error": "raise_error model: deliberate failure"}


def test_infer_with_no_inputs_is_the_cores_to_judge(url):
    """`"inputs": []`: answered for a model whose inputs are all optional,
    refused by the core for one that needs an input (as the binary)."""
    status, _, payload = raw(url, "POST", "/v2/models/echo_all_types/infer", json.dumps({"inputs": []}).encode())
    assert status == 200 and json.loads(payload) == {"model_name": "echo_all_types", "model_version": "1",
                                                     "outputs": []}
    message = error_of(raw(url, "POST", "/v2/models/identity_fp32/infer", json.dumps({"inputs": []}).encode()), 400)
    assert "identity_fp32" in message and "missing required input(s) ['INPUT0']" in message
    for inputs in ({}, {"inputs": 5}, {"inputs": None}):
        message = error_of(raw(url, "POST", "/v2/models/echo_all_types/infer", json.dumps(inputs).encode()), 400)
        assert "'inputs' must be a list" in message


def test_an_outputs_own_binary_data_wins_over_binary_data_output(url):
    """As the binary: an output asked for by name is binary data only when
    it asks so itself; binary_data_output covers the outputs not named."""
    def infer(outputs, binary_input: bool) -> tuple[int, dict, bytes]:
        entry = {"name": "INPUT0", "datatype": "FP32", "shape": [1]}
        if binary_input:
            entry["parameters"] = {"binary_data_size": 4}
        else:
            entry["data"] = [1.0]
        document = {"inputs": [entry], "parameters": {"binary_data_output": True}}
        if outputs is not None:
            document["outputs"] = outputs
        header = json.dumps(document).encode()
        extra = {"Inference-Header-Content-Length": str(len(header))} if binary_input else {}
        return raw(url, "POST", "/v2/models/identity_fp32/infer",
                   header + (numpy.float32(1.0).tobytes() if binary_input else b""), extra)

    for binary_input in (False, True):  # the general path, and the native one's request
        for outputs in ([{"name": "OUTPUT0", "parameters": {"binary_data": False}}], [{"name": "OUTPUT0"}],
                        [{"name": "OUTPUT0", "parameters": {}}]):
            status, headers, payload = infer(outputs, binary_input)
            assert status == 200 and headers["content-type"] == "application/json", (outputs, headers)
            assert json.loads(payload)["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1],
                                                       "data": [1.0]}]
        for outputs in (None, [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]):
            status, headers, payload = infer(outputs, binary_input)
            assert status == 200 and "inference-header-content-length" in headers, (outputs, headers)
            assert payload.endswith(numpy.float32(1.0).tobytes())


@pytest.mark.parametrize("restricted", [["model-repository:admin-key=s3cret"],
                                        [("model-repository,logging", "admin-key", "s3cret")]],
                         ids=["flag-text", "triples"])
def test_header_forward_pattern_and_restricted_apis(server, http_options, restricted):
    options = http_options(address="127.0.0.1", port=0, header_forward_pattern="^x-fwd-",
                                 restricted_apis=restricted)
    with KServeHttp(server, options) as http:
        url = f"127.0.0.1:{http.port}"
        client = httpclient.InferenceServerClient(url)
        try:
            result = client.infer("parameters", [fp32_input([1.0])], headers={"X-Fwd-User": "ada", "Other": "no"})
            parameters = json.loads(result.as_numpy("PARAMETERS")[0])
            assert parameters == {"x-fwd-user": "ada"}
            with pytest.raises(InferenceServerException) as refused:
                client.get_model_repository_index()
            assert refused.value.status() == "403"
            assert "This API is restricted, expecting header 'admin-key'" in refused.value.message()
            assert client.get_model_repository_index(headers={"admin-key": "s3cret"})
            assert client.is_server_ready()  # other categories are open
        finally:
            client.close()


def test_a_client_that_leaves_cancels_its_request(server, frontend):
    """Mid-stream (generate_stream), and while its infer runs (JSON and
    binary tensors)."""
    cancelled = {"stream": threading.Event(), "infer": threading.Event()}
    entered = threading.Event()

    def endless(N, context):
        for i in range(3000):  # at most ~30 s: a failure ends too
            if context.cancelled():
                cancelled["stream"].set()
                return
            yield {"OUT": numpy.array([i], dtype=numpy.int32)}
            threading.Event().wait(0.01)

    def stuck(X, context):
        entered.set()
        for _ in range(3000):
            if context.cancelled():
                cancelled["infer"].set()
                break
            threading.Event().wait(0.01)
        return {"Y": X}

    server.bind("http_endless", endless, inputs=[TensorSpec("N", numpy.int32, (1,))],
                outputs=[TensorSpec("OUT", numpy.int32, (1,))])
    server.bind("http_stuck", stuck, inputs=[TensorSpec("X", numpy.float32, (1,))],
                outputs=[TensorSpec("Y", numpy.float32, (1,))])
    try:
        body = json.dumps({"N": 1}).encode()
        with socket.create_connection(("127.0.0.1", frontend.port), timeout=30) as sock:
            sock.sendall(b"POST /v2/models/http_endless/generate_stream HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            received = b""
            while b"data: " not in received:
                received += sock.recv(65536)
            assert received.startswith(b"HTTP/1.1 200")
        assert cancelled["stream"].wait(30), "the stream went on after its client left"

        body = _infer_body({"name": "X", "datatype": "FP32", "shape": [1], "data": [1.0]})
        with socket.create_connection(("127.0.0.1", frontend.port), timeout=30) as sock:
            sock.sendall(b"POST /v2/models/http_stuck/infer HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            assert entered.wait(30)
        assert cancelled["infer"].wait(30), "the request went on after its client left"

        # the same with binary tensors (the native transport's infer path)
        entered.clear()
        cancelled["infer"].clear()
        header = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": [1],
                                         "parameters": {"binary_data_size": 4}}],
                             "outputs": [{"name": "Y", "parameters": {"binary_data": True}}]}).encode()
        body = header + numpy.float32(2.0).tobytes()
        with socket.create_connection(("127.0.0.1", frontend.port), timeout=30) as sock:
            sock.sendall(b"POST /v2/models/http_stuck/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                         b"Inference-Header-Content-Length: %d\r\n\r\n%s" % (len(body), len(header), body))
            assert entered.wait(30)
        assert cancelled["infer"].wait(30), "the binary request went on after its client left"
        assert_serving(f"127.0.0.1:{frontend.port}")
    finally:
        server.unbind("http_endless")
        server.unbind("http_stuck")


# -- python models and bound functions -----------------------------------------------

def test_a_bound_function_over_http(server, client, url):
    def add_sub(INPUT0, INPUT1):
        return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}

    specs = [TensorSpec("INPUT0", numpy.float32, (4,)), TensorSpec("INPUT1", numpy.float32, (4,))]
    server.bind("http_bound", add_sub, inputs=specs,
                outputs=[TensorSpec("OUTPUT0", numpy.float32, (4,)), TensorSpec("OUTPUT1", numpy.float32, (4,))])

    def count(N):
        for i in range(int(N[0])):
            yield {"OUT": numpy.array([i], dtype=numpy.int32)}

    server.bind("http_bound_stream", count, inputs=[TensorSpec("N", numpy.int32, (1,))],
                outputs=[TensorSpec("OUT", numpy.int32, (1,))])
    try:
        result = client.infer("http_bound", [fp32_input([1, 2, 3, 4]), fp32_input([1] * 4, "INPUT1")])
        assert result.as_numpy("OUTPUT1").tolist() == [0.0, 1.0, 2.0, 3.0]
        status, _, payload = raw(url, "POST", "/v2/models/http_bound_stream/generate_stream",
                                 json.dumps({"N": 2}).encode())
        assert status == 200 and payload.count(b"data: ") == 2
    finally:
        server.unbind("http_bound")
        server.unbind("http_bound_stream")


# -- hostile requests ------------------------------------------------------------

def send_raw(port: int, data: bytes) -> bytes:
    """Send bytes on a fresh connection; what comes back until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


_TRUNCATED = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4],
                                     "parameters": {"binary_data_size": 16}}]}).encode()
HOSTILE = [
    ("malformed-json", b"{nope", {}, "not valid JSON"),
    ("truncated-binary", _TRUNCATED + b"\0" * 8, {"Inference-Header-Content-Length": str(len(_TRUNCATED))},
     "binary_data_size 16 exceeds"),
    ("bad-shm-region", json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "parameters": {
        "shared_memory_region": "nope", "shared_memory_byte_size": 4}}]}).encode(), {}, "'nope'"),
    ("bad-shm-offset-type", json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "parameters": {
        "shared_memory_region": "r", "shared_memory_byte_size": 4, "shared_memory_offset": -1}}]}).encode(), {},
     "shared_memory_offset"),
    ("bad-gzip", b"not gzip", {"Content-Encoding": "gzip"}, "does not decompress"),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_hostile_requests_get_4xx_naming_the_cause(url, case):
    _, body, headers, words = case
    status, _, payload = raw(url, "POST", "/v2/models/identity_fp32/infer", body, headers)
    assert 400 <= status < 500, (status, payload)
    assert words in json.loads(payload)["error"]
    assert_serving(url)


def test_a_huge_content_length_is_refused_before_the_body_under_a_limit(server, http_options):
    with KServeHttp(server, http_options(address="127.0.0.1", port=0, max_input_size=64 * 2**20)) as http:
        reply = send_raw(http.port, b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                                    b"Content-Length: 1000000000000\r\n\r\n{")
        assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
        assert b"larger than the limit of 67108864 bytes" in reply
        assert_serving(f"127.0.0.1:{http.port}")


def test_stalled_clients_do_not_block_others(frontend, url):
    """Connections that never finish their headers or their body, and idle
    ones, while another client is served."""
    stalled = []
    try:
        for i in range(64):
            sock = socket.create_connection(("127.0.0.1", frontend.port), timeout=30)
            if i % 3 == 0:
                sock.sendall(b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\nContent-Le")
            elif i % 3 == 1:
                sock.sendall(b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                             b"Content-Length: 1000\r\n\r\n{\"inputs\"")
            stalled.append(sock)
        for _ in range(20):
            assert_serving(url)
    finally:
        for sock in stalled:
            sock.close()
    assert_serving(url)


def exchange(port: int, data: bytes) -> bytes:
    """Send bytes on a fresh connection, keeping it open for writing (a
    half-closed client counts as gone); what comes back until the server
    closes it (the last request says Connection: close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def binary_infer_request(request_id: str, values, last: bool = False) -> bytes:
    """A raw HTTP/1.1 binary-tensor infer request of identity_fp32."""
    header = json.dumps({"id": request_id, "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [len(values)],
                                                       "parameters": {"binary_data_size": 4 * len(values)}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    body = header + numpy.asarray(values, dtype=numpy.float32).tobytes()
    return (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
            + f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(body)}\r\n".encode()
            + (b"Connection: close\r\n" if last else b"") + b"\r\n" + body)


def test_pipelined_requests_are_answered_in_order(frontend):
    """Requests sent back to back on one connection, infer and other
    routes mixed, come back in their order."""
    reply = exchange(frontend.port, binary_infer_request("first", [1.0, 2.0])
                     + b"GET /v2/models/identity_fp32/config HTTP/1.1\r\nHost: x\r\n\r\n"
                     + binary_infer_request("third", [3.0])
                     + b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert reply.count(b"HTTP/1.1 200") == 4, reply[:400]
    first, config, third = reply.find(b'"id":"first"'), reply.find(b'"backend"'), reply.find(b'"id":"third"')
    assert 0 < first < config < third, reply[:400]
    assert numpy.float32(3.0).tobytes() in reply[third:]


def test_a_client_that_pipelines_without_reading_is_held_back(frontend, url):
    """200 requests of 64 KiB sent before any reply is read (more than the
    sockets' buffers hold): the others are served meanwhile, and every
    reply arrives, in order, once the client reads."""
    count = 200
    requests = b"".join(binary_infer_request(f"r{i}", [float(i)] * 16384, last=i == count - 1)
                        for i in range(count))
    with socket.create_connection(("127.0.0.1", frontend.port), timeout=30) as sock:
        sender = threading.Thread(target=sock.sendall, args=(requests,))
        sender.start()
        assert_serving(url)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        sender.join(30)
    reply = b"".join(chunks)
    assert reply.count(b"HTTP/1.1 200") == count
    positions = [reply.find(f'"id":"r{i}"'.encode()) for i in range(count)]
    assert all(0 < a < b for a, b in zip(positions, positions[1:]))


def test_expect_100_continue_and_chunked_bodies(frontend):
    """libcurl (perf_analyzer) sends `Expect: 100-continue` for bodies over
    1 KiB and waits for the interim answer; a chunked request body is read
    whole."""
    request = binary_infer_request("expecting", [5.0] * 300, last=True)
    head, _, body = request.partition(b"\r\n\r\n")
    with socket.create_connection(("127.0.0.1", frontend.port), timeout=30) as sock:
        sock.sendall(head + b"\r\nExpect: 100-continue\r\n\r\n")
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += sock.recv(1)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    reply = b"".join(chunks)
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(numpy.full(300, 5.0, numpy.float32).tobytes())

    document = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [7.0, 8.0]}]})
    encoded = document.encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (encoded[:10], encoded[10:])) + b"0\r\n\r\n"
    reply = exchange(frontend.port, b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                                    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
    assert json.loads(reply.partition(b"\r\n\r\n")[2])["outputs"][0]["data"] == [7.0, 8.0]


def test_a_malformed_request_gets_400_and_http_1_0_closes(frontend, url):
    reply = exchange(frontend.port, b"GET /v2/health/live HTTP/1.1\r\nHost x\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    reply = exchange(frontend.port, b"GET /v2/health/live HTTP/1.0\r\n\r\n")  # closed after the reply
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    # HEAD's answer has no body: the next reply on the connection follows its headers
    reply = exchange(frontend.port, b"HEAD /v2/models/identity_fp32 HTTP/1.1\r\nHost: x\r\n\r\n"
                                    b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    first, _, rest = reply.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 ") and rest.startswith(b"HTTP/1.1 200"), reply[:300]
    assert_serving(url)


def test_a_body_over_max_input_size_is_refused(server, http_options):
    with KServeHttp(server, http_options(address="127.0.0.1", port=0, max_input_size=1024)) as http:
        url = f"127.0.0.1:{http.port}"
        message = error_of(raw(url, "POST", "/v2/models/identity_fp32/infer", b" " * 2048), 400)
        assert "max_input_size" in message
        assert_serving(url)


# -- options, start and stop ---------------------------------------------------------

def test_options_are_checked_naming_the_field(server):
    for field, value in (("port", 70000), ("port", "80"), ("reuse_port", 1), ("thread_count", 0),
                         ("max_input_size", 0), ("header_forward_pattern", "("), ("transport", "tornado")):
        with pytest.raises(tritonserver.InvalidArgumentError, match=field):
            KServeHttp.Options(**{field: value})
    for bad in (["everything:k=v"], ["no-key-value"], [("health", "", "v")]):
        with pytest.raises(tritonserver.InvalidArgumentError, match="KServeHttp.Options.restricted_apis"):
            KServeHttp.Options(restricted_apis=bad)
    for bad, words in ((["health:a=b", "metadata,health:c=d"],
                        "restricted api 'health' can not be specified in multiple config groups"),
                       (["model-reposit:a=b"], "unknown restricted api 'model-reposit'")):  # the binary's words
        with pytest.raises(tritonserver.InvalidArgumentError, match=words):
            KServeHttp.Options(restricted_apis=bad)
    # RE2's inline flags, as the binary's pattern takes them
    assert KServeHttp.Options(header_forward_pattern="(?-i)X-FWD-.*").header_forward_pattern == "(?-i)X-FWD-.*"


def test_a_port_in_use_raises_unavailable_naming_it(server, http_options, frontend):
    with pytest.raises(tritonserver.UnavailableError, match=f"KServeHttp: cannot listen on 127.0.0.1:{frontend.port}"):
        KServeHttp(server, http_options(address="127.0.0.1", port=frontend.port)).start()


def test_reuse_port_lets_two_frontends_share_a_port(server, http_options):
    options = http_options(address="127.0.0.1", port=0, reuse_port=True)
    with KServeHttp(server, options) as first:
        shared = http_options(address="127.0.0.1", port=first.port, reuse_port=True)
        with KServeHttp(server, shared) as second:
            assert second.port == first.port
            assert_serving(f"127.0.0.1:{second.port}")


def test_stop_lets_a_request_in_flight_finish(server, http_options):
    entered, release = threading.Event(), threading.Event()

    def slow(X):
        entered.set()
        release.wait(60)
        return {"Y": X}

    server.bind("http_slow", slow, inputs=[TensorSpec("X", numpy.float32, (1,))],
                outputs=[TensorSpec("Y", numpy.float32, (1,))])
    try:
        http = KServeHttp(server, http_options(address="127.0.0.1", port=0))
        http.start()
        url = f"127.0.0.1:{http.port}"
        answer: dict = {}

        def request():
            answer["reply"] = raw(url, "POST", "/v2/models/http_slow/infer", json.dumps(
                {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [4.0]}]}).encode())

        sender = threading.Thread(target=request)
        sender.start()
        assert entered.wait(60)
        stopper = threading.Thread(target=http.stop)
        stopper.start()

        def refused() -> bool:
            try:
                socket.create_connection(("127.0.0.1", http.port), timeout=1).close()
                return False
            except OSError:
                return True

        assert wait_for(refused, 30), "the listener is still open while stopping"
        assert stopper.is_alive()  # waiting for the request in flight
        release.set()
        sender.join(60)
        stopper.join(60)
        assert not stopper.is_alive()
        status, _, body = answer["reply"]
        assert status == 200 and json.loads(body)["outputs"][0]["data"] == [4.0]
    finally:
        release.set()
        server.unbind("http_slow")


def test_start_needs_a_running_server(backend_directory):
    never_started = tritonserver.Server(model_repository="/nonexistent")
    with pytest.raises(tritonserver.InvalidArgumentError, match="start it first"):
        KServeHttp(never_started, KServeHttp.Options(port=0)).start()


# -- the same requests to NVIDIA's binary --------------------------------------------

_FP32_ONE = {"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}


def _infer_body(*inputs: dict) -> bytes:
    return json.dumps({"inputs": list(inputs)}).encode()


# (method, path, body, headers): answered with the same status by both
SAME_STATUS = [
    ("GET", "/v2", None, {}),
    ("GET", "/v2/health/live", None, {}),
    ("GET", "/v2/health/ready", None, {}),
    ("GET", "/v2/models/identity_fp32", None, {}),
    ("GET", "/v2/models/identity_fp32/versions/1/config", None, {}),
    ("GET", "/v2/models/identity_fp32/ready", None, {}),
    ("GET", "/v2/models/identity_fp32/versions/abc", None, {}),
    ("GET", "/v2/models/identity_fp32/versions/-1/ready", None, {}),
    ("POST", "/v2/models/identity_fp32/versions/x1/infer",
     json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]}).encode(), {}),
    ("GET", "/v2/models/no_such_model", None, {}),
    ("GET", "/v2/models/no_such_model/ready", None, {}),
    ("GET", "/v2/models/no_such_model/config", None, {}),
    ("GET", "/v2/models/no_such_model/stats", None, {}),
    ("GET", "/v2/models/stats", None, {}),
    ("POST", "/v2/models/stats", b"", {}),
    ("POST", "/v2/models/identity_fp32/infer", _infer_body(_FP32_ONE), {}),
    ("POST", "/v2/models/no_such_model/infer", _infer_body(_FP32_ONE), {}),
    ("POST", "/v2/models/identity_fp32/infer", _infer_body({**_FP32_ONE, "name": "NOPE"}), {}),
    ("POST", "/v2/models/streaming/infer",
     _infer_body({"name": "COUNT", "datatype": "INT32", "shape": [1], "data": [2]}), {}),
    ("POST", "/v2/models/identity_fp32/infer", _infer_body(_FP32_ONE), {"Content-Encoding": "br"}),
    ("GET", "/v2/models/identity_fp32/infer", None, {}),
    ("POST", "/v2/models/identity_fp32", b"", {}),
    ("GET", "/v3", None, {}),
    ("GET", "/v2/nothing", None, {}),
    # python models run by the binary's stub, which needs numpy<2 (under numpy 2 these skip)
    pytest.param("POST", "/v2/models/add_sub/generate",
                 json.dumps({"INPUT0": [1, 2, 3, 4], "INPUT1": [1, 1, 1, 1]}).encode(), {},
                 marks=pytest.mark.python_stub),
    pytest.param("POST", "/v2/models/streaming/generate_stream", json.dumps({"COUNT": 2}).encode(), {},
                 marks=pytest.mark.python_stub),
    ("POST", "/v2/models/no_such_model/generate", b"{}", {}),
    pytest.param("POST", "/v2/models/parameters/generate",
                 json.dumps({"INPUT0": [1.0], "parameters": {"stream": False, "temperature": 0}}).encode(), {},
                 marks=pytest.mark.python_stub),
    pytest.param("POST", "/v2/models/parameters/generate_stream",
                 json.dumps({"INPUT0": [1.0], "parameters": {"a": {"b": 1}}}).encode(), {},
                 marks=pytest.mark.python_stub),
    pytest.param("POST", "/v2/models/raise_error/generate", json.dumps({"INPUT0": [1.0]}).encode(), {},
                 marks=pytest.mark.python_stub),
    pytest.param("POST", "/v2/models/echo_all_types/infer", json.dumps({"inputs": []}).encode(), {},
                 marks=pytest.mark.python_stub),
    ("POST", "/v2/models/identity_fp32/infer", json.dumps({"inputs": []}).encode(), {}),
    ("GET", "/v2/systemsharedmemory/status", None, {}),
    ("GET", "/v2/systemsharedmemory/region/nope/status", None, {}),
    ("POST", "/v2/systemsharedmemory/region/nope/register", json.dumps({"byte_size": 4}).encode(), {}),
    ("POST", "/v2/systemsharedmemory/region/nope/unregister", b"", {}),
    ("POST", "/v2/systemsharedmemory/unregister", b"", {}),
    ("GET", "/v2/systemsharedmemory/unregister", None, {}),
    ("GET", "/v2/cudasharedmemory/status", None, {}),
    ("POST", "/v2/cudasharedmemory/region/gpu/register",
     json.dumps({"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 4}).encode(), {}),
    ("POST", "/v2/cudasharedmemory/unregister", b"", {}),
    ("POST", "/v2/repository/index", b"", {}),
    ("POST", "/v2/repository/index", json.dumps({"ready": True}).encode(), {}),
    ("GET", "/v2/repository/index", None, {}),
    ("POST", "/v2/repository/other/models/identity_fp32/load", b"", {}),
    ("GET", "/v2/logging", None, {}),
    ("POST", "/v2/logging", json.dumps({"log_file": "/tmp/elsewhere.log"}).encode(), {}),
    ("POST", "/v2/logging", json.dumps({"log_verbose_level": 0}).encode(), {}),
    ("POST", "/v2/repository/models/no_such_model/load", b"", {}),
    ("POST", "/v2/repository/models/no_such_model/unload", b"", {}),
    ("PUT", "/v2/logging", b"{}", {}),
]

# Where this frontend answers otherwise, on purpose (docs/serving.md):
# (method, path, body, the binary's status, this frontend's status)
DIFFERENT_STATUS = [
    # a body that does not parse: the binary's 500, a 400 naming the cause here
    ("POST", "/v2/models/identity_fp32/infer", b"{nope", 500, 400),
    # no tracing here
    ("GET", "/v2/trace/setting", None, 200, 501),
]


@pytest.fixture(scope="module")
def binary_url():
    import common

    flags = ["--model-control-mode", "explicit"] + [f"--load-model={m}" for m in MODELS]
    with common.server_process(common.reference_command(), common.MODELS, flags) as binary:
        yield binary.http_url


def _case_id(case) -> str:
    values = case.values if hasattr(case, "values") else case
    return f"{values[0]} {values[1]}"


@pytest.mark.parametrize("method, path, body, headers", SAME_STATUS, ids=[_case_id(c) for c in SAME_STATUS])
def test_the_binary_and_kserve_http_answer_with_the_same_status(binary_url, url, method, path, body, headers):
    theirs = raw(binary_url, method, path, body, headers)
    ours = raw(url, method, path, body, headers)
    assert ours[0] == theirs[0], (ours, theirs)
    if theirs[0] >= 400:
        assert json.loads(ours[2])["error"]  # the protocol's error body


@pytest.mark.python_stub
def test_generate_stream_answers_a_models_failure_as_the_binary(binary_url, url):
    """400, server-sent events, the one error event."""
    body = json.dumps({"INPUT0": [1.0]}).encode()
    theirs = raw(binary_url, "POST", "/v2/models/raise_error/generate_stream", body)
    ours = raw(url, "POST", "/v2/models/raise_error/generate_stream", body)
    assert ours[0] == theirs[0] == 400
    assert ours[1]["content-type"] == theirs[1]["content-type"]
    assert json.loads(ours[2][len(b"data: "):]) == json.loads(theirs[2][len(b"data: "):])


def test_an_input_whose_bytes_do_not_fit_its_shape_is_refused_as_by_the_binary(binary_url, url):
    """Binary data (on the general path: a request parameter leaves the
    native one) or a shared-memory region of another size than the shape:
    the core's 400 "input byte size mismatch for input ...", as the
    binary's. The routes answered with a text of their own ("... bytes of
    binary data do not hold shape ...")."""
    key = f"/http_mismatch_{os.getpid()}"
    region = shm.create_shared_memory_region("mismatch", key, 16)
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2],
                                     "parameters": {"binary_data_size": 12}}],
                         "parameters": {"leave_the_native_path": True}}).encode()
    binary_case = (header + b"\0" * 12, {"Inference-Header-Content-Length": str(len(header))})
    cases = [binary_case] + [
        (_infer_body({"name": "INPUT0", "datatype": "FP32", "shape": [2], "parameters": {
            "shared_memory_region": "mismatch", "shared_memory_byte_size": size}}), {}) for size in (16, 4)]
    try:
        for where in (binary_url, url):
            assert raw(where, "POST", "/v2/systemsharedmemory/region/mismatch/register",
                       json.dumps({"key": key, "offset": 0, "byte_size": 16}).encode())[0] == 200
        for body, headers in cases:
            theirs = raw(binary_url, "POST", "/v2/models/identity_fp32/infer", body, headers)
            ours = raw(url, "POST", "/v2/models/identity_fp32/infer", body, headers)
            assert theirs[0] == ours[0] == 400, (ours, theirs)
            words = json.loads(theirs[2])["error"].removeprefix("[request id: <id_unknown>] ")
            assert words.startswith("input byte size mismatch for input 'INPUT0' for model 'identity_fp32'. "), words
            assert json.loads(ours[2])["error"] == words, (ours, theirs)
    finally:
        for where in (binary_url, url):
            raw(where, "POST", "/v2/systemsharedmemory/unregister", b"")
        shm.destroy_shared_memory_region(region)


@pytest.mark.parametrize("outputs", [[{"name": "OUTPUT0", "parameters": {"binary_data": False}}],
                                     [{"name": "OUTPUT0"}]], ids=["binary_data-false", "no-binary_data"])
def test_an_outputs_own_binary_data_wins_as_with_the_binary(binary_url, url, outputs):
    body = json.dumps({"inputs": [_FP32_ONE], "outputs": outputs,
                       "parameters": {"binary_data_output": True}}).encode()
    theirs = raw(binary_url, "POST", "/v2/models/identity_fp32/infer", body)
    ours = raw(url, "POST", "/v2/models/identity_fp32/infer", body)
    assert ours[0] == theirs[0] == 200
    assert ours[1]["content-type"] == theirs[1]["content-type"] == "application/json"
    assert json.loads(ours[2]) == json.loads(theirs[2])


@pytest.mark.parametrize("case", DIFFERENT_STATUS, ids=[f"{c[0]} {c[1]} {c[2]!r:.30}" for c in DIFFERENT_STATUS])
def test_the_documented_differences_from_the_binary(binary_url, url, case):
    method, path, body, binary_status, our_status = case
    assert raw(binary_url, method, path, body)[0] == binary_status
    assert raw(url, method, path, body)[0] == our_status


def _dup(text: str) -> bytes:
    """A body with a key given twice (json.dumps cannot write one)."""
    return text.replace("FP32_ONE", json.dumps(_FP32_ONE)).encode()


# (method, path, body): answered with the same status and the same body,
# byte for byte (the binary's compact JSON), by both
SAME_REPLY = [
    # a key given twice: its first value (RapidJSON's lookup); an input twice: the core's refusal
    ("POST", "/v2/models/identity_fp32/infer", _dup('{"id": "a", "inputs": [FP32_ONE], "id": "b"}')),
    ("POST", "/v2/models/identity_fp32/infer", _dup('{"inputs": [FP32_ONE], "inputs": [{"name": "NOPE"}]}')),
    ("POST", "/v2/models/identity_fp32/infer", _infer_body(_FP32_ONE, _FP32_ONE)),
    ("POST", "/v2/models/identity_fp32/infer", _dup('{"id": "r", "inputs": [FP32_ONE, FP32_ONE]}')),
    ("POST", "/v2/models/identity_fp32/generate", b'{"INPUT0": [1.0], "INPUT0": [2.0]}'),
    ("POST", "/v2/models/identity_fp32/generate_stream", b'{"id": "r", "INPUT0": [1.0], "INPUT0": [2.0]}'),
    ("POST", "/v2/models/identity_fp32/generate", b'{"INPUT0": [1.0], "id": "x", "id": "y"}'),
    # the reserved prefix of request parameters (not of an input's)
    ("POST", "/v2/models/identity_fp32/infer",
     json.dumps({"inputs": [_FP32_ONE], "parameters": {"triton_": True, "key2": "value2"}}).encode()),
    ("POST", "/v2/models/identity_fp32/infer",
     json.dumps({"inputs": [_FP32_ONE], "parameters": {"binary_data_output": True, "triton_x": 1}}).encode()),
    ("POST", "/v2/models/identity_fp32/infer",
     json.dumps({"inputs": [_FP32_ONE], "parameters": {"triton_enable_empty_final_response": True}}).encode()),
    ("POST", "/v2/models/identity_fp32/infer",
     json.dumps({"inputs": [{**_FP32_ONE, "parameters": {"triton_x": 1}}]}).encode()),
    ("POST", "/v2/models/identity_fp32/infer", json.dumps({"inputs": [_FP32_ONE], "parameters": {"a": None}}).encode()),
    ("POST", "/v2/models/identity_fp32/generate", json.dumps({"INPUT0": [1.0], "triton_x": 1}).encode()),
    # generate's refusals of a parameter
    ("POST", "/v2/models/identity_fp32/generate",
     json.dumps({"INPUT0": [1.0], "parameters": {"nested": {"a": 1}}}).encode()),
    ("POST", "/v2/models/identity_fp32/generate_stream", json.dumps({"INPUT0": [1.0], "parameters": {"a": None}}).encode()),
    ("POST", "/v2/models/identity_fp32/generate", json.dumps({"INPUT0": [1.0], "id": 5}).encode()),
    ("GET", "/v2/nothing", None),
    ("POST", "/v3", b"{}"),
    ("GET", "/v2/models/identity_fp32/versions/abc", None),
]


@pytest.mark.parametrize("method, path, body", SAME_REPLY, ids=[f"{c[1]} {c[2]!r:.60}" for c in SAME_REPLY])
def test_the_binary_and_kserve_http_answer_with_the_same_reply(binary_url, url, method, path, body):
    theirs = raw(binary_url, method, path, body)
    ours = raw(url, method, path, body)
    assert ours[0] == theirs[0]
    if ours[0] == 200:  # the same document (the binary writes "id" first)
        assert json.loads(ours[2]) == json.loads(theirs[2])
    else:
        assert ours[2] == theirs[2]


# (path, body): the binary's status, its error text first (then the cause here)
SAME_WORDS_FIRST = [
    ("/v2/models/identity_fp32/infer", _infer_body({**_FP32_ONE, "data": ["x"]})),
    ("/v2/models/identity_fp32/infer", _infer_body({**_FP32_ONE, "data": [True]})),
    ("/v2/models/identity_fp32/infer", _infer_body({**_FP32_ONE, "data": {"a": 1}})),
    ("/v2/models/identity_fp32/infer", _infer_body({**_FP32_ONE, "data": 1.0})),
    ("/v2/models/identity_fp32/infer", _infer_body({**_FP32_ONE, "data": [{"a": 1}]})),
    ("/v2/models/identity_bytes/infer", _infer_body({"name": "INPUT0", "datatype": "BYTES", "shape": [1], "data": [1]})),
    ("/v2/models/identity_fp32/generate", json.dumps({"INPUT0": ["x"]}).encode()),
    ("/v2/models/identity_fp32/generate_stream", json.dumps({"INPUT0": {"a": 1}}).encode()),
    ("/v2/models/identity_bytes/generate", json.dumps({"INPUT0": 123}).encode()),
    ("/v2/models/identity_bytes/generate", json.dumps({"INPUT0": [None]}).encode()),
    ("/v2/models/identity_fp32/generate", json.dumps({"INPUT0": [1.0], "parameters": 1}).encode()),
    ("/v2/models/identity_fp32/generate_stream", json.dumps({"INPUT0": [1.0], "parameters": [1]}).encode()),
    ("/v2/models/identity_fp32/generate", json.dumps({"INPUT0": [1.0], "PARAMS": {"PARAM_0": 0}}).encode()),
    ("/v2/models/identity_fp32/generate_stream", json.dumps({"PARAMS": [1], "INPUT0": ["x"]}).encode()),
    ("/v2/models/streaming/infer", b"{nope"),  # decoupled: refused whatever the body
]


@pytest.mark.parametrize("path, body", SAME_WORDS_FIRST, ids=[f"{c[0]} {c[1]!r:.60}" for c in SAME_WORDS_FIRST])
def test_the_binarys_refusals_are_ours_in_its_words_first(binary_url, url, path, body):
    theirs = raw(binary_url, "POST", path, body)
    ours = raw(url, "POST", path, body)
    assert ours[0] == theirs[0] >= 400 and ours[1]["content-type"] == theirs[1]["content-type"], (ours, theirs)
    assert json.loads(ours[2])["error"].startswith(json.loads(theirs[2])["error"]), (ours, theirs)


@pytest.mark.python_stub
def test_a_request_parameter_given_twice_keeps_its_first_value_as_with_the_binary(binary_url, url):
    body = _dup('{"inputs": [FP32_ONE], "parameters": {"tag": "first", "tag": "second"}, "parameters": {"x": 1}}')
    theirs = raw(binary_url, "POST", "/v2/models/parameters/infer", body)
    ours = raw(url, "POST", "/v2/models/parameters/infer", body)
    assert ours[0] == theirs[0] == 200
    # the binary's request holds "tag" twice, both with the first value; one here
    assert [json.loads(json.loads(reply[2])["outputs"][0]["data"][0]) for reply in (ours, theirs)] == [
        {"tag": "first"}] * 2
    body = b'{"INPUT0": [1.0], "tag": "first", "tag": "second"}'
    theirs = raw(binary_url, "POST", "/v2/models/parameters/generate", body)
    ours = raw(url, "POST", "/v2/models/parameters/generate", body)
    assert ours[0] == theirs[0] == 200
    assert [json.loads(json.loads(reply[2])["PARAMETERS"]) for reply in (ours, theirs)] == [{"tag": "first"}] * 2


def test_a_chunked_body_with_a_content_length_is_read_chunked_as_by_the_binary(binary_url, url):
    """`requests` sends a pre-chunked body with both headers (NVIDIA's
    qa test_content_encoding_chunked_manually, a raw binary request): the
    chunks are read, the Content-Length ignored (RFC 9112 6.3), on either
    transport."""
    encoded = numpy.array([1.0, 2.0], dtype=numpy.float32).tobytes()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (encoded[:3], encoded[3:])) + b"0\r\n\r\n"
    replies = []
    for where in (binary_url, url):
        host, port = where.rsplit(":", 1)
        reply = exchange(int(port), b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: x\r\n"
                         b"Inference-Header-Content-Length: 0\r\nContent-Length: "
                         + str(len(chunked)).encode() + b"\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                         + chunked)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:300]
        replies.append(reply.partition(b"\r\n\r\n")[2])
    assert replies[0] == replies[1] and replies[1].endswith(encoded)


# The raw binary request (the binary's src/http_server.cc: a JSON header of
# length 0 hands the whole body to the core as its raw input, which gives
# it the model's only input, and every output is binary data):
# (model, body, headers)
_RAW_FP32 = numpy.array([1.5, 2.5], dtype=numpy.float32).tobytes()
RAW_REQUESTS = {
    "fp32": ("identity_fp32", _RAW_FP32,
             {"Inference-Header-Content-Length": "0", "Content-Type": "application/octet-stream"}),
    "fp32-no-content-type": ("identity_fp32", _RAW_FP32, {"Inference-Header-Content-Length": "0"}),
    "fp32-gzip": ("identity_fp32", gzip.compress(_RAW_FP32),
                  {"Inference-Header-Content-Length": "0", "Content-Encoding": "gzip"}),
    "empty-body-no-header": ("identity_fp32", b"", {}),
    "empty-body": ("identity_fp32", b"", {"Inference-Header-Content-Length": "0"}),
    "size-not-of-the-type": ("identity_fp32", b"abc", {"Inference-Header-Content-Length": "0"}),
    "several-inputs": ("add_sub", _RAW_FP32, {"Inference-Header-Content-Length": "0"}),
    "bytes-not-of-shape-1": ("identity_bytes", b"\x03\x00\x00\x00abc", {"Inference-Header-Content-Length": "0"}),
    "unknown-model": ("no_such_model", _RAW_FP32, {"Inference-Header-Content-Length": "0"}),
}


@pytest.mark.parametrize("case", list(RAW_REQUESTS))
def test_a_raw_binary_request_is_answered_as_by_the_binary(binary_url, url, case):
    model, body, headers = RAW_REQUESTS[case]
    path = f"/v2/models/{model}/infer"
    theirs, ours = raw(binary_url, "POST", path, body, headers), raw(url, "POST", path, body, headers)
    assert ours[0] == theirs[0], (ours, theirs)
    if theirs[0] != 200:  # the core's message (the binary prefixes "[request id: <id_unknown>] ")
        assert json.loads(theirs[2])["error"].endswith(json.loads(ours[2])["error"]), (ours, theirs)
        return
    for name in ("content-type", "inference-header-content-length"):
        assert ours[1].get(name) == theirs[1].get(name), (name, ours[1], theirs[1])
    split = int(theirs[1].get("inference-header-content-length", len(theirs[2])))
    assert json.loads(ours[2][:split]) == json.loads(theirs[2][:split])
    assert ours[2][split:] == theirs[2][split:]


@pytest.mark.parametrize("binary_output", [True, False])
def test_empty_binary_outputs_make_a_json_reply_as_with_the_binary(binary_url, url, binary_output):
    """No binary data follows the JSON: application/json without
    Inference-Header-Content-Length, as the binary answers."""
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [0],
                                     "parameters": {"binary_data_size": 0}}],
                         "parameters": {"binary_data_output": binary_output}}).encode()
    headers = {"Inference-Header-Content-Length": str(len(header))}
    theirs = raw(binary_url, "POST", "/v2/models/identity_fp32/infer", header, headers)
    ours = raw(url, "POST", "/v2/models/identity_fp32/infer", header, headers)
    assert ours[0] == theirs[0] == 200, (ours, theirs)
    assert ours[1]["content-type"] == theirs[1]["content-type"] == "application/json"
    assert "inference-header-content-length" not in ours[1]
    assert json.loads(ours[2]) == json.loads(theirs[2])


def test_the_raw_binary_requests_output_is_its_input(url):
    status, headers, body = raw(url, "POST", "/v2/models/identity_fp32/infer", _RAW_FP32,
                                {"Inference-Header-Content-Length": "0"})
    assert status == 200, body
    split = int(headers["inference-header-content-length"])
    output = json.loads(body[:split])["outputs"][0]
    assert (output["datatype"], output["shape"]) == ("FP32", [2])
    assert numpy.frombuffer(body[split:], numpy.float32).tolist() == [1.5, 2.5]


def _request_reply(sock: socket.socket, request: bytes) -> bytes:
    """Sends `request` and reads one reply: its head, then its Content-Length
    body (none without one: the binary's HTTP/1.0 health reply has none)."""
    sock.sendall(request)
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection: {reply!r}"
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection within a reply"
        body += chunk
    return head


_LIVE_1_1 = b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
_LIVE_1_0_KEEP_ALIVE = b"GET /v2/health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"


@pytest.mark.parametrize("request_bytes", [_LIVE_1_1, _LIVE_1_0_KEEP_ALIVE], ids=["HTTP/1.1", "HTTP/1.0-keep-alive"])
def test_an_idle_keep_alive_connection_stays_open_as_with_the_binary(binary_url, url, transport, request_bytes):
    """libevhtp, as the binary sets it up, has no idle timeout: a connection
    kept alive stays open until the client closes it (uvicorn's own default
    closed it after 5 s). uvicorn answers HTTP/1.0 with connection: close
    whatever the request asks (docs/serving.md)."""
    http_1_0 = request_bytes == _LIVE_1_0_KEEP_ALIVE
    closes = http_1_0 and transport == "uvicorn"
    theirs, ours = (socket.create_connection((u.split(":")[0], int(u.split(":")[1])), timeout=30)
                    for u in (binary_url, url))
    with theirs, ours:
        heads = {where: _request_reply(sock, request_bytes).lower() for where, sock in (("theirs", theirs),
                                                                                        ("ours", ours))}
        if http_1_0:
            assert b"connection: keep-alive" in heads["theirs"], heads
            assert (b"connection: close" if closes else b"connection: keep-alive") in heads["ours"], heads
        else:
            assert b"connection:" not in heads["theirs"] and b"connection:" not in heads["ours"], heads
        if closes:
            return
        # Neither side says anything (a close would make its socket readable) for 6 s.
        readable, _, _ = select.select([theirs, ours], [], [], 6.0)
        assert readable == [], [sock.recv(100) for sock in readable]
        for sock in (theirs, ours):
            assert _request_reply(sock, request_bytes).startswith(b"HTTP/1."), sock


def test_a_body_over_64_mib_is_served_by_default_as_the_binary_would(url):
    """The 2.51 binary has no body limit (libevhtp's max_body_size left at
    0): neither has KServeHttp by default (Options.max_input_size None).
    The binary itself is not sent this body: it answered 200 to
    http.client, but died of SIGSEGV on the same body from urllib (the
    shared binary of these tests with it)."""
    assert KServeHttp.Options().max_input_size is None
    count = 16 * 2**20 + 1  # 64 MiB and 4 bytes of FP32
    header = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [count],
                                     "parameters": {"binary_data_size": 4 * count}}],
                         "parameters": {"binary_data_output": True}}).encode()
    body = header + numpy.ones(count, dtype=numpy.float32).tobytes()
    status, headers, reply = raw(url, "POST", "/v2/models/identity_fp32/infer", body,
                                 {"Inference-Header-Content-Length": str(len(header))})
    assert status == 200, reply[:300]
    assert len(reply) - int(headers["inference-header-content-length"]) == 4 * count


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/v2/models/no_such_model", None),
    ("GET", "/v2/models/no_such_model/config", None),
    ("POST", "/v2/models/no_such_model/infer", json.dumps({"inputs": []}).encode()),
], ids=["metadata", "config", "infer"])
def test_an_unknown_model_is_answered_in_the_binarys_words(binary_url, url, method, path, body):
    """The in-process API's advice (server.load(), server.models()) is for
    Python callers; a network client gets the core's words, as from the
    binary."""
    theirs = raw(binary_url, method, path, body)
    ours = raw(url, method, path, body)
    assert ours[0] == theirs[0] and json.loads(ours[2]) == json.loads(theirs[2]), (ours, theirs)


def _unload_with_a_request_in_flight(command: list[str], tmp_path) -> dict:
    """What a server (`command`: the binary or this package's serve) answers
    over HTTP while `gate` is unloaded with one request of it in flight (held
    until the test releases it): the unload's answer, and meanwhile the
    index, readiness, metadata, config, a new request, a load of another
    model. Each error is (status, message)."""
    import common

    repo, started, release = common.gate_model_repository(tmp_path)
    common.copy_model("identity_fp32", repo)
    flags = ["--model-control-mode", "explicit", "--load-model=gate", "--exit-timeout-secs=90"]
    body = json.dumps({"inputs": [{"name": "SECONDS", "datatype": "FP32", "shape": [1], "data": [0.0]}]}).encode()

    def answer(reply):
        return (reply[0], json.loads(reply[2])["error"]) if reply[0] >= 400 and reply[2] else reply[0]

    seen: dict = {}
    with common.server_process(command, repo, flags) as served:
        url = served.http_url
        in_flight = threading.Thread(
            target=lambda: seen.setdefault("in-flight infer", raw(url, "POST", "/v2/models/gate/infer", body)[0]))
        in_flight.start()
        try:
            assert wait_for(started.exists, 60)
            seen["unload"] = answer(raw(url, "POST", "/v2/repository/models/gate/unload", b""))
            seen["unload answered while the request runs"] = in_flight.is_alive()
            index = json.loads(raw(url, "POST", "/v2/repository/index", b"")[2])
            seen["index"] = [entry for entry in index if entry["name"] == "gate"]
            ready_index = json.loads(raw(url, "POST", "/v2/repository/index", b'{"ready": true}')[2])
            seen["ready index"] = [entry for entry in ready_index if entry["name"] == "gate"]
            seen["model ready"] = raw(url, "GET", "/v2/models/gate/ready")[0]
            seen["server ready"] = raw(url, "GET", "/v2/health/ready")[0]
            seen["metadata"] = answer(raw(url, "GET", "/v2/models/gate"))
            seen["config"] = answer(raw(url, "GET", "/v2/models/gate/config"))
            seen["new infer"] = answer(raw(url, "POST", "/v2/models/gate/infer", body))
            seen["new infer of version 1"] = answer(raw(url, "POST", "/v2/models/gate/versions/1/infer", body))
            seen["load of another model"] = answer(raw(url, "POST", "/v2/repository/models/identity_fp32/load", b""))
            seen["statistics"] = answer(raw(url, "GET", "/v2/models/gate/stats"))
            seen["statistics of version 1"] = answer(raw(url, "GET", "/v2/models/gate/versions/1/stats"))
            every = json.loads(raw(url, "GET", "/v2/models/stats")[2])
            seen["statistics of every model"] = sorted(s["name"] + "/" + s["version"] for s in every["model_stats"])
            seen["request still in flight"] = in_flight.is_alive()
        finally:
            release.touch()
            in_flight.join(60)

        def gone():
            index = json.loads(raw(url, "POST", "/v2/repository/index", b"")[2])
            return [entry.get("state") for entry in index if entry["name"] == "gate"] == ["UNAVAILABLE"]

        seen["unloaded in the end"] = wait_for(gone, 60)
    return seen


@pytest.mark.python_stub
def test_a_model_unloaded_with_a_request_in_flight_reads_as_the_binarys(tmp_path):
    """The binary answers the unload at once; while the request finishes the
    model is UNLOADING, not ready (nor the server, strict readiness), unknown
    to metadata, config and new requests, and other models load. The package
    drains the model's requests before the core's unload (a 2.51 core crash,
    cpp/model_unload.h): it answered the unload only once the request ended,
    reading READY meanwhile and refusing new requests with 503, and held
    other models' loads behind it."""
    import common

    theirs = _unload_with_a_request_in_flight(common.reference_command(), tmp_path / "binary")
    ours = _unload_with_a_request_in_flight(common.package_serve_command(), tmp_path / "package")
    assert theirs["unload answered while the request runs"] and theirs["request still in flight"], theirs
    assert theirs["index"] == [{"name": "gate", "version": "1", "state": "UNLOADING"}], theirs
    for key, value in theirs.items():
        mine = ours[key]
        if isinstance(value, tuple):  # the binary's status and words, then the package's cause
            assert mine[0] == value[0] and mine[1].startswith(value[1]), (key, mine, value)
        else:
            assert mine == value, (key, mine, value)
