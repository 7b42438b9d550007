"""`import tritonserver` and `python -m tritonserver` in the repository root,
where the source folder tritonserver/ comes first on sys.path: they work
(the development venv holds an editable install, `make develop`), or they fail
with an ImportError that says what to do, never with a circular-import
traceback."""

from __future__ import annotations

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
