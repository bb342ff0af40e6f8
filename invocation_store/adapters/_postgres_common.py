"""What both PostgreSQL store flavours share outside their class: the clock, failures, pauses.

The asyncio store (``_async/postgres.py``) and the blocking one generated from it
call these; what differs per flavour is only the pause (:func:`async_pause` /
:func:`pause`, picked by the generator's ``async_`` rule).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Final

import psycopg
import psycopg.errors
import psycopg_pool

from .memory import wall_clock_ms

__all__ = ["CLOCK_SQL", "TRANSIENT", "DatabaseClock", "async_pause", "pause"]

#: The database's clock in integer ms since the epoch: ``clock_timestamp()`` (the time of
#: this statement, not of the transaction's start), floored to the millisecond.
CLOCK_SQL: Final = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"

#: Failures after which the whole transaction is run again (within the retry budget):
#: the connection was lost or the server restarted (OperationalError), or the database
#: chose this transaction to abort (a serialization failure, a deadlock). Running it again
#: is safe even if the first attempt committed: every write is idempotent (CIS-RETRY-2).
#: A pool that had no connection to give within the wait (the server was down) is one too.
TRANSIENT: Final = (
    psycopg_pool.PoolTimeout,
    psycopg.OperationalError,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)


async def async_pause(seconds: float) -> None:
    """Sleep ``seconds`` without blocking the event loop."""
    await asyncio.sleep(seconds)


def pause(seconds: float) -> None:
    """Sleep ``seconds``."""
    time.sleep(seconds)


class DatabaseClock:
    """The database clock as the host sees it: a lower bound kept from every reading (CIS-STORE-10).

    Each reading ``db_ms`` of ``clock_timestamp()`` arrives after it was taken, so
    ``db_ms - (host clock when the reply arrived)`` is at most the true offset between
    the database's clock and the host's: :meth:`now_ms` (host clock + that offset)
    never runs ahead of the clock that stamps the records, as the boundary's
    own-create test needs, and trails it by at most one round trip. Readings come
    from every operation (the latest wins, so a drifting host clock is followed);
    :meth:`now_ms` never goes backwards. Thread-safe.
    """

    def __init__(self) -> None:
        self._offset: int | None = None
        self._last = 0
        self._lock = threading.Lock()

    @property
    def calibrated(self) -> bool:
        """True once a reading was taken."""
        return self._offset is not None

    def observe(self, db_ms: int) -> int:
        """Record the reading ``db_ms`` that just arrived; returns it."""
        offset = db_ms - wall_clock_ms()
        with self._lock:
            self._offset = offset
        return db_ms

    def now_ms(self) -> int:
        """The host's estimate of the database clock, integer ms: never ahead of it, never decreasing."""
        with self._lock:
            if self._offset is None:
                raise RuntimeError("the database clock was never read")
            self._last = max(self._last, wall_clock_ms() + self._offset)
            return self._last
