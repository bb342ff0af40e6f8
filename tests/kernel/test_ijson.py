"""I-JSON argument validation examples (RFC 7493), one rule per test (CIS-JSON-1..6)."""

from __future__ import annotations

import pytest

from invocation_store.kernel import ErrorCode, check_arguments

INVALID = ErrorCode.INVALID_ARGUMENTS


@pytest.mark.parametrize(
    "text",
    ["{}", '{"a":1}', ' \n{"a": [1, "x", null, true, false, 1.5e3]}\t', '{"nested": {"a": {"b": []}}}'],
)
def test_objects_are_accepted(text: str) -> None:
    """CIS-JSON-1: one JSON object, with surrounding JSON whitespace, is valid."""
    assert check_arguments(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "{}{}",
        '{"a":1} {"b":2}',
        "{} x",
        "[]",
        "[{}]",
        "null",
        "1",
        '"{}"',
        "true",
        "\ufeff{}",
        "{",
        "}",
    ],
)
def test_anything_but_one_object_is_invalid(text: str) -> None:
    """CIS-JSON-1: empty text, trailing data, arrays, scalars, a leading BOM or broken text are invalid."""
    assert check_arguments(text) is INVALID


@pytest.mark.parametrize("value", [None, b"{}", 7, {"a": 1}, ["{}"]])
def test_non_text_arguments_are_invalid(value: object) -> None:
    """CIS-JSON-1: arguments that are not a str are INVALID_ARGUMENTS, never an exception."""
    assert check_arguments(value) is INVALID


@pytest.mark.parametrize(
    "text", ['{"a":1,"a":2}', '{"a":1,"a":1}', '{"o":{"k":1,"k":2}}', '{"l":[{"x":0,"x":0}]}']
)
def test_duplicate_member_names_are_invalid(text: str) -> None:
    """CIS-JSON-2: duplicate member names, at any depth, even with equal values, are invalid."""
    assert check_arguments(text) is INVALID


def test_same_name_in_different_objects_is_fine() -> None:
    """CIS-JSON-2: a name repeated in sibling objects is not a duplicate."""
    assert check_arguments('{"a":{"x":1},"b":{"x":2}}') is None


@pytest.mark.parametrize(
    "text", ['{"a":NaN}', '{"a":Infinity}', '{"a":-Infinity}', '{"a":1e999}', '{"a":-1e400}', '{"a":[NaN]}']
)
def test_nan_infinity_and_overflow_are_invalid(text: str) -> None:
    """CIS-JSON-3: NaN, Infinity and numbers overflowing a double are invalid."""
    assert check_arguments(text) is INVALID


def test_large_but_finite_numbers_are_fine() -> None:
    """CIS-JSON-3: finite doubles at the edge of the range are valid."""
    assert check_arguments('{"a":1.7976931348623157e308,"b":5e-324,"c":-0.0}') is None


@pytest.mark.parametrize(
    "text",
    [
        '{"q":"\\ud800"}',
        '{"q":"\\uDFFF"}',
        '{"q":"\\ude00\\ud83d"}',
        '{"\\ud800":1}',
        '{"q":"x\\ud83d"}',
        '{"q":"\ud800"}',
        '{"\udc00":1}',
    ],
    ids=repr,
)
def test_lone_surrogates_are_invalid(text: str) -> None:
    """CIS-JSON-4: lone surrogates, escaped or raw, in values or names, are invalid."""
    assert check_arguments(text) is INVALID


def test_valid_surrogate_pairs_and_unicode_are_fine() -> None:
    """CIS-JSON-4: an escaped surrogate pair and raw astral characters are valid Unicode."""
    assert check_arguments('{"q":"\\ud83d\\ude00","r":"\U0001f600","s":"\\u00e9"}') is None


def test_nesting_depth_is_bounded() -> None:
    """CIS-JSON-5: depth up to the limit is valid, one more is invalid; brackets in strings do not count."""
    assert check_arguments('{"a":' * 64 + "1" + "}" * 64) is None
    assert check_arguments('{"a":' * 65 + "1" + "}" * 65) is INVALID
    assert check_arguments("{" + '"a":' + "[" * 63 + "]" * 63 + "}") is None
    assert check_arguments("{" + '"a":' + "[" * 64 + "]" * 64 + "}") is INVALID
    assert check_arguments('{"a":' * 3 + "1" + "}" * 3, max_depth=2) is INVALID
    assert check_arguments('{"s":"' + "[{" * 500 + '"}') is None
    assert check_arguments('{"s":"\\"' + "[{" * 500 + '"}') is None


@pytest.mark.parametrize("depth", [100, 10_000, 100_000])
def test_extreme_nesting_never_reaches_the_parser(depth: int) -> None:
    """CIS-JSON-5: 100,000 levels of nesting are INVALID_ARGUMENTS, never a RecursionError."""
    assert check_arguments("[" * depth + "]" * depth) is INVALID
    assert check_arguments('{"a":' * depth + "1" + "}" * depth) is INVALID
    assert check_arguments("{" * depth) is INVALID


def test_oversized_integers_are_rejected_not_crashed_on() -> None:
    """CIS-JSON-6: integers over Python's 4300-digit conversion limit are invalid; 4300 digits are fine."""
    assert check_arguments('{"a":' + "9" * 4300 + "}") is None
    assert check_arguments('{"a":' + "9" * 4301 + "}") is INVALID
    assert check_arguments('{"a":-' + "1" * 5000 + "}") is INVALID
    assert check_arguments('{"a":[' + "7" * 5000 + "]}") is INVALID
