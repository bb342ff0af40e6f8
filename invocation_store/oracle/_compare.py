"""Comparing an observed record with the kernel's: field by field, with the rule each breaks.

:class:`RecordChecks` compares a ``RecordView`` with the kernel's record (one dict
comparison on the fast path), names the requirement a differing field violates in
its context (create, execute, project, read), and checks the remaining TTL
(CIS-TTL-1..5, CIS-LIFE-3..6, CIS-REC-1..5).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..kernel import (
    CanonicalRecord,
    ErrorCode,
    InvocationStatus,
    remaining_ms,
)
from ._report import (
    SIZE_MISREADINGS,
    _contains_raw,
    _Mismatch,
    _mismatch,
    _size,
    misread_sizes,
)
from ._state import (
    OracleState,
)
from ._views import record_view

#: Record fields in the order they are compared (the most telling first).
_RECORD_FIELDS: Final[tuple[str, ...]] = (
    "run_id",
    "tool_call_id",
    "status",
    "evidence_status",
    "error_code",
    "raw_bytes",
    "agent_result",
    "scope",
    "tool_name",
    "sequence",
    "request_bytes",
    "created_at_ms",
    "expires_at_ms",
    "updated_at_ms",
)

_RECORD_GETTERS: Final[dict[str, Callable[[CanonicalRecord], Any]]] = {
    "run_id": lambda r: r.run_id,
    "tool_call_id": lambda r: r.tool_call_id,
    "status": lambda r: r.status,
    "evidence_status": lambda r: r.evidence_status,
    "error_code": lambda r: r.error_code,
    "raw_bytes": lambda r: _size(r.raw_response),
    "agent_result": lambda r: r.agent_result,
    "scope": lambda r: r.scope,
    "tool_name": lambda r: r.tool_name,
    "sequence": lambda r: r.sequence,
    "request_bytes": lambda r: _size(r.request_json),
    "created_at_ms": lambda r: r.created_at_ms,
    "expires_at_ms": lambda r: r.expires_at_ms,
    "updated_at_ms": lambda r: r.updated_at_ms,
}

#: Fields not compared while a record is PROJECTING (raw written early or at completion).
_PROJECTING_FREE: Final = frozenset({"raw_bytes", "updated_at_ms"})
#: Fields every transition must keep (CIS-LIFE-6).
_IDENTITY: Final = frozenset({"tool_name", "sequence", "request_bytes", "created_at_ms"})
#: The text each reported size measures.
_SIZE_TEXTS: Final[dict[str, Callable[[CanonicalRecord], str | None]]] = {
    "request_bytes": lambda r: r.request_json,
    "raw_bytes": lambda r: r.raw_response,
}


def size_misreading(text: str | None, reported: object) -> str | None:
    """Why ``reported`` is not ``size(text)`` when it is another count of ``text``, else None (CIS-SIZE-1).

    Sizes are UTF-8 bytes, a lone surrogate counting 3. A reported size equal to the
    text's length in UTF-16 code units (JavaScript ``length``, Java ``String.length()``),
    in code points, or in the bytes of an encoder that writes one replacement byte per
    lone surrogate (Java ``getBytes(UTF_8)``) names that count beside the UTF-8 one.
    """
    if text is None or not isinstance(reported, int) or isinstance(reported, bool):
        return None
    size = _size(text)
    for count, (unit, _count) in zip(misread_sizes(text), SIZE_MISREADINGS, strict=True):
        if count == reported != size:
            return (
                f"sizes are UTF-8 bytes: size = {size} UTF-8 bytes, but the implementation reported "
                f"{reported}, the text's length in {unit}"
            )
    return None


class RecordChecks(OracleState):
    """Record comparison, shared by the call and read checkers."""

    def _compare_record(
        self,
        seen: dict[str, Any],
        record: CanonicalRecord,
        context: str,
        status_requirement: str,
        raw: str | None = None,
    ) -> _Mismatch | None:
        """Compare a RecordView with the kernel's record; the first difference, or None."""
        projecting = record.status is InvocationStatus.PROJECTING
        ttl = seen.get("ttl_remaining_ms")
        # Fast path: an implementation that reports every field matches one dict compare.
        expected = self._view(record)
        expected["ttl_remaining_ms"] = ttl
        if projecting:
            expected["raw_bytes"] = seen.get("raw_bytes")
            expected["updated_at_ms"] = seen.get("updated_at_ms")
        if seen != expected:
            found = self._record_difference(
                seen,
                record=record,
                context=context,
                status_requirement=status_requirement,
                raw=raw,
                projecting=projecting,
            )
            if found is not None:
                return found
        if ttl is not None:
            return self._check_ttl(ttl, record, context)
        return None

    def _view(self, record: CanonicalRecord) -> dict[str, Any]:
        """The record's view, computed once per record value (records are immutable)."""
        cached = self._view_cache
        if cached is not None and cached[0] is record:
            return cached[1]
        view = record_view(record)
        self._view_cache = (record, view)
        return view

    def _record_difference(
        self,
        seen: dict[str, Any],
        *,
        record: CanonicalRecord,
        context: str,
        status_requirement: str,
        raw: str | None,
        projecting: bool,
    ) -> _Mismatch | None:
        for name in _RECORD_FIELDS:
            value = seen.get(name)
            if value is None and name not in (
                "evidence_status",
                "error_code",
                "raw_bytes",
                "agent_result",
                "scope",
            ):
                continue  # optional and not reported
            if projecting and name in _PROJECTING_FREE:
                continue
            expected = _RECORD_GETTERS[name](record)
            if value == expected:
                continue
            if name in _SIZE_TEXTS:
                misread = size_misreading(_SIZE_TEXTS[name](record), value)
                if misread is not None:
                    return _mismatch(f"observed.record.{name}", expected, value, "CIS-SIZE-1", misread)
            where = f"observed.record.{name}"
            if name in ("agent_result", "scope") and _contains_raw(value, raw):
                return _mismatch(
                    where, expected, value, "CIS-REC-3", "the record's agent result holds the raw response"
                )
            requirement, message = self._field_requirement(
                name,
                context=context,
                record=record,
                status_requirement=status_requirement,
                value=value,
                expected=expected,
            )
            return _mismatch(where, expected, value, requirement, message)
        return None

    def _field_requirement(
        self,
        name: str,
        *,
        context: str,
        record: CanonicalRecord,
        status_requirement: str,
        value: Any,
        expected: Any,
    ) -> tuple[str, str]:
        if name in ("run_id", "tool_call_id"):
            if context == "read":
                return "CIS-STORE-6", "the read returned a record of another key"
            return ("CIS-ID-4" if context == "create" else "CIS-LIFE-6"), f"the record's {name} differs"
        if name in ("status", "evidence_status", "error_code", "agent_result", "scope"):
            if context == "create":
                requirement = "CIS-REC-4" if name == "status" else "CIS-LIFE-5"
                return requirement, "a new record is PROJECTING with no outcome"
            if name != "status" and record.status is InvocationStatus.PROJECTING:
                return (
                    "CIS-LIFE-5",
                    f"a PROJECTING record carries no outcome: its {name} must be null",
                )
            if record.terminal and record.evidence_status is not None and name == "evidence_status":
                if context == "read":
                    return "CIS-LIFE-3", "a terminal record changed"
                if record.status is InvocationStatus.READY:
                    return "CIS-EVID-4", "the projection's evidence status was not kept as it came"
                return "CIS-EVID-1", "an ERROR record has evidence ERROR"
            return status_requirement, f"the record's {name} differs from the kernel's outcome"
        if name == "raw_bytes":
            if record.status is InvocationStatus.ERROR and record.raw_response is None:
                if record.error_code is ErrorCode.RESULT_TOO_LARGE:
                    return "CIS-SIZE-3", "a raw response over its limit must not be stored (nor truncated)"
                return status_requirement, "no raw response should be stored"
            if record.status is InvocationStatus.ERROR:
                return "CIS-FAIL-6", "the raw response received before the failure must stay in the record"
            return "CIS-REC-3", "the stored raw response is not complete"
        if name == "request_bytes":
            return (
                "CIS-REC-2" if context == "create" else "CIS-LIFE-6"
            ), "the stored request is not the exact arguments"
        if name == "expires_at_ms":
            if isinstance(value, int) and value > expected:
                return ("CIS-TTL-5" if context == "read" else "CIS-TTL-2"), "the record's expiry moved later"
            return (
                "CIS-TTL-1" if context == "create" else "CIS-LIFE-6"
            ), "the record's expiry is not creation + TTL"
        if name in _IDENTITY:
            return ("CIS-REC-1" if context == "create" else "CIS-LIFE-6"), f"the record's {name} differs"
        return "CIS-REC-1", f"the record's {name} differs"

    def _check_ttl(self, ttl: int, record: CanonicalRecord, context: str) -> _Mismatch | None:
        """The remaining TTL is positive, at most expiry - now, and never grows (CIS-TTL-1..5).

        Stores whose physical TTL runs on another clock (Redis PTTL in real time under a
        test's fake clock) may report less than expiry - now, never more.
        """
        key = (record.run_id, record.tool_call_id)
        limit = remaining_ms(record, self.now) or 0
        last = self.last_ttl.get(key)
        where = "observed.record.ttl_remaining_ms"
        requirement = {"read": "CIS-TTL-5", "create": "CIS-TTL-2"}.get(context, "CIS-TTL-3")
        if ttl <= 0:
            return _mismatch(
                where,
                f"1..{limit}",
                ttl,
                "CIS-TTL-1",
                "a live record has no positive TTL (it was not set at creation)",
            )
        if ttl > limit:
            return _mismatch(
                where,
                f"<= {limit}",
                ttl,
                requirement,
                "the remaining TTL exceeds expiry - now: the TTL was extended",
            )
        if last is not None and ttl > last:
            return _mismatch(
                where,
                f"<= {last}",
                ttl,
                requirement,
                "the remaining TTL increased since the last observation",
            )
        self.last_ttl[key] = ttl
        return None
