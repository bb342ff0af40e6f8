"""The trace format: schema, model, fast checker and strict cattrs codec agree (issue 6, step 1)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invocation_store.adapters import MemoryStore
from invocation_store.oracle import (
    LINE_TYPES,
    TRACE_FORMAT,
    TRACE_VERSION,
    ShapeError,
    check_lines,
    line_checker,
    structure_line,
    trace_schema,
)
from invocation_store.testing import FakeClock

from ._scenario import record_scenario

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "spec" / "trace.schema.json").read_text(encoding="utf-8"))

# The keywords our generated schema uses; the validator below implements exactly these.
_ANNOTATIONS = {"$schema", "$id", "title", "description", "x-requirements", "$defs"}
_KEYWORDS = {
    "type",
    "enum",
    "const",
    "minimum",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "propertyNames",
    "$ref",
    "oneOf",
    "not",
}
_TYPES = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}


def _keywords(schema: Any, found: set[str]) -> None:
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    _keywords(sub, found)
            elif key in ("items", "additionalProperties", "propertyNames", "not") and isinstance(value, dict):
                _keywords(value, found)
            elif key == "oneOf":
                for sub in value:
                    _keywords(sub, found)


def _valid(value: Any, schema: dict[str, Any]) -> bool:
    """JSON Schema 2020-12 validation, restricted to the keywords in ``_KEYWORDS``."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        if not _valid(value, SCHEMA["$defs"][name]):
            return False
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            return False
    if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
        return False
    if "const" in schema and not (value == schema["const"] and type(value) is type(schema["const"])):
        return False
    if "minimum" in schema and type(value) is int and value < schema["minimum"]:
        return False
    if "not" in schema and _valid(value, schema["not"]):
        return False
    if "oneOf" in schema and sum(_valid(value, sub) for sub in schema["oneOf"]) != 1:
        return False
    if type(value) is dict:
        properties = schema.get("properties", {})
        if any(key not in value for key in schema.get("required", [])):
            return False
        for key, item in value.items():
            if key in properties:
                if not _valid(item, properties[key]):
                    return False
            elif schema.get("additionalProperties") is False or (
                isinstance(schema.get("additionalProperties"), dict)
                and not _valid(item, schema["additionalProperties"])
            ):
                return False
            if "propertyNames" in schema and not _valid(key, schema["propertyNames"]):
                return False
    if type(value) is list and "items" in schema:
        return all(_valid(item, schema["items"]) for item in value)
    return True


@pytest.fixture(scope="module")
def recorded_lines() -> list[dict[str, Any]]:
    clock = FakeClock()
    return [json.loads(text) for text in record_scenario(MemoryStore(clock), clock).splitlines()]


def test_schema_file_is_the_model() -> None:
    """CIS-ORC-1: spec/trace.schema.json is draft 2020-12, versioned, and describes every line kind."""
    assert json.loads(json.dumps(trace_schema())) == SCHEMA
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert f"v{TRACE_VERSION}" in SCHEMA["title"]
    assert TRACE_FORMAT in SCHEMA["title"]
    assert [ref["$ref"].rsplit("/", 1)[1] for ref in SCHEMA["oneOf"]] == list(LINE_TYPES)
    for op, cls in LINE_TYPES.items():
        definition = SCHEMA["$defs"][op]
        assert definition["properties"]["op"] == {"const": op}
        assert set(definition["properties"]) == {"op"} | {a.name for a in attrs.fields(cls)}
        assert definition["additionalProperties"] is False
        assert definition["x-requirements"], op
    found: set[str] = set()
    _keywords(SCHEMA, found)
    assert found - _ANNOTATIONS <= _KEYWORDS, found - _ANNOTATIONS - _KEYWORDS


def test_recorded_and_example_lines_satisfy_the_schema(recorded_lines: list[dict[str, Any]]) -> None:
    """CIS-ORC-1: every line we record, and the shipped example, is valid against the JSON Schema."""
    example = (ROOT / "spec" / "examples" / "example-trace.jsonl").read_text(encoding="utf-8").splitlines()
    lines = recorded_lines + [json.loads(text) for text in example]
    invalid = [line["op"] for line in lines if not _valid(line, SCHEMA)]
    assert invalid == []


def test_schema_rejects_what_the_checker_rejects(recorded_lines: list[dict[str, Any]]) -> None:
    """CIS-ORC-1, CIS-CODEC-1: typical coercions are invalid for the schema and the checker alike."""
    submit = next(line for line in recorded_lines if line["op"] == "submit" and line["observed"]["record"])
    mutants = [
        {**submit, "call": "1"},
        {**submit, "call": True},
        {**submit, "call": 1.0},
        {**submit, "extra": 1},
        {**submit, "policy": {**submit["policy"], "authorized": "true"}},
        {**submit, "observed": {**submit["observed"], "code": "NOT_A_CODE"}},
        {k: v for k, v in submit.items() if k != "token"},
        {**submit, "op": "sumbit"},
    ]
    for mutant in mutants:
        assert not _valid(mutant, SCHEMA), mutant
        assert not _fast_accepts(mutant), mutant
        with pytest.raises(ShapeError):
            structure_line(mutant)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda children: (
        st.lists(children, max_size=2) | st.dictionaries(st.text(max_size=3), children, max_size=2)
    ),
    max_leaves=4,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _mutate(line: dict[str, Any], path: tuple[Any, ...], action: str, new: Any) -> dict[str, Any]:
    line = json.loads(json.dumps(line))
    if not path:
        return line
    parent: Any = line
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if action == "replace":
        parent[last] = new
    elif action == "delete" and isinstance(parent, dict):
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent["zz_extra"] = new
    return line


def _fast_accepts(line: dict[str, Any]) -> bool:
    cls = LINE_TYPES.get(line.get("op")) if type(line.get("op")) is str else None
    if cls is None:
        return False
    try:
        line_checker(cls)(line)
    except ShapeError:
        return False
    return True


def _cattrs_accepts(line: dict[str, Any]) -> bool:
    try:
        structure_line(line)
    except ShapeError:
        return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fast_checker_agrees_with_strict_cattrs(
    recorded_lines: list[dict[str, Any]], data: st.DataObject
) -> None:
    """CIS-CODEC-1, CIS-ORC-1: on recorded lines with one random change (a value replaced by any JSON
    value, a member deleted, an unknown member added) the fast checker and the strict cattrs codec
    accept and reject the same lines, and the schema agrees with them."""
    line = data.draw(st.sampled_from(recorded_lines))
    path = data.draw(st.sampled_from(_paths(line)))
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    mutant = _mutate(line, path, action, data.draw(_JSON))
    fast, strict = _fast_accepts(mutant), _cattrs_accepts(mutant)
    assert fast == strict, (path, action, mutant)
    assert _valid(mutant, SCHEMA) == fast, (path, action, mutant)


@settings(
    max_examples=int(os.environ.get("ORACLE_FUZZ_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_checker_never_raises_on_mutated_traces(
    recorded_lines: list[dict[str, Any]], data: st.DataObject
) -> None:
    """CIS-ORC-2: whatever one line of a real trace is changed into, or whichever two lines swap
    places, check-trace answers 0, 1 or 2 with a report; it never raises."""
    lines = [json.loads(json.dumps(line)) for line in recorded_lines]
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(lines) - 1))
        if data.draw(st.booleans()):
            other = data.draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        else:
            path = data.draw(st.sampled_from(_paths(lines[index])))
            action = data.draw(st.sampled_from(["replace", "delete", "add"]))
            lines[index] = _mutate(lines[index], path, action, data.draw(_JSON))
    text = "".join(json.dumps(line) + "\n" for line in lines)
    report = check_lines(text.splitlines(keepends=True))
    assert report.exit_code in (0, 1, 2)
    if report.divergence is not None:
        assert report.divergence.requirement.startswith("CIS-")
        report.divergence.render()
