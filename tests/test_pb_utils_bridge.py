"""The backend wing's one door into the Python of in-process python models
(cpp/python_backend/pb_utils_bridge.*): every pb_utils class, slot and
function, every `_runtime` function and runner attribute the C++ names is
read from the bridge's source and checked here against the Python, with the
number of arguments C++ passes: a rename in Python fails this test, not a
request."""

from __future__ import annotations

import inspect
import re

from common import ROOT

from tritonserver._python_models import _runtime, pb_utils

BRIDGE = ROOT / "cpp" / "python_backend" / "pb_utils_bridge.cc"

# Each function C++ calls, with how many arguments it passes (the calls in
# pb_utils_bridge.cc, backend_request.cc, backend_response.cc and
# python_backend.cc).
CALLED = {
    ("pb_utils", "_input_value"): 3,  # (name, found, owner)
    ("pb_utils", "_output_spec"): 3,  # (name, triton_dtype, array)
    ("runtime", "load_instance"): 2,  # (args, server_address)
    ("runtime", "auto_complete"): 1,  # (args)
    ("runtime", "warn_output_type"): 4,  # (model, output, declared, returned)
    ("runner", "execute"): 2,  # (natives, requests)
    ("runner", "start_worker"): 1,  # (run)
    ("runner", "finalize"): 0,
}
# The runner's plain attributes, read once per instance.
RUNNER_FACTS = {"device_inputs", "zero_copy_inputs", "decoupled", "hand_off", "request_type",
                "declared_outputs", "batching"}
# Slot names by the bridge's field prefix -> the class that has them.
SLOT_OWNERS = {"tensor": pb_utils.Tensor, "request": pb_utils.InferenceRequest,
               "response": pb_utils.InferenceResponse}
MODULES = {"pb_utils": pb_utils, "runtime": _runtime}


def bridge_source() -> str:
    return BRIDGE.read_text()


def accepts(function, count: int) -> bool:
    try:
        inspect.signature(function).bind(*([None] * count))
    except TypeError:
        return False
    return True


def test_every_name_the_bridge_looks_up_is_listed_here():
    source = bridge_source()
    looked_up = set(re.findall(r'\b(pb_utils|runtime|runner)\.attr\("(\w+)"\)', source))
    assert looked_up == set(CALLED) | {("pb_utils", c) for c in ("Tensor", "InferenceRequest",
                                                                 "InferenceResponse")} | {
        ("runner", name) for name in RUNNER_FACTS}


def test_the_classes_have_every_slot_the_bridge_reads_or_sets():
    slots = re.findall(r"b->(tensor|request|response)_\w+ = interned\(\"(\w+)\"\)", bridge_source())
    assert len(slots) == 8
    missing = [f"{SLOT_OWNERS[owner].__name__}.{name}" for owner, name in slots
               if name not in SLOT_OWNERS[owner].__slots__]
    assert missing == []


def test_every_function_cpp_calls_takes_the_arguments_it_passes():
    wrong = []
    for (where, name), count in CALLED.items():
        if where == "runner":
            function = getattr(_runtime.Instance, name)
            count += 1  # self
        else:
            function = getattr(MODULES[where], name)
        if not accepts(function, count):
            wrong.append(f"{where}.{name} with {count}")
    assert wrong == []


def test_the_runner_sets_every_fact_the_bridge_reads():
    init = inspect.getsource(_runtime.Instance)
    assert sorted(n for n in RUNNER_FACTS if f"self.{n} = " not in init) == []


def test_the_calls_pass_the_counts_listed():
    # The argument counts above, read back from the calls in the C++.
    wing = ROOT / "cpp" / "python_backend"
    text = "".join((wing / f).read_text() for f in ("backend_request.cc", "backend_response.cc",
                                                    "python_backend.cc", "pb_utils_bridge.cc"))

    def passed(call: str) -> int:
        match = re.search(re.escape(call) + r"\((.*?)\);", text, re.S)
        assert match, call
        inner = re.sub(r"\([^()]*\)", "", match.group(1))  # nested calls' own commas
        return 0 if not inner.strip() else inner.count(",") + 1

    assert passed("pb_utils_bridge().input_value") == CALLED["pb_utils", "_input_value"]
    assert passed("pb_utils_bridge().output_spec") == CALLED["pb_utils", "_output_spec"]
    assert passed("pb_utils_bridge().load_instance") == CALLED["runtime", "load_instance"]
    assert passed("pb_utils_bridge().auto_complete") == CALLED["runtime", "auto_complete"]
    assert passed("pb_utils_bridge().warn_output_type") == CALLED["runtime", "warn_output_type"]
    assert passed("state->execute") == CALLED["runner", "execute"]
