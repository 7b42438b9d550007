"""tritonserver.ray on a real local Ray cluster (make test-ray; deselected
from make test). The test starts a head node on loopback without a
dashboard, runs Serve with replicas of TritonDeployment (half a CPU each:
these machines have 2 cores), and talks to it with tritonclient's HTTP
client and with DeploymentHandles.

The tests run in order on one cluster: traffic over both replicas, a
stream, killing a replica, scaling 2 -> 1, and shutting the app down."""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil
import socket
import tempfile
import threading
import time

import numpy
import pytest

from common import MODELS

pytestmark = pytest.mark.ray

APP = "triton"
MODELS_SERVED = ["add_sub", "streaming", "echo_all_types"]
REQUESTS = 200


@dataclasses.dataclass
class Cluster:
    url: str
    temp_dir: str
    backend_directory: str

    def deploy(self, name: str = APP, route_prefix: str = "/", **deployment_options):
        """Deploy an app of TritonDeployment (2 replicas unless the options
        say otherwise); its handle."""
        from ray import serve

        from tritonserver.ray import TritonDeployment, actor_options

        deployment_options.setdefault("num_replicas", 2)
        app = TritonDeployment.options(ray_actor_options=actor_options(num_cpus=0.5), **deployment_options).bind(
            model_repository=str(MODELS),
            models=MODELS_SERVED,
            options={"backend_directory": self.backend_directory, "exit_timeout": 10},
        )
        return serve.run(app, name=name, route_prefix=route_prefix)

    def serve_log(self) -> str:
        """Everything the Serve replicas logged so far."""
        text = []
        for path in glob.glob(os.path.join(self.temp_dir, "session_latest", "logs", "serve", "replica_*.log")):
            with open(path, errors="replace") as f:
                text.append(f.read())
        return "\n".join(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cluster(backend_directory):
    ray = pytest.importorskip("ray", reason="make test-ray installs ray[serve]")
    from ray import serve

    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray puts sockets in it
    port = free_port()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        _temp_dir=temp_dir,
        object_store_memory=256 * 2**20,
        log_to_driver=False,
    )
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield Cluster(f"127.0.0.1:{port}", temp_dir, backend_directory)
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def handle(cluster):
    return cluster.deploy()


def http_client(cluster):
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(cluster.url, connection_timeout=30, network_timeout=30)


def add_sub_inputs(i: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    a = numpy.arange(16, dtype=numpy.float32) + i
    return a, numpy.full(16, float(i % 7), dtype=numpy.float32)


def http_add_sub(client, i: int) -> int:
    """One add_sub request over HTTP (JSON or binary, alternating); checks
    the outputs and returns the answering replica's pid."""
    import tritonclient.http as httpclient

    a, b = add_sub_inputs(i)
    binary = i % 2 == 0
    inputs = []
    for name, value in (("INPUT0", a), ("INPUT1", b)):
        item = httpclient.InferInput(name, [16], "FP32")
        item.set_data_from_numpy(value, binary_data=binary)
        inputs.append(item)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("OUTPUT0", "OUTPUT1")]
    result = client.infer("add_sub", inputs, outputs=outputs, request_id=f"r{i}")
    numpy.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    numpy.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert result.get_response()["id"] == f"r{i}"
    return int(result.get_response()["parameters"]["replica_pid"])


def replica_pids(handle, expected: int, seconds: float = 120.0) -> dict[int, dict]:
    """Ask replicas who they are until `expected` distinct ones answered."""
    infos: dict[int, dict] = {}
    deadline = time.monotonic() + seconds
    while len(infos) < expected:
        assert time.monotonic() < deadline, f"only {len(infos)} of {expected} replicas answered"
        for response in [handle.replica_info.remote() for _ in range(8)]:
            info = response.result(timeout_s=60)
            infos[info["pid"]] = info
    return infos


def test_requests_over_http_and_handle_are_answered_by_both_replicas(cluster, handle):
    infos = replica_pids(handle, 2)
    assert len(infos) == 2 and os.getpid() not in infos
    assert all(info["models"] == MODELS_SERVED for info in infos.values())

    client = http_client(cluster)
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("add_sub")
    assert client.get_model_metadata("add_sub")["name"] == "add_sub"
    http_pids = [http_add_sub(client, i) for i in range(REQUESTS)]

    pending = []
    for i in range(REQUESTS):
        a, b = add_sub_inputs(i)
        pending.append((a, b, handle.infer.remote("add_sub", {"INPUT0": a, "INPUT1": b})))
    handle_pids = []
    for a, b, response in pending:
        result = response.result(timeout_s=120)
        numpy.testing.assert_array_equal(result.outputs["OUTPUT0"], a + b)
        numpy.testing.assert_array_equal(result.outputs["OUTPUT1"], a - b)
        handle_pids.append(result.replica_pid)

    print(f"\nHTTP: {REQUESTS} answered, per replica {_count(http_pids)}; "
          f"handle: {REQUESTS} answered, per replica {_count(handle_pids)}")
    assert set(http_pids) == set(infos), "HTTP requests did not reach both replicas"
    assert set(handle_pids) == set(infos), "handle requests did not reach both replicas"


def test_every_datatype_over_http(cluster, handle):
    import tritonclient.http as httpclient

    from test_kserve_routes import SAMPLES, SUFFIX

    client = http_client(cluster)
    for binary in (False, True):
        inputs = []
        for datatype, value in SAMPLES.items():
            item = httpclient.InferInput(f"IN_{SUFFIX[datatype]}", list(value.shape), datatype)
            item.set_data_from_numpy(value, binary_data=binary)
            inputs.append(item)
        outputs = [httpclient.InferRequestedOutput(f"OUT_{SUFFIX[t]}", binary_data=binary) for t in SAMPLES]
        result = client.infer("echo_all_types", inputs, outputs=outputs)
        for datatype, sent in SAMPLES.items():
            got = result.as_numpy(f"OUT_{SUFFIX[datatype]}")
            if datatype == "BYTES":
                assert [x if isinstance(x, bytes) else x.encode() for x in got] == list(sent)
            else:
                assert got.dtype == sent.dtype and numpy.array_equal(got, sent), (datatype, binary)


def test_http_errors_carry_kserve_status_and_body(cluster, handle):
    import requests  # a dependency of ray[serve]

    base = f"http://{cluster.url}"
    reply = requests.post(f"{base}/v2/models/no_such_model/infer", data=b'{"inputs": []}', timeout=30)
    assert reply.status_code == 404 and "no_such_model" in reply.json()["error"]
    reply = requests.post(f"{base}/v2/models/add_sub/infer", data=b"{not json", timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]
    bad_dtype = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": [1]},
                            {"name": "INPUT1", "datatype": "FP32", "shape": [1], "data": [1]}]}
    reply = requests.post(f"{base}/v2/models/add_sub/infer", json=bad_dtype, timeout=30)
    assert reply.status_code == 400 and "INPUT0" in reply.json()["error"]
    assert http_add_sub(http_client(cluster), 1) > 0  # still serving


def test_sixteen_http_clients_stay_within_a_replicas_concurrency(cluster, handle):
    """TritonDeployment's max_ongoing_requests is 32 (Serve's default, 5,
    made a replica refuse requests past the fifth, each with a "Replica at
    capacity" warning in its log): 16 clients at once on 2 replicas are all
    taken."""
    from tritonserver.ray import TritonDeployment
    from tritonserver.ray._deployment import DEFAULT_MAX_ONGOING_REQUESTS

    assert TritonDeployment.max_ongoing_requests == DEFAULT_MAX_ONGOING_REQUESTS == 32
    refusals_before = cluster.serve_log().count("Replica at capacity")  # the 200 handle calls at once above
    clients, rounds = 16, 10
    start = threading.Barrier(clients, timeout=120)
    errors: list[BaseException] = []

    def run(c: int) -> None:
        try:
            client = http_client(cluster)
            start.wait()
            for i in range(rounds):
                http_add_sub(client, c * rounds + i)
        except BaseException as error:  # reported below
            errors.append(error)
            start.abort()

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors[:3]
    assert cluster.serve_log().count("Replica at capacity") == refusals_before


def test_stream_through_a_handle_yields_every_response_in_order(handle):
    count = 50
    stream = handle.options(stream=True).stream.remote("streaming", {"COUNT": numpy.array([count], numpy.int32)})
    values = [int(result.outputs["OUT"][0]) for result in stream]
    assert values == list(range(count))


def test_handle_errors_are_triton_errors(handle):
    import tritonserver

    with pytest.raises(tritonserver.NotFoundError, match="no_such_model"):
        handle.infer.remote("no_such_model", {"INPUT0": numpy.zeros(1, numpy.float32)}).result(timeout_s=60)
    with pytest.raises(tritonserver.InvalidArgumentError):
        handle.infer.remote("add_sub", {"INPUT0": numpy.zeros(1, numpy.int32),
                                        "INPUT1": numpy.zeros(1, numpy.float32)}).result(timeout_s=60)


def test_a_bound_function_is_served_over_the_handle_and_http(cluster):
    """`bindings`: a Python function served by the replica's server through
    Server.bind, beside a repository model, over the handle and KServe HTTP;
    Triton's batcher forms the batches the function sees."""
    import requests
    from ray import serve

    import tritonserver
    from tritonserver.ray import TritonDeployment, actor_options

    def scale_and_shift(INPUT0: numpy.ndarray) -> dict[str, numpy.ndarray]:
        # Local, so that Ray pickles it by value (a replica cannot import
        # this test module).
        rows = numpy.full((INPUT0.shape[0], 1), INPUT0.shape[0], numpy.int32)
        return {"OUTPUT0": INPUT0 * 2 + 1, "ROWS": rows}

    spec = tritonserver.TensorSpec
    binding = {"model_name": "scale_and_shift", "fn": scale_and_shift, "max_batch_size": 8,
               "max_queue_delay_us": 2000,
               "inputs": [spec("INPUT0", numpy.float32, (4,))],
               "outputs": [spec("OUTPUT0", numpy.float32, (4,)), spec("ROWS", numpy.int32, (1,))]}
    app = TritonDeployment.options(num_replicas=1, ray_actor_options=actor_options(num_cpus=0.5)).bind(
        model_repository=str(MODELS), models=["add_sub"], bindings=[binding],
        options={"backend_directory": cluster.backend_directory, "exit_timeout": 10})
    bound = serve.run(app, name="bound", route_prefix="/bound")
    try:
        assert sorted(bound.replica_info.remote().result(timeout_s=60)["models"]) == ["add_sub", "scale_and_shift"]
        rows = numpy.arange(8, dtype=numpy.float32).reshape(2, 4)
        result = bound.infer.remote("scale_and_shift", {"INPUT0": rows}).result(timeout_s=60)
        numpy.testing.assert_array_equal(result.outputs["OUTPUT0"], rows * 2 + 1)
        # 16 single-row requests at once: the function sees them batched.
        pending = [bound.infer.remote("scale_and_shift", {"INPUT0": rows[:1] + i}) for i in range(16)]
        seen = [int(r.result(timeout_s=60).outputs["ROWS"][0, 0]) for r in pending]
        assert max(seen) > 1, f"every call had one row: {seen}"
        body = {"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
        reply = requests.post(f"http://{cluster.url}/bound/v2/models/scale_and_shift/infer", json=body, timeout=30)
        assert reply.status_code == 200, reply.text
        output = next(o for o in reply.json()["outputs"] if o["name"] == "OUTPUT0")
        assert output["data"] == [3, 5, 7, 9]
        reply = requests.get(f"http://{cluster.url}/bound/v2/models/scale_and_shift/config", timeout=30)
        assert reply.status_code == 200 and reply.json()["max_batch_size"] == 8
    finally:
        serve.delete("bound")


def test_killing_a_replica_serve_replaces_it(cluster, handle):
    import ray

    before = replica_pids(handle, 2)
    victim = next(iter(before.values()))
    outcomes: list[tuple[float, object]] = []  # (time, pid or the exception)
    stop = threading.Event()

    def traffic() -> None:
        client = http_client(cluster)
        i = 0
        while not stop.is_set():
            i += 1
            try:
                outcomes.append((time.monotonic(), http_add_sub(client, i)))
            except Exception as error:  # counted as a failure during the gap
                outcomes.append((time.monotonic(), error))
                client = http_client(cluster)
                time.sleep(0.05)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    time.sleep(1.0)
    killed_at = time.monotonic()
    ray.kill(ray.get_actor(victim["actor_name"], namespace="serve"), no_restart=True)

    # Recovered: a replica that did not exist before has answered, and the
    # 50 requests after its first answer all succeeded.
    deadline = killed_at + 180
    recovered_at = None
    while time.monotonic() < deadline:
        seen = list(outcomes)
        new = [t for t, outcome in seen if isinstance(outcome, int) and outcome not in before]
        if new:
            recovered_at = recovered_at or new[0]
            if sum(1 for t, _ in seen if t > recovered_at) >= 50:
                break
        time.sleep(0.2)
    stop.set()
    thread.join(60)
    assert recovered_at is not None, "Serve did not bring up a replacement replica"
    during = [o for t, o in outcomes if killed_at <= t <= recovered_at]
    after = [o for t, o in outcomes if t > recovered_at]
    failed = [o for o in during if not isinstance(o, int)]
    print(f"\nkilled replica pid {victim['pid']}: replacement answered after {recovered_at - killed_at:.1f} s; "
          f"{len(failed)} of {len(during)} requests failed during the gap"
          + (f" (first: {type(failed[0]).__name__}: {str(failed[0])[:200]})" if failed else "")
          + f"; {len(after)} requests after recovery, all answered")
    assert all(isinstance(o, int) for o in after), [o for o in after if not isinstance(o, int)][:3]
    assert victim["pid"] not in [o for o in after if isinstance(o, int)]
    after_pids = replica_pids(handle, 2)
    assert victim["pid"] not in after_pids


def test_scaling_down_stops_the_removed_replicas_server(cluster):
    """Serve's autoscaler starts a second app at 2 replicas and, with no
    traffic, scales it down to 1 (an app deployed with serve.run gets a new
    code version on every run, so redeploying with num_replicas=1 would
    replace both replicas rather than remove one)."""
    from ray import serve

    handle = cluster.deploy(
        name="triton-autoscaled", route_prefix="/autoscaled", num_replicas="auto",
        autoscaling_config={"min_replicas": 1, "initial_replicas": 2, "max_replicas": 2,
                            "target_ongoing_requests": 1000, "downscale_delay_s": 3,
                            "metrics_interval_s": 1, "look_back_period_s": 2},
    )
    before = replica_pids(handle, 2)
    started = time.monotonic()
    deadline = started + 180
    removed: list[int] = []
    while time.monotonic() < deadline:
        removed = [pid for pid in before if not _alive(pid)]
        if removed:
            break
        time.sleep(0.5)
    assert removed, f"Serve did not scale {sorted(before)} down to 1 replica"
    time.sleep(2)
    assert len([pid for pid in before if not _alive(pid)]) == 1, "both replicas ended"
    (pid,) = removed
    print(f"\nscaled 2 -> 1: replica pid {pid} ended {time.monotonic() - started:.1f} s after both were up")
    deadline = time.monotonic() + 30  # the log file may lag its writer a little
    while f"pid {pid}: server stopped cleanly" not in cluster.serve_log():
        assert time.monotonic() < deadline, f"no clean stop logged for replica pid {pid}"
        time.sleep(0.5)
    assert "server stop failed" not in cluster.serve_log()
    survivors = {p for p in before if p != pid}
    results = [handle.infer.remote("add_sub", dict(zip(("INPUT0", "INPUT1"), add_sub_inputs(i))))
               for i in range(20)]
    assert {r.result(timeout_s=60).replica_pid for r in results} == survivors
    serve.delete("triton-autoscaled")


def test_the_ray_page_blocks_run(cluster, monkeypatch):
    """docs/ray.md's Python blocks, in order, against this cluster."""
    from ray import serve

    from common import ROOT
    from test_docs import python_blocks

    monkeypatch.chdir(ROOT)
    blocks = python_blocks(ROOT / "docs" / "ray.md")
    assert len(blocks) >= 2
    namespace: dict = {"__name__": "__ray_page__"}
    try:
        for number, block in enumerate(blocks, 1):
            exec(compile(block, f"ray.md block {number}", "exec"), namespace)
    finally:
        serve.delete("examples")


def test_deleting_the_app_stops_every_server(cluster, handle):
    from ray import serve

    pids = set(replica_pids(handle, 1))
    serve.delete(APP)  # returns once the app is gone
    deadline = time.monotonic() + 30  # the log file may lag its writer a little
    while not all(f"pid {pid}: server stopped cleanly" in cluster.serve_log() for pid in pids):
        assert time.monotonic() < deadline, f"no clean stop logged for {sorted(pids)}"
        time.sleep(0.5)
    assert "server stop failed" not in cluster.serve_log()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of the raylet counts as ended
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _count(pids: list[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for pid in pids:
        counts[pid] = counts.get(pid, 0) + 1
    return counts
