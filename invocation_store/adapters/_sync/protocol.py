# Generated from invocation_store/adapters/_async/protocol.py by scripts/unasync.py: do not edit by hand.
"""The store interface (CIS-STORE-1), written once as asyncio code.

The sync flavour is generated from the asyncio source by ``scripts/unasync.py``;
:mod:`invocation_store.adapters._protocol` states the contract every store keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from ...kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Limits,
    RunState,
)

__all__ = ["InvocationStore"]


@runtime_checkable
class InvocationStore(Protocol):
    """The store interface (CIS-STORE-1). Implemented by MemoryStore and RedisStore."""

    def now_ms(self) -> int:
        """The store's clock, integer ms since the epoch (injectable)."""
        ...

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Open an ACTIVE run (kernel ``open_run``); a retried identical open is a no-op."""
        ...

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED; RUN_INACTIVE or INVALID_TRANSITION otherwise (CIS-RUN-2)."""
        ...

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED; RUN_INACTIVE or INVALID_TRANSITION otherwise (CIS-RUN-2)."""
        ...

    def get_run(self, run_id: str) -> RunState | None:
        """The run's state, or None if unknown or expired."""
        ...

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Admit and create the PROJECTING record atomically (CIS-PRE-8, CIS-STORE-2).

        Decided by kernel ``admit`` at the store's own clock, read inside the atomic
        step (CIS-STORE-10), applying every effect of the returned Admission. Returns it
        (``replayed`` for a retried create of the same invocation token) or
        RUN_INACTIVE, RUN_MISMATCH, RUN_DEADLINE_EXCEEDED, a duplicate's fate code
        (DUPLICATE_TOOL_CALL, CALL_IN_PROGRESS, STALE_PROJECTION,
        DURABILITY_NOT_REACHED: kernel ``duplicate_code``), TOOL_BUDGET_EXHAUSTED,
        INVALID_ARGUMENTS, RUN_BYTES_EXHAUSTED or REQUEST_TOO_LARGE.
        """
        ...

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Compare-and-set ``before`` -> ``after`` keeping the TTL (CIS-STORE-3, CIS-TTL-3).

        Writes only if the stored record is live, PROJECTING and carries
        ``before.invocation_token``; charges the stored bytes to the run and, for a
        terminal ``after``, appends the id to the run's completed list. A retried
        complete whose ``after`` is already stored returns it without writing
        (CIS-RETRY-2). Anything else: INVALID_TRANSITION, nothing written.
        """
        ...

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Read one record; None if absent or expired. Never touches the TTL (CIS-TTL-5)."""
        ...

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Read several records of one run in one round trip (CIS-PROG-5).

        With ``include_raw=False`` the raw response is neither read nor returned
        (``raw_response`` is None in the result): progress and citation never need
        it, and it is the largest field (CIS-PROG-1).
        """
        ...

    def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered tool_call_ids of the run's completed (READY or ERROR) calls (CIS-PROG-1)."""
        ...

    def calls(self, run_id: str) -> tuple[str, ...]:
        """Tool_call_ids of every record created in the run, in admission order."""
        ...

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """Remaining TTL of a record in ms (Redis PTTL), None if absent. Read-only."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
