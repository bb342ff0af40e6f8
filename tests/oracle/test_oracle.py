"""The oracle on hand-edited traces: each divergence at its line with its requirement (issue 6, step 2)."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator

import pytest

from invocation_store.oracle import MalformedTraceError, Oracle, check_lines, decode_line
from invocation_store.oracle._synthetic import write_synthetic_trace

from ._traces import ROOT, Line, check, clone, example, find, op, text


def _diverges(lines: list[Line], line: int, requirement: str) -> None:
    report = check(lines)
    assert report.malformed is None, report.malformed
    assert report.divergence is not None, "the trace conforms"
    assert (report.divergence.line, report.divergence.requirement) == (line, requirement), (
        report.divergence.render()
    )
    assert report.exit_code == 1


def test_example_trace_conforms() -> None:
    """CIS-ORC-1, CIS-ORC-2: the shipped example trace (spec/examples/example-trace.jsonl) conforms."""
    report = check(example())
    assert report.exit_code == 0, report.divergence.render() if report.divergence else report.malformed
    assert report.lines == len(example())


def test_wrong_preflight_code() -> None:
    """CIS-PRE-2: an envelope with no id answered as unsafe is the wrong preflight code."""
    lines = example()
    index = find(lines, lambda line: line["op"] == "submit" and line["envelope"]["tool_call_id"] is None)
    lines[index]["observed"]["code"] = "UNSAFE_TOOL_CALL_ID"
    _diverges(lines, index + 1, "CIS-PRE-2")


def test_refused_call_admitted() -> None:
    """CIS-ID-2, CIS-PRE-1: admitting a call without an id breaks the id requirement; an executor
    line for a refused call breaks 'a rejected call never reaches the executor'."""
    lines = example()
    index = find(lines, lambda line: line["op"] == "submit" and line["envelope"]["tool_call_id"] is None)
    admitted = clone(lines)
    admitted[index]["observed"]["code"] = None
    _diverges(admitted, index + 1, "CIS-ID-2")
    executed = clone(lines)
    executed.insert(
        index + 1, {"op": "execute", "call": 4, "outcome": {"raw": "x"}, "observed": {"record": None}}
    )
    _diverges(executed, index + 2, "CIS-PRE-1")


def test_duplicate_executed() -> None:
    """CIS-ID-5: the executor of a refused duplicate must never run."""
    lines = example()
    index = find(lines, op("submit", call=2))
    lines.insert(
        index + 1, {"op": "execute", "call": 2, "outcome": {"raw": "x"}, "observed": {"record": None}}
    )
    _diverges(lines, index + 2, "CIS-ID-5")


def test_executor_runs_twice() -> None:
    """CIS-BND-6: a second executor outcome for one call."""
    lines = example()
    index = find(lines, op("execute", call=3))
    lines.insert(index + 1, clone(lines[index]))
    _diverges(lines, index + 2, "CIS-BND-6")


def test_ttl_increase_on_read() -> None:
    """CIS-TTL-5, CIS-TTL-2: a read whose remaining TTL exceeds expiry - now, or whose expiry moved."""
    lines = example()
    index = find(lines, op("read"))
    longer = clone(lines)
    longer[index]["observed"]["record"]["ttl_remaining_ms"] += 1
    _diverges(longer, index + 1, "CIS-TTL-5")
    moved = clone(lines)
    moved[index]["observed"]["record"]["expires_at_ms"] += 1
    _diverges(moved, index + 1, "CIS-TTL-5")
    grows = clone(lines)
    second = clone(grows[index])
    second["observed"]["record"]["ttl_remaining_ms"] -= 10
    third = clone(grows[index])
    third["observed"]["record"]["ttl_remaining_ms"] -= 5
    grows[index + 1 : index + 1] = [second, third]
    _diverges(grows, index + 3, "CIS-TTL-5")


def test_ttl_not_set() -> None:
    """CIS-TTL-1: a live record reporting no positive TTL (PTTL -1: no expiry was set)."""
    lines = example()
    index = find(lines, op("submit", call=1))
    lines[index]["observed"]["record"]["ttl_remaining_ms"] = -1
    _diverges(lines, index + 1, "CIS-TTL-1")


def test_raw_in_agent_facing_values() -> None:
    """CIS-BND-4, CIS-REC-3: the raw response in a result, a citation or a record's agent result."""
    lines = example()
    raw = lines[find(lines, op("execute", call=1))]["outcome"]["raw"]
    result = clone(lines)
    index = find(result, op("result", call=1))
    result[index]["observed"]["result"]["content"] = raw
    _diverges(result, index + 1, "CIS-BND-4")
    cited = clone(lines)
    index = find(cited, op("cite", tool_call_id="call_abc123"))
    cited[index]["observed"]["citation"]["content"] = raw
    _diverges(cited, index + 1, "CIS-BND-4")
    stored = clone(lines)
    index = find(stored, op("project", call=1))
    stored[index]["observed"]["record"]["agent_result"] = raw
    _diverges(stored, index + 1, "CIS-REC-3")


def test_truncated_raw() -> None:
    """CIS-REC-3: a stored raw response shorter than what the executor returned is a preview."""
    lines = example()
    index = find(lines, op("project", call=1))
    lines[index]["observed"]["record"]["raw_bytes"] -= 1
    _diverges(lines, index + 1, "CIS-REC-3")


def test_raw_over_limit_then_projected() -> None:
    """CIS-SIZE-3: over the raw limit the record is ERROR and the projector is never called."""
    lines = example()
    lines[0]["limits"]["raw_bytes"] = 10
    index = find(lines, op("execute", call=1))
    error = dict(lines[index]["observed"]["record"], status="ERROR", evidence_status="ERROR")
    error.update(error_code="RESULT_TOO_LARGE")
    ended = clone(lines)
    ended[index]["observed"]["record"] = error
    _diverges(ended, index + 2, "CIS-SIZE-3")  # the project line that follows
    continued = clone(lines)
    _diverges(continued, index + 1, "CIS-SIZE-3")  # the impl did not end the call at the raw check


def test_no_evidence_upgraded() -> None:
    """CIS-EVID-4: a NO_EVIDENCE projection returned to the agent as EVIDENCE_FOUND."""
    lines = example()
    index = find(lines, op("project", call=1))
    lines[index]["outcome"]["projection"].update(evidence_status="NO_EVIDENCE", content="", scope="web")
    record = lines[index]["observed"]["record"]
    record.update(evidence_status="NO_EVIDENCE", agent_result="", scope="web")
    result = lines[index + 1]["observed"]["result"]
    result.update(evidence_status="EVIDENCE_FOUND", content="", scope="web", negative=False)
    _diverges(lines, index + 2, "CIS-EVID-4")


def test_answer_before_projection() -> None:
    """CIS-BND-1: a result line while the kernel still awaits the projector's outcome."""
    lines = example()
    index = find(lines, op("project", call=1))
    del lines[index]
    _diverges(lines, index + 1, "CIS-BND-1")


def test_error_cited_as_evidence() -> None:
    """CIS-REF-3: an ERROR record is never referencable."""
    lines = example()
    index = find(lines, op("cite", tool_call_id="toolu_01XYZ"))
    lines[index]["observed"]["citation"].update(kind="EVIDENCE", reason=None)
    _diverges(lines, index + 1, "CIS-REF-3")


def test_progress_with_an_error_fact() -> None:
    """CIS-PROG-3, CIS-PROG-2: progress facts are exactly the READY records of the run, in order."""
    lines = example()
    index = find(lines, op("progress"))
    fact = dict(lines[index]["observed"]["facts"][0], tool_call_id="toolu_01XYZ", sequence=2)
    with_error = clone(lines)
    with_error[index]["observed"]["facts"].append(fact)
    _diverges(with_error, index + 1, "CIS-PROG-3")
    excluded = clone(lines)
    excluded[index]["observed"]["excluded"] = {}
    _diverges(excluded, index + 1, "CIS-PROG-3")
    reordered = clone(lines)
    reordered[index]["observed"]["facts"][0]["sequence"] = 2
    _diverges(reordered, index + 1, "CIS-PROG-2")


def test_run_operations() -> None:
    """CIS-RUN-2, CIS-RUN-5: cancelling a closed run is INVALID_TRANSITION, whatever the
    implementation claims; run counters must match the kernel's."""
    lines = example()
    cancel = {"op": "run_cancel", "run_id": "run-42", "observed": {"code": None, "run": None}}
    _diverges([*lines, cancel], len(lines) + 1, "CIS-RUN-2")
    refused = dict(cancel, observed={"code": "INVALID_TRANSITION", "run": None})
    assert check([*lines, refused]).exit_code == 0
    counted = clone(lines)
    counted[-1]["observed"]["run"]["tool_calls_used"] = 3
    _diverges(counted, len(lines), "CIS-RUN-5")


def test_completion_after_sweep_is_refused() -> None:
    """CIS-LIFE-2, CIS-LIFE-3, CIS-LIFE-7: a sweep moves a stale PROJECTING record to ERROR; the late
    completion of its call must be refused (INVALID_TRANSITION) and must not write READY over ERROR."""
    lines = example()
    submit = find(lines, op("submit", call=1))
    later = lines[submit]["now_ms"] + 1000
    sweep = {
        "op": "sweep",
        "now_ms": later,
        "context_run_id": "run-42",
        "older_than_ms": 500,
        "observed": {"swept": 1, "tool_call_ids": ["call_abc123"]},
    }
    lines.insert(submit + 1, sweep)
    for line in lines[submit + 2 :]:
        if line.get("now_ms") is not None:
            line["now_ms"] = max(line["now_ms"], later)
        record = (line.get("observed") or {}).get("record")
        if line.get("call") == 1 and record is not None:
            record.update(status="ERROR", evidence_status="ERROR", error_code="STALE_PROJECTION")
            record.update(raw_bytes=None, agent_result=None, scope=None)
            record["ttl_remaining_ms"] = record["expires_at_ms"] - later
    execute = find(lines, op("execute", call=1))
    project = find(lines, op("project", call=1))
    result = find(lines, op("result", call=1))
    # Fault 1: the completion wrote READY over the swept record.
    overwritten = clone(lines)
    overwritten[project]["observed"]["record"].update(
        status="READY",
        evidence_status="EVIDENCE_FOUND",
        error_code=None,
        agent_result="Q3 revenue report found",
    )
    _diverges(overwritten, project + 1, "CIS-LIFE-3")
    # Fault 2: the record stayed ERROR but the agent was told the call succeeded.
    _diverges(clone(lines), result + 1, "CIS-LIFE-2")
    # Fault 3: the sweep did not move the stale record.
    unswept = clone(lines)
    unswept[submit + 1]["observed"] = {"swept": 0, "tool_call_ids": []}
    _diverges(unswept, submit + 2, "CIS-LIFE-7")
    # The conforming version: the result is INVALID_TRANSITION.
    fixed = clone(lines)
    fixed[result]["observed"]["result"] = {
        "ok": False,
        "tool_call_id": "call_abc123",
        "code": "INVALID_TRANSITION",
        "evidence_status": None,
        "content": None,
        "scope": None,
        "negative": False,
    }
    assert check(fixed[: result + 1]).exit_code == 0
    assert execute < project


def test_streams_and_stops_at_the_first_divergence() -> None:
    """CIS-ORC-2: lines are pulled one at a time and checking stops at the first divergence."""
    lines = example()
    lines[find(lines, op("result", call=1))]["observed"]["result"]["ok"] = False
    pulled = 0

    def source() -> Iterator[str]:
        nonlocal pulled
        for line in itertools.chain(text(lines).splitlines(keepends=True), itertools.repeat("not json\n")):
            pulled += 1
            yield line

    report = check_lines(source())
    assert report.divergence is not None
    assert report.divergence.line == 6
    assert pulled == 6


def test_memory_does_not_grow_with_length() -> None:
    """CIS-ORC-2: the oracle's live state (records, calls) is the same for a trace 4x longer."""
    peaks = []
    for length in (1_000, 4_000):
        buffer = io.StringIO()
        write_synthetic_trace(buffer, length)
        report = check_lines(buffer.getvalue().splitlines(keepends=True))
        assert report.exit_code == 0, report.divergence.render() if report.divergence else report.malformed
        peaks.append((report.peak_records, report.peak_calls))
    assert peaks[0] == peaks[1]
    assert peaks[0][0] > 0


@pytest.mark.parametrize(
    ("edit", "line", "where"),
    [
        (lambda ls: ls.insert(1, dict(ls[0])), 2, "op"),
        (lambda ls: ls.__setitem__(0, {**ls[0], "version": 2}), 1, "version"),
        (lambda ls: ls.__setitem__(0, {**ls[0], "format": "other"}), 1, "format"),
        (lambda ls: ls.pop(0), 1, "op"),
        (lambda ls: ls.__setitem__(2, {**ls[2], "op": "submitted"}), 3, "op"),
        (lambda ls: ls.__setitem__(2, {**ls[2], "call": 0}), 3, "call"),
        (lambda ls: ls.__setitem__(6, {**ls[6], "call": 1}), 7, "call"),
        (lambda ls: ls.__setitem__(2, {**ls[2], "context_run_id": "run 42"}), 3, "context_run_id"),
        (lambda ls: ls.__setitem__(3, {**ls[3], "call": 9}), 4, "call"),
        (lambda ls: ls.__setitem__(13, {"op": "clock", "now_ms": 5}), 14, "now_ms"),
        (lambda ls: ls.__setitem__(1, {**ls[1], "ttl_ms": 0}), 2, "ttl_ms"),
        (lambda ls: ls.__setitem__(3, {**ls[3], "outcome": {"raw": "x", "failure": "raised"}}), 4, "outcome"),
        (lambda ls: ls.__setitem__(3, {**ls[3], "outcome": {"failure": "crashed"}}), 4, "outcome.failure"),
    ],
)
def test_malformed_lines(edit: object, line: int, where: str) -> None:
    """CIS-ORC-2, CIS-ORC-1: shape errors are malformed (exit 2) with their line and JSON path."""
    lines = example()
    edit(lines)  # type: ignore[operator]
    report = check(lines)
    assert report.malformed is not None, report.divergence
    assert (report.malformed.line, report.malformed.where) == (line, where), report.malformed
    assert report.exit_code == 2


def test_documented_example_divergence_is_what_the_oracle_prints() -> None:
    """CIS-ORC-2, CIS-TTL-5: spec/trace.md's worked example (a refreshed TTL on line 15) prints
    exactly the divergence shown there."""
    documented = (ROOT / "spec" / "trace.md").read_text(encoding="utf-8").rsplit("```", 2)[1].strip()
    lines = example()
    lines[14]["observed"]["record"]["ttl_remaining_ms"] = 3_600_000
    report = check(lines)
    assert report.divergence is not None
    assert report.divergence.render() == documented


def test_feed_api_takes_decoded_lines() -> None:
    """CIS-ORC-2: Oracle.feed accepts lines decoded by decode_line (or json.loads) one by one, and
    rejects a repeated member name anywhere in a line as malformed."""
    oracle = Oracle()
    for number, line in enumerate(text(example()).splitlines(), start=1):
        assert oracle.feed(number, decode_line(line, number)) is None
    with pytest.raises(MalformedTraceError) as raised:
        decode_line('{"op":"clock","now_ms":1,"now_ms":2}', 7)
    assert (raised.value.line, raised.value.reason) == (7, "duplicate member name")
