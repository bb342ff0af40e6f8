"""The call lifecycle lines of a trace: submit, execute, project, result (CIS-ORC-2).

The replay model is the boundary's: a call's worker holds its own copy of the record
it created, applies the executor's and the projector's outcomes to that copy with
:func:`~invocation_store.kernel.transition`, and completes it with one
compare-and-set (:func:`~invocation_store.kernel.decide_completion`) against what the
store holds at that time, so a sweep that won the race makes the completion
INVALID_TRANSITION.
"""

from __future__ import annotations

from typing import Any

from .. import codec
from ..kernel import (
    DUPLICATE_CODES,
    CanonicalRecord,
    CompareAndSet,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Projection,
    ProjectionReceived,
    RawReceived,
    ToolCallEnvelope,
    admit,
    check_envelope,
    decide_completion,
    duplicate_code,
    is_safe_id,
    text_bytes,
    transition,
)
from ..kernel import AdmissionRequest as _AdmissionRequest
from ._compare import RecordChecks
from ._explain import explain_admission, explain_projection, explain_raw
from ._report import (
    CODE_REQUIREMENTS,
    _because,
    _contains_raw,
    _Mismatch,
    _mismatch,
    _size,
    misread_sizes,
)
from ._state import (
    _ENDED,
    _EXECUTE,
    _EXECUTOR_FAILURES,
    _OUTCOME_FIELDS,
    _PROJECT,
    _PROJECTOR_FAILURES,
    _Call,
    _context,
    _policy,
)
from ._views import failure_view, outcome_view


class CallLines(RecordChecks):
    """Checkers of the submit, execute, project and result lines."""

    def _op_submit(self, obj: dict[str, Any]) -> _Mismatch | None:
        number = obj["call"]
        if number <= self.last_call:
            raise self._malformed("call", "call numbers must increase from one submit line to the next")
        self.last_call = number
        context_run_id = obj["context_run_id"]
        if not is_safe_id(context_run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        call, code, requirement = self._admit(obj, context_run_id)
        explain_submit = call.explain_submit
        assert explain_submit is not None
        self.calls[number] = call
        self.peak_calls = max(self.peak_calls, len(self.calls))
        observed = obj["observed"]
        seen_code = observed["code"]
        if seen_code != code:
            if code is None:
                requirement = CODE_REQUIREMENTS.get(ErrorCode(seen_code), "CIS-PRE-2")
                if seen_code == ErrorCode.REQUEST_TOO_LARGE.value and self._request_fits(obj):
                    requirement = "CIS-SIZE-5"  # the request fits: the record limit was misjudged
                message = "the call was refused, but the kernel admits it"
            elif seen_code is None:
                message = "the call was admitted, but the kernel refuses it"
            else:
                requirement = "CIS-PRE-2"
                message = "wrong preflight code: the first failing check in the fixed order wins"
            focus = code if code is not None else ErrorCode(seen_code)
            return _because(
                _mismatch("observed.code", code, seen_code, requirement, message),
                lambda: explain_submit(focus),
            )
        seen_record = observed["record"]
        admitted = call.before
        if admitted is None:
            if seen_record is not None:
                requirement = "CIS-ID-5" if code in DUPLICATE_CODES else "CIS-PRE-1"
                return _mismatch(
                    "observed.record", None, seen_record, requirement, "a refused call must create no record"
                )
            return None
        if obj["token"] is None:
            return _mismatch(
                "token",
                "an invocation token",
                None,
                "CIS-RETRY-1",
                "an admitted call carries no invocation token",
            )
        if seen_record is None:
            return _mismatch(
                "observed.record",
                "a PROJECTING record",
                None,
                "CIS-REC-4",
                "the admitted call created no record",
            )
        found = self._compare_record(seen_record, admitted, "create", "CIS-REC-4")
        if found is not None and found[0] == "observed.record.sequence":
            # The position is tool_calls_used + 1 at admission: a different one means the
            # implementation's tool-call counter differs, e.g. a refused call consumed budget.
            return _because(
                _mismatch(
                    found[0],
                    found[1],
                    found[2],
                    "CIS-RUN-5",
                    "the record's sequence is not tool_calls_used + 1 at admission: the tool-call "
                    "counter differs (a refused call, such as a duplicate, must not consume budget)",
                ),
                lambda: explain_submit(None),
            )
        return found

    def _request_fits(self, obj: dict[str, Any]) -> bool:
        arguments = obj["envelope"]["arguments"]
        assert self.limits is not None
        return type(arguments) is str and text_bytes(arguments) <= self.limits.request_bytes

    def _admit(self, obj: dict[str, Any], context_run_id: str) -> tuple[_Call, ErrorCode | None, str]:
        """Preflight and admission of a submit line: the call, its code (None: admitted), the (CIS-BND-6)
        requirement a wrong answer would violate. An admitted call's record is stored."""
        limits = self.limits
        assert limits is not None
        env = obj["envelope"]
        # The line checker has checked the shapes: the codec's strict forms accept them.
        envelope = codec.structure(env, ToolCallEnvelope)
        pol = obj["policy"]
        policy = None if pol is None else _policy(tuple(pol.items()))
        code = check_envelope(_context(context_run_id), envelope, policy, limits)
        tool_call_id = envelope.tool_call_id
        echo = tool_call_id if is_safe_id(tool_call_id) else None
        call = _Call((context_run_id, tool_call_id or ""), echo)
        requirement = "" if code is None else CODE_REQUIREMENTS[code]
        run_before = self._live_run(context_run_id)
        existing = self._live_record(call.key) if code is None else None
        now = self.now
        if code is None:
            assert isinstance(tool_call_id, str)
            assert isinstance(envelope.tool_name, str)
            assert isinstance(envelope.arguments, str)
            result = admit(
                run_before,
                existing,
                _AdmissionRequest(
                    run_id=context_run_id,
                    tool_call_id=tool_call_id,
                    tool_name=envelope.tool_name,
                    request_json=envelope.arguments,
                    invocation_token=obj["token"] or "",
                ),
                limits,
                now,
            )
            if isinstance(result, ErrorCode):
                code = result
                requirement = "CIS-SIZE-5" if code is ErrorCode.REQUEST_TOO_LARGE else CODE_REQUIREMENTS[code]
            elif result.replayed:
                # A reused token is a duplicate at the boundary: nothing runs twice.
                code, requirement = duplicate_code(result.record), "CIS-BND-6"
            else:
                admitted = result.record
                self.runs[context_run_id] = result.run
                self._store(admitted, new=True)
                book = self.books.get(context_run_id)
                if book is not None:
                    book.projecting[tool_call_id] = None
                    book.charge(misread_sizes(envelope.arguments))
                call.admitted = True
                call.stage = _EXECUTE
                call.before = call.copy = admitted
        if code is not None:
            call.expected = failure_view(code, echo)
            call.end_requirement = requirement
        decided = code

        def explain(focus: ErrorCode | None = None) -> str:
            chosen = decided if focus is None else focus
            return explain_admission(chosen, context_run_id, env, limits, run_before, existing, now)

        call.explain = explain
        call.explain_submit = explain
        return call, code, requirement

    def _call(self, obj: dict[str, Any], what: str) -> _Call | _Mismatch:
        number = obj["call"]
        call = self.calls.get(number)
        if call is not None:
            return call
        if number > self.last_call:
            raise self._malformed("call", "no submit line opened this call")
        requirement = "CIS-BND-6" if what == "executor" else "CIS-BND-1"
        return _mismatch(
            "call", None, number, requirement, f"the {what} ran for a call that was already answered"
        )

    def _op_execute(self, obj: dict[str, Any]) -> _Mismatch | None:
        found = self._call(obj, "executor")
        if not isinstance(found, _Call):
            return found
        call = found
        if call.stage != _EXECUTE:
            if not call.admitted:
                requirement = "CIS-ID-5" if call.end_requirement == "CIS-ID-5" else "CIS-PRE-1"
                assert call.expected is not None
                refusal = call.expected["code"]
                number = obj["call"]
                return _mismatch(
                    "call",
                    f"no execute line: call {number} was refused with {refusal}",
                    f"an execute line for call {number}",
                    requirement,
                    f"the executor ran for call {number}, which the kernel refused with {refusal}: a "
                    "refused call never reaches the executor",
                )
            return _mismatch(
                "call", None, obj["call"], "CIS-BND-6", "the executor ran a second time for one call"
            )
        outcome = obj["outcome"]
        raw = outcome.get("raw")
        copy = call.copy
        assert copy is not None
        assert self.limits is not None
        limits = self.limits
        call.explain = lambda: explain_raw(raw, copy, limits)
        if raw is not None:
            call.raw = raw
            after = transition(copy, RawReceived(raw_response=raw, now_ms=self.now), self.limits)
        else:
            code = _EXECUTOR_FAILURES[outcome["failure"]]
            after = transition(copy, Failed(code=code, now_ms=self.now), self.limits)
        if isinstance(after, CanonicalRecord) and after.status is InvocationStatus.PROJECTING:
            call.copy = after
            call.stage = _PROJECT
            return self._compare_step(obj, call, "CIS-BND-1")
        requirement = self._raw_requirement(after, raw)
        self._finish(call, after, requirement)
        return self._compare_step(obj, call, call.record_requirement or call.end_requirement)

    def _raw_requirement(self, after: CanonicalRecord | ErrorCode, raw: str | None) -> str:
        if isinstance(after, ErrorCode):
            return CODE_REQUIREMENTS[after]
        code = after.error_code
        if code is ErrorCode.RESULT_TOO_LARGE:
            assert self.limits is not None
            too_big = raw is not None and (_size(raw) or 0) > self.limits.raw_bytes
            return "CIS-SIZE-3" if too_big else "CIS-SIZE-5"
        return CODE_REQUIREMENTS.get(code, "CIS-STORE-8") if code is not None else "CIS-STORE-8"

    def _op_project(self, obj: dict[str, Any]) -> _Mismatch | None:
        found = self._call(obj, "projector")
        if not isinstance(found, _Call):
            return found
        call = found
        if call.stage == _EXECUTE:
            return _mismatch(
                "call",
                "the executor's outcome first",
                obj["call"],
                "CIS-BND-1",
                "the projector ran before the executor",
            )
        if call.stage == _ENDED:
            if not call.admitted:
                requirement, message = "CIS-PRE-1", "the projector ran for a refused call"
            elif call.end_requirement in ("CIS-SIZE-3", "CIS-FAIL-2", "CIS-FAIL-3", "CIS-FAIL-4"):
                requirement, message = (
                    call.end_requirement,
                    "the projector ran although the executor's outcome ended the call",
                )
            else:
                requirement, message = "CIS-BND-1", "the projector ran for a call that had ended"
            return _mismatch("call", call.expected, obj["call"], requirement, message)
        outcome = obj["outcome"]
        copy = call.copy
        assert copy is not None
        assert self.limits is not None
        projection = outcome.get("projection")
        limits = self.limits
        call.explain = lambda: explain_projection(projection, copy, limits)
        if projection is not None:
            event: ProjectionReceived | Failed = ProjectionReceived(
                projection=codec.structure(projection, Projection), now_ms=self.now
            )
        else:
            event = Failed(code=_PROJECTOR_FAILURES[outcome["failure"]], now_ms=self.now)
        after = transition(copy, event, self.limits)
        self._finish(call, after, self._projection_requirement(after, projection))
        return self._compare_step(obj, call, call.record_requirement or call.end_requirement)

    def _projection_requirement(self, after: CanonicalRecord | ErrorCode, projection: Any) -> str:
        if isinstance(after, ErrorCode):
            return CODE_REQUIREMENTS[after]
        if after.status is InvocationStatus.READY:
            return "CIS-EVID-3" if after.evidence_status is EvidenceStatus.NO_EVIDENCE else "CIS-REC-5"
        code = after.error_code
        if code is ErrorCode.RESULT_TOO_LARGE and projection is not None:
            assert self.limits is not None
            size = (_size(projection["content"]) or 0) + (_size(projection["scope"]) or 0)
            return "CIS-SIZE-4" if size > self.limits.agent_result_bytes else "CIS-SIZE-5"
        if (
            code is ErrorCode.PROJECTION_INVALID
            and projection is not None
            and projection["evidence_status"] == EvidenceStatus.NO_EVIDENCE.value
        ):
            return "CIS-EVID-3"
        return CODE_REQUIREMENTS.get(code, "CIS-STORE-8") if code is not None else "CIS-STORE-8"

    def _finish(self, call: _Call, after: CanonicalRecord | ErrorCode, requirement: str) -> None:
        """End a call: compare-and-set ``after`` against the store (CIS-STORE-3, CIS-TTL-4).

        An event after READY/ERROR is refused and changes nothing (CIS-LIFE-2); a record that
        changes anyway breaks CIS-LIFE-3.
        """
        call.stage = _ENDED
        call.end_requirement = requirement
        if isinstance(after, ErrorCode):
            call.expected = failure_view(after, call.echo)  # the worker's copy expired
            return
        before = call.before
        assert before is not None
        key = call.key
        stored = self._live_record(key)
        effect = decide_completion(stored, before, after, self._live_run(after.run_id), self.now)
        if isinstance(effect, ErrorCode):
            call.expected = failure_view(effect, call.echo)
            terminal = stored is not None and stored.status is not InvocationStatus.PROJECTING
            # An event after READY/ERROR is refused and changes nothing; a record that
            # changes anyway breaks the terminal states' rule.
            call.end_requirement = "CIS-LIFE-2" if terminal else "CIS-STORE-3"
            call.record_requirement = "CIS-LIFE-3" if terminal else "CIS-STORE-3"
            return
        if effect.action is CompareAndSet.WRITE:
            self._apply(effect, before)
        call.expected = outcome_view(after, call.echo)

    def _compare_step(self, obj: dict[str, Any], call: _Call, requirement: str) -> _Mismatch | None:
        seen = obj["observed"]["record"]
        stored = self._live_record(call.key)
        context = "execute" if obj["op"] == "execute" else "project"
        if stored is None:
            if seen is not None:
                return _mismatch(
                    "observed.record", None, seen, "CIS-TTL-4", "the record should be absent (expired)"
                )
            return None
        if seen is None:
            return _mismatch(
                "observed.record",
                stored.status.value,
                None,
                "CIS-TTL-1",
                "the record vanished before its expiry",
            )
        found = self._compare_record(seen, stored, context, requirement, raw=call.raw)
        if found is not None and found[0].rsplit(".", 1)[-1] in _OUTCOME_FIELDS:
            return _because(found, call.explain)
        return found

    def _op_result(self, obj: dict[str, Any]) -> _Mismatch | None:
        found = self._call(obj, "boundary's answer")
        if not isinstance(found, _Call):
            return found
        call = found
        del self.calls[obj["call"]]
        seen = obj["observed"]["result"]
        if call.stage != _ENDED:
            awaited = "the executor's outcome" if call.stage == _EXECUTE else "the projector's outcome"
            return _mismatch(
                "observed.result",
                f"no answer before {awaited}",
                seen,
                "CIS-BND-1",
                f"the call was answered before {awaited}",
            )
        expected = call.expected
        assert expected is not None
        if seen == expected:
            return None
        return self._compare_result(seen, expected, call)

    def _compare_result(
        self, seen: dict[str, Any], expected: dict[str, Any], call: _Call
    ) -> _Mismatch | None:
        for name in (
            "ok",
            "code",
            "tool_call_id",
            "evidence_status",
            "negative",
            "content",
            "scope",
            "message",
        ):
            if name == "message" and seen.get("message") is None:
                continue
            value = seen.get(name)
            if value == expected[name]:
                continue
            where = f"observed.result.{name}"
            if _contains_raw(value, call.raw):
                return _mismatch(
                    where,
                    expected[name],
                    value,
                    "CIS-BND-4",
                    "the agent-facing result carries the raw response",
                )
            if name in ("ok", "code"):
                requirement = call.end_requirement
                message = "the agent-facing outcome differs from the kernel's"
                return _because(_mismatch(where, expected[name], value, requirement, message), call.explain)
            if name == "tool_call_id" and expected[name] is None:
                # An id that is not a safe id shown to the agent: the echo rule.
                requirement, message = "CIS-ERR-1", "an id that is not a safe id is never echoed: null"
            elif name == "tool_call_id":
                requirement, message = (
                    "CIS-ID-4",
                    "the echoed tool_call_id differs (only a safe id is echoed)",
                )
            elif name == "message":
                requirement, message = "CIS-ERR-1", "the message is not the code's fixed message"
            elif name in ("evidence_status", "negative"):
                requirement, message = "CIS-EVID-4", "the evidence status was changed on its way to the agent"
            else:
                requirement, message = "CIS-REC-5", "the agent-facing result is not the bounded projection"
            return _mismatch(where, expected[name], value, requirement, message)
        return None
