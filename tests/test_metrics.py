"""Server.metrics() (Prometheus text) and custom metrics (MetricFamily,
Metric), against the real core's metrics registry."""

from __future__ import annotations

import gc
import re
import uuid

import numpy
import pytest

import tritonserver
from common import MODELS, make_options, single, wait_for


def unique(prefix: str) -> str:
    """Metric family names are process-global in the core: keep each test's own."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def sample(text: str, name: str, labels: str = "") -> float | None:
    """The value of one Prometheus sample line, or None if absent."""
    pattern = rf"(?m)^{re.escape(name)}{re.escape(labels)} (\S+)$"
    match = re.search(pattern, text)
    return None if match is None else float(match.group(1))



# -- Server.metrics() --------------------------------------------------------------

def test_metrics_is_prometheus_text(server):
    text = server.metrics()
    assert isinstance(text, str) and text
    assert re.search(r"(?m)^# HELP \w+ .+$", text)
    assert re.search(r"(?m)^# TYPE \w+ (counter|gauge|histogram|summary)$", text)
    assert server.metrics(tritonserver.MetricFormat.PROMETHEUS).splitlines()[0].startswith("# ")


def test_metrics_count_successful_requests(backend_directory, tmp_path):
    # Model metrics are process-wide in the core (shared by every server of
    # this process): a uniquely named model keeps the count to this test.
    name = unique("metrics_identity")
    (tmp_path / name / "1").mkdir(parents=True)
    config = (MODELS / "identity_fp32" / "config.pbtxt").read_text()
    (tmp_path / name / "config.pbtxt").write_text(config.replace('"identity_fp32"', f'"{name}"'))
    srv = tritonserver.Server(make_options(backend_directory, server_id="metrics-count",
                                           model_repository=str(tmp_path)))
    srv.start(wait_until_ready=True, timeout=30)
    try:
        model = srv.load(name)
        labels = f'{{model="{name}",version="1"}}'
        assert sample(srv.metrics(), "nv_inference_request_success", labels) in (None, 0.0)
        data = numpy.ones(2, dtype=numpy.float32)
        single(model.infer(inputs={"INPUT0": data}))
        assert wait_for(lambda: (sample(srv.metrics(), "nv_inference_request_success", labels) or 0) >= 1)
        single(model.infer(inputs={"INPUT0": data}))
        assert wait_for(lambda: sample(srv.metrics(), "nv_inference_request_success", labels) >= 2)
        text = srv.metrics()
        assert "# TYPE nv_inference_request_success counter" in text
        assert sample(text, "nv_inference_request_success", labels) == 2
    finally:
        srv.stop()


def test_metrics_include_cpu_memory(server):
    # cpu_metrics defaults to True; the gauge exists even where it reads 0.
    text = server.metrics()
    assert "# TYPE nv_cpu_memory_used_bytes gauge" in text
    assert sample(text, "nv_cpu_memory_used_bytes") is not None


# -- custom metrics ------------------------------------------------------------------

def test_counter_family_and_metric(server):
    name = unique("test_requests_total")
    family = tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, name, "Requests seen by the test")
    assert (family.kind, family.name, family.description) == (
        tritonserver.MetricKind.COUNTER, name, "Requests seen by the test")
    metric = tritonserver.Metric(family, {"model": "add_sub", "route": "a"})
    assert metric.kind == tritonserver.MetricKind.COUNTER
    assert metric.value == 0.0
    metric.increment(2)
    metric.increment(0.5)
    assert metric.value == 2.5
    text = server.metrics()
    assert f"# HELP {name} Requests seen by the test" in text
    assert f"# TYPE {name} counter" in text
    assert sample(text, name, '{model="add_sub",route="a"}') == 2.5


def test_counter_rejects_set_value_and_negative_increment():
    family = tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, unique("test_counter"), "c")
    metric = tritonserver.Metric(family, {"k": "v"})
    metric.increment(1)
    with pytest.raises(tritonserver.TritonError) as info:
        metric.set_value(5)
    assert isinstance(info.value, tritonserver.UnsupportedError)
    with pytest.raises(tritonserver.InvalidArgumentError):
        metric.increment(-1)
    assert metric.value == 1.0


def test_gauge_set_and_increment(server):
    name = unique("test_queue_depth")
    family = tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, name, "Queue depth")
    metric = tritonserver.Metric(family, {"queue": "q1"})
    assert metric.kind == tritonserver.MetricKind.GAUGE
    metric.set_value(7.5)
    metric.increment(-2)
    metric.increment(1)
    assert metric.value == 6.5
    text = server.metrics()
    assert f"# TYPE {name} gauge" in text
    assert sample(text, name, '{queue="q1"}') == 6.5


def test_metrics_of_one_family_are_independent_per_labels(server):
    name = unique("test_labelled")
    family = tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, name, "labelled")
    a = tritonserver.Metric(family, {"which": "a"})
    b = tritonserver.Metric(family, {"which": "b"})
    plain = tritonserver.Metric(family)
    a.set_value(1)
    b.set_value(2)
    plain.set_value(3)
    assert (a.value, b.value, plain.value) == (1.0, 2.0, 3.0)
    text = server.metrics()
    assert sample(text, name, '{which="a"}') == 1.0
    assert sample(text, name, '{which="b"}') == 2.0
    assert sample(text, name) == 3.0


def test_deleted_metric_leaves_the_output(server):
    name = unique("test_transient")
    family = tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, name, "transient")
    metric = tritonserver.Metric(family, {"k": "v"})
    metric.set_value(4)
    assert sample(server.metrics(), name, '{k="v"}') == 4.0
    del metric
    gc.collect()
    assert sample(server.metrics(), name, '{k="v"}') is None


def test_metric_keeps_its_family_alive(server):
    name = unique("test_orphan")
    family = tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, name, "orphan")
    metric = tritonserver.Metric(family, {"k": "v"})
    del family
    gc.collect()
    metric.increment(3)
    assert metric.value == 3.0
    assert sample(server.metrics(), name, '{k="v"}') == 3.0


def test_invalid_family_and_label_names_are_rejected():
    with pytest.raises(tritonserver.InvalidArgumentError):
        tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, "not a valid name!", "x")
    family = tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, unique("test_labels"), "x")
    with pytest.raises(tritonserver.InvalidArgumentError):
        tritonserver.Metric(family, {"not a label!": "v"})


def test_family_name_reused_with_another_kind_is_rejected():
    name = unique("test_kinds")
    family = tritonserver.MetricFamily(tritonserver.MetricKind.GAUGE, name, "x")
    with pytest.raises(tritonserver.InvalidArgumentError):
        tritonserver.MetricFamily(tritonserver.MetricKind.COUNTER, name, "x")
    assert family.kind == tritonserver.MetricKind.GAUGE
