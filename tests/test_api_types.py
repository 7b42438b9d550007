"""The native layer builds API objects by calling their classes
positionally (cpp/api_types.h): their parameters' order is a contract that
a refactor of the Python side must not break silently."""

from __future__ import annotations

import inspect
import re

from common import ROOT

from tritonserver._api import _errors
from tritonserver._api._enums import DataType, MemoryType
from tritonserver._api._memorybuffer import MemoryBuffer
from tritonserver._api._response import InferenceResponse
from tritonserver._api._tensor import Tensor


def positional(callable_) -> list[str]:
    return [p.name for p in inspect.signature(callable_).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def test_the_constructors_the_native_layer_calls_keep_their_argument_order():
    assert positional(MemoryBuffer)[:5] == ["data_ptr", "memory_type", "memory_type_id", "size", "owner"]
    assert positional(Tensor)[:3] == ["data_type", "shape", "memory_buffer"]
    # All 8 that cpp/response_view.cc passes.
    assert positional(InferenceResponse)[:8] == ["model", "request_id", "parameters", "outputs", "error",
                                                 "classification_label", "final", "model_version"]
    assert positional(_errors.error_from_code) == ["code", "message"]


def test_response_view_passes_as_many_arguments_as_pinned():
    source = (ROOT / "cpp" / "response_view.cc").read_text()
    call = re.search(r"PyObject\* raw\[\] = \{model\.ptr\(\).*?\};", source, re.S)
    assert call, "cpp/response_view.cc no longer builds InferenceResponse's arguments as pinned here"
    assert call.group(0).count(",") + 1 == 8


def test_the_tables_the_native_layer_indexes_follow_the_core_codes():
    # Indexed by value: member i must have value i.
    assert [m.value for m in DataType] == list(range(len(DataType)))
    assert [m.value for m in MemoryType] == list(range(len(MemoryType)))
    # TRITONSERVER_Error_Code order: UNKNOWN, INTERNAL, NOT_FOUND, INVALID_ARG,
    # UNAVAILABLE, UNSUPPORTED, ALREADY_EXISTS, CANCELLED.
    assert _errors._BY_CODE == (_errors.UnknownError, _errors.InternalError, _errors.NotFoundError,
                                _errors.InvalidArgumentError, _errors.UnavailableError, _errors.UnsupportedError,
                                _errors.AlreadyExistsError, _errors.CancelledError)
