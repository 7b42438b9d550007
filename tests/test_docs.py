"""The documentation: every Python block of the user guide runs, in order, in
one namespace, from the repository root (blocks starting with `# requires:
gpu` only with a GPU, `# requires: jax` only where jax is installed); the
docstrings describe every Options field and Model.infer keyword (as
help() shows them); the API reference and the site read well, as far as can
be told without a browser (`make docs-check` renders the site in one)."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import os
import pathlib
import pydoc
import re
import runpy
import sys

import pytest

import tritonserver
from tritonserver._api._request import InferenceRequestKwargs

from common import ROOT, has_gpu

GUIDE = ROOT / "docs" / "user_guide.md"
BUILD_API = ROOT / "docs" / "build_api.py"
DESCRIBED_DATACLASSES = (tritonserver.Options, tritonserver.RateLimiterResource, tritonserver.ModelLoadDeviceLimit)
DEVELOPER_PAGES = {"development.md", "design.md", "gpu.md", "hostile_inputs.md", "sanitizers.md", "benchmarks.md"}


@functools.lru_cache(maxsize=None)
def build_api() -> dict:
    return runpy.run_path(str(BUILD_API))


@functools.lru_cache(maxsize=None)
def reference() -> str:
    text, missing = build_api()["build"]()
    assert missing == []
    return text


def section(text: str, heading: str) -> str:
    """The part of the reference from `heading` to the next heading of its
    level or above."""
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n")
    ends = [m.start() for m in re.finditer(rf"\n#{{1,{len(level)}}} ", text) if m.start() > start]
    return text[start:ends[0] if ends else len(text)]


def plain(text: str) -> str:
    return " ".join(text.split())


def help_text(obj: object) -> str:
    """What help(obj) prints, less the bars before a class's lines."""
    return re.sub(r"^ ?\| ?", "", pydoc.render_doc(obj, renderer=pydoc.plaintext), flags=re.M)


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_the_guide_has_code():
    assert len(python_blocks(GUIDE)) >= 6


@pytest.mark.python_backend
def test_user_guide_blocks_run(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "__guide__"}
    ran = 0
    for number, block in enumerate(python_blocks(GUIDE), 1):
        if block.startswith("# requires: gpu") and not has_gpu():
            continue
        if block.startswith("# requires: jax") and importlib.util.find_spec("jax") is None:
            continue
        if block.startswith("# requires: torch") and importlib.util.find_spec("torch") is None:
            continue
        try:
            exec(compile(block, f"{GUIDE.name} block {number}", "exec"), namespace)
        except Exception as e:  # name the block, then fail
            pytest.fail(f"user guide block {number} failed: {type(e).__name__}: {e}\n{block}")
        ran += 1
    out = capsys.readouterr().out
    assert ran >= 6
    assert "[5 5]" in out                 # quickstart: lengths of "hello", "wörld"
    assert "bound: [[3. 3. 3. 3.]]" in out  # Server.bind with a request parameter
    assert "no CUDA here" in out or has_gpu()
    assert os.getcwd() == str(ROOT)


def test_readme_blocks_run_from_any_folder(tmp_path, monkeypatch, capsys):
    """The README's snippets need no clone: run from an empty folder (its
    first one named the clone's examples/models by a relative path, which
    failed anywhere but the repository root)."""
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(ROOT / "README.md")
    assert blocks
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"README.md block {number}", "exec"), {"__name__": "__readme__"})
        except Exception as e:  # name the block, then fail
            pytest.fail(f"README block {number} failed: {type(e).__name__}: {e}\n{block}")
    assert "[2. 4.]" in capsys.readouterr().out


def test_api_reference_builds_with_every_public_name_documented(tmp_path):
    import runpy

    build = runpy.run_path(str(ROOT / "docs" / "build_api.py"))["build"]
    text, missing = build()
    assert missing == []
    for name in ("Server", "Options", "InferenceRequest", "Tensor", "MemoryBuffer", "TritonError"):
        assert f"## {name}" in text


@pytest.mark.parametrize("cls", DESCRIBED_DATACLASSES, ids=lambda c: c.__name__)
def test_every_field_is_described_in_the_docstring_and_in_help(cls):
    """The class docstring's Attributes section describes every field, in
    the order of the fields, and help() shows each description."""
    described = build_api()["parse_doc"](inspect.getdoc(cls)).entries["Attributes"]
    assert list(described) == [f.name for f in dataclasses.fields(cls)]
    shown = plain(help_text(cls))
    for name, text in described.items():
        assert len(text) >= 10, f"{cls.__name__}.{name}: {text!r}"
        assert plain(f"{name}: {text}")[:60] in shown, name


def test_help_of_model_infer_describes_every_keyword():
    """help(Model.infer) names each keyword argument hidden behind
    ``**kwargs: Unpack[InferenceRequestKwargs]``, with its meaning."""
    shown = help_text(tritonserver.Model.infer)
    keywords = list(InferenceRequestKwargs.__annotations__)
    assert keywords
    for keyword in keywords:
        assert re.search(rf"^\s*{keyword}: \S.{{20,}}", shown, flags=re.M), keyword
    described = build_api()["parse_doc"](inspect.getdoc(tritonserver.Model.infer)).entries["Keyword arguments"]
    assert sorted(described) == sorted(keywords)
    for method in (tritonserver.Model.async_infer, tritonserver.Model.create_request):
        assert "infer()" in inspect.getdoc(method) and "described there" in inspect.getdoc(method)


def test_the_api_reference_has_short_headings_and_defaults_as_in_code():
    text = reference()
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert [h for h in headings if len(h) > 80] == []
    assert "<factory>" not in text
    assert not re.search(r"<\w+\.\w+: [^>]*>", text)  # an enum's repr
    options = section(text, "## Options")
    for name, shown in [("model_repository", "Union[str, list[str]] = []"), ("server_id", "str = 'triton'"),
                        ("model_control_mode", "ModelControlMode = ModelControlMode.NONE"),
                        ("rate_limiter_mode", "RateLimitMode = RateLimitMode.OFF"),
                        ("log_format", "LogFormat = LogFormat.DEFAULT"), ("host_policies", "dict[str, dict[str, str]] = {}")]:
        assert f"`{name}: {shown}`\n:   " in options, name
    for field in dataclasses.fields(tritonserver.Options):
        assert re.search(rf"^`{field.name}: [^`]+`\n:   \S", options, flags=re.M), field.name
    infer = section(text, "### Model.infer")
    assert "```python\ninfer(\n" in infer
    for keyword in InferenceRequestKwargs.__annotations__:
        assert re.search(rf"^`{keyword}: [^`]+`\n:   \S", infer, flags=re.M), keyword


def test_the_api_reference_documents_tritonserver_ray_without_importing_ray_for_good():
    """Without Ray, tritonserver.ray's part is read with stand-ins for Ray's
    modules, which are gone again afterwards (as is that tritonserver.ray)."""
    ray_installed = importlib.util.find_spec("ray") is not None
    text = reference()
    ray_part = section(text, "# tritonserver.ray")
    headings = [line.replace("\\", "") for line in ray_part.splitlines() if line.startswith("## ")]
    assert headings == ["## InferResult", "## TritonDeployment", "## TritonReplica", "## actor_options"]
    assert "A Ray Serve deployment of `TritonReplica`" in ray_part
    if not ray_installed:
        assert "ray" not in sys.modules and "tritonserver.ray" not in sys.modules
        assert not hasattr(tritonserver, "ray")


def test_the_navigation_keeps_developer_pages_under_developers():
    config = (ROOT / "mkdocs.yml").read_text()
    nav = config[config.index("\nnav:\n"):]
    top = re.findall(r"^  - [^:]+: (\S+\.md)$", nav, flags=re.M)
    under = nav[nav.index("  - Developers:\n"):]
    developers = re.findall(r"^      - [^:]+: (\S+\.md)$", under, flags=re.M)
    assert DEVELOPER_PAGES.isdisjoint(top)
    assert set(developers) == DEVELOPER_PAGES
    assert {"index.md", "user_guide.md", "api.md"} <= set(top)


def test_the_site_builds_with_no_warnings():
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (make docs installs it)")
    import runpy
    import subprocess
    import sys

    site = runpy.run_path(str(ROOT / "docs" / "build_site.py"))
    site["stage"]()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    pages = {p.name for p in (ROOT / "build" / "site").glob("*.html")}
    assert {"index.html", "user_guide.html", "api.html", "design.html", "changelog.html"} <= pages
    api = (ROOT / "build" / "site" / "api.html").read_text()
    assert '<h2 id="server">Server</h2>' in api and '<h2 id="inferencerequest">InferenceRequest</h2>' in api
    headings = re.findall(r"<h[1-4][^>]*>(.*?)</h[1-4]>", api, flags=re.S)
    assert [h for h in headings if len(re.sub("<[^>]+>", "", h)) > 80] == []
    assert "factory" not in api
    assert '<h3 id="tensor__dlpack__">Tensor.__dlpack__</h3>' in api  # not a bold "dlpack"
    assert "<dt><code>model_control_mode: ModelControlMode = ModelControlMode.NONE</code></dt>" in api
    assert "<dt><code>inputs: dict[str, Union[Tensor, Any]]</code></dt>" in api


def test_the_package_docstring_example_runs(monkeypatch):
    """help(tritonserver)'s example (FP32 inputs for an FP32 model) runs as
    written, from the repository root."""
    import doctest

    monkeypatch.chdir(ROOT)
    result = doctest.testmod(tritonserver, verbose=False)
    assert result.attempted >= 2 and result.failed == 0
