"""Serve the add_sub example model on a local Ray cluster with
tritonserver.ray, then query it over HTTP (the KServe v2 protocol, plain
JSON) and through a DeploymentHandle.

Run it with `make ray-demo` (sets up .venv, the build, and ray[serve]).
Each of the two replicas runs its own embedded Triton server.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import urllib.request

import numpy
import ray
from ray import serve

from tritonserver.ray import TritonDeployment, actor_options

MODELS = pathlib.Path(__file__).resolve().parent / "models"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    # Ray puts the driver's working directory on its workers' sys.path: from a
    # source checkout's root, that would shadow the installed tritonserver
    # with the unbuilt source folder.
    os.chdir(pathlib.Path(__file__).resolve().parent)
    # A one-node cluster on loopback; on a real cluster: ray.init(address="auto").
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        app = TritonDeployment.options(num_replicas=2, ray_actor_options=actor_options(num_cpus=0.5)).bind(
            model_repository=str(MODELS), models=["add_sub"]
        )
        handle = serve.run(app, name="triton", route_prefix="/")
        base = f"http://127.0.0.1:{port}/v2"

        # HTTP: what any KServe v2 client (tritonclient, curl, ...) sends.
        with urllib.request.urlopen(f"{base}/health/ready") as reply:
            print(f"GET /v2/health/ready -> {reply.status}")
        body = {"inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
            {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [10, 20, 30, 40]},
        ]}
        request = urllib.request.Request(f"{base}/models/add_sub/infer", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as reply:
            answer = json.load(reply)
        outputs = {o["name"]: o["data"] for o in answer["outputs"]}
        print(f"POST /v2/models/add_sub/infer -> {outputs} "
              f"(replica pid {answer['parameters']['replica_pid']})")

        # DeploymentHandle: NumPy in, NumPy out, from Python (or another deployment).
        a = numpy.arange(4, dtype=numpy.float32)
        pending = [handle.infer.remote("add_sub", {"INPUT0": a, "INPUT1": a * i}) for i in range(8)]
        results = [response.result() for response in pending]
        for i, result in enumerate(results):
            assert numpy.array_equal(result.outputs["OUTPUT0"], a + a * i)
        pids = sorted({result.replica_pid for result in results})
        print(f"handle.infer x8 -> all correct, answered by replica pids {pids}")
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]  # (untyped in ray)
        ray.shutdown()


if __name__ == "__main__":
    main()
