"""Builds the documentation site (MkDocs, ``--strict``: every warning is an
error) from the README, the pages and style sheet in docs/, the changelog and
the API reference generated from the installed package's docstrings
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

# Pages from outside docs/ (page in the site, source); every docs/*.md is a
# page under its own name.
EXTRA_PAGES = [("index.md", "README.md"), ("changelog.md", "CHANGELOG.md")]


def stage() -> None:
    """Copy the pages and write the API reference into build/site-src; every
    page must be in mkdocs.yml's nav (a new one is named, not left out)."""
    shutil.rmtree(STAGING, ignore_errors=True)
    STAGING.mkdir(parents=True)
    for page, source in EXTRA_PAGES:
        shutil.copy(ROOT / source, STAGING / page)
    for path in sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs").glob("*.css")):
        shutil.copy(path, STAGING / path.name)
    text, missing = runpy.run_path(str(ROOT / "docs" / "build_api.py"))["build"]()
    if missing:
        raise SystemExit("public names without a docstring:\n  " + "\n  ".join(missing))
    (STAGING / "api.md").write_text(text)
    config = (ROOT / "mkdocs.yml").read_text()
    unlisted = [p.name for p in sorted(STAGING.glob("*.md")) if f": {p.name}\n" not in config]
    if unlisted:
        raise SystemExit(f"pages missing from the nav in mkdocs.yml: {', '.join(unlisted)}")


def main() -> int:
    stage()
    return subprocess.call([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
                            "-f", str(ROOT / "mkdocs.yml")])


if __name__ == "__main__":
    sys.exit(main())
