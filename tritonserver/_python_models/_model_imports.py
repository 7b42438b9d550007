"""Per-instance module isolation for python models run in-process: each
model instance imports its model.py and the helper files next to it in a
namespace of its own, as each stub process had its own interpreter.

The python backend's stub appends the model's version folder and its model
folder to ``sys.path`` and imports model.py as ``<version>.model``: a model's
``import utils`` finds its own ``utils.py``, and a module installed in the
environment (or the standard library) wins over a helper of the same name.
In one interpreter ``sys.path`` and ``sys.modules`` are shared, so here no
folder goes on ``sys.path``. Instead each instance gets a private package,
``_triton_model_<key>`` in ``sys.modules`` with ``__path__`` = [version
folder, model folder], and model.py is imported as ``<private>.model`` (as
the stub's ``<version>.model``: ``from . import utils`` works). It and every
module loaded under the private package get a ``__builtins__`` dict of their
own whose ``__import__`` sends a level-0 import of a top-level name that the
host cannot find (not in ``sys.modules`` and ``importlib.util.find_spec`` is
None) but that the model's folders hold to ``<private>.<name>``: ``import
utils`` binds the model's utils.py, loaded as ``<private>.utils``. The
decision is cached per instance and per name, so an ``import numpy`` inside
``execute()`` stays cheap. A meta path finder (installed once, first in
``sys.meta_path``; other names cost a prefix check) gives each module found
under a private package that ``__builtins__`` before it runs, so helpers'
own absolute and relative imports resolve the same way.
``close()`` (at finalize, and after auto_complete's import) removes every
``sys.modules`` entry of the package; each load calls
``importlib.invalidate_caches()``, so an edited or new helper is seen by a
reload.

Not isolated:

- imports that do not go through a module's ``__builtins__``:
  ``importlib.import_module("utils")``, ``importlib.util.find_spec``,
  ``pkgutil``, ``runpy``, and the imports made by a C extension in the
  model's folder, see the host's modules only (a helper is reachable there by
  its private name, ``__package__ + ".utils"``);
- host modules (the standard library, installed packages,
  ``triton_python_backend_utils``) are one per process, shared by all
  models, with their module-level state; and a host module of a helper's
  name wins over the helper (the stub's append semantics), also one that
  only ``sys.modules`` holds;
- ``sys.path`` and ``sys.modules`` themselves: a model that edits them
  changes them for every model;
- a model's modules see ``builtins`` as it was when the instance loaded
  (theirs is a copy), except ``__import__``, looked up at each import;
- model.py's and helpers' ``__name__`` are their private names
  (``_triton_model_<key>.model``, ``_triton_model_<key>.utils``), which is
  what pickles, ``repr`` of their classes and some ImportError messages
  show;
- a thread of the model that outlives finalize finds its helpers gone: its
  imports of them fail.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, Callable, Optional, Sequence

_PREFIX = "_triton_model_"
_UNDECIDED = ("", "")  # the cache's answer for a name not yet decided

_packages: dict[str, "ModelImports"] = {}  # private package name -> its instance's imports, while loaded
_naming = threading.Lock()  # choosing a private package's name and registering it


class ModelImports:
    """One model instance's private package and the hooked ``__builtins__``
    its modules run with. `key` names the instance (model, version,
    instance); `folders` are where its helpers are found, first first."""

    def __init__(self, key: str, folders: Sequence[str]) -> None:
        self.folders = list(folders)
        # Level-0 import name -> (its private name, its top module's), or
        # None for the host's; and the same decision per top-level name.
        self._targets: dict[str, Optional[tuple[str, str]]] = {}
        self._tops: dict[str, Optional[str]] = {}
        self.builtins = dict(vars(builtins))
        self.builtins["__import__"] = self._make_import()
        importlib.invalidate_caches()  # an edited or new helper is seen by a reload
        base = _PREFIX + re.sub(r"\W", "_", key)
        with _naming:
            name, count = base, 1
            while name in _packages or name in sys.modules:
                count += 1
                name = f"{base}_{count}"
            self.package = name
            _packages[name] = self
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)

    def import_model(self, path: str) -> Optional[ModuleType]:
        """model.py (the file at `path`) imported as ``<private>.<its stem>``
        (the stub's ``<version>.model``), or None where Python imports no
        file named like that (its suffix). The caller closes the imports
        whether or not this raises."""
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        spec = importlib.util.spec_from_file_location(f"{self.package}.{stem}", path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        module.__builtins__ = self.builtins  # type: ignore[attr-defined]
        package_spec = ModuleSpec(self.package, None, is_package=True)
        package_spec.submodule_search_locations = list(self.folders)
        # The model module first: the first sys.modules entry named after
        # the instance is its model module, as when that was the only one.
        sys.modules[spec.name] = module
        sys.modules[self.package] = importlib.util.module_from_spec(package_spec)
        try:
            spec.loader.exec_module(module)
        except BaseException as error:
            _leave_out_own_frames(error)
            raise
        return module

    def close(self) -> None:
        """Forget the package: its ``sys.modules`` entries (the package and
        every module under it) and the import caches of its folders."""
        with _naming:
            _packages.pop(self.package, None)
        prefix = self.package + "."
        for name in [n for n in list(sys.modules) if n == self.package or n.startswith(prefix)]:
            sys.modules.pop(name, None)
        for folder in self.folders:
            under = os.path.join(folder, "")
            for entry in [e for e in list(sys.path_importer_cache) if e == folder or e.startswith(under)]:
                sys.path_importer_cache.pop(entry, None)

    def _decide(self, name: str) -> Optional[tuple[str, str]]:
        """(the private name, its top module's) a level-0 import of `name`
        gets in this instance, or None where the host's module (or the
        host's ImportError) applies; decided once per top-level name: the
        model's own where the host finds none and the folders hold one."""
        top = name.partition(".")[0]
        if top not in self._tops:
            local = (top not in sys.modules and _host_lacks(top)
                     and importlib.machinery.PathFinder.find_spec(top, self.folders) is not None)
            self._tops[top] = f"{self.package}.{top}" if local else None
        private_top = self._tops[top]
        target = None if private_top is None else (private_top + name[len(top):], private_top)
        self._targets[name] = target
        return target

    def _make_import(self) -> Callable[..., ModuleType]:
        """This instance's ``__import__``: builtins.__import__ (the host's
        current one), with a level-0 import of a name of the model's folders
        made under the private package and answered as builtins.__import__
        answers the plain name: without a fromlist the top module
        (``import a.b`` gives ``a``), with one the named module itself
        (``from a.b import c`` gives ``a.b``); a submodule it lacks is named
        as the model wrote it (No module named 'a.missing')."""
        targets = self._targets
        decide = self._decide
        modules = sys.modules

        def __import__(name: str, globals: Optional[dict[str, Any]] = None, locals: Optional[dict[str, Any]] = None,
                       fromlist: Optional[Sequence[str]] = (), level: int = 0) -> ModuleType:
            if level == 0:
                target = targets.get(name, _UNDECIDED)
                if target is _UNDECIDED:
                    target = decide(name)
                if target is not None:
                    private, private_top = target
                    try:
                        leaf = builtins.__import__(private, globals, locals, fromlist, 0)
                    except ModuleNotFoundError as error:  # worded with the name the model wrote
                        if error.name is not None and (error.name + ".").startswith(private_top + "."):
                            error.name = name.partition(".")[0] + error.name[len(private_top):]
                            error.msg = f"No module named {error.name!r}"
                            error.args = (error.msg,)
                        raise
                    return leaf if fromlist else modules[private_top]
            return builtins.__import__(name, globals, locals, fromlist, level)

        return __import__


def _leave_out_own_frames(error: BaseException) -> None:
    """Take this file's frames (the hooked imports between a model's files)
    out of `error`'s traceback, so that a load error names the model's own
    lines only, as the stub's does."""
    entry = error.__traceback__
    while entry is not None and entry.tb_frame.f_code.co_filename == __file__:
        entry = entry.tb_next
    error.__traceback__ = entry
    while entry is not None:
        after = entry.tb_next
        while after is not None and after.tb_frame.f_code.co_filename == __file__:
            after = after.tb_next
        entry.tb_next = after
        entry = after


def _host_lacks(top: str) -> bool:
    """Whether the host's own import finds no module `top`."""
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):  # a finder's failure, or no valid name: left to the host's import
        return False


class _Loader(importlib.abc.Loader):
    """A module's loader under a private package: the loader the path
    finder gave (its exec_module and other methods), with the module made
    here holding the package's hooked ``__builtins__`` before it runs. Its
    exec_module is the given loader's own, so that a helper's exception
    names no frame of this file and the import system still leaves its own
    frames out."""

    def __init__(self, inner: importlib.abc.Loader, imports: ModelImports) -> None:
        self._inner = inner
        self._builtins = imports.builtins

    def create_module(self, spec: ModuleSpec) -> Optional[ModuleType]:
        module: Optional[ModuleType] = self._inner.create_module(spec)
        if module is None:  # a module of Python code: made as the import system makes one
            module = ModuleType(spec.name)
            module.__builtins__ = self._builtins  # type: ignore[attr-defined]
        return module

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":  # not yet set (a copy being made)
            raise AttributeError(name)
        return getattr(self._inner, name)


class _PrivatePackageFinder(importlib.abc.MetaPathFinder):
    """Finds the modules under a loaded private package in its folders, as
    the path finder does, and gives them the package's ``__builtins__``."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Optional[ModuleSpec]:
        if not fullname.startswith(_PREFIX) or path is None:
            return None
        imports = _packages.get(fullname.partition(".")[0])
        if imports is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, imports)
        return spec


_FINDER = _PrivatePackageFinder()
