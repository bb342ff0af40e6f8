"""Traces recorded from our own stores conform to the oracle (issue 6, step 3)."""

from __future__ import annotations

import json
from collections.abc import Callable

from invocation_store.adapters import InvocationStore, MemoryStore
from invocation_store.kernel import ErrorCode
from invocation_store.oracle import LINE_TYPES, check_lines, line_checker, structure_line
from invocation_store.testing import FakeClock

from ._scenario import record_scenario

MakeStore = Callable[[FakeClock], InvocationStore]


def test_recorded_trace_of_each_store_conforms(make_store: MakeStore, clock: FakeClock) -> None:
    """CIS-ORC-2, CIS-STORE-8: the scenario recorded from the memory and the Redis store replays
    through the kernel without a divergence."""
    trace = record_scenario(make_store(clock), clock)
    report = check_lines(trace.splitlines(keepends=True))
    assert report.malformed is None, report.malformed
    assert report.divergence is None, report.divergence.render() if report.divergence else ""
    assert report.exit_code == 0
    ops = {json.loads(line)["op"] for line in trace.splitlines()}
    assert ops == set(LINE_TYPES), f"the scenario misses {set(LINE_TYPES) - ops}"


#: Codes the recorded scenario never meets in a result line, each with the reason; every other
#: ErrorCode must appear, so a new code is wanted as soon as it exists.
NOT_RECORDED = {
    ErrorCode.STORE_UNAVAILABLE: "the scenario runs on the memory store, which never fails",
    ErrorCode.DURABILITY_NOT_REACHED: "only a Redis store in a durability mode refuses with it",
    ErrorCode.NOT_STALE: "a sweep's no-op on a young record, never a result",
}


def test_recorded_trace_covers_every_outcome(clock: FakeClock) -> None:
    """CIS-ORC-1: the recorder writes every executor and projector outcome kind and every code it meets,
    each line valid for both the fast checker and the strict cattrs codec."""
    trace = record_scenario(MemoryStore(clock), clock)
    outcomes: set[str] = set()
    codes: set[str] = set()
    for text in trace.splitlines():
        line = json.loads(text)
        line_checker(LINE_TYPES[line["op"]])(line)
        structure_line(line)
        outcome = line.get("outcome")
        if outcome is not None:
            outcomes.add(f"{line['op']}:{outcome.get('failure') or next(iter(outcome))}")
        if line["op"] == "result" and line["observed"]["result"]["code"]:
            codes.add(line["observed"]["result"]["code"])
    assert outcomes == {
        "execute:raw",
        "execute:raised",
        "execute:timeout",
        "execute:not_serializable",
        "project:projection",
        "project:raised",
        "project:invalid",
    }
    assert set(NOT_RECORDED) < set(ErrorCode)
    missing = sorted({code.value for code in ErrorCode if code not in NOT_RECORDED} - codes)
    assert not missing, (
        f"the recorded scenario never answers {missing}: add a call that ends in it to "
        "tests/oracle/_scenario.py, or list it in NOT_RECORDED (tests/oracle/test_recorded_traces.py) "
        "with the reason"
    )


def test_recorded_trace_keeps_raw_text_out_of_agent_lines(clock: FakeClock) -> None:
    """CIS-BND-4, CIS-REC-3: in a recorded trace the raw responses appear only as executor outcomes,
    never in a result, citation, progress fact or record view."""
    trace = record_scenario(MemoryStore(clock), clock)
    raws = set()
    for text in trace.splitlines():
        line = json.loads(text)
        raw = (line.get("outcome") or {}).get("raw")
        if raw and len(raw) > 8:
            raws.add(raw)
    assert raws
    for text in trace.splitlines():
        line = json.loads(text)
        if line["op"] == "execute":
            continue
        observed = json.dumps(line.get("observed"))
        assert not any(json.dumps(raw)[1:-1] in observed for raw in raws), line["op"]
