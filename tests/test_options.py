"""Options: construction never validates; Server.start() does (TypeError
naming the field), and valid option sets reach the core and work."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy
import pytest

import tritonserver
from tritonserver import InstanceGroupKind, ModelLoadDeviceLimit, RateLimiterResource
from common import MODELS, as_numpy, make_options, run_script, single

# (overrides, field name expected in the TypeError message)
BAD_TYPES = [
    ({"server_id": 1}, "server_id"),
    ({"model_repository": 1}, "model_repository"),
    ({"model_repository": [1]}, "model_repository"),
    ({"exit_timeout": 1.5}, "exit_timeout"),
    ({"strict_model_config": "yes"}, "strict_model_config"),
    ({"model_control_mode": "explicit"}, "model_control_mode"),
    ({"model_control_mode": 7}, "model_control_mode"),
    ({"rate_limiter_resources": [1]}, "rate_limiter_resources"),
    ({"startup_models": "add_sub"}, "startup_models"),
    ({"cuda_memory_pool_sizes": {0: "big"}}, "cuda_memory_pool_sizes"),
    ({"cache_config": []}, "cache_config"),
    ({"cache_config": {"local": 5}}, "cache_config"),
    ({"min_supported_compute_capability": "6.0"}, "min_supported_compute_capability"),
    ({"log_file": 5}, "log_file"),
    ({"log_format": "ISO8601"}, "log_format"),
    ({"metrics": "no"}, "metrics"),
    ({"metrics_interval": 1.5}, "metrics_interval"),
    ({"backend_directory": 5}, "backend_directory"),
    ({"host_policies": {"policy": "numa-node"}}, "host_policies"),
    ({"model_load_device_limits": [1]}, "model_load_device_limits"),
    ({"log_callback": 5}, "log_callback"),
]


# (overrides, field name expected in the ValueError message): the right
# type, a value out of range.
BAD_VALUES = [
    ({"exit_timeout": -1}, "exit_timeout"),
    ({"rate_limiter_resources": [RateLimiterResource("R", -1, 0)]}, "rate_limiter_resources"),
    ({"pinned_memory_pool_size": -1}, "pinned_memory_pool_size"),
    ({"log_verbose": -1}, "log_verbose"),
]


@pytest.mark.parametrize("overrides,field", BAD_VALUES, ids=[f"{f}={o[f]!r}" for o, f in BAD_VALUES])
def test_negative_count_is_a_value_error_naming_the_field_at_start(backend_directory, overrides, field):
    settings = {"server_id": "options-bad", **overrides}
    options = make_options(settings.pop("backend_directory", backend_directory), **settings)
    srv = tritonserver.Server(options)
    with pytest.raises(ValueError, match=f"Options.{field}.* must not be negative"):
        srv.start()
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        srv.ready()


@pytest.mark.parametrize("overrides,field", BAD_TYPES, ids=[f"{f}={o[f]!r}" for o, f in BAD_TYPES])
def test_wrong_type_is_a_type_error_naming_the_field_at_start(backend_directory, overrides, field):
    settings = {"server_id": "options-bad", **overrides}
    options = make_options(settings.pop("backend_directory", backend_directory), **settings)  # never fails
    srv = tritonserver.Server(options)
    with pytest.raises(TypeError) as info:
        srv.start()
    assert field in str(info.value)
    # Still unstarted: nothing was created.
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        srv.ready()


def test_constructing_options_never_validates():
    options = tritonserver.Options(
        model_repository=1,
        server_id=2,
        model_control_mode="explicit",
        strict_model_config="yes",
        exit_timeout=-1,
        rate_limiter_resources=[1],
        cache_config=[],
        log_verbose=-5,
        backend_directory=None,
    )
    assert options.server_id == 2
    assert options.exit_timeout == -1
    assert tritonserver.Server(options).options is options
    tritonserver.Server(server_id=1, exit_timeout=-1)  # keyword form: no validation either


def test_options_defaults_match_the_official_api():
    o = tritonserver.Options()
    assert o.model_repository == []
    assert o.server_id == "triton"
    assert o.model_control_mode == tritonserver.ModelControlMode.NONE
    assert o.startup_models == [] and o.rate_limiter_resources == []
    assert o.strict_model_config is False
    assert o.rate_limiter_mode == tritonserver.RateLimitMode.OFF
    assert o.pinned_memory_pool_size == 1 << 28
    assert o.cuda_memory_pool_sizes == {} and o.cache_config == {}
    assert o.min_supported_compute_capability == 6.0
    assert o.exit_on_error is True and o.strict_readiness is True
    assert o.exit_timeout == 30
    assert (o.buffer_manager_thread_count, o.model_load_thread_count, o.model_load_retry_count) == (0, 4, 0)
    assert o.model_namespacing is False and o.enable_peer_access is True
    assert o.log_file is None
    assert (o.log_info, o.log_warn, o.log_error, o.log_verbose) == (False, False, False, 0)
    assert o.log_format == tritonserver.LogFormat.DEFAULT
    assert (o.metrics, o.gpu_metrics, o.cpu_metrics, o.metrics_interval) == (True, True, True, 2000)
    assert o.backend_directory == "/opt/tritonserver/backends"
    assert o.repo_agent_directory == "/opt/tritonserver/repoagents"
    assert o.cache_directory == "/opt/tritonserver/caches"
    # Mutable defaults are not shared between instances.
    o.startup_models.append("x")
    assert tritonserver.Options().startup_models == []


def test_options_is_a_slotted_dataclass_and_rejects_unknown_fields():
    with pytest.raises(TypeError):
        tritonserver.Options(no_such_field=1)
    with pytest.raises(AttributeError):
        tritonserver.Options().no_such_field = 1


def test_start_does_not_mutate_the_options(backend_directory):
    options = make_options(backend_directory, server_id="options-unmutated", log_verbose=0,
                           log_info=False, log_warn=False, log_error=False)
    before = repr(options)
    srv = tritonserver.Server(options).start()
    try:
        assert srv.ready()
    finally:
        srv.stop()
    assert repr(options) == before
    assert isinstance(options.model_repository, str)


def test_several_repositories_and_startup_models(backend_directory, tmp_path):
    extra = tmp_path / "extra"
    (extra / "renamed_identity" / "1").mkdir(parents=True)
    config = (MODELS / "identity_fp32" / "config.pbtxt").read_text()
    (extra / "renamed_identity" / "config.pbtxt").write_text(config.replace('"identity_fp32"', '"renamed_identity"'))
    srv = tritonserver.Server(make_options(
        backend_directory, server_id="options-startup",
        model_repository=[str(MODELS), str(extra)],
        startup_models=["identity_fp32", "renamed_identity"],
    ))
    srv.start(wait_until_ready=True, timeout=30)
    try:
        assert srv.model("identity_fp32").ready()
        assert srv.model("renamed_identity").ready()
        assert not srv.model("identity_bytes").ready()
        ready = srv.models(exclude_not_ready=True)
        assert {("identity_fp32", 1), ("renamed_identity", 1)} <= set(ready)
    finally:
        srv.stop()


def test_unknown_startup_model_fails_start(backend_directory):
    srv = tritonserver.Server(make_options(backend_directory, server_id="options-bad-startup",
                                           startup_models=["no_such_model"]))
    with pytest.raises(tritonserver.TritonError):
        srv.start()
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        srv.ready()


def test_rate_limiter_options_are_accepted(backend_directory):
    srv = tritonserver.Server(make_options(
        backend_directory, server_id="options-rate-limiter",
        rate_limiter_mode=tritonserver.RateLimitMode.EXEC_COUNT,
        rate_limiter_resources=[RateLimiterResource("R1", 4, 0)],
        startup_models=["identity_fp32"],
    ))
    srv.start(wait_until_ready=True, timeout=30)
    try:
        data = numpy.ones(3, dtype=numpy.float32)
        out = single(srv.model("identity_fp32").infer(inputs={"INPUT0": data}))
        numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data)
    finally:
        srv.stop()


def test_core_rejection_of_a_host_policy_names_the_options_field(backend_directory):
    srv = tritonserver.Server(make_options(backend_directory, server_id="options-host-policy",
                                           host_policies={"policy": {"bogus_setting": "1"}}))
    with pytest.raises(tritonserver.TritonError) as info:
        srv.start()
    assert "bogus_setting" in str(info.value)
    assert "host_policies" in str(info.value)


def test_model_load_device_limit_for_cpu_is_rejected_by_the_core(backend_directory):
    srv = tritonserver.Server(make_options(
        backend_directory, server_id="options-device-limit",
        model_load_device_limits=[ModelLoadDeviceLimit(InstanceGroupKind.CPU, 0, 0.5)],
    ))
    with pytest.raises(tritonserver.InvalidArgumentError) as info:
        srv.start()
    assert "model_load_device_limits" in str(info.value)


# -- cache (the core's cache manager is process-global: checked in a child) --

CACHE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy
    import tritonserver as t
    models, backends = sys.argv[1], sys.argv[2]
    base = dict(model_repository=models, backend_directory=backends, exit_timeout=10,
                model_control_mode=t.ModelControlMode.EXPLICIT)
    result = {}
    try:
        t.Server(server_id="bad-cache", cache_config={"no_such_cache": {"size": 1}}, **base).start().stop()
        result["unknown_cache"] = None
    except Exception as e:
        result["unknown_cache"] = [type(e).__name__, str(e)]
    config = {
        "backend": "identity", "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "response_cache": {"enable": True},
    }
    with t.Server(server_id="cache", cache_config={"local": {"size": 1048576}}, **base) as server:
        model = server.load("identity_fp32", {"config": json.dumps(config)})
        result["cache_enabled"] = model.config()["response_cache"]["enable"]
        data = numpy.array([1.5, 2.5, 3.5], dtype=numpy.float32)
        outputs = []
        for _ in range(3):
            for response in model.infer(inputs={"INPUT0": data}):
                outputs.append(numpy.from_dlpack(response.outputs["OUTPUT0"]).tolist())
        result["outputs"] = outputs
        stats = model.statistics()["model_stats"][0]["inference_stats"]
        result["hits"] = stats["cache_hit"]["count"]
        result["misses"] = stats["cache_miss"]["count"]
        result["metrics_hits"] = [l for l in server.metrics().splitlines()
                                  if l.startswith("nv_cache_num_hits_per_model{")]
    print(json.dumps(result))
""")


@pytest.fixture(scope="module")
def cache_run(backend_directory, tmp_path_factory):
    cwd = tmp_path_factory.mktemp("cache")
    env = {k: v for k, v in os.environ.items() if k != "TRITONSERVER_LIBRARY"}
    proc = subprocess.run([sys.executable, "-c", CACHE_SCRIPT, str(MODELS), backend_directory],
                          capture_output=True, text=True, timeout=120, cwd=str(cwd), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_local_cache_config_serves_cache_hits(cache_run):
    assert cache_run["cache_enabled"] is True
    assert cache_run["outputs"] == [[1.5, 2.5, 3.5]] * 3
    assert cache_run["misses"] == 1
    assert cache_run["hits"] == 2
    assert cache_run["metrics_hits"] == ['nv_cache_num_hits_per_model{model="identity_fp32",version="1"} 2']


def test_unknown_cache_is_reported_at_start(cache_run):
    assert cache_run["unknown_cache"] is not None, "a server started with an unknown cache"
    name, message = cache_run["unknown_cache"]
    assert name == "InvalidArgumentError"
    assert "no_such_cache" in message


# -- logging (process-global core state: checked in a child process) ---------

LOG_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import tritonserver as t
    repo, out = sys.argv[1], sys.argv[2]
    cases = {
        "info": dict(log_info=True),
        "off": dict(),
        "verbose": dict(log_verbose=1),
        "iso": dict(log_info=True, log_format=t.LogFormat.ISO8601),
    }
    for name, kw in cases.items():
        path = os.path.join(out, name + ".log")
        s = t.Server(model_repository=repo, model_control_mode=t.ModelControlMode.EXPLICIT,
                     server_id="log-" + name, log_file=path, **kw)
        s.start()
        s.stop()
    try:
        t.Server(model_repository=repo, log_callback=lambda *a: None).start()
        print(json.dumps({"callback": None}))
    except Exception as e:
        print(json.dumps({"callback": [type(e).__name__, type(e).__module__, str(e)]}))
""")

DEFAULT_LINE = r"(?m)^I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.]+\.cc:\d+\] "
ISO_LINE = r"(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I +\d+ [\w.]+\.cc:\d+\] "


@pytest.fixture(scope="module")
def log_run(tmp_path_factory):
    repo = tmp_path_factory.mktemp("log_repo")
    out = tmp_path_factory.mktemp("log_out")
    env = {k: v for k, v in os.environ.items() if k != "TRITONSERVER_LIBRARY"}
    proc = subprocess.run([sys.executable, "-c", LOG_SCRIPT, str(repo), str(out)],
                          capture_output=True, text=True, timeout=120, cwd=str(out), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return out, result


def test_log_file_receives_info_lines(log_run):
    out, _ = log_run
    text = (out / "info.log").read_text()
    assert re.search(DEFAULT_LINE, text), text[:1000]


def test_log_file_without_levels_has_no_info_lines(log_run):
    out, _ = log_run
    text = (out / "off.log").read_text() if (out / "off.log").exists() else ""
    assert not re.search(r"(?m)^I\d{4} ", text), text[:1000]


def test_log_verbose_implies_info(log_run):
    out, _ = log_run
    assert re.search(DEFAULT_LINE, (out / "verbose.log").read_text())


def test_log_format_iso8601(log_run):
    out, _ = log_run
    text = (out / "iso.log").read_text()
    assert re.search(ISO_LINE, text), text[:1000]
    assert not re.search(r"(?m)^I\d{4} ", text)


def test_log_callback_is_unsupported_on_this_core(log_run):
    _, result = log_run
    assert result["callback"] is not None, "log_callback was accepted by a 2.51 core"
    name, module, message = result["callback"]
    assert (name, module) == ("UnsupportedError", "tritonserver")
    assert "TRITONSERVER_ServerOptionsSetLogCallback" in message
    assert "log_callback" in message
    assert tritonserver.load_core() in message


def test_test_servers_gpu_metrics_follow_the_gpu_checks_switch(tmp_path):
    # run_gpu_checks.sh sets TRITONSERVER_TEST_GPU_METRICS=0 for its test
    # phases: every test server (common.make_options) starts without DCGM.
    code = "from common import make_options; print(make_options('b').gpu_metrics, make_options('b', gpu_metrics=True).gpu_metrics)"
    for value, expected in (("0", "False True"), ("1", "True True")):
        rc, out, err = run_script(code, tmp_path, timeout=60, env={"TRITONSERVER_TEST_GPU_METRICS": value})
        assert rc == 0, err
        assert out.strip() == expected
