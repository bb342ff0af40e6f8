"""The stateful machine's model: the kernel applied to plain dictionaries.

The model is what every store must be observationally equal to (CIS-STORE-8). It
holds no rule of its own: admissions are :func:`~invocation_store.kernel.admit`,
completions :func:`~invocation_store.kernel.decide_completion` (whose effects it
applies), runs the kernel's run functions, expiry is
:func:`~invocation_store.kernel.is_live` at the model's time, and the agent's view
of a record is :func:`~invocation_store.kernel.agent_view`. It keeps
its own clock (``now``, integer ms) that the machine moves together with the stores'.

:func:`predict_invoke` replays the boundary's documented flow (preflight, create,
executor, RawReceived, projector, ProjectionReceived, compare-and-set) with kernel
functions, so that the machine knows the exact record and result of every call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from attrs import asdict, frozen

from ..boundary import BoundaryResult
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    CompareAndSet,
    ErrorCode,
    Failed,
    InvocationStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunState,
    SweptStale,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    agent_view,
    cancel_run,
    check_envelope,
    close_run,
    decide_completion,
    duplicate_code,
    failure_view,
    is_live,
    is_own_create,
    is_safe_id,
    live,
    open_run,
    sweep_candidates,
    transition,
)
from ._tools import SLOW_TOOL, expected_projection, expected_raw, raw_text

__all__ = ["Invocation", "KernelModel", "Key", "failure_result", "predict_invoke", "result_of"]

#: A record's identity: (run id, tool_call_id).
Key = tuple[str, str]


class KernelModel:
    """Runs, records and the runs' call lists, as a store holds them, decided by the kernel.

    Mirrors the store protocol's observable behaviour: an expired run or record
    reads as absent (CIS-TTL-4); an expired run's lists read as empty; a complete
    charges its stored bytes and appends terminal records to the run's completed
    list only while the run is live.
    """

    def __init__(self, limits: Limits, now: int) -> None:
        self.limits = limits
        self.now = now
        self.runs: dict[str, RunState] = {}
        self.records: dict[Key, CanonicalRecord] = {}
        self.call_lists: dict[str, list[str]] = {}
        self.done_lists: dict[str, list[str]] = {}

    # -- reads ---------------------------------------------------------------------------

    def run(self, run_id: str, now: int | None = None) -> RunState | None:
        """The run state live at ``now`` (default: the model's time), or None.

        A run found expired is dropped with its lists.
        """
        run = self.runs.get(run_id)
        if run is not None and not is_live(run, self.now if now is None else now):
            del self.runs[run_id]
            self.call_lists.pop(run_id, None)
            self.done_lists.pop(run_id, None)
            return None
        return run

    def get(self, run_id: str, tool_call_id: str, now: int | None = None) -> CanonicalRecord | None:
        """The record under the key live at ``now`` (default: the model's time), or None (CIS-TTL-4)."""
        return live(self.records.get((run_id, tool_call_id)), self.now if now is None else now)

    def calls(self, run_id: str) -> tuple[str, ...]:
        """Ids created in the run, in admission order; () for an absent run."""
        if self.run(run_id) is None:
            return ()
        return tuple(self.call_lists.get(run_id, ()))

    def completed(self, run_id: str) -> tuple[str, ...]:
        """Ids completed (READY or ERROR) in the run, in completion order; () for an absent run."""
        if self.run(run_id) is None:
            return ()
        return tuple(self.done_lists.get(run_id, ()))

    # -- writes --------------------------------------------------------------------------

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Kernel ``open_run`` against the live run, stored when it is a state."""
        existing = self.run(run_id) if is_safe_id(run_id) else None
        result = open_run(
            existing,
            run_id=run_id,
            now_ms=self.now,
            deadline_ms=deadline_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=tool_call_budget,
            byte_budget=byte_budget,
        )
        if isinstance(result, RunState) and existing is None:
            self.runs[run_id] = result
            self.call_lists.pop(run_id, None)
            self.done_lists.pop(run_id, None)
        return result

    def end_run(self, run_id: str, *, cancel: bool) -> RunState | ErrorCode:
        """Kernel ``cancel_run``/``close_run``, stored when it is a state."""
        run = self.run(run_id)
        result = cancel_run(run, self.now) if cancel else close_run(run, self.now)
        if isinstance(result, RunState):
            self.runs[run_id] = result
        return result

    def create(self, request: AdmissionRequest) -> Admission | ErrorCode:
        """Kernel ``admit`` at the model's clock; a fresh admission stores run, record and call."""
        run = self.run(request.run_id, self.now)
        existing = self.get(request.run_id, request.tool_call_id, self.now)
        result = admit(run, existing, request, self.limits, self.now)
        if isinstance(result, Admission) and not result.replayed:
            self.runs[request.run_id] = result.run
            self.records[(request.run_id, request.tool_call_id)] = result.record
            self.call_lists.setdefault(request.run_id, []).append(request.tool_call_id)
        return result

    def admission(self, request: AdmissionRequest) -> Admission | ErrorCode:
        """What kernel ``admit`` would decide for ``request`` now, without storing anything."""
        now = self.now
        run = self.run(request.run_id, now)
        return admit(run, self.get(request.run_id, request.tool_call_id, now), request, self.limits, now)

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Kernel ``decide_completion``; a WRITE applies the effects it returns."""
        stored = self.get(before.run_id, before.tool_call_id)
        effect = decide_completion(stored, before, after, self.run(after.run_id), self.now)
        if isinstance(effect, ErrorCode):
            return effect
        if effect.action is CompareAndSet.WRITE:
            self.records[(after.run_id, after.tool_call_id)] = effect.record
            if effect.run is not None:
                self.runs[after.run_id] = effect.run
            if effect.append_done:
                self.done_lists.setdefault(after.run_id, []).append(after.tool_call_id)
        return effect.record

    def sweep(self, run_id: str, older_than_ms: int) -> int:
        """The boundary's sweep: every PROJECTING record of the run, SweptStale, then complete.

        An id listed twice (re-admitted after its record expired) is swept once.
        """
        swept = 0
        ids = tuple(dict.fromkeys(self.calls(run_id)))
        candidates = sweep_candidates((self.get(run_id, tcid) for tcid in ids), run_id, self.now)
        for record in candidates:
            after = transition(record, SweptStale(now_ms=self.now, older_than_ms=older_than_ms), self.limits)
            if isinstance(after, ErrorCode):
                continue
            if isinstance(self.complete(record, after), CanonicalRecord):
                swept += 1
        return swept


@frozen(kw_only=True)
class Invocation:
    """What the model predicts for one ``invoke``.

    ``result`` is the agent's BoundaryResult; ``token`` is True when the boundary
    draws an invocation token (preflight 1-6 passed); ``executed`` the nonce the
    executor runs with (None when it must not run); ``admitted`` the created record
    (None when the call was refused); ``latency_ms`` how far the executor moves the
    clock.
    """

    result: BoundaryResult
    token: bool
    executed: object | None
    admitted: CanonicalRecord | None
    latency_ms: int = 0


def failure_result(code: ErrorCode, tool_call_id: object) -> BoundaryResult:
    """The agent's view of a refusal: kernel :func:`~invocation_store.kernel.failure_view` (CIS-ERR-1)."""
    return BoundaryResult(**asdict(failure_view(code, tool_call_id), recurse=False))


def result_of(record: CanonicalRecord) -> BoundaryResult:
    """The agent's view of a terminal record: kernel ``agent_view`` (CIS-BND-4)."""
    return BoundaryResult(**asdict(agent_view(record), recurse=False))


def _parse(arguments: str) -> dict[str, Any]:
    value = json.loads(arguments)
    assert isinstance(value, dict)
    return value


def predict_invoke(
    model: KernelModel,
    context: RunContext,
    envelope: ToolCallEnvelope,
    policies: Mapping[str, ToolPolicy],
    token: str,
) -> Invocation:
    """Predict, with the kernel, what ``ToolBoundary.invoke`` must do; updates ``model`` (CIS-BND-6).

    ``policies`` are the registry's tools by name; ``token`` the invocation token the
    boundary will draw if preflight 1-6 passes. The flow is the boundary's
    documented one (CIS-BND-1): nothing is written on a refusal (CIS-PRE-1); the
    executor's latency moves ``model.now``; a completion goes through the model's
    compare-and-set.
    """
    echo = envelope.tool_call_id
    policy = policies.get(envelope.tool_name) if isinstance(envelope.tool_name, str) else None
    code = check_envelope(context, envelope, policy, model.limits)
    if code is not None:
        return Invocation(result=failure_result(code, echo), token=False, executed=None, admitted=None)
    assert isinstance(envelope.tool_call_id, str)
    assert isinstance(envelope.arguments, str)
    assert policy is not None
    request = AdmissionRequest(
        run_id=context.run_id,
        tool_call_id=envelope.tool_call_id,
        tool_name=policy.name,
        request_json=envelope.arguments,
        invocation_token=token,
    )
    admission = model.create(request)
    if isinstance(admission, ErrorCode):
        return Invocation(result=failure_result(admission, echo), token=True, executed=None, admitted=None)
    if admission.replayed and not is_own_create(admission.record, request, model.now):
        # A replay that is not this call's own create, retried: the token factory
        # repeated itself. The model is sequential, so no other call of the
        # boundary can hold the token at the same time.
        code = duplicate_code(admission.record)
        return Invocation(result=failure_result(code, echo), token=True, executed=None, admitted=None)
    created = admission.record
    args = _parse(envelope.arguments)
    nonce = args.get("nonce")
    latency = 0
    final: CanonicalRecord | ErrorCode
    if policy.name == SLOW_TOOL:
        final = transition(created, Failed(code=ErrorCode.EXECUTION_TIMEOUT, now_ms=model.now), model.limits)
    else:
        lat = args.get("lat", 0)
        latency = lat if isinstance(lat, int) and lat > 0 else 0
        model.now += latency
        if args.get("mode") == "raise":
            final = transition(
                created, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=model.now), model.limits
            )
        else:
            raw = raw_text(expected_raw(args))
            if raw is None:
                failed = Failed(code=ErrorCode.SERIALIZATION_FAILED, now_ms=model.now)
                final = transition(created, failed, model.limits)
            else:
                final = transition(created, RawReceived(raw_response=raw, now_ms=model.now), model.limits)
        if (
            isinstance(final, CanonicalRecord)
            and final.status is InvocationStatus.PROJECTING
            and final.raw_response is not None
        ):
            final = _project(model, final, args)
    if isinstance(final, ErrorCode):
        return Invocation(
            result=failure_result(final, echo),
            token=True,
            executed=nonce,
            admitted=created,
            latency_ms=latency,
        )
    stored = model.complete(created, final)
    result = failure_result(stored, echo) if isinstance(stored, ErrorCode) else result_of(final)
    return Invocation(result=result, token=True, executed=nonce, admitted=created, latency_ms=latency)


def _project(
    model: KernelModel, record: CanonicalRecord, args: Mapping[str, Any]
) -> CanonicalRecord | ErrorCode:
    assert record.raw_response is not None
    if args.get("mode") == "proj_raise":
        return transition(record, Failed(code=ErrorCode.PROJECTION_FAILED, now_ms=model.now), model.limits)
    projection = expected_projection(record.raw_response, args)
    if not isinstance(projection, Projection):
        return transition(record, Failed(code=ErrorCode.PROJECTION_INVALID, now_ms=model.now), model.limits)
    return transition(record, ProjectionReceived(projection=projection, now_ms=model.now), model.limits)
