"""Builds the API reference (Markdown) from the installed package's
docstrings and signatures. It fails (warnings are errors) on a public name,
method or property without a docstring, on a dataclass field left out of its
class's "Attributes:" section, and on a ``**kwargs`` keyword left out of its
function's "Keyword arguments:" section, once the section exists. Covers
``tritonserver`` and ``tritonserver.ray``; where Ray or Starlette is not
installed, tritonserver.ray is imported with stand-ins for the modules of
theirs it imports (as Sphinx's ``autodoc_mock_imports`` does), so the
reference builds without them.

Each name has a short heading (the name alone) and its signature below it in
a code block, defaults as one writes them (a ``default_factory`` as the value
it makes, an enum member as ``Enum.MEMBER``). In docstrings, "Example:"
becomes a code block, and "Attributes:" (a dataclass's fields) and "Keyword
arguments:" (a function's ``**kwargs``) become definition lists: each entry's
name with its type (and default), then its description.

    python docs/build_api.py [build/docs/api.md]
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import html
import importlib
import importlib.util
import inspect
import pathlib
import re
import sys
import textwrap
import types
import typing
from typing import Any, Iterator, Optional

import tritonserver

# A signature longer than this is written one parameter a line.
WIDTH = 88

SECTION = re.compile(r"^(Example|Examples|Attributes|Keyword arguments):\s*$")
ENTRY = re.compile(r"^(\w+):\s*(.*)$")
CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`([^`]+)`")
UNPACK = re.compile(r"^Unpack\[(\w+)\]$")

# Dunder methods documented (the protocols the API classes implement).
DUNDERS = ("__dlpack__", "__dlpack_device__", "__iter__", "__next__", "__aiter__", "__anext__",
           "__enter__", "__exit__")


class Code(str):
    """Text shown as it is in a signature (its repr has no quotes)."""

    def __repr__(self) -> str:
        return str(self)


# -- signatures ----------------------------------------------------------------

def shown_default(value: object) -> str:
    """A default as one writes it in code: an enum member as Enum.MEMBER (a
    combination of flags as A | B), anything else as its repr."""
    if isinstance(value, enum.Enum):
        cls = type(value).__name__
        if value.name:
            return " | ".join(f"{cls}.{name}" for name in value.name.split("|"))
        return f"{cls}({value.value!r})"
    return repr(value)


def annotation_text(annotation: object) -> str:
    """An annotation as written (postponed ones, PEP 563, are strings), less
    the quotes of forward references inside it (Literal values keep theirs)."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return text if "Literal[" in text else re.sub(r"'([\w.\[\], ]+)'", r"\1", text)


def dataclass_defaults(cls: type) -> dict[str, object]:
    """Each field's default; for a default_factory, the value it makes."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        elif f.default is not dataclasses.MISSING:
            out[f.name] = f.default
    return out


def signature(obj: object, drop_first: bool = False) -> Optional[inspect.Signature]:
    """`obj`'s signature with annotations and defaults as written in code
    (None when it has none); `drop_first` drops ``self``."""
    try:
        sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    is_class = isinstance(obj, type)
    defaults = dataclass_defaults(obj) if isinstance(obj, type) and dataclasses.is_dataclass(obj) else {}
    params = []
    for p in list(sig.parameters.values())[1 if drop_first else 0:]:
        changes: dict[str, Any] = {}
        if p.annotation is not p.empty:
            changes["annotation"] = Code(annotation_text(p.annotation))
        if p.default is not p.empty:
            changes["default"] = Code(shown_default(defaults.get(p.name, p.default)))
        params.append(p.replace(**changes))
    returns = sig.return_annotation
    shown_return = Code(annotation_text(returns)) if returns is not sig.empty and not is_class else sig.empty
    return sig.replace(parameters=params, return_annotation=shown_return)


def format_signature(name: str, sig: inspect.Signature) -> str:
    """``name(params) -> returns``, one parameter a line when long, with the
    ``/`` and ``*`` markers as Python writes them."""
    parts: list[str] = []
    positional_only = False
    keyword_marker = True
    for p in sig.parameters.values():
        if p.kind == p.POSITIONAL_ONLY:
            positional_only = True
        elif positional_only:
            parts.append("/")
            positional_only = False
        if p.kind == p.VAR_POSITIONAL:
            keyword_marker = False
        elif p.kind == p.KEYWORD_ONLY and keyword_marker:
            parts.append("*")
            keyword_marker = False
        parts.append(str(p))
    if positional_only:
        parts.append("/")
    returns = "" if sig.return_annotation is sig.empty else f" -> {sig.return_annotation}"
    one_line = f"{name}({', '.join(parts)}){returns}"
    if len(one_line) <= WIDTH or not parts:
        return one_line
    return f"{name}(\n" + "".join(f"    {part},\n" for part in parts) + f"){returns}"


def code_block(text: str, language: str = "python") -> list[str]:
    return [f"```{language}", text, "```", ""]


# -- docstrings ----------------------------------------------------------------

def inline(text: str) -> str:
    """Docstring text as Markdown: code spans kept (Markdown escapes them),
    everything else HTML-escaped, with Markdown's own characters escaped."""
    text = ROLE.sub(r"`\1`", text)
    pieces = CODE_SPAN.split(text)
    for k in range(0, len(pieces), 2):
        piece = html.escape(pieces[k], quote=False)
        for char in "\\*_|[]":
            piece = piece.replace(char, "\\" + char)
        pieces[k] = piece
    return "".join(pieces)


@dataclasses.dataclass
class Doc:
    """A docstring cut into Markdown blocks, with its sections of entries."""

    blocks: list[Any]  # str (Markdown) or ("entries", section title)
    entries: dict[str, dict[str, str]]  # section title -> name -> description


def parse_doc(doc: str) -> Doc:
    lines = doc.splitlines()
    blocks: list[Any] = []
    entries: dict[str, dict[str, str]] = {}
    text: list[str] = []

    def flush() -> None:
        blocks.extend(paragraphs(text))
        text.clear()

    def indented_body(start: int) -> tuple[list[str], int]:
        end = start
        while end < len(lines) and (not lines[end].strip() or lines[end][:1].isspace()):
            end += 1
        body = textwrap.dedent("\n".join(lines[start:end])).strip("\n").splitlines()
        return body, end

    i = 0
    while i < len(lines):
        line = lines[i]
        section = SECTION.match(line)
        if section:
            flush()
            body, i = indented_body(i + 1)
            title = section.group(1)
            if title.startswith("Example"):
                blocks.append(f"**{title}**")
                blocks.append("\n".join(code_block("\n".join(body))).rstrip())
            else:
                entries[title] = parse_entries(body)
                blocks.append(("entries", title))
        elif line.rstrip().endswith("::") and i + 1 < len(lines):
            lead = line.rstrip()[:-2]
            if SECTION.match(lead + ":"):  # "Example::" reads as the "Example:" section
                flush()
                blocks.append(f"**{lead}**")
            else:  # the paragraph ends with one colon
                text.append(lead + ":")
                flush()
            body, i = indented_body(i + 1)
            blocks.append("\n".join(code_block("\n".join(body))).rstrip())
        elif line.startswith(">>>"):
            flush()
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            blocks.append("\n".join(code_block("\n".join(lines[i:end]))).rstrip())
            i = end
        else:
            text.append(line)
            i += 1
    flush()
    return Doc(blocks, entries)


def paragraphs(lines: list[str]) -> list[str]:
    """Text lines as Markdown paragraphs and lists (``- `` items), each
    joined into one line so that a code span may cross a line break."""
    out: list[str] = []
    for para in "\n".join(lines).split("\n\n"):
        rows = [row.strip() for row in para.strip().splitlines()]
        if not rows:
            continue
        if rows[0].startswith("- "):
            items: list[str] = []
            for row in rows:
                if row.startswith("- ") or not items:
                    items.append(row[2:] if row.startswith("- ") else row)
                else:
                    items[-1] += " " + row
            out.append("\n".join(f"- {inline(item)}" for item in items))
        else:
            out.append(inline(" ".join(rows)))
    return out


def parse_entries(body: list[str]) -> dict[str, str]:
    """``name: description`` entries, a description going on over the
    indented lines below it."""
    out: dict[str, str] = {}
    name = None
    for line in body:
        match = ENTRY.match(line)
        if match and not line[:1].isspace():
            name = match.group(1)
            out[name] = match.group(2).strip()
        elif name is not None and line.strip():
            out[name] = (out[name] + " " + line.strip()).strip()
    return out


def entries_list(described: dict[str, str], types_: dict[str, str],
                 defaults: Optional[dict[str, object]]) -> list[str]:
    """A section's entries as a definition list: each name as code, with its
    type and (for a field) its default, as one writes it; its description
    below."""
    out: list[str] = []
    for name, text in described.items():
        term = name
        if name in types_:
            term += f": {types_[name]}"
        if defaults is not None and name in defaults:
            term += f" = {shown_default(defaults[name])}"
        out += [f"`{term}`", f":   {inline(text)}", ""]
    return out


def render_doc(qualified: str, doc: Doc, types_: dict[str, dict[str, str]],
               defaults: Optional[dict[str, object]], missing: list[str]) -> list[str]:
    """The docstring's blocks as Markdown lines. `types_` maps a section to
    the names it must describe, with their types: a name left out, or one
    that is not there, is reported in `missing`."""
    out: list[str] = []
    for block in doc.blocks:
        if isinstance(block, tuple):
            title = block[1]
            described = doc.entries[title]
            expected = types_.get(title)
            if expected is not None:
                missing += [f"{qualified}: {name} (not in its {title} section)"
                            for name in expected if name not in described]
                missing += [f"{qualified}: {title} section describes {name}, which it does not have"
                            for name in described if name not in expected]
            out += entries_list(described, expected or {}, defaults if title == "Attributes" else None)
        else:
            out += [block, ""]
    return out


# -- what is documented --------------------------------------------------------

def public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None) or dir(module)
    return sorted(n for n in names if not n.startswith("_") and not inspect.ismodule(getattr(module, n)))


class _StandInDeployment:
    """What ``serve.deployment(cls, ...)`` returns without Ray: the class it
    wraps, as a Deployment's ``func_or_class``."""

    def __init__(self, func_or_class: object, **options: object) -> None:
        self.func_or_class = func_or_class


def _stand_in_modules() -> dict[str, types.ModuleType]:
    """Modules for what tritonserver.ray imports from Ray and Starlette,
    for those of the two that are not installed."""
    made: dict[str, types.ModuleType] = {}
    if importlib.util.find_spec("ray") is None:
        ray, serve, deployment = (types.ModuleType(n) for n in ("ray", "ray.serve", "ray.serve.deployment"))
        serve.deployment = _StandInDeployment  # type: ignore[attr-defined]
        ray.serve = serve  # type: ignore[attr-defined]
        deployment.Deployment = _StandInDeployment  # type: ignore[attr-defined]
        made.update({"ray": ray, "ray.serve": serve, "ray.serve.deployment": deployment})
    if importlib.util.find_spec("starlette") is None:
        starlette, requests, responses = (types.ModuleType(n) for n in
                                          ("starlette", "starlette.requests", "starlette.responses"))
        requests.Request = type("Request", (), {})  # type: ignore[attr-defined]
        responses.Response = type("Response", (), {})  # type: ignore[attr-defined]
        made.update({"starlette": starlette, "starlette.requests": requests, "starlette.responses": responses})
    return made


@contextlib.contextmanager
def documented_modules() -> Iterator[list[types.ModuleType]]:
    """tritonserver and tritonserver.ray; a tritonserver.ray imported here
    with stand-ins is removed again on leaving, stand-ins and all, so that
    the process imports the real one (or fails to) later."""
    before = set(sys.modules)
    had_ray = hasattr(tritonserver, "ray")
    stand_ins = _stand_in_modules()
    sys.modules.update(stand_ins)
    try:
        yield [tritonserver, importlib.import_module("tritonserver.ray")]
    finally:
        if stand_ins:
            for name in set(sys.modules) - before:
                del sys.modules[name]
            if not had_ray and hasattr(tritonserver, "ray"):
                delattr(tritonserver, "ray")


def members(cls: type) -> list[tuple[str, object]]:
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in DUNDERS:
            continue
        if callable(value) or isinstance(value, (property, staticmethod, classmethod)):
            out.append((name, value))
    return out


def keyword_types(function: object) -> Optional[dict[str, str]]:
    """The keywords of ``**kwargs: Unpack[SomeTypedDict]`` with their types;
    None for a function without such keywords."""
    try:
        params = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    for p in params:
        if p.kind == p.VAR_KEYWORD and p.annotation is not p.empty:
            match = UNPACK.match(annotation_text(p.annotation))
            typed = getattr(function, "__globals__", {}).get(match.group(1)) if match else None
            if typed is not None:
                return {k: annotation_text(v) for k, v in typed.__annotations__.items()}
    return None


# -- the reference -------------------------------------------------------------

def build() -> tuple[str, list[str]]:
    lines = ["# API reference", "",
             f"tritonserver {tritonserver.__version__}. Every name below is imported from "
             "`tritonserver`, or from `tritonserver.ray` in its own part.", ""]
    missing: list[str] = []
    with documented_modules() as modules:
        for module in modules:
            if module is not tritonserver:
                lines += [f"# {module.__name__}", ""]
                lines += render_doc(module.__name__, parse_doc(inspect.getdoc(module) or ""), {}, None, missing)
            build_module(module, lines, missing)
    return "\n".join(lines), missing


def build_module(module: types.ModuleType, lines: list[str], missing: list[str]) -> None:
    for name in public_names(module):
        obj = getattr(module, name)
        qualified = f"{module.__name__}.{name}"
        lines += [f"## {inline(name)}", ""]
        wrapped = getattr(obj, "func_or_class", None)
        if wrapped is not None and not isinstance(obj, type):
            # A Ray Serve Deployment (Ray's own docstring says nothing of ours).
            lines += [f"A Ray Serve deployment of `{wrapped.__name__}`: `{name}.options(...)` takes Serve's "
                      f"deployment options, `{name}.bind(...)` the arguments of `{wrapped.__name__}`.", ""]
            continue
        doc = inspect.getdoc(obj)
        if not doc:
            missing.append(qualified)
        if isinstance(obj, type) and issubclass(obj, enum.Enum):
            lines += render_doc(qualified, parse_doc(doc or ""), {}, None, missing)
            lines += [", ".join(f"`{m.name} = {m.value}`" for m in obj), ""]
            continue
        if isinstance(obj, type) and issubclass(obj, BaseException):
            lines += render_doc(qualified, parse_doc(doc or ""), {}, None, missing)
            lines += [f"Subclass of `{obj.__bases__[0].__name__}`.", ""]
            continue
        sig = signature(obj)
        if sig is not None:
            lines += code_block(format_signature(name, sig))
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            fields = {f.name: annotation_text(f.type) for f in dataclasses.fields(obj)}
            lines += render_doc(qualified, parse_doc(doc or ""), {"Attributes": fields},
                                dataclass_defaults(obj), missing)
        else:
            lines += render_doc(qualified, parse_doc(doc or ""), keyword_section(obj), None, missing)
        if isinstance(obj, type):
            build_members(qualified, name, obj, lines, missing)


def keyword_section(function: object) -> dict[str, dict[str, str]]:
    keywords = keyword_types(function)
    return {} if keywords is None else {"Keyword arguments": keywords}


def build_members(qualified: str, class_name: str, cls: type, lines: list[str], missing: list[str]) -> None:
    for member_name, member in members(cls):
        target = member.fget if isinstance(member, property) else member
        target = getattr(target, "__func__", target)
        member_doc = inspect.getdoc(target)
        if not member_doc and not getattr(target, "__qualname__", "").startswith(("dict.", "object.")):
            missing.append(f"{qualified}.{member_name}")
        heading = inline(f"{class_name}.{member_name}")  # escaped: __dlpack__ is no bold "dlpack"
        lines += [f"### {heading}", ""]
        if isinstance(member, property):
            returns = inspect.signature(target).return_annotation  # type: ignore[arg-type]
            if returns is not inspect.Signature.empty:
                lines += code_block(f"{member_name}: {annotation_text(returns)}")
        else:
            # Drop self (a plain function's first parameter) and cls (a
            # classmethod's); a staticmethod has neither.
            sig = signature(target, drop_first=inspect.isfunction(member) or isinstance(member, classmethod))
            if sig is not None:
                lines += code_block(format_signature(member_name, sig))
        lines += render_doc(f"{qualified}.{member_name}", parse_doc(member_doc or ""),
                            keyword_section(target), None, missing)


def main() -> int:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build/docs/api.md")
    text, missing = build()
    if missing:
        print("missing docstrings (treated as errors):\n  " + "\n  ".join(missing), file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out} ({text.count(chr(10) + '## ')} public names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
