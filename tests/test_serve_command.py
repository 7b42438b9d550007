"""`python -m tritonserver serve`: NVIDIA's binary's flags, refusals that
name the flag (exit 2), the frontends started and named as the binary names
them, POLL mode, and SIGTERM (exit 0)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest

import tritonserver
from tritonserver._serve_flags import settings

from common import (MODELS, ROOT, copy_model, package_serve_command, reference_command, run_reference,
                    server_process, wait_for)


def run_serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tritonserver", "serve", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT / "tests")


@pytest.mark.parametrize("args, named", [
    (["--bogus-flag"], "unrecognized arguments: --bogus-flag"),
    (["--http-port", "eighty"], "argument --http-port: invalid integer: 'eighty'"),
    (["--http-port", "70000"], "argument --http-port: a port is 0-65535, not 70000"),
    (["--allow-grpc", "maybe"], "argument --allow-grpc: invalid value for bool option: 'maybe'"),
    (["--model-control-mode", "sometimes"], "argument --model-control-mode: 'sometimes' is not one of none, poll, "
                                            "explicit"),
    (["--allow-sagemaker=true"], "--allow-sagemaker: the SageMaker frontend is not served by this package"),
    (["--trace-config", "rate=1"], "--trace-config: tracing is not served"),
    (["--load-model", "add_sub"], "--load-model takes effect only with --model-control-mode=explicit"),
    (["--backend-config", "python"], "argument --backend-config: 'python' is not of the form "
                                     "<backend>,<setting>=<value>"),
])
def test_a_bad_flag_exits_2_naming_it(args, named):
    result = run_serve("--model-repository", str(MODELS), *args)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr


def test_no_repository_exits_2():
    result = run_serve()
    assert result.returncode == 2
    assert "--model-repository is required" in result.stderr


def test_the_flags_become_the_servers_options():
    config = settings(["--model-repository=/a", "--model-store", "/b", "--id=edge", "--model-control-mode=explicit",
                       "--load-model=x", "--load-model", "y", "--strict-readiness=false", "--log-verbose=2",
                       "--exit-timeout-secs=7", "--backend-config=python,shm-default-byte-size=1048576",
                       "--metrics-config=summary_latencies=true", "--allow-grpc=off", "--http-port=9000",
                       "--reuse-http-port=1", "--response-cache-byte-size=1024", "--python-models=in-process"])
    options = tritonserver.Options(**config.server)  # every key is an Options field
    assert options.model_repository == ["/a", "/b"]
    assert options.server_id == "edge"
    assert options.model_control_mode == tritonserver.ModelControlMode.EXPLICIT
    assert options.startup_models == ["x", "y"]
    assert options.strict_readiness is False and options.log_verbose == 2 and options.exit_timeout == 7
    assert options.backend_configuration == {"python": {"shm-default-byte-size": "1048576"}}
    assert options.metrics_configuration == {"": {"summary_latencies": "true"}}
    assert options.cache_config == {"local": {"size": "1024"}}
    assert options.python_models == "in-process"
    assert config.grpc is None
    assert config.http["port"] == 9000 and config.http["reuse_port"] is True
    assert config.metrics["port"] == 8002 and config.exit_timeout_secs == 7
    # --log-verbose takes true/false as the binary reads it (1/0)
    assert [settings(["--model-repository=/a", f"--log-verbose={v}"]).server["log_verbose"]
            for v in ("true", "FALSE", "3")] == [1, 0, 3]


def test_serve_runs_metrics_and_stops_on_sigterm(backend_directory, tmp_path):
    flags = ["--model-control-mode=explicit", "--load-model=identity_fp32", "--allow-http=false",
             "--allow-grpc=false", "--metrics-port=0"]
    with server_process(package_serve_command(), MODELS, flags, backend_directory=backend_directory,
                        log_dir=tmp_path) as served:
        assert served.metrics_port != 0  # the port 0 chose, as "Started Metrics Service at" says
        text = urllib.request.urlopen(f"http://{served.metrics_url}/metrics", timeout=30).read()
        assert b'nv_inference_count{model="identity_fp32",version="1"} 0' in text
    assert served.process.returncode == 0, served.log()
    assert "Signal (15) received" in served.log()


def test_a_model_that_fails_to_load_exits_1_naming_it(backend_directory, tmp_path):
    repository = tmp_path / "models"
    (repository / "broken" / "1").mkdir(parents=True)
    (repository / "broken" / "config.pbtxt").write_text('backend: "no_such_backend"\n')
    result = run_serve("--model-repository", str(repository), "--backend-directory", backend_directory,
                       "--allow-http=false", "--allow-grpc=false", "--metrics-port=0")
    assert result.returncode == 1, result.stderr
    assert "broken" in result.stderr and "no_such_backend" in result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_a_missing_load_model_exits_as_the_binary_without_a_traceback(backend_directory):
    flags = ("--model-repository", str(MODELS), "--backend-directory", backend_directory,
             "--model-control-mode=explicit", "--load-model=no_such_model", "--http-port=0", "--grpc-port=0",
             "--metrics-port=0")
    theirs = run_reference(*flags)
    ours = run_serve(*flags)
    assert ours.returncode == theirs.returncode == 1, (ours.stderr, theirs.stderr[-2000:])
    assert "no_such_model" in ours.stderr and "Traceback" not in ours.stderr, ours.stderr


def test_poll_mode_loads_a_model_added_to_the_repository(backend_directory, tmp_path):
    repository = tmp_path / "models"
    repository.mkdir()
    flags = ["--model-control-mode=poll", "--repository-poll-secs=1", "--allow-http=false", "--allow-grpc=false"]
    with server_process(package_serve_command(), repository, flags, backend_directory=backend_directory,
                        log_dir=tmp_path) as served:
        url = f"http://{served.metrics_url}/metrics"
        copy_model("identity_fp32", repository)
        assert wait_for(lambda: b'model="identity_fp32"' in urllib.request.urlopen(url, timeout=30).read(), 60), \
            served.log()
    assert served.process.returncode == 0, served.log()


def test_every_flag_is_documented():
    from tritonserver._serve_flags import parser

    documented = (ROOT / "docs" / "serving.md").read_text()
    flags = [option for action in parser()._actions if action.help != "==SUPPRESS=="
             for option in action.option_strings if option.startswith("--") and option != "--help"]
    assert len(flags) > 60
    assert [flag for flag in flags if f"`{flag}`" not in documented] == []


@pytest.mark.parametrize("side", ["binary", "package"])
def test_exit_on_error_false_serves_the_models_that_loaded(backend_directory, tmp_path, side):
    """--exit-on-error=false: a model that fails to load leaves the server
    running, live but not ready (strict readiness), serving the others, as
    NVIDIA's binary does (the package exited 1)."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    command = reference_command() if side == "binary" else package_serve_command()
    repository = tmp_path / "models"
    copy_model("identity_fp32", repository)
    (repository / "broken" / "1").mkdir(parents=True)
    (repository / "broken" / "config.pbtxt").write_text('backend: "no_such_backend"\n')
    flags = ["--exit-on-error=false", "--allow-http=false"]
    with server_process(command, repository, flags, backend_directory=None if side == "binary" else backend_directory,
                        log_dir=tmp_path) as served:
        client = grpcclient.InferenceServerClient(served.grpc_url)
        assert client.is_server_live() and not client.is_server_ready()
        assert client.is_model_ready("identity_fp32") and not client.is_model_ready("broken")
        client.close()
    assert served.process.returncode == 0, served.log()


@pytest.mark.parametrize("flags", [
    ["--log-warning=false"],
    ["--log-warn=false", "--log-error=false"],  # a prefix of a flag names it, as getopt_long takes it
    ["--log-info=false", "--log-verbose=1"],
    ["--log-error=false", "--log-info=true", "--log-warning=true"],
], ids=["warning-off", "warn-prefix-error-off", "verbose-without-info", "error-off"])
def test_the_log_level_flags_are_independent_as_the_binarys(tmp_path, flags):
    """The binary takes --log-info, --log-warning and --log-error as given
    (each level on or off by itself; /v2/logging reports them so, and a
    later update keeps them). The package's levels cascaded as its
    Options' do (info brought warning and error back on, reported true),
    and it refused the abbreviation --log-warn (exit 2)."""
    import json

    repository = tmp_path / "models"
    copy_model("identity_fp32", repository)
    seen = {}
    for side, command in (("binary", reference_command()), ("package", package_serve_command())):
        with server_process(command, repository, [*flags, "--allow-grpc=false"], log_dir=tmp_path) as served:
            url = f"http://{served.http_url}/v2/logging"
            reported = json.loads(urllib.request.urlopen(url, timeout=30).read())
            request = urllib.request.Request(url, data=b'{"log_format": "default"}', method="POST")
            updated = json.loads(urllib.request.urlopen(request, timeout=30).read())
        seen[side] = {k: reported[k] for k in ("log_info", "log_warning", "log_error", "log_verbose_level")}, updated
    assert seen["package"] == seen["binary"], seen
    assert seen["binary"][0]["log_info" if "--log-info=false" not in flags else "log_verbose_level"]  # sanity


_LOGGING_MODEL = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info("info line")
        pb_utils.Logger.log_warn("warning line")
        pb_utils.Logger.log_error("error line")
        pb_utils.Logger.log_verbose("verbose line")
        pb_utils.Logger.log('a "quoted" line', pb_utils.Logger.INFO)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", r.get_input_tensor_by_name("X").as_numpy())])
                for r in requests]
'''


@pytest.mark.python_stub
@pytest.mark.parametrize("flags", [[], ["--log-verbose=1", "--log-warning=false"], ["--log-file"]],
                         ids=["defaults", "verbose-without-warnings", "log-file"])
def test_a_models_log_lines_are_in_the_servers_log_as_the_binarys(tmp_path, flags):
    """pb_utils.Logger's lines of a python model reach the binary's log (its
    stderr, or --log-file) in Triton's format, at the levels on; so do
    serve's, in-process (they went to the "tritonserver.models" logger,
    which serve gave no handler: lost), and the core's own lines are the
    core's (serve printed the few of WARNING and above, reformatted)."""
    import re

    repository = tmp_path / "models"
    (repository / "logger" / "1").mkdir(parents=True)
    (repository / "logger" / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\ninput [ { name: "X", data_type: TYPE_FP32, dims: [ 1 ] } ]\n'
        'output [ { name: "Y", data_type: TYPE_FP32, dims: [ 1 ] } ]\n')
    (repository / "logger" / "1" / "model.py").write_text(_LOGGING_MODEL)
    line = re.compile(r'^([IWE])\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ (model\.py:\d+|model_lifecycle\.cc:\d+)\] (.*)$',
                      re.M)
    seen = {}
    for side, command in (("binary", reference_command()), ("package", package_serve_command())):
        log_file = tmp_path / f"{side}.log"
        given = [f"--log-file={log_file}" if flag == "--log-file" else flag for flag in flags]
        (tmp_path / side).mkdir()
        with server_process(command, repository, [*given, "--allow-grpc=false"], log_dir=tmp_path / side) as served:
            pass
        text = log_file.read_text() if "--log-file" in flags else served.log()
        found = line.findall(text)  # the stub's lines reach the log later than the core's: apart
        seen[side] = ([f for f in found if f[1].startswith("model.py")],  # and the load's (the stop's: timing)
                      [f for f in found if "lifecycle" in f[1] and "unload" not in f[2]])
    assert seen["package"] == seen["binary"], seen
    assert ("W", "model.py:7", '"warning line"') in seen["binary"][0] or "--log-warning=false" in flags
@pytest.mark.parametrize("flag, noun", [("--http-restricted-api", "api"), ("--grpc-restricted-protocol", "protocol")])
def test_restricted_group_refusals_exit_1_in_the_binarys_words(flag, noun):
    """A group given twice, and an unknown group: refused before the server
    starts, exit 1, with the binary's line (NVIDIA's qa greps it)."""
    for values, line in (((f"{flag}=model-repository,health:k1=v1", f"{flag}=metadata,health:k2=v2"),
                          f"restricted {noun} 'health' can not be specified in multiple config groups"),
                         ((f"{flag}=model-reposit,health:k1=v1",), f"unknown restricted {noun} 'model-reposit'")):
        flags = ("--model-repository", str(MODELS), "--model-control-mode=explicit", "--http-port=0", "--grpc-port=0",
                 "--metrics-port=0", *values)
        theirs = run_reference(*flags)
        ours = run_serve(*flags)
        assert line in theirs.stdout + theirs.stderr, (theirs.stdout[-500:], theirs.stderr[-500:])
        assert ours.returncode == theirs.returncode == 1, ours.stderr
        assert line in ours.stderr and "Traceback" not in ours.stderr, ours.stderr


def _forwarded(served):
    """What the parameters model sees of forwarded headers, over gRPC
    (ModelInfer, ModelStreamInfer) and HTTP."""
    import json
    import queue

    import numpy
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    headers = {"x-fwd-a": 'a "quoted" string with a backslash\\ ', "x-fwd-a2": "  leading", "x-fwd-b": "b",
               "x-other": "o"}
    seen = {}
    for name, module, url in (("grpc", grpcclient, served.grpc_url), ("http", httpclient, served.http_url)):
        tensor = module.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(numpy.zeros(1, numpy.float32))
        with module.InferenceServerClient(url) as client:
            seen[name] = json.loads(client.infer("parameters", [tensor], headers=headers).as_numpy("PARAMETERS")[0])
            if module is grpcclient:
                got = queue.Queue()
                client.start_stream(callback=lambda result, error: got.put((result, error)), headers=headers)
                try:
                    client.async_stream_infer("parameters", [tensor])
                    result, error = got.get(timeout=60)
                finally:
                    client.stop_stream()
                assert error is None, error
                seen["grpc stream"] = json.loads(result.as_numpy("PARAMETERS")[0])
    return seen


@pytest.mark.python_stub  # the binary runs the python model on the stub (numpy<2)
def test_header_forward_patterns_in_re2_syntax_as_the_binary(backend_directory, tmp_path):
    """The binary compiles a forward pattern with RE2, after "(?i)" (header
    names are case-insensitive): a pattern's own inline flags, here a
    global "(?-i)" and "(?i)" mid-pattern, set them to the end of their
    group (an alternative included); the values reach the model as sent,
    leading and trailing spaces included (the native gRPC transport reset
    such a stream, and refused the pattern)."""
    pattern = "(?-i)x-(?i)FWD-A|(?-i)X-FWD-B"
    flags = ["--model-control-mode=explicit", "--load-model=parameters", "--grpc-header-forward-pattern", pattern,
             "--http-header-forward-pattern", pattern]
    with server_process(reference_command(), MODELS, flags, log_dir=tmp_path) as binary:
        theirs = _forwarded(binary)
    with server_process(package_serve_command(), MODELS, flags, backend_directory=backend_directory,
                        log_dir=tmp_path) as package:
        ours = _forwarded(package)
    expected = {"x-fwd-a": 'a "quoted" string with a backslash\\ ', "x-fwd-a2": "  leading"}
    assert theirs["grpc"] == theirs["grpc stream"] == expected, theirs
    assert ours == theirs
