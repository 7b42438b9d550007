"""Model repository control (explicit load/unload, config overrides,
in-memory models, POLL mode, registered repositories), unknown-model errors,
and the Model introspection calls."""

from __future__ import annotations

import asyncio
import json
import re
import shutil

import numpy
import pytest

import tritonserver
from common import MODELS, as_numpy, copy_model, dedicated_server, make_options, refused, single, wait_for


@pytest.fixture(scope="module")
def repo_server(backend_directory):
    """A private EXPLICIT-mode server over tests/models: these tests load,
    reload and unload models, which must not disturb the shared server."""
    with dedicated_server(backend_directory, "repository-tests", []) as srv:
        yield srv


# -- explicit load / unload ----------------------------------------------------

def test_load_and_unload(repo_server):
    model = repo_server.load("identity_bytes")
    assert isinstance(model, tritonserver.Model)
    assert (model.name, model.version) == ("identity_bytes", -1)
    assert model.ready()
    assert repo_server.models()[("identity_bytes", 1)].state == "READY"
    repo_server.unload("identity_bytes", wait_until_unloaded=True, timeout=30)
    assert repo_server.models()[("identity_bytes", 1)].state == "UNAVAILABLE"
    assert not model.ready()
    # Loading again brings it back.
    repo_server.load("identity_bytes")
    assert model.ready()
    repo_server.unload(model, wait_until_unloaded=True, timeout=30)  # a Model works too
    assert not repo_server.model("identity_bytes").ready()


def test_unload_without_wait_eventually_unloads(repo_server):
    repo_server.load("identity_multi")
    repo_server.unload("identity_multi")
    assert wait_for(lambda: not repo_server.model("identity_multi").ready())
    assert wait_for(lambda: repo_server.models()[("identity_multi", 1)].state == "UNAVAILABLE")


def test_load_with_config_override(repo_server):
    config = repo_server.load("identity_bf16").config()
    assert config["max_batch_size"] == 0
    assert repo_server.model("identity_bf16").batch_properties() == tritonserver.ModelBatchFlag.UNKNOWN
    override = {
        "backend": "identity",
        "max_batch_size": 4,
        "input": [{"name": "INPUT0", "data_type": "TYPE_BF16", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_BF16", "dims": [-1]}],
        "parameters": {"origin": {"string_value": "override"}},
    }
    try:
        model = repo_server.load("identity_bf16", {"config": json.dumps(override)})
        assert model.ready()
        new_config = model.config()
        assert new_config["max_batch_size"] == 4
        assert new_config["parameters"]["origin"]["string_value"] == "override"
        assert model.batch_properties() == tritonserver.ModelBatchFlag.FIRST_DIM
        assert model.metadata()["inputs"][0]["shape"] == [-1, -1]  # batch dimension added
    finally:
        repo_server.unload("identity_bf16", wait_until_unloaded=True, timeout=30)


def test_load_with_config_override_as_dict(repo_server):
    override = {
        "backend": "identity",
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        "parameters": {"style": {"string_value": "dict"}},
    }
    try:
        model = repo_server.load("identity_fp32", {"config": override})
        assert model.config()["parameters"]["style"]["string_value"] == "dict"
        data = numpy.arange(3, dtype=numpy.float32)
        out = single(model.infer(inputs={"INPUT0": data}))
        numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data)
    finally:
        repo_server.unload("identity_fp32", wait_until_unloaded=True, timeout=30)


def test_load_with_malformed_config_override(repo_server):
    with pytest.raises(tritonserver.InternalError, match="identity_gpu"):
        repo_server.load("identity_gpu", {"config": "{not json"})
    assert not repo_server.model("identity_gpu").ready()


def test_load_parameter_of_unsupported_type(repo_server):
    with pytest.raises((TypeError, tritonserver.InvalidArgumentError), match="config"):
        repo_server.load("identity_fp32", {"config": 1.5})


@pytest.mark.python_backend
def test_load_from_in_memory_files(repo_server):
    name = "in_memory_add_sub"
    assert name not in {key[0] for key in repo_server.models()}
    config = {
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
                  {"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [-1]}],
        "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]},
                   {"name": "OUTPUT1", "data_type": "TYPE_FP32", "dims": [-1]}],
    }
    source = (MODELS / "add_sub" / "1" / "model.py").read_bytes()
    model = repo_server.load(name, {"config": json.dumps(config), "file:1/model.py": source})
    try:
        assert model.ready()
        assert model.config()["name"] == name
        assert model.metadata()["platform"] == "python"
        a = numpy.array([1.0, 2.0, 3.0], dtype=numpy.float32)
        b = numpy.array([0.5, 0.5, 4.0], dtype=numpy.float32)
        out = single(model.infer(inputs={"INPUT0": a, "INPUT1": b}))
        numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), a + b)
        numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT1"]), a - b)
        del out
    finally:
        repo_server.unload(name, wait_until_unloaded=True, timeout=30)
    assert not model.ready()


def test_responses_name_the_version_that_answered(backend_directory, tmp_path):
    """A response says which version made it: the one asked for, or, for a
    request without a version, the one the core chose; once a new version
    is loaded, that one (the KServe route reports this, where it
    asked the model's metadata after the answer, which a reload in between
    could make wrong)."""
    target = copy_model("identity_fp32", tmp_path, "identity_versions")
    (target / "2").mkdir()
    config = target / "config.pbtxt"
    config.write_text(config.read_text() + "\nversion_policy: { all { } }\n")
    with dedicated_server(backend_directory, "repository-versions", []) as srv:
        srv.register_model_repository(str(tmp_path))
        try:
            srv.load("identity_versions")
            data = numpy.array([1.0, 2.0], dtype=numpy.float32)
            for version, expected in ((-1, 2), (1, 1), (2, 2)):
                response = single(srv.model("identity_versions", version).infer(inputs={"INPUT0": data}))
                assert response.model_version == expected, version
                numpy.testing.assert_array_equal(as_numpy(response.outputs["OUTPUT0"]), data)
            # A new version, loaded. Unloaded first: load() of the loaded
            # model right after the folder 3/ appeared kept versions 1-2 in
            # one of the first runs (the core reloads a loaded model only
            # when it sees its files changed).
            (target / "3").mkdir()
            srv.unload("identity_versions", wait_until_unloaded=True, timeout=30)
            srv.load("identity_versions")
            assert single(srv.model("identity_versions").infer(inputs={"INPUT0": data})).model_version == 3
            assert single(srv.model("identity_versions", 1).infer(inputs={"INPUT0": data})).model_version == 1
        finally:
            srv.unload("identity_versions", wait_until_unloaded=True, timeout=30)
            srv.unregister_model_repository(str(tmp_path))


def test_poll_in_explicit_mode_is_unavailable(repo_server):
    with pytest.raises(tritonserver.UnavailableError):
        repo_server.poll_model_repository()


# -- unknown models ------------------------------------------------------------

def test_load_unknown_model_is_not_found_naming_the_repository(repo_server, tmp_path):
    # Was: InternalError "failed to load 'no_such_model', failed to poll
    # from model repository", naming neither the cause nor the fix.
    with refused(tritonserver.NotFoundError,
                 r"load\('no_such_model'\): no model named 'no_such_model' is in the model repository "
                 r"\('" + re.escape(str(MODELS)) + r"'\): check the name against server.models\(\), or add a "
                 r"folder no_such_model/ \(config.pbtxt and a version folder such as 1/\)"):
        repo_server.load("no_such_model")
    # A registered repository is named too.
    repo_server.register_model_repository(str(tmp_path))
    try:
        with refused(tritonserver.NotFoundError, re.escape(f"('{MODELS}', '{tmp_path}')")):
            repo_server.load("no_such_model")
    finally:
        repo_server.unregister_model_repository(str(tmp_path))
    # A model the repository holds but cannot load keeps the core's error.
    broken = tmp_path / "broken"
    (broken / "1").mkdir(parents=True)
    (broken / "config.pbtxt").write_text('name: "broken"\nbackend: "no_such_backend"\n')
    repo_server.register_model_repository(str(tmp_path))
    try:
        with refused(tritonserver.TritonError) as refusal:
            repo_server.load("broken")
        assert refusal.kind is not tritonserver.NotFoundError, refusal.message
    finally:
        repo_server.unregister_model_repository(str(tmp_path))


def test_load_parameters_must_be_a_dict(repo_server):
    # Was: AttributeError "'list' object has no attribute 'items'".
    with refused(TypeError, r"load\('identity_fp32'\): parameters must be a dict \(parameter name -> value, "
                            r"e.g. \{'config': ...\}\), not list"):
        repo_server.load("identity_fp32", ["config"])  # type: ignore[arg-type]


def test_infer_on_unknown_model_is_not_found(server):
    with pytest.raises(tritonserver.NotFoundError, match="no_such_model"):
        server.model("no_such_model").infer(inputs={"INPUT0": numpy.ones(1, dtype=numpy.float32)})


def test_model_not_loaded_names_the_fix(repo_server):
    # Was: "Request for unknown model: 'echo_all_types' is not found", which
    # did not say that the model is in the repository but not loaded.
    handle = repo_server.model("echo_all_types")
    fix = r": model 'echo_all_types' is not loaded; load it with server.load\('echo_all_types'\)"
    with refused(tritonserver.NotFoundError, r"unknown model: 'echo_all_types' is not found" + fix):
        handle.infer(inputs={"INPUT0": numpy.ones(1, dtype=numpy.float32)})

    async def async_attempt():
        return handle.async_infer(inputs={"INPUT0": numpy.ones(1, dtype=numpy.float32)})

    with refused(tritonserver.NotFoundError, fix):
        asyncio.run(async_attempt())
    for call in (handle.metadata, handle.config):
        with refused(tritonserver.NotFoundError, fix):
            call()
    with refused(tritonserver.InvalidArgumentError, fix):  # the core's class for statistics
        handle.statistics()
    with refused(tritonserver.NotFoundError, r"version 7 of model 'echo_all_types' is not loaded; load it with "
                                             r"server.load\('echo_all_types'\) \(its version_policy"):
        repo_server.model("echo_all_types", 7).infer(inputs={"INPUT0": numpy.ones(1, dtype=numpy.float32)})


@pytest.mark.parametrize("mode", [tritonserver.ModelControlMode.NONE, tritonserver.ModelControlMode.POLL],
                         ids=["NONE", "POLL"])
def test_load_and_unload_outside_explicit_mode_name_the_fix(backend_directory, tmp_path, mode):
    # Was: UnavailableError "explicit model load / unload is not allowed if
    # polling is enabled", said in NONE mode too, without the way out.
    copy_model("identity_fp32", tmp_path)
    srv = tritonserver.Server(make_options(backend_directory, server_id=f"repository-{mode.name}",
                                           model_repository=str(tmp_path), model_control_mode=mode))
    srv.start(wait_until_ready=True, timeout=30)
    try:
        fix = (rf"is refused: this server runs with model_control_mode={mode.name}, in which the core itself "
               r"loads the repository's models .*create the server with "
               r"model_control_mode=ModelControlMode.EXPLICIT \(the core said: ")
        with refused(tritonserver.UnavailableError, r"load\('identity_fp32'\) " + fix):
            srv.load("identity_fp32")
        with refused(tritonserver.UnavailableError, r"unload\('identity_fp32'\) " + fix):
            srv.unload("identity_fp32")
        assert srv.model("identity_fp32").ready()
    finally:
        srv.stop()


def test_introspection_of_unknown_model(server):
    handle = server.model("no_such_model")
    assert handle.ready() is False
    for call in (handle.metadata, handle.config, handle.batch_properties, handle.transaction_properties):
        with pytest.raises(tritonserver.NotFoundError, match="no_such_model"):
            call()
    with pytest.raises(tritonserver.TritonError, match="no_such_model"):
        handle.statistics()


def test_known_but_unloaded_model_is_not_ready(repo_server):
    assert repo_server.model("echo_all_types").ready() is False
    assert repo_server.models()["echo_all_types"].ready() is False


# -- POLL mode -------------------------------------------------------------------

def test_poll_picks_up_new_and_removed_models(backend_directory, tmp_path):
    srv = tritonserver.Server(make_options(
        backend_directory, server_id="repository-poll", model_repository=str(tmp_path),
        model_control_mode=tritonserver.ModelControlMode.POLL,
    ))
    srv.start(wait_until_ready=True, timeout=30)
    try:
        assert len(srv.models()) == 0
        copy_model("identity_fp32", tmp_path)
        srv.poll_model_repository()
        assert wait_for(lambda: srv.model("identity_fp32").ready())
        assert srv.models()[("identity_fp32", 1)].state == "READY"
        data = numpy.arange(2, dtype=numpy.float32)
        out = single(srv.model("identity_fp32").infer(inputs={"INPUT0": data}))
        numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data)
        del out
        with pytest.raises(tritonserver.UnavailableError):
            srv.load("identity_fp32")  # explicit control is off in POLL mode
        shutil.rmtree(tmp_path / "identity_fp32")
        srv.poll_model_repository()
        assert wait_for(lambda: not srv.model("identity_fp32").ready())
    finally:
        srv.stop()


# -- registered repositories -----------------------------------------------------

def test_register_and_unregister_repository_with_name_mapping(repo_server, tmp_path):
    extra = tmp_path / "extra"
    copy_model("identity_fp32", extra, new_name="folder_name")
    repo_server.register_model_repository(str(extra), {"folder_name": "mapped_identity"})
    try:
        names = {key[0] for key in repo_server.models()}
        assert "mapped_identity" in names and "folder_name" not in names
        model = repo_server.load("mapped_identity")
        assert model.ready()
        assert model.config()["name"] == "mapped_identity"
        data = numpy.arange(3, dtype=numpy.float32)
        out = single(model.infer(inputs={"INPUT0": data}))
        numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data)
        del out
        with pytest.raises(tritonserver.AlreadyExistsError):
            repo_server.register_model_repository(str(extra))
        repo_server.unload("mapped_identity", wait_until_unloaded=True, timeout=30)
    finally:
        repo_server.unregister_model_repository(str(extra))
    assert "mapped_identity" not in {key[0] for key in repo_server.models()}
    with pytest.raises(tritonserver.NotFoundError, match="no model named 'mapped_identity'"):
        repo_server.load("mapped_identity")


def test_register_repository_without_mapping(repo_server, tmp_path):
    extra = tmp_path / "plain"
    copy_model("identity_fp32", extra, new_name="plain_identity")
    repo_server.register_model_repository(str(extra))
    try:
        assert ("plain_identity", -1) in repo_server.models()
        assert repo_server.load("plain_identity").ready()
        repo_server.unload("plain_identity", wait_until_unloaded=True, timeout=30)
    finally:
        repo_server.unregister_model_repository(str(extra))


def test_register_and_unregister_missing_repository(repo_server, tmp_path):
    with pytest.raises(tritonserver.InvalidArgumentError):
        repo_server.register_model_repository(str(tmp_path / "missing"))
    with pytest.raises(tritonserver.InvalidArgumentError):
        repo_server.unregister_model_repository(str(tmp_path / "missing"))


# -- Model introspection (shared server, read only) -----------------------------

def test_model_metadata(model):
    metadata = model("add_sub").metadata()
    assert metadata["name"] == "add_sub"
    assert metadata["versions"] == ["1"]
    assert metadata["platform"] == "python"
    assert [(t["name"], t["datatype"], t["shape"]) for t in metadata["inputs"]] == [
        ("INPUT0", "FP32", [-1]), ("INPUT1", "FP32", [-1])]
    assert [t["name"] for t in metadata["outputs"]] == ["OUTPUT0", "OUTPUT1"]


def test_model_config(model):
    config = model("identity_multi").config()
    assert config["name"] == "identity_multi"
    assert config["backend"] == "identity"
    assert config["max_batch_size"] == 0
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
        ("INPUT0", "TYPE_INT8", [-1, -1]), ("INPUT1", "TYPE_FP16", [-1, -1, -1]), ("INPUT2", "TYPE_UINT64", [-1])]
    assert model("identity_multi").config(config_version=1) == config


def test_model_statistics_count_inferences(repo_server):
    # A freshly loaded model on the private server: counts start at zero.
    handle = repo_server.load("identity_fp32")
    try:
        def counts():
            stats = handle.statistics()["model_stats"]
            assert [(s["name"], s["version"]) for s in stats] == [("identity_fp32", "1")]
            return stats[0]["inference_count"], stats[0]["inference_stats"]["success"]["count"]

        assert counts() == (0, 0)
        data = numpy.ones(4, dtype=numpy.float32)
        single(handle.infer(inputs={"INPUT0": data}))
        single(handle.infer(inputs={"INPUT0": data}))
        # The backend reports a request's statistics, releases it, then
        # reports the execution's: wait for both (the client can see the
        # response before the second report).
        assert wait_for(lambda: counts()[1] >= 2
                        and handle.statistics()["model_stats"][0]["execution_count"] >= 2)
        assert counts() == (2, 2)
        stats = handle.statistics()["model_stats"][0]
        assert stats["execution_count"] == 2
        assert stats["last_inference"] > 0
        assert stats["inference_stats"]["fail"]["count"] == 0
    finally:
        repo_server.unload("identity_fp32", wait_until_unloaded=True, timeout=30)


def test_batch_and_transaction_properties(model):
    add_sub = model("add_sub")
    assert add_sub.batch_properties() == tritonserver.ModelBatchFlag.UNKNOWN
    assert isinstance(add_sub.batch_properties(), tritonserver.ModelBatchFlag)
    assert add_sub.transaction_properties() == tritonserver.ModelTxnPropertyFlag.ONE_TO_ONE
    streaming = model("streaming")
    assert streaming.transaction_properties() == tritonserver.ModelTxnPropertyFlag.DECOUPLED
    assert isinstance(streaming.transaction_properties(), tritonserver.ModelTxnPropertyFlag)


def test_model_ready_by_version(server, model):
    model("add_sub")
    assert server.model("add_sub").ready() is True
    assert server.model("add_sub", 1).ready() is True
    assert server.model("add_sub", 2).ready() is False


def test_a_missing_backend_is_named_with_where_backends_come_from(repo_server):
    """The PyPI core brings only the python backend: a model of another
    backend fails to load with the backend named and the way to get it."""
    tensor = {"data_type": "TYPE_FP32", "dims": [1]}
    config = {"backend": "onnxruntime", "max_batch_size": 0,
              "input": [{"name": "X", **tensor}], "output": [{"name": "Y", **tensor}]}
    with pytest.raises(tritonserver.TritonError) as caught:
        repo_server.load("onnx_like", {"config": json.dumps(config), "file:1/model.onnx": b"not a real model"})
    message = str(caught.value)
    assert "load('onnx_like'): the model's backend 'onnxruntime' is not in this server's backend folder" in message
    assert "Options.backend_directory" in message and "NGC container" in message
    assert repo_server.live()  # (not ready: strict readiness counts the failed model)


def test_a_model_draining_for_its_unload_reads_as_being_unloaded(repo_server):
    """unload() lets the model's requests in flight finish before the core
    unloads it (a 2.51 core crash otherwise, cpp/model_unload.h); meanwhile
    the model reads as the core (and NVIDIA's binary) says of a model being
    unloaded: UNLOADING, not ready, nor the server (strict readiness),
    unknown to metadata, config, statistics and new requests. It used to read READY,
    refuse new requests with UnavailableError, and hold every other load
    behind the unload's lock; a load of the same model waits for the unload
    and then loads it."""
    import threading

    from common import fp32

    sleep = repo_server.load("sleep")
    in_flight = sleep.infer(inputs={"SECONDS": fp32(60.0)}, raise_on_error=False)  # submitted
    unloading = threading.Thread(target=repo_server.unload, args=("sleep",))
    reloaded: list = []
    reloading = threading.Thread(target=lambda: reloaded.append(repo_server.load("sleep")))
    unloading.start()
    try:
        assert wait_for(lambda: repo_server.models()[("sleep", 1)].state == "UNLOADING", 30)
        assert not sleep.ready() and not repo_server.ready()
        assert ("sleep", 1) not in repo_server.models(exclude_not_ready=True)
        unknown = r"Request for unknown model: 'sleep' has no available versions: model 'sleep' is being unloaded"
        with refused(tritonserver.NotFoundError, unknown):
            sleep.metadata()
        with refused(tritonserver.NotFoundError, unknown):
            sleep.config()
        with refused(tritonserver.NotFoundError, unknown):
            list(sleep.infer(inputs={"SECONDS": fp32(0.0)}))
        with refused(tritonserver.UnavailableError, r"'sleep' version 1 is not at ready state"):
            repo_server.model("sleep", 1).metadata()
        repo_server.load("identity_fp32")  # another model: at once, while the unload waits
        with refused(tritonserver.InvalidArgumentError,
                     r"requested model 'sleep' is not available: model 'sleep' is being unloaded"):
            sleep.statistics()
        assert "sleep" not in [s["name"] for s in repo_server.model("").statistics()["model_stats"]]
        assert unloading.is_alive()
        reloading.start()  # the same model: after the unload
        assert unloading.is_alive()
    finally:
        in_flight.cancel()
    unloading.join(60)
    assert not unloading.is_alive()
    assert list(in_flight)[-1].final
    if reloading.ident is not None:
        reloading.join(60)
    assert reloaded and reloaded[0].ready()  # unloaded first, then loaded again
    repo_server.unload("sleep", wait_until_unloaded=True, timeout=30)
    repo_server.unload("identity_fp32", wait_until_unloaded=True, timeout=30)
