"""tritonserver.pytriton: PyTriton programs on the in-process server,
written as PyTriton's documentation teaches (decorators stacked, optional
inputs, parameters, decoupled models, several instances), called through the
in-process ModelClient ("inprocess://") and the package's own API."""

from __future__ import annotations

import asyncio
import pathlib
import threading
import time
import urllib.request

import numpy as np
import pytest

from common import assert_no_live_buffers, call_with_deadline, pytriton_config, wait_for
from tritonserver.pytriton.client import (AsyncioDecoupledModelClient, AsyncioModelClient, DecoupledModelClient,
                                          ModelClient, PyTritonClientInferenceServerError,
                                          PyTritonClientInvalidUrlError, PyTritonClientModelDoesntSupportBatchingError,
                                          PyTritonClientTimeoutError, PyTritonClientValueError)
from tritonserver.pytriton.decorators import (ConstantPadder, batch, fill_optionals, first_value, group_by_keys,
                                              group_by_values, pad_batch, sample, triton_context)
from tritonserver.pytriton.exceptions import (PyTritonBadParameterError, PyTritonRuntimeError,
                                              PyTritonUnrecoverableError, PyTritonValidationError)
from tritonserver.pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from tritonserver.pytriton.triton import Triton, TritonConfig

FP32 = np.float32


@batch
def _add_sub(a, b):
    return {"add": a + b, "sub": a - b}


@fill_optionals(scale=np.array([2.0], dtype=FP32))
@group_by_keys
@batch
def _optional_scale(x, scale, offset=None):
    y = x * scale
    if offset is not None:
        y = y + offset
    return {"y": y}


def _with_parameters(requests):
    # the list-of-requests convention: one dict per request
    return [{"y": request["x"] * FP32(request.parameters.get("factor", 1)),
             "keys": np.array([[",".join(sorted(request.keys())).encode()]] * len(request["x"]), dtype=object)}
            for request in requests]


@batch
@first_value("temperature")
def _temperature(x, temperature):
    assert isinstance(temperature, np.floating)  # squeezed to a scalar
    return {"y": x * temperature}


@batch
def _count_up(n):
    for i in range(int(n[0][0])):
        yield {"i": np.full((len(n), 1), i, dtype=np.int32)}


@triton_context
@batch
def _reports_config(x, triton_context):
    config = triton_context.model_configs[_reports_config]
    return {"max_batch_size": np.full((len(x), 1), config.max_batch_size, dtype=np.int32)}


@sample
def _reverse(text):
    return {"text": np.array([t[::-1] for t in text], dtype=object)}  # an output named as the input, as Triton allows


@batch
@group_by_values("length", pad_fn=ConstantPadder(0))
def _ragged(length):
    n = int(length[0][0])
    return {"out": np.ones((len(length), n), dtype=np.int32) * n}


_PADDED_SEEN = []


@batch
@pad_batch
def _padded(x):
    _PADDED_SEEN.append(x.copy())
    return {"batch": np.full((2, 1), len(x), dtype=np.int32)}  # the test sends 2 rows


def _fails(requests):
    raise ValueError("the callable failed on purpose")


class _Instance:
    def __init__(self, number):
        self.number = number

    @batch
    def __call__(self, x):
        time.sleep(0.005)  # a call that takes a while, so that concurrent requests need both instances
        return {"instance": np.full((len(x), 1), self.number, dtype=np.int32)}


async def _async_double(requests):
    await asyncio.sleep(0)
    return [{"y": request["INPUT_1"] * 2} for request in requests]


@pytest.fixture(scope="module")
def triton():
    t = Triton(config=pytriton_config(id="pytriton-api"))
    vector = dict(dtype=FP32, shape=(-1,))
    t.bind("add_sub", _add_sub, inputs=[Tensor(name="a", **vector), Tensor(name="b", **vector)],
           outputs=[Tensor(name="add", **vector), Tensor(name="sub", **vector)],
           config=ModelConfig(max_batch_size=16, batcher=DynamicBatcher(max_queue_delay_microseconds=100,
                                                                         preferred_batch_size=[4, 8])))
    t.bind("optional_scale", _optional_scale,
           inputs=[Tensor(name="x", dtype=FP32, shape=(1,)), Tensor(name="scale", dtype=FP32, shape=(1,), optional=True),
                   Tensor(name="offset", dtype=FP32, shape=(1,), optional=True)],
           outputs=[Tensor(name="y", dtype=FP32, shape=(1,))], config=ModelConfig(max_batch_size=8))
    t.bind("parameters", _with_parameters, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
           outputs=[Tensor(name="y", dtype=FP32, shape=(1,)), Tensor(name="keys", dtype=bytes, shape=(1,))],
           config=ModelConfig(max_batch_size=8))
    t.bind("temperature", _temperature,
           inputs=[Tensor(name="x", dtype=FP32, shape=(1,)), Tensor(name="temperature", dtype=FP32, shape=(1,))],
           outputs=[Tensor(name="y", dtype=FP32, shape=(1,))], config=ModelConfig(max_batch_size=8))
    t.bind("count_up", _count_up, inputs=[Tensor(name="n", dtype=np.int32, shape=(1,))],
           outputs=[Tensor(name="i", dtype=np.int32, shape=(1,))], config=ModelConfig(max_batch_size=8, decoupled=True))
    t.bind("reports_config", _reports_config, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
           outputs=[Tensor(name="max_batch_size", dtype=np.int32, shape=(1,))], config=ModelConfig(max_batch_size=3))
    t.bind("reverse", _reverse, inputs=[Tensor(name="text", dtype=np.bytes_, shape=(-1,))],
           outputs=[Tensor(name="text", dtype=np.bytes_, shape=(-1,))], config=ModelConfig(batching=False))
    t.bind("ragged", _ragged, inputs=[Tensor(name="length", dtype=np.int32, shape=(1,))],
           outputs=[Tensor(name="out", dtype=np.int32, shape=(-1,))], config=ModelConfig(max_batch_size=8))
    t.bind("padded", _padded, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
           outputs=[Tensor(name="batch", dtype=np.int32, shape=(1,))],
           config=ModelConfig(max_batch_size=8, batcher=DynamicBatcher(preferred_batch_size=[4])))
    t.bind("fails", _fails, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
           outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
    t.bind("instances", [_Instance(0), _Instance(1)], inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
           outputs=[Tensor(name="instance", dtype=np.int32, shape=(1,))])
    t.bind("async_double", _async_double, inputs=[Tensor(dtype=FP32, shape=(-1,))],
           outputs=[Tensor(name="y", dtype=FP32, shape=(-1,))], config=ModelConfig(batching=False))
    t.bind("strict", lambda requests: [{"y": r["x"].astype(np.float64)} for r in requests],
           inputs=[Tensor(name="x", dtype=FP32, shape=(1,))], outputs=[Tensor(name="y", dtype=FP32, shape=(1,))],
           strict=True)
    t.bind("lenient", lambda requests: [{"y": r["x"].astype(np.float64)} for r in requests],
           inputs=[Tensor(name="x", dtype=FP32, shape=(1,))], outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
    call_with_deadline(t.run, 120)
    yield t
    call_with_deadline(t.stop, 60)


def test_add_sub_with_batch_and_the_dynamic_batcher(triton):
    assert triton.is_alive() and triton.is_connected()
    a, b = np.arange(6, dtype=FP32).reshape(2, 3), np.ones((2, 3), FP32)
    with ModelClient("inprocess://", "add_sub") as client:
        result = client.infer_batch(a, b)  # by position: the declared inputs' order
        np.testing.assert_array_equal(result["add"], a + b)
        np.testing.assert_array_equal(result["sub"], a - b)
        sample_result = client.infer_sample(a=a[0], b=b[0])  # by name; no batch axis
        np.testing.assert_array_equal(sample_result["add"], a[0] + b[0])
        assert client.is_batching_supported and client.model_config.max_batch_size == 16
        with pytest.raises(PyTritonClientValueError, match="either positional either keyword"):
            client.infer_batch(a, b=b)
    config = triton.server.model("add_sub").config()
    assert config["max_batch_size"] == 16
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert config["dynamic_batching"]["preferred_batch_size"] == [4, 8]
    assert [i["data_type"] for i in config["input"]] == ["TYPE_FP32", "TYPE_FP32"]


def test_concurrent_requests_are_batched_and_split_back(triton):
    results = {}

    def call(i):
        with ModelClient("inprocess://pytriton-api", "add_sub") as client:
            results[i] = client.infer_sample(a=np.full(3, i, FP32), b=np.ones(3, FP32))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == list(range(8))
    for i, result in results.items():
        np.testing.assert_array_equal(result["add"], np.full(3, i + 1, FP32))


def test_optional_inputs_filled_and_grouped(triton):
    x = np.array([[1.0], [2.0]], FP32)
    with ModelClient("inprocess://", "optional_scale") as client:
        np.testing.assert_array_equal(client.infer_batch(x=x)["y"], x * 2)  # scale filled, no offset
        np.testing.assert_array_equal(client.infer_batch(x=x, scale=np.full((2, 1), 3, FP32))["y"], x * 3)
        np.testing.assert_array_equal(
            client.infer_batch(x=x, offset=np.full((2, 1), 10, FP32))["y"], x * 2 + 10)
    inputs = [i["name"] for i in triton.server.model("optional_scale").config()["input"] if i.get("optional")]
    assert inputs == ["scale", "offset"]


def test_requests_carry_parameters_and_only_the_inputs_sent(triton):
    with ModelClient("inprocess://", "parameters") as client:
        result = client.infer_batch(x=np.array([[2.0]], FP32), parameters={"factor": 4})
    np.testing.assert_array_equal(result["y"], [[8.0]])
    assert result["keys"].tolist() == [[b"x"]]
    # outputs the request did not ask for are not sent
    responses = list(triton.server.model("parameters").infer(inputs={"x": np.array([[1.0]], FP32)},
                                                              output_names=["y"]))
    assert set(responses[0].outputs) == {"y"}


def test_first_value_turns_an_input_into_a_scalar(triton):
    with ModelClient("inprocess://", "temperature") as client:
        result = client.infer_batch(x=np.array([[1.0], [2.0]], FP32), temperature=np.array([[0.5], [0.5]], FP32))
        np.testing.assert_array_equal(result["y"], [[0.5], [1.0]])
        with pytest.raises(PyTritonClientInferenceServerError, match="The values on the 'temperature' input are "
                                                                     "not equal"):
            client.infer_batch(x=np.array([[1.0], [2.0]], FP32), temperature=np.array([[0.5], [0.7]], FP32))


def test_a_decoupled_generator_streams_responses(triton):
    with DecoupledModelClient("inprocess://", "count_up") as client:
        outputs = list(client.infer_sample(n=np.array([3], np.int32)))
    assert [o["i"].tolist() for o in outputs] == [[0], [1], [2]]
    with ModelClient("inprocess://", "count_up") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="Use DecoupledModelClient"):
            client.infer_sample(n=np.array([3], np.int32))
    assert triton.server.model("count_up").config()["model_transaction_policy"]["decoupled"] is True


def test_triton_context_gives_the_model_config(triton):
    with ModelClient("inprocess://", "reports_config") as client:
        assert client.infer_sample(x=np.array([1.0], FP32))["max_batch_size"].tolist() == [3]


def test_sample_on_a_model_without_batching_and_bytes(triton):
    with ModelClient("inprocess://", "reverse") as client:
        assert not client.is_batching_supported
        result = client.infer_sample(text=np.array([b"abc", b"xy"], dtype=object))
        assert result["text"].tolist() == [b"cba", b"yx"]
        with pytest.raises(PyTritonClientModelDoesntSupportBatchingError):
            client.infer_batch(text=np.array([b"abc"], dtype=object))
    assert triton.server.model("reverse").config()["max_batch_size"] == 0


def test_group_by_values_pads_the_groups(triton):
    with ModelClient("inprocess://", "ragged") as client:
        result = client.infer_batch(length=np.array([[1], [3], [1]], np.int32))
    assert result["out"].tolist() == [[1, 0, 0], [3, 3, 3], [1, 0, 0]]


def test_pad_batch_pads_to_the_preferred_size(triton):
    with ModelClient("inprocess://", "padded") as client:
        result = client.infer_batch(x=np.array([[1.0], [2.0]], FP32))
    assert result["batch"].tolist() == [[4], [4]]  # the function saw 4 rows
    assert _PADDED_SEEN[-1].tolist() == [[1.0], [2.0], [2.0], [2.0]]  # the last row repeated


def test_an_exception_in_the_callable_is_the_callers_error_with_its_traceback(triton):
    with ModelClient("inprocess://", "fails") as client:
        with pytest.raises(PyTritonClientInferenceServerError) as raised:
            client.infer_sample(x=np.array([1.0], FP32))
        message = str(raised.value)
        # as PyTriton's proxy model words it (through the python backend's execute error)
        assert "Failed to process the request(s) for model 'fails_0_0', message: " in message
        assert "Model execute error: Traceback" in message
        assert "ValueError: the callable failed on purpose" in message
    assert triton.is_alive()  # the server keeps serving
    with ModelClient("inprocess://", "add_sub") as client:
        np.testing.assert_array_equal(client.infer_sample(np.ones(2, FP32), np.ones(2, FP32))["add"], [2, 2])


def test_a_list_of_callables_is_one_instance_each(triton):
    config = triton.server.model("instances").config()
    assert config["instance_group"][0]["count"] == 2
    seen = set()
    with ModelClient("inprocess://", "instances") as client:
        def call():
            seen.add(int(client.infer_sample(x=np.array([1.0], FP32))["instance"][0]))
        for _ in range(40):
            threads = [threading.Thread(target=call) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            if seen == {0, 1}:
                break
    assert seen == {0, 1}


def test_async_callable_and_default_input_names(triton):
    config = triton.server.model("async_double").config()
    assert [i["name"] for i in config["input"]] == ["INPUT_1"]
    with ModelClient("inprocess://", "async_double") as client:
        np.testing.assert_array_equal(client.infer_sample(np.array([1.0, 2.0], FP32))["y"], [2.0, 4.0])


def test_strict_checks_the_declared_dtype_and_lenient_converts(triton):
    with ModelClient("inprocess://", "strict") as client:
        with pytest.raises(PyTritonClientInferenceServerError,
                           match=r"Returned output `y` for model `strict` has invalid type\. Returned: float64 \(f\)"):
            client.infer_sample(x=np.array([1.0], FP32))
    with ModelClient("inprocess://", "lenient") as client:
        result = client.infer_sample(x=np.array([1.5], FP32))
    assert result["y"].dtype == FP32 and result["y"].tolist() == [1.5]


def test_bad_declarations_and_urls_are_refused(triton):
    with pytest.raises(PyTritonValidationError, match="Model name can only contain"):
        triton.bind("bad name", _add_sub, inputs=[Tensor(dtype=FP32, shape=(1,))],
                    outputs=[Tensor(dtype=FP32, shape=(1,))])
    with pytest.raises(PyTritonBadParameterError, match="Optional flag for outputs is not supported"):
        triton.bind("bad_output", _add_sub, inputs=[Tensor(dtype=FP32, shape=(1,))],
                    outputs=[Tensor(dtype=FP32, shape=(1,), optional=True)])
    with pytest.raises(PyTritonBadParameterError, match="The `max_batch_size` must be greater or equal to 1"):
        triton.bind("bad_batch", _add_sub, inputs=[Tensor(dtype=FP32, shape=(1,))],
                    outputs=[Tensor(dtype=FP32, shape=(1,))], config=ModelConfig(max_batch_size=0))
    with pytest.raises(PyTritonClientInvalidUrlError, match="inprocess://"):
        ModelClient("ftp://localhost:8000", "add_sub")


def test_binding_while_running_loads_at_once(triton):
    triton.bind("late", lambda requests: [{"y": r["x"] + 1} for r in requests],
                inputs=[Tensor(name="x", dtype=FP32, shape=(1,))], outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
    with ModelClient("inprocess://", "late") as client:
        assert client.infer_sample(x=np.array([1.0], FP32))["y"].tolist() == [2.0]


def test_unrecoverable_error_stops_serve():
    def broken(requests):
        raise PyTritonUnrecoverableError("the device is gone")

    with Triton(config=pytriton_config(id="unrecoverable")) as triton:
        triton.bind("broken", broken, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
                    outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
        served = threading.Thread(target=triton.serve, kwargs={"monitoring_period_s": 0.05})
        served.start()
        with ModelClient("inprocess://unrecoverable", "broken") as client:
            with pytest.raises(PyTritonClientInferenceServerError, match="the device is gone"):
                client.infer_sample(x=np.array([1.0], FP32))
        served.join(60)
        assert not served.is_alive() and not triton.is_alive()


def test_serve_returns_after_stop_from_another_thread():
    triton = Triton(config=pytriton_config(id="stoppable"))
    triton.bind("m", lambda requests: [{"y": r["x"]} for r in requests],
                inputs=[Tensor(name="x", dtype=FP32, shape=(1,))], outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
    served = threading.Thread(target=triton.serve)
    served.start()
    assert wait_for(triton.is_connected, 60)
    assert triton.stop() is True
    served.join(60)
    assert not served.is_alive() and triton.stop() is False


def test_triton_config_fields_map_or_are_refused(monkeypatch):
    with pytest.raises(PyTritonValidationError, match="allow_sagemaker: the SageMaker frontend is not served"):
        Triton(config=pytriton_config(allow_sagemaker=True))
    with pytest.raises(PyTritonValidationError, match="http_port"):
        Triton(config=pytriton_config(http_port=70000))
    with pytest.raises(PyTritonValidationError, match="trace_config"):
        Triton(config=pytriton_config(trace_config=["rate=1"]))
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_LOG_VERBOSE", "1")
    monkeypatch.setenv("PYTRITON_TRITON_CONFIG_CACHE_CONFIG_0", "local,size=1048576")
    from_env = TritonConfig.from_env()
    assert from_env.log_verbose == 1 and from_env.cache_config == ["local,size=1048576"]


def test_metrics_endpoint_served_on_the_configured_port():
    pytest.importorskip("uvicorn", reason="the serve extra is not installed (pip install tritonserver-binding[serve])")
    with Triton(config=pytriton_config(allow_metrics=True, metrics_port=0, metrics_address="127.0.0.1")) as triton:
        (metrics,) = triton.frontends
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics", timeout=30).read().decode()
    assert "nv_inference_request_success" in text or "nv_" in text


def test_the_migration_page_example_runs(tmp_path):
    import re

    from common import ROOT, run_script

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "pytriton.md").read_text(), flags=re.S)
    assert blocks
    rc, out, err = run_script("\n".join(blocks), tmp_path, timeout=120)  # a process of its own: one Triton in it
    assert rc == 0, err[-3000:]
    assert "'add': array([1.5, 2.5], dtype=float32)" in out


def test_in_process_urls_name_the_triton_when_several_run(triton):
    with Triton(config=pytriton_config(id="second")) as second:
        second.bind("only_here", lambda requests: [{"y": r["x"]} for r in requests],
                    inputs=[Tensor(name="x", dtype=FP32, shape=(1,))], outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
        with pytest.raises(PyTritonClientInvalidUrlError, match="Several Triton objects run in this process"):
            ModelClient("inprocess://", "only_here").infer_sample(x=np.array([1.0], FP32))
        with ModelClient("inprocess://second", "only_here") as client:
            assert client.infer_sample(x=np.array([3.0], FP32))["y"].tolist() == [3.0]
    with pytest.raises(PyTritonClientTimeoutError, match="no Triton with id 'gone' runs in this process"):
        ModelClient("inprocess://gone", "m", init_timeout_s=0.1).infer_sample(x=np.array([1.0], FP32))


def test_inference_timeout_cancels_the_request(triton):
    release = threading.Event()

    def slow(requests):
        release.wait(60)
        return [{"y": r["x"]} for r in requests]

    triton.bind("slow", slow, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
                outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
    try:
        with ModelClient("inprocess://pytriton-api", "slow", inference_timeout_s=0.2) as client:
            with pytest.raises(PyTritonClientTimeoutError, match="Timeout occurred during inference request"):
                client.infer_sample(x=np.array([1.0], FP32))
    finally:
        release.set()
    with ModelClient("inprocess://pytriton-api", "slow") as client:  # the model serves on
        assert client.infer_sample(x=np.array([2.0], FP32))["y"].tolist() == [2.0]
    # the timed-out request's late response is not kept alive by the deadline watcher's thread
    assert_no_live_buffers()


def test_security_config_as_pytriton():
    from tritonserver.pytriton.triton import TritonSecurityConfig

    default = TritonSecurityConfig()
    assert default.restricted_endpoints == ["shared-memory", "model-repository", "statistics", "trace", "logging"]
    assert isinstance(default.access_token, str) and len(default.access_token) > 20
    assert TritonSecurityConfig(restricted_endpoints=[]).access_token is None  # nothing to protect
    with pytest.raises(PyTritonValidationError, match="Invalid endpoint names: bogus"):
        TritonSecurityConfig(restricted_endpoints=["bogus"])
    triton = Triton(config=pytriton_config(), security_config=TritonSecurityConfig(access_token="t0ken"))
    assert triton.get_access_token() == "t0ken"
    assert triton.stop() is False  # never started


def test_the_workspace_is_the_repository_folder_and_goes_with_stop(tmp_path):
    given = tmp_path / "workspace"
    with Triton(config=pytriton_config(id="workspace"), workspace=given) as triton:
        assert triton.server.options.model_repository == [str(given)] and given.is_dir()
    assert given.is_dir()  # the caller's folder stays
    with Triton(config=pytriton_config(id="own-workspace")) as triton:
        (made,) = triton.server.options.model_repository
        assert pathlib.Path(made).is_dir()
    assert not pathlib.Path(made).exists()


def test_response_cache_and_the_batchers_queue_policies():
    from tritonserver.pytriton.model_config import QueuePolicy, TimeoutAction

    calls = []

    def counted(requests):
        calls.append(len(requests))
        return [{"y": r["x"] * 2} for r in requests]

    batcher = DynamicBatcher(max_queue_delay_microseconds=50, priority_levels=2,
                             default_priority_level=1,
                             default_queue_policy=QueuePolicy(timeout_action=TimeoutAction.DELAY, max_queue_size=10),
                             priority_queue_policy={2: QueuePolicy(default_timeout_microseconds=5000)})
    with Triton(config=pytriton_config(id="cached", cache_config=["local,size=1048576"])) as triton:
        triton.bind("cached", counted, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
                    outputs=[Tensor(name="y", dtype=FP32, shape=(1,))],
                    config=ModelConfig(max_batch_size=4, batcher=batcher, response_cache=True))
        config = triton.server.model("cached").config()
        assert config["response_cache"]["enable"] is True
        dynamic = config["dynamic_batching"]
        assert dynamic["priority_levels"] == 2 and dynamic["default_priority_level"] == 1
        assert dynamic["default_queue_policy"]["timeout_action"] == "DELAY"
        assert dynamic["default_queue_policy"]["max_queue_size"] == 10
        assert dynamic["priority_queue_policy"]["2"]["default_timeout_microseconds"] == 5000
        with ModelClient("inprocess://cached", "cached") as client:
            for _ in range(3):
                assert client.infer_sample(x=np.array([4.0], FP32))["y"].tolist() == [8.0]
        assert calls == [1]  # the second and third came from Triton's response cache
        # a model Triton refuses is not bound (the Triton stays alive), naming the cause
        with pytest.raises(PyTritonRuntimeError, match="Model 'refused' could not be loaded: .*default priority level must be in range"):
            triton.bind("refused", counted, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
                        outputs=[Tensor(name="y", dtype=FP32, shape=(1,))],
                        config=ModelConfig(batcher=DynamicBatcher(preserve_ordering=True, priority_levels=2)))
        assert triton.is_alive()
    with pytest.raises(PyTritonBadParameterError, match="Provide the `priority_levels`"):
        with Triton(config=pytriton_config(id="bad-batcher")) as triton:
            triton.bind("bad", counted, inputs=[Tensor(name="x", dtype=FP32, shape=(1,))],
                        outputs=[Tensor(name="y", dtype=FP32, shape=(1,))],
                        config=ModelConfig(batcher=DynamicBatcher(priority_queue_policy={1: QueuePolicy()})))


def test_a_decoupled_stream_that_fails_midway_and_an_async_generator(triton):
    @batch
    def fails_after_one(n):
        yield {"i": np.zeros((len(n), 1), dtype=np.int32)}
        raise RuntimeError("stream broke")

    async def async_tokens(requests):
        for i in range(2):
            await asyncio.sleep(0)
            yield [{"i": np.full((1, 1), i, dtype=np.int32)} for _ in requests]

    spec = dict(inputs=[Tensor(name="n", dtype=np.int32, shape=(1,))],
                outputs=[Tensor(name="i", dtype=np.int32, shape=(1,))])
    triton.bind("fails_after_one", fails_after_one, config=ModelConfig(max_batch_size=4, decoupled=True), **spec)
    triton.bind("async_tokens", async_tokens, config=ModelConfig(max_batch_size=4, decoupled=True), **spec)
    with DecoupledModelClient("inprocess://pytriton-api", "fails_after_one") as client:
        received = []
        with pytest.raises(PyTritonClientInferenceServerError, match="RuntimeError: stream broke"):
            for outputs in client.infer_sample(n=np.array([1], np.int32)):
                received.append(outputs["i"].tolist())
        assert received == [[0]]
    with DecoupledModelClient("inprocess://pytriton-api", "async_tokens") as client:
        assert [o["i"].tolist() for o in client.infer_sample(n=np.array([1], np.int32))] == [[0], [1]]


def test_asyncio_in_process_requests_time_out_and_cancel_as_the_sync_ones(triton):
    """AsyncioModelClient("inprocess://") sends the server's asyncio
    requests: its inference timeout cancels the request (the model serves
    on, nothing of it kept alive), and a caller that leaves a decoupled
    stream early cancels it too (the model's generator is closed), as a
    sync caller's does."""
    release, entered, closed = threading.Event(), threading.Event(), threading.Event()

    def slow(requests):
        entered.set()
        release.wait(60)
        return [{"y": r["x"]} for r in requests]

    def endless(requests):
        try:
            i = 0
            while True:
                yield [{"i": np.full((1,), i, dtype=np.int32)} for _ in requests]
                i += 1
                time.sleep(0.01)
        finally:
            closed.set()

    x_spec = dict(inputs=[Tensor(name="x", dtype=FP32, shape=(1,))], outputs=[Tensor(name="y", dtype=FP32, shape=(1,))])
    triton.bind("slow_aio", slow, **x_spec)
    triton.bind("endless", endless, inputs=[Tensor(name="n", dtype=np.int32, shape=(1,))],
                outputs=[Tensor(name="i", dtype=np.int32, shape=(1,))], config=ModelConfig(batching=False, decoupled=True))
    url = "inprocess://pytriton-api"

    async def timed_out():
        async with AsyncioModelClient(url, "slow_aio", inference_timeout_s=0.2) as client:
            started = time.monotonic()
            with pytest.raises(PyTritonClientTimeoutError, match="Timeout occurred during inference request"):
                await client.infer_sample(x=np.array([1.0], FP32))
            return time.monotonic() - started

    try:
        assert asyncio.run(timed_out()) < 10
    finally:
        release.set()

    async def served_on():
        async with AsyncioModelClient(url, "slow_aio") as client:
            return (await client.infer_sample(x=np.array([2.0], FP32)))["y"].tolist()

    assert asyncio.run(served_on()) == [2.0]
    assert_no_live_buffers()

    async def leaves_early():
        async with AsyncioDecoupledModelClient(url, "endless") as client:
            seen = []
            async for outputs in client.infer_sample(n=np.array([1], np.int32)):
                seen.append(outputs["i"].tolist())
                if len(seen) == 3:
                    break
            return seen

    assert asyncio.run(leaves_early()) == [[0], [1], [2]]
    assert closed.wait(30), "the stream the caller left was not cancelled"
    closed.clear()
    with DecoupledModelClient(url, "endless") as client:  # the same, sync
        responses = client.infer_sample(n=np.array([1], np.int32))
        assert [next(responses)["i"].tolist() for _ in range(2)] == [[0], [1]]
        responses.close()
    assert closed.wait(30), "the stream the sync caller left was not cancelled"

    async def task_cancelled():
        async with AsyncioModelClient(url, "slow_aio") as client:
            task = asyncio.ensure_future(client.infer_sample(x=np.array([3.0], FP32)))
            assert await asyncio.to_thread(entered.wait, 30)  # the model runs the request
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    release.clear()
    entered.clear()
    try:
        asyncio.run(task_cancelled())
    finally:
        release.set()
    assert asyncio.run(served_on()) == [2.0]
    assert_no_live_buffers()
