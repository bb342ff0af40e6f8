"""The preflight parses the arguments once and hands out the object (CIS-PERF-2)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from invocation_store.boundary import copy_json
from invocation_store.kernel import (
    ErrorCode,
    Limits,
    RunContext,
    ToolCallEnvelope,
    ToolPolicy,
    check_arguments,
    check_envelope,
)
from invocation_store.kernel._ijson import parse_arguments
from invocation_store.kernel._preflight import parse_envelope

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)
TEXTS = st.one_of(
    st.dictionaries(st.text(max_size=5), JSON, max_size=4).map(json.dumps),
    st.text(max_size=30),
    JSON.map(json.dumps),
    st.sampled_from(['{"a":1,"a":2}', '{"a":NaN}', '{"a":"\\ud800"}', "[" * 100 + "]" * 100, "\ufeff{}"]),
)
CONTEXT = RunContext(run_id="run-1")
POLICY = ToolPolicy(name="t", authorized=True, read_only=True)


@given(TEXTS)
def test_parse_arguments_agrees_with_check_arguments(text: str) -> None:
    """CIS-PERF-2, CIS-JSON-1: parse_arguments accepts exactly what check_arguments does, and parses it."""
    parsed = parse_arguments(text)
    if check_arguments(text) is None:
        assert isinstance(parsed, dict)
        assert parsed == json.loads(text)
    else:
        assert parsed is ErrorCode.INVALID_ARGUMENTS


@given(TEXTS, st.sampled_from(["call_1", "", "bad id"]), st.sampled_from(["t", "u"]))
def test_parse_envelope_agrees_with_check_envelope(text: str, tool_call_id: str, tool_name: str) -> None:
    """CIS-PERF-2, CIS-PRE-2: same checks, same order, same codes; the parsed object on success."""
    envelope = ToolCallEnvelope(
        run_id="run-1", tool_call_id=tool_call_id, tool_name=tool_name, arguments=text
    )
    code = check_envelope(CONTEXT, envelope, POLICY, Limits())
    parsed = parse_envelope(CONTEXT, envelope, POLICY, Limits())
    if code is None:
        assert parsed == json.loads(text)
    else:
        assert parsed is code


@given(JSON)
def test_copy_json_is_equal_and_independent(value: Any) -> None:
    """CIS-PERF-2: a copy equals the original and shares no object or array with it."""
    copy = copy_json(value)
    assert json.dumps(copy) == json.dumps(value)

    def containers(v: Any) -> list[int]:
        if isinstance(v, dict):
            return [id(v), *(i for item in v.values() for i in containers(item))]
        if isinstance(v, list):
            return [id(v), *(i for item in v for i in containers(item))]
        return []

    original = containers(value)
    assert not set(containers(copy)) & set(original)
