"""Misuse of the public API gets a precise exception (TypeError, ValueError
or the TritonError that fits) naming the fix, never an AttributeError, a
binding's signature dump, a struct.error or a silent success; and lifecycle
calls made twice or at once have one well-defined outcome."""

from __future__ import annotations

import threading

import numpy
import pytest

import tritonserver
from tritonserver import DataType, InferenceRequest, InvalidArgumentError, MemoryBuffer, NotFoundError, Tensor
from common import hooks, refused
from common import make_options

X = numpy.arange(4, dtype=numpy.float32)


# -- Server construction and lifecycle -----------------------------------------
def test_positional_repository_path_is_a_type_error() -> None:
    with refused(TypeError, r"write Server\(model_repository='models/'\)"):
        tritonserver.Server("models/")


def test_options_and_keywords_together_are_a_type_error(backend_directory) -> None:
    with refused(TypeError, r"not both .*exit_timeout"):
        tritonserver.Server(make_options(backend_directory), exit_timeout=3)


def test_exit_timeout_zero_is_refused_at_start(backend_directory) -> None:
    server = tritonserver.Server(make_options(backend_directory, exit_timeout=0))
    with refused(ValueError, r"exit_timeout must be at least 1 second"):
        server.start()
    with refused(InvalidArgumentError, "Server not started"):
        server.stop()


def test_concurrent_starts_one_wins(backend_directory) -> None:
    for _ in range(5):  # the race is narrow: several rounds
        server = tritonserver.Server(make_options(backend_directory, server_id="concurrent_start", log_error=False))
        barrier = threading.Barrier(2)
        outcomes: list[object] = []

        def start() -> None:
            barrier.wait()
            try:
                server.start()
                outcomes.append("started")
            except Exception as e:  # noqa: BLE001 - the outcome is the test
                outcomes.append(e)

        threads = [threading.Thread(target=start) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        try:
            assert outcomes.count("started") == 1, outcomes
            (error,) = [o for o in outcomes if o != "started"]
            assert isinstance(error, InvalidArgumentError) and "already started" in str(error), error
            assert server.live()
        finally:
            server.stop()
        server.stop()  # a second stop() is a no-op


def test_stop_returns_cached_host_memory(backend_directory) -> None:
    server = tritonserver.Server(make_options(backend_directory, server_id="host_pool_stop", log_error=False))
    server.start(wait_until_ready=True)
    try:
        server.load("identity_fp32")
        big = numpy.ones(1 << 20, dtype=numpy.float32)  # 4 MiB: a pooled size
        for _ in range(4):
            responses = list(server.model("identity_fp32").infer(inputs={"INPUT0": big}))
            del responses
        assert hooks().host_pool_cached_bytes() > 0
    finally:
        server.stop()
    assert hooks().host_pool_cached_bytes() == 0


# -- infer() arguments -----------------------------------------------------------
def test_positional_inputs_dict_is_a_type_error(model) -> None:
    identity = model("identity_fp32")
    with refused(TypeError, r"pass inputs by keyword"):
        identity.infer({"INPUT0": X})
    with refused(TypeError, r"pass inputs by keyword"):
        identity.async_infer({"INPUT0": X})


def test_request_and_keywords_together_are_a_type_error(model) -> None:
    identity = model("identity_fp32")
    request = InferenceRequest(model=identity, inputs={"INPUT0": X})
    with refused(TypeError, r"not both .*output_names"):
        identity.infer(request, output_names=["OUTPUT0"])


@pytest.mark.parametrize("field, value, pattern", [
    ("inputs", None, r"inputs must be a dict .* not NoneType"),
    ("inputs", [("INPUT0", X)], r"inputs must be a dict .* not list"),
    ("parameters", None, r"parameters must be a dict .* not NoneType"),
    ("parameters", [("p", 1)], r"parameters must be a dict .* not list"),
    ("output_names", "OUTPUT0", r"write output_names=\['OUTPUT0'\]"),
])
def test_request_fields_of_the_wrong_kind_are_type_errors(model, field, value, pattern) -> None:
    arguments = {"inputs": {"INPUT0": X}, field: value}
    with refused(TypeError, pattern):
        model("identity_fp32").infer(**arguments)


def test_request_without_a_model_is_a_type_error(model) -> None:
    request = InferenceRequest(model=None, inputs={"INPUT0": X})  # type: ignore[arg-type]
    with refused(TypeError, r"model must be a Model .* not NoneType"):
        model("identity_fp32").infer(request)


def test_model_version_of_the_wrong_kind_or_range(server, model) -> None:
    model("identity_fp32")
    with refused(TypeError, r"model version must be an int .* not str"):
        server.model("identity_fp32", "1")  # type: ignore[arg-type]
    with refused(InvalidArgumentError, r"out of range"):
        server.model("identity_fp32", 2**63)
    handle = server.model("identity_fp32")
    handle.version = 2**64  # changed after the fact: checked per request
    with refused(InvalidArgumentError, r"out of range"):
        handle.infer(inputs={"INPUT0": X})


def test_bytes_element_past_4_gib_is_refused() -> None:
    class Huge(bytes):
        """Claims 4 GiB (without taking it): the length check runs before
        the bytes are read. A list of bytes takes the same serializer."""

        def __len__(self) -> int:
            return 2**32

    array = numpy.empty(1, dtype=object)
    array[0] = Huge(b"x")
    with refused(InvalidArgumentError, r"length in 4 bytes"):
        Tensor.from_bytes_array(array)


def test_dlpack_capsule_is_refused_as_input(model) -> None:
    capsule = X.__dlpack__()
    with refused(InvalidArgumentError, r"PyCapsule not supported"):
        model("identity_fp32").infer(inputs={"INPUT0": capsule})
    numpy.from_dlpack(Tensor.from_dlpack(X))  # the package still exports
    with refused(InvalidArgumentError, r"does not support the DLPack protocol"):
        Tensor.from_dlpack(capsule)


def test_bf16_output_to_numpy_names_the_alternative(model) -> None:
    bits = numpy.array([0x3F80, 0x4000], dtype=numpy.uint16)  # 1.0, 2.0 in bfloat16
    tensor = Tensor(DataType.BF16, [2], MemoryBuffer.from_dlpack(bits))
    responses = list(model("identity_bf16").infer(inputs={"INPUT0": tensor}))
    output = responses[0].outputs["OUTPUT0"]
    with refused(TypeError, r"torch.from_dlpack"):
        numpy.asarray(output)


# -- model repository ------------------------------------------------------------
def test_unload_of_an_unknown_model_is_not_found(server) -> None:
    with refused(NotFoundError, r"no model named 'no_such_model' is in the model repository or loaded"):
        server.unload("no_such_model")
    with refused(TypeError, r"model name \(str\) or a Model"):
        server.unload(42)  # type: ignore[arg-type]
