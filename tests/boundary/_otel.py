"""One OpenTelemetry SDK setup for the tests: in-memory span exporter and metric reader.

OpenTelemetry allows the global providers to be set once per process, so every test
module shares these. Spans are sampled only inside :func:`recording` (a sampler gate),
so the rest of the suite's invokes neither pile up in memory nor pay for real spans.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult


class _Gate(Sampler):
    """Samples every span while open, none otherwise."""

    def __init__(self) -> None:
        self.open = False

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.RECORD_AND_SAMPLE if self.open else Decision.DROP)

    def get_description(self) -> str:
        return "test gate"


@functools.cache
def _installed() -> tuple[InMemorySpanExporter, InMemoryMetricReader, _Gate]:
    spans = InMemorySpanExporter()
    gate = _Gate()
    tracer_provider = TracerProvider(sampler=gate)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return spans, reader, gate


def metric_reader() -> InMemoryMetricReader:
    """The process's metric reader (installed on first use)."""
    return _installed()[1]


@contextlib.contextmanager
def recording() -> Iterator[InMemorySpanExporter]:
    """Record the spans of the enclosed block only; the exporter starts empty."""
    spans, _, gate = _installed()
    spans.clear()
    gate.open = True
    try:
        yield spans
    finally:
        gate.open = False
