"""Custom metrics: families and labelled counters/gauges, reported with
Triton's own metrics by ``Server.metrics()``."""

from __future__ import annotations

from typing import Optional

from .. import _native
from . import _triton_core
from ._enums import MetricKind
from ._checks import text as _text


class MetricFamily:
    """A named family of metrics of one kind.

    Example:
        >>> family = MetricFamily(MetricKind.COUNTER, "requests_total", "Requests seen")
        >>> Metric(family, {"model": "add_sub"}).increment(1)
    """

    def __init__(self, kind: MetricKind, name: str, description: str) -> None:
        _triton_core.load_core()
        _text("MetricFamily name", name)
        _text("MetricFamily description", description)
        self._family = _native.MetricFamily(int(MetricKind(kind)), name, description)
        self.kind = MetricKind(kind)
        self.name = name
        self.description = description


class Metric:
    """One metric of a family, identified by its labels."""

    def __init__(self, family: MetricFamily, labels: Optional[dict[str, str]] = None) -> None:
        pairs = [(str(k), str(v)) for k, v in (labels or {}).items()]
        for key, value in pairs:
            _text("Metric label name", key)
            _text(f"Metric label {key!r}", value)
        self._metric = _native.Metric(family._family, pairs)
        self.family = family

    @property
    def value(self) -> float:
        """Current value."""
        return self._metric.value

    @property
    def kind(self) -> MetricKind:
        """The family's kind."""
        return MetricKind(self._metric.kind)

    def increment(self, value: float) -> None:
        """Add `value` (counters: must not be negative)."""
        self._metric.increment(float(value))

    def set_value(self, value: float) -> None:
        """Set a gauge (counters raise)."""
        self._metric.set_value(float(value))
