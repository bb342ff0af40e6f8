"""The store interface every adapter implements, sync and async (CIS-STORE-1).

A store applies what the kernel decided; it holds no lifecycle logic of its own.
Its atomic units are: run open/cancel/close; ``create`` (the kernel's
:func:`~invocation_store.kernel.admit` decided under the store's atomicity: duplicate
check, budget reservation, record write and TTL set in one step); and ``complete``
(a compare-and-set that writes the kernel's new record only if the stored record is
still the one the kernel saw, keeping the remaining TTL).

No method returns a Redis client, a Redis key or exception text. Infrastructure
failures raise :class:`StoreUnavailableError`, whose message is fixed and safe;
domain outcomes are returned as :class:`~invocation_store.kernel.ErrorCode` values.
Times are integer milliseconds read from the store's injected clock
(:meth:`InvocationStore.now_ms`).

The two Protocols are written once: :class:`AsyncInvocationStore` in
``_async/protocol.py``, and :class:`InvocationStore` generated from it into
``_sync/protocol.py`` by ``scripts/unasync.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..kernel import ErrorCode
from ._async.protocol import AsyncInvocationStore
from ._sync.protocol import InvocationStore

__all__ = ["AsyncInvocationStore", "CorruptRecordError", "InvocationStore", "StoreUnavailableError"]


class StoreUnavailableError(Exception):
    """The store failed (connection, timeout, decoding, integrity) (CIS-FAIL-5).

    The message is always the fixed text of STORE_UNAVAILABLE (or of ``code``); the
    original exception is never chained (``raise ... from None``) so that no key,
    payload, URL or password travels with it. ``cause`` names the original
    exception *type* only, for logs.

    ``permanent`` (class attribute, False here): whether sending the same operation
    again cannot help (a corrupt record, a misconfigured server). Callers that retry
    (the boundary's completion retry, CIS-DUR-5) give up at once on a permanent one.
    ``operator_text()`` is what a log line may say about it: the cause label here; our
    own subclasses whose message is written by this library (a server setting to
    change) return that message, never foreign exception text (CIS-FAIL-5).
    """

    #: Sending the same operation again cannot succeed: not retried (CIS-DUR-7).
    permanent: bool = False

    def __init__(self, cause: str = "unknown", code: ErrorCode = ErrorCode.STORE_UNAVAILABLE) -> None:
        super().__init__(f"{code.value}: the invocation store is unavailable ({cause})")
        self.code = code
        self.cause = cause

    def operator_text(self) -> str:
        """The text a log line may carry (the cause label): fixed by this library, never foreign text."""
        return self.cause


class CorruptRecordError(StoreUnavailableError):
    """Records of one run are corrupt (no TTL, a foreign type or value): a permanent fault (CIS-DUR-7).

    Code STORE_UNAVAILABLE, raised at once (never retried: the same key answers the
    same way until an operator repairs it). ``run_id``: the run; ``corrupt``: the
    corrupt records' tool_call_ids mapped to a fixed cause label (``NoTTL``,
    ``CorruptRecord``, ``IdentityMismatch``, ``WrongType``, ...); ``readable``: for a
    batched read (``get_many``), what the other ids read as (the value the read would
    have returned for them), so that a caller can carry on with the rest of the run
    (``sweep_stale``, ``inspect``); empty for a single-record operation. No payload,
    key or reply is ever carried.
    """

    permanent = True

    def __init__(
        self,
        run_id: str,
        corrupt: Mapping[str, str],
        readable: Mapping[str, object] | None = None,
    ) -> None:
        causes = sorted(set(corrupt.values()))
        super().__init__(cause=causes[0] if len(causes) == 1 else "CorruptRecord")
        self.run_id = run_id
        self.corrupt: dict[str, str] = dict(corrupt)
        self.readable: dict[str, Any] = dict(readable or {})
