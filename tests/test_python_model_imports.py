"""Python models in-process import their helper files in a namespace of
their own (tritonserver/_python_models/_model_imports.py), as each stub
process had its own: a model's `import utils` is its own utils.py, two
versions keep their own helpers, a reload sees edited helpers, nothing of an
unloaded model is left on sys.path or in sys.modules, helpers import each
other absolutely and relatively, and a helper named like a standard-library
module does not shadow it (the stub's append semantics)."""

from __future__ import annotations

import importlib.util
import json
import sys

import numpy
import pytest

import tritonserver
from common import dedicated_server, refused, single

# A model answering one request with json.dumps(<answer>), after `imports`.
_MODEL = """\
import json as _json
import numpy as _numpy
import triton_python_backend_utils as pb_utils
{imports}

class TritonPythonModel:
    def execute(self, requests):
        answer = _json.dumps({answer}).encode()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("ANSWER", _numpy.array([answer], dtype=object))])
                for _ in requests]
"""

_CONFIG = """\
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0", data_type: TYPE_FP32, dims: [ 1 ] }} ]
output [ {{ name: "ANSWER", data_type: TYPE_STRING, dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
{extra}"""


def _write_model(repo, name: str, files: dict[str, str], extra_config: str = "") -> None:
    """Model `name` in `repo`: its config (one ANSWER string output) and
    `files` (paths under the model's folder, e.g. "1/model.py")."""
    (repo / name).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(_CONFIG.format(name=name, extra=extra_config))
    for relative, text in files.items():
        (repo / name / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / name / relative).write_text(text)


def _answer(server, name: str, version: int = -1):
    """What model `name` (`version`) answers to one request."""
    response = single(server.model(name, version).infer(inputs={"INPUT0": numpy.zeros(1, numpy.float32)}))
    return json.loads(response.outputs["ANSWER"].to_bytes_array()[0])


def _server(backend_directory: str, server_id: str, repo, models: list[str]):
    """A server of the test's own on `repo`, python models in-process."""
    return dedicated_server(backend_directory, server_id, models, python_models="in-process",
                            model_repository=str(repo))


def _private_modules(model: str) -> list[str]:
    """The sys.modules entries of `model`'s private packages."""
    return sorted(name for name in sys.modules if name.startswith(f"_triton_model_{model}_"))


def test_two_models_each_import_their_own_helper(backend_directory, tmp_path):
    repo = tmp_path / "repo"
    for name in ("a", "b"):
        _write_model(repo, name, {"1/model.py": _MODEL.format(imports="import utils", answer="utils.VALUE"),
                                  "1/utils.py": f"VALUE = 'utils of {name}'\n"})
    with _server(backend_directory, "imports-two", repo, ["a", "b"]) as server:
        assert _answer(server, "a") == "utils of a"
        assert _answer(server, "b") == "utils of b"


def test_two_versions_of_a_model_keep_their_own_helpers(backend_directory, tmp_path):
    repo = tmp_path / "repo"
    files = {}
    for version in (1, 2):
        files[f"{version}/model.py"] = _MODEL.format(imports="from helpers import tag", answer="tag()")
        files[f"{version}/helpers.py"] = f"def tag():\n    return 'version {version}'\n"
    _write_model(repo, "versions", files, extra_config="version_policy: { all: {} }\n")
    with _server(backend_directory, "imports-versions", repo, ["versions"]) as server:
        assert _answer(server, "versions", 1) == "version 1"
        assert _answer(server, "versions", 2) == "version 2"


def test_a_reload_imports_the_edited_helper(backend_directory, tmp_path):
    repo = tmp_path / "repo"
    helper = repo / "edited" / "1" / "utils.py"
    _write_model(repo, "edited", {"1/model.py": _MODEL.format(imports="import utils", answer="utils.VALUE"),
                                  "1/utils.py": "VALUE = 'old'\n"})
    with _server(backend_directory, "imports-edited", repo, ["edited"]) as server:
        assert _answer(server, "edited") == "old"
        server.unload("edited", wait_until_unloaded=True, timeout=30)
        assert not _private_modules("edited")
        helper.write_text("VALUE = 'the new code'\n")  # another size too: no cached bytecode is taken for it
        server.load("edited")
        assert _answer(server, "edited") == "the new code"


def test_nothing_of_an_unloaded_model_is_left_behind(backend_directory, tmp_path, monkeypatch):
    """Neither while loaded nor after unload and stop are the model's folders
    on sys.path; its modules go at unload, and the host's own `import utils`
    is the host's."""
    monkeypatch.delitem(sys.modules, "utils", raising=False)
    repo = tmp_path / "repo"
    _write_model(repo, "left", {"1/model.py": _MODEL.format(imports="import utils", answer="utils.VALUE"),
                                "1/utils.py": "VALUE = 'the model'\n",
                                "common_helper.py": "VALUE = 'model folder'\n"})
    folders = {str(repo / "left"), str(repo / "left" / "1")}
    with _server(backend_directory, "imports-left", repo, ["left"]) as server:
        assert _answer(server, "left") == "the model"
        assert _private_modules("left"), "the model's modules are where it loaded them"
        assert not folders & set(sys.path)
        server.unload("left", wait_until_unloaded=True, timeout=30)
        assert not _private_modules("left")
        server.stop()
    assert not folders & set(sys.path)
    assert not _private_modules("left")
    assert "utils" not in sys.modules and importlib.util.find_spec("common_helper") is None
    host = tmp_path / "host"
    host.mkdir()
    (host / "utils.py").write_text("VALUE = 'the host'\n")
    monkeypatch.syspath_prepend(str(host))
    try:
        import utils

        assert utils.VALUE == "the host"
    finally:
        sys.modules.pop("utils", None)


def test_helpers_import_packages_submodules_and_each_other(backend_directory, tmp_path):
    repo = tmp_path / "repo"
    _write_model(repo, "helpers", {
        "1/model.py": _MODEL.format(
            imports="import tools.text\nfrom tools import numbers\nfrom tools.text import shout\nimport chain\n"
                    "from . import chain as relative_chain\nimport shared",
            answer="[shout('hi'), tools.text.shout('x'), numbers.TWICE, chain.VALUE, relative_chain is chain, "
                   "shared.WHERE, tools.__name__.rpartition('.')[2], late()]") +
        "\ndef late():\n    import tools.numbers as n\n    return n.TWICE\n",
        # A package: its __init__ imports a submodule relatively; the submodule
        # imports its sibling relatively and a top-level helper absolutely.
        "1/tools/__init__.py": "from . import text\n",
        "1/tools/text.py": "from . import numbers\nimport base\n\ndef shout(s):\n    return base.PREFIX + s.upper()"
                           " + str(numbers.TWICE)\n",
        "1/tools/numbers.py": "import base\nTWICE = 2 * base.ONE\n",
        "1/base.py": "PREFIX = '>'\nONE = 21\n",
        # A helper importing another helper absolutely, one in the model folder.
        "1/chain.py": "import base\nimport shared\nVALUE = base.PREFIX + shared.WHERE\n",
        "shared.py": "WHERE = 'model folder'\n",
    })
    with _server(backend_directory, "imports-helpers", repo, ["helpers"]) as server:
        assert _answer(server, "helpers") == [">HI42", ">X42", 42, ">model folder", True, "model folder", "tools",
                                              42]


def test_a_helper_named_like_a_standard_module_does_not_shadow_it(backend_directory, tmp_path):
    """`import json` is the standard library's, in model.py and its helpers
    (the stub appends the folders to sys.path); the folder's json.py is
    still the model's `from . import json`, as under the stub's
    `<version>.model`."""
    repo = tmp_path / "repo"
    _write_model(repo, "stdlib", {
        "1/model.py": _MODEL.format(
            imports="import json\nimport colorsys\nimport utils\nfrom . import json as own_json",
            answer="[hasattr(json, 'dumps'), hasattr(colorsys, 'rgb_to_hsv'), utils.STANDARD, own_json.WHO]"),
        "1/json.py": "WHO = 'the model'\n",
        "1/colorsys.py": "WHO = 'the model'\n",
        "1/utils.py": "import json, colorsys\nSTANDARD = hasattr(json, 'loads') and hasattr(colorsys, 'hls_to_rgb')\n",
    })
    with _server(backend_directory, "imports-stdlib", repo, ["stdlib"]) as server:
        assert _answer(server, "stdlib") == [True, True, True, "the model"]
    assert hasattr(sys.modules["json"], "dumps")
    import colorsys

    assert hasattr(colorsys, "rgb_to_hsv")


@pytest.mark.parametrize("failing, message", [
    # The error names the model's own lines only, as the stub's does.
    ("utils.py", r"RuntimeError: utils cannot start\n\nAt:\n  \S*broken/1/utils.py\(1\): <module>\n"
                 r"  \S*broken/1/model.py\(\d+\): <module>\n"),
    ("initialize", "RuntimeError: initialize cannot start"),
])
def test_a_model_that_fails_to_load_leaves_no_modules(backend_directory, tmp_path, failing, message):
    """A helper that raises at import, or an initialize() that raises: the
    load fails with the model's error and none of its modules stay."""
    repo = tmp_path / "repo"
    model = _MODEL.format(imports="import utils", answer="utils.VALUE")
    utils = "VALUE = 'fine'\n"
    if failing == "utils.py":
        utils = "raise RuntimeError('utils cannot start')\n"
    else:
        model += "\n    def initialize(self, args):\n        raise RuntimeError('initialize cannot start')\n"
    _write_model(repo, "broken", {"1/model.py": model, "1/utils.py": utils})
    with _server(backend_directory, f"imports-broken-{failing}", repo, []) as server:
        with refused(tritonserver.InvalidArgumentError, match=message):
            server.load("broken")
        assert not _private_modules("broken")
