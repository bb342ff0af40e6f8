"""The quantities behind a kernel decision, written out with their formula (CIS-ORC-2).

A divergence says what the kernel decided; these functions say *why*, in the terms
of ``spec/requirements.md`` section 0, so that a reader who never saw this code can
check the arithmetic: ``size(raw) = 66 UTF-8 bytes > raw_bytes = 64``. Each returns
one short clause (no payload, no id that is not safe: only sizes, times, counters
and limits), with the comparison operator the kernel's evaluation actually took.
"""

from __future__ import annotations

from typing import Any

from ..kernel import (
    DUPLICATE_CODES,
    CanonicalRecord,
    ErrorCode,
    Limits,
    RunState,
    RunStatus,
    check_tool_call_id,
    is_live,
    phase_of,
    record_bytes,
    text_bytes,
    utf8_len,
)

__all__ = ["explain_admission", "explain_projection", "explain_raw", "explain_sweep"]


def _cmp(left: int, right: int, strict: bool = True) -> str:
    """``>`` or ``<=`` (strict: the limit test ``left > right``), else ``>=`` or ``<``."""
    if strict:
        return ">" if left > right else "<="
    return ">=" if left >= right else "<"


def _text_size(value: Any) -> int | None:
    return text_bytes(value) if type(value) is str else None


def _new_record_bytes(run_id: str, envelope: dict[str, Any]) -> int | None:
    parts = (run_id, envelope.get("tool_call_id"), envelope.get("tool_name"), envelope.get("arguments"))
    sizes = [_text_size(part) for part in parts]
    if any(size is None for size in sizes):
        return None
    return sum(size for size in sizes if size is not None)


def explain_admission(  # noqa: PLR0917 - one clause per check, the check's inputs
    focus: ErrorCode | None,
    run_id: str,
    envelope: dict[str, Any],
    limits: Limits,
    run: RunState | None,
    existing: CanonicalRecord | None,
    now: int,
) -> str:
    """The clause of the check behind ``focus``, evaluated on the call's inputs.

    ``focus`` is the code in question (the kernel's answer, or the implementation's
    when the kernel admitted the call); ``None`` explains an admission's sequence.
    """
    arguments = envelope.get("arguments")
    size = _text_size(arguments)
    if focus in (ErrorCode.MISSING_TOOL_CALL_ID, ErrorCode.UNSAFE_TOOL_CALL_ID):
        return "a tool_call_id is missing if blank or not a text, unsafe if not 1-128 of A-Z a-z 0-9 _ - . :"
    if focus is ErrorCode.RUN_MISMATCH:
        return "the envelope's run id must equal the RunContext's run id"
    if focus is ErrorCode.INVALID_ARGUMENTS:
        return "the arguments must be one I-JSON object (CIS-JSON-1..6)"
    if focus in (ErrorCode.UNAUTHORIZED, ErrorCode.NOT_READ_ONLY):
        flag = "authorized" if focus is ErrorCode.UNAUTHORIZED else "read_only"
        return f"the policy must exist, name this tool, and have {flag} = the boolean true"
    if focus is ErrorCode.REQUEST_TOO_LARGE and size is not None and size > limits.request_bytes:
        return f"size(arguments) = {size} UTF-8 bytes > request_bytes = {limits.request_bytes}"
    if focus is ErrorCode.REQUEST_TOO_LARGE:
        total = _new_record_bytes(run_id, envelope)
        request = f"size(arguments) = {size} UTF-8 bytes <= request_bytes = {limits.request_bytes}; "
        if total is None:
            return request.rstrip("; ")
        return (
            f"{request}record_bytes = size(run_id) + size(tool_call_id) + size(tool_name) + "
            f"size(arguments) = {total} {_cmp(total, limits.record_bytes)} record_bytes limit = "
            f"{limits.record_bytes}"
        )
    if run is None:
        return "there is no live run state"
    if focus is ErrorCode.RUN_INACTIVE or not is_live(run, now) or run.status is not RunStatus.ACTIVE:
        return (
            f"the run is {run.status.value}; now = {now} "
            f"{_cmp(now, run.expires_at_ms, strict=False)} expires_at_ms = deadline_ms + ttl_ms = "
            f"{run.expires_at_ms}"
        )
    if focus is ErrorCode.RUN_DEADLINE_EXCEEDED:
        return f"now = {now} {_cmp(now, run.deadline_ms, strict=False)} deadline_ms = {run.deadline_ms}"
    if focus in DUPLICATE_CODES:
        live = existing is not None and phase_of(existing, now).value != "ABSENT"
        if not live:
            return "no live record holds the key"
        assert existing is not None
        return (
            f"a live record of another invocation holds the key (now = {now} < expires_at_ms = "
            f"{existing.expires_at_ms})"
        )
    calls = run.tool_calls_used + 1
    if focus is ErrorCode.TOOL_BUDGET_EXHAUSTED:
        return (
            f"tool_calls_used + 1 = {run.tool_calls_used} + 1 = {calls} "
            f"{_cmp(calls, run.tool_call_budget)} tool_call_budget = {run.tool_call_budget}"
        )
    if focus is ErrorCode.RUN_BYTES_EXHAUSTED and size is not None:
        spend = run.bytes_used + size
        return (
            f"bytes_used + size(arguments) = {run.bytes_used} + {size} = {spend} "
            f"{_cmp(spend, run.byte_budget)} byte_budget = {run.byte_budget}"
        )
    if check_tool_call_id(envelope.get("tool_call_id")) is not None:
        return ""
    return f"sequence = tool_calls_used + 1 = {run.tool_calls_used} + 1 = {calls}"


def explain_raw(raw: str | None, record: CanonicalRecord, limits: Limits) -> str:
    """The clause behind the raw-response step (CIS-SIZE-3, CIS-SIZE-5, CIS-FAIL-4)."""
    if raw is None:
        return ""
    if type(raw) is not str or utf8_len(raw) is None:
        return "the raw response has no UTF-8 form (a lone surrogate): SERIALIZATION_FAILED"
    size = text_bytes(raw)
    clause = f"size(raw) = {size} UTF-8 bytes {_cmp(size, limits.raw_bytes)} raw_bytes = {limits.raw_bytes}"
    if size <= limits.raw_bytes:
        base = record_bytes(record)
        total = base + size
        clause += (
            f"; record_bytes + size(raw) = {base} + {size} = {total} "
            f"{_cmp(total, limits.record_bytes)} record_bytes limit = {limits.record_bytes}"
        )
    return clause


def explain_projection(projection: dict[str, Any] | None, record: CanonicalRecord, limits: Limits) -> str:
    """The clause behind the projection step (CIS-SIZE-4, CIS-SIZE-5, CIS-EVID-3)."""
    if projection is None:
        return ""
    content, scope = _text_size(projection.get("content")), _text_size(projection.get("scope"))
    if content is None or scope is None:
        return "content and scope must be texts with a UTF-8 form"
    total = content + scope
    clause = (
        f"size(content) + size(scope) = {content} + {scope} = {total} "
        f"{_cmp(total, limits.agent_result_bytes)} agent_result_bytes = {limits.agent_result_bytes}"
    )
    if total <= limits.agent_result_bytes:
        base = record_bytes(record)
        clause += (
            f"; record_bytes + {total} = {base + total} {_cmp(base + total, limits.record_bytes)} "
            f"record_bytes limit = {limits.record_bytes}"
        )
    return clause


def explain_sweep(record: CanonicalRecord, now: int, older_than_ms: int) -> str:
    """The clause behind a sweep's decision on ``record`` (CIS-LIFE-7)."""
    age = now - record.created_at_ms
    verdict = "stale" if age >= older_than_ms else "NOT_STALE"
    return (
        f"age = now - created_at_ms = {now} - {record.created_at_ms} = {age} "
        f"{_cmp(age, older_than_ms, strict=False)} older_than_ms = {older_than_ms}: {verdict}"
    )
