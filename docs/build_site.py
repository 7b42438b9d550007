"""Builds the documentation site (MkDocs, ``--strict``: every warning is an
error) from the README, the pages in docs/, the changelog and the API
reference generated from the installed package's docstrings
(docs/build_api.py). Needs only what pip installed: no network.

    python docs/build_site.py        # from the repository root: build/site/
"""

from __future__ import annotations

import pathlib
import runpy
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
STAGING = ROOT / "build" / "site-src"

# (page in the site, source in the repository)
PAGES = [
    ("index.md", "README.md"),
    ("user_guide.md", "docs/user_guide.md"),
    ("design.md", "docs/design.md"),
    ("ray.md", "docs/ray.md"),
    ("development.md", "docs/development.md"),
    ("hostile_inputs.md", "docs/hostile_inputs.md"),
    ("benchmarks.md", "docs/benchmarks.md"),
    ("sanitizers.md", "docs/sanitizers.md"),
    ("changelog.md", "CHANGELOG.md"),
]


def stage() -> None:
    """Copy the pages and write the API reference into build/site-src."""
    shutil.rmtree(STAGING, ignore_errors=True)
    STAGING.mkdir(parents=True)
    for page, source in PAGES:
        shutil.copy(ROOT / source, STAGING / page)
    text, missing = runpy.run_path(str(ROOT / "docs" / "build_api.py"))["build"]()
    if missing:
        raise SystemExit("public names without a docstring:\n  " + "\n  ".join(missing))
    (STAGING / "api.md").write_text(text)


def main() -> int:
    stage()
    return subprocess.call([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
                            "-f", str(ROOT / "mkdocs.yml")])


if __name__ == "__main__":
    sys.exit(main())
