"""One OpenTelemetry SDK setup for the tests: in-memory span exporter and metric reader.

OpenTelemetry allows the global providers to be set once per process, so every test
module shares these; tests clear the exporter before they act.
"""

from __future__ import annotations

import functools

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@functools.cache
def exporters() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The process's span exporter and metric reader (installed on first use)."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return spans, reader
