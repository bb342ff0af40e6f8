"""The trace model: one frozen attrs class per kind of trace line (CIS-ORC-1).

Theory of operation
-------------------
A trace is JSON Lines: a ``header`` line, then one line per operation that an
implementation of the store performed, each holding the operation's *inputs* and the
implementation's *observed* outcome. This module is the single source of truth for
the shape of those lines:

- :func:`~._validate.trace_schema` derives ``spec/trace.schema.json`` (JSON Schema
  2020-12) from these classes (a test keeps the file identical);
- :mod:`._validate` compiles the fast, strict line validator the checker uses from
  them, and builds the strict cattrs converter that structures lines into them (a
  test checks that both accept and reject the same lines);
- the recorder builds lines as instances of them.

Conventions (all language-neutral): enum values are the exact strings of
:class:`~invocation_store.kernel.ErrorCode`, ``EvidenceStatus`` and friends; times
are integer milliseconds; sizes are UTF-8 bytes; text is a JSON string. A field
without a default is *required* (it may still be ``null`` when its type allows);
a field with a default is *optional*: omitted or ``null`` both mean "not reported".
Classes listing ``ONE_OF`` need exactly one of those fields to be non-null.

Size: the trace format itself, one frozen class per kind of line with every field
documented; the JSON Schema is generated from it, so it stays one module.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs
from attrs import field, frozen

from ..kernel import (
    CitationKind,
    ErrorCode,
    EvidenceStatus,
    ExclusionReason,
    InvocationStatus,
    Limits,
    RunStatus,
)

__all__ = [
    "LINE_TYPES",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "CitationView",
    "Cite",
    "CiteObserved",
    "Clock",
    "Envelope",
    "Execute",
    "ExecuteOutcome",
    "ExecutorFailure",
    "FactView",
    "Header",
    "Line",
    "Policy",
    "Progress",
    "ProgressObserved",
    "Project",
    "ProjectOutcome",
    "ProjectionView",
    "ProjectorFailure",
    "Read",
    "RecordObserved",
    "RecordView",
    "Result",
    "ResultObserved",
    "ResultView",
    "RunCancel",
    "RunClose",
    "RunObserved",
    "RunOpen",
    "RunView",
    "Submit",
    "SubmitObserved",
    "Sweep",
    "SweepObserved",
    "TraceLimits",
]

#: The ``format`` of a trace header.
TRACE_FORMAT: Final = "canonical-invocation-trace"
#: The trace format version this oracle reads.
TRACE_VERSION: Final = 1


def _m(text: str, minimum: int | None = None) -> dict[str, Any]:
    """Field metadata: its documentation (for the schema) and an integer minimum."""
    meta: dict[str, Any] = {"doc": text}
    if minimum is not None:
        meta["minimum"] = minimum
    return meta


def _min(minimum: int) -> Any:
    """Validator: an int field (or an optional one, when set) is at least ``minimum``."""

    def check(_inst: object, attribute: Any, value: object) -> None:
        if isinstance(value, int) and value < minimum:
            raise ValueError(f"{attribute.name} must be >= {minimum}")

    return check


def _exactly_one(instance: Any) -> None:
    present = [name for name in instance.ONE_OF if getattr(instance, name) is not None]
    if len(present) != 1:
        raise ValueError(f"exactly one of {', '.join(instance.ONE_OF)} is required")


def _counts(_inst: object, _attribute: object, value: dict[Any, int]) -> None:
    if any(isinstance(count, int) and count < 0 for count in value.values()):
        raise ValueError("counts must be >= 0")


class ExecutorFailure(enum.StrEnum):
    """How an executor failed, as the implementation observed it (CIS-FAIL-2..4)."""

    #: The executor raised / threw: EXECUTION_FAILED.
    RAISED = "raised"
    #: The executor did not return within the tool's timeout: EXECUTION_TIMEOUT.
    TIMEOUT = "timeout"
    #: The executor returned a value that has no text form: SERIALIZATION_FAILED.
    NOT_SERIALIZABLE = "not_serializable"


class ProjectorFailure(enum.StrEnum):
    """How a projector failed (CIS-EVID-5)."""

    #: The projector raised / threw: PROJECTION_FAILED.
    RAISED = "raised"
    #: The projector returned something that is not a projection: PROJECTION_INVALID.
    INVALID = "invalid"


# ---------------------------------------------------------------------------
# Observed views of kernel values


def _trace_limits() -> type[Any]:
    """``TraceLimits``: the fields of :class:`~invocation_store.kernel.Limits`, each
    required and at least 1, described by its ``doc`` metadata (one definition)."""
    attrs.resolve_types(Limits)
    cls = attrs.make_class(
        "TraceLimits",
        {
            limit.name: field(type=limit.type, metadata=_m(limit.metadata["doc"], 1), validator=_min(1))
            for limit in attrs.fields(Limits)
        },
        frozen=True,
        kw_only=True,
    )
    cls.__doc__ = "The byte limits in force for the whole trace (UTF-8 bytes; CIS-SIZE-1)."
    cls.__module__ = __name__
    return cls


if TYPE_CHECKING:
    TraceLimits = Limits  # the same fields, all required (see _trace_limits)
else:
    TraceLimits = _trace_limits()


@frozen(kw_only=True)
class RunView:
    """A run's state as the implementation reports it (CIS-RUN-1)."""

    run_id: str = field(metadata=_m("The run id."))
    status: RunStatus = field(metadata=_m("ACTIVE, CANCELLED or CLOSED."))
    opened_at_ms: int | None = field(
        default=None, metadata=_m("When the run was opened.", 0), validator=_min(0)
    )
    deadline_ms: int | None = field(default=None, metadata=_m("The run's deadline.", 0), validator=_min(0))
    ttl_ms: int | None = field(
        default=None, metadata=_m("The TTL every record of the run gets at creation.", 1), validator=_min(1)
    )
    expires_at_ms: int | None = field(
        default=None, metadata=_m("When the run state lapses (deadline + TTL).", 0), validator=_min(0)
    )
    tool_call_budget: int | None = field(
        default=None, metadata=_m("Most calls admitted.", 0), validator=_min(0)
    )
    byte_budget: int | None = field(
        default=None, metadata=_m("The run's cumulative byte budget.", 0), validator=_min(0)
    )
    tool_calls_used: int | None = field(
        default=None, metadata=_m("Calls admitted so far.", 0), validator=_min(0)
    )
    bytes_used: int | None = field(
        default=None,
        metadata=_m("Bytes charged so far (admitted requests + stored completions).", 0),
        validator=_min(0),
    )


@frozen(kw_only=True)
class RunObserved:
    """Outcome of a run operation: a code, or the run's new state."""

    code: ErrorCode | None = field(metadata=_m("The error code returned, or null on success."))
    run: RunView | None = field(metadata=_m("The run after the operation (null if unknown)."))


@frozen(kw_only=True)
class RecordView:
    """One canonical record as the implementation holds it (CIS-REC-1).

    Never the raw text: only its size (the raw response is harness-only, CIS-REC-3).
    While a record is PROJECTING, ``raw_bytes`` and ``updated_at_ms`` are not
    compared: whether the raw response is written before the projection or with it
    is the implementation's choice.
    """

    run_id: str = field(metadata=_m("The record's run id."))
    tool_call_id: str = field(metadata=_m("The record's tool_call_id, exactly as supplied."))
    status: InvocationStatus = field(metadata=_m("PROJECTING, READY or ERROR."))
    evidence_status: EvidenceStatus | None = field(metadata=_m("EVIDENCE_FOUND, NO_EVIDENCE, ERROR or null."))
    error_code: ErrorCode | None = field(metadata=_m("The record's error code (ERROR only)."))
    raw_bytes: int | None = field(
        metadata=_m("UTF-8 size of the stored raw response; null if none is stored.", 0), validator=_min(0)
    )
    agent_result: str | None = field(metadata=_m("The bounded agent result (READY only)."))
    scope: str | None = field(metadata=_m("What the projection covered (READY only)."))
    tool_name: str | None = field(default=None, metadata=_m("The tool's name."))
    sequence: int | None = field(
        default=None, metadata=_m("1-based admission position in the run.", 1), validator=_min(1)
    )
    request_bytes: int | None = field(
        default=None, metadata=_m("UTF-8 size of the stored arguments text.", 0), validator=_min(0)
    )
    created_at_ms: int | None = field(default=None, metadata=_m("Creation time.", 0), validator=_min(0))
    updated_at_ms: int | None = field(
        default=None, metadata=_m("Time of the last transition.", 0), validator=_min(0)
    )
    expires_at_ms: int | None = field(
        default=None, metadata=_m("Expiry, set once at creation (CIS-TTL-1).", 0), validator=_min(0)
    )
    ttl_remaining_ms: int | None = field(
        default=None,
        metadata=_m(
            "Remaining TTL in the trace's clock, where the store has one (e.g. min(PTTL, expiry - now))."
        ),
    )


@frozen(kw_only=True)
class Envelope:
    """A tool call as the model framework produced it; any field may be null."""

    run_id: str | None = field(metadata=_m("The run id the framework believes the call belongs to."))
    tool_call_id: str | None = field(metadata=_m("The framework's exact id."))
    tool_name: str | None = field(metadata=_m("The tool's name."))
    arguments: str | None = field(metadata=_m("The arguments JSON text exactly as supplied."))


@frozen(kw_only=True)
class Policy:
    """What the harness declares about the named tool (CIS-PRE-5, CIS-PRE-6)."""

    name: str = field(metadata=_m("The declared tool name."))
    authorized: bool = field(metadata=_m("Whether the tool is authorized (only true passes)."))
    read_only: bool = field(metadata=_m("Whether the tool is read-only (only true passes)."))
    timeout_ms: int = field(metadata=_m("The executor's time limit.", 1), validator=_min(1))


@frozen(kw_only=True)
class SubmitObserved:
    """Outcome of a submission: the refusal code, or the record it created."""

    code: ErrorCode | None = field(metadata=_m("The preflight or admission code; null if admitted."))
    record: RecordView | None = field(metadata=_m("The PROJECTING record created; null if refused."))


@frozen(kw_only=True)
class RecordObserved:
    """The record under the call's (or the read's) key after the operation."""

    record: RecordView | None = field(metadata=_m("The record, or null if absent or expired."))


@frozen(kw_only=True)
class ExecuteOutcome:
    """What the executor did: exactly one of ``raw`` and ``failure``."""

    ONE_OF: ClassVar[tuple[str, ...]] = ("raw", "failure")

    raw: str | None = field(default=None, metadata=_m("The complete raw response text."))
    failure: ExecutorFailure | None = field(default=None, metadata=_m("raised, timeout or not_serializable."))

    def __attrs_post_init__(self) -> None:
        _exactly_one(self)


@frozen(kw_only=True)
class ProjectionView:
    """A projector's result, unvalidated: the kernel judges it (CIS-EVID-2)."""

    evidence_status: str = field(metadata=_m("Any string; only EVIDENCE_FOUND and NO_EVIDENCE are valid."))
    content: str = field(metadata=_m("The bounded content for the agent."))
    scope: str = field(metadata=_m("What was searched (required non-blank for NO_EVIDENCE)."))


@frozen(kw_only=True)
class ProjectOutcome:
    """What the projector did: exactly one of ``projection`` and ``failure``."""

    ONE_OF: ClassVar[tuple[str, ...]] = ("projection", "failure")

    projection: ProjectionView | None = field(default=None, metadata=_m("The projection returned."))
    failure: ProjectorFailure | None = field(default=None, metadata=_m("raised or invalid."))

    def __attrs_post_init__(self) -> None:
        _exactly_one(self)


@frozen(kw_only=True)
class ResultView:
    """What the agent was given for one call (CIS-BND-4, CIS-ERR-1)."""

    ok: bool = field(metadata=_m("True when the record is READY."))
    tool_call_id: str | None = field(metadata=_m("The echoed id (only a safe id is echoed)."))
    code: ErrorCode | None = field(metadata=_m("The error code on failure."))
    evidence_status: EvidenceStatus | None = field(metadata=_m("EVIDENCE_FOUND or NO_EVIDENCE on success."))
    content: str | None = field(metadata=_m("The bounded agent result on success."))
    scope: str | None = field(metadata=_m("The projection's scope on success."))
    negative: bool = field(metadata=_m("True for a NO_EVIDENCE result."))
    message: str | None = field(
        default=None, metadata=_m("The fixed message of the code, if the implementation has one.")
    )


@frozen(kw_only=True)
class ResultObserved:
    """The agent-facing answer of a call."""

    result: ResultView = field(metadata=_m("The agent-facing result."))


@frozen(kw_only=True)
class CitationView:
    """The answer to "may the agent cite this call?" (CIS-REF-1..3)."""

    kind: CitationKind = field(metadata=_m("EVIDENCE, NEGATIVE_OBSERVATION or NOT_REFERENCABLE."))
    tool_call_id: str | None = field(
        metadata=_m("The id asked about, if it is a safe id; null otherwise (never echoed).")
    )
    content: str | None = field(metadata=_m("The bounded content (citable kinds only)."))
    scope: str | None = field(metadata=_m("The scope (citable kinds only)."))
    reason: ExclusionReason | None = field(metadata=_m("Why not referencable."))


@frozen(kw_only=True)
class CiteObserved:
    """The citation returned."""

    citation: CitationView = field(metadata=_m("The citation."))


@frozen(kw_only=True)
class FactView:
    """One observed fact of a progress projection (CIS-PROG-2)."""

    tool_call_id: str = field(metadata=_m("The call's id."))
    tool_name: str = field(metadata=_m("The tool's name."))
    sequence: int = field(metadata=_m("The call's admission position.", 1), validator=_min(1))
    evidence_status: EvidenceStatus = field(metadata=_m("EVIDENCE_FOUND or NO_EVIDENCE."))
    negative: bool = field(metadata=_m("True for NO_EVIDENCE."))
    content: str = field(metadata=_m("The bounded content."))
    scope: str = field(metadata=_m("The scope."))


@frozen(kw_only=True)
class ProgressObserved:
    """A progress projection (CIS-PROG-2..4)."""

    facts: list[FactView] = field(metadata=_m("The facts, in completion order (the order the calls ended)."))
    excluded: dict[ExclusionReason, int] = field(
        metadata=_m("Non-referencable identities, counted by reason (counts >= 0).", 0), validator=_counts
    )
    omitted: int = field(
        metadata=_m("READY records left out by the count or byte cap.", 0), validator=_min(0)
    )


@frozen(kw_only=True)
class SweepObserved:
    """What a stale sweep moved to ERROR/STALE_PROJECTION (CIS-LIFE-7)."""

    swept: int = field(metadata=_m("How many records were swept.", 0), validator=_min(0))
    tool_call_ids: list[str] | None = field(default=None, metadata=_m("Which (any order)."))


# ---------------------------------------------------------------------------
# Lines


@frozen(kw_only=True)
class Header:
    """First line: the format, its version, the start time and the limits in force."""

    OP: ClassVar[str] = "header"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = ("CIS-ORC-1",)
    DOC: ClassVar[str] = "First line of every trace."

    format: str = field(metadata=_m(f'Always "{TRACE_FORMAT}".'))
    version: int = field(metadata=_m(f"The format version ({TRACE_VERSION}).", 1), validator=_min(1))
    now_ms: int = field(metadata=_m("The trace clock at the start.", 0), validator=_min(0))
    limits: TraceLimits = field(metadata=_m("The limits in force."))
    implementation: str | None = field(
        default=None, metadata=_m("Free text naming the implementation that recorded the trace.")
    )


@frozen(kw_only=True)
class Clock:
    """The trace clock moves forward to ``now_ms`` (never backwards)."""

    OP: ClassVar[str] = "clock"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = ("CIS-TTL-4",)
    DOC: ClassVar[str] = "The clock moves to now_ms; records and runs past their expiry lapse."

    now_ms: int = field(metadata=_m("The new time.", 0), validator=_min(0))


@frozen(kw_only=True)
class RunOpen:
    """The harness opened a run (CIS-RUN-1, CIS-RETRY-3)."""

    OP: ClassVar[str] = "run_open"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = ("CIS-RUN-1", "CIS-RETRY-3")
    DOC: ClassVar[str] = "Open a run with its deadline, record TTL and budgets."

    run_id: str = field(metadata=_m("The run id."))
    deadline_ms: int = field(metadata=_m("Absolute deadline.", 0), validator=_min(0))
    ttl_ms: int = field(metadata=_m("TTL of every record of the run.", 1), validator=_min(1))
    tool_call_budget: int = field(metadata=_m("Most calls admitted.", 0), validator=_min(0))
    byte_budget: int = field(metadata=_m("Cumulative byte budget.", 0), validator=_min(0))
    observed: RunObserved = field(metadata=_m("The outcome."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class RunCancel:
    """The harness cancelled a run (CIS-RUN-2)."""

    OP: ClassVar[str] = "run_cancel"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = ("CIS-RUN-2",)
    DOC: ClassVar[str] = "ACTIVE -> CANCELLED."

    run_id: str = field(metadata=_m("The run id."))
    observed: RunObserved = field(metadata=_m("The outcome."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class RunClose:
    """The harness closed a run (CIS-RUN-2)."""

    OP: ClassVar[str] = "run_close"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = ("CIS-RUN-2",)
    DOC: ClassVar[str] = "ACTIVE -> CLOSED."

    run_id: str = field(metadata=_m("The run id."))
    observed: RunObserved = field(metadata=_m("The outcome."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class Submit:
    """A tool call reached the boundary: preflight and admission (CIS-PRE-1..8)."""

    OP: ClassVar[str] = "submit"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = (
        "CIS-PRE-1",
        "CIS-PRE-2",
        "CIS-PRE-3",
        "CIS-PRE-5",
        "CIS-PRE-6",
        "CIS-PRE-8",
        "CIS-ID-2",
        "CIS-ID-3",
        "CIS-ID-4",
        "CIS-ID-5",
        "CIS-JSON-1",
        "CIS-SIZE-2",
        "CIS-SIZE-5",
        "CIS-RUN-3",
        "CIS-RUN-4",
        "CIS-RUN-5",
        "CIS-RUN-6",
        "CIS-REC-4",
        "CIS-TTL-1",
        "CIS-RETRY-1",
        "CIS-BND-6",
    )
    DOC: ClassVar[str] = "Preflight and admission of one call; opens call number `call`."

    call: int = field(
        metadata=_m("Trace-unique call number, strictly increasing across submit lines.", 1),
        validator=_min(1),
    )
    context_run_id: str = field(metadata=_m("The harness's explicit RunContext run id (a safe id)."))
    envelope: Envelope = field(metadata=_m("The call as the framework produced it."))
    policy: Policy | None = field(
        metadata=_m("The harness's declaration of the named tool; null if unknown.")
    )
    token: str | None = field(metadata=_m("The invocation token drawn for the call; null if none was drawn."))
    observed: SubmitObserved = field(metadata=_m("The outcome."))
    now_ms: int | None = field(
        default=None, metadata=_m("The clock moves here first (admission time).", 0), validator=_min(0)
    )


@frozen(kw_only=True)
class Execute:
    """The executor of an admitted call returned or failed (CIS-FAIL-2..4, CIS-SIZE-3)."""

    OP: ClassVar[str] = "execute"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = (
        "CIS-PRE-1",
        "CIS-BND-6",
        "CIS-FAIL-2",
        "CIS-FAIL-3",
        "CIS-FAIL-4",
        "CIS-SIZE-3",
        "CIS-SIZE-5",
        "CIS-STORE-3",
        "CIS-TTL-3",
        "CIS-LIFE-6",
    )
    DOC: ClassVar[str] = "The executor's outcome for call `call`, and the record after it."

    call: int = field(metadata=_m("The call number of the submit line.", 1), validator=_min(1))
    outcome: ExecuteOutcome = field(metadata=_m("raw text or a failure kind."))
    observed: RecordObserved = field(metadata=_m("The record after this step."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class Project:
    """The projector of a call returned or failed (CIS-EVID-1..5, CIS-SIZE-4)."""

    OP: ClassVar[str] = "project"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = (
        "CIS-EVID-1",
        "CIS-EVID-2",
        "CIS-EVID-3",
        "CIS-EVID-4",
        "CIS-EVID-5",
        "CIS-REC-3",
        "CIS-REC-5",
        "CIS-SIZE-3",
        "CIS-SIZE-4",
        "CIS-SIZE-5",
        "CIS-FAIL-6",
        "CIS-STORE-3",
        "CIS-TTL-3",
        "CIS-LIFE-6",
    )
    DOC: ClassVar[str] = "The projector's outcome for call `call`, and the record after it."

    call: int = field(metadata=_m("The call number of the submit line.", 1), validator=_min(1))
    outcome: ProjectOutcome = field(metadata=_m("A projection or a failure kind."))
    observed: RecordObserved = field(metadata=_m("The record after this step."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class Result:
    """The boundary answered the agent for a call (CIS-BND-4, CIS-ERR-1)."""

    OP: ClassVar[str] = "result"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = (
        "CIS-BND-1",
        "CIS-BND-4",
        "CIS-REC-3",
        "CIS-REC-5",
        "CIS-ERR-1",
        "CIS-EVID-4",
        "CIS-ID-4",
    )
    DOC: ClassVar[str] = "The agent-facing result of call `call`; closes the call."

    call: int = field(metadata=_m("The call number of the submit line.", 1), validator=_min(1))
    observed: ResultObserved = field(metadata=_m("The agent-facing result."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class Read:
    """The harness read one record (CIS-TTL-4, CIS-TTL-5, CIS-STORE-6)."""

    OP: ClassVar[str] = "read"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = (
        "CIS-TTL-2",
        "CIS-TTL-4",
        "CIS-TTL-5",
        "CIS-STORE-6",
        "CIS-LIFE-3",
        "CIS-ID-5",
        "CIS-REC-3",
    )
    DOC: ClassVar[str] = "A harness read of one record by key."

    run_id: str = field(metadata=_m("The run id read under."))
    tool_call_id: str = field(metadata=_m("The tool_call_id read."))
    observed: RecordObserved = field(metadata=_m("What the read returned."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class Cite:
    """The harness asked whether a call may be cited (CIS-REF-1..3)."""

    OP: ClassVar[str] = "cite"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = ("CIS-REF-1", "CIS-REF-2", "CIS-REF-3", "CIS-BND-4")
    DOC: ClassVar[str] = "Citation of one call by the run `context_run_id`."

    context_run_id: str = field(metadata=_m("The citing run."))
    tool_call_id: str = field(metadata=_m("The id cited (any string)."))
    observed: CiteObserved = field(metadata=_m("The citation."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class Progress:
    """The progress projection of a run (CIS-PROG-1..4)."""

    OP: ClassVar[str] = "progress"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = (
        "CIS-PROG-1",
        "CIS-PROG-2",
        "CIS-PROG-3",
        "CIS-PROG-4",
        "CIS-BND-4",
    )
    DOC: ClassVar[str] = "The run's completed calls as bounded facts."

    context_run_id: str = field(metadata=_m("The run."))
    observed: ProgressObserved = field(metadata=_m("The report."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


@frozen(kw_only=True)
class Sweep:
    """A stale sweep of a run's PROJECTING records (CIS-LIFE-7)."""

    OP: ClassVar[str] = "sweep"
    REQUIREMENTS: ClassVar[tuple[str, ...]] = ("CIS-LIFE-7", "CIS-LIFE-3")
    DOC: ClassVar[str] = "PROJECTING records at least older_than_ms old become ERROR/STALE_PROJECTION."

    context_run_id: str = field(metadata=_m("The run."))
    older_than_ms: int = field(metadata=_m("The sweep age.", 0), validator=_min(0))
    observed: SweepObserved = field(metadata=_m("What was swept."))
    now_ms: int | None = field(default=None, metadata=_m("The clock moves here first.", 0), validator=_min(0))


#: A trace line of any kind.
Line = (
    Header
    | Clock
    | RunOpen
    | RunCancel
    | RunClose
    | Submit
    | Execute
    | Project
    | Result
    | Read
    | Cite
    | Progress
    | Sweep
)

#: Line classes by their ``op`` value, in documentation order.
LINE_TYPES: Final[dict[str, type[Any]]] = {
    cls.OP: cls
    for cls in (
        Header,
        Clock,
        RunOpen,
        RunCancel,
        RunClose,
        Submit,
        Execute,
        Project,
        Result,
        Read,
        Cite,
        Progress,
        Sweep,
    )
}
