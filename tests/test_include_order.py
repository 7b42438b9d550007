"""docs/design.md's include orders of cpp/ hold, one per wing: the client
binding (cpp/) and the in-process python backend (cpp/python_backend/).
Every file of a wing is named in its order, and each includes (`#include
"..."`) only files of its wing named before it, or in the same step (names
joined by "and"), or its own header. The backend wing includes from the
client wing only the files its paragraph lists; the client wing includes
nothing of the backend wing but module.cc, the module root that binds both,
its bindings.h."""

from __future__ import annotations

import re
from pathlib import Path

from common import ROOT

CPP = ROOT / "cpp"
BACKEND = CPP / "python_backend"
DESIGN = ROOT / "docs" / "design.md"


def unit(name: str) -> str:
    """A file's unit: `request.cc` and `request.h` are `request`."""
    return name.split(".")[0]


def paragraph(opening: str) -> str:
    """The list after the line that starts with `opening`, up to a blank line."""
    match = re.search(re.escape(opening) + r".*?:\n(.*?)\n\n", DESIGN.read_text(), re.S)
    assert match, f"docs/design.md has no paragraph starting {opening!r}"
    return match.group(1)


def documented_steps(opening: str) -> dict[str, int]:
    """Unit -> its step in the documented order (steps are separated by `,`
    and `;`; names joined by "and" share one)."""
    steps: dict[str, int] = {}
    for number, step in enumerate(re.split(r"[;,]", paragraph(opening))):
        for name in re.findall(r"`([^`]+)`", step):
            assert unit(name) not in steps, f"{name} is named twice"
            steps[unit(name)] = number
    return steps


CLIENT_ORDER = "Includes only go down, in this order"
BACKEND_ORDER = "The backend wing's includes go down in this order"
BACKEND_USES = "From the client wing, the backend wing includes only"


def sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".h", ".cc"))


def includes(path: Path) -> list[Path]:
    return [(path.parent / name).resolve()
            for name in re.findall(r'^#include "([^"]+)"', path.read_text(), re.M)]


def test_every_cpp_file_is_in_its_wings_order():
    for folder, opening in ((CPP, CLIENT_ORDER), (BACKEND, BACKEND_ORDER)):
        steps = documented_steps(opening)
        assert [p.name for p in sources(folder) if unit(p.name) not in steps] == []
        assert [name for name in steps if not list(folder.glob(name + ".*"))] == []
    assert sorted(p.name for p in CPP.iterdir() if p.is_dir()) == ["python_backend"]


def test_includes_only_go_down_within_each_wing():
    upward = []
    for folder, opening in ((CPP, CLIENT_ORDER), (BACKEND, BACKEND_ORDER)):
        steps = documented_steps(opening)
        for path in sources(folder):
            for included in includes(path):
                if included.parent == folder.resolve() and steps[unit(included.name)] > steps[unit(path.name)]:
                    upward.append(f"{path.name} includes {included.name}")
    assert upward == []


def test_the_wings_meet_only_through_the_listed_doors():
    # The client wing includes nothing of the backend's but module.cc its
    # bindings; the backend wing only the client files its paragraph lists,
    # each of which it really uses.
    into_backend = [f"{p.name} includes {i.name}" for p in sources(CPP) for i in includes(p)
                    if i.parent == BACKEND.resolve()]
    assert into_backend == ["module.cc includes bindings.h"]
    listed = {unit(name) for name in re.findall(r"`([^`]+)`", paragraph(BACKEND_USES))}
    used = {unit(i.name) for p in sources(BACKEND) for i in includes(p) if i.parent == CPP.resolve()}
    assert used == listed
