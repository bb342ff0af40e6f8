"""The I-JSON document decoder: whole payloads parsed, violations marked where they occur (CIS-ECO-2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invocation_store.kernel._ijson import (
    DOCUMENT_MAX_DEPTH,
    UNREPRESENTABLE,
    DuplicateMembers,
    check_arguments,
    load_document,
    violates_ijson,
)


def test_marks_are_put_where_the_violation_is() -> None:
    """CIS-ECO-2, CIS-JSON-2, CIS-JSON-3, CIS-JSON-6: the rest of the document reads normally."""
    text = (
        '{"ok": {"a": 1}, "dup": {"a": 1, "a": 2}, "nan": NaN, "inf": -Infinity, '
        '"big": 1e999, "long": ' + "7" * 5000 + ', "fine": [1.5, 2]}'
    )
    document = load_document(text)
    assert type(document) is dict
    assert type(document["ok"]) is dict
    assert isinstance(document["dup"], DuplicateMembers)
    assert document["dup"] == {"a": 2}  # like json.loads, the last value is kept ...
    assert violates_ijson(document["dup"])  # ... but the object is known to be invalid
    for key in ("nan", "inf", "big", "long"):
        assert document[key] is UNREPRESENTABLE
        assert violates_ijson({"x": document[key]})
    assert not violates_ijson(document["ok"])
    assert not violates_ijson(document["fine"])


def test_text_that_is_not_json_or_too_deep_raises() -> None:
    """CIS-ECO-2, CIS-JSON-5: syntax errors keep their position; depth is refused before parsing."""
    with pytest.raises(json.JSONDecodeError) as info:
        load_document('{"a": }')
    assert (info.value.lineno, info.value.colno) == (1, 7)
    deep = "[" * (DOCUMENT_MAX_DEPTH + 1) + "]" * (DOCUMENT_MAX_DEPTH + 1)
    with pytest.raises(ValueError, match="nested too deeply"):
        load_document(deep)
    assert load_document("[" * DOCUMENT_MAX_DEPTH + "]" * DOCUMENT_MAX_DEPTH) is not None
    with pytest.raises(TypeError):
        load_document(b"{}")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        {"s": "\ud800"},
        {"\udc00": 1},
        {"f": float("nan")},
        {"o": object()},
        {1: "non-string name"},
        [{"a": [{"b": DuplicateMembers(c=1)}]}],
    ],
)
def test_violations_found_anywhere(value: Any) -> None:
    """CIS-ECO-2, CIS-JSON-4: lone surrogates, non-finite floats, non-JSON values, at any depth."""
    assert violates_ijson(value)


def test_depth_and_cycles_never_raise() -> None:
    """CIS-ECO-2, CIS-JSON-5: 64 levels are fine, 65 are not; a cycle is too deep, not a crash."""
    value: Any = 1
    for _ in range(64):
        value = {"a": value}
    assert not violates_ijson(value)
    assert violates_ijson({"a": value})
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert violates_ijson(cyclic)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=25,
)


@given(st.dictionaries(st.text(), _json, max_size=5))
def test_agrees_with_the_argument_check_on_valid_documents(value: dict[str, Any]) -> None:
    """CIS-ECO-2: a document the argument check accepts decodes unmarked, to the same value."""
    text = json.dumps(value, ensure_ascii=False)
    if check_arguments(text) is None:
        decoded = load_document(text)
        assert decoded == json.loads(text)
        assert not violates_ijson(decoded)


def test_the_unrepresentable_mark_reads_as_its_name() -> None:
    """CIS-ECO-2: the mark shows as ``UNREPRESENTABLE`` wherever a decoded document is printed."""
    assert repr(UNREPRESENTABLE) == "UNREPRESENTABLE"
    assert repr(load_document('{"n": NaN}')) == "{'n': UNREPRESENTABLE}"


@pytest.mark.parametrize("container", [list, tuple], ids=["list", "tuple"])
def test_array_depth_counts_one_level_per_array(container: type) -> None:
    """CIS-ECO-2, CIS-JSON-5: arrays nest like objects: 64 levels are fine, 65 are not."""
    value: Any = 1
    for _ in range(64):
        value = container([value])
    assert not violates_ijson(value)
    assert violates_ijson(container([value]))
    assert violates_ijson({"a": value})
    mixed: Any = 1
    for level in range(64):
        mixed = [mixed] if level % 2 else {"a": mixed}
    assert not violates_ijson(mixed)
    assert violates_ijson([mixed])


def test_load_document_errors_say_what_is_wrong() -> None:
    """CIS-ECO-2, CIS-JSON-5: the two refusals of a document carry fixed texts, no document content."""
    with pytest.raises(TypeError) as wrong_type:
        load_document(b"{}")  # type: ignore[arg-type]
    assert wrong_type.value.args == ("a JSON document is a str",)
    deep = "[" * (DOCUMENT_MAX_DEPTH + 1) + "]" * (DOCUMENT_MAX_DEPTH + 1)
    with pytest.raises(ValueError) as too_deep:
        load_document(deep)
    assert too_deep.value.args == ("nested too deeply",)
