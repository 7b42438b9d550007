"""tritonserver.frontend.Metrics: the server's Prometheus metrics over HTTP,
as the binary's metrics port serves them."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

import tritonserver
from tritonserver.frontend import Metrics

from common import fp32, identity


def get(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def test_metrics_serves_the_servers_prometheus_text(server, model):
    m = model("identity_fp32")
    before = m.statistics()["model_stats"][0]["inference_count"]
    identity(m, fp32(1, 2))
    with Metrics(server, Metrics.Options(address="127.0.0.1", port=0)) as metrics:
        status, content_type, body = get(f"http://127.0.0.1:{metrics.port}/metrics")
    assert status == 200 and content_type == "text/plain; charset=utf-8"
    line = next(line for line in body.decode().splitlines()
                if line.startswith('nv_inference_count{model="identity_fp32",version="1"}'))
    assert int(float(line.split()[-1])) >= before + 1


def test_custom_metrics_are_served(server):
    family = tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, "frontend_test_gauge", "a test gauge")
    gauge = tritonserver.Metric(family, {"where": "frontend"})
    gauge.set_value(42)
    with Metrics(server, Metrics.Options(address="127.0.0.1", port=0)) as metrics:
        _, _, body = get(f"http://127.0.0.1:{metrics.port}/metrics")
    assert 'frontend_test_gauge{where="frontend"} 42' in body.decode()


def test_other_paths_and_methods_answer_as_the_binary(server):
    with Metrics(server, Metrics.Options(address="127.0.0.1", port=0)) as metrics:
        assert get(f"http://127.0.0.1:{metrics.port}/elsewhere")[::2] == (200, b"")
        status, _, body = get(f"http://127.0.0.1:{metrics.port}/metrics", method="POST")
    assert status == 405 and b"Method Not Allowed" in body


@pytest.fixture(scope="module")
def binary_metrics_url():
    import common

    with common.server_process(common.reference_command(), common.MODELS, ["--model-control-mode=explicit"]) as binary:
        yield binary.metrics_url


# The binary serves its metrics where the whole path matches "/metrics/?"
# (a query aside); elsewhere 200 with an empty body.
@pytest.mark.parametrize("path", ["/metrics", "/metrics/", "/metrics?name=x", "/metrics/?name=x", "/metricsx",
                                  "/metrics/x", "/METRICS", "/"])
def test_each_path_is_served_as_by_the_binary(server, binary_metrics_url, path):
    theirs = get(f"http://{binary_metrics_url}{path}")
    with Metrics(server, Metrics.Options(address="127.0.0.1", port=0)) as metrics:
        ours = get(f"http://127.0.0.1:{metrics.port}{path}")
    assert ours[:2] == theirs[:2] == (200, "text/plain; charset=utf-8")
    assert (b"# TYPE nv_" in ours[2]) == (b"# TYPE nv_" in theirs[2]), (path, ours[2][:200], theirs[2][:200])
    assert (ours[2] == b"") == (theirs[2] == b"")


def test_a_port_in_use_is_an_error_naming_it(server):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(tritonserver.UnavailableError, match=f"127.0.0.1:{port}: Address already in use"):
            Metrics(server, Metrics.Options(address="127.0.0.1", port=port)).start()


def test_stop_frees_the_port_and_start_again_serves(server):
    metrics = Metrics(server, Metrics.Options(address="127.0.0.1", port=0))
    metrics.start()
    port = metrics.port
    metrics.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    again = Metrics(server, Metrics.Options(address="127.0.0.1", port=port))
    with again:
        assert get(f"http://127.0.0.1:{port}/metrics")[0] == 200


@pytest.mark.parametrize("field, value, wanted", [
    ("port", 65536, "an int from 0 to 65535"), ("port", "8002", "an int"), ("thread_count", 0, "an int >= 1"),
    ("address", "", "an IP address or host name"),
])
def test_bad_options_name_the_field(field, value, wanted):
    with pytest.raises(tritonserver.InvalidArgumentError, match=f"Metrics.Options.{field} must be {wanted}"):
        Metrics.Options(**{field: value})


def test_options_of_another_type_are_refused(server):
    with pytest.raises(tritonserver.InvalidArgumentError, match="must be of type Metrics.Options"):
        Metrics(server, {"port": 0})  # type: ignore[arg-type]
