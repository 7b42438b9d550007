"""Serve models on a Ray cluster with the embedded server (``pip install
"tritonserver-binding[ray]"``).

``TritonDeployment`` is a Ray Serve deployment: each replica starts one
embedded :class:`tritonserver.Server` in its own process, on whichever node
Ray placed it, and serves its models three ways:

- to other deployments and drivers through a ``DeploymentHandle``:
  ``handle.infer.remote(model, inputs)`` gives an :class:`InferResult`, and
  ``handle.options(stream=True).stream.remote(model, inputs)`` yields one
  per response of a decoupled model, in order;
- over HTTP, the KServe v2 protocol (JSON, and Triton's binary tensor
  extension) on Serve's HTTP proxy: ``POST /v2/models/{name}/infer``,
  ``GET /v2/models/{name}``, ``GET /v2/health/ready`` and the rest of
  ``tritonserver._kserve.routes``;
- with Serve's health checks tied to ``Server.ready()``.

Pass ``ray_actor_options=actor_options(...)`` when you change the actor
options: it keeps the environment the server needs in a Ray worker. Ray
does the placement, scaling and routing; a replica stops its server
when Serve scales it down or shuts down.

Example::

    from ray import serve
    from tritonserver.ray import TritonDeployment, actor_options

    app = TritonDeployment.options(num_replicas=2, ray_actor_options=actor_options(num_cpus=0.5)).bind(
        model_repository="/models", models=["add_sub"])
    handle = serve.run(app, route_prefix="/")
    result = handle.infer.remote("add_sub", {"INPUT0": a, "INPUT1": b}).result()
"""

from ._deployment import InferResult, TritonDeployment, TritonReplica, actor_options

__all__ = ["InferResult", "TritonDeployment", "TritonReplica", "actor_options"]
