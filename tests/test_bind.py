"""Server.bind: a Python callable served as a Triton model in this process,
through every path of the API, with Triton's batching and streaming."""

from __future__ import annotations

import asyncio
import gc
import json
import threading

import numpy
import pytest

import tritonserver
from tritonserver import TensorSpec

from common import as_numpy, call_with_deadline, concurrent_rows, make_options, refused, single

FP32_4 = (TensorSpec("X", numpy.float32, (4,)),)


@pytest.fixture(scope="module")
def bind_server(backend_directory, tmp_path_factory):
    """A server with an empty repository (python models as "auto" picks)."""
    repository = tmp_path_factory.mktemp("empty_repository")
    server = tritonserver.Server(make_options(backend_directory, server_id="bind", model_repository=str(repository),
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    yield server
    call_with_deadline(server.stop, 60)


def _fp32(*values):
    return numpy.array(values, dtype=numpy.float32)


def test_a_bound_function_serves_like_a_repository_model(bind_server):
    def add_sub(INPUT0, INPUT1):
        return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}

    specs = [TensorSpec("INPUT0", numpy.float32, (16,)), TensorSpec("INPUT1", numpy.float32, (16,))]
    model = bind_server.bind("bound_add_sub", add_sub, inputs=specs,
                             outputs=[TensorSpec("OUTPUT0", numpy.float32, (16,)),
                                      TensorSpec("OUTPUT1", numpy.float32, (16,))])
    assert isinstance(model, tritonserver.Model) and model.ready()
    a, b = numpy.arange(16, dtype=numpy.float32), numpy.full(16, 3, numpy.float32)
    response = single(model.infer(inputs={"INPUT0": a, "INPUT1": b}))
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), a + b)
    numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT1"]), a - b)
    # In the index, with its config, metadata and statistics.
    assert ("bound_add_sub", 1) in bind_server.models()
    config = model.config()
    assert config["backend"] == "tritonserver_python" and [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]
    assert [o["data_type"] for o in config["output"]] == ["TYPE_FP32", "TYPE_FP32"]
    assert model.metadata()["outputs"][0]["shape"] == [16]
    stats = model.statistics()["model_stats"][0]["inference_stats"]
    assert int(stats["success"]["count"]) >= 1
    # asyncio and a user queue too.

    async def through_asyncio():
        return [r async for r in model.async_infer(inputs={"INPUT0": a, "INPUT1": a})]

    responses = asyncio.run(through_asyncio())
    numpy.testing.assert_array_equal(as_numpy(responses[-1].outputs["OUTPUT0"]), 2 * a)
    import queue

    user_queue: queue.SimpleQueue = queue.SimpleQueue()
    model.infer(inputs={"INPUT0": a, "INPUT1": a}, response_queue=user_queue)
    numpy.testing.assert_array_equal(as_numpy(user_queue.get(timeout=30).outputs["OUTPUT1"]), 0 * a)


def test_triton_batches_concurrent_requests_into_one_call(bind_server):
    seen: list[int] = []

    def double(X):
        seen.append(X.shape[0])
        return {"Y": X * 2}

    model = bind_server.bind("bound_batched", double, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))],
                             max_batch_size=16, max_queue_delay_us=20_000)
    assert model.config()["max_batch_size"] == 16 and "dynamic_batching" in model.config()

    results = concurrent_rows(model, 32)
    for i, result in enumerate(results):  # each request got its own rows back
        numpy.testing.assert_array_equal(result, numpy.full((1, 4), 2 * i, numpy.float32))
    assert sum(seen) == 32
    assert max(seen) > 1, f"the callable saw batch sizes {seen}: no batching happened"


def test_a_generator_streams_responses(bind_server):
    def count(N):
        for i in range(int(N[0])):
            yield {"OUT": numpy.array([i], numpy.int32)}

    model = bind_server.bind("bound_stream", count, inputs=[TensorSpec("N", numpy.int32, (1,))],
                             outputs=[TensorSpec("OUT", numpy.int32, (1,))])
    assert model.config()["model_transaction_policy"]["decoupled"] is True
    responses = list(model.infer(inputs={"N": numpy.array([5], numpy.int32)}))
    values = [int(as_numpy(r.outputs["OUT"])[0]) for r in responses if "OUT" in r.outputs]
    assert values == [0, 1, 2, 3, 4] and responses[-1].final

    async def agen(N):
        for i in range(int(N[0])):
            await asyncio.sleep(0)
            yield {"OUT": numpy.array([10 + i], numpy.int32)}

    model = bind_server.bind("bound_astream", agen, inputs=[TensorSpec("N", numpy.int32, (1,))],
                             outputs=[TensorSpec("OUT", numpy.int32, (1,))])
    responses = list(model.infer(inputs={"N": numpy.array([3], numpy.int32)}))
    assert [int(as_numpy(r.outputs["OUT"])[0]) for r in responses if "OUT" in r.outputs] == [10, 11, 12]


def test_an_async_function_and_bytes(bind_server):
    async def lengths(S):
        await asyncio.sleep(0)
        return {"L": numpy.array([len(s) for s in S.reshape(-1)], numpy.int64),
                "U": numpy.array([s.upper() for s in S.reshape(-1)], dtype=object)}

    model = bind_server.bind("bound_bytes", lengths, inputs=[TensorSpec("S", bytes, (-1,))],
                             outputs=[TensorSpec("L", numpy.int64, (-1,)), TensorSpec("U", bytes, (-1,))])
    response = single(model.infer(inputs={"S": numpy.array([b"ab", b"cde"], dtype=object)}))
    assert as_numpy(response.outputs["L"]).tolist() == [2, 3]
    assert response.outputs["U"].to_bytes_array().tolist() == [b"AB", b"CDE"]


def test_errors_become_error_responses_and_the_server_keeps_serving(bind_server):
    def picky(X):
        if X[0] < 0:
            raise tritonserver.InvalidArgumentError("X must not be negative")
        if X[0] == 1:
            raise ZeroDivisionError("boom")
        if X[0] == 2:
            return {"Y": X.astype(numpy.float64)}
        if X[0] == 3:
            return {"Y": X[:2]}
        if X[0] == 4:
            return {"Y": X, "Z": X}
        if X[0] == 5:
            return {}
        return {"Y": X}

    model = bind_server.bind("bound_picky", picky, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))])
    cases = {
        -1: (tritonserver.InvalidArgumentError, "X must not be negative"),
        1: (tritonserver.InternalError, "ZeroDivisionError: boom"),
        2: (tritonserver.InternalError, "output 'Y' is declared float32 but the callable returned float64"),
        3: (tritonserver.InternalError, "output 'Y' has shape [2]"),
        4: (tritonserver.InternalError, "returned output(s) ['Z'], which are not declared"),
        5: (tritonserver.InternalError, "returned no output 'Y'"),
    }
    for first, (cls, message) in cases.items():
        with pytest.raises(cls, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            list(model.infer(inputs={"X": _fp32(first, 0, 0, 0)}, raise_on_error=True))
        response = single(model.infer(inputs={"X": _fp32(7, 8, 9, 10)}))  # still serving
        assert as_numpy(response.outputs["Y"]).tolist() == [7, 8, 9, 10]


def test_the_context_gives_parameters_and_cancellation(bind_server):
    started = threading.Event()

    def echo(X, context):
        return {"P": numpy.array([json.dumps(context.parameters[0])], dtype=object), "Y": X}

    model = bind_server.bind("bound_context", echo, inputs=FP32_4,
                             outputs=[TensorSpec("P", bytes, (1,)), TensorSpec("Y", numpy.float32, (4,))])
    response = single(model.infer(inputs={"X": _fp32(1, 2, 3, 4)}, parameters={"temperature": 0.5, "who": "me"}))
    assert json.loads(response.outputs["P"].to_bytes_array()[0]) == {"temperature": 0.5, "who": "me"}

    release = threading.Event()

    def endless(X, context):
        i = 0
        while not context.cancelled():
            started.set()
            yield {"Y": X + i}
            i += 1
            release.wait(0.01)  # a slow producer; cancellation ends it, not this wait

    model = bind_server.bind("bound_cancel", endless, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))])
    iterator = model.infer(inputs={"X": _fp32(0, 0, 0, 0)})
    first = next(iter(iterator))
    assert first.error is None
    iterator.cancel()
    with pytest.raises(tritonserver.CancelledError):
        for response in iterator:
            if response.error is not None:
                raise response.error
    release.set()
    # The callable saw the cancellation and stopped: the model is idle and serves again.
    assert single(bind_server.model("bound_context").infer(inputs={"X": _fp32(1, 1, 1, 1)})).error is None


def test_concurrent_requests_each_get_their_own_parameters(bind_server):
    """16 threads, each with its own factor, through a batching function
    that reads context.parameters[0] (the user guide's example): every
    response is its own request's X times its own factor, and no call mixes
    requests of different parameters."""
    mixed: list[list[float]] = []

    def scale(X, context):
        factors = [p["factor"] for p in context.parameters]
        if len(set(factors)) > 1:
            mixed.append(factors)
        return {"Y": X * numpy.float32(context.parameters[0]["factor"])}

    model = bind_server.bind("bound_scale_threads", scale, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))],
                             max_batch_size=64, max_queue_delay_us=2000)
    wrong: list[tuple[float, float, float]] = []
    answered = [0]
    lock = threading.Lock()

    def client(factor: float) -> None:
        for i in range(50):
            x = numpy.full((1, 4), i + 1, numpy.float32)
            y = as_numpy(single(model.infer(inputs={"X": x}, parameters={"factor": factor})).outputs["Y"])
            with lock:
                answered[0] += 1
                if not numpy.array_equal(y, x * numpy.float32(factor)):
                    wrong.append((factor, float(x[0, 0]), float(y[0, 0])))

    threads = [threading.Thread(target=client, args=(float(t + 2),)) for t in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert answered[0] == 800
    assert wrong == [], f"{len(wrong)} of 800 responses used another request's factor, e.g. {wrong[:3]}"
    assert mixed == [], f"calls mixed parameters: {mixed[:3]}"


@pytest.mark.parametrize("kind", ["function", "generator"])
def test_a_batch_of_mixed_parameters_is_split_into_calls_answered_in_order(bind_server, kind):
    """Requests queued behind a busy instance form one batch of
    interleaved parameters (A, B, A, B, ...): the callable is called once
    per distinct parameters, each call batching its requests, and every
    request gets its own rows (a function's responses in request order, a
    generator's through each request's sender)."""
    busy, release = threading.Event(), threading.Event()
    calls: list[list[str]] = []

    def respond(X, context):
        if context.parameters[0].get("block"):
            busy.set()
            assert release.wait(60)
        calls.append([p.get("tag", "block") for p in context.parameters])
        return {"Y": X * numpy.float32(context.parameters[0]["factor"])}

    def stream(X, context):
        yield respond(X, context)

    name = f"bound_split_{kind}"
    model = bind_server.bind(name, respond if kind == "function" else stream, inputs=FP32_4,
                             outputs=[TensorSpec("Y", numpy.float32, (4,))], max_batch_size=64)
    blocker = model.infer(inputs={"X": _fp32(0, 0, 0, 0).reshape(1, 4)}, parameters={"block": True, "factor": 1.0})
    assert busy.wait(30)
    factors = {"A": 3.0, "B": 5.0}
    tags = ["A", "B"] * 4
    queued = [model.infer(inputs={"X": numpy.full((1, 4), i + 1, numpy.float32)},
                          parameters={"tag": tag, "factor": factors[tag]})
              for i, tag in enumerate(tags)]
    release.set()
    assert [r.error for r in blocker if r.outputs] == [None]
    for i, (tag, iterator) in enumerate(zip(tags, queued)):
        responses = [r for r in iterator if r.outputs]
        assert len(responses) == 1 and responses[0].error is None
        numpy.testing.assert_array_equal(as_numpy(responses[0].outputs["Y"]),
                                         numpy.full((1, 4), (i + 1) * factors[tag], numpy.float32))
    assert calls[0] == ["block"]
    assert all(len(set(call)) == 1 for call in calls), calls
    assert sorted(tag for call in calls[1:] for tag in call) == sorted(tags)
    assert max(len(call) for call in calls[1:]) > 1, f"no batching of equal parameters: {calls}"


def test_unbind_drains_and_rebind_replaces(bind_server):
    entered, release = threading.Event(), threading.Event()

    def slow(X):
        entered.set()
        release.wait(30)
        return {"Y": X + 1}

    model = bind_server.bind("bound_slow", slow, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))])
    iterator = model.infer(inputs={"X": _fp32(1, 2, 3, 4)})
    assert entered.wait(30)
    unbinding = threading.Thread(target=bind_server.unbind, args=("bound_slow",), kwargs={"timeout": 60})
    unbinding.start()
    release.set()
    assert as_numpy(single(iterator).outputs["Y"]).tolist() == [2, 3, 4, 5]  # the call in flight finished
    unbinding.join(60)
    assert not unbinding.is_alive()
    with pytest.raises(tritonserver.TritonError):
        list(model.infer(inputs={"X": _fp32(1, 2, 3, 4)}, raise_on_error=True))
    with pytest.raises(tritonserver.InvalidArgumentError, match="no callable is bound"):
        bind_server.unbind("bound_slow")

    def first(X):
        return {"Y": X * 10}

    def second(X):
        return {"Y": X * 100}

    bind_server.bind("bound_replaced", first, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))])
    model = bind_server.bind("bound_replaced", second, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))])
    assert as_numpy(single(model.infer(inputs={"X": _fp32(1, 1, 1, 1)})).outputs["Y"]).tolist() == [100] * 4


def test_async_callables_leave_no_cycle_that_keeps_their_requests(bind_server):
    """An async generator's end and an async callable's exception come out
    of the instance's event loop; their tracebacks must not hold the call's
    requests in a cycle until the garbage collector runs: the model could
    not unload meanwhile (a server's stop waited out its exit_timeout on
    Python 3.13 when the collector happened not to run)."""
    async def stream(X):
        yield {"Y": X}

    async def fails(X):
        raise ValueError("refused")

    gc.disable()
    try:
        for name, fn in (("bound_async_stream", stream), ("bound_async_fails", fails)):
            model = bind_server.bind(name, fn, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))])
            responses = list(model.infer(inputs={"X": _fp32(1, 2, 3, 4)}, raise_on_error=False))
            assert responses and (responses[-1].error is None) == (fn is stream)
            del model, responses
            bind_server.unbind(name, timeout=10)  # UnavailableError while a request is kept alive
    finally:
        gc.enable()


def test_several_instances_serve_concurrently(bind_server):
    inside, peak, lock = [0], [0], threading.Lock()
    gate = threading.Barrier(2, timeout=30)

    def meet(X):
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        try:
            gate.wait()  # returns only when two calls run at once
        finally:
            with lock:
                inside[0] -= 1
        return {"Y": X}

    model = bind_server.bind("bound_instances", meet, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (4,))],
                             instances=2)
    iterators = [model.infer(inputs={"X": _fp32(i, i, i, i)}) for i in range(2)]
    for i, iterator in enumerate(iterators):
        assert as_numpy(single(iterator).outputs["Y"]).tolist() == [i] * 4
    assert peak[0] == 2


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(inputs=[], outputs=FP32_4), TypeError, "inputs must be a non-empty list"),
    (dict(inputs=FP32_4, outputs=[TensorSpec("X", numpy.float32)]), ValueError, "must be unique"),
    (dict(inputs=[TensorSpec("X", "no-such-type")], outputs=[TensorSpec("Y", numpy.float32)]), TypeError,
     "is not a NumPy dtype"),
    (dict(inputs=[TensorSpec("X", tritonserver.DataType.BF16)], outputs=[TensorSpec("Y", numpy.float32)]),
     tritonserver.UnsupportedError, "BF16 has no NumPy type"),
    (dict(inputs=[TensorSpec("X", numpy.float32, (0,))], outputs=[TensorSpec("Y", numpy.float32)]), ValueError,
     "shape must be"),
    (dict(inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32)], max_batch_size=-1), ValueError,
     "max_batch_size must be"),
    (dict(inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32)], decoupled=True), ValueError,
     "decoupled=True needs a generator"),
    (dict(inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32)], max_batch_size=4,
          preferred_batch_sizes=[8]), ValueError, "preferred_batch_sizes"),
])
def test_bad_declarations_are_refused_before_anything_loads(bind_server, kwargs, error, message):
    with pytest.raises(error, match=message):
        bind_server.bind("bound_refused", lambda X: {"Y": X}, **kwargs)
    assert ("bound_refused", 1) not in bind_server.models()


def test_bind_runs_in_process_when_python_models_use_the_stub(backend_directory, tmp_path):
    server = tritonserver.Server(make_options(backend_directory, server_id="bind-stub", model_repository=str(tmp_path),
                                              python_models="stub", log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        assert server.python_models == "stub"
        model = server.bind("bound_beside_stub", lambda X: {"Y": X * 3}, inputs=FP32_4,
                            outputs=[TensorSpec("Y", numpy.float32, (4,))])
        assert model.config()["backend"] == "tritonserver_python"
        assert as_numpy(single(model.infer(inputs={"X": _fp32(1, 2, 3, 4)})).outputs["Y"]).tolist() == [3, 6, 9, 12]
    finally:
        call_with_deadline(server.stop, 60)


def test_a_torch_tensor_is_read_without_a_copy(bind_server):
    torch = pytest.importorskip("torch")
    from tritonserver._python_models._bound import _checked_array

    net = torch.nn.Linear(4, 2).eval()

    def linear(X):
        with torch.inference_mode():
            return {"Y": net(torch.from_numpy(X.copy()))}

    model = bind_server.bind("bound_torch", linear, inputs=FP32_4, outputs=[TensorSpec("Y", numpy.float32, (2,))],
                             max_batch_size=8)
    x = numpy.arange(8, dtype=numpy.float32).reshape(2, 4)
    response = single(model.infer(inputs={"X": x}))
    with torch.inference_mode():
        expected = net(torch.from_numpy(x)).numpy()
    numpy.testing.assert_allclose(as_numpy(response.outputs["Y"]), expected, rtol=1e-6)
    # The output is read through DLPack: the array the response is written
    # from is the tensor's own memory.
    entry = next(b for b in _bindings_of(model.name))
    same = torch.ones(2, 2)
    assert _checked_array(entry, entry.outputs[0], same, 2).__array_interface__["data"][0] == same.data_ptr()


def _bindings_of(name):
    from tritonserver._api import _bind

    with _bind._lock:
        return [b for b in _bind._bindings.values() if b.model_name == name]


def test_the_kserve_routes_serve_a_bound_model(bind_server):
    """The HTTP routes (used by the Ray deployment) reach a bound model like
    any other, checked with NVIDIA's own HTTP client codec."""
    httpclient = pytest.importorskip("tritonclient.http")
    from tritonserver._kserve.routes import HEADER_LENGTH, KServeRoutes

    bind_server.bind("bound_http", lambda X: {"Y": X + 1}, inputs=FP32_4,
                     outputs=[TensorSpec("Y", numpy.float32, (4,))])
    routes = KServeRoutes(bind_server)
    item = httpclient.InferInput("X", [4], "FP32")
    item.set_data_from_numpy(_fp32(1, 2, 3, 4), binary_data=True)
    body, json_size = httpclient.InferenceServerClient.generate_request_body([item])
    headers = {HEADER_LENGTH: str(json_size)} if json_size is not None else {}
    loop = asyncio.new_event_loop()
    try:
        reply = loop.run_until_complete(routes.handle("POST", "/v2/models/bound_http/infer", headers, body))
        metadata = loop.run_until_complete(routes.handle("GET", "/v2/models/bound_http", {}, b""))
    finally:
        loop.close()
    assert reply.status == 200, reply.body
    length = reply.headers.get(HEADER_LENGTH)
    result = httpclient.InferResult.from_response_body(reply.body, header_length=int(length) if length else None)
    assert result.as_numpy("Y").tolist() == [2, 3, 4, 5]
    assert metadata.status == 200 and json.loads(metadata.body)["name"] == "bound_http"


def test_an_unknown_name_on_a_server_without_repository_says_bind(backend_directory):
    # Server() with no model repository serves bound functions: the advice
    # for a name it does not serve is bind(), not a repository folder.
    server = tritonserver.Server(make_options(backend_directory, server_id="bind-only", model_repository=[],
                                              log_error=False))
    server.start(wait_until_ready=True, timeout=60)
    try:
        server.bind("double", lambda x: {"y": x * 2}, inputs=[tritonserver.TensorSpec("x", numpy.float32, (-1,))],
                    outputs=[tritonserver.TensorSpec("y", numpy.float32, (-1,))])
        assert call_with_deadline(lambda: numpy.from_dlpack(single(
            server.model("double").infer(inputs={"x": _fp32(1, 2)})).outputs["y"]).tolist()) == [2.0, 4.0]
        server.unbind("double", timeout=30)
        for name in ("double", "other"):
            with refused(tritonserver.NotFoundError, match=rf"no model named '{name}' is served.*this server has no "
                                                           rf"model repository.*server\.bind\('{name}', fn"):
                list(server.model(name).infer(inputs={"x": _fp32(1)}))
    finally:
        call_with_deadline(server.stop, 60)
