"""Divergence messages name the most specific requirement and show the kernel's arithmetic (issue 13).

Each case is a planted fault of the kind an independent implementation made: the
message must name the requirement a reader of ``spec/requirements.md`` would look
up, and the computed quantities with their formula.
"""

from __future__ import annotations

import json
import re

from invocation_store.oracle import Divergence

from ._traces import Line, check, clone, example, find, op


def _divergence(lines: list[Line]) -> Divergence:
    report = check(lines)
    assert report.malformed is None, report.malformed
    assert report.divergence is not None, "the trace conforms"
    return report.divergence


def test_a_duplicate_consuming_budget_is_the_budget_rule() -> None:
    """CIS-RUN-5: a refused duplicate that consumed budget shows up as the next record's sequence:
    named CIS-RUN-5, with sequence = tool_calls_used + 1 written out."""
    lines = example()
    index = find(lines, op("submit", call=3))
    lines[index]["observed"]["record"]["sequence"] = 3
    divergence = _divergence(lines)
    assert (divergence.line, divergence.requirement) == (index + 1, "CIS-RUN-5")
    assert "sequence = tool_calls_used + 1 = 1 + 1 = 2" in divergence.message
    assert (divergence.expected, divergence.observed) == (2, 3)


def test_a_raw_limit_in_characters_shows_the_utf8_bytes() -> None:
    """CIS-SIZE-3, CIS-SIZE-1: a raw response measured in characters instead of UTF-8 bytes; the
    message says size(raw) = 66 UTF-8 bytes > raw_bytes = 64."""
    lines = example()
    lines[0]["limits"]["raw_bytes"] = 64
    index = find(lines, op("execute", call=1))
    lines[index]["outcome"]["raw"] = "\u00e9" * 33  # 33 characters, 66 bytes
    divergence = _divergence(lines)
    assert (divergence.line, divergence.requirement) == (index + 1, "CIS-SIZE-3")
    assert "size(raw) = 66 UTF-8 bytes > raw_bytes = 64" in divergence.message


def test_an_executor_for_a_refused_call_is_said_in_words() -> None:
    """CIS-ID-5, CIS-PRE-1: an execute line for a refused call says so, with the refusal code,
    instead of printing the whole expected result."""
    lines = example()
    index = find(lines, op("submit", call=2))
    lines.insert(
        index + 1, {"op": "execute", "call": 2, "outcome": {"raw": "x"}, "observed": {"record": None}}
    )
    divergence = _divergence(lines)
    assert divergence.requirement == "CIS-ID-5"
    assert (
        "the executor ran for call 2, which the kernel refused with DUPLICATE_TOOL_CALL" in divergence.message
    )
    assert divergence.expected == "no execute line: call 2 was refused with DUPLICATE_TOOL_CALL"
    assert divergence.observed == "an execute line for call 2"


def test_a_projecting_record_with_a_scope_is_the_no_outcome_rule() -> None:
    """CIS-LIFE-5: a PROJECTING record that already carries a scope."""
    lines = example()
    index = find(lines, op("execute", call=1))
    lines[index]["observed"]["record"]["scope"] = "web"
    divergence = _divergence(lines)
    assert (divergence.line, divergence.requirement) == (index + 1, "CIS-LIFE-5")
    assert "scope must be null" in divergence.message


def test_the_record_limit_at_creation_is_the_record_rule() -> None:
    """CIS-SIZE-5: refusing with REQUEST_TOO_LARGE a request that fits the request limit means the
    record limit was misjudged; the record's formula is shown."""
    lines = example()
    index = find(lines, op("submit", call=1))
    lines[index]["observed"] = {"code": "REQUEST_TOO_LARGE", "record": None}
    lines = lines[: index + 1]
    divergence = _divergence(lines)
    assert (divergence.line, divergence.requirement) == (index + 1, "CIS-SIZE-5")
    assert "record_bytes = size(run_id) + size(tool_call_id) + size(tool_name) + size(arguments)" in (
        divergence.message
    )


def test_a_byte_budget_divergence_shows_the_sum() -> None:
    """CIS-RUN-6: a call admitted past the byte budget shows bytes_used + size(arguments) > budget."""
    lines = example()
    lines[1]["byte_budget"] = 30
    index = find(lines, op("submit", call=3))
    divergence = _divergence(lines)
    assert (divergence.line, divergence.requirement) == (index + 1, "CIS-RUN-6")
    assert re.search(
        r"bytes_used \+ size\(arguments\) = \d+ \+ \d+ = \d+ > byte_budget = 30$", divergence.message
    )


def test_a_sweep_divergence_shows_the_age() -> None:
    """CIS-LIFE-7: a sweep that misses a stale record shows age = now - created_at_ms >= older_than_ms."""
    lines = example()
    index = find(lines, op("submit", call=3))
    # Call 3 is still PROJECTING right after its submit: sweep it with an implementation that
    # measures the age from the last update (and so sweeps nothing).
    sweep = {
        "op": "sweep",
        "now_ms": lines[index]["now_ms"] + 5,
        "context_run_id": "run-42",
        "older_than_ms": 5,
        "observed": {"swept": 0, "tool_call_ids": []},
    }
    trimmed = clone(lines[: index + 1])
    divergence = _divergence([*trimmed, sweep])
    assert divergence.requirement == "CIS-LIFE-7"
    assert "age = now - created_at_ms = " in divergence.message
    assert "= 5 >= older_than_ms = 5: stale" in divergence.message


def test_a_size_in_utf16_units_is_the_size_rule_with_both_counts() -> None:
    """CIS-SIZE-1, CIS-ORC-2: a request size reported in UTF-16 code units (JavaScript's `length`) is
    named CIS-SIZE-1, not CIS-REC-2, and the message gives both counts."""
    lines = example()
    index = find(lines, op("submit", call=1))
    arguments = '{"q":"\U0001f600\u00e9"}'  # 14 UTF-8 bytes, 11 UTF-16 code units, 10 code points
    lines[index]["envelope"]["arguments"] = arguments
    lines[index]["observed"]["record"]["request_bytes"] = 11
    divergence = _divergence(lines)
    assert (divergence.line, divergence.requirement) == (index + 1, "CIS-SIZE-1")
    assert (divergence.expected, divergence.observed) == (14, 11)
    assert "size = 14 UTF-8 bytes" in divergence.message
    assert "reported 11, the text's length in UTF-16 code units" in divergence.message
    lines[index]["observed"]["record"]["request_bytes"] = 15  # no other count of the text: the request rule
    assert _divergence(lines).requirement == "CIS-REC-2"


def test_run_bytes_in_utf16_units_without_record_sizes_is_the_size_rule() -> None:
    """CIS-SIZE-1, CIS-RUN-6: a kernel counting sizes in UTF-16 units whose trace omits the optional
    ``request_bytes`` first shows it in the run's ``bytes_used``; the oracle recomputes the run's bytes
    from the same admitted arguments and stored completions in other units, names CIS-SIZE-1 and gives
    both counts. A count no unit explains stays the byte-budget rule."""
    content = "Q3 revenue report \u2014 found"  # the em dash: 3 UTF-8 bytes, 1 UTF-16 unit
    lines = json.loads(json.dumps(example()).replace("Q3 revenue report found", content))
    index = find(lines, op("submit", call=1))
    arguments = '{"q":"\U0001f600\u00e9"}'  # 14 UTF-8 bytes, 11 UTF-16 code units, 10 code points
    lines[index]["envelope"]["arguments"] = arguments
    assert "request_bytes" not in lines[index]["observed"]["record"]
    close = find(lines, op("run_close"))
    run = lines[close]["observed"]["run"]

    def units(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    utf8 = 135  # the arguments of calls 1 and 3, call 1's raw response, content and scope
    assert (
        utf8 - (len(arguments.encode()) - units(arguments)) - (len(content.encode()) - units(content)) == 130
    )
    run["bytes_used"] = 130
    divergence = _divergence(lines)
    assert (divergence.line, divergence.requirement) == (close + 1, "CIS-SIZE-1")
    assert (divergence.expected, divergence.observed) == (utf8, 130)
    assert "bytes_used = 135 UTF-8 bytes" in divergence.message
    assert "reported 130, the same texts' length in UTF-16 code units" in divergence.message
    run["bytes_used"] = 129  # code points: 4 fewer for the arguments, 2 for the content
    assert "length in code points" in _divergence(lines).message
    run["bytes_used"] = 134
    divergence = _divergence(lines)
    assert (divergence.requirement, divergence.message) == ("CIS-RUN-6", "the run's bytes_used differs")
