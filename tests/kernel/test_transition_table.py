"""spec/transitions.json is the kernel's table, and the kernel obeys it (CIS-SPEC-2).

The file is generated from the kernel's :data:`TABLE` (``scripts/generate_transitions.py``)
and checked three times: it equals the generated text; structurally (its rows equal ``TRANSITIONS``,
``RUN_TRANSITIONS``, ``FAILURE_CODES`` and ``PREFLIGHT_ORDER``) and behaviourally
(over the full product of phases and event types, :func:`transition` returns either a
record in one of the documented next phases or one of the documented codes, and a pair
outside the table is INVALID_TRANSITION with the record unchanged), in the style of
h2's ``tests/test_state_machines.py``.
"""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invocation_store.kernel import (
    FAILURE_CODES,
    PREFLIGHT_ORDER,
    RUN_TRANSITIONS,
    TABLE,
    TRANSITIONS,
    Begin,
    CanonicalRecord,
    ErrorCode,
    Event,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    Phase,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunOp,
    RunState,
    RunStatus,
    SweptStale,
    cancel_run,
    close_run,
    phase_of,
    transition,
)
from invocation_store.oracle._table import dump_table_document

from ._helpers import ARGS, RAW, RUN_ID, T0, TTL_MS, in_phase, make_run, projection

SPEC_FILE = Path(__file__).resolve().parents[2] / "spec" / "transitions.json"
EVENT_TYPES: tuple[type[Event], ...] = typing.get_args(Event)
EVENTS_BY_NAME = {cls.__name__: cls for cls in EVENT_TYPES}
RUN_OPERATIONS = {"cancel": cancel_run, "close": close_run}


def _spec() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SPEC_FILE.read_text(encoding="utf-8"))
    return loaded


SPEC = _spec()
ROWS: dict[tuple[str, str], dict[str, Any]] = {
    (row["phase"], row["event"]): row for row in SPEC["transitions"]
}


def _row(phase: Phase, event: Event) -> dict[str, Any] | None:
    return ROWS.get((phase.value, type(event).__name__))


def _check_outcome(
    record: CanonicalRecord | None,
    snapshot: CanonicalRecord | None,
    event: Event,
    result: CanonicalRecord | ErrorCode,
) -> None:
    """Assert ``result`` is what the spec file allows for ``(phase_of(record), event)``.

    ``snapshot`` is a deep copy of ``record`` taken before the transition: on any code
    the record must still equal it.
    """
    phase = phase_of(record, event.now_ms)
    row = _row(phase, event)
    if row is None:
        assert result is ErrorCode.INVALID_TRANSITION
        assert record == snapshot
        return
    if isinstance(result, ErrorCode):
        assert result.value in row["returns"], (phase, type(event).__name__, result)
        assert record == snapshot
        return
    new_phase = phase_of(result, event.now_ms)
    assert new_phase.value in row["next"], (phase, type(event).__name__, new_phase)
    assert result.status.value == SPEC["phase_status"][new_phase.value]
    if result.status is InvocationStatus.ERROR:
        assert result.error_code is not None
        assert result.error_code.value in row["error_codes"]
    else:
        assert result.error_code is None


# -- structure ------------------------------------------------------------------------


def test_spec_file_is_stable_json() -> None:
    """CIS-SPEC-2: the table file is sorted, 2-space-indented JSON ending in a newline."""
    text = SPEC_FILE.read_text(encoding="utf-8")
    assert text == json.dumps(SPEC, indent=2, sort_keys=True) + "\n"


def test_spec_file_is_generated_from_the_table() -> None:
    """CIS-SPEC-2: spec/transitions.json is exactly what scripts/generate_transitions.py writes."""
    assert SPEC_FILE.read_text(encoding="utf-8") == dump_table_document()


def test_rows_carry_their_codes_and_transition_dispatches_through_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CIS-SPEC-2, CIS-LIFE-4: each row names its handler and codes; transition() calls the row's handler."""
    assert {key: row.next_phases for key, row in TABLE.items()} == TRANSITIONS
    for (phase, event), row in TABLE.items():
        spec_row = ROWS[(phase.value, event.__name__)]
        assert sorted(code.value for code in row.returns) == spec_row["returns"]
        assert sorted(code.value for code in row.error_codes) == spec_row["error_codes"]
    record = in_phase(Phase.AWAITING_RAW)
    sentinel = ErrorCode.STORE_UNAVAILABLE
    calls: list[object] = []

    def handler(rec: CanonicalRecord | None, event: Event, limits: Limits) -> ErrorCode:
        calls.append((rec, event, limits))
        return sentinel

    key = (Phase.AWAITING_RAW, RawReceived)
    monkeypatch.setitem(TABLE, key, attrs.evolve(TABLE[key], handler=handler))
    event = RawReceived(raw_response=RAW, now_ms=T0 + 30)
    assert transition(record, event, Limits()) is sentinel
    assert calls == [(record, event, Limits())]


def test_transition_rows_equal_kernel_table() -> None:
    """CIS-SPEC-2, CIS-LIFE-1: (phase, event) -> next phases in the file equals TRANSITIONS."""
    kernel = {
        (phase.value, event.__name__): sorted(target.value for target in targets)
        for (phase, event), targets in TRANSITIONS.items()
    }
    spec = {key: row["next"] for key, row in ROWS.items()}
    assert len(ROWS) == len(SPEC["transitions"]), "a (phase, event) pair is listed twice"
    assert spec == kernel


def test_phases_events_and_codes_equal_kernel() -> None:
    """CIS-SPEC-2: phases, event types, failure codes and the preflight order match the kernel."""
    assert SPEC["phases"] == sorted(phase.value for phase in Phase)
    assert SPEC["events"] == sorted(EVENTS_BY_NAME)
    assert set(SPEC["phase_status"]) == {phase.value for phase in Phase}
    assert SPEC["failure_codes"] == sorted(code.value for code in FAILURE_CODES)
    assert SPEC["preflight_order"] == [code.value for code in PREFLIGHT_ORDER]
    assert SPEC["illegal"] == ErrorCode.INVALID_TRANSITION.value
    codes = {code.value for code in ErrorCode}
    for row in SPEC["transitions"]:
        assert set(row["returns"]) <= codes
        assert set(row["error_codes"]) <= codes
        assert row["returns"] == sorted(row["returns"])
        assert row["error_codes"] == sorted(row["error_codes"])
        assert bool(row["error_codes"]) == (Phase.ERROR.value in row["next"])


def test_run_rows_equal_kernel_run_table() -> None:
    """CIS-SPEC-2, CIS-RUN-2: the run lifecycle rows equal RUN_TRANSITIONS."""
    kernel = {(status.value, op): target.value for (status, op), target in RUN_TRANSITIONS.items()}
    spec = {(row["status"], row["operation"]): row["next"] for row in SPEC["run_transitions"]}
    assert spec == kernel
    assert {op for _status, op in RUN_TRANSITIONS} == set(RUN_OPERATIONS)
    assert set(RUN_OPERATIONS) == {op.value for op in RunOp}
    assert all(isinstance(op, RunOp) for _status, op in RUN_TRANSITIONS)


def test_phase_status_mapping_matches_records() -> None:
    """CIS-SPEC-2, CIS-LIFE-1: a record built in each phase has the documented stored status."""
    for phase in Phase:
        record = in_phase(phase)
        assert phase_of(record, T0 + 30) is phase
        expected = SPEC["phase_status"][phase.value]
        assert (None if record is None else record.status.value) == expected
    expired = in_phase(Phase.READY)
    assert expired is not None
    assert phase_of(expired, expired.expires_at_ms) is Phase.ABSENT


# -- behaviour over the full product ---------------------------------------------------


def _default_event(event_type: type[Event], now_ms: int) -> Event:
    if event_type is Begin:
        return Begin(
            run_id=RUN_ID,
            tool_call_id="call_new",
            tool_name="search",
            request_json=ARGS,
            invocation_token="tok-9",
            sequence=1,
            ttl_ms=TTL_MS,
            now_ms=now_ms,
        )
    if event_type is RawReceived:
        return RawReceived(raw_response=RAW, now_ms=now_ms)
    if event_type is ProjectionReceived:
        return ProjectionReceived(projection=projection(), now_ms=now_ms)
    if event_type is Failed:
        return Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now_ms)
    return SweptStale(now_ms=now_ms, older_than_ms=0)


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("phase", list(Phase), ids=lambda phase: phase.value)
def test_every_phase_event_pair_follows_the_table(phase: Phase, event_type: type[Event]) -> None:
    """CIS-SPEC-2, CIS-LIFE-1, CIS-LIFE-2: each of the 25 pairs gives a documented outcome."""
    record = in_phase(phase)
    snapshot = copy.deepcopy(record)
    event = _default_event(event_type, T0 + 30)
    result = transition(record, event, Limits())
    _check_outcome(record, snapshot, event, result)
    assert record == snapshot
    if (phase, event_type) not in TRANSITIONS:
        assert result is ErrorCode.INVALID_TRANSITION
    else:
        assert isinstance(result, CanonicalRecord)  # the default events all succeed


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("phase", [Phase.AWAITING_RAW, Phase.AWAITING_PROJECTION, Phase.READY, Phase.ERROR])
def test_expired_records_are_absent_for_every_event(phase: Phase, event_type: type[Event]) -> None:
    """CIS-SPEC-2, CIS-TTL-4: at or after expiry a record is ABSENT; only Begin is allowed."""
    record = in_phase(phase)
    assert record is not None
    snapshot = copy.deepcopy(record)
    event = _default_event(event_type, record.expires_at_ms)
    result = transition(record, event, Limits())
    _check_outcome(record, snapshot, event, result)
    assert record == snapshot
    if event_type is Begin:
        assert isinstance(result, CanonicalRecord)
        assert result.created_at_ms == record.expires_at_ms  # a new record, not the old one revived
    else:
        assert result is ErrorCode.INVALID_TRANSITION


@pytest.mark.parametrize("operation", sorted(RUN_OPERATIONS))
@pytest.mark.parametrize("status", list(RunStatus), ids=lambda status: status.value)
def test_every_run_status_operation_pair_follows_the_run_table(status: RunStatus, operation: str) -> None:
    """CIS-SPEC-2, CIS-RUN-2: run operations outside the run table are INVALID_TRANSITION, run unchanged."""
    run: RunState = make_run()
    if status is RunStatus.CANCELLED:
        cancelled = cancel_run(run, T0)
        assert isinstance(cancelled, RunState)
        run = cancelled
    elif status is RunStatus.CLOSED:
        closed = close_run(run, T0)
        assert isinstance(closed, RunState)
        run = closed
    assert run.status is status
    snapshot = copy.deepcopy(run)
    result = RUN_OPERATIONS[operation](run, T0 + 1)
    target = RUN_TRANSITIONS.get((status, operation))
    if target is None:
        assert result is ErrorCode.INVALID_TRANSITION
    else:
        assert isinstance(result, RunState)
        assert result.status is target
        assert result == attrs.evolve(run, status=target)  # nothing but the status changes
    assert run == snapshot


# -- the same, with Hypothesis-drawn events, limits and times --------------------------

_any_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    st.sampled_from(["", " ", "\ud800", "a" * 300, "\U0001f600" * 50]),
)
_ids = st.one_of(
    st.from_regex(r"[A-Za-z0-9_.:\-]{1,20}", fullmatch=True),
    st.sampled_from(["", "  ", " call_1", "a{b}", "caf\u00e9", "x" * 129, "a\nb"]),
)
_evidence = st.one_of(st.sampled_from(list(EvidenceStatus)), st.text(max_size=20))


@st.composite
def _events(draw: st.DrawFn, now_ms: int) -> Event:
    kind = draw(st.sampled_from(EVENT_TYPES))
    if kind is Begin:
        return Begin(
            run_id=draw(_ids),
            tool_call_id=draw(_ids),
            tool_name=draw(st.sampled_from(["search", "t" * 200])),
            request_json=draw(st.sampled_from([ARGS, '{"q": "' + "x" * 400 + '"}'])),
            invocation_token=draw(st.sampled_from(["tok-1", "tok-2"])),
            sequence=draw(st.integers(1, 100)),
            ttl_ms=draw(st.integers(1, 10 * TTL_MS)),
            now_ms=now_ms,
        )
    if kind is RawReceived:
        raw: Any = draw(st.one_of(_any_text, st.just(RAW), st.integers(), st.none(), st.binary(max_size=8)))
        return RawReceived(raw_response=raw, now_ms=now_ms)
    if kind is ProjectionReceived:
        proj: Any = draw(
            st.one_of(
                st.builds(Projection, evidence_status=_evidence, content=_any_text, scope=_any_text),
                st.none(),
                st.just({"evidence_status": "EVIDENCE_FOUND", "content": "x"}),
            )
        )
        return ProjectionReceived(projection=proj, now_ms=now_ms)
    if kind is Failed:
        return Failed(code=draw(st.sampled_from(sorted(FAILURE_CODES))), now_ms=now_ms)
    return SweptStale(now_ms=now_ms, older_than_ms=draw(st.integers(0, 2 * TTL_MS)))  # CIS-KERN-2: >= 0


_limits = st.one_of(
    st.just(Limits()),
    st.builds(
        Limits,
        raw_bytes=st.integers(1, 200),
        agent_result_bytes=st.integers(1, 60),
        record_bytes=st.integers(1, 600),
    ),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), phase=st.sampled_from(list(Phase)), limits=_limits)
def test_table_holds_for_drawn_events(data: st.DataObject, phase: Phase, limits: Limits) -> None:
    """CIS-SPEC-2, CIS-LIFE-1, CIS-LIFE-2, CIS-KERN-2: any event in any phase gives a documented outcome."""
    record = in_phase(phase, data.draw(st.sampled_from(["call_1", "toolu_01A", "x" * 128])))
    expires = record.expires_at_ms if record is not None else T0 + TTL_MS
    now_ms = data.draw(st.one_of(st.integers(T0 + 30, expires - 1), st.integers(expires, expires + TTL_MS)))
    event = data.draw(_events(now_ms))
    snapshot = copy.deepcopy(record)
    result = transition(record, event, limits)
    _check_outcome(record, snapshot, event, result)
    assert record == snapshot


def _begin(**changes: Any) -> Begin:
    event = _default_event(Begin, T0 + 30)
    assert isinstance(event, Begin)
    return attrs.evolve(event, **changes)


def _reachable() -> list[tuple[Phase, Event, Limits, ErrorCode]]:
    """(phase, event, limits, code) for each code a row documents; built when the test runs."""
    small = Limits(raw_bytes=8, agent_result_bytes=4, record_bytes=60)
    return [
        (Phase.ABSENT, _begin(tool_call_id=""), Limits(), ErrorCode.MISSING_TOOL_CALL_ID),
        (Phase.ABSENT, _begin(tool_call_id=" call_1"), Limits(), ErrorCode.UNSAFE_TOOL_CALL_ID),
        (Phase.ABSENT, _begin(run_id="run 1"), Limits(), ErrorCode.RUN_MISMATCH),
        (Phase.ABSENT, _begin(request_json='{"q":"' + "x" * 80 + '"}'), small, ErrorCode.REQUEST_TOO_LARGE),
        (
            Phase.AWAITING_RAW,
            RawReceived(raw_response="x" * 9, now_ms=T0 + 30),
            small,
            ErrorCode.RESULT_TOO_LARGE,
        ),
        (
            Phase.AWAITING_RAW,
            RawReceived(raw_response="\ud800", now_ms=T0 + 30),
            Limits(),
            ErrorCode.SERIALIZATION_FAILED,
        ),
        (Phase.AWAITING_RAW, SweptStale(now_ms=T0 + 30, older_than_ms=31), Limits(), ErrorCode.NOT_STALE),
        (
            Phase.AWAITING_RAW,
            SweptStale(now_ms=T0 + 30, older_than_ms=30),
            Limits(),
            ErrorCode.STALE_PROJECTION,
        ),
        (
            Phase.AWAITING_PROJECTION,
            SweptStale(now_ms=T0 + 30, older_than_ms=31),
            Limits(),
            ErrorCode.NOT_STALE,
        ),
        (
            Phase.AWAITING_PROJECTION,
            SweptStale(now_ms=T0 + 30, older_than_ms=0),
            Limits(),
            ErrorCode.STALE_PROJECTION,
        ),
        (
            Phase.AWAITING_PROJECTION,
            ProjectionReceived(projection=projection(content="12345"), now_ms=T0 + 30),
            Limits(agent_result_bytes=4),
            ErrorCode.RESULT_TOO_LARGE,
        ),
        (
            Phase.AWAITING_PROJECTION,
            ProjectionReceived(projection=projection(evidence="FOUND"), now_ms=T0 + 30),
            Limits(),
            ErrorCode.PROJECTION_INVALID,
        ),
        *[
            (phase, Failed(code=code, now_ms=T0 + 30), Limits(), code)
            for phase in (Phase.AWAITING_RAW, Phase.AWAITING_PROJECTION)
            for code in sorted(FAILURE_CODES)
        ],
    ]


def test_every_documented_code_is_reachable() -> None:
    """CIS-SPEC-2: each code a row documents (returned or carried by ERROR) really occurs."""
    reached: set[tuple[str, str, str]] = set()
    for phase, event, limits, code in _reachable():
        record = in_phase(phase)
        snapshot = copy.deepcopy(record)
        result = transition(record, event, limits)
        _check_outcome(record, snapshot, event, result)
        observed = result if isinstance(result, ErrorCode) else result.error_code
        assert observed is code, (phase, event, observed)
        reached.add((phase.value, type(event).__name__, code.value))
    documented = {
        (row["phase"], row["event"], code)
        for row in SPEC["transitions"]
        for code in row["returns"] + row["error_codes"]
    }
    assert documented == reached
