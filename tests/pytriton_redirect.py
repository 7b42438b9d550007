"""An import hook that makes PyTriton's own test files import this package:
`install()` maps each ``pytriton`` module they use onto its
``tritonserver.pytriton`` counterpart (tests/run_pytriton_unit_tests.sh).
PyTriton's internals that have no counterpart here (its proxy, server and
config generator modules) are not mapped: a test that imports them fails to
import, and is reported as not applicable."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types

MODULES = {
    "pytriton": "tritonserver.pytriton",
    "pytriton.decorators": "tritonserver.pytriton.decorators",
    "pytriton.constants": "tritonserver.pytriton.decorators",  # TRITON_CONTEXT_FIELD_NAME
    "pytriton.exceptions": "tritonserver.pytriton.exceptions",
    "pytriton.model_config": "tritonserver.pytriton.model_config",
    "pytriton.model_config.common": "tritonserver.pytriton.model_config.common",
    "pytriton.model_config.tensor": "tritonserver.pytriton.model_config.tensor",
    "pytriton.model_config.model_config": "tritonserver.pytriton.model_config.model_config",
    "pytriton.model_config.triton_model_config": "tritonserver.pytriton.model_config.triton_model_config",
    "pytriton.proxy": "tritonserver.pytriton.proxy",
    "pytriton.proxy.types": "tritonserver.pytriton.proxy.types",
    "pytriton.triton": "tritonserver.pytriton.triton",
    "pytriton.client": "tritonserver.pytriton.client",
    "pytriton.client.exceptions": "tritonserver.pytriton.client.exceptions",
}
# Packages that exist only to hold a mapped module or name.
SHELLS = ("pytriton.models", "pytriton.models.model")


class _Redirect(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name in MODULES or name in SHELLS:
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        if spec.name in MODULES:
            return importlib.import_module(MODULES[spec.name])
        module = types.ModuleType(spec.name)
        module.__path__ = []  # type: ignore[attr-defined]
        if spec.name == "pytriton.models.model":
            from tritonserver.pytriton.decorators import inject_triton_context

            module._inject_triton_context = inject_triton_context  # type: ignore[attr-defined]
        return module

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        pass


def install() -> None:
    """Redirect ``pytriton`` imports (also when nvidia-pytriton is installed)."""
    for name in [n for n in sys.modules if n == "pytriton" or n.startswith("pytriton.")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _Redirect())
