"""Vectors of the kernel's tables: lifecycle rows, illegal pairs, the run table, the preflight order.

Theory of operation
-------------------
Each document here follows one of the kernel's tables, so a row or a check added to
the kernel without a case here fails generation:

- ``transitions.json``: every row of :data:`~invocation_store.kernel.TRANSITIONS`,
  one vector per outcome the row can have (:data:`ROW_CASES`);
- ``illegal.json``: every (phase, event) pair outside the table;
- ``runs.json``: every row of :data:`~invocation_store.kernel.RUN_TRANSITIONS`, every
  illegal run operation, open, retry and conflict (:data:`OPEN_CASES`);
- ``preflight_order.json``: each check of
  :data:`~invocation_store.kernel.PREFLIGHT_ORDER` alone, and for every pair of checks
  an input failing both (:func:`scenario`): the earlier code wins.

Cases are data rows; the builders only turn rows into vectors, whose ``expect`` the
kernel computes (:func:`._vectors_outcomes.vector`).

Size: data. Four case tables, one row per vector, each beside the few lines that turn
it into vectors; a file per table would part each table from its builder's shared
preflight scenario.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from attrs import evolve

from .. import codec
from ..kernel import (
    FAILURE_CODES,
    MAX_SAFE_INT,
    PREFLIGHT_ORDER,
    RUN_TRANSITIONS,
    TRANSITIONS,
    Begin,
    CanonicalRecord,
    ErrorCode,
    Failed,
    Limits,
    Phase,
    ProjectionReceived,
    RawReceived,
    RunOp,
    RunStatus,
    SweptStale,
    ToolPolicy,
    phase_of,
    transition,
)
from ._vectors_fixtures import (
    CALL,
    EVENT_NOW,
    LIMITS,
    NOW,
    REQUEST,
    RUN,
    RUN_PARAMETERS,
    TOOL,
    TTL,
    Event,
    begin_event,
    document,
    event_json,
    in_phase,
    projection_event,
    ready_record,
    record_json,
    run_json,
    run_state,
    sample_event,
    step,
)
from ._vectors_outcomes import preflight_outcome, vector
from ._views import limits_view

__all__ = ["EXCLUSIVE", "lifecycle_documents", "scenario", "transition_vector"]

Before = Callable[[], CanonicalRecord | None]


class TransitionCase(NamedTuple):
    """One transition vector: ``before`` builds the record (None: no record)."""

    label: str
    description: str
    before: Before | None
    event: Event | dict[str, Any]
    limits: Limits = LIMITS


def transition_vector(  # noqa: PLR0917 - a vector's fields, in file order
    vector_id: str,
    requirements: list[str],
    description: str,
    before: CanonicalRecord | None,
    event: Event | dict[str, Any],
    limits: Limits = LIMITS,
) -> dict[str, Any]:
    """A ``transition`` vector: ``event`` (a kernel event, or its JSON as given) applied to ``before``."""
    return vector(
        "transition",
        vector_id,
        requirements,
        description,
        limits=limits_view(limits),
        before=record_json(before),
        event=event if isinstance(event, dict) else event_json(event),
    )


def _raw_ready() -> CanonicalRecord | None:
    return in_phase(Phase.AWAITING_RAW)


def _with_raw() -> CanonicalRecord | None:
    return in_phase(Phase.AWAITING_PROJECTION)


_EXPIRED_AT: Final = NOW + TTL  # when the fixture records lapse
_NOW_: Final = EVENT_NOW


def _failed_cases(before: Before, when: str) -> tuple[TransitionCase, ...]:
    return tuple(
        TransitionCase(
            f"failed-{code.value}", f"Failed({code.value}) {when}", before, Failed(code=code, now_ms=_NOW_)
        )
        for code in sorted(FAILURE_CODES, key=lambda c: c.value)
    )


#: For each table row, one case per outcome it can have.
ROW_CASES: Final[dict[tuple[Phase, type[Any]], tuple[TransitionCase, ...]]] = {
    (Phase.ABSENT, Begin): (
        TransitionCase(
            "created", "no record: a PROJECTING record with expiry = now + ttl", None, begin_event(_NOW_)
        ),
        TransitionCase(
            "over-expired",
            "an expired record is absent: a new record",
            ready_record,
            begin_event(_EXPIRED_AT),
        ),
        TransitionCase(
            "missing-id", "a blank id never reaches a record", None, begin_event(_NOW_, tool_call_id="  ")
        ),
        TransitionCase(
            "unsafe-id",
            "an unsafe id never reaches a record",
            None,
            begin_event(_NOW_, tool_call_id="call 1"),
        ),
        TransitionCase("unsafe-run", "an unsafe run id", None, begin_event(_NOW_, run_id="run{1}")),
        TransitionCase(
            "record-limit",
            "the new record (26 bytes: ids, tool name, request) exceeds a 25-byte record limit",
            None,
            begin_event(_NOW_),
            evolve(LIMITS, record_bytes=25),
        ),
    ),
    (Phase.AWAITING_RAW, RawReceived): (
        TransitionCase(
            "stored",
            "the raw response is kept, complete",
            _raw_ready,
            RawReceived(raw_response="RAW", now_ms=_NOW_),
        ),
        TransitionCase(
            "raw-limit",
            "over the raw limit: ERROR, raw not stored, not truncated",
            _raw_ready,
            RawReceived(raw_response="r" * 65, now_ms=_NOW_),
        ),
        TransitionCase(
            "lone-surrogate",
            "a raw response with no UTF-8 form",
            _raw_ready,
            RawReceived(raw_response="bad \ud800", now_ms=_NOW_),
        ),
        TransitionCase(
            "record-limit",
            "the record would exceed the record limit",
            _raw_ready,
            RawReceived(raw_response="r" * 60, now_ms=_NOW_),
            evolve(LIMITS, record_bytes=60),
        ),
    ),
    (Phase.AWAITING_RAW, Failed): _failed_cases(_raw_ready, "before the raw response"),
    (Phase.AWAITING_RAW, SweptStale): (
        TransitionCase(
            "stale",
            "old enough: ERROR/STALE_PROJECTION",
            _raw_ready,
            SweptStale(now_ms=_NOW_, older_than_ms=10),
        ),
        TransitionCase(
            "not-stale",
            "too young: NOT_STALE, unchanged",
            _raw_ready,
            SweptStale(now_ms=_NOW_, older_than_ms=11),
        ),
    ),
    (Phase.AWAITING_PROJECTION, ProjectionReceived): (
        TransitionCase(
            "found", "EVIDENCE_FOUND: READY", _with_raw, projection_event("EVIDENCE_FOUND", "found", "web")
        ),
        TransitionCase(
            "no-evidence",
            "NO_EVIDENCE with a scope: READY",
            _with_raw,
            projection_event("NO_EVIDENCE", "", "kb"),
        ),
        TransitionCase(
            "blank-scope", "NO_EVIDENCE needs a scope", _with_raw, projection_event("NO_EVIDENCE", "", "  ")
        ),
        TransitionCase(
            "unknown-status",
            "an unknown evidence status",
            _with_raw,
            projection_event("MAYBE", "found", "web"),
        ),
        TransitionCase(
            "error-status",
            "ERROR is not a projection outcome",
            _with_raw,
            projection_event("ERROR", "found", "web"),
        ),
        TransitionCase(
            "result-limit",
            "content + scope over the agent result limit",
            _with_raw,
            projection_event("EVIDENCE_FOUND", "c" * 30, "web"),
        ),
        TransitionCase(
            "record-limit",
            "the record would exceed the record limit",
            _with_raw,
            projection_event("EVIDENCE_FOUND", "c" * 20, "web"),
            evolve(LIMITS, record_bytes=50),
        ),
    ),
    (Phase.AWAITING_PROJECTION, Failed): _failed_cases(_with_raw, "after the raw response: raw kept"),
    (Phase.AWAITING_PROJECTION, SweptStale): (
        TransitionCase(
            "stale",
            "old enough: ERROR/STALE_PROJECTION, raw kept",
            _with_raw,
            SweptStale(now_ms=_NOW_, older_than_ms=0),
        ),
        TransitionCase(
            "not-stale",
            "too young: NOT_STALE, unchanged",
            _with_raw,
            SweptStale(now_ms=_NOW_, older_than_ms=60),
        ),
    ),
}

#: The requirements each table row's vectors pin.
ROW_REQUIREMENTS: Final[dict[tuple[Phase, type[Any]], list[str]]] = {
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


def _row_vectors(phase: Phase, event_type: type[Any], targets: frozenset[Phase]) -> list[dict[str, Any]]:
    key = (phase, event_type)
    if key not in ROW_CASES:
        raise LookupError(f"no vector case for the table row {phase.value}/{event_type.__name__}")
    vectors, reached = [], set()
    for case in ROW_CASES[key]:
        before = None if case.before is None else case.before()
        vectors.append(
            transition_vector(
                f"transition/{phase.value}/{event_type.__name__}/{case.label}",
                ROW_REQUIREMENTS[key],
                case.description,
                before,
                case.event,
                case.limits,
            )
        )
        assert not isinstance(case.event, dict)  # a table row's cases are kernel events
        result = transition(before, case.event, case.limits)
        if isinstance(result, CanonicalRecord):
            reached.add(phase_of(result, case.event.now_ms))
    if reached != targets:
        raise AssertionError(
            f"row {phase.value}/{event_type.__name__}: cases reach {reached}, table {targets}"
        )
    return vectors


def _transitions_document() -> dict[str, Any]:
    rows = [
        {
            "phase": phase.value,
            "event": event_type.__name__,
            "next": sorted(target.value for target in targets),
            "vectors": _row_vectors(phase, event_type, targets),
        }
        for (phase, event_type), targets in TRANSITIONS.items()
    ]
    return document(
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
            [("none", None), ("expired", ready_record())]
            if phase is Phase.ABSENT
            else [("live", in_phase(phase))]
        )
        for label, before in befores:
            event = sample_event(event_type, _EXPIRED_AT if label == "expired" else EVENT_NOW)
            made = transition_vector(
                f"illegal/{phase.value}/{event_type.__name__}/{label}",
                ["CIS-LIFE-2", "CIS-LIFE-3", "CIS-SPEC-2"],
                f"{event_type.__name__} is not allowed in {phase.value}: INVALID_TRANSITION, unchanged",
                before,
                event,
            )
            if made["expect"] != {"code": ErrorCode.INVALID_TRANSITION.value}:
                raise AssertionError(f"illegal pair {phase.value}/{event_type.__name__} was accepted")
            vectors.append(made)
    return document(
        "Every (phase, event) pair outside the lifecycle table: the kernel answers INVALID_TRANSITION "
        "and the record stays exactly `before`. ABSENT is tried with no record and with an expired one.",
        ["CIS-LIFE-2", "CIS-LIFE-3", "CIS-SPEC-3"],
        {"vectors": vectors},
    )


# ---------------------------------------------------------------------------
# Runs


def run_op_vector(  # noqa: PLR0917 - a vector's fields, in file order
    vector_id: str,
    requirements: list[str],
    description: str,
    operation: str,
    before: Any,
    now: int,
    parameters: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``run`` vector: ``operation`` on the run state ``before`` (a RunState or None) at ``now``."""
    extra = {} if parameters is None else {"parameters": parameters}
    return vector(
        "run",
        vector_id,
        requirements,
        description,
        operation=operation,
        before=run_json(before),
        now_ms=now,
        **extra,
    )


class OpenCase(NamedTuple):
    """An open of the fixture run: the stored state, when, and the parameters changed."""

    label: str
    requirements: list[str]
    description: str
    before: Callable[[], Any]
    now: int
    changes: dict[str, Any]


_LAPSED: Final = NOW + 600_000 + TTL  # the fixture run state's expiry

#: Opens, retried opens and conflicts of ``runs.json``.
OPEN_CASES: Final[tuple[OpenCase, ...]] = (
    OpenCase("fresh", ["CIS-RUN-1"], "a new ACTIVE run", lambda: None, NOW, {}),
    OpenCase("retried", ["CIS-RETRY-3"], "the same open again: unchanged", run_state, NOW, {}),
    OpenCase(
        "conflict",
        ["CIS-RETRY-3"],
        "a live run opened with other parameters",
        run_state,
        NOW,
        {"tool_call_budget": 4},
    ),
    OpenCase(
        "after-expiry",
        ["CIS-RUN-1"],
        "a lapsed run id can be opened again",
        run_state,
        _LAPSED,
        {"deadline_ms": _LAPSED + 1000},
    ),
    OpenCase(
        "at-the-largest-time",
        ["CIS-RUN-1"],
        "now = 2^53 - 1: a time in range, so the run opens (already lapsed: deadline 0, ttl 1)",
        lambda: None,
        MAX_SAFE_INT,
        {"deadline_ms": 0, "ttl_ms": 1},
    ),
    OpenCase(
        "unsafe-id", ["CIS-RUN-1", "CIS-ID-1"], "an unsafe run id", lambda: None, NOW, {"run_id": "run 1"}
    ),
)


def _runs_document() -> dict[str, Any]:
    vectors = [
        run_op_vector(
            f"run/{status.value}/{operation}",
            ["CIS-RUN-2"],
            f"{status.value} -> {target.value}",
            operation,
            run_state(status),
            NOW + 1,
        )
        for (status, operation), target in RUN_TRANSITIONS.items()
    ]
    vectors += [
        run_op_vector(
            f"run/{status.value}/{operation}/illegal",
            ["CIS-RUN-2"],
            f"{operation} is not allowed on a {status.value} run",
            operation,
            run_state(status),
            NOW + 1,
        )
        for status, operation in itertools.product(RunStatus, RunOp)
        if (status, operation) not in RUN_TRANSITIONS
    ]
    for operation in RunOp:
        vectors.append(
            run_op_vector(
                f"run/absent/{operation}", ["CIS-RUN-2", "CIS-RUN-3"], "no such run", operation, None, NOW
            )
        )
        vectors.append(
            run_op_vector(
                f"run/expired/{operation}",
                ["CIS-RUN-2", "CIS-RUN-3"],
                "the run state lapsed (deadline + ttl)",
                operation,
                run_state(),
                _LAPSED,
            )
        )
    vectors += [
        run_op_vector(
            f"run/open/{case.label}",
            case.requirements,
            case.description,
            "open",
            case.before(),
            case.now,
            {**RUN_PARAMETERS, **case.changes},
        )
        for case in OPEN_CASES
    ]
    return document(
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

#: Checks that one envelope can never fail together (an id is missing or unsafe, not both).
EXCLUSIVE: Final = frozenset({frozenset({ErrorCode.MISSING_TOOL_CALL_ID, ErrorCode.UNSAFE_TOOL_CALL_ID})})


def _duplicate_under_key() -> CanonicalRecord:
    """A completed call of another invocation: its tool ran, so a new call is a duplicate."""
    earlier = begin_event(NOW, ttl_ms=3_600_000)
    first = step(None, evolve(earlier, invocation_token=earlier.invocation_token + "-first"))
    return step(first, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=NOW + 1))


def scenario(faults: frozenset[ErrorCode]) -> dict[str, Any]:
    """A preflight input failing exactly the checks in ``faults`` (codes of PREFLIGHT_ORDER)."""
    arguments = {
        (False, False): REQUEST,
        (True, False): _BAD_ARGS,
        (False, True): _SAFE_ARGS_LARGE,
        (True, True): _BAD_ARGS_LARGE,
    }[(ErrorCode.INVALID_ARGUMENTS in faults, ErrorCode.REQUEST_TOO_LARGE in faults)]
    tool_call_id: str | None = CALL
    if ErrorCode.MISSING_TOOL_CALL_ID in faults:
        tool_call_id = None
    elif ErrorCode.UNSAFE_TOOL_CALL_ID in faults:
        tool_call_id = "call 1"
    run = run_state(tool_call_budget=3, byte_budget=1000)
    if ErrorCode.RUN_INACTIVE in faults:
        run = evolve(run, status=RunStatus.CANCELLED)
    if ErrorCode.TOOL_BUDGET_EXHAUSTED in faults:
        run = evolve(run, tool_calls_used=run.tool_call_budget)
    if ErrorCode.RUN_BYTES_EXHAUSTED in faults:
        run = evolve(run, bytes_used=run.byte_budget)
    policy = ToolPolicy(
        name=TOOL,
        authorized=ErrorCode.UNAUTHORIZED not in faults,
        read_only=ErrorCode.NOT_READ_ONLY not in faults,
        timeout_ms=1000,
    )
    duplicate = ErrorCode.DUPLICATE_TOOL_CALL in faults
    return {
        "limits": limits_view(LIMITS),
        "context_run_id": RUN,
        "envelope": {
            "run_id": "run-2" if ErrorCode.RUN_MISMATCH in faults else RUN,
            "tool_call_id": tool_call_id,
            "tool_name": TOOL,
            "arguments": arguments,
        },
        "policy": codec.unstructure(policy),
        "run": run_json(run),
        "existing": record_json(_duplicate_under_key() if duplicate else None),
        "now_ms": run.deadline_ms if ErrorCode.RUN_DEADLINE_EXCEEDED in faults else NOW + 1000,
        "token": "tok-new",
    }


def _order_vector(vector_id: str, requirements: list[str], faults: frozenset[ErrorCode]) -> dict[str, Any]:
    inputs = scenario(faults)
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
    vectors = [_order_vector("preflight/passes", ["CIS-PRE-2"], frozenset())]
    for code in PREFLIGHT_ORDER:
        made = _order_vector(f"preflight/{code.value}", ["CIS-PRE-2"], frozenset({code}))
        if made["expect"]["code"] != code.value:
            raise AssertionError(
                f"the single fault {code.value} gave {made['expect']['code']}: plant it in scenario() "
                "of invocation_store/oracle/_vectors_lifecycle.py"
            )
        vectors.append(made)
    for first, second in itertools.combinations(PREFLIGHT_ORDER, 2):
        if frozenset({first, second}) in EXCLUSIVE:
            continue
        pair = frozenset({first, second})
        made = _order_vector(f"preflight/{first.value}+{second.value}", ["CIS-PRE-2", "CIS-PRE-8"], pair)
        if made["expect"]["code"] != first.value:
            raise AssertionError(f"{first.value}+{second.value} gave {made['expect']['code']}")
        vectors.append(made)
    return document(
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


def lifecycle_documents() -> dict[str, dict[str, Any]]:
    """``transitions.json``, ``illegal.json``, ``runs.json`` and ``preflight_order.json``."""
    return {
        "transitions.json": _transitions_document(),
        "illegal.json": _illegal_document(),
        "runs.json": _runs_document(),
        "preflight_order.json": _preflight_document(),
    }
