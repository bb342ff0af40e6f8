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

from ..kernel import ErrorCode
from ._async.protocol import AsyncInvocationStore
from ._sync.protocol import InvocationStore

__all__ = ["AsyncInvocationStore", "InvocationStore", "StoreUnavailableError"]


class StoreUnavailableError(Exception):
    """The store failed (connection, timeout, decoding, integrity) (CIS-FAIL-5).

    The message is always the fixed text of STORE_UNAVAILABLE (or of ``code``); the
    original exception is never chained (``raise ... from None``) so that no key,
    payload, URL or password travels with it. ``cause`` names the original
    exception *type* only, for logs.
    """

    def __init__(self, cause: str = "unknown", code: ErrorCode = ErrorCode.STORE_UNAVAILABLE) -> None:
        super().__init__(f"{code.value}: the invocation store is unavailable ({cause})")
        self.code = code
        self.cause = cause
