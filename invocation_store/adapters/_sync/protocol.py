# Generated from invocation_store/adapters/_async/protocol.py by scripts/unasync.py: do not edit by hand.
"""The store interface (CIS-STORE-1), written once as asyncio code.

The sync flavour is generated from the asyncio source by ``scripts/unasync.py``;
:mod:`invocation_store.adapters._protocol` states the contract every store keeps.

Obligations of every store (both flavours), in one place
-------------------------------------------------------
- **Rules come from the kernel.** ``create`` applies what kernel ``admit`` returns
  (the record, the run's new usage, the call-list append), ``complete`` what kernel
  ``decide_completion`` returns, the run operations what kernel ``open_run`` /
  ``cancel_run`` / ``close_run`` return. A store decides nothing itself.
- **One clock** (CIS-STORE-10). Every operation reads the store's clock *once*,
  inside its atomic step (under the lock, inside the transaction, in the script),
  and decides everything with that reading: admission, the deadline, liveness. The
  clock is integer ms since the Unix epoch; one deployment has one clock (a shared
  server's, when hosts share a store). :meth:`InvocationStore.now_ms` never runs
  ahead of the clock that stamps records (the boundary's own-create test compares a
  reading it took before a create with the record's ``created_at_ms``). A store whose
  ``now_ms()`` may not follow that clock yet (the Redis stores before their first
  reading of server ``TIME``) also offers ``synced_now_ms()``, which reads it first;
  every time the boundary compares with is taken through :func:`decision_clock`,
  never from a host clock that a shared store's clock was not read against.
- **Lapse** (CIS-TTL-4). A record or run is visible while kernel ``is_live`` says so
  (``now_ms < expires_at_ms``); at or after its expiry it reads as absent, is never
  completed or extended, and may be deleted (kernel ``lapsed``). A run's call and
  completed lists live and lapse with the run state: they read as empty once the run
  lapsed, and a run opened afresh after that starts with empty lists.
- **Raw omission** (CIS-PROG-5). A read with ``include_raw=False`` returns what
  kernel ``without_raw`` makes of the record; ``get_progress`` answers kernel
  :class:`~invocation_store.kernel.ProgressView` values.
  :mod:`invocation_store.adapters._reads` holds the one shared helper for both
  (:func:`~invocation_store.adapters.read_records`,
  :func:`~invocation_store.adapters.read_views`).
- **Units.** Times and durations are integer milliseconds; sizes are UTF-8 bytes.
- **Reads answer what was asked.** A record is returned only under its own run id
  and tool_call_id; unsafe ids read as absent; reads never touch an expiry (CIS-TTL-5).
- **Failures.** Infrastructure failures raise
  :class:`~invocation_store.adapters.StoreUnavailableError` (fixed message, no key,
  payload, URL or exception text); domain outcomes are
  :class:`~invocation_store.kernel.ErrorCode` values. A write whose outcome is unknown
  may be sent again: every write is idempotent (the invocation token, CIS-RETRY-2).
- **Thread safety.** A sync store may be called from several threads at once; an
  async store from several tasks of its event loop. Every atomic step stays atomic
  under that concurrency, and across every process that shares the store's data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ...kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Limits,
    ProgressView,
    RunState,
)

__all__ = ["InvocationStore", "decision_clock"]

#: Progress views by tool_call_id (None: absent, unsafe or lapsed).
ViewMap = Mapping[str, ProgressView | None]


@runtime_checkable
class InvocationStore(Protocol):
    """The store interface (CIS-STORE-1); see the module docstring for the obligations of every method.

    Implemented by the memory, SQLite, PostgreSQL and Redis stores of this package;
    :mod:`invocation_store.testing.contract` checks a store of your own against it.
    """

    def now_ms(self) -> int:
        """The store's clock: integer ms since the epoch, never ahead of the clock that stamps records.

        Synchronous in both flavours (the boundary reads it between steps). Raises
        StoreUnavailableError if the clock cannot be read (CIS-STORE-10).
        """
        ...

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Open an ACTIVE run: kernel ``open_run`` at the store's clock (CIS-RUN-1, CIS-RETRY-3).

        ``deadline_ms`` absolute epoch ms; ``ttl_ms`` the lifetime of every record of
        the run; budgets a count and UTF-8 bytes. A retried identical open of a live
        run returns it unchanged; a lapsed run is replaced by a fresh one with empty
        lists. Returns RUN_MISMATCH (unsafe id) or INVALID_TRANSITION; raises
        ``ValueError`` for a parameter out of range.
        """
        ...

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED (kernel ``cancel_run``); else RUN_INACTIVE, INVALID_TRANSITION (CIS-RUN-2)."""
        ...

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED (kernel ``close_run``); else RUN_INACTIVE, INVALID_TRANSITION (CIS-RUN-2)."""
        ...

    def get_run(self, run_id: str) -> RunState | None:
        """The run's state, or None if unknown, unsafe or lapsed by the store's clock (CIS-RUN-3)."""
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
        """Compare-and-set ``before`` -> ``after`` keeping the expiry (CIS-STORE-3, CIS-TTL-3).

        Applies kernel ``decide_completion`` at the store's clock: writes only if the
        stored record is live, PROJECTING and carries ``before.invocation_token``;
        charges the stored bytes to the run and, for a terminal ``after``, appends the
        id to the run's completed list. A retried complete whose ``after`` is already
        stored returns it without writing (CIS-RETRY-2). Anything else:
        INVALID_TRANSITION, nothing written. Raises ``ValueError`` if ``after`` changes
        an identity field.
        """
        ...

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Read one record; None if absent, unsafe or lapsed. Never touches the expiry (CIS-TTL-5)."""
        ...

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Read several records of one run in one round trip (CIS-PROG-5).

        One entry per distinct id (None: absent, unsafe or lapsed). With
        ``include_raw=False`` each record is kernel ``without_raw`` of it: the raw
        response is neither needed nor returned (progress and citation never use it,
        and it is the largest field, CIS-PROG-1).
        """
        ...

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> ViewMap:
        """The progress fields of several records of one run, in one round trip (CIS-PERF-3).

        Per distinct id: kernel ``ProgressView.of(record)`` of the live record, or None
        (absent, unsafe or lapsed). Never the request text, the raw response or the
        token. ``read_views`` (``invocation_store.adapters``) builds it from records.
        """
        ...

    def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered tool_call_ids of the run's completed (READY, ERROR) calls; () once lapsed (CIS-PROG-1)."""
        ...

    def calls(self, run_id: str) -> tuple[str, ...]:
        """Tool_call_ids of every record created in the run, in admission order; () once the run lapsed."""
        ...

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """What the record has left at the store's clock, in ms (kernel ``remaining_ms``); None if absent.

        Read-only (CIS-TTL-5). A store whose server also expires keys (Redis PTTL)
        answers the smaller of the two.
        """
        ...

    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


def decision_clock(store: Any) -> int:
    """The store's clock for a decision that compares times, integer ms (CIS-STORE-10).

    ``store.synced_now_ms()`` where the store offers it (a store on a shared server's
    clock, whose ``now_ms()`` may answer the host's clock before its first reading of
    the server's: it reads the server first), else ``store.now_ms()`` (a store whose
    ``now_ms()`` is its deciding clock). Raises what the store raises when its clock
    cannot be read (StoreUnavailableError).
    """
    synced = getattr(store, "synced_now_ms", None)
    if synced is None:
        now: int = store.now_ms()
        return now
    value: int = synced()
    return value
