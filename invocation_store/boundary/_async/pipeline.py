"""One invocation, top to bottom: the boundary's pipeline (CIS-BND-1, CIS-BND-2).

Written once as asyncio code; ``scripts/unasync.py`` generates the synchronous twin
(``_sync/pipeline.py``, never edited by hand). :func:`invoke` is the whole call, and
the steps follow it in the order they run. Every decision is the kernel's, every
write the store's; the pipeline orchestrates, and turns every failure into a code
(an executor's, a projector's or the store's: nothing they raise escapes, CIS-FAIL-1):

1. :func:`preflight`: kernel ``parse_envelope`` (preflight 1-6) against the tool's
   policy. On a refusal nothing is written and the executor is not called
   (CIS-PRE-1). The executor gets the object the I-JSON check parsed and the
   projector an independent copy (CIS-PERF-2).
2. A call the boundary holds: the harness re-sending a call whose completion the
   store did not take gets that completion applied (:func:`finish_held`), never a
   second execution (CIS-DUR-5).
3. :func:`admit`: ``store.create`` (preflight 7-11 and the PROJECTING record,
   atomically in the store, CIS-PRE-8), round trip 1. A same-token replay is this
   call's own create only if kernel ``is_own_create`` says so (:func:`own_replay`);
   any other replay is refused with the stored call's fate (kernel
   ``duplicate_code``). A create whose outcome is unknown is held with its token, and
   the re-send of the call sends it again (CIS-BND-7).
4. :func:`execute`: the executor under the tool's ``timeout_ms``, then kernel
   ``RawReceived`` (or ``Failed``: EXECUTION_FAILED, EXECUTION_TIMEOUT,
   SERIALIZATION_FAILED; over the raw limit ERROR/RESULT_TOO_LARGE and the projector
   never runs, CIS-SIZE-3); then the projector and kernel ``ProjectionReceived``
   (PROJECTION_FAILED, PROJECTION_INVALID, RESULT_TOO_LARGE; a raw response already
   received stays in the record, harness-only, CIS-FAIL-6).
5. :func:`complete`: ``store.complete(created, final)``, one compare-and-set that
   keeps the TTL, round trip 2 (CIS-STORE-9); retried within
   ``CompletionRetry.budget_ms`` and held when the store does not take it (CIS-DUR-5).
6. :func:`finished`: the bounded agent result (kernel ``agent_view``) or a code and its
   fixed message, with the provider's ids (CIS-BND-4, CIS-ECO-3): never the raw
   response, the request text, a key, a credential or exception text (CIS-ERR-1).

The stopwatch each step is handed is the telemetry's (:mod:`.._telemetry`): it times
the phases only when an OpenTelemetry SDK records them, and does nothing otherwise.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..._completion import SENDING, HeldCreate, InFlight, PendingCompletion
from ..._runners import Outcome, safe_name, type_name
from ...adapters import AsyncInvocationStore, StoreUnavailableError
from ...adapters._async.protocol import async_decision_clock
from ...kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Failed,
    InvocationStatus,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    ToolCallEnvelope,
    agent_view,
    duplicate_code,
    is_own_create,
    parse_envelope,
    transition,
)
from .._core import Core, code_of, unavailable
from .._edge import check_context, copy_json, exact_envelope, exact_projection, exact_text, raw_text
from .._registry import ToolSpec, vetted
from .._result import BoundaryResult, failure, result_of
from .._runner import async_check_tool, async_pause, async_run_tool
from .._telemetry import Stopwatch, observed_ainvoke

__all__ = ["Prepared", "complete", "finish_held", "invoke", "store_clock"]


async def store_clock(store: AsyncInvocationStore) -> int:
    """The store's clock for a decision that compares times, integer ms (CIS-STORE-10).

    Read through :func:`~invocation_store.adapters._async.protocol.async_decision_clock`:
    a store on a shared server's clock reads that clock first when it holds no reading
    yet, so no decision here rests on a host clock. Any failure is a safe
    StoreUnavailableError (CIS-FAIL-5).
    """
    try:
        return await async_decision_clock(store)
    except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE
        raise unavailable(exc) from None


@observed_ainvoke
async def invoke(
    core: Core, store: AsyncInvocationStore, context: RunContext, envelope: ToolCallEnvelope, watch: Stopwatch
) -> BoundaryResult:
    """One tool call from envelope to bounded result: the steps below, in order (see the module docstring).

    A record that lapsed while the tool ran can no longer be written (CIS-TTL-4).
    """
    prepared = preflight(core, context, envelope)
    if isinstance(prepared, BoundaryResult):
        return prepared
    tool = prepared.tool
    async_check_tool(tool)
    held = core.completions.retry_of(prepared.run_id, prepared.tool_call_id, tool.name, prepared.arguments)
    if held is not None:  # the harness re-sends a call whose completion we hold
        return await finish_held(core, store, held, prepared, watch)
    created = await admit(core, store, prepared, watch)
    if isinstance(created, BoundaryResult):
        return created
    try:
        final = await execute(core, store, prepared, created, watch)
    except StoreUnavailableError as exc:  # the store's clock failed
        return failed(prepared, core.store_failed(exc, "clock"))
    if isinstance(final, ErrorCode):
        # The kernel refused a transition of our own PROJECTING record: it expired
        # while the tool ran. Nothing can be written any more.
        core.log.warning("tool call transition refused: %s", final.value)
        return failed(prepared, final)
    return await finish_held(core, store, PendingCompletion(created=created, final=final), prepared, watch)


# -- 1. preflight 1-6: nothing written ----------------------------------------------


class Prepared(NamedTuple):
    """A call that passed preflight 1-6: its tool, exact run and call ids, exact arguments text and
    two independent copies of the parsed arguments (one for the executor, one for the
    projector; CIS-PERF-2). A named tuple: built once per call."""

    tool: ToolSpec
    run_id: str
    tool_call_id: str
    arguments: str
    executor_args: dict[str, Any]
    projector_args: dict[str, Any]


def preflight(core: Core, context: RunContext, envelope: ToolCallEnvelope) -> Prepared | BoundaryResult:
    """Preflight checks 1-6 of ``envelope`` (copied to exact text first: package docstring,
    "Text at the edge"); a refusal is its code, with nothing written (CIS-PRE-1).

    Raises ``TypeError`` for a context that is not a RunContext or an envelope that is
    not a ToolCallEnvelope (programming errors).
    """
    context = check_context(context)
    if not isinstance(envelope, ToolCallEnvelope):
        raise TypeError("envelope must be a ToolCallEnvelope")
    envelope = exact_envelope(envelope)
    tool = core.registry.get(envelope.tool_name)
    parsed = parse_envelope(context, envelope, None if tool is None else vetted(tool)[0], core.limits)
    if isinstance(parsed, ErrorCode):
        core.log.info("tool call rejected at preflight: %s", parsed.value)
        supplied = envelope.tool_call_id
        return failure(
            parsed,
            supplied,
            tool_name=None if tool is None else tool.name,
            envelope_tool_call_id=supplied if type(supplied) is str else None,
        )
    assert tool is not None
    assert isinstance(envelope.tool_call_id, str)
    assert isinstance(envelope.arguments, str)
    return Prepared(
        tool=tool,
        run_id=context.run_id,
        tool_call_id=envelope.tool_call_id,
        arguments=envelope.arguments,
        executor_args=parsed,
        projector_args=copy_json(parsed),
    )


def failed(prepared: Prepared, code: ErrorCode) -> BoundaryResult:
    """The result of a call that passed preflight and then failed with ``code`` (the provider's ids kept)."""
    return failure(
        code,
        prepared.tool_call_id,
        tool_name=prepared.tool.name,
        envelope_tool_call_id=prepared.tool_call_id,
    )


# -- 3. admission: round trip 1 ---------------------------------------------------------


async def admit(
    core: Core, store: AsyncInvocationStore, prepared: Prepared, watch: Stopwatch
) -> CanonicalRecord | BoundaryResult:
    """Create the call's PROJECTING record (CIS-PRE-8); the record, or the call's result if refused.

    A fresh call reads the store clock (``not_before_ms`` of its own-create test, through
    :func:`store_clock`: on a shared store, the server's clock, whatever the host's) and
    draws a token; a re-send of a call whose create is held sends that create again,
    token and reading unchanged (CIS-BND-7). A create that fails with a non-permanent
    StoreUnavailableError, or is interrupted in flight, is held (only a token no
    other call of this boundary drew: a repeating token factory fails closed). A
    replay whose record is still this create's own counts as created, also when it was
    waiting for a durability mode (CIS-DUR-2); any other replay is refused as the
    duplicate it is, with the first call's fate (CIS-BND-6, CIS-ID-5).
    """
    held = core.creates.take(prepared.run_id, prepared.tool_call_id, prepared.tool.name, prepared.arguments)
    if held is SENDING:
        # This boundary is sending this call's first create right now (the harness sent the
        # call twice at once): the call is in progress, and its fate is the first send's.
        core.log.info("create of this call already in flight: %s", ErrorCode.CALL_IN_PROGRESS.value)
        return failed(prepared, ErrorCode.CALL_IN_PROGRESS)
    if isinstance(held, InFlight):
        # Another re-send of this call is sending its held create right now: its fate is
        # still unknown, and a fresh token could only be refused as its duplicate.
        core.log.info(
            "create of unknown outcome already being sent again: %s", ErrorCode.STORE_UNAVAILABLE.value
        )
        return failed(prepared, ErrorCode.STORE_UNAVAILABLE)
    if held is None:
        try:
            not_before_ms = await store_clock(store)
        except StoreUnavailableError as exc:
            return failed(prepared, core.store_failed(exc, "create"))
        request = new_request(core, prepared)
        claimed = core.claim(request.invocation_token)
        sending = HeldCreate(request=request, not_before_ms=not_before_ms)
        begun = core.creates.begin(sending)
        if begun is False:
            # This boundary is sending this call's create right now (the harness sent the
            # call twice at once): it is the one in progress; a second token could only be
            # refused as its duplicate, and this boundary could no longer tell their fates.
            core.log.info("create of this call already in flight: %s", ErrorCode.CALL_IN_PROGRESS.value)
            return failed(prepared, ErrorCode.CALL_IN_PROGRESS)
        if isinstance(begun, HeldCreate):
            # Another send of this call held its create while this one read the clock: send
            # that create again (its token and reading), never a second token of the call.
            held = begun
    if held is not None:
        core.log.info("create of unknown outcome sent again with its invocation token")
        request, not_before_ms, claimed = held.request, held.not_before_ms, True
        sending = held
    watch.start()
    try:
        admitted = await store.create(request, core.limits)
    except BaseException as exc:
        watch.stop("store")
        error = unavailable(exc) if isinstance(exc, Exception) else None
        if claimed and (
            error is None
            or held is not None
            or (not error.permanent and code_of(error) is ErrorCode.STORE_UNAVAILABLE)
        ):
            # The server may have applied it and lost only the reply: hold it. A create held
            # from an earlier attempt stays held whatever this one met (a refusal raised before
            # the send, a misconfigured server): that attempt's fate is still unknown.
            core.creates.hold(sending)
        else:
            core.creates.release(sending)
        if error is None:
            raise  # the caller's own interruption (a cancellation, Ctrl-C)
        return failed(prepared, core.store_failed(error, "create"))
    watch.stop("store")
    if admitted is ErrorCode.DURABILITY_NOT_REACHED and claimed:
        # The record was written but not acknowledged durable: it may survive a
        # failover as PROJECTING, so its fate is unknown. Hold it like a lost reply:
        # a re-send replays the token, and runs the tool only if the record it finds
        # is still this create's own.
        core.creates.hold(sending)
    else:
        core.creates.release(sending)
    if isinstance(admitted, ErrorCode):
        core.log.info("tool call refused at admission: %s", admitted.value)
        return failed(prepared, admitted)
    if admitted.replayed and not own_replay(core, admitted, request, claimed, not_before_ms):
        # Not our own create: another call's record, or ours moved on (a sweep). Refuse
        # it as the duplicate it is, with that call's fate.
        code = duplicate_code(admitted.record)
        if held is None:
            core.log.warning("invocation token reused: %s", code.value)
        else:
            core.log.warning("create sent again found its record moved on: %s", code.value)
        return failed(prepared, code)
    return admitted.record


def new_request(core: Core, prepared: Prepared) -> AdmissionRequest:
    """The admission request of a fresh call, with a new invocation token (CIS-RETRY-1).

    Raises ``TypeError`` if the token factory returns anything but a non-empty ``str``.
    """
    token = exact_text(core.token_factory())
    if type(token) is not str or not token:
        raise TypeError("token_factory must return a non-empty str")
    return AdmissionRequest(
        run_id=prepared.run_id,
        tool_call_id=prepared.tool_call_id,
        tool_name=prepared.tool.name,
        request_json=prepared.arguments,
        invocation_token=token,
    )


def own_replay(
    core: Core, admitted: Admission, request: AdmissionRequest, claimed: bool, not_before_ms: int
) -> bool:
    """Is this replayed admission our own create, retried by the store client or re-sent held?

    Yes when no other call of this boundary ever drew the token (``claimed``, and
    still the sole use when the replay comes back) and the record is still exactly
    what ``request`` created (kernel ``is_own_create``: this call's token, 128 random
    bits drawn for this call only, PROJECTING without a raw response, the same ids,
    tool and request text, created no earlier than ``not_before_ms``, the store clock
    read before the first attempt was sent, CIS-RETRY-2). Anything else is a replay of
    another call (CIS-BND-6).
    """
    if (
        claimed
        and core.sole_use(request.invocation_token)
        and is_own_create(admitted.record, request, not_before_ms)
    ):
        core.log.info("create replayed by the store: recognised as this invocation")
        return True
    return False


# -- 4. execution and projection -----------------------------------------------------------


async def execute(
    core: Core, store: AsyncInvocationStore, prepared: Prepared, created: CanonicalRecord, watch: Stopwatch
) -> CanonicalRecord | ErrorCode:
    """Run the executor, then the projector if the raw response was kept; the kernel's terminal record.

    How each runs, and which interruptions escape, is
    :func:`~invocation_store.boundary._runner.async_run_tool`'s (CIS-FAIL-2, CIS-FAIL-3).
    Returns an ErrorCode when the kernel refuses the transition (the record expired
    while the tool ran). Raises StoreUnavailableError if the store's clock fails.
    """
    tool = prepared.tool
    watch.start()
    executed = await async_run_tool(tool.executor, tool.timeout_ms, prepared.executor_args)
    watch.stop("execute")
    record = after_execution(core, created, executed, await store_clock(store))
    if isinstance(record, ErrorCode) or record.status is not InvocationStatus.PROJECTING:
        return record
    watch.start()
    projected = await async_run_tool(tool.projector, None, record.raw_response, prepared.projector_args)
    watch.stop("project")
    return after_projection(core, record, projected, await store_clock(store))


def after_execution(
    core: Core, created: CanonicalRecord, outcome: Outcome, now_ms: int
) -> CanonicalRecord | ErrorCode:
    """Apply the executor's outcome: Failed(...) or RawReceived (CIS-FAIL-2..4, CIS-SIZE-3)."""
    name = created.tool_name
    if outcome.timed_out:
        core.log.warning("tool %s executor timed out: %s", name, ErrorCode.EXECUTION_TIMEOUT.value)
        return transition(created, Failed(code=ErrorCode.EXECUTION_TIMEOUT, now_ms=now_ms), core.limits)
    if outcome.failure is not None:
        failure_name = safe_name(outcome.failure)
        core.log.warning(
            "tool %s executor raised %s: %s", name, failure_name, ErrorCode.EXECUTION_FAILED.value
        )
        return transition(created, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now_ms), core.limits)
    raw = raw_text(outcome.value)
    if raw is None:
        core.log.warning(
            "tool %s executor returned an unserializable %s: %s",
            name,
            type_name(outcome.value),
            ErrorCode.SERIALIZATION_FAILED.value,
        )
        return transition(created, Failed(code=ErrorCode.SERIALIZATION_FAILED, now_ms=now_ms), core.limits)
    return transition(created, RawReceived(raw_response=raw, now_ms=now_ms), core.limits)


def after_projection(
    core: Core, record: CanonicalRecord, outcome: Outcome, now_ms: int
) -> CanonicalRecord | ErrorCode:
    """Apply the projector's outcome; the raw response stays in the record (CIS-EVID-5, CIS-FAIL-6)."""
    name = record.tool_name
    if outcome.failure is not None:
        failure_name = safe_name(outcome.failure)
        core.log.warning(
            "tool %s projector raised %s: %s", name, failure_name, ErrorCode.PROJECTION_FAILED.value
        )
        return transition(record, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=now_ms), core.limits)
    projection = outcome.value
    if not isinstance(projection, Projection):
        core.log.warning(
            "tool %s projector returned a %s: %s",
            name,
            type_name(projection),
            ErrorCode.PROJECTION_INVALID.value,
        )
        return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=now_ms), core.limits)
    try:
        projection = exact_projection(projection)
    except Exception as exc:  # noqa: BLE001 - a Projection whose fields cannot be read is invalid
        core.log.warning(
            "tool %s projection unreadable (%s): %s", name, type_name(exc), ErrorCode.PROJECTION_INVALID.value
        )
        return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=now_ms), core.limits)
    return transition(record, ProjectionReceived(projection=projection, now_ms=now_ms), core.limits)


# -- 5. completion: round trip 2, retried, then held ----------------------------------------


async def complete(
    core: Core, store: AsyncInvocationStore, pending: PendingCompletion, watch: Stopwatch
) -> CanonicalRecord | ErrorCode:
    """The store's compare-and-set ``created -> final``, retried after StoreUnavailableError (CIS-DUR-5).

    Returns the store's answer (the completion is then no longer held); once the
    retry budget is spent (one deadline for every retry, the store's included:
    ``core.completions.retrying``), or at once for a permanent failure (a corrupt
    record), the completion is held and the last StoreUnavailableError raised; any
    exception of a store method counts as StoreUnavailableError (CIS-FAIL-5). The
    compare-and-set is idempotent: one that landed replays as itself (CIS-RETRY-2).
    """
    completions = core.completions
    with completions.retrying():
        pauses = None
        while True:
            watch.start()
            try:
                stored = await store.complete(pending.created, pending.final)
            except Exception as exc:  # noqa: BLE001 - any store failure is STORE_UNAVAILABLE
                watch.stop("store")
                error = unavailable(exc)
                if error.permanent:  # a corrupt record: the same answer until repaired
                    completions.hold(pending)
                    raise error from None
                if pauses is None:
                    pauses = completions.pauses(pending)
                seconds = next(pauses, None)
                if seconds is None:
                    raise error from None
                await async_pause(seconds)
                continue
            watch.stop("store")
            completions.settled(pending)
            return stored


async def finish_held(
    core: Core,
    store: AsyncInvocationStore,
    pending: PendingCompletion,
    prepared: Prepared | None,
    watch: Stopwatch,
) -> BoundaryResult:
    """Apply ``pending`` (a fresh completion, or one the boundary holds) and return the call's result.

    STORE_UNAVAILABLE while the store does not take it (it is then held). ``prepared``
    is the call being answered (None when the harness asks for held completions:
    ``finish_pending``), for the provider's ids of the result.
    """
    try:
        stored = await complete(core, store, pending, watch)
    except StoreUnavailableError as exc:
        code = core.store_failed(exc, "complete")
        if prepared is None:
            return failure(code, pending.created.tool_call_id)
        return failed(prepared, code)
    return finished(core, pending.final, stored, prepared, watch)


# -- 6. the result ---------------------------------------------------------------------------


def finished(
    core: Core,
    final: CanonicalRecord,
    stored: CanonicalRecord | ErrorCode,
    prepared: Prepared | None,
    watch: Stopwatch,
) -> BoundaryResult:
    """The agent's result of a completed call: kernel ``agent_view`` of ``final``, or the store's code.

    The store's code is, e.g., INVALID_TRANSITION when a sweep completed the record first (CIS-LIFE-7).
    """
    if isinstance(stored, ErrorCode):
        # e.g. INVALID_TRANSITION: a sweep completed the record first.
        core.log.warning("tool %s completion refused: %s", final.tool_name, stored.value)
        return failure(stored, final.tool_call_id) if prepared is None else failed(prepared, stored)
    watch.completed(final)
    if prepared is None:
        return result_of(agent_view(final))
    return result_of(
        agent_view(final), tool_name=prepared.tool.name, envelope_tool_call_id=prepared.tool_call_id
    )
