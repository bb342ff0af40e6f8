"""Conformance vectors, generated from the kernel (CIS-SPEC-3).

Theory of operation
-------------------
:func:`generate_vectors` builds, from the kernel's own tables and functions, the
documents of ``spec/vectors/`` (``scripts/generate_vectors.py`` writes them; a test
regenerates them and fails on any difference, so they never drift from the kernel):

- ``transitions.json``: every row of :data:`~invocation_store.kernel.TRANSITIONS`,
  with one vector per outcome the row can have (each target phase, each code);
- ``illegal.json``: every (phase, event) pair outside the table:
  INVALID_TRANSITION, record unchanged;
- ``runs.json``: the run lifecycle (:data:`~invocation_store.kernel.RUN_TRANSITIONS`,
  open/retry/conflict, and every illegal run operation);
- ``preflight_order.json``: each preflight check alone, and, for every pair of
  checks, an envelope and snapshot that fail both: the earlier code wins
  (:data:`~invocation_store.kernel.PREFLIGHT_ORDER`);
- ``error_codes.json``: every :class:`~invocation_store.kernel.ErrorCode` with its
  fixed message and one vector that produces it.

A vector is language-neutral JSON: kernel values are spelled with their field names,
enum values as strings, times in integer ms, text as JSON strings (ASCII-escaped, so
a lone surrogate survives). :func:`run_vector` replays one vector through the kernel
and returns what it got, so a test can check every vector, and other implementations
can read the same files to do the same with their own kernel.

Size: the generator of the conformance vectors and the dispatch that runs them, one
builder per table of the kernel; its length is the spec's coverage.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any, Final

from attrs import evolve

from .. import codec
from ..kernel import (
    ERROR_MESSAGES,
    FAILURE_CODES,
    MAX_SAFE_INT,
    PREFLIGHT_ORDER,
    RUN_TRANSITIONS,
    TRANSITIONS,
    AdmissionRequest,
    Begin,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    Limits,
    Phase,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunOp,
    RunState,
    RunStatus,
    SweptStale,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    cancel_run,
    close_run,
    open_run,
    phase_of,
    preflight,
    transition,
)
from ..kernel import Event as KernelEvent
from ._views import limits_view

__all__ = [
    "INVALID_INPUT",
    "VECTOR_FORMAT",
    "VECTOR_VERSION",
    "UnknownKindError",
    "dump_document",
    "generate_vectors",
    "preflight_outcome",
    "run_vector",
]

#: The ``format`` of every vector document.
VECTOR_FORMAT: Final = "canonical-invocation-vectors"
#: The vector format version.
VECTOR_VERSION: Final = 1

_NOW: Final = 1_700_000_000_000
_TTL: Final = 60_000
_RUN: Final = "run-1"
_CALL: Final = "call_1"
_TOOL: Final = "search"
_REQUEST: Final = '{"q":"x"}'
#: Small limits keep the vectors short; a vector that needs others carries its own.
_LIMITS: Final = Limits(
    request_bytes=64,
    raw_bytes=64,
    agent_result_bytes=32,
    record_bytes=512,
    max_json_depth=4,
    max_facts=3,
    max_fact_bytes=64,
)

Event = Begin | RawReceived | ProjectionReceived | Failed | SweptStale


# ---------------------------------------------------------------------------
# JSON forms of kernel values (and back)


def record_json(record: CanonicalRecord | None) -> dict[str, Any] | None:
    """A record as JSON: every field by name, enums as strings (the codec's form)."""
    return None if record is None else codec.unstructure(record)


def record_from_json(obj: dict[str, Any] | None) -> CanonicalRecord | None:
    """The inverse of :func:`record_json` (strict: raises :class:`~invocation_store.codec.CodecError`)."""
    return None if obj is None else codec.record_from_obj(obj)


def run_json(run: RunState | None) -> dict[str, Any] | None:
    """A run state as JSON (the codec's form)."""
    return None if run is None else codec.unstructure(run)


def run_from_json(obj: dict[str, Any] | None) -> RunState | None:
    """The inverse of :func:`run_json` (strict)."""
    return None if obj is None else codec.run_state_from_obj(obj)


def event_json(event: Event) -> dict[str, Any]:
    """An event as JSON: ``{"type": <class name>, <fields>}`` (the codec's tagged union)."""
    obj: dict[str, Any] = codec.converter.unstructure(event, KernelEvent)
    return obj


def event_from_json(obj: dict[str, Any]) -> Event:
    """The inverse of :func:`event_json` (strict)."""
    return codec.event_from_obj(obj)


def _limits_from_json(obj: dict[str, int]) -> Limits:
    return codec.limits_from_obj(obj)


# ---------------------------------------------------------------------------
# Fixtures


def _begin(now: int = _NOW, **changes: Any) -> Begin:
    event = Begin(
        run_id=_RUN,
        tool_call_id=_CALL,
        tool_name=_TOOL,
        request_json=_REQUEST,
        invocation_token="tok-1",  # noqa: S106 - a retry token, not a credential
        sequence=1,
        ttl_ms=_TTL,
        now_ms=now,
    )
    return evolve(event, **changes)


def _created() -> CanonicalRecord:
    record = transition(None, _begin(), _LIMITS)
    assert isinstance(record, CanonicalRecord)
    return record


def _in_phase(phase: Phase) -> CanonicalRecord | None:
    """A record of the fixture call in ``phase`` (None for ABSENT)."""
    if phase is Phase.ABSENT:
        return None
    record: CanonicalRecord | ErrorCode = _created()
    assert isinstance(record, CanonicalRecord)
    if phase is Phase.AWAITING_RAW:
        return record
    record = transition(record, RawReceived(raw_response="RAW", now_ms=_NOW + 1), _LIMITS)
    assert isinstance(record, CanonicalRecord)
    if phase is Phase.AWAITING_PROJECTION:
        return record
    if phase is Phase.READY:
        event: Event = ProjectionReceived(
            projection=Projection(
                evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="found", scope="web"
            ),
            now_ms=_NOW + 2,
        )
    else:
        event = Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=_NOW + 2)
    record = transition(record, event, _LIMITS)
    assert isinstance(record, CanonicalRecord)
    assert phase_of(record, _NOW + 3) is phase
    return record


def _expired() -> CanonicalRecord:
    record = _in_phase(Phase.READY)
    assert record is not None
    return record


_EVENT_NOW: Final = _NOW + 10


def _sample(event_type: type[Any]) -> Event:
    """One canonical instance of each event type, at ``_EVENT_NOW``."""
    samples: dict[type[Any], Event] = {
        Begin: _begin(_EVENT_NOW),
        RawReceived: RawReceived(raw_response="RAW", now_ms=_EVENT_NOW),
        ProjectionReceived: ProjectionReceived(
            projection=Projection(
                evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="found", scope="web"
            ),
            now_ms=_EVENT_NOW,
        ),
        Failed: Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_EVENT_NOW),
        SweptStale: SweptStale(now_ms=_EVENT_NOW, older_than_ms=0),
    }
    return samples[event_type]


# ---------------------------------------------------------------------------
# Transition vectors


def _transition_vector(  # noqa: PLR0917 - a vector's fields, in file order
    vector_id: str,
    requirements: list[str],
    description: str,
    before: CanonicalRecord | None,
    event: Event,
    limits: Limits = _LIMITS,
) -> dict[str, Any]:
    result = transition(before, event, limits)
    expect: dict[str, Any]
    expect = {"code": result.value} if isinstance(result, ErrorCode) else {"record": record_json(result)}
    return {
        "id": vector_id,
        "kind": "transition",
        "requirements": requirements,
        "description": description,
        "limits": limits_view(limits),
        "before": record_json(before),
        "event": event_json(event),
        "expect": expect,
    }


def _row_recipes() -> dict[
    tuple[Phase, type[Any]], list[tuple[str, str, CanonicalRecord | None, Event, Limits]]
]:
    """For each table row: (suffix, description, before, event, limits) of each outcome."""
    raw_ready = _in_phase(Phase.AWAITING_RAW)
    projecting = _in_phase(Phase.AWAITING_PROJECTION)
    expired = _expired()
    late = expired.expires_at_ms
    tight = evolve(_LIMITS, record_bytes=25)
    now = _EVENT_NOW

    def projection(status: str, content: str = "found", scope: str = "web") -> ProjectionReceived:
        return ProjectionReceived(
            projection=Projection(evidence_status=status, content=content, scope=scope), now_ms=now
        )

    recipes: dict[tuple[Phase, type[Any]], list[tuple[str, str, CanonicalRecord | None, Event, Limits]]] = {
        (Phase.ABSENT, Begin): [
            ("created", "no record: a PROJECTING record with expiry = now + ttl", None, _begin(now), _LIMITS),
            ("over-expired", "an expired record is absent: a new record", expired, _begin(late), _LIMITS),
            (
                "missing-id",
                "a blank id never reaches a record",
                None,
                _begin(now, tool_call_id="  "),
                _LIMITS,
            ),
            (
                "unsafe-id",
                "an unsafe id never reaches a record",
                None,
                _begin(now, tool_call_id="call 1"),
                _LIMITS,
            ),
            ("unsafe-run", "an unsafe run id", None, _begin(now, run_id="run{1}"), _LIMITS),
            (
                "record-limit",
                "the new record (26 bytes: ids, tool name, request) exceeds a 25-byte record limit",
                None,
                _begin(now),
                tight,
            ),
        ],
        (Phase.AWAITING_RAW, RawReceived): [
            (
                "stored",
                "the raw response is kept, complete",
                raw_ready,
                RawReceived(raw_response="RAW", now_ms=now),
                _LIMITS,
            ),
            (
                "raw-limit",
                "over the raw limit: ERROR, raw not stored, not truncated",
                raw_ready,
                RawReceived(raw_response="r" * 65, now_ms=now),
                _LIMITS,
            ),
            (
                "lone-surrogate",
                "a raw response with no UTF-8 form",
                raw_ready,
                RawReceived(raw_response="bad \ud800", now_ms=now),
                _LIMITS,
            ),
            (
                "record-limit",
                "the record would exceed the record limit",
                raw_ready,
                RawReceived(raw_response="r" * 60, now_ms=now),
                evolve(_LIMITS, record_bytes=60),
            ),
        ],
        (Phase.AWAITING_RAW, Failed): [
            (
                f"failed-{code.value}",
                f"Failed({code.value}) before the raw response",
                raw_ready,
                Failed(code=code, now_ms=now),
                _LIMITS,
            )
            for code in sorted(FAILURE_CODES, key=lambda c: c.value)
        ],
        (Phase.AWAITING_RAW, SweptStale): [
            (
                "stale",
                "old enough: ERROR/STALE_PROJECTION",
                raw_ready,
                SweptStale(now_ms=now, older_than_ms=10),
                _LIMITS,
            ),
            (
                "not-stale",
                "too young: NOT_STALE, unchanged",
                raw_ready,
                SweptStale(now_ms=now, older_than_ms=11),
                _LIMITS,
            ),
        ],
        (Phase.AWAITING_PROJECTION, ProjectionReceived): [
            ("found", "EVIDENCE_FOUND: READY", projecting, projection("EVIDENCE_FOUND"), _LIMITS),
            (
                "no-evidence",
                "NO_EVIDENCE with a scope: READY",
                projecting,
                projection("NO_EVIDENCE", "", "kb"),
                _LIMITS,
            ),
            (
                "blank-scope",
                "NO_EVIDENCE needs a scope",
                projecting,
                projection("NO_EVIDENCE", "", "  "),
                _LIMITS,
            ),
            ("unknown-status", "an unknown evidence status", projecting, projection("MAYBE"), _LIMITS),
            ("error-status", "ERROR is not a projection outcome", projecting, projection("ERROR"), _LIMITS),
            (
                "result-limit",
                "content + scope over the agent result limit",
                projecting,
                projection("EVIDENCE_FOUND", "c" * 30, "web"),
                _LIMITS,
            ),
            (
                "record-limit",
                "the record would exceed the record limit",
                projecting,
                projection("EVIDENCE_FOUND", "c" * 20),
                evolve(_LIMITS, record_bytes=50),
            ),
        ],
        (Phase.AWAITING_PROJECTION, Failed): [
            (
                f"failed-{code.value}",
                f"Failed({code.value}) after the raw response: raw kept",
                projecting,
                Failed(code=code, now_ms=now),
                _LIMITS,
            )
            for code in sorted(FAILURE_CODES, key=lambda c: c.value)
        ],
        (Phase.AWAITING_PROJECTION, SweptStale): [
            (
                "stale",
                "old enough: ERROR/STALE_PROJECTION, raw kept",
                projecting,
                SweptStale(now_ms=now, older_than_ms=0),
                _LIMITS,
            ),
            (
                "not-stale",
                "too young: NOT_STALE, unchanged",
                projecting,
                SweptStale(now_ms=now, older_than_ms=60),
                _LIMITS,
            ),
        ],
    }
    return recipes


_ROW_REQUIREMENTS: Final[dict[tuple[Phase, type[Any]], list[str]]] = {
    (Phase.ABSENT, Begin): ["CIS-LIFE-1", "CIS-REC-4", "CIS-TTL-1", "CIS-TTL-4", "CIS-ID-6", "CIS-SIZE-5"],
    (Phase.AWAITING_RAW, RawReceived): ["CIS-LIFE-1", "CIS-SIZE-3", "CIS-FAIL-4", "CIS-SIZE-5", "CIS-REC-3"],
    (Phase.AWAITING_RAW, Failed): ["CIS-LIFE-1", "CIS-FAIL-1", "CIS-FAIL-2", "CIS-FAIL-3", "CIS-EVID-1"],
    (Phase.AWAITING_RAW, SweptStale): ["CIS-LIFE-1", "CIS-LIFE-7"],
    (Phase.AWAITING_PROJECTION, ProjectionReceived): [
        "CIS-LIFE-1",
        "CIS-EVID-1",
        "CIS-EVID-2",
        "CIS-EVID-3",
        "CIS-EVID-5",
        "CIS-SIZE-4",
        "CIS-SIZE-5",
        "CIS-REC-5",
    ],
    (Phase.AWAITING_PROJECTION, Failed): ["CIS-LIFE-1", "CIS-FAIL-1", "CIS-FAIL-6", "CIS-EVID-5"],
    (Phase.AWAITING_PROJECTION, SweptStale): ["CIS-LIFE-1", "CIS-LIFE-7"],
}


def _transitions_document() -> dict[str, Any]:
    recipes = _row_recipes()
    rows = []
    for (phase, event_type), targets in TRANSITIONS.items():
        key = (phase, event_type)
        if key not in recipes:
            raise LookupError(f"no vector recipe for the table row {phase.value}/{event_type.__name__}")
        vectors = []
        reached: set[Phase] = set()
        for suffix, description, before, event, limits in recipes[key]:
            vector = _transition_vector(
                f"transition/{phase.value}/{event_type.__name__}/{suffix}",
                _ROW_REQUIREMENTS[key],
                description,
                before,
                event,
                limits,
            )
            result = transition(before, event, limits)
            if isinstance(result, CanonicalRecord):
                reached.add(phase_of(result, event.now_ms))
            vectors.append(vector)
        if not reached <= targets or not targets <= reached:
            raise AssertionError(
                f"row {phase.value}/{event_type.__name__}: recipes reach {reached}, table {targets}"
            )
        rows.append(
            {
                "phase": phase.value,
                "event": event_type.__name__,
                "next": sorted(target.value for target in targets),
                "vectors": vectors,
            }
        )
    return _document(
        "Every row of the lifecycle table with one vector per outcome: apply `event` to `before` "
        "(null = no record) with `limits`; expect `record` (the new record) or `code` (the record "
        "then stays exactly `before`).",
        ["CIS-LIFE-1", "CIS-SPEC-3"],
        {"rows": rows},
    )


def _illegal_document() -> dict[str, Any]:
    vectors = []
    event_types = (Begin, RawReceived, ProjectionReceived, Failed, SweptStale)
    for phase, event_type in itertools.product(Phase, event_types):
        if (phase, event_type) in TRANSITIONS:
            continue
        befores: list[tuple[str, CanonicalRecord | None]] = (
            [("none", None), ("expired", _expired())]
            if phase is Phase.ABSENT
            else [("live", _in_phase(phase))]
        )
        for label, before in befores:
            event = _sample(event_type)
            if label == "expired":
                assert before is not None
                event = evolve(event, now_ms=before.expires_at_ms)
            vector = _transition_vector(
                f"illegal/{phase.value}/{event_type.__name__}/{label}",
                ["CIS-LIFE-2", "CIS-LIFE-3", "CIS-SPEC-2"],
                f"{event_type.__name__} is not allowed in {phase.value}: INVALID_TRANSITION, unchanged",
                before,
                event,
            )
            if vector["expect"] != {"code": ErrorCode.INVALID_TRANSITION.value}:
                raise AssertionError(f"illegal pair {phase.value}/{event_type.__name__} was accepted")
            vectors.append(vector)
    return _document(
        "Every (phase, event) pair outside the lifecycle table: the kernel answers INVALID_TRANSITION "
        "and the record stays exactly `before`. ABSENT is tried with no record and with an expired one.",
        ["CIS-LIFE-2", "CIS-LIFE-3", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# Runs


def _run(status: RunStatus = RunStatus.ACTIVE, **changes: Any) -> RunState:
    run = RunState(
        run_id=_RUN,
        status=status,
        opened_at_ms=_NOW,
        deadline_ms=_NOW + 600_000,
        ttl_ms=_TTL,
        expires_at_ms=_NOW + 600_000 + _TTL,
        tool_call_budget=3,
        byte_budget=1000,
    )
    return evolve(run, **changes)


def _run_vector(  # noqa: PLR0917 - a vector's fields, in file order
    vector_id: str,
    requirements: list[str],
    description: str,
    operation: str,
    before: RunState | None,
    now: int,
    parameters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if operation == "open":
        assert parameters is not None
        result = open_run(before, now_ms=now, **parameters)
    elif operation == "cancel":
        result = cancel_run(before, now)
    else:
        result = close_run(before, now)
    vector: dict[str, Any] = {
        "id": vector_id,
        "kind": "run",
        "requirements": requirements,
        "description": description,
        "operation": operation,
        "before": run_json(before),
        "now_ms": now,
    }
    if parameters is not None:
        vector["parameters"] = parameters
    vector["expect"] = {"code": result.value} if isinstance(result, ErrorCode) else {"run": run_json(result)}
    return vector


def _runs_document() -> dict[str, Any]:
    vectors = []
    for (status, operation), target in RUN_TRANSITIONS.items():
        vectors.append(
            _run_vector(
                f"run/{status.value}/{operation}",
                ["CIS-RUN-2"],
                f"{status.value} -> {target.value}",
                operation,
                _run(status),
                _NOW + 1,
            )
        )
    for status, operation in itertools.product(RunStatus, RunOp):
        if (status, operation) in RUN_TRANSITIONS:
            continue
        vectors.append(
            _run_vector(
                f"run/{status.value}/{operation}/illegal",
                ["CIS-RUN-2"],
                f"{operation} is not allowed on a {status.value} run",
                operation,
                _run(status),
                _NOW + 1,
            )
        )
    for operation in RunOp:
        vectors.append(
            _run_vector(
                f"run/absent/{operation}", ["CIS-RUN-2", "CIS-RUN-3"], "no such run", operation, None, _NOW
            )
        )
        expired = _run()
        vectors.append(
            _run_vector(
                f"run/expired/{operation}",
                ["CIS-RUN-2", "CIS-RUN-3"],
                "the run state lapsed (deadline + ttl)",
                operation,
                expired,
                expired.expires_at_ms,
            )
        )
    parameters = {
        "run_id": _RUN,
        "deadline_ms": _NOW + 600_000,
        "ttl_ms": _TTL,
        "tool_call_budget": 3,
        "byte_budget": 1000,
    }
    opened = _run()
    vectors += [
        _run_vector("run/open/fresh", ["CIS-RUN-1"], "a new ACTIVE run", "open", None, _NOW, parameters),
        _run_vector(
            "run/open/retried",
            ["CIS-RETRY-3"],
            "the same open again: unchanged",
            "open",
            opened,
            _NOW,
            parameters,
        ),
        _run_vector(
            "run/open/conflict",
            ["CIS-RETRY-3"],
            "a live run opened with other parameters",
            "open",
            opened,
            _NOW,
            {**parameters, "tool_call_budget": 4},
        ),
        _run_vector(
            "run/open/after-expiry",
            ["CIS-RUN-1"],
            "a lapsed run id can be opened again",
            "open",
            opened,
            opened.expires_at_ms,
            {**parameters, "deadline_ms": opened.expires_at_ms + 1000},
        ),
        _run_vector(
            "run/open/at-the-largest-time",
            ["CIS-RUN-1"],
            "now = 2**53 - 1 is a time in range: the run opens (already lapsed: deadline 0, ttl 1)",
            "open",
            None,
            MAX_SAFE_INT,
            {**parameters, "deadline_ms": 0, "ttl_ms": 1},
        ),
        _run_vector(
            "run/open/unsafe-id",
            ["CIS-RUN-1", "CIS-ID-1"],
            "an unsafe run id",
            "open",
            None,
            _NOW,
            {**parameters, "run_id": "run 1"},
        ),
    ]
    return _document(
        "The run lifecycle: apply `operation` (open with `parameters`, cancel, close) to `before` "
        "(null = no run) at `now_ms`; expect the new `run` or a `code`.",
        ["CIS-RUN-1", "CIS-RUN-2", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# Preflight order

_SAFE_ARGS_LARGE: Final = '{"q":"' + "x" * 80 + '"}'
_BAD_ARGS: Final = '["q"]'
_BAD_ARGS_LARGE: Final = '["' + "x" * 80 + '"]'


def _scenario(faults: frozenset[ErrorCode]) -> dict[str, Any]:
    """A preflight input failing exactly the checks in ``faults``."""
    invalid = ErrorCode.INVALID_ARGUMENTS in faults
    large = ErrorCode.REQUEST_TOO_LARGE in faults
    arguments = {
        (False, False): _REQUEST,
        (True, False): _BAD_ARGS,
        (False, True): _SAFE_ARGS_LARGE,
        (True, True): _BAD_ARGS_LARGE,
    }[(invalid, large)]
    tool_call_id: str | None = _CALL
    if ErrorCode.MISSING_TOOL_CALL_ID in faults:
        tool_call_id = None
    elif ErrorCode.UNSAFE_TOOL_CALL_ID in faults:
        tool_call_id = "call 1"
    run = _run(tool_call_budget=3, byte_budget=1000)
    if ErrorCode.RUN_INACTIVE in faults:
        run = evolve(run, status=RunStatus.CANCELLED)
    if ErrorCode.TOOL_BUDGET_EXHAUSTED in faults:
        run = evolve(run, tool_calls_used=run.tool_call_budget)
    if ErrorCode.RUN_BYTES_EXHAUSTED in faults:
        run = evolve(run, bytes_used=run.byte_budget)
    now = run.deadline_ms if ErrorCode.RUN_DEADLINE_EXCEEDED in faults else _NOW + 1000
    existing = None
    if ErrorCode.DUPLICATE_TOOL_CALL in faults:
        # A completed call of another invocation: its tool ran, so this is a duplicate.
        earlier = _begin(_NOW, ttl_ms=3_600_000)
        first = transition(
            None, evolve(earlier, invocation_token=earlier.invocation_token + "-first"), _LIMITS
        )
        assert isinstance(first, CanonicalRecord)
        failed = transition(first, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=_NOW + 1), _LIMITS)
        assert isinstance(failed, CanonicalRecord)
        existing = failed
    return {
        "limits": limits_view(_LIMITS),
        "context_run_id": _RUN,
        "envelope": {
            "run_id": "run-2" if ErrorCode.RUN_MISMATCH in faults else _RUN,
            "tool_call_id": tool_call_id,
            "tool_name": _TOOL,
            "arguments": arguments,
        },
        "policy": codec.unstructure(
            ToolPolicy(
                name=_TOOL,
                authorized=ErrorCode.UNAUTHORIZED not in faults,
                read_only=ErrorCode.NOT_READ_ONLY not in faults,
                timeout_ms=1000,
            )
        ),
        "run": run_json(run),
        "existing": record_json(existing),
        "now_ms": now,
        "token": "tok-new",
    }


def preflight_outcome(inputs: dict[str, Any]) -> dict[str, Any]:
    """The whole preflight of a ``preflight`` vector, shaped like its ``expect``.

    ``{"code": <code>}`` for a refusal; for an admission ``{"code": null, "replayed":
    bool, "run": <run after>, "record": <the PROJECTING record>}`` (a replay returns
    the stored record and the run unchanged, CIS-RETRY-2).
    """
    # An envelope is hostile input that preflight judges whatever its fields hold
    # (CIS-PRE-2): it is passed to the kernel as given, not structured strictly.
    envelope = ToolCallEnvelope(**inputs["envelope"])
    policy = inputs["policy"]
    context = RunContext(run_id=inputs["context_run_id"])
    tool_policy = None if policy is None else codec.policy_from_obj(policy)
    limits = _limits_from_json(inputs["limits"])
    run = run_from_json(inputs["run"])
    existing = record_from_json(inputs["existing"])
    now = inputs["now_ms"]
    token = inputs["token"]
    code = preflight(
        context, envelope, tool_policy, limits, run=run, existing=existing, now_ms=now, invocation_token=token
    )
    if code is not None:
        return {"code": code.value}
    assert isinstance(envelope.tool_call_id, str)
    assert isinstance(envelope.tool_name, str)
    assert isinstance(envelope.arguments, str)
    admission = admit(
        run,
        existing,
        AdmissionRequest(
            run_id=context.run_id,
            tool_call_id=envelope.tool_call_id,
            tool_name=envelope.tool_name,
            request_json=envelope.arguments,
            invocation_token=token,
        ),
        limits,
        now,
    )
    if isinstance(admission, ErrorCode):  # preflight() and admit() disagree: a kernel bug
        raise AssertionError(f"preflight admitted what admit refuses: {admission.value}")
    return {
        "code": None,
        "replayed": admission.replayed,
        "append_call": admission.append_call,
        "run": run_json(admission.run),
        "record": record_json(admission.record),
    }


def _preflight_result(inputs: dict[str, Any]) -> ErrorCode | None:
    code = preflight_outcome(inputs)["code"]
    return None if code is None else ErrorCode(code)


#: Checks that one envelope can never fail together (an id is missing or unsafe, not both).
EXCLUSIVE: Final = frozenset({frozenset({ErrorCode.MISSING_TOOL_CALL_ID, ErrorCode.UNSAFE_TOOL_CALL_ID})})


def _preflight_vector(
    vector_id: str, requirements: list[str], faults: frozenset[ErrorCode]
) -> dict[str, Any]:
    inputs = _scenario(faults)
    return {
        "id": vector_id,
        "kind": "preflight",
        "requirements": requirements,
        "description": "fails: " + (", ".join(c.value for c in PREFLIGHT_ORDER if c in faults) or "nothing"),
        "fails": [code.value for code in PREFLIGHT_ORDER if code in faults],
        **inputs,
        "expect": preflight_outcome(inputs),
    }


def _preflight_document() -> dict[str, Any]:
    vectors = [_preflight_vector("preflight/passes", ["CIS-PRE-2"], frozenset())]
    for code in PREFLIGHT_ORDER:
        vector = _preflight_vector(f"preflight/{code.value}", ["CIS-PRE-2"], frozenset({code}))
        if vector["expect"]["code"] != code.value:
            raise AssertionError(f"the single fault {code.value} gave {vector['expect']['code']}")
        vectors.append(vector)
    for first, second in itertools.combinations(PREFLIGHT_ORDER, 2):
        if frozenset({first, second}) in EXCLUSIVE:
            continue
        vector = _preflight_vector(
            f"preflight/{first.value}+{second.value}", ["CIS-PRE-2", "CIS-PRE-8"], frozenset({first, second})
        )
        if vector["expect"]["code"] != first.value:
            raise AssertionError(f"{first.value}+{second.value} gave {vector['expect']['code']}")
        vectors.append(vector)
    return _document(
        "The preflight order: run the whole preflight (checks 1-6 on the envelope, then admission "
        "against `run` and `existing` at `now_ms` with invocation token `token`); expect `code` "
        "(null = admitted). For every pair of checks one vector fails both: the earlier code wins.",
        ["CIS-PRE-2", "CIS-PRE-8", "CIS-SPEC-3"],
        {
            "order": [code.value for code in PREFLIGHT_ORDER],
            "exclusive": [sorted(code.value for code in pair) for pair in EXCLUSIVE],
            "vectors": vectors,
        },
    )


# ---------------------------------------------------------------------------
# Error codes


def _codes_of(vector: dict[str, Any]) -> set[str]:
    expect = vector["expect"]
    codes = set()
    if expect.get("code"):
        codes.add(expect["code"])
    record = expect.get("record")
    if record and record.get("error_code"):
        codes.add(record["error_code"])
    return codes


def _error_codes_document(sources: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, dict[str, Any]] = {}
    for vector in sources:
        for code in sorted(_codes_of(vector)):
            found.setdefault(code, vector)
    missing = sorted(code.value for code in ErrorCode if code.value not in found)
    if missing:
        raise LookupError(f"no vector produces {missing}")
    codes = [
        {"code": code.value, "message": ERROR_MESSAGES[code], "vector": found[code.value]}
        for code in ErrorCode
    ]
    return _document(
        "Every error code of the closed set, with its fixed agent-facing message and one vector "
        "(of the kinds in the other files) that produces it.",
        ["CIS-ERR-1", "CIS-FAIL-1", "CIS-SPEC-3"],
        {"codes": codes},
    )


def _document(description: str, requirements: list[str], body: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": VECTOR_FORMAT,
        "version": VECTOR_VERSION,
        "generated_by": "scripts/generate_vectors.py (from invocation_store.kernel; do not edit by hand)",
        "description": description,
        "requirements": requirements,
        **body,
    }


def generate_vectors() -> dict[str, dict[str, Any]]:
    """Every vector document by file name (``transitions.json``, ...), built from the kernel.

    Raises ``LookupError``/``AssertionError`` if the kernel grew a table row, a code or
    a check that no recipe covers, or a recipe no longer shows what it was made for.
    """
    from ._vectors_effects import effect_documents  # noqa: PLC0415 - it imports this module
    from ._vectors_rules import rule_documents  # noqa: PLC0415 - the rules module imports this one

    transitions = _transitions_document()
    illegal = _illegal_document()
    runs = _runs_document()
    order = _preflight_document()
    rules = {**rule_documents(), **effect_documents()}
    sources = [
        *(vector for row in transitions["rows"] for vector in row["vectors"]),
        *illegal["vectors"],
        *runs["vectors"],
        *order["vectors"],
        *(vector for document in rules.values() for vector in document["vectors"]),
    ]
    return {
        "transitions.json": transitions,
        "illegal.json": illegal,
        "runs.json": runs,
        "preflight_order.json": order,
        **rules,
        "error_codes.json": _error_codes_document(sources),
    }


def dump_document(document: dict[str, Any]) -> str:
    """The exact text of a vector (or schema) file: sorted keys, ASCII, 1-space indent, final newline."""
    return json.dumps(document, ensure_ascii=True, sort_keys=True, indent=1) + "\n"


# ---------------------------------------------------------------------------
# Replaying a vector


class UnknownKindError(LookupError):
    """A vector of a kind this runner does not know."""


#: The outcome of a vector whose input the kernel refuses as a caller's error (an
#: exception, not a domain code): a negative TTL, a budget over 2**53 - 1, a
#: completion that changes the record's identity. CIS-KERN-2.
INVALID_INPUT: Final = {"invalid_input": True}


def run_vector(vector: dict[str, Any]) -> dict[str, Any]:
    """Replay one vector through the kernel; returns what the kernel gives, shaped like ``expect``.

    A kernel ``ValueError`` or ``TypeError`` (a programming error, CIS-KERN-2) is the
    outcome ``{"invalid_input": true}``; raises :class:`UnknownKindError` for a kind
    it does not know.
    """
    try:
        return _replay(vector)
    except (ValueError, TypeError):
        return dict(INVALID_INPUT)


def _replay(vector: dict[str, Any]) -> dict[str, Any]:
    kind = vector["kind"]
    if kind == "transition":
        result = transition(
            record_from_json(vector["before"]),
            event_from_json(vector["event"]),
            _limits_from_json(vector["limits"]),
        )
        if isinstance(result, ErrorCode):
            return {"code": result.value}
        return {"record": record_json(result)}
    if kind == "run":
        before = run_from_json(vector["before"])
        operation: Callable[..., RunState | ErrorCode]
        if vector["operation"] == "open":
            run = open_run(before, now_ms=vector["now_ms"], **vector["parameters"])
        else:
            operation = cancel_run if vector["operation"] == "cancel" else close_run
            run = operation(before, vector["now_ms"])
        return {"code": run.value} if isinstance(run, ErrorCode) else {"run": run_json(run)}
    if kind == "preflight":
        return preflight_outcome(vector)
    from ._vectors_effects import EFFECT_RUNNERS  # noqa: PLC0415 - it imports this module
    from ._vectors_rules import RUNNERS  # noqa: PLC0415 - the rules module imports this one

    runner = RUNNERS.get(kind) or EFFECT_RUNNERS.get(kind)
    if runner is None:
        raise UnknownKindError(kind)
    return runner(vector)
