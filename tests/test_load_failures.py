"""Failures that name the model and the cause: a model that fails to load at
start or by load(), start(wait_until_ready=True) with a model that cannot
become ready, a misspelt model name in each model control mode, bind() in
a mode that cannot add models, and request errors without the core's
"[request id: <id_unknown>]"."""

from __future__ import annotations

import json
import logging
import re

import numpy
import pytest

import tritonserver
from common import call_with_deadline, copy_model, make_options, refused, run_script

MODES = ["in-process", pytest.param("stub", marks=pytest.mark.python_stub)]
NONE, POLL, EXPLICIT = (tritonserver.ModelControlMode.NONE, tritonserver.ModelControlMode.POLL,
                        tritonserver.ModelControlMode.EXPLICIT)
UNPARSED = (r"model 'bad_config': failed to read text proto from .*bad_config/config\.pbtxt \(its config\.pbtxt "
            r"is not a valid model configuration: the parser's line, column and cause are on stderr")
NO_CUDA_DRIVER = "CudaDriverHelper has not been initialized."
SYNTAX = r"(?s)model 'bad_syntax' version 1: Internal: .*SyntaxError: invalid syntax \(model\.py, line 2\)"


def broken_repository(tmp_path):
    """add_sub, a model whose config.pbtxt does not parse (TYPE_FLOAT32) and
    one whose model.py has a syntax error on line 2."""
    repo = tmp_path / "repo"
    copy_model("add_sub", repo)
    bad_config = copy_model("add_sub", repo, "bad_config")
    (bad_config / "config.pbtxt").write_text((bad_config / "config.pbtxt").read_text().replace(
        "TYPE_FP32", "TYPE_FLOAT32"))
    bad_syntax = copy_model("add_sub", repo, "bad_syntax")
    (bad_syntax / "1" / "model.py").write_text("import numpy\ndef execute(:\n    pass\n")
    return repo


@pytest.mark.parametrize("python_models", MODES)
@pytest.mark.parametrize("log_error", [False, True], ids=["quiet", "log_error"])
def test_failed_start_names_each_model_and_reason(backend_directory, tmp_path, python_models, log_error):
    # Was: InternalError "failed to load all models" and nothing else; the
    # causes only in the core's log, with log_error=True and logging set up.
    srv = tritonserver.Server(make_options(backend_directory, server_id="failed-start",
                                           model_repository=str(broken_repository(tmp_path)), model_control_mode=NONE,
                                           python_models=python_models, log_error=log_error))
    with refused(tritonserver.InternalError, r"^failed to load all models:\n") as refusal:
        srv.start()
    assert re.search(UNPARSED, refusal.message), refusal.message
    assert re.search(SYNTAX, refusal.message, re.S), refusal.message
    assert "add_sub" not in refusal.message
    assert "exit_on_error=False" in refusal.message
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        srv.ready()


def test_failed_start_with_a_log_file_reads_the_reasons_back(backend_directory, tmp_path):
    log_file = tmp_path / "core.log"
    srv = tritonserver.Server(make_options(backend_directory, server_id="failed-start-file",
                                           model_repository=str(broken_repository(tmp_path)),
                                           model_control_mode=NONE, log_file=str(log_file)))
    with refused(tritonserver.InternalError, UNPARSED) as refusal:
        srv.start()
    assert re.search(SYNTAX, refusal.message, re.S), refusal.message
    assert "bad_config" in log_file.read_text()


@pytest.mark.parametrize("exit_on_error", [True, False], ids=["exit_on_error", "no_exit_on_error"])
def test_a_server_that_cannot_initialize_names_the_cause_and_can_start_again(backend_directory, tmp_path,
                                                                             exit_on_error):
    # Was, with exit_on_error=False: UnavailableError "Server not ready"
    # from start(), the core's reason only in its log.
    missing = tmp_path / "no_such_repository"
    options = make_options(backend_directory, server_id="cannot-init", model_repository=str(missing),
                           model_control_mode=NONE, exit_on_error=exit_on_error)
    srv = tritonserver.Server(options)
    with refused(tritonserver.InternalError, rf"^failed to stat file {re.escape(str(missing))}$"):
        srv.start()
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        srv.live()
    copy_model("add_sub", missing)
    srv.start(wait_until_ready=True, timeout=60)
    try:
        assert srv.model("add_sub").ready()
    finally:
        srv.stop()


@pytest.mark.parametrize("mode", [NONE, EXPLICIT], ids=["NONE", "EXPLICIT"])
def test_wait_until_ready_ends_naming_the_model_that_failed(backend_directory, tmp_path, mode):
    # Was: with exit_on_error=False, start(wait_until_ready=True) polled
    # ready() forever (no timeout), printing nothing.
    srv = tritonserver.Server(make_options(
        backend_directory, server_id="never-ready", model_repository=str(broken_repository(tmp_path)),
        model_control_mode=mode, startup_models=["*"] if mode == EXPLICIT else [], exit_on_error=False))
    with refused(tritonserver.UnavailableError,
                 r"^start\(wait_until_ready=True\): the server cannot become ready .* models failed to load at "
                 r"start, and the core does not retry them:\n") as refusal:
        call_with_deadline(lambda: srv.start(wait_until_ready=True), 120)
    assert re.search(SYNTAX, refusal.message, re.S), refusal.message
    assert re.search(UNPARSED, refusal.message), refusal.message
    assert "strict_readiness=False" in refusal.message
    assert srv.ready() is False  # stopped
    # Without strict readiness the server is ready without them.
    srv = tritonserver.Server(make_options(
        backend_directory, server_id="ready-without", model_repository=str(broken_repository(tmp_path / "2")),
        model_control_mode=mode, startup_models=["*"] if mode == EXPLICIT else [], exit_on_error=False,
        strict_readiness=False))
    srv.start(wait_until_ready=True, timeout=60)
    try:
        assert srv.model("add_sub").ready()
    finally:
        srv.stop()


@pytest.mark.parametrize("python_models", MODES)
def test_load_of_a_model_that_fails_names_the_reason(backend_directory, tmp_path, python_models):
    # Was: InternalError "failed to load 'bad_config', failed to poll from
    # model repository", without the reason.
    srv = tritonserver.Server(make_options(backend_directory, server_id="failed-load",
                                           model_repository=str(broken_repository(tmp_path)),
                                           python_models=python_models))
    srv.start()
    try:
        with refused(tritonserver.InternalError, r"^load\('bad_config'\): " + UNPARSED + r".*; fix it and load it "
                     r"again \(the core said: failed to load 'bad_config', failed to poll from model repository\)"):
            srv.load("bad_config")
        with refused(tritonserver.TritonError, r"SyntaxError: invalid syntax \(model\.py, line 2\)"):
            srv.load("bad_syntax")
        # A request for them says why they are not there.
        for name, reason in (("bad_config", UNPARSED), ("bad_syntax", SYNTAX)):
            with refused(tritonserver.NotFoundError, r"(?s)" + reason + r".*: it failed to load; fix it, then load it with "
                                                              rf"server\.load\('{name}'\)"):
                srv.model(name).infer(inputs={"INPUT0": numpy.ones(1, numpy.float32)})
        srv.load("add_sub")
    finally:
        srv.stop()


@pytest.mark.parametrize("mode, fix", [
    (NONE, r"put it in the model repository .* and start the server again \(this server runs with "
           r"model_control_mode=NONE, which loads the repository's models at start only and refuses server.load\(\)"),
    (POLL, r"put it in the model repository .* and call server.poll_model_repository\(\) \(this server runs with "
           r"model_control_mode=POLL, which refuses server.load\(\)\)"),
    (EXPLICIT, r"put it in the model repository .* and load it with server.load\('add_su'\)"),
], ids=["NONE", "POLL", "EXPLICIT"])
def test_misspelt_model_name_suggests_the_close_name_and_what_works_in_the_mode(backend_directory, tmp_path,
                                                                                mode, fix):
    # Was: "model 'add_su' is not loaded; load it first with
    # server.load('add_su')", in a mode that refuses load() too.
    copy_model("add_sub", tmp_path)
    srv = tritonserver.Server(make_options(backend_directory, server_id=f"misspelt-{mode.name}",
                                           model_repository=str(tmp_path), model_control_mode=mode))
    srv.start()
    try:
        expected = (r"no model named 'add_su' is in the model repository \(did you mean 'add_sub'\?\); to serve a "
                    r"model of that name, " + fix)
        with refused(tritonserver.NotFoundError, expected):
            srv.model("add_su").infer(inputs={"INPUT0": numpy.ones(1, numpy.float32)})
        with refused(tritonserver.NotFoundError, expected):
            srv.model("add_su").config()
        with refused(tritonserver.NotFoundError, r"no model named 'zzz' is in the model repository; "):
            srv.model("zzz").metadata()
        if mode == EXPLICIT:
            with refused(tritonserver.NotFoundError, r"load\('add_su'\): no model named 'add_su' is in the model "
                                                     r"repository \(.*\) \(did you mean 'add_sub'\?\)"):
                srv.load("add_su")
    finally:
        srv.stop()


def _bind_add_one(srv):
    return srv.bind("add_one", lambda x: {"y": x + 1}, inputs=[tritonserver.TensorSpec("x", numpy.float32)],
                    outputs=[tritonserver.TensorSpec("y", numpy.float32)])


def test_bind_without_a_repository_works(backend_directory):
    # Was: InvalidArgumentError "--model-repository must be specified" at
    # start, and in the default mode "repository registration is not
    # allowed if model control mode is not EXPLICIT".
    srv = tritonserver.Server(make_options(backend_directory, server_id="bind-only", model_repository=[],
                                           model_control_mode=NONE))
    srv.start(wait_until_ready=True, timeout=60)
    try:
        model = _bind_add_one(srv)
        [response] = list(model.infer(inputs={"x": numpy.arange(3, dtype=numpy.float32)}))
        numpy.testing.assert_array_equal(numpy.from_dlpack(response.outputs["y"]), [1, 2, 3])
        assert [key[0] for key in srv.models()] == ["add_one"]
    finally:
        srv.stop()


@pytest.mark.parametrize("mode", [NONE, POLL], ids=["NONE", "POLL"])
def test_bind_in_a_mode_that_adds_no_models_says_what_it_needs(backend_directory, tmp_path, mode):
    copy_model("identity_fp32", tmp_path)
    srv = tritonserver.Server(make_options(backend_directory, server_id=f"bind-{mode.name}",
                                           model_repository=str(tmp_path), model_control_mode=mode))
    srv.start()
    try:
        with refused(tritonserver.UnavailableError,
                     rf"^bind\('add_one'\): a bound function is loaded into the server by name, which a server with "
                     rf"model_control_mode={mode.name} refuses .*create the server with "
                     r"model_control_mode=ModelControlMode.EXPLICIT .*or without a model_repository"):
            _bind_add_one(srv)
        assert srv.model("identity_fp32").ready()
    finally:
        srv.stop()


def test_request_errors_drop_the_unknown_request_id(model):
    # Was: "[request id: <id_unknown>] expected 1 inputs but got 2 ...".
    model = model("identity_fp32")
    with refused(tritonserver.InvalidArgumentError, r"^expected 1 inputs but got 2 inputs for model") as refusal:
        model.infer(inputs={"INPUT0": numpy.ones(1, numpy.float32), "EXTRA": numpy.ones(1, numpy.float32)})
    assert "id_unknown" not in refusal.message
    # An id the user set is kept.
    with refused(tritonserver.InvalidArgumentError, r"^\[request id: mine\] expected 1 inputs but got 2"):
        model.infer(request_id="mine",
                    inputs={"INPUT0": numpy.ones(1, numpy.float32), "EXTRA": numpy.ones(1, numpy.float32)})


def test_no_cuda_driver_is_no_error(backend_directory, tmp_path):
    # Was: "CudaDriverHelper has not been initialized." logged as an ERROR
    # at every start on a machine without a CUDA driver. In a child
    # process: the core's log levels (verbose here) are process-wide and
    # outlive the server that set them.
    repository = tmp_path / "repository"
    repository.mkdir()
    code = f"""
import json, logging
import tritonserver
from common import make_options, wait_for
NO_CUDA_DRIVER = {NO_CUDA_DRIVER!r}

records = []

class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.levelno, record.getMessage()))

core = logging.getLogger("tritonserver.core")
core.addHandler(Keep())
core.setLevel(logging.DEBUG)
srv = tritonserver.Server(make_options({backend_directory!r}, server_id="no-cuda-quiet",
                                       model_repository={str(repository)!r}, log_verbose=1))
srv.start()
srv.stop()
if tritonserver._native.cuda_device_count() == 0:
    # The log's lines reach logging on a thread of their own.
    assert wait_for(lambda: any(m == NO_CUDA_DRIVER for _, m in records), 30), records[-20:]
print(json.dumps({{"driver": [l for l, m in records if m == NO_CUDA_DRIVER],
                  "errors": [m for l, m in records if l >= logging.ERROR],
                  "gpu": tritonserver._native.cuda_device_count() > 0}}))
"""
    rc, out, err = run_script(code, tmp_path, timeout=120)
    assert rc == 0, err[-3000:]
    seen = json.loads(out.strip().splitlines()[-1])
    if not seen["gpu"]:
        assert seen["driver"] == [logging.DEBUG], seen
    assert seen["errors"] == [], seen

