"""`Server(**kwargs)`, `Model.infer/async_infer/create_request(**kwargs)` are
typed: `mypy --strict` reports a misspelt option or a wrong type in user
code, line by line, and accepts correct code."""

from __future__ import annotations

import dataclasses
import re
import sys
import textwrap
import typing

import pytest

import tritonserver
from tritonserver._api._options import OptionsKwargs
from tritonserver._api._request import InferenceRequestKwargs

# Each line marked `# MISTAKE` must be reported, and no other line.
USER_PROGRAM = textwrap.dedent("""
    import asyncio
    import numpy
    import tritonserver

    opts = tritonserver.Options(model_repository="models")
    good = tritonserver.Server(model_repository="models", exit_timeout=3,
                               model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    also_good = tritonserver.Server(opts)
    typo = tritonserver.Server(model_repositry="models")  # MISTAKE
    wrong_type = tritonserver.Server(model_repository="models", exit_timeout="3")  # MISTAKE
    wrong_enum = tritonserver.Server(model_control_mode="explicit")  # MISTAKE

    def use(model: tritonserver.Model) -> None:
        for response in model.infer(inputs={"X": numpy.zeros(3)}, output_memory_type="cpu"):
            print(response.outputs)
        model.infer(inputs={"X": [1]}, ouput_memory_type="cpu")  # MISTAKE
        model.infer(inputs={"X": [1]}, priority="high")  # MISTAKE
        model.create_request(inputs={"X": [1]}, timeout=1.5)  # MISTAKE
        model.create_request(inputs={"X": [1]}, request_id="r1", parameters={"p": 1})

    async def use_async(model: tritonserver.Model) -> None:
        async for response in model.async_infer(inputs={"X": [1]}, request_id="r2"):
            print(response.outputs)
        model.async_infer(inputs={"X": [1]}, request_id=5)  # MISTAKE
        model.async_infer(inputs={"X": [1]}, output_name=["Y"])  # MISTAKE
""")


def test_keyword_types_list_every_field():
    options = {f.name for f in dataclasses.fields(tritonserver.Options)}
    assert set(OptionsKwargs.__annotations__) == options
    request = {f.name for f in dataclasses.fields(tritonserver.InferenceRequest)} - {"model"}
    assert set(InferenceRequestKwargs.__annotations__) == request
    # The same annotations as the dataclass fields (as written).
    for kwargs, cls in ((OptionsKwargs, tritonserver.Options), (InferenceRequestKwargs, tritonserver.InferenceRequest)):
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        for name, annotation in kwargs.__annotations__.items():
            written = annotation.__forward_arg__ if isinstance(annotation, typing.ForwardRef) else annotation
            assert written == fields[name], name


# 3.10 types the keywords through typing_extensions.Unpack (checkers only),
# 3.11+ through typing.Unpack.
@pytest.mark.parametrize("python_version", sorted({"3.10", f"{sys.version_info.major}.{sys.version_info.minor}"}))
def test_mypy_reports_each_planted_mistake(tmp_path, python_version):
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (make venv installs it)")
    program = tmp_path / "user_program.py"
    program.write_text(USER_PROGRAM)
    planted = {number for number, line in enumerate(USER_PROGRAM.splitlines(), 1) if "# MISTAKE" in line}
    stdout, stderr, status = api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                                      "--python-version", python_version,
                                      str(program)])
    reported = {int(m.group(1)) for m in re.finditer(r"user_program\.py:(\d+): error:", stdout)}
    assert status == 1, stdout + stderr
    assert reported == planted, f"planted on lines {sorted(planted)}, reported:\n{stdout}{stderr}"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="typing.Unpack is 3.11+ (3.10 types it for checkers only)")
def test_the_signatures_resolve_at_run_time():
    hints = typing.get_type_hints(tritonserver.Server.__init__, include_extras=True)
    assert typing.get_args(hints["kwargs"]) == (OptionsKwargs,)
