"""Deliberately wrong implementations produce traces the oracle rejects at the right line
with the right requirement (issue 6, step 3)."""

from __future__ import annotations

import json

from invocation_store.adapters import MemoryStore
from invocation_store.oracle import CheckReport, check_lines
from invocation_store.testing import FakeClock

from . import _faults
from ._scenario import RUN, envelope, open_run, recorder


def _check(trace: str) -> CheckReport:
    report = check_lines(trace.splitlines(keepends=True))
    assert report.malformed is None, report.malformed
    return report


def _line_of(trace: str, predicate: object) -> int:
    """1-based number of the first line satisfying ``predicate(line_dict)``."""
    for number, text in enumerate(trace.splitlines(), start=1):
        if predicate(json.loads(text)):  # type: ignore[operator]
            return number
    raise AssertionError("no such line")


def test_ttl_refreshed_on_read_is_rejected_at_the_read(clock: FakeClock) -> None:
    """CIS-TTL-5, CIS-ORC-2: a store whose reads refresh the TTL diverges at the first read after
    time has passed, with the requirement 'reads never refresh the TTL'."""
    boundary, _hooks, sink = recorder(_faults.RefreshingStore(MemoryStore(clock)), clock)
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))
    clock.advance(5_000)
    boundary.read(RUN, "call_1")
    boundary.read(RUN, "call_1")
    trace = sink.getvalue()
    report = _check(trace)
    assert report.divergence is not None
    assert report.divergence.line == _line_of(trace, lambda line: line["op"] == "read")
    assert report.divergence.op == "read"
    assert report.divergence.requirement == "CIS-TTL-5"
    assert report.divergence.where == "observed.record.expires_at_ms"


def test_longer_ttl_is_rejected_at_creation(clock: FakeClock) -> None:
    """CIS-TTL-2, CIS-ORC-2: a store that reports a TTL longer than the run's diverges at the
    submit line that created the record."""
    boundary, _hooks, sink = recorder(_faults.LongerTtlStore(MemoryStore(clock)), clock)
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))
    trace = sink.getvalue()
    report = _check(trace)
    assert report.divergence is not None
    assert report.divergence.line == _line_of(trace, lambda line: line["op"] == "submit")
    assert report.divergence.requirement == "CIS-TTL-2"
    assert report.divergence.where == "observed.record.ttl_remaining_ms"


def test_raw_response_in_agent_result_is_rejected(clock: FakeClock) -> None:
    """CIS-BND-4, CIS-ORC-2: a boundary that gives the agent the raw response diverges at the
    call's result line."""
    boundary, _hooks, sink = recorder(
        MemoryStore(clock), clock, boundary_factory=_faults.factory(_faults.RawLeakingBoundary)
    )
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("boom", "call_0"))  # a failure: nothing to leak
    boundary.invoke(context, envelope("search", "call_1"))
    trace = sink.getvalue()
    report = _check(trace)
    assert report.divergence is not None
    assert report.divergence.line == _line_of(
        trace, lambda line: line["op"] == "result" and line["observed"]["result"]["ok"]
    )
    assert report.divergence.op == "result"
    assert report.divergence.requirement == "CIS-BND-4"
    assert report.divergence.where == "observed.result.content"


def test_ready_to_error_is_rejected_at_the_sweep(clock: FakeClock) -> None:
    """CIS-LIFE-3, CIS-ORC-2: an implementation whose sweep moves a READY record to ERROR diverges
    at the sweep line."""
    boundary, _hooks, sink = recorder(
        _faults.TokenOnlyCasStore(clock),
        clock,
        boundary_factory=_faults.factory(_faults.TerminalSweepingBoundary),
    )
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))
    clock.advance(1_000)
    boundary.sweep_stale(context, 500)
    boundary.read(RUN, "call_1")
    trace = sink.getvalue()
    report = _check(trace)
    assert report.divergence is not None
    assert report.divergence.line == _line_of(trace, lambda line: line["op"] == "sweep")
    assert report.divergence.requirement == "CIS-LIFE-3"
    # The store really did it: the read after the sweep shows ERROR.
    assert json.loads(trace.splitlines()[-1])["observed"]["record"]["status"] == "ERROR"


def test_accepted_duplicate_is_rejected_at_its_submit(clock: FakeClock) -> None:
    """CIS-ID-5, CIS-ORC-2: a store that admits a second call with a live tool_call_id diverges at
    that submit line, before the executor line that follows it."""
    boundary, _hooks, sink = recorder(_faults.DuplicateAcceptingStore(clock), clock)
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))
    boundary.invoke(context, envelope("kb", "call_1"))
    trace = sink.getvalue()
    report = _check(trace)
    assert report.divergence is not None
    second_submit = [n for n, t in enumerate(trace.splitlines(), 1) if json.loads(t)["op"] == "submit"][1]
    assert report.divergence.line == second_submit
    assert report.divergence.requirement == "CIS-ID-5"
    assert report.divergence.expected == "DUPLICATE_TOOL_CALL"
    assert report.divergence.observed is None


def test_wrong_preflight_order_is_rejected(clock: FakeClock) -> None:
    """CIS-PRE-2, CIS-ORC-2: a boundary that checks authorization before the arguments answers
    UNAUTHORIZED where the fixed order says INVALID_ARGUMENTS."""
    boundary, _hooks, sink = recorder(
        MemoryStore(clock), clock, boundary_factory=_faults.factory(_faults.AuthorizationFirstBoundary)
    )
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))
    boundary.invoke(context, envelope("secret", "call_2", arguments="[1]"))
    trace = sink.getvalue()
    report = _check(trace)
    assert report.divergence is not None
    assert report.divergence.line == _line_of(
        trace, lambda line: line["op"] == "submit" and line["envelope"]["tool_call_id"] == "call_2"
    )
    assert report.divergence.requirement == "CIS-PRE-2"
    assert (report.divergence.expected, report.divergence.observed) == ("INVALID_ARGUMENTS", "UNAUTHORIZED")


def test_correct_wrappers_conform(clock: FakeClock) -> None:
    """CIS-ORC-2: the same scenarios through the pass-through wrappers conform (the faults, not the
    wrappers, are what the oracle rejects)."""
    boundary, _hooks, sink = recorder(
        _faults.DelegatingStore(MemoryStore(clock)),
        clock,
        boundary_factory=_faults.factory(_faults.WrappedBoundary),
    )
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))
    boundary.invoke(context, envelope("kb", "call_1"))
    boundary.invoke(context, envelope("secret", "call_2", arguments="[1]"))
    clock.advance(5_000)
    boundary.read(RUN, "call_1")
    boundary.sweep_stale(context, 500)
    assert _check(sink.getvalue()).exit_code == 0
