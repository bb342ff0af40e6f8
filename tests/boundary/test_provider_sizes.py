"""Size first for object arguments: measured while serialized, never walked past the limit (CIS-SIZE-2).

Anthropic ``input``, Gemini ``args`` and Responses action objects are serialized by
``serialize_object``, which counts UTF-8 bytes as it writes and stops as soon as the
count passes ``request_bytes``; preflight then answers REQUEST_TOO_LARGE. Within the
limit its text is exactly ``json.dumps(sort_keys=True, ensure_ascii=False,
separators=(",", ":"))``. Time and memory for 137 MB objects are measured in
``benchmarks/bench_providers.py``, not asserted here.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invocation_store import (
    ErrorCode,
    Limits,
    RunContext,
    envelopes_from_anthropic,
    envelopes_from_gemini,
    envelopes_from_openai_responses,
)
from invocation_store.kernel import ToolPolicy, check_envelope
from invocation_store.kernel._ijson import DuplicateMembers, violates_ijson
from invocation_store.providers._common import DEFAULT_REQUEST_BYTES, oversized_text, serialize_object

RUN = "run-sizes"

_json: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)


def _dumps(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(value=st.dictionaries(st.text(max_size=6), _json, max_size=5))
def test_within_the_limit_the_text_is_json_dumps(value: dict[str, Any]) -> None:
    """CIS-SIZE-2, CIS-ECO-2: the deterministic serialization, or None exactly where I-JSON is broken."""
    expected = None if violates_ijson(value) else _dumps(value)
    assert serialize_object(value, 1 << 20) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"x": math.nan},
        {"x": [1, math.inf]},
        {1: "a"},
        {"s": "\ud800"},
        {"\udc00": 1},
        {"d": DuplicateMembers({"a": 1})},
        {"o": object()},
        {"n": 10**5000},
        {"a": {"a": {"a": {}}}},  # depth 4 > max_depth 3
    ],
    ids=["nan", "inf", "int-key", "surrogate", "surrogate-key", "duplicate", "object", "huge-int", "deep"],
)
def test_violations_before_the_limit_are_invalid_arguments(value: dict[Any, Any]) -> None:
    """CIS-ECO-2, CIS-JSON-2..6: the same breaches the string rule refuses give no arguments text."""
    assert serialize_object(value, 1 << 20, max_depth=3) is None


def test_a_cycle_is_refused_not_looped_on() -> None:
    """CIS-JSON-5: a cyclic value is too deep, never a hang or a RecursionError."""
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert serialize_object(cyclic) is None


def test_the_limit_is_utf8_bytes_and_exact() -> None:
    """CIS-SIZE-1, CIS-SIZE-2: a text of exactly the limit passes; one byte more is refused."""
    value = {"s": "é" * 100}  # 2 bytes per character
    text = _dumps(value)
    size = len(text.encode("utf-8"))
    assert serialize_object(value, size) == text
    assert serialize_object(value, size - 1) == oversized_text(size - 1)
    assert len(text) < size - 1  # fewer code points than the limit: the bytes decide


class _Counting(list[Any]):
    """A list that counts how many of its members are visited."""

    visited = 0

    def __iter__(self) -> Any:
        for item in list.__iter__(self):
            _Counting.visited += 1
            yield item


def test_nothing_past_the_limit_is_visited() -> None:
    """CIS-SIZE-2: the walk stops at the limit; a container too long for it is refused unread."""
    _Counting.visited = 0
    members = _Counting(["x" * 1000] * 100_000)  # about 100 MB of JSON
    assert serialize_object({"m": members}, 10_000) == oversized_text(10_000)
    assert _Counting.visited <= 11
    _Counting.visited = 0
    assert serialize_object({"m": _Counting([0] * 50_000)}, 10_000) == oversized_text(10_000)
    assert _Counting.visited == 0  # 50,000 members need more than 10,000 bytes: not read at all
    wide = dict.fromkeys((str(i) for i in range(10_000)), 0)
    assert serialize_object(wide, 10_000) == oversized_text(10_000)  # not even sorted


def test_an_oversized_text_can_never_parse_nor_run() -> None:
    """CIS-SIZE-2: the stand-in text is over the limit and no JSON value, whatever limit preflight uses."""
    text = oversized_text(100)
    assert len(text.encode("utf-8")) == 101
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


POLICY = ToolPolicy(name="get_weather", authorized=True, read_only=True)
SHELL = ToolPolicy(name="shell_call", authorized=True, read_only=True)


def _big(n: int) -> dict[str, Any]:
    return {"rows": [{"id": i, "text": "y" * 90} for i in range(n)]}


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai-responses"])
def test_every_object_argument_provider_refuses_size_first(provider: str) -> None:
    """CIS-SIZE-2, CIS-ECO-2: a 5 MB object is REQUEST_TOO_LARGE on each provider; a wider limit admits it."""
    value = _big(50_000)
    if provider == "anthropic":
        turn: Any = {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": value}],
        }
        parse: Any = envelopes_from_anthropic
        policy = POLICY
    elif provider == "gemini":
        turn = {
            "role": "model",
            "parts": [{"functionCall": {"id": "g1", "name": "get_weather", "args": value}}],
        }
        parse = envelopes_from_gemini
        policy = POLICY
    else:
        turn = [{"type": "shell_call", "call_id": "s1", "action": value}]
        parse = envelopes_from_openai_responses
        policy = SHELL
    (envelope,) = parse(turn, RUN)
    assert envelope.arguments == oversized_text(DEFAULT_REQUEST_BYTES)
    context = RunContext(run_id=RUN)
    assert check_envelope(context, envelope, policy, Limits()) is ErrorCode.REQUEST_TOO_LARGE
    wide = Limits(request_bytes=8 << 20)
    (admitted,) = parse(turn, RUN, request_bytes=wide.request_bytes)
    assert admitted.arguments == _dumps(value)
    assert check_envelope(context, admitted, policy, wide) is None
