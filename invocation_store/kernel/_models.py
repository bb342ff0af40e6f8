"""Value classes of the kernel: enums, limits, envelopes, run state and the record.

Every class here is a frozen attrs class with keyword-only fields. Nothing here does
I/O, reads a clock or draws random numbers; a new record is always an
:func:`attrs.evolve` of the old one (CIS-KERN-1). Times are integer milliseconds
since the Unix epoch, supplied by the caller; sizes are UTF-8 bytes.
"""

from __future__ import annotations

import enum
from typing import Final

from attrs import field, frozen

from ._codes import ErrorCode
from ._ids import is_safe_id

__all__ = [
    "MAX_SAFE_INT",
    "CanonicalRecord",
    "EvidenceStatus",
    "InvocationStatus",
    "Limits",
    "Projection",
    "RunContext",
    "RunState",
    "RunStatus",
    "ToolCallEnvelope",
    "ToolPolicy",
    "check_int",
    "check_now",
    "is_safe_int",
]

#: Largest number a run or record carries: times and budgets must survive a trip
#: through Lua (doubles) and JSON (I-JSON, binary64 readers) unchanged (CIS-STORE-8).
MAX_SAFE_INT: Final = 2**53 - 1


def is_safe_int(value: object, minimum: int) -> bool:
    """True if ``value`` is an int (not a bool) in ``[minimum, 2**53 - 1]`` (see :func:`check_int`)."""
    return type(value) is int and minimum <= value <= MAX_SAFE_INT


def check_int(name: str, value: object, minimum: int = 0) -> int:
    """``value`` if it is an int (not a bool) in ``[minimum, 2**53 - 1]``; else raise ``ValueError``.

    The one domain of every time (integer ms), duration, budget, counter and limit the
    kernel is given (CIS-KERN-2): a binary64 reader holds each exactly, and a value
    outside it is the caller's error, refused before any decision.
    """
    if type(value) is not int or not minimum <= value <= MAX_SAFE_INT:
        raise ValueError(f"{name} must be an int in [{minimum}, 2**53 - 1]")
    return value


def check_now(now_ms: object) -> int:
    """``now_ms`` if it is a time the kernel can decide at (:func:`check_int` from 0)."""
    if type(now_ms) is not int or not 0 <= now_ms <= MAX_SAFE_INT:
        raise ValueError("now_ms must be an int in [0, 2**53 - 1]")
    return now_ms


class InvocationStatus(enum.StrEnum):
    """Lifecycle status of a canonical record (CIS-LIFE-1)."""

    #: Created by preflight-passing begin; the tool is running or being projected.
    PROJECTING = "PROJECTING"
    #: Terminal: raw response and bounded agent result are stored.
    READY = "READY"
    #: Terminal: the call failed; the record carries an error code.
    ERROR = "ERROR"


class EvidenceStatus(enum.StrEnum):
    """What a record's agent result says about the world (CIS-EVID-1)."""

    #: The tool found something; a READY record with it is citable as evidence.
    EVIDENCE_FOUND = "EVIDENCE_FOUND"
    #: A scoped negative observation: nothing was found within the stated scope.
    NO_EVIDENCE = "NO_EVIDENCE"
    #: The call failed; never referencable.
    ERROR = "ERROR"


class RunStatus(enum.StrEnum):
    """Run lifecycle (CIS-RUN-1)."""

    #: Accepting tool calls until its deadline.
    ACTIVE = "ACTIVE"
    #: Stopped by the harness before its end; rejects new calls.
    CANCELLED = "CANCELLED"
    #: Ended normally; rejects new calls.
    CLOSED = "CLOSED"


def _positive(_inst: object, attribute: object, value: int) -> None:
    check_int(getattr(attribute, "name", "?"), value, 1)


@frozen(kw_only=True)
class Limits:
    """Byte limits, all in UTF-8 bytes (CIS-SIZE-1).

    Defaults: request 256 KiB, raw response 4 MiB, agent result 16 KiB, whole
    record 5 MiB, JSON nesting depth 64, progress facts 100 and 64 KiB in total.
    Raises ``ValueError`` for a limit that is not an int in ``[1, 2**53 - 1]``.

    This class is the one definition of the limits: every JSON form of them (the
    codec's, a trace header's ``TraceLimits``, a history header's, the vectors') is
    derived from its fields, and each field's ``doc`` metadata is its description in
    the generated schemas.
    """

    #: Largest ``arguments`` text accepted by preflight (CIS-SIZE-2).
    request_bytes: int = field(
        default=256 * 1024,
        validator=_positive,
        metadata={"doc": "Largest arguments text accepted by preflight."},
    )
    #: Largest raw tool response stored; over it the record becomes ERROR (CIS-SIZE-3).
    raw_bytes: int = field(
        default=4 * 1024 * 1024, validator=_positive, metadata={"doc": "Largest raw tool response stored."}
    )
    #: Largest agent result (content + scope) returned to the agent (CIS-SIZE-4).
    agent_result_bytes: int = field(
        default=16 * 1024, validator=_positive, metadata={"doc": "Largest agent result (content + scope)."}
    )
    #: Largest whole record (see :func:`record_bytes`) (CIS-SIZE-5).
    record_bytes: int = field(
        default=5 * 1024 * 1024, validator=_positive, metadata={"doc": "Largest whole record."}
    )
    #: Deepest JSON nesting accepted in arguments (CIS-JSON-5).
    max_json_depth: int = field(
        default=64, validator=_positive, metadata={"doc": "Deepest JSON nesting accepted in arguments."}
    )
    #: Most observed facts in one progress projection (CIS-PROG-4).
    max_facts: int = field(
        default=100, validator=_positive, metadata={"doc": "Most facts in one progress projection."}
    )
    #: Most bytes (content + scope) of all facts of one progress projection (CIS-PROG-4).
    max_fact_bytes: int = field(
        default=64 * 1024,
        validator=_positive,
        metadata={"doc": "Most bytes (content + scope) of all facts of one projection."},
    )


@frozen(kw_only=True)
class RunContext:
    """The explicit run a harness is executing: the source of truth for the run id.

    ``run_id`` must be a safe id (CIS-ID-1); construction raises ``ValueError``
    otherwise, since a harness building an unsafe context is a programming error.
    """

    run_id: str = field()

    @run_id.validator
    def _check(self, _attribute: object, value: str) -> None:
        if not is_safe_id(value):
            raise ValueError("run_id is not a safe id (1-128 of A-Z a-z 0-9 _ - . :)")


@frozen(kw_only=True)
class ToolCallEnvelope:
    """One tool call as the model framework produced it (CIS-PRE-1).

    Fields are typed as what a well-behaved caller passes, but preflight accepts any
    value in any field and answers with a code (CIS-PRE-2): an envelope decoded from
    hostile input may carry ``None`` or a non-string anywhere.

    - ``run_id``: the run the framework believes the call belongs to.
    - ``tool_call_id``: the framework's exact id, kept byte for byte (CIS-ID-4).
    - ``tool_name``: the tool's declared name.
    - ``arguments``: the arguments JSON text exactly as supplied (CIS-REC-2).
    """

    run_id: str | None
    tool_call_id: str | None
    tool_name: str | None
    arguments: str | None


@frozen(kw_only=True)
class ToolPolicy:
    """What a harness declares about a tool (CIS-PRE-5, CIS-PRE-6).

    Only the literal ``True`` passes: a string ``"false"`` or ``1`` fails closed.
    ``timeout_ms`` is the executor's time limit in milliseconds.
    """

    name: str
    authorized: bool
    read_only: bool
    timeout_ms: int = field(default=30_000, validator=_positive)


@frozen(kw_only=True)
class RunState:
    """A run's admission state, kept by the store (CIS-RUN-1).

    Times in ms; ``ttl_ms`` is the TTL every record of the run gets at creation;
    ``expires_at_ms`` is when the run state itself lapses (deadline + ttl).
    ``tool_calls_used`` counts admitted calls; ``bytes_used`` counts admitted request
    bytes plus bytes stored by completions (CIS-RUN-6). Build new runs with
    :func:`~invocation_store.kernel.open_run`, which validates the numbers; the
    class itself carries no validators because every update goes through it.
    """

    run_id: str
    status: RunStatus
    opened_at_ms: int
    deadline_ms: int
    ttl_ms: int
    expires_at_ms: int
    tool_call_budget: int
    byte_budget: int
    tool_calls_used: int = 0
    bytes_used: int = 0


@frozen(kw_only=True)
class Projection:
    """A projector's result: the bounded view of a raw response (CIS-EVID-2).

    ``content`` is what the agent reads; ``scope`` says what was searched (required,
    non-blank, for NO_EVIDENCE: CIS-EVID-3). ``evidence_status`` is typed loosely on
    purpose: the kernel validates it and maps anything else to PROJECTION_INVALID.
    """

    evidence_status: EvidenceStatus | str
    content: str
    scope: str = ""


@frozen(kw_only=True)
class CanonicalRecord:
    """The one record of one tool call (CIS-REC-1).

    Identity: ``run_id`` + ``tool_call_id`` (exact). ``invocation_token`` is the
    adapter-drawn token that makes retried writes idempotent (CIS-RETRY-1); it is not
    an id. ``sequence`` is the call's 1-based admission position in the run.
    ``request_json`` is the complete arguments text; ``raw_response`` is the complete
    raw tool response and is harness-only (CIS-REC-3); ``agent_result`` and ``scope``
    are the bounded projection. Times are ms; ``expires_at_ms`` is set once at
    creation and never changes (CIS-TTL-1).
    """

    run_id: str
    tool_call_id: str
    tool_name: str
    invocation_token: str
    sequence: int
    status: InvocationStatus
    evidence_status: EvidenceStatus | None
    error_code: ErrorCode | None
    request_json: str
    raw_response: str | None
    agent_result: str | None
    scope: str | None
    created_at_ms: int
    updated_at_ms: int
    expires_at_ms: int

    @property
    def terminal(self) -> bool:
        """True for READY and ERROR, which no event leaves (CIS-LIFE-3)."""
        return self.status is not InvocationStatus.PROJECTING
