"""docs/design.md's include order of cpp/ holds: every file there is named in
it, and each includes (`#include "..."`) only files named before it, or
in the same step (names joined by "and"), or its own header."""

from __future__ import annotations

import re

from common import ROOT

CPP = ROOT / "cpp"
DESIGN = ROOT / "docs" / "design.md"


def unit(name: str) -> str:
    """A file's unit: `request.cc` and `request.h` are `request`."""
    return name.split(".")[0]


def documented_steps() -> dict[str, int]:
    """Unit -> its step in the documented order (steps are separated by `,`
    and `;`; names joined by "and" share one)."""
    match = re.search(r"Includes only go down, in this order \(.*?\):\n(.*?)\n\n", DESIGN.read_text(), re.S)
    assert match, "docs/design.md has no include-order paragraph"
    steps: dict[str, int] = {}
    for number, step in enumerate(re.split(r"[;,]", match.group(1))):
        for name in re.findall(r"`([^`]+)`", step):
            assert unit(name) not in steps, f"{name} is named twice"
            steps[unit(name)] = number
    return steps


def sources() -> list:
    return sorted(p for p in CPP.iterdir() if p.suffix in (".h", ".cc"))


def test_every_cpp_file_is_in_the_order():
    steps = documented_steps()
    assert [p.name for p in sources() if unit(p.name) not in steps] == []
    assert [name for name in steps if not list(CPP.glob(name + ".*"))] == []


def test_includes_only_go_down():
    steps = documented_steps()
    upward = [
        f"{path.name} includes {included}"
        for path in sources()
        for included in re.findall(r'^#include "([^"]+)"', path.read_text(), re.M)
        if steps[unit(included)] > steps[unit(path.name)]
    ]
    assert upward == []
