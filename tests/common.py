"""Test helpers shared by several test files (fixtures are in conftest.py)."""

from __future__ import annotations

import gc
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import traceback

import tritonserver

ROOT = pathlib.Path(__file__).resolve().parent.parent


class refused:
    """Like pytest.raises (class, optional regex searched in the message),
    but first clears the locals of the finished frames of the traceback.

    A TritonError or TypeError raised by infer() keeps, through its
    traceback, the native request that infer() was building and its inputs;
    while it is alive the request pins its model (Server.stop() then waits
    the whole exit timeout) and the inputs stay alive (which a leak check
    would count). pytest keeps the traceback of every failed test until the
    session ends, after the shared server stopped."""

    def __init__(self, expected, match: str | None = None) -> None:
        self.expected = expected
        self.pattern = match
        self.kind: type | None = None
        self.message = ""

    def __enter__(self) -> "refused":
        return self

    def __exit__(self, kind, value, tb) -> bool:
        if tb is not None:
            traceback.clear_frames(tb)
        if kind is None:
            raise AssertionError(f"accepted; expected {self.expected}")
        self.kind, self.message = kind, str(value)
        if not issubclass(kind, self.expected):
            raise AssertionError(f"expected {self.expected}, got {kind.__name__}: {self.message}")
        if self.pattern is not None and not re.search(self.pattern, self.message):
            raise AssertionError(f"{kind.__name__} message {self.message!r} does not match {self.pattern!r}")
        return True


def live_tensors() -> int:
    """Live tritonserver.Tensor objects, counted as NVIDIA's test_api.py
    counts them (after a full collection)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, tritonserver.Tensor))


def rss_bytes() -> int:
    """Resident set size of this process."""
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_script(code: str, tmp_path, timeout: float, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run `code` in a fresh interpreter (cwd tests/, so conftest imports),
    with `env` added to the environment. Output goes to files, not pipes:
    python backend stubs that outlive a crashed parent would hold pipes
    open. Returns (rc, stdout, stderr)."""
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT / "tests",
                                   stdout=out, stderr=err, start_new_session=True,
                                   env=None if env is None else {**os.environ, **env})
        try:
            rc = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(f"the interpreter did not exit within {timeout} s (hang): "
                                 f"{out_path.read_text()} {err_path.read_text()[-2000:]}") from None
    return rc, out_path.read_text(), err_path.read_text()
