"""Renders the documentation site in a real headless browser and checks what
a reader sees (`make docs-check`; needs Chromium: `apt-get install chromium`).

It builds the site (docs/build_site.py), opens its pages in Chromium driven
over the DevTools protocol (``--remote-debugging-pipe``: no web server, no
Python package beyond the standard library), and asserts, on the rendered
pages:

- no heading is longer than 80 characters;
- the API reference shows every ``Options`` field, with a description and its default as written in code: a ``default_factory`` as
  the value it makes (``[]``, ``{}``), an enum as ``Enum.MEMBER``; the same
  for ``RateLimiterResource`` and ``ModelLoadDeviceLimit``;
- ``Model.infer`` shows every keyword argument with a description;
- no ``<factory>`` and no ``<Enum.MEMBER: n>`` text anywhere, and no escaped
  HTML shown as text (``&lt;``);
- the top navigation has only users' pages; developers' pages are under
  "Developers";
- the page does not overflow the window sideways.

It writes screenshots to build/docs-check/ (the reference's top, the Options
fields, Model.infer, the Developers menu open): look at them.

    python docs/check_site.py [--no-build]   # from tests/, the package installed

(``--no-build`` checks build/site as it is.)
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import fcntl
import json
import os
import pathlib
import re
import runpy
import shutil
import subprocess
import sys
from typing import Any, Optional

import tritonserver

ROOT = pathlib.Path(__file__).resolve().parent.parent
SITE = ROOT / "build" / "site"
OUT = ROOT / "build" / "docs-check"
WIDTH, HEIGHT = 1280, 1000
MAX_HEADING = 80
DEVELOPER_PAGES = ("Development", "Design notes", "GPU check", "Hostile inputs", "Sanitizers", "Benchmarks")


class Browser:
    """Chromium, headless, driven over the DevTools protocol on a pipe
    (fd 3: commands to it, fd 4: its answers and events; JSON messages ended
    by a NUL byte), with one page attached."""

    def __init__(self, executable: str) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        def child_fds() -> None:
            # The browser's ends become its fds 3 and 4 (moved above 10
            # first, so that neither overwrites the other; dup2 makes them
            # inheritable). Every other descriptor of ours is close-on-exec
            # (PEP 446), hence close_fds=False, which closes after this runs.
            reads = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
            writes = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(reads, 3)
            os.dup2(writes, 4)
        self._process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", "--no-first-run", "--user-data-dir=" + str(OUT / "profile"),
             "about:blank"],
            preexec_fn=child_fds, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        pages = [t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        self._session = self.call("Target.attachToTarget", targetId=pages[0]["targetId"], flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=WIDTH, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)

    def _receive(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        result: dict[str, Any] = json.loads(message)
        return result

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._receive()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self._events.append(answer)

    def open(self, url: str) -> None:
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            self._events.append(self._receive())

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise RuntimeError(f"in the page: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, path: pathlib.Path, clip: Optional[dict[str, float]] = None) -> None:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": clip is not None}
        if clip is not None:
            params["clip"] = {**clip, "scale": 1}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", session=True, **params)["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


# In the page: the entries of the first definition list after each heading
# (term and description, as shown: empty when not visible), and what the
# reader sees of the page.
PAGE_FACTS = """(() => {
  const shown = (e) => (e && e.offsetHeight > 0 && e.offsetWidth > 0) ? e.innerText.trim() : '';
  const entries = {};
  for (const h of document.querySelectorAll('h2, h3')) {
    for (let e = h.nextElementSibling; e && !/^H[1-3]$/.test(e.tagName); e = e.nextElementSibling) {
      if (e.tagName === 'DL') {
        entries[h.textContent.trim()] = [...e.querySelectorAll('dt')].map(
          (dt) => [shown(dt), shown(dt.nextElementSibling)]);
        break;
      }
    }
  }
  const topNav = [...document.querySelectorAll('.navbar-nav > li')].map((li) => ({
    text: li.querySelector(':scope > a').innerText.trim(),
    children: [...li.querySelectorAll('.dropdown-menu a')].map((a) => a.innerText.trim()),
  }));
  return {
    headings: [...document.querySelectorAll('h1, h2, h3, h4')].map((h) => h.textContent.trim()),
    entries: entries,
    text: document.body.innerText,
    topNav: topNav,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
  };
})()"""

# In the page: the box from a heading to the end of the element before the
# next heading of its level or above, in page coordinates.
SECTION_BOX = """((id) => {
  const h = document.getElementById(id);
  const level = Number(h.tagName[1]);
  let last = h;
  for (let e = h.nextElementSibling; e && !(/^H[1-6]$/.test(e.tagName) && Number(e.tagName[1]) <= level);
       e = e.nextElementSibling) last = e;
  const top = h.getBoundingClientRect().top + window.scrollY - 8;
  const bottom = last.getBoundingClientRect().bottom + window.scrollY + 8;
  return {x: 0, y: top, width: window.innerWidth, height: Math.min(bottom - top, 6000)};
})"""


def shown_default(value: object) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


def expected_fields(cls: type) -> dict[str, str]:
    """Field name -> its default as the reference must show it."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            out[f.name] = shown_default(f.default_factory())
        elif f.default is not dataclasses.MISSING:
            out[f.name] = shown_default(f.default)
        else:
            out[f.name] = "(required)"
    return out


def check_entries(problems: list[str], where: str, entries: Optional[list[list[str]]],
                  names: dict[str, Optional[str]]) -> None:
    """Every name shown as a term (``name: type = default``) with a
    description, and, where given, that default."""
    if entries is None:
        problems.append(f"{where}: no list of entries")
        return
    by_name = {term.split(":")[0].split(" = ")[0].strip(): (term, text) for term, text in entries}
    for name, default in names.items():
        if name not in by_name:
            problems.append(f"{where}: {name} is not shown")
            continue
        term, text = by_name[name]
        if len(text) < 10:
            problems.append(f"{where}: {name} has no description ({text!r})")
        shown = term.split(" = ", 1)[1] if " = " in term else "(required)"
        if default is not None and shown != default:
            problems.append(f"{where}: {name}'s default shows {shown!r}, not {default!r}")


def check_api(browser: Browser, problems: list[str]) -> None:
    browser.open((SITE / "api.html").as_uri())
    facts = browser.evaluate(PAGE_FACTS)
    long = [h for h in facts["headings"] if len(h) > MAX_HEADING]
    problems += [f"api.html: a heading of {len(h)} characters: {h[:60]}..." for h in long]
    # Names as written (Markdown must not read __dlpack__ as a bold "dlpack").
    problems += [f"api.html: no heading {name!r}" for name in ("Options", "Model.infer", "Tensor.__dlpack__")
                 if name not in facts["headings"]]
    for cls in (tritonserver.Options, tritonserver.RateLimiterResource, tritonserver.ModelLoadDeviceLimit):
        expected: dict[str, Optional[str]] = dict(expected_fields(cls))
        check_entries(problems, f"api.html, {cls.__name__}", facts["entries"].get(cls.__name__), expected)
    keywords = tritonserver._api._request.InferenceRequestKwargs.__annotations__
    check_entries(problems, "api.html, Model.infer", facts["entries"].get("Model.infer"),
                  {k: None for k in keywords})
    text = facts["text"]
    for bad in ("<factory>", "&lt;", "&gt;", "&amp;"):
        if bad in text:
            at = text.index(bad)
            problems.append(f"api.html shows {bad!r}: ...{text[max(0, at - 60):at + 40]!r}")
    for shown in re.findall(r"<\w+\.\w+: [^>]*>", text):
        problems.append(f"api.html shows an enum's repr: {shown}")
    if facts["overflow"] > 0:
        problems.append(f"api.html is {facts['overflow']} px wider than the window")

    OUT.mkdir(parents=True, exist_ok=True)
    browser.screenshot(OUT / "api-top.png")
    for anchor, name in (("options", "api-options.png"), ("modelinfer", "api-model-infer.png")):
        box = browser.evaluate(f"{SECTION_BOX}({json.dumps(anchor)})")
        browser.screenshot(OUT / name, clip=box)


def check_navigation(browser: Browser, problems: list[str]) -> None:
    browser.open((SITE / "index.html").as_uri())
    facts = browser.evaluate(PAGE_FACTS)
    top = [item["text"] for item in facts["topNav"] if not item["children"]]
    problems += [f"index.html: the developers' page {page!r} is in the top navigation"
                 for page in DEVELOPER_PAGES if page in top]
    developers = next((item["children"] for item in facts["topNav"] if item["text"] == "Developers"), None)
    if developers is None:
        problems.append("index.html: no Developers menu in the navigation")
    else:
        problems += [f"index.html: {page!r} is not under Developers" for page in DEVELOPER_PAGES
                     if page not in developers]
    for item in facts["topNav"]:
        if item["children"] and item["text"] != "Developers":
            problems.append(f"index.html: an unexpected menu {item['text']!r}")
    browser.evaluate("document.querySelector('.navbar .dropdown-toggle').click()")
    browser.screenshot(OUT / "nav-developers.png", clip={"x": 0, "y": 0, "width": WIDTH, "height": 420})


def main() -> int:
    executable = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if executable is None:
        print("check_site: no Chromium here (apt-get install chromium)", file=sys.stderr)
        return 2
    if "--no-build" not in sys.argv[1:] and runpy.run_path(str(ROOT / "docs" / "build_site.py"))["main"]() != 0:
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    browser = Browser(executable)
    problems: list[str] = []
    try:
        check_api(browser, problems)
        check_navigation(browser, problems)
    finally:
        browser.close()
        shutil.rmtree(OUT / "profile", ignore_errors=True)
    if problems:
        print("the rendered site has problems:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"check_site: the site renders as it should; screenshots in {OUT.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
