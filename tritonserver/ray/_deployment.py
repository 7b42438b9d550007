"""The Ray Serve deployment class: one embedded Server per replica."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Mapping, Optional, Sequence, cast

from ray import serve
from ray.serve.deployment import Deployment
from starlette.requests import Request
from starlette.responses import Response

from .._api._enums import ModelControlMode
from .._api._errors import UnavailableError
from .._api._model import Model
from .._api._options import Options
from .._api._response import InferenceResponse
from .._api._server import Server
from .._kserve.codec import output_array
from .._kserve.routes import DEFAULT_MAX_BODY_BYTES, KServeRoutes, checked_body_limit

logger = logging.getLogger("ray.serve")

# Triton's python backend starts each model's stub process with fork(). In a
# Ray worker, gRPC's fork handlers abort the process when such a fork races
# gRPC's own threads ("Check failed: is_forking != was_forking", seen here on
# most replica starts). gRPC reads this setting when the worker starts, so it
# has to be in the replica actor's runtime_env: actor_options() puts it there.
FORK_SAFE_ENV = {"GRPC_ENABLE_FORK_SUPPORT": "0"}

# Seconds a replica's server waits for in-flight requests when it stops,
# unless `options` say otherwise (below Serve's default 20 s shutdown grace).
DEFAULT_EXIT_TIMEOUT = 15

# Requests one replica takes at once (Serve's max_ongoing_requests; its own
# default is 5). A replica's requests only await the core, which queues and
# batches them itself. At 5, a replica refuses the sixth and Serve's router
# retries it elsewhere, logging "Replica at capacity" for each: with 16 HTTP
# clients the replica logs filled with those warnings, and issue 27 (item 15)
# measured 234 requests/s at 32 against 160 at 5.
DEFAULT_MAX_ONGOING_REQUESTS = 32


def actor_options(num_cpus: float = 0.5, **options: Any) -> dict[str, Any]:
    """``ray_actor_options`` for ``TritonDeployment.options()``: `num_cpus`
    (fractional by default: a replica mostly waits on the server's own
    threads), your other actor options, and the environment the embedded
    server needs in a Ray worker (merged into any ``runtime_env`` given)."""
    runtime_env = dict(options.pop("runtime_env", None) or {})
    runtime_env["env_vars"] = {**FORK_SAFE_ENV, **dict(runtime_env.get("env_vars") or {})}
    return {"num_cpus": num_cpus, **options, "runtime_env": runtime_env}


@dataclass
class InferResult:
    """One response, as a DeploymentHandle call returns it.

    ``outputs`` are NumPy arrays (BYTES as object arrays of ``bytes``, BF16
    as uint16 bit patterns); ``replica_pid`` is the process id of the
    replica that answered.
    """

    model_name: str
    outputs: dict[str, Any]
    parameters: dict[str, Any] = field(default_factory=dict)
    request_id: Optional[str] = None
    final: bool = True
    replica_pid: int = 0


class TritonReplica:
    """One replica: an embedded Server with `model_repository` (a path or
    list of paths). With `models`, the server starts in explicit model
    control mode and loads exactly those, and only they are served; without
    it, every model of the repository is loaded and served. `options` are
    further :class:`tritonserver.Options` fields (e.g. ``{"exit_timeout":
    10}``; exit_timeout defaults to 15 s here, within Serve's default 20 s
    graceful_shutdown_timeout_s). `bindings` are Python functions to serve
    as models, each a dict of :meth:`tritonserver.Server.bind`'s arguments
    (``model_name``, ``fn``, ``inputs``, ``outputs``, ...): the replica binds
    them once its server is ready, and serves them beside `models`. With
    bindings the server runs in explicit model control mode, so a
    repository's models are served only when `models` names them. An HTTP
    request body larger than `max_body_bytes` (64 MiB by default, as Triton's
    own endpoint), decompressed, is refused with 400."""

    def __init__(
        self,
        model_repository: str | Sequence[str],
        models: Optional[Sequence[str]] = None,
        options: Optional[dict[str, Any]] = None,
        bindings: Sequence[Mapping[str, Any]] = (),
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        # First: Serve calls __del__ even when __init__ raised.
        self._stop_lock = threading.Lock()
        self._server: Optional[Server] = None
        checked_body_limit(max_body_bytes)  # before a server is started
        settings = dict(options or {})
        bindings = [dict(b) for b in bindings]
        if bindings:
            settings.setdefault("model_control_mode", ModelControlMode.EXPLICIT)
        # Serve kills a replica graceful_shutdown_timeout_s (20 s by default)
        # after asking it to stop: leave the server's stop time to finish.
        settings.setdefault("exit_timeout", DEFAULT_EXIT_TIMEOUT)
        settings["model_repository"] = (
            model_repository if isinstance(model_repository, str) else list(model_repository)
        )
        if models is not None:
            settings.setdefault("model_control_mode", ModelControlMode.EXPLICIT)
            settings["startup_models"] = list(models)
        self._pid = os.getpid()
        if os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "").lower() not in ("0", "false"):
            logger.warning(
                "tritonserver replica pid %d: GRPC_ENABLE_FORK_SUPPORT is not 0; python-backend models "
                "may abort this worker when their stub starts: pass "
                "ray_actor_options=tritonserver.ray.actor_options(...)", self._pid)
        started = time.monotonic()
        server = Server(Options(**settings)).start(wait_until_ready=True)
        self._server = server
        try:
            for binding in bindings:
                server.bind(**binding)
        except BaseException:
            self._server = None
            server.stop()
            raise
        self._models = list(models) if models is not None else None
        if self._models is not None:
            self._models += [binding["model_name"] for binding in bindings]
        self._routes = KServeRoutes(server, self._models, {"replica_pid": self._pid}, max_body_bytes)
        logger.info("tritonserver replica pid %d: server ready in %.2f s", self._pid, time.monotonic() - started)

    # -- HTTP ---------------------------------------------------------------
    async def __call__(self, request: Request) -> Response:
        """The KServe v2 HTTP routes (under the application's route prefix)."""
        path = request.url.path
        prefix = request.scope.get("root_path", "")
        if prefix and path.startswith(prefix):
            path = path[len(prefix):]
        reply = await self._routes.handle(
            request.method, path, {k.lower(): v for k, v in request.headers.items()}, await request.body()
        )
        return Response(reply.body, status_code=reply.status, headers=reply.headers)

    # -- DeploymentHandle calls -----------------------------------------------
    async def infer(self, model_name: str, inputs: dict[str, Any], **options: Any) -> InferResult:
        """One inference; its final response. Takes stream()'s keyword
        options (model_version, parameters, output_names, request_id).
        Errors raise the matching TritonError (Ray wraps it in a RayTaskError
        that is also one)."""
        last: Optional[InferResult] = None
        async for result in self.stream(model_name, inputs, **options):
            last = result
        if last is None:
            raise RuntimeError(f"model '{model_name}' sent no response with outputs")
        return last

    async def stream(
        self,
        model_name: str,
        inputs: dict[str, Any],
        *,
        model_version: int = -1,
        parameters: Optional[dict[str, Any]] = None,
        output_names: Optional[list[str]] = None,
        request_id: Optional[str] = None,
    ) -> AsyncIterator[InferResult]:
        """Every response with outputs, in order (call through
        ``handle.options(stream=True)`` for decoupled models)."""
        model = self._model(model_name, model_version)
        async for response in model.async_infer(
            inputs=inputs, parameters=parameters or {}, output_names=output_names,
            request_id=request_id, output_memory_type="cpu",
        ):
            if response.outputs:
                yield self._result(model_name, response)

    def replica_info(self) -> dict[str, Any]:
        """Which process and Ray actor this replica is, and what it serves."""
        import ray

        context = ray.get_runtime_context()
        return {
            "pid": self._pid,
            "actor_name": context.get_actor_name(),
            "node_id": context.get_node_id(),
            "models": self._models,
        }

    # -- Serve lifecycle ------------------------------------------------------
    def check_health(self) -> None:
        """Serve's health check: the replica is healthy while its server is
        ready (otherwise Serve replaces it)."""
        server = self._server
        if server is None or not server.ready():
            raise RuntimeError(f"tritonserver replica pid {self._pid}: the server is not ready")

    def __del__(self) -> None:
        """Serve calls this when it removes the replica: stop the server."""
        with self._stop_lock:
            server, self._server = self._server, None
        if server is None:
            return
        started = time.monotonic()
        try:
            server.stop()
        except Exception:
            logger.exception("tritonserver replica pid %d: server stop failed", self._pid)
            return
        logger.info("tritonserver replica pid %d: server stopped cleanly in %.2f s",
                    self._pid, time.monotonic() - started)

    # -- helpers ---------------------------------------------------------------
    def _model(self, name: str, version: int) -> Model:
        if self._server is None:
            raise UnavailableError(f"tritonserver replica pid {self._pid} is stopping")
        return self._routes.model(name, version)  # only the served models

    def _result(self, model_name: str, response: InferenceResponse) -> InferResult:
        return InferResult(
            model_name=model_name,
            outputs={name: output_array(tensor) for name, tensor in response.outputs.items()},
            parameters=dict(response.parameters),
            request_id=response.request_id,
            final=response.final,
            replica_pid=self._pid,
        )


# The Serve deployment of TritonReplica: .options(...) then .bind(...).
TritonDeployment = cast(Deployment, serve.deployment(
    TritonReplica,
    name="Triton",
    ray_actor_options=actor_options(),
    health_check_period_s=5,
    max_ongoing_requests=DEFAULT_MAX_ONGOING_REQUESTS,
))
