"""Every JSON form of the limits is derived from ``Limits`` itself (CIS-CODEC-1, CIS-ORC-1).

The members of a limits object are read from the attrs class, never listed here: a
field added to :class:`~invocation_store.kernel.Limits` must appear in the codec's
form, the trace header (``TraceLimits``, its schema and the oracle's reading of it),
the history header (its schema and its reader), and every vector that carries limits,
without editing any other file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from invocation_store import codec
from invocation_store.history import decode_history, header_line
from invocation_store.history._schema import history_schema
from invocation_store.kernel import Begin, Event, Limits, Projection, ProjectionReceived
from invocation_store.oracle import (
    TRACE_FORMAT,
    TRACE_VERSION,
    MalformedTraceError,
    Oracle,
    generate_vectors,
    trace_schema,
)
from invocation_store.oracle._model import TraceLimits
from invocation_store.oracle._views import limits_view

ROOT = Path(__file__).resolve().parents[2]

#: The JSON members of a limits object, from the attrs class.
KEYS = [limit.name for limit in attrs.fields(Limits)]
#: Limits whose every value differs from its default and from every other one.
ODD = Limits(**{name: 1000 + index for index, name in enumerate(KEYS)})


def _limits_objects(value: Any) -> list[dict[str, Any]]:
    """Every object under a ``limits`` member anywhere in ``value``."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "limits" and isinstance(item, dict):
                found.append(item)
            found.extend(_limits_objects(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_limits_objects(item))
    return found


def test_the_codec_and_the_views_spell_limits_by_the_class_fields() -> None:
    """CIS-CODEC-1: the codec's form and the trace view have exactly the fields of Limits, and read back."""
    assert list(codec.unstructure(ODD)) == KEYS
    assert limits_view(ODD) == codec.unstructure(ODD)
    assert codec.limits_from_obj(limits_view(ODD)) == ODD
    assert [limit.name for limit in attrs.fields(TraceLimits)] == KEYS


def test_the_trace_header_schema_and_oracle_follow_limits() -> None:
    """CIS-ORC-1: the trace schema requires every Limits field in TraceLimits; the oracle reads them all."""
    definition = trace_schema()["$defs"]["TraceLimits"]
    assert list(definition["properties"]) == KEYS
    assert definition["required"] == KEYS
    oracle = Oracle()
    header = {"op": "header", "format": TRACE_FORMAT, "version": TRACE_VERSION, "now_ms": 0}
    assert oracle.feed(1, {**header, "limits": limits_view(ODD)}) is None
    assert oracle.limits == ODD


@pytest.mark.parametrize("missing", KEYS)
def test_a_trace_header_without_a_limit_is_malformed(missing: str) -> None:
    """CIS-ORC-1: each Limits field is required in a trace header."""
    limits = {name: value for name, value in limits_view(ODD).items() if name != missing}
    header = {"op": "header", "format": TRACE_FORMAT, "version": TRACE_VERSION, "now_ms": 0, "limits": limits}
    with pytest.raises(MalformedTraceError):
        Oracle().feed(1, header)


def test_the_history_header_schema_and_reader_follow_limits() -> None:
    """CIS-CODEC-1: the history header writes, requires and reads back every Limits field."""
    header = header_line(ODD)
    assert list(header["limits"]) == KEYS
    definition = history_schema()["$defs"]["Limits"]
    assert sorted(definition["properties"]) == sorted(KEYS)
    assert sorted(definition["required"]) == sorted(KEYS)
    history = decode_history([json.dumps(header)])
    assert history.limits == ODD


def test_every_vector_and_the_example_trace_carry_every_limit() -> None:
    """CIS-CODEC-1, CIS-SPEC-3: every limits object of the vectors and the example trace has every field."""
    objects = _limits_objects(generate_vectors())
    example = (ROOT / "spec" / "examples" / "example-trace.jsonl").read_text(encoding="utf-8")
    objects += _limits_objects([json.loads(line) for line in example.splitlines()])
    assert len(objects) > 100
    assert all(sorted(obj) == sorted(KEYS) for obj in objects)


def test_events_are_a_tagged_union_in_the_codec() -> None:
    """CIS-CODEC-1: an event's JSON form names its class under "type" and reads back strictly."""
    begin = Begin(
        run_id="run-1",
        tool_call_id="call_1",
        tool_name="search",
        request_json="{}",
        invocation_token="tok",
        sequence=1,
        ttl_ms=1000,
        now_ms=5,
    )
    obj = codec.converter.unstructure(begin, Event)
    assert obj["type"] == "Begin"
    assert codec.event_from_obj(obj) == begin
    with pytest.raises(codec.CodecError):
        codec.event_from_obj({**obj, "ttl_ms": True})
    with pytest.raises(codec.CodecError):
        codec.event_from_obj({**obj, "type": "Unknown"})
    # A projector's result is the kernel's to judge: an unknown status stays a string.
    odd = ProjectionReceived(projection=Projection(evidence_status="MAYBE", content="x"), now_ms=6)
    assert codec.event_from_obj(codec.converter.unstructure(odd, Event)) == odd
