"""Wire views: kernel values as the JSON objects a trace carries (CIS-ORC-1).

One function per kind of value, shared by the recorder (what our implementation
observed) and the checker (what the kernel expects), so both sides spell every
value the same way: enums as their exact strings (the kernel's enums are
``StrEnum``, so a member *is* its string and serializes as it), sizes in UTF-8
bytes, times in integer ms. The raw response never appears in a view, only its
size (CIS-REC-3).
"""

from __future__ import annotations

from typing import Any

from ..kernel import (
    ERROR_MESSAGES,
    CanonicalRecord,
    Citation,
    ErrorCode,
    EvidenceStatus,
    InvocationStatus,
    Limits,
    ObservedFact,
    ProgressReport,
    RunState,
    is_safe_id,
    utf8_len,
)

__all__ = [
    "citation_view",
    "fact_view",
    "failure_view",
    "limits_view",
    "outcome_view",
    "progress_view",
    "record_view",
    "run_view",
    "success_view",
]


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    size = utf8_len(text)
    return size if size is not None else len(text.encode("utf-8", "surrogatepass"))


def record_view(record: CanonicalRecord, ttl_remaining_ms: int | None = None) -> dict[str, Any]:
    """A ``RecordView`` object of ``record``; ``ttl_remaining_ms`` only if given."""
    view: dict[str, Any] = {
        "run_id": record.run_id,
        "tool_call_id": record.tool_call_id,
        "status": record.status,
        "evidence_status": record.evidence_status,
        "error_code": record.error_code,
        "raw_bytes": _size(record.raw_response),
        "agent_result": record.agent_result,
        "scope": record.scope,
        "tool_name": record.tool_name,
        "sequence": record.sequence,
        "request_bytes": _size(record.request_json),
        "created_at_ms": record.created_at_ms,
        "updated_at_ms": record.updated_at_ms,
        "expires_at_ms": record.expires_at_ms,
    }
    if ttl_remaining_ms is not None:
        view["ttl_remaining_ms"] = ttl_remaining_ms
    return view


def run_view(run: RunState) -> dict[str, Any]:
    """A ``RunView`` object of ``run`` (every field reported)."""
    return {
        "run_id": run.run_id,
        "status": run.status.value,
        "opened_at_ms": run.opened_at_ms,
        "deadline_ms": run.deadline_ms,
        "ttl_ms": run.ttl_ms,
        "expires_at_ms": run.expires_at_ms,
        "tool_call_budget": run.tool_call_budget,
        "byte_budget": run.byte_budget,
        "tool_calls_used": run.tool_calls_used,
        "bytes_used": run.bytes_used,
    }


def limits_view(limits: Limits) -> dict[str, int]:
    """A ``TraceLimits`` object of ``limits``."""
    return {
        "request_bytes": limits.request_bytes,
        "raw_bytes": limits.raw_bytes,
        "agent_result_bytes": limits.agent_result_bytes,
        "record_bytes": limits.record_bytes,
        "max_json_depth": limits.max_json_depth,
        "max_facts": limits.max_facts,
        "max_fact_bytes": limits.max_fact_bytes,
    }


def failure_view(code: ErrorCode, tool_call_id: str | None) -> dict[str, Any]:
    """The agent-facing ``ResultView`` of a failed call: a code and its fixed message (CIS-ERR-1)."""
    return {
        "ok": False,
        "tool_call_id": tool_call_id,
        "code": code,
        "evidence_status": None,
        "content": None,
        "scope": None,
        "negative": False,
        "message": ERROR_MESSAGES[code],
    }


def success_view(record: CanonicalRecord) -> dict[str, Any]:
    """The agent-facing ``ResultView`` of a READY record: the bounded result only (CIS-BND-4)."""
    evidence = record.evidence_status
    return {
        "ok": True,
        "tool_call_id": record.tool_call_id,
        "code": None,
        "evidence_status": evidence,
        "content": record.agent_result,
        "scope": record.scope,
        "negative": evidence is EvidenceStatus.NO_EVIDENCE,
        "message": None,
    }


def outcome_view(record: CanonicalRecord, tool_call_id: str | None) -> dict[str, Any]:
    """The agent-facing view of a terminal record: success if READY, else its code."""
    if record.status is InvocationStatus.READY:
        return success_view(record)
    code = record.error_code if record.error_code is not None else ErrorCode.INVALID_TRANSITION
    return failure_view(code, tool_call_id)


def citation_view(citation: Citation) -> dict[str, Any]:
    """A ``CitationView`` object; an id that is not a safe id is written ``null`` (CIS-ERR-1)."""
    echo = citation.tool_call_id
    return {
        "kind": citation.kind.value,
        "tool_call_id": echo if is_safe_id(echo) else None,
        "content": citation.content,
        "scope": citation.scope,
        "reason": None if citation.reason is None else citation.reason.value,
    }


def fact_view(fact: ObservedFact) -> dict[str, Any]:
    """A ``FactView`` object."""
    return {
        "tool_call_id": fact.tool_call_id,
        "tool_name": fact.tool_name,
        "sequence": fact.sequence,
        "evidence_status": fact.evidence_status.value,
        "negative": fact.negative,
        "content": fact.content,
        "scope": fact.scope,
    }


def progress_view(report: ProgressReport) -> dict[str, Any]:
    """A ``ProgressObserved`` object (excluded reasons with a zero count are left out)."""
    return {
        "facts": [fact_view(fact) for fact in report.facts],
        "excluded": {reason.value: count for reason, count in report.excluded.items() if count},
        "omitted": report.omitted,
    }
