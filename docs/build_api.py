"""Builds the API reference (Markdown) from the installed package's
docstrings and signatures, failing on any public name, method or property
without a docstring (warnings are errors). Covers ``tritonserver`` and, when
ray is installed, ``tritonserver.ray``.

    python docs/build_api.py [build/docs/api.md]
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pathlib
import sys
import types

import tritonserver


def public_names(module: types.ModuleType) -> list[str]:
    # tritonserver's __all__ is empty, as in the official package.
    names = getattr(module, "__all__", None) or dir(module)
    return sorted(n for n in names if not n.startswith("_") and not inspect.ismodule(getattr(module, n)))


def documented_modules() -> list[types.ModuleType]:
    modules = [tritonserver]
    try:
        modules.append(importlib.import_module("tritonserver.ray"))
    except ImportError:  # the [ray] extra is not installed
        pass
    return modules


def members(cls: type) -> list[tuple[str, object]]:
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in ("__dlpack__", "__dlpack_device__", "__iter__", "__next__",
                                                  "__aiter__", "__anext__", "__enter__", "__exit__"):
            continue
        if callable(value) or isinstance(value, (property, staticmethod, classmethod)):
            out.append((name, value))
    return out


def signature(obj: object) -> str:
    if not (inspect.isroutine(obj) or isinstance(obj, type)):
        return ""  # e.g. tritonserver.ray.TritonDeployment, a Serve Deployment object
    try:
        text = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"
    # Postponed annotations print as quoted strings: show them as written.
    return text.replace("\"'", "").replace("'\"", "").replace("'", "")


def build() -> tuple[str, list[str]]:
    lines = ["# API reference", "", f"tritonserver {tritonserver.__version__}", ""]
    missing: list[str] = []
    for module in documented_modules():
        if module is not tritonserver:
            lines += [f"# {module.__name__}", "", inspect.getdoc(module) or "", ""]
        build_module(module, lines, missing)
    return "\n".join(lines), missing


def build_module(module: types.ModuleType, lines: list[str], missing: list[str]) -> None:
    for name in public_names(module):
        obj = getattr(module, name)
        doc = inspect.getdoc(obj)
        if not doc:
            missing.append(f"{module.__name__}.{name}")
        if isinstance(obj, type) and issubclass(obj, enum.Enum):
            values = ", ".join(f"`{m.name}={m.value}`" for m in obj)
            lines += [f"## {name}", "", doc or "", "", values, ""]
            continue
        lines += [f"## {name}{signature(obj) if not isinstance(obj, type) or not issubclass(obj, Exception) else ''}",
                  "", doc or "", ""]
        if isinstance(obj, type) and not issubclass(obj, Exception):
            for member_name, member in members(obj):
                target = member.fget if isinstance(member, property) else member
                target = getattr(target, "__func__", target)
                member_doc = inspect.getdoc(target)
                if not member_doc and not getattr(target, "__qualname__", "").startswith(("dict.", "object.")):
                    missing.append(f"{module.__name__}.{name}.{member_name}")
                shown = "" if isinstance(member, property) else signature(target)
                lines += [f"### {name}.{member_name}{shown}", "", member_doc or "", ""]


def main() -> int:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build/docs/api.md")
    text, missing = build()
    if missing:
        print("missing docstrings (treated as errors):\n  " + "\n  ".join(missing), file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    count = sum(len(public_names(m)) for m in documented_modules())
    print(f"wrote {out} ({count} public names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
