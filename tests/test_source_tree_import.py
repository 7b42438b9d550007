"""`import tritonserver` and `python -m tritonserver` in the repository root,
where the source folder tritonserver/ comes first on sys.path: they work
(the development venv holds an editable install, `make develop`), or they fail
with an ImportError that says what to do, never with a circular-import
traceback."""

from __future__ import annotations

import importlib.machinery

import pytest

from common import ROOT, run_script

SOURCE_TREE_MESSAGE = "which has no built extension (tritonserver._native): run Python from another folder"


@pytest.mark.parametrize("code", [
    pytest.param("import tritonserver; print('IMPORTED', tritonserver.__file__)", id="import"),
    pytest.param("import runpy, sys; sys.argv = ['tritonserver']; runpy.run_module('tritonserver', "
                 "run_name='__main__', alter_sys=True)", id="python-m"),
])
def test_the_source_tree_imports_or_says_what_to_do(tmp_path, code):
    rc, out, err = run_script(code, tmp_path, timeout=120, cwd=ROOT)
    assert "circular import" not in err, err[-3000:]
    if rc == 0:
        # The source tree itself was imported, with its extension.
        assert str(ROOT / "tritonserver") in out or "Triton" in out, out
    else:
        assert f"ImportError: you are importing the source tree at {ROOT / 'tritonserver'}, " in err, err[-3000:]
        assert SOURCE_TREE_MESSAGE in err, err[-3000:]
        assert "`make develop`" in err, err[-3000:]


MIXED_CHILD = """
    import json, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import tritonserver
            outcome = {"imported": tritonserver.__file__, "server": hasattr(tritonserver, "Server")}
        except ImportError as e:
            outcome = {"import_error": str(e)}
    outcome["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    print(json.dumps(outcome))
"""


def _package_copy(site, foreign: tuple[str, ...], drop_native: bool = False):
    """site/tritonserver: the installed package's folders, made anew with
    links to its files, plus NVIDIA's `foreign` files (empty), as pip leaves
    the folder when both distributions are installed."""
    import pathlib

    import tritonserver

    def mirror(source: pathlib.Path, target: pathlib.Path) -> None:
        target.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.name == "__pycache__" or (drop_native and entry.name.startswith("_native")):
                continue
            if entry.is_dir():
                mirror(entry, target / entry.name)
            else:
                (target / entry.name).symlink_to(entry)

    package = site / "tritonserver"
    mirror(pathlib.Path(tritonserver.__file__).parent, package)
    for name in foreign:
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("")
    return package


# NVIDIA's extension (its _c/__init__.py has the path of ours).
NVIDIA_EXTENSION = f"_c/triton_bindings{importlib.machinery.EXTENSION_SUFFIXES[0]}"


@pytest.mark.parametrize("foreign", [(NVIDIA_EXTENSION,), ("_api/_allocators.py",),
                                     (NVIDIA_EXTENSION, "_api/_allocators.py")],
                         ids=["_c", "_allocators", "both"])
def test_mixed_installation_warns_at_import_with_the_fix(tmp_path, foreign):
    # NVIDIA's package installed, then this one: our __init__.py runs with
    # NVIDIA's files beside it (uninstalling either would break the other).
    # Was: nothing said at import; `python -m tritonserver` said it only
    # when run.
    import json

    site = tmp_path / "site"
    package = _package_copy(site, foreign)
    rc, out, err = run_script(MIXED_CHILD, tmp_path, timeout=120, env={"PYTHONPATH": str(site)})
    assert rc == 0, err[-3000:]
    outcome = json.loads(out.splitlines()[-1])
    assert outcome.get("imported", "").startswith(str(package)), outcome
    assert outcome["server"] is True
    (warning,) = [w for w in outcome["warnings"] if "NVIDIA" in w]
    assert warning.startswith(f"RuntimeWarning: NVIDIA's tritonserver package and this one (tritonserver-binding) "
                              f"are both installed in {package} (it holds NVIDIA's {', '.join(foreign)})"), warning
    assert "`pip uninstall -y tritonserver tritonserver-binding`, then `pip install tritonserver-binding`" in warning


def test_mixed_installation_without_the_extension_says_what_to_do(tmp_path):
    # Our __init__.py with NVIDIA's files and no _native: the ImportError
    # names the mixed installation, not a source tree.
    import json

    site = tmp_path / "site"
    package = _package_copy(site, (NVIDIA_EXTENSION,), drop_native=True)
    rc, out, err = run_script(MIXED_CHILD, tmp_path, timeout=120, env={"PYTHONPATH": str(site)})
    outcome = json.loads(out.splitlines()[-1])
    assert outcome.get("import_error", "").startswith(
        f"NVIDIA's tritonserver package and this one (tritonserver-binding) are both installed in {package}"), outcome


def test_a_clean_installation_imports_without_warnings(tmp_path):
    import json

    site = tmp_path / "site"
    package = _package_copy(site, ())
    assert (package / "_c" / "__init__.py").is_file()  # ours: no sign of NVIDIA's package
    rc, out, err = run_script(MIXED_CHILD, tmp_path, timeout=120, env={"PYTHONPATH": str(site)})
    outcome = json.loads(out.splitlines()[-1])
    assert outcome.get("imported", "").startswith(str(package)), outcome
    assert outcome["warnings"] == [], outcome
