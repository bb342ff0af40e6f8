"""Builders shared by the kernel tests: runs and records made by the kernel's own functions.

Records in every phase are produced through :func:`admit` and :func:`transition`, never
assembled by hand, so the tests exercise the same paths a store does. Times are integer
ms; ``T0`` is the fixed start of every scenario.
"""

from __future__ import annotations

from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Event,
    EvidenceStatus,
    Failed,
    Limits,
    Phase,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunState,
    ToolPolicy,
    admit,
    open_run,
    transition,
)

T0 = 1_700_000_000_000
TTL_MS = 60_000
DEADLINE_MS = T0 + 3_600_000
RUN_ID = "run-1"
OTHER_RUN_ID = "run-2"
TOOL = "search"
ARGS = '{"q": "weather in Paris"}'
RAW = '{"hits": [{"title": "Paris", "temp_c": 18}], "raw_marker": "RAW-ONLY-7f3a"}'


# Nothing here builds a kernel value at import time: a kernel change (or a mutant)
# then fails the tests that use it, never the collection of a whole module.


def default_limits() -> Limits:
    """The kernel's default :class:`Limits`, built when a test asks for it."""
    return Limits()


def default_context() -> RunContext:
    """The explicit run context of every scenario (run ``RUN_ID``)."""
    return RunContext(run_id=RUN_ID)


def default_policy() -> ToolPolicy:
    """An authorized, read-only policy for ``TOOL``."""
    return ToolPolicy(name=TOOL, authorized=True, read_only=True)


def make_run(
    *,
    run_id: str = RUN_ID,
    now_ms: int = T0,
    deadline_ms: int = DEADLINE_MS,
    ttl_ms: int = TTL_MS,
    tool_call_budget: int = 10,
    byte_budget: int = 1_000_000,
) -> RunState:
    """Open a fresh ACTIVE run through :func:`open_run`; fails the test on a code."""
    run = open_run(
        run_id=run_id,
        now_ms=now_ms,
        deadline_ms=deadline_ms,
        ttl_ms=ttl_ms,
        tool_call_budget=tool_call_budget,
        byte_budget=byte_budget,
    )
    assert isinstance(run, RunState), run
    return run


def request(
    tool_call_id: str = "call_1",
    *,
    run_id: str = RUN_ID,
    request_json: str = ARGS,
    token: str = "tok-1",
    tool_name: str = TOOL,
) -> AdmissionRequest:
    """An admission request with test defaults."""
    return AdmissionRequest(
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        request_json=request_json,
        invocation_token=token,
    )


def admitted(
    tool_call_id: str = "call_1",
    *,
    run: RunState | None = None,
    limits: Limits | None = None,
    run_id: str = RUN_ID,
    request_json: str = ARGS,
    token: str = "tok-1",
    now_ms: int = T0,
    tool_name: str = TOOL,
) -> Admission:
    """Admit one call on ``run`` (default: a fresh run); fails the test on a code."""
    run = run if run is not None else make_run(run_id=run_id)
    req = request(
        tool_call_id,
        run_id=run_id,
        request_json=request_json,
        token=token,
        tool_name=tool_name,
    )
    result = admit(run, None, req, limits if limits is not None else default_limits(), now_ms)
    assert isinstance(result, Admission), result
    return result


def begun(
    tool_call_id: str = "call_1", *, run_id: str = RUN_ID, request_json: str = ARGS, token: str = "tok-1"
) -> CanonicalRecord:
    """A PROJECTING record awaiting its raw response (phase AWAITING_RAW), created at ``T0``."""
    return admitted(tool_call_id, run_id=run_id, request_json=request_json, token=token).record


def step(record: CanonicalRecord | None, event: Event, limits: Limits | None = None) -> CanonicalRecord:
    """Apply ``event``; fails the test if the kernel answers with a code."""
    result = transition(record, event, limits if limits is not None else default_limits())
    assert isinstance(result, CanonicalRecord), result
    return result


def with_raw(record: CanonicalRecord, raw: str = RAW, now_ms: int = T0 + 10) -> CanonicalRecord:
    """``record`` after a successful RawReceived (phase AWAITING_PROJECTION)."""
    return step(record, RawReceived(raw_response=raw, now_ms=now_ms))


def projection(
    evidence: EvidenceStatus | str = EvidenceStatus.EVIDENCE_FOUND,
    content: str = "Paris: 18 C",
    scope: str = "weather index",
) -> Projection:
    """A projector result with test defaults."""
    return Projection(evidence_status=evidence, content=content, scope=scope)


def ready(
    record: CanonicalRecord | None = None,
    *,
    evidence: EvidenceStatus = EvidenceStatus.EVIDENCE_FOUND,
    content: str = "Paris: 18 C",
    scope: str = "weather index",
    now_ms: int = T0 + 20,
) -> CanonicalRecord:
    """A READY record: begun, raw received, projection received."""
    base = with_raw(record if record is not None else begun())
    return step(base, ProjectionReceived(projection=projection(evidence, content, scope), now_ms=now_ms))


def errored(
    record: CanonicalRecord | None = None,
    code: ErrorCode = ErrorCode.EXECUTION_FAILED,
    now_ms: int = T0 + 20,
) -> CanonicalRecord:
    """An ERROR record: begun, then Failed(code)."""
    return step(record if record is not None else begun(), Failed(code=code, now_ms=now_ms))


def in_phase(phase: Phase, tool_call_id: str = "call_1") -> CanonicalRecord | None:
    """A record (or ``None``) whose :func:`phase_of` at ``T0 + 30`` is ``phase``.

    ABSENT is ``None`` here; :func:`expired_in_phase` gives expired records.
    """
    if phase is Phase.ABSENT:
        return None
    record = begun(tool_call_id)
    if phase is Phase.AWAITING_RAW:
        return record
    if phase is Phase.AWAITING_PROJECTION:
        return with_raw(record)
    if phase is Phase.READY:
        return ready(record)
    return errored(record)


def utf8_text(size: int, char: str) -> str:
    """Text of exactly ``size`` UTF-8 bytes: copies of ``char`` padded with ASCII ``a``."""
    width = len(char.encode("utf-8"))
    text = char * (size // width) + "a" * (size % width)
    assert len(text.encode("utf-8")) == size
    return text
