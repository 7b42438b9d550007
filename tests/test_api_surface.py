"""The public surface matches the official tritonserver package: exported
names, error classes, enum values (the C API's), dataclass fields and
method signatures."""

from __future__ import annotations

import dataclasses
import inspect
import pydoc
import re
import typing

import numpy
import pytest

import tritonserver

OFFICIAL_EXPORTS = [
    "DLDeviceType", "MemoryBuffer", "MemoryType", "Model", "ModelBatchFlag", "ModelTxnPropertyFlag",
    "InferenceRequest", "InferenceResponse", "InstanceGroupKind", "LogFormat", "Metric", "MetricFamily",
    "MetricFormat", "MetricKind", "ModelControlMode", "Options", "RateLimiterResource", "RateLimitMode",
    "Server", "DataType", "Tensor",
    "AlreadyExistsError", "InternalError", "InvalidArgumentError", "NotFoundError", "TritonError",
    "UnavailableError", "UnknownError", "UnsupportedError",
]

ERROR_SUBCLASSES = [
    "UnknownError", "InternalError", "NotFoundError", "InvalidArgumentError",
    "UnavailableError", "UnsupportedError", "AlreadyExistsError", "CancelledError",
]


def test_official_names_are_exported():
    missing = [name for name in OFFICIAL_EXPORTS if not hasattr(tritonserver, name)]
    assert missing == []
    assert isinstance(tritonserver.__version__, str) and tritonserver.__version__


def test_help_and_dir_list_the_public_names():
    """__all__ is every public name (what the API reference documents), so
    help(tritonserver) shows them; dir() has __version__ too."""
    public = sorted(name for name in vars(tritonserver) if not name.startswith("_")
                    and not inspect.ismodule(getattr(tritonserver, name)))
    assert sorted(tritonserver.__all__) == public
    assert set(OFFICIAL_EXPORTS) <= set(public) and {"TensorSpec", "CallContext", "load_core"} <= set(public)
    assert {*public, "__version__"} <= set(dir(tritonserver))
    shown = pydoc.render_doc(tritonserver, renderer=pydoc.plaintext)
    assert "embedded in your Python process" in shown
    for name in ("Server", "TensorSpec", "Options", "InvalidArgumentError", "load_core"):
        assert re.search(rf"^ *(class )?{name}\b", shown, flags=re.M), name


def test_bind_signature_names_the_public_tensor_spec():
    """Server.bind's signature shows TensorSpec as users import it, not the
    private module it is defined in."""
    shown = str(inspect.signature(tritonserver.Server.bind))
    for name in ("inputs", "outputs"):
        assert re.search(rf"\b{name}: '?Sequence\[TensorSpec\]", shown), shown
    assert "_bind" not in shown
    hints = typing.get_type_hints(tritonserver.Server.bind)
    assert hints["inputs"] == typing.Sequence[tritonserver.TensorSpec] or \
        typing.get_args(hints["inputs"]) == (tritonserver.TensorSpec,)


# -- errors ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["TritonError", *ERROR_SUBCLASSES])
def test_error_classes_live_in_tritonserver(name):
    cls = getattr(tritonserver, name)
    assert cls.__module__ == "tritonserver"
    assert repr(cls) == f"<class 'tritonserver.{name}'>"
    assert issubclass(cls, tritonserver.TritonError)
    assert issubclass(cls, Exception)


@pytest.mark.parametrize("name", ERROR_SUBCLASSES)
def test_error_classes_carry_their_message(name):
    cls = getattr(tritonserver, name)
    with pytest.raises(cls) as info:
        raise cls("Error message")
    assert str(info.value) == "Error message"
    assert isinstance(info.value, tritonserver.TritonError)


def test_error_hierarchy():
    assert tritonserver.TritonError.__bases__ == (Exception,)
    assert issubclass(tritonserver.CancelledError, tritonserver.UnknownError)
    for name in ERROR_SUBCLASSES:
        if name != "CancelledError":
            assert getattr(tritonserver, name).__bases__ == (tritonserver.TritonError,)
    # Distinct classes: catching one does not catch another.
    assert not issubclass(tritonserver.NotFoundError, tritonserver.InvalidArgumentError)
    assert not issubclass(tritonserver.UnknownError, tritonserver.CancelledError)


def test_core_errors_are_the_exported_classes(server):
    with pytest.raises(tritonserver.NotFoundError) as info:
        server.model("no_such_model").metadata()
    assert type(info.value) is tritonserver.NotFoundError
    with pytest.raises(tritonserver.UnavailableError) as info:
        server.poll_model_repository()  # EXPLICIT mode: polling is disabled
    assert type(info.value) is tritonserver.UnavailableError


# -- enums ---------------------------------------------------------------------------

ENUM_VALUES = {
    "DataType": dict(INVALID=0, BOOL=1, UINT8=2, UINT16=3, UINT32=4, UINT64=5, INT8=6, INT16=7, INT32=8,
                     INT64=9, FP16=10, FP32=11, FP64=12, BYTES=13, BF16=14),
    "MemoryType": dict(CPU=0, CPU_PINNED=1, GPU=2),
    "InstanceGroupKind": dict(AUTO=0, CPU=1, GPU=2, MODEL=3),
    "LogFormat": dict(DEFAULT=0, ISO8601=1),
    "MetricFormat": dict(PROMETHEUS=0),
    "MetricKind": dict(COUNTER=0, GAUGE=1),
    "ModelControlMode": dict(NONE=0, POLL=1, EXPLICIT=2),
    "RateLimitMode": dict(OFF=0, EXEC_COUNT=1),
    "ModelBatchFlag": dict(UNKNOWN=1, FIRST_DIM=2),
    "ModelTxnPropertyFlag": dict(ONE_TO_ONE=1, DECOUPLED=2),
}


@pytest.mark.parametrize("enum_name", ENUM_VALUES)
def test_enum_values_are_the_c_api_values(enum_name):
    enum = getattr(tritonserver, enum_name)
    for member, value in ENUM_VALUES[enum_name].items():
        item = getattr(enum, member)
        assert item == value and value == item
        assert int(item) == value
        assert item.name == member and item.value == value
        assert enum(value) is item
        assert hash(item) == hash(value)
        assert [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14][item] == value  # __index__


def test_enum_spot_checks():
    assert tritonserver.DataType.FP32 == 11
    assert tritonserver.MemoryType.GPU == 2
    assert tritonserver.ModelBatchFlag.FIRST_DIM == 2
    assert tritonserver.ModelTxnPropertyFlag.DECOUPLED == 2
    assert {tritonserver.DataType.BYTES: "x"}[13] == "x"
    with pytest.raises(ValueError):
        tritonserver.DataType(99)


def test_dlpack_device_types():
    assert tritonserver.DLDeviceType.kDLCPU == 1
    assert tritonserver.DLDeviceType.kDLCUDA == 2
    assert tritonserver.DLDeviceType.kDLCUDAHost == 3
    assert tritonserver.DLDeviceType.kDLCUDAManaged == 13



# -- tritonserver._c: the official binding's low-level module ------------------------

def test_names_programs_import_from_tritonserver_c(model):
    # NVIDIA's kafka-io tutorial (Triton_Inference_Server_Python_API) compares
    # output data types with the official module's enum. Was: ModuleNotFoundError.
    from tritonserver._c.triton_bindings import TRITONSERVER_DataType
    from tritonserver._c import InvalidArgumentError, TRITONSERVER_MemoryType, TritonError

    assert TRITONSERVER_DataType is tritonserver.DataType
    assert TRITONSERVER_MemoryType is tritonserver.MemoryType
    assert InvalidArgumentError is tritonserver.InvalidArgumentError and TritonError is tritonserver.TritonError
    response = next(iter(model("identity_bytes").infer(inputs={"INPUT0": numpy.array([b"a"], dtype=object)})))
    assert response.outputs["OUTPUT0"].data_type == TRITONSERVER_DataType.BYTES


def test_tritonserver_c_aliases_are_this_packages_names():
    import tritonserver._c as c

    for enum_name in ENUM_VALUES:
        assert getattr(c, f"TRITONSERVER_{enum_name}") is getattr(tritonserver, enum_name)
    for name in ["TritonError", *ERROR_SUBCLASSES]:
        if name != "CancelledError":  # not in the official module
            assert getattr(c, name) is getattr(tritonserver, name)
    assert sorted(c.__all__) == sorted(c.triton_bindings.__all__)


def test_tritonserver_c_type_helpers_answer_as_the_c_api():
    from tritonserver._c import triton_bindings as c

    DataType = tritonserver.DataType
    assert [c.TRITONSERVER_DataTypeString(t) for t in (DataType.FP32, DataType.BYTES, DataType.BF16)] == [
        "FP32", "BYTES", "BF16"]
    assert c.TRITONSERVER_DataTypeString(DataType.INVALID) == c.TRITONSERVER_DataTypeString(99) == "<invalid>"
    assert c.TRITONSERVER_StringToDataType("UINT16") is DataType.UINT16
    assert c.TRITONSERVER_StringToDataType("float32") is DataType.INVALID
    assert [c.TRITONSERVER_DataTypeByteSize(t) for t in (DataType.BOOL, DataType.BF16, DataType.FP32,
                                                         DataType.INT64, DataType.BYTES, DataType.INVALID)] == [
        1, 2, 4, 8, 0, 0]
    assert c.TRITONSERVER_MemoryTypeString(tritonserver.MemoryType.CPU_PINNED) == "CPU_PINNED"
    assert c.TRITONSERVER_MemoryTypeString(7) == "<invalid>"

# -- dataclasses and their fields ----------------------------------------------------

OFFICIAL_OPTIONS_FIELDS = [
    "model_repository", "server_id", "model_control_mode", "startup_models", "strict_model_config",
    "rate_limiter_mode", "rate_limiter_resources", "pinned_memory_pool_size", "cuda_memory_pool_sizes",
    "cache_config", "cache_directory", "min_supported_compute_capability", "exit_on_error",
    "strict_readiness", "exit_timeout", "buffer_manager_thread_count", "model_load_thread_count",
    "model_load_retry_count", "model_namespacing", "enable_peer_access", "log_file", "log_info",
    "log_warn", "log_error", "log_format", "log_verbose", "metrics", "gpu_metrics", "cpu_metrics",
    "metrics_interval", "backend_directory", "repo_agent_directory", "model_load_device_limits",
    "backend_configuration", "host_policies", "metrics_configuration",
]


def field_names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def test_options_fields_in_official_order():
    names = field_names(tritonserver.Options)
    assert names[: len(OFFICIAL_OPTIONS_FIELDS)] == OFFICIAL_OPTIONS_FIELDS
    # Positional construction follows the official order.
    options = tritonserver.Options("/models", "positional")
    assert (options.model_repository, options.server_id) == ("/models", "positional")


def test_small_option_dataclasses():
    assert field_names(tritonserver.RateLimiterResource) == ["name", "count", "device"]
    assert field_names(tritonserver.ModelLoadDeviceLimit) == ["kind", "device", "fraction"]
    resource = tritonserver.RateLimiterResource("R1", 4, 0)
    assert (resource.name, resource.count, resource.device) == ("R1", 4, 0)


def test_request_and_response_fields_in_official_order():
    assert field_names(tritonserver.InferenceRequest)[:10] == [
        "model", "request_id", "flags", "correlation_id", "priority", "timeout", "inputs", "parameters",
        "output_memory_type", "response_queue"]
    # The official seven, then this package's extension (after them, so
    # positional construction keeps working).
    assert field_names(tritonserver.InferenceResponse) == [
        "model", "request_id", "parameters", "outputs", "error", "classification_label", "final", "model_version"]


def test_inference_response_importable_from_its_module():
    from tritonserver._api._response import InferenceResponse

    assert InferenceResponse is tritonserver.InferenceResponse


def test_request_and_response_have_a_dict(server):
    handle = server.model("add_sub")
    assert handle._server is server
    request = handle.create_request(inputs={"INPUT0": numpy.ones(1, dtype=numpy.float32)})
    assert isinstance(request, tritonserver.InferenceRequest)
    assert request.model is handle
    assert isinstance(request.__dict__, dict)
    request.user_tag = "mine"  # no __slots__
    assert request.__dict__["user_tag"] == "mine"
    # create_request ignores a model= keyword, as officially.
    assert handle.create_request(model=object()).model is handle
    positional = tritonserver.InferenceRequest(handle)
    assert positional.model is handle and positional.inputs == {} and positional.parameters == {}
    response = tritonserver.InferenceResponse(handle)
    assert isinstance(response.__dict__, dict)
    response.user_tag = "mine"
    assert (response.request_id, response.outputs, response.error, response.final) == (None, {}, None, False)
    # Mutable defaults are per instance.
    response.outputs["x"] = None
    assert tritonserver.InferenceResponse(handle).outputs == {}


# -- method signatures ---------------------------------------------------------------

def params(fn) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


def test_server_signatures():
    empty = inspect.Parameter.empty
    S = tritonserver.Server
    assert params(S.start) == [("wait_until_ready", False), ("polling_interval", 0.1), ("timeout", None)]
    assert params(S.unload) == [("model", empty), ("unload_dependents", False), ("wait_until_unloaded", False),
                                ("polling_interval", 0.1), ("timeout", None)]
    assert params(S.load) == [("model_name", empty), ("parameters", None)]
    assert params(S.models) == [("exclude_not_ready", False)]
    assert params(S.model) == [("model_name", empty), ("model_version", -1)]
    assert params(S.metrics) == [("metric_format", tritonserver.MetricFormat.PROMETHEUS)]
    assert params(S.register_model_repository) == [("repository_path", empty), ("name_mapping", None)]
    assert params(S.unregister_model_repository) == [("repository_path", empty)]
    for name in ("stop", "live", "ready", "metadata", "poll_model_repository", "_ptr"):
        assert params(getattr(S, name)) == []
    assert "kwargs" in inspect.signature(S.__init__).parameters
    assert params(S.__init__) == [("options", None)]


def test_model_signatures():
    empty = inspect.Parameter.empty
    M = tritonserver.Model
    assert params(M.__init__) == [("server", empty), ("name", empty), ("version", -1), ("state", None),
                                  ("reason", None)]
    assert params(M.infer) == [("inference_request", None), ("raise_on_error", True)]
    assert params(M.async_infer) == [("inference_request", None), ("raise_on_error", True)]
    assert params(M.config) == [("config_version", 1)]
    for name in ("metadata", "ready", "batch_properties", "transaction_properties", "statistics"):
        assert params(getattr(M, name)) == []


def test_metric_signatures():
    empty = inspect.Parameter.empty
    assert params(tritonserver.MetricFamily.__init__) == [("kind", empty), ("name", empty), ("description", empty)]
    assert params(tritonserver.Metric.__init__) == [("family", empty), ("labels", None)]


def test_test_build_has_its_hooks():
    """The suite runs against the test build (make build and the runner
    scripts pass -DTRITONSERVER_TESTING=ON): without its hooks the leak and
    zero-copy checks would skip, silently. A wheel has none
    (test_wheel_smoke.py checks that under tests/check_wheel.sh)."""
    from common import HOOKS

    assert HOOKS is not None, "tritonserver._native was built without TRITONSERVER_TESTING=ON: run `make build`"
