"""Hypothesis properties of the pure kernel.

- preflight is total over arbitrary envelopes and returns the first failing check;
- for any chosen subset of failing checks, the earliest in PREFLIGHT_ORDER wins;
- the key factory is injective;
- byte limits hold at limit-1 / limit / limit+1 with 1- to 4-byte characters, and a
  value is either stored identical or refused (never truncated);
- terminal records stay terminal and expiry never moves later under any event sequence;
- admission never exceeds the run's budgets.

Example counts are set per test to keep the directory fast on a shared machine.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import attrs
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from invocation_store.kernel import (
    FAILURE_CODES,
    PREFLIGHT_ORDER,
    Admission,
    AdmissionRequest,
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
    RunState,
    SweptStale,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    cancel_run,
    check_arguments,
    check_envelope,
    close_run,
    duplicate_code,
    phase_of,
    preflight,
    record_bytes,
    run_usage_after,
    transition,
)

from ._helpers import (
    ARGS,
    RUN_ID,
    T0,
    TOOL,
    TTL_MS,
    begun,
    default_context,
    default_policy,
    errored,
    make_run,
    ready,
    request,
    utf8_text,
    with_raw,
)

SAFE = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
ENVELOPE_CHECKS = PREFLIGHT_ORDER[: PREFLIGHT_ORDER.index(ErrorCode.NOT_READ_ONLY) + 1]

# -- strategies -----------------------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)
_huge = st.sampled_from(
    [
        "x" * 1_000_000,
        "[" * 100_000,
        '{"a":' * 20_000 + "1" + "}" * 20_000,
        '{"a":' + "9" * 5_000 + "}",
        '{"a":"' + "\U0001f600" * 70_000 + '"}',
        "\ud800" * 1_000,
        " " * 1_000,
    ]
)
_texts = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=30),
    st.text(alphabet='{}[]":,\\ \nund0123456789.eE+-', max_size=40),
    _json_values.map(json.dumps),
    st.sampled_from([RUN_ID, "call_1", TOOL, ARGS, "", " ", "\ufeff{}", '{"a":NaN}', '{"q":"\\ud800"}']),
)
#: Any value a hostile decoder could put in an envelope field.
_anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.binary(max_size=20),
    _texts,
    _huge,
    _json_values,
    st.builds(object),
    st.complex_numbers(),
    st.sampled_from([Ellipsis, float("nan"), ["call_1"], ("run-1",), {"tool_call_id": "call_1"}]),
)
_flags = st.one_of(st.booleans(), st.none(), st.sampled_from(["true", "false", "0", "1", 0, 1, 1.0, []]))


def _mostly(good: object, hostile: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """``good`` four times in five, else a hostile draw: every check gets reached often."""
    return st.integers(0, 4).flatmap(lambda roll: hostile if roll == 4 else st.just(good))


_policies = st.one_of(
    st.builds(
        ToolPolicy,
        name=_mostly(TOOL, st.sampled_from(["other", "", TOOL.upper()])),
        authorized=_mostly(True, _flags),
        read_only=_mostly(True, _flags),
    ),
    st.none(),
)


def _oracle_envelope(
    envelope: ToolCallEnvelope, policy: ToolPolicy | None, limits: Limits
) -> ErrorCode | None:
    """Independent restatement of checks 1-6, each as its own predicate, in the documented order."""
    tool_call_id = envelope.tool_call_id
    failing = {
        ErrorCode.MISSING_TOOL_CALL_ID: not isinstance(tool_call_id, str) or not tool_call_id.strip(),
        ErrorCode.UNSAFE_TOOL_CALL_ID: not (isinstance(tool_call_id, str) and SAFE.fullmatch(tool_call_id)),
        ErrorCode.RUN_MISMATCH: not (
            isinstance(envelope.run_id, str) and envelope.run_id == default_context().run_id
        ),
        ErrorCode.INVALID_ARGUMENTS: check_arguments(envelope.arguments, limits.max_json_depth) is not None,
        ErrorCode.REQUEST_TOO_LARGE: isinstance(envelope.arguments, str)
        and len(envelope.arguments.encode("utf-8", "surrogatepass")) > limits.request_bytes,
        ErrorCode.UNAUTHORIZED: policy is None
        or policy.authorized is not True
        or not isinstance(envelope.tool_name, str)
        or envelope.tool_name != policy.name,
        ErrorCode.NOT_READ_ONLY: policy is None or policy.read_only is not True,
    }
    unstated = [code.value for code in ENVELOPE_CHECKS if code not in failing]
    assert not unstated, f"tests/kernel/test_properties.py: restate {unstated} in _oracle_envelope"
    return next((code for code in ENVELOPE_CHECKS if failing[code]), None)


# -- preflight: totality and order ----------------------------------------------------------


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    envelope=st.builds(
        ToolCallEnvelope,
        run_id=_mostly(RUN_ID, _anything),
        tool_call_id=st.one_of(st.from_regex(SAFE, fullmatch=True), _mostly("call_1", _anything)),
        tool_name=_mostly(TOOL, _anything),
        arguments=_mostly(ARGS, st.one_of(_anything, _json_values.map(json.dumps))),
    ),
    policy=_policies,
    request_bytes=st.sampled_from([16, 256 * 1024]),
)
@example(
    envelope=ToolCallEnvelope(run_id=RUN_ID, tool_call_id="call_1", tool_name=TOOL, arguments=ARGS),
    policy=ToolPolicy(name=TOOL, authorized=True, read_only="false"),  # type: ignore[arg-type]
    request_bytes=256 * 1024,
)
def test_preflight_is_total_and_first_failure_wins(
    envelope: ToolCallEnvelope, policy: ToolPolicy | None, request_bytes: int
) -> None:
    """CIS-PRE-2: any envelope gets None or a preflight code, never an exception; first failing check wins."""
    limits = Limits(request_bytes=request_bytes)
    code = check_envelope(default_context(), envelope, policy, limits)
    assert code is None or code in ENVELOPE_CHECKS
    assert code is _oracle_envelope(envelope, policy, limits)
    full = preflight(default_context(), envelope, policy, limits, run=make_run(), existing=None, now_ms=T0)
    assert full is code  # a fresh, generous run adds no failure
    if code is None:
        assert isinstance(envelope.tool_call_id, str)
        assert SAFE.fullmatch(envelope.tool_call_id)


_ID_FAULTS = {
    ErrorCode.MISSING_TOOL_CALL_ID: st.sampled_from([None, "", "   ", 0, b"call_1"]),
    ErrorCode.UNSAFE_TOOL_CALL_ID: st.sampled_from([" call_1", "call{1}", "caf\u00e9", "c" * 129, "call\n"]),
}


@st.composite
def _faults(draw: st.DrawFn) -> frozenset[ErrorCode]:
    chosen = set(draw(st.sets(st.sampled_from(PREFLIGHT_ORDER[2:]))))
    id_fault = draw(st.sampled_from([None, ErrorCode.MISSING_TOOL_CALL_ID, ErrorCode.UNSAFE_TOOL_CALL_ID]))
    if id_fault is not None:
        chosen.add(id_fault)
    return frozenset(chosen)


@settings(max_examples=300, deadline=None)
@given(faults=_faults(), data=st.data())
def test_earliest_of_any_failing_subset_wins(faults: frozenset[ErrorCode], data: st.DataObject) -> None:
    """CIS-PRE-2, CIS-PRE-8: a call failing exactly a chosen subset of checks gets the earliest of them."""
    limits = Limits(request_bytes=64)
    small_valid, small_invalid = (
        '{"q":"x"}',
        data.draw(st.sampled_from(["[]", "{}{}", '{"a":NaN}', " ", "null"])),
    )
    large_valid = '{"q":"' + "\u00e9" * 40 + '"}'
    large_invalid = '{"q":"' + "x" * 80
    arguments = {
        (False, False): small_valid,
        (True, False): small_invalid,
        (False, True): large_valid,
        (True, True): large_invalid,
    }[(ErrorCode.INVALID_ARGUMENTS in faults, ErrorCode.REQUEST_TOO_LARGE in faults)]
    tool_call_id: object = "call_1"
    for code, values in _ID_FAULTS.items():
        if code in faults:
            tool_call_id = data.draw(values)
    run_id = (
        data.draw(st.sampled_from(["run-2", None, "RUN-1"])) if ErrorCode.RUN_MISMATCH in faults else RUN_ID
    )
    authorized: object = True
    read_only: object = True
    policy: ToolPolicy | None
    if ErrorCode.NOT_READ_ONLY in faults:
        read_only = data.draw(st.sampled_from([False, "false", None]))
    if ErrorCode.UNAUTHORIZED in faults:
        authorized = data.draw(st.sampled_from([False, "true", 1]))
    policy = ToolPolicy(name=TOOL, authorized=authorized, read_only=read_only)  # type: ignore[arg-type]
    if (
        ErrorCode.UNAUTHORIZED in faults
        and ErrorCode.NOT_READ_ONLY not in faults
        and data.draw(st.booleans())
    ):
        policy = None if data.draw(st.booleans()) else attrs.evolve(default_policy(), name="other_tool")

    now_ms = T0 + 1_000
    size = len(arguments.encode("utf-8"))
    run = make_run(
        deadline_ms=now_ms if ErrorCode.RUN_DEADLINE_EXCEEDED in faults else T0 + 3_600_000,
        ttl_ms=TTL_MS,
        tool_call_budget=1,
        byte_budget=size - 1 if ErrorCode.RUN_BYTES_EXHAUSTED in faults else 1_000_000,
    )
    if ErrorCode.TOOL_BUDGET_EXHAUSTED in faults:
        run = attrs.evolve(run, tool_calls_used=1)
    run_snapshot: RunState | None = run
    if ErrorCode.RUN_INACTIVE in faults:
        needs_fields = faults & {
            ErrorCode.RUN_DEADLINE_EXCEEDED,
            ErrorCode.TOOL_BUDGET_EXHAUSTED,
            ErrorCode.RUN_BYTES_EXHAUSTED,
        }
        how = data.draw(
            st.sampled_from(["cancel", "close"] if needs_fields else ["cancel", "close", "unknown"])
        )
        ended = {"cancel": cancel_run, "close": close_run}[how](run, T0) if how != "unknown" else None
        assert ended is None or isinstance(ended, RunState)
        run_snapshot = ended
    # A duplicate whose tool ran (READY): the answer is DUPLICATE_TOOL_CALL (CIS-ID-5).
    existing = ready(begun("call_1", token="tok-first")) if ErrorCode.DUPLICATE_TOOL_CALL in faults else None

    envelope = ToolCallEnvelope(
        run_id=run_id,
        tool_call_id=tool_call_id,  # type: ignore[arg-type]
        tool_name=TOOL,
        arguments=arguments,
    )
    result = preflight(
        default_context(),
        envelope,
        policy,
        limits,
        run=run_snapshot,
        existing=existing,
        now_ms=now_ms,
        invocation_token="tok-second",
    )
    expected = next((code for code in PREFLIGHT_ORDER if code in faults), None)
    assert result is expected, (
        f"{sorted(faults)} gave {result}; a new code of PREFLIGHT_ORDER is planted here, "
        "in test_earliest_of_any_failing_subset_wins (tests/kernel/test_properties.py)"
    )


# -- byte limits, no truncation ----------------------------------------------------------------

_WIDTH_RANGES = {1: (0x20, 0x7E), 2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, 0x10FFFF)}


def _chars(width: int) -> st.SearchStrategy[str]:
    low, high = _WIDTH_RANGES[width]
    return st.characters(min_codepoint=low, max_codepoint=high, codec="utf-8", exclude_characters='"\\')


_width_char = st.sampled_from(sorted(_WIDTH_RANGES)).flatmap(_chars)
_deltas = st.sampled_from([-1, 0, 1])


@settings(max_examples=120, deadline=None)
@given(char=_width_char, limit=st.integers(9, 400), delta=_deltas)
def test_request_limit_at_the_edges(char: str, limit: int, delta: int) -> None:
    """CIS-SIZE-2, CIS-SIZE-1, CIS-REC-2: arguments of limit-1/limit/limit+1 bytes: kept or refused."""
    arguments = '{"q":"' + utf8_text(limit + delta - 8, char) + '"}'
    assert len(arguments.encode()) == limit + delta
    limits = Limits(request_bytes=limit)
    envelope = ToolCallEnvelope(run_id=RUN_ID, tool_call_id="call_1", tool_name=TOOL, arguments=arguments)
    code = check_envelope(default_context(), envelope, default_policy(), limits)
    if delta <= 0:
        assert code is None
        admission = admit(make_run(), None, request(request_json=arguments), limits, T0)
        assert isinstance(admission, Admission)
        assert admission.record.request_json == arguments
    else:
        assert code is ErrorCode.REQUEST_TOO_LARGE


@settings(max_examples=120, deadline=None)
@given(char=_width_char, limit=st.integers(1, 400), delta=_deltas)
def test_raw_limit_at_the_edges(char: str, limit: int, delta: int) -> None:
    """CIS-SIZE-3, CIS-SIZE-1: raw of limit-1/limit/limit+1 bytes: stored exactly or refused whole."""
    assume(limit + delta >= 0)
    raw = utf8_text(limit + delta, char)
    result = transition(begun(), RawReceived(raw_response=raw, now_ms=T0 + 1), Limits(raw_bytes=limit))
    assert isinstance(result, CanonicalRecord)
    if delta <= 0:
        assert result.status is InvocationStatus.PROJECTING
        assert result.raw_response == raw
    else:
        assert result.error_code is ErrorCode.RESULT_TOO_LARGE
        assert result.raw_response is None


@settings(max_examples=120, deadline=None)
@given(
    char=_width_char,
    limit=st.integers(5, 400),
    delta=_deltas,
    scope=st.sampled_from(["", "idx", "\u00e9", "\U0001f600"]),
)
def test_agent_result_limit_at_the_edges(char: str, limit: int, delta: int, scope: str) -> None:
    """CIS-SIZE-4, CIS-SIZE-1: content + scope of limit-1/limit/limit+1 bytes: returned exactly or refused."""
    content = utf8_text(limit + delta - len(scope.encode()), char)
    event = ProjectionReceived(
        projection=Projection(evidence_status="EVIDENCE_FOUND", content=content, scope=scope), now_ms=T0 + 20
    )
    result = transition(with_raw(begun()), event, Limits(agent_result_bytes=limit))
    assert isinstance(result, CanonicalRecord)
    if delta <= 0:
        assert result.status is InvocationStatus.READY
        assert (result.agent_result, result.scope) == (content, scope)
    else:
        assert result.error_code is ErrorCode.RESULT_TOO_LARGE
        assert result.agent_result is None


@settings(max_examples=120, deadline=None)
@given(char=_width_char, extra=st.integers(0, 400), delta=_deltas, stage=st.sampled_from(["begin", "raw"]))
def test_record_limit_at_the_edges(char: str, extra: int, delta: int, stage: str) -> None:
    """CIS-SIZE-5, CIS-SIZE-1: records of limit-1/limit/limit+1 bytes: stored whole or refused."""
    fixed = len(RUN_ID) + len("call_1") + len(TOOL)
    if stage == "begin":
        limit = fixed + 8 + extra
        arguments = '{"q":"' + utf8_text(extra + delta, char) + '"}' if extra + delta >= 0 else None
        assume(arguments is not None)
        assert arguments is not None
        limits = Limits(record_bytes=limit)
        outcome = admit(make_run(), None, request(request_json=arguments), limits, T0)
        if delta <= 0:
            assert isinstance(outcome, Admission)
            assert outcome.record.request_json == arguments
            assert record_bytes(outcome.record) == limit + delta
        else:
            assert outcome is ErrorCode.REQUEST_TOO_LARGE
        return
    record = begun()
    limit = record_bytes(record) + extra
    assume(extra + delta >= 0)
    raw = utf8_text(extra + delta, char)
    result = transition(record, RawReceived(raw_response=raw, now_ms=T0 + 1), Limits(record_bytes=limit))
    assert isinstance(result, CanonicalRecord)
    if delta <= 0:
        assert result.raw_response == raw
        assert record_bytes(result) == limit + delta
    else:
        assert result.error_code is ErrorCode.RESULT_TOO_LARGE
        assert result.raw_response is None
        assert record_bytes(result) <= limit


# -- lifecycle under event sequences ------------------------------------------------------------


@st.composite
def _event_sequence(draw: st.DrawFn, start_ms: int) -> list[Event]:
    """Events at non-decreasing times from ``start_ms``, sometimes past a record's expiry."""
    now_ms = start_ms
    events: list[Event] = []
    for _ in range(draw(st.integers(1, 12))):
        now_ms += draw(st.one_of(st.integers(0, 50), st.integers(0, 2 * TTL_MS)))
        kind = draw(st.sampled_from(["begin", "raw", "projection", "failed", "sweep"]))
        if kind == "begin":
            events.append(
                Begin(
                    run_id=RUN_ID,
                    tool_call_id="call_1",
                    tool_name=TOOL,
                    request_json=ARGS,
                    invocation_token=draw(st.sampled_from(["tok-1", "tok-2"])),
                    sequence=1,
                    ttl_ms=draw(st.integers(1, 2 * TTL_MS)),
                    now_ms=now_ms,
                )
            )
        elif kind == "raw":
            raw = draw(st.one_of(st.text(max_size=30), st.just("x" * 300), st.just("\ud800")))
            events.append(RawReceived(raw_response=raw, now_ms=now_ms))
        elif kind == "projection":
            status = draw(st.sampled_from([*EvidenceStatus, "bogus"]))
            scope = draw(st.sampled_from(["", "idx"]))
            content = draw(st.sampled_from(["", "ok", "x" * 300]))
            events.append(
                ProjectionReceived(
                    projection=Projection(evidence_status=status, content=content, scope=scope), now_ms=now_ms
                )
            )
        elif kind == "failed":
            events.append(Failed(code=draw(st.sampled_from(sorted(FAILURE_CODES))), now_ms=now_ms))
        else:
            events.append(SweptStale(now_ms=now_ms, older_than_ms=draw(st.integers(0, TTL_MS))))
    return events


_STARTS: dict[str, Callable[[], CanonicalRecord | None]] = {
    "absent": lambda: None,
    "projecting": begun,
    "raw": lambda: with_raw(begun()),
    "ready": ready,
    "no_evidence": lambda: ready(evidence=EvidenceStatus.NO_EVIDENCE),
    "error": errored,
}


@settings(max_examples=150, deadline=None)
@given(start=st.sampled_from(sorted(_STARTS)), data=st.data())
def test_terminal_records_stay_terminal(start: str, data: st.DataObject) -> None:
    """CIS-LIFE-3, CIS-LIFE-2: once READY or ERROR, no event sequence changes the record while it lives."""
    record = _STARTS[start]()
    events = data.draw(_event_sequence(T0 + 30))
    for event in events:
        result = transition(record, event, Limits(raw_bytes=200, agent_result_bytes=200))
        live = phase_of(record, event.now_ms) is not Phase.ABSENT
        if record is not None and record.terminal and live:
            assert result is ErrorCode.INVALID_TRANSITION
            continue
        if isinstance(result, CanonicalRecord):
            if record is not None and live:
                assert record.status is InvocationStatus.PROJECTING
            record = result


@settings(max_examples=150, deadline=None)
@given(start=st.sampled_from(sorted(_STARTS)), data=st.data())
def test_expiry_never_moves_later(start: str, data: st.DataObject) -> None:
    """CIS-TTL-2, CIS-TTL-1, CIS-LIFE-6: no event moves a live record's expiry; only a new Begin sets one."""
    record = _STARTS[start]()
    for event in data.draw(_event_sequence(T0 + 30)):
        result = transition(record, event, Limits(raw_bytes=200, agent_result_bytes=200))
        if not isinstance(result, CanonicalRecord):
            continue
        if record is not None and phase_of(record, event.now_ms) is not Phase.ABSENT:
            assert result.expires_at_ms == record.expires_at_ms
            assert result.created_at_ms == record.created_at_ms
        else:
            assert isinstance(event, Begin)
            assert (result.created_at_ms, result.expires_at_ms) == (event.now_ms, event.now_ms + event.ttl_ms)
        record = result


# -- admission budgets ----------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    tool_call_budget=st.integers(0, 6),
    byte_budget=st.integers(0, 400),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["call_a", "call_b", "call_c", "call_d", "call_e", "call_f", "call_g"]),
            st.integers(0, 60),
            st.booleans(),
        ),
        max_size=15,
    ),
)
def test_admission_never_exceeds_budgets(
    tool_call_budget: int, byte_budget: int, steps: list[tuple[str, int, bool]]
) -> None:
    """CIS-RUN-5, CIS-RUN-6, CIS-PRE-8, CIS-ID-5: admit never overspends; refusals leave the run unchanged."""
    run = make_run(tool_call_budget=tool_call_budget, byte_budget=byte_budget)
    stored: dict[str, CanonicalRecord] = {}
    admitted = 0
    for index, (tool_call_id, padding, complete) in enumerate(steps):
        args = '{"p":"' + "x" * padding + '"}'
        req = AdmissionRequest(
            run_id=RUN_ID,
            tool_call_id=tool_call_id,
            tool_name=TOOL,
            request_json=args,
            invocation_token=f"tok-{index}",
        )
        outcome = admit(run, stored.get(tool_call_id), req, Limits(), T0 + index)
        if isinstance(outcome, ErrorCode):
            if tool_call_id in stored:
                assert outcome is duplicate_code(stored[tool_call_id])
                assert outcome in (ErrorCode.DUPLICATE_TOOL_CALL, ErrorCode.CALL_IN_PROGRESS)
            else:
                assert outcome in (ErrorCode.TOOL_BUDGET_EXHAUSTED, ErrorCode.RUN_BYTES_EXHAUSTED)
            continue
        assert tool_call_id not in stored
        assert outcome.run.tool_calls_used == run.tool_calls_used + 1 <= tool_call_budget
        assert outcome.run.bytes_used == run.bytes_used + len(args) <= byte_budget
        admitted += 1
        run, record = outcome.run, outcome.record
        if complete:
            after = with_raw(record, raw="r" * padding, now_ms=T0 + index)
            run = run_usage_after(run, record, after)
            record = after
        stored[tool_call_id] = record
    assert admitted <= tool_call_budget
    assert run.tool_calls_used == admitted
