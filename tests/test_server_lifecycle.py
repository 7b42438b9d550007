"""Server lifecycle: start/stop, health, metadata, the model index, the
context manager, and the errors of a server used in the wrong state."""

from __future__ import annotations


import numpy
import pytest

import tritonserver
from common import MODELS, as_numpy, call_with_deadline, make_options, single, wait_for

REPOSITORY_MODELS = sorted(p.name for p in MODELS.iterdir() if (p / "config.pbtxt").is_file())


def own_server(backend_directory: str, server_id: str, **overrides) -> tritonserver.Server:
    return tritonserver.Server(make_options(backend_directory, server_id=server_id, **overrides))



# -- start / stop ---------------------------------------------------------------

def test_start_returns_self_and_server_is_live_and_ready(backend_directory):
    srv = own_server(backend_directory, "lifecycle-start")
    try:
        assert srv.start() is srv
        assert srv.live() is True
        assert srv.ready() is True
    finally:
        srv.stop()
    assert srv.ready() is False


def test_start_wait_until_ready(backend_directory):
    srv = own_server(backend_directory, "lifecycle-wait")
    try:
        assert srv.start(wait_until_ready=True, polling_interval=0.01, timeout=30) is srv
        assert srv.ready()
    finally:
        srv.stop()


def test_double_start_is_an_invalid_argument(backend_directory):
    srv = own_server(backend_directory, "lifecycle-double-start").start()
    try:
        with pytest.raises(tritonserver.InvalidArgumentError, match="already started"):
            srv.start()
        # The failed second start left the running server alone.
        assert srv.ready()
    finally:
        srv.stop()


def test_stopped_server_is_not_ready_and_stop_is_idempotent(backend_directory):
    srv = own_server(backend_directory, "lifecycle-double-stop").start()
    srv.stop()
    # A stopped server answers the health questions truthfully, and a
    # second stop() (cleanup code, __exit__ after an explicit stop) is a
    # no-op.
    assert srv.ready() is False
    assert srv.live() is False
    assert srv.stop() is None
    assert srv.ready() is False
    # Everything else still needs a started server, and says how to get one.
    with pytest.raises(tritonserver.InvalidArgumentError, match=r"Server not started \(it was stopped: call start"):
        srv.metadata()
    # A restart makes it ready again; stopping it again works as before.
    srv.start(wait_until_ready=True, timeout=30)
    try:
        assert srv.ready() is True and srv.live() is True
    finally:
        srv.stop()
    assert srv.ready() is False


NOT_STARTED_CALLS = {
    "ready": lambda s: s.ready(),
    "live": lambda s: s.live(),
    "metadata": lambda s: s.metadata(),
    "metrics": lambda s: s.metrics(),
    "models": lambda s: s.models(),
    "model": lambda s: s.model("add_sub"),
    "load": lambda s: s.load("add_sub"),
    "unload": lambda s: s.unload("add_sub"),
    "stop": lambda s: s.stop(),
    "register_model_repository": lambda s: s.register_model_repository(str(MODELS)),
    "unregister_model_repository": lambda s: s.unregister_model_repository(str(MODELS)),
    "poll_model_repository": lambda s: s.poll_model_repository(),
    "_ptr": lambda s: s._ptr(),
}


@pytest.mark.parametrize("call", NOT_STARTED_CALLS.values(), ids=NOT_STARTED_CALLS.keys())
def test_methods_before_start_raise_server_not_started(call):
    srv = tritonserver.Server()
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        call(srv)


def test_model_handle_needs_a_started_server():
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        tritonserver.Model(tritonserver.Server(), "add_sub")


def test_server_can_start_again_after_stop(backend_directory):
    srv = own_server(backend_directory, "lifecycle-restart")
    srv.start()
    first = srv._ptr()
    srv.stop()
    srv.start(wait_until_ready=True, timeout=30)
    try:
        assert srv.ready()
        assert srv._ptr() != 0
        assert srv.metadata()["name"] == "lifecycle-restart"
        model = srv.load("identity_fp32")
        data = numpy.arange(4, dtype=numpy.float32)
        out = single(model.infer(inputs={"INPUT0": data}))
        numpy.testing.assert_array_equal(as_numpy(out.outputs["OUTPUT0"]), data)
    finally:
        srv.stop()
    assert isinstance(first, int) and first != 0


@pytest.mark.python_backend
def test_stop_with_several_models_loaded_returns_promptly(backend_directory):
    # exit_timeout well above the deadline: a stop that waits for the exit
    # timeout (requests or responses never released) fails the test.
    srv = own_server(backend_directory, "lifecycle-stop-loaded", exit_timeout=30)
    srv.start(wait_until_ready=True, timeout=30)
    try:
        add_sub = srv.load("add_sub")
        identity = srv.load("identity_fp32")
        streaming = srv.load("streaming")
        data = numpy.arange(5, dtype=numpy.float32)
        kept = single(add_sub.infer(inputs={"INPUT0": data, "INPUT1": data}))
        single(identity.infer(inputs={"INPUT0": data}))
        outs = [r for r in streaming.infer(inputs={"COUNT": numpy.array([2], dtype=numpy.int32)})]
        assert [int(as_numpy(r.outputs["OUT"])[0]) for r in outs if "OUT" in r.outputs] == [0, 1]
        assert all(m.ready() for m in (add_sub, identity, streaming))
    except BaseException:
        srv.stop()
        raise
    # A response is still held across stop(): stop must not wait for it.
    call_with_deadline(srv.stop, 10)
    assert srv.ready() is False
    numpy.testing.assert_array_equal(as_numpy(kept.outputs["OUTPUT0"]), data * 2)


# -- context manager and constructors ----------------------------------------

def test_context_manager_starts_and_stops(backend_directory):
    srv = own_server(backend_directory, "lifecycle-with")
    with srv as entered:
        assert entered is srv
        assert srv.ready()
        assert srv.metadata()["name"] == "lifecycle-with"
    assert srv.ready() is False


def test_context_manager_stops_on_exception(backend_directory):
    srv = own_server(backend_directory, "lifecycle-with-error")
    with pytest.raises(RuntimeError, match="boom"):
        with srv:
            assert srv.live()
            raise RuntimeError("boom")
    assert srv.live() is False


def test_context_manager_accepts_a_started_server(backend_directory):
    srv = own_server(backend_directory, "lifecycle-with-started")
    with srv.start() as entered:
        assert entered is srv
        assert srv.ready()
    assert srv.ready() is False


def test_server_from_options_and_from_keywords(backend_directory):
    options = make_options(backend_directory, server_id="lifecycle-options")
    by_options = tritonserver.Server(options)
    assert by_options.options is options
    by_keywords = tritonserver.Server(
        model_repository=str(MODELS),
        model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
        backend_directory=backend_directory,
        server_id="lifecycle-kwargs",
        exit_timeout=10,
    )
    assert isinstance(by_keywords.options, tritonserver.Options)
    assert by_keywords.options.server_id == "lifecycle-kwargs"
    assert by_keywords.options.model_control_mode == tritonserver.ModelControlMode.EXPLICIT
    for srv, name in ((by_options, "lifecycle-options"), (by_keywords, "lifecycle-kwargs")):
        srv.start()
        try:
            assert srv.metadata()["name"] == name
            assert ("identity_fp32", -1) in srv.models()
        finally:
            srv.stop()


def test_server_with_unknown_keyword_fails_at_construction():
    with pytest.raises(TypeError):
        tritonserver.Server(no_such_option=1)


# -- repository errors at start ------------------------------------------------

def test_bad_repository_path_is_an_internal_error(backend_directory, tmp_path):
    srv = own_server(backend_directory, "lifecycle-bad-repo", model_repository=str(tmp_path / "missing"))
    with pytest.raises(tritonserver.InternalError):
        srv.start()
    # The failed start left the server unstarted.
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        srv.ready()


def test_missing_repository_is_an_invalid_argument(backend_directory):
    srv = own_server(backend_directory, "lifecycle-no-repo", model_repository=None)
    with pytest.raises(tritonserver.InvalidArgumentError, match="[Mm]odel repository"):
        srv.start()
    with pytest.raises(tritonserver.InvalidArgumentError, match="Server not started"):
        srv.ready()


def test_no_repository_serves_what_load_adds_in_explicit_mode(backend_directory):
    # Was: InvalidArgumentError "--model-repository must be specified" (the
    # core's); now the server starts with an empty repository of the
    # package's, in EXPLICIT mode (bind() and in-memory loads add models).
    srv = own_server(backend_directory, "lifecycle-empty-repo", model_repository=[],
                     model_control_mode=tritonserver.ModelControlMode.NONE)
    srv.start(wait_until_ready=True, timeout=30)
    try:
        assert len(srv.models()) == 0
        config = {"backend": "python", "max_batch_size": 0,
                  "input": [{"name": n, "data_type": "TYPE_FP32", "dims": [-1]} for n in ("INPUT0", "INPUT1")],
                  "output": [{"name": n, "data_type": "TYPE_FP32", "dims": [-1]} for n in ("OUTPUT0", "OUTPUT1")]}
        source = (MODELS / "add_sub" / "1" / "model.py").read_bytes()
        assert srv.load("in_memory", {"config": config, "file:1/model.py": source}).ready()
    finally:
        srv.stop()


def test_failed_start_can_be_retried_with_fixed_options(backend_directory, tmp_path):
    srv = own_server(backend_directory, "lifecycle-retry", model_repository=str(tmp_path / "missing"))
    with pytest.raises(tritonserver.InternalError):
        srv.start()
    srv.options.model_repository = str(tmp_path)
    srv.start()
    try:
        assert srv.ready()
        assert len(srv.models()) == 0
    finally:
        srv.stop()


# -- metadata, the model index, the handle -----------------------------------

def test_metadata(server):
    metadata = server.metadata()
    assert metadata["name"] == server.options.server_id == "shared"
    assert metadata["version"] == "2.51.0"
    extensions = metadata["extensions"]
    assert isinstance(extensions, list) and extensions
    assert all(isinstance(e, str) for e in extensions)
    assert {"model_repository", "statistics", "model_configuration"} <= set(extensions)


def test_ptr_is_a_nonzero_int_stable_while_running(server):
    address = server._ptr()
    assert isinstance(address, int) and address != 0
    assert server._ptr() == address


def test_models_index_lists_the_repository(server):
    models = server.models()
    assert isinstance(models, tritonserver.ModelDictionary)
    assert isinstance(models, dict)
    assert {key[0] for key in models} >= set(REPOSITORY_MODELS)
    for (name, version), entry in models.items():
        assert isinstance(name, str) and isinstance(version, int)
        assert isinstance(entry, tritonserver.Model)
        assert (entry.name, entry.version) == (name, version)


def test_models_index_by_name_and_key_errors(server, model):
    model("add_sub")
    models = server.models()
    assert models[("add_sub", 1)].state == "READY"
    by_name = models["add_sub"]
    assert isinstance(by_name, tritonserver.Model)
    assert (by_name.name, by_name.version) == ("add_sub", -1)
    assert by_name.ready()
    with pytest.raises(KeyError, match="no_such_model"):
        models["no_such_model"]
    with pytest.raises(KeyError):
        models[("add_sub", 99)]
    # Plain dict semantics for membership: keys are (name, version).
    assert ("add_sub", 1) in models
    assert "add_sub" not in models


def test_models_exclude_not_ready(server, model):
    model("identity_fp32")
    ready = server.models(exclude_not_ready=True)
    assert ("identity_fp32", 1) in ready
    assert ready and all(m.state == "READY" for m in ready.values())
    everything = server.models()
    assert set(ready) <= set(everything)


def test_model_handle_repr_and_attributes(server):
    handle = server.model("add_sub")
    assert repr(handle) == str({"name": "add_sub", "version": -1, "state": None})
    assert str(handle) == repr(handle)
    assert (handle.name, handle.version, handle.state, handle.reason) == ("add_sub", -1, None, None)
    assert handle._server is server
    versioned = server.model("add_sub", 1)
    assert repr(versioned) == str({"name": "add_sub", "version": 1, "state": None})


def test_indexed_model_repr_shows_state(server, model):
    model("add_sub")
    entry = server.models()[("add_sub", 1)]
    assert repr(entry) == str({"name": "add_sub", "version": 1, "state": "READY"})


def test_interpreter_exit_with_a_running_server_stops_it_cleanly(backend_directory, tmp_path):
    """A program that never calls stop() still exits cleanly and promptly."""
    import subprocess
    import sys

    code = f"""
import numpy, tritonserver
server = tritonserver.Server(model_repository={str(MODELS)!r}, backend_directory={backend_directory!r},
                             model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
server.start(wait_until_ready=True)
model = server.load("identity_fp32")
kept = list(model.infer(inputs={{"INPUT0": numpy.ones(4, numpy.float32)}}))
print("OK", len(kept))
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OK 1" in done.stdout


@pytest.mark.python_backend
def test_dropping_a_running_server_lets_other_threads_run_while_it_stops(backend_directory):
    """`del server` on a started server stops it in the destructor, as
    stop() does (waiting for the requests in flight), without the GIL: other
    Python threads keep running meanwhile instead of freezing for the whole
    stop."""
    import gc
    import threading
    import time

    srv = own_server(backend_directory, "lifecycle-drop", log_error=False)
    srv.start(wait_until_ready=True, timeout=60)
    srv.load("sleep")
    # A 2 s request in flight, its iterator dropped at once: the stop waits
    # for it, and nothing keeps the server alive but `srv`.
    srv.model("sleep").infer(inputs={"SECONDS": numpy.array([2.0], dtype=numpy.float32)})
    ticks: list[float] = []
    ticking = threading.Event()
    ticking.set()

    def ticker() -> None:
        while ticking.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    assert wait_for(lambda: len(ticks) >= 2)  # the ticker runs
    started = time.monotonic()
    del srv
    gc.collect()
    ended = time.monotonic()
    ticking.clear()
    thread.join(10)
    during = [t for t in ticks if started < t < ended]
    # The destructor waited for the request in flight (a safe stop), ...
    assert ended - started > 1.0, f"the server was dropped in {ended - started:.2f} s: no stop took place"
    # ... and the ticker advanced meanwhile (a hang-catching bound: about
    # 150 ticks are expected, none while the GIL was held).
    assert len(during) >= 10, f"{len(during)} ticks in {ended - started:.2f} s while the server stopped"
