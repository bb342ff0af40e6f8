"""SQLite store: the durable embedded store, on the standard library's ``sqlite3`` (CIS-STORE-4).

Theory of operation
-------------------
One database file, shared safely by every thread and every process of one host that
opens it. Each operation is one transaction of the shared SQL core (``_sql.py``):
creates, completions and run operations under ``BEGIN IMMEDIATE`` (the database's
write lock, taken before anything is read, so two writers never decide on the same
state), reads under a deferred ``BEGIN`` (one consistent snapshot). Inside it the
store reads the rows, then its clock, runs the kernel and writes the kernel's
effects; nothing is decided in SQL but the lapse sweep (mirroring kernel ``lapsed``).

Durability (stated in the durability table of docs/durability.md): ``journal_mode=WAL`` and
``synchronous=FULL`` by default, so a transaction whose COMMIT returned is in the
write-ahead log on disk: a process killed at any moment (even ``kill -9``) loses no
acknowledged record, and the host losing power loses none either where the disk
honours fsync. ``synchronous="NORMAL"`` is faster and survives a killed process,
but may lose the last commits on a power loss.

The clock is the host's (all users of one file share a host, so one deployment has
one clock, CIS-STORE-10): integer ms, read inside each transaction, injectable for
tests. Expired rows read as absent (kernel ``live``) and are deleted by a bounded lapse
sweep (:meth:`SqliteStore.sweep_lapsed`): on demand, and by the store itself at most
every ``sweep_interval_ms`` after a write (reads never sweep; an idle store's lapsed rows
stay invisible until the next write or ``sweep_lapsed()`` call). The schema is created
or migrated on first use, as for PostgreSQL (docs/stores.md).

Thread safety: one ``sqlite3`` connection per thread (``threading.local``), closed
by :meth:`SqliteStore.close`. :class:`AsyncSqliteStore` is the asyncio face: each
operation on a worker thread (``asyncio.to_thread``), never blocking the loop.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from .._deadline import step_wait_s
from .._decided import report_decided_at
from ..kernel import Admission, AdmissionRequest, CanonicalRecord, ErrorCode, Limits, ProgressView, RunState
from ._face import AsyncFace, on_thread
from ._protocol import StoreUnavailableError
from ._sql import CONFLICT_ATTEMPTS, NOW, SQLITE, Conflict, Execute, Fetch, Statements, Steps
from .memory import wall_clock_ms

__all__ = ["DEFAULT_SWEEP_INTERVAL_MS", "DEFAULT_SWEEP_LIMIT", "AsyncSqliteStore", "SqliteStore"]

#: Most rows of each kind one lapse sweep deletes.
DEFAULT_SWEEP_LIMIT: Final = 1_000
#: How often (ms of monotonic time) the store sweeps lapsed rows by itself, after a write.
DEFAULT_SWEEP_INTERVAL_MS: Final = 60_000
_SYNCHRONOUS: Final = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})


class SqliteStore:
    """The SQLite :class:`~invocation_store.adapters.InvocationStore` on the file ``path``.

    - ``path``: the database file (created with the schema on first use; its ``-wal``
      and ``-shm`` files sit beside it). ``":memory:"`` is refused (``ValueError``):
      use :class:`~invocation_store.adapters.MemoryStore`.
    - ``clock``: integer ms since the epoch (default: wall clock); tests inject one.
    - ``synchronous``: SQLite's ``PRAGMA synchronous`` (``FULL`` by default; see the
      module docstring for what each survives).
    - ``timeout_s``: how long a transaction waits for another's write lock (seconds),
      or less inside an enclosing deadline (a completion retry's, a caller's): the wait
      ends by it (CIS-DUR-13); past it the operation raises StoreUnavailableError
      (``OperationalError``).
    - ``prefix``: the start of every table name (letters, digits, ``_``).
    - ``sweep_limit`` / ``sweep_interval_ms``: the scheduled lapse sweep's bound and
      period (0: never by itself).

    Failures raise :class:`~invocation_store.adapters.StoreUnavailableError` naming the
    ``sqlite3`` exception type only.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], int] | None = None,
        synchronous: str = "FULL",
        timeout_s: float = 5.0,
        prefix: str = "cis_",
        sweep_limit: int = DEFAULT_SWEEP_LIMIT,
        sweep_interval_ms: int = DEFAULT_SWEEP_INTERVAL_MS,
    ) -> None:
        self.path = os.fspath(path)
        if self.path in ("", ":memory:") or self.path.startswith("file::memory:"):
            raise ValueError("SqliteStore needs a database file; use MemoryStore for memory")
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous is one of {sorted(_SYNCHRONOUS)}")
        self.synchronous = synchronous.upper()
        self._clock = clock or wall_clock_ms
        self._timeout_s = timeout_s
        self._sql = Statements(SQLITE, prefix)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._schema_ready = False
        self._sweep_limit = sweep_limit
        self._sweep_interval_s = sweep_interval_ms / 1000
        self._last_sweep = time.monotonic()

    def now_ms(self) -> int:
        """The store's clock (the host's, or the injected one) in integer ms."""
        return self._clock()

    # -- I/O shell -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self._timeout_s, isolation_level=None, check_same_thread=False
            )
            self._use_wal(conn)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            self._local.conn = conn
            self._local.busy_ms = round(self._timeout_s * 1000)  # what timeout= set
            with self._lock:
                self._connections.append(conn)
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """``PRAGMA journal_mode=WAL``, tried again for up to ``timeout_s``: on a fresh file that
        several connections open at once, the switch can meet another's lock, and SQLite answers
        "database is locked" at once there rather than wait (a wait could deadlock)."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    def _bound_lock_wait(self, conn: sqlite3.Connection) -> None:
        """Wait for another's write lock no longer than ``timeout_s``, nor past the step deadline
        of an enclosing scope (a completion retry's, a caller's: CIS-DUR-13; ``step_wait_s``)."""
        wait_ms = round(1000 * step_wait_s(self._timeout_s))
        if self._local.busy_ms != wait_ms:  # set only when it changes (a statement, no I/O)
            conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
            self._local.busy_ms = wait_ms

    def _answer(self, conn: sqlite3.Connection, step: object) -> Any:
        """Run one step of an operation on ``conn`` (the hook fault-injection tests wrap)."""
        if step is NOW:
            now = self._clock()
            report_decided_at(now)  # the operation decides at it (the last attempt's counts)
            return now
        if isinstance(step, Fetch):
            return conn.execute(step.sql, step.params).fetchall()
        assert isinstance(step, Execute)
        return conn.execute(step.sql, step.params).rowcount

    def _transaction(self, conn: sqlite3.Connection, steps: Steps, *, write: bool) -> Any:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            reply = None
            while True:
                try:
                    step = steps.send(reply)
                except StopIteration as done:
                    conn.execute("COMMIT")
                    return done.value
                reply = self._answer(conn, step)
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise

    def _do(self, make_steps: Callable[[], Steps], *, write: bool = True) -> Any:
        """Run the operation ``make_steps()`` builds in one transaction (failures: StoreUnavailableError)."""
        try:
            conn = self._connection()
            self._bound_lock_wait(conn)
            if not self._schema_ready:
                self._transaction(conn, self._sql.ensure_schema(), write=True)
                self._schema_ready = True
            for _attempt in range(CONFLICT_ATTEMPTS):
                try:
                    result = self._transaction(conn, make_steps(), write=write)
                    break
                except Conflict:
                    continue
            else:
                raise StoreUnavailableError("Conflict")
        except sqlite3.Error as exc:
            raise StoreUnavailableError(type(exc).__name__) from None
        if (
            write
            and self._sweep_interval_s > 0
            and time.monotonic() - self._last_sweep >= self._sweep_interval_s
        ):
            self._last_sweep = time.monotonic()
            with contextlib.suppress(StoreUnavailableError):  # the write succeeded; the sweep can wait
                self.sweep_lapsed()
        return result

    # -- the Protocol ----------------------------------------------------------------

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Open an ACTIVE run (kernel ``open_run``) in one BEGIN IMMEDIATE transaction (CIS-RUN-1)."""
        parameters = {
            "deadline_ms": deadline_ms,
            "ttl_ms": ttl_ms,
            "tool_call_budget": tool_call_budget,
            "byte_budget": byte_budget,
        }
        result: RunState | ErrorCode = self._do(lambda: self._sql.open_run(run_id, parameters))
        return result

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED (kernel ``cancel_run``, CIS-RUN-2)."""
        result: RunState | ErrorCode = self._do(lambda: self._sql.end_run(run_id, cancel=True))
        return result

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED (kernel ``close_run``, CIS-RUN-2)."""
        result: RunState | ErrorCode = self._do(lambda: self._sql.end_run(run_id, cancel=False))
        return result

    def get_run(self, run_id: str) -> RunState | None:
        """The live run state, or None (CIS-RUN-3)."""
        result: RunState | None = self._do(lambda: self._sql.get_run(run_id), write=False)
        return result

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Kernel ``admit`` under BEGIN IMMEDIATE at the clock read inside it (CIS-PRE-8, CIS-STORE-10)."""
        result: Admission | ErrorCode = self._do(lambda: self._sql.create(request, limits))
        return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Kernel ``decide_completion`` under BEGIN IMMEDIATE; the expiry is kept (CIS-STORE-3)."""
        result: CanonicalRecord | ErrorCode = self._do(lambda: self._sql.complete(before, after))
        return result

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """One live record, or None (CIS-TTL-4, CIS-TTL-5)."""
        return self.get_many(run_id, [tool_call_id])[tool_call_id]

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Records of one run in one SELECT; ``include_raw=False`` is kernel ``without_raw`` (CIS-PROG-5)."""
        result: Mapping[str, CanonicalRecord | None] = self._do(
            lambda: self._sql.get_many(run_id, tool_call_ids, include_raw), write=False
        )
        return result

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, ProgressView | None]:
        """Progress views of one run's records in one SELECT (CIS-PERF-3)."""
        result: Mapping[str, ProgressView | None] = self._do(
            lambda: self._sql.get_progress(run_id, tool_call_ids), write=False
        )
        return result

    def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered ids of completed calls; () once the run lapsed (CIS-PROG-1)."""
        result: tuple[str, ...] = self._do(lambda: self._sql.list_ids(run_id, "done"), write=False)
        return result

    def calls(self, run_id: str) -> tuple[str, ...]:
        """Ids of every record created in the run, in admission order; () once the run lapsed."""
        result: tuple[str, ...] = self._do(lambda: self._sql.list_ids(run_id, "calls"), write=False)
        return result

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """Kernel ``remaining_ms`` of the record at the store's clock; None if absent (CIS-TTL-5)."""
        result: int | None = self._do(lambda: self._sql.ttl_remaining(run_id, tool_call_id), write=False)
        return result

    def sweep_lapsed(self, limit: int | None = None) -> int:
        """Delete at most ``limit`` (default ``sweep_limit``) lapsed records and lapsed runs (CIS-TTL-4).

        Returns how many rows were deleted. Lapsed rows already read as absent; this
        only keeps the file from growing without end.
        """
        bound = self._sweep_limit if limit is None else limit
        deleted: int = self._do(lambda: self._sql.sweep_lapsed(bound)) if bound > 0 else 0
        return deleted

    def connections(self) -> Iterator[sqlite3.Connection]:
        """The connections opened so far (for tests and inspection)."""
        with self._lock:
            yield from list(self._connections)

    def close(self) -> None:
        """Close every connection this store opened (from any thread)."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()


class AsyncSqliteStore(AsyncFace):
    """asyncio face of a :class:`SqliteStore`: each operation on a worker thread (CIS-STORE-4).

    Takes the same arguments as :class:`SqliteStore` (or ``store=`` an existing one,
    kept as ``self.sync``).
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, store: SqliteStore | None = None, **options: Any
    ) -> None:
        if store is None:
            if path is None:
                raise ValueError("AsyncSqliteStore needs a path or a store")
            store = SqliteStore(path, **options)
        super().__init__(store, on_thread)
