"""The core's log lines as Python `logging` records (logger
"tritonserver.core") on the 2.51 core, which has no log callback: the core
writes to a pipe that the package drains."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest

import tritonserver
from common import make_options, run_script, wait_for
from tritonserver._api._logging import parse_line

BROKEN_CONFIG = textwrap.dedent("""
    backend: "no_such_backend"
    max_batch_size: 0
    input [{ name: "X", data_type: TYPE_FP32, dims: [1] }]
    output [{ name: "Y", data_type: TYPE_FP32, dims: [1] }]
""")


@pytest.fixture
def broken_repository(tmp_path):
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text(BROKEN_CONFIG)
    return str(tmp_path)


def test_an_error_of_the_core_is_an_error_record(backend_directory, broken_repository, caplog):
    caplog.set_level(logging.ERROR, logger="tritonserver.core")
    server = tritonserver.Server(make_options(backend_directory, model_repository=broken_repository,
                                              server_id="logging-broken"))
    server.start(wait_until_ready=True, timeout=60)
    try:
        with pytest.raises(tritonserver.InvalidArgumentError):
            server.load("broken")

        def failed_load():
            return [r for r in caplog.records if "failed to load 'broken'" in r.getMessage()]

        assert wait_for(lambda: failed_load(), 30), [r.getMessage() for r in caplog.records]
        record = failed_load()[0]
        assert record.name == "tritonserver.core"
        assert record.levelno == logging.ERROR
        assert record.pathname.endswith(".cc") and record.lineno > 0
        assert record.triton_pid == os.getpid()
        assert "no_such_backend" in record.getMessage()
        assert not record.getMessage().startswith('"')   # the core's quoting is undone
        assert server.live()
    finally:
        server.stop()


def test_parse_line_reads_both_formats():
    assert parse_line('E1130 23:49:59.260574 16109 model_lifecycle.cc:642] "failed: \\"x\\"\\nnext"') == (
        logging.ERROR, 16109, "model_lifecycle.cc", 642, 'failed: "x"\nnext')
    assert parse_line("2026-11-30T23:44:49Z W 42 server.cc:7] plain") == (
        logging.WARNING, 42, "server.cc", 7, "plain")
    assert parse_line("+----------+") is None


# Each case in its own interpreter: the core's log target is process-wide.
CHILD = textwrap.dedent("""
    import atexit, json, logging, os, sys, threading, time
    repo, case, out = sys.argv[1], sys.argv[2], sys.argv[3]
    result = {}
    records = []

    def report():
        result["records"] = records
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(result, f)

    # Registered before the package is imported, so it runs after the
    # package's own exit handler (atexit is last-in, first-out).
    atexit.register(report)
    import tritonserver as t
    from tritonserver._api import _logging

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((record.name, record.levelname, record.getMessage(), record.pathname))

    logging.getLogger("tritonserver").addHandler(Keep())
    logging.getLogger("tritonserver").setLevel(logging.DEBUG)
    if case == "stuck-handler":
        # A handler that blocks until released, and a pipe of one page: the
        # core must still start, load, unload and stop without waiting.
        _logging._CoreLogPipe.PIPE_SIZE = 4096
        release = threading.Event()

        class Stuck(logging.Handler):
            def emit(self, record):
                release.wait()

        logging.getLogger("tritonserver.core").addHandler(Stuck())
        start = time.monotonic()
        s = t.Server(model_repository=repo, model_control_mode=t.ModelControlMode.EXPLICIT,
                     log_verbose=1)
        s.start(wait_until_ready=True)
        for _ in range(40):
            try:
                s.load("broken")
            except t.TritonError:
                pass
        s.stop()
        result["seconds"] = time.monotonic() - start
        release.set()
    elif case == "user-log-file":
        path = os.path.join(out, "user.log")
        s = t.Server(model_repository=repo, model_control_mode=t.ModelControlMode.EXPLICIT,
                     log_error=True, log_file=path)
        s.start(wait_until_ready=True)
        try:
            s.load("broken")
        except t.TritonError:
            pass
        s.stop()
        result["file"] = open(path).read()
    else:  # "exit-while-running": the server is left running at exit
        s = t.Server(model_repository=repo, model_control_mode=t.ModelControlMode.EXPLICIT,
                     log_info=True)
        s.start(wait_until_ready=True)

""")


def run_child(case: str, repository: str, tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITONSERVER_LIBRARY"}
    proc = subprocess.run([sys.executable, "-c", CHILD, repository, case, str(tmp_path)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr[-3000:]
    result: dict = json.loads((tmp_path / "result.json").read_text())
    result["stderr"] = proc.stderr
    return result


def test_a_stuck_handler_never_blocks_the_core(broken_repository, tmp_path):
    result = run_child("stuck-handler", broken_repository, tmp_path)
    core = [r for r in result["records"] if r[0] == "tritonserver.core"]
    # Every line reached logging once the handler was released, none dropped.
    failed = [r for r in core if "failed to load 'broken'" in r[2] and r[1] == "ERROR"]
    assert len(failed) == 40, core[-5:]
    assert sum(len(r[2]) for r in core) > 4 * 4096   # more than the pipe holds
    assert not any("dropped" in r[2] for r in result["records"])
    assert result["seconds"] < 120   # a hang detector, not a speed


def test_a_users_log_file_is_kept(broken_repository, tmp_path):
    result = run_child("user-log-file", broken_repository, tmp_path)
    assert "failed to load 'broken'" in result["file"]
    assert not any(r[0] == "tritonserver.core" for r in result["records"])


def test_exit_with_a_running_server_is_clean_and_loses_no_line(broken_repository, tmp_path):
    result = run_child("exit-while-running", broken_repository, tmp_path)
    core = [r for r in result["records"] if r[0] == "tritonserver.core"]
    assert any(r[1] == "INFO" for r in core), core
    # Lines the core writes while the exit handler stops the server arrive.
    assert any("Waiting for in-flight requests" in r[2] for r in core), core[-5:]
    # The package's own choices, at INFO/DEBUG on "tritonserver".
    own = [r for r in result["records"] if r[0] == "tritonserver"]
    found = [r for r in own if r[2].startswith("Triton core ") and "found via" in r[2]]
    assert found and found[0][1] == "INFO", own
    assert found[0][3].endswith("_triton_core.py")   # the record points at the code that decided
    own = [r[2] for r in own]
    assert any(m.startswith("backend directory: ") for m in own), own
    assert not result["stderr"].strip(), result["stderr"][-2000:]


def test_every_level_off_logs_nothing_yet_failures_name_the_reason(backend_directory, tmp_path):
    """With every log level off (the default) no core line reaches logging
    or stderr; the core still logs its ERROR lines into the package's pipe,
    so that a failed start names each model and the core's reason."""
    code = f"""
import logging, pathlib, tritonserver
from common import copy_model, make_options
logging.basicConfig(level=logging.DEBUG)
repo = pathlib.Path({str(tmp_path)!r}) / "repo"
broken = copy_model("identity_fp32", repo, "broken")
(broken / "config.pbtxt").write_text('name: "broken"\\nbackend: "no_such_backend"\\n')
srv = tritonserver.Server(make_options({backend_directory!r}, server_id="quiet", log_error=False,
                                       model_repository=str(repo), model_control_mode=tritonserver.ModelControlMode.NONE))
try:
    srv.start()
except tritonserver.InternalError as e:
    print("refused:", e)
"""
    rc, out, err = run_script(code, tmp_path, timeout=120)
    assert rc == 0, err
    assert "refused: failed to load all models:\n- model 'broken' version 1: " in out, out
    assert "no_such_backend" in out, out
    assert "tritonserver.core" not in err, err
