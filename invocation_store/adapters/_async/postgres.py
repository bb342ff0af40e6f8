"""The PostgreSQL store, written once as asyncio code; the blocking flavour is generated from it.

``scripts/unasync.py`` derives :class:`PostgresStore` (``psycopg.Connection``,
``psycopg_pool.ConnectionPool``) from :class:`AsyncPostgresStore` (``AsyncConnection``,
``AsyncConnectionPool``). :mod:`invocation_store.adapters.postgres` states the
contract (transactions, locks, the clock, durability, the schema) and re-exports both.

Size: one class, the store protocol's operations each with its contract docstring.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import psycopg
import psycopg_pool
from psycopg import sql

from ..._deadline import MIN_STEP_WAIT_S, attempt_allowed, operation_deadline, retry_allowed, step_wait_s
from ..._decided import report_decided_at
from ...kernel import Admission, AdmissionRequest, CanonicalRecord, ErrorCode, Limits, ProgressView, RunState
from .._postgres_common import CLOCK_SQL, TRANSIENT, DatabaseClock, async_pause
from .._protocol import StoreUnavailableError
from .._redis_retry import DEFAULT_RETRY, RetryPolicy
from .._sql import CONFLICT_ATTEMPTS, NOW, POSTGRES, Conflict, Execute, Fetch, Statements, Steps

__all__ = ["SYNCHRONOUS_COMMIT", "AsyncPostgresStore"]

#: Progress views by tool_call_id (None: absent, unsafe or lapsed).
ViewMap = Mapping[str, ProgressView | None]

#: The values of PostgreSQL's ``synchronous_commit`` a store may ask for (see the durability table).
SYNCHRONOUS_COMMIT: Final = frozenset({"off", "local", "remote_write", "on", "remote_apply"})
#: Most rows of each kind one lapse sweep deletes.
DEFAULT_SWEEP_LIMIT: Final = 1_000
#: How often (ms of monotonic time) the store sweeps lapsed rows by itself, after a write
#: (reads never sweep; an idle store's lapsed rows stay invisible until a write or
#: ``sweep_lapsed()``).
DEFAULT_SWEEP_INTERVAL_MS: Final = 60_000
#: The isolation level of every transaction, set by the store whatever the server's
#: ``default_transaction_isolation``: each decision is taken on rows the transaction locked
#: (``SELECT ... FOR UPDATE``), which READ COMMITTED re-reads at their latest committed version.
ISOLATION: Final = psycopg.IsolationLevel.READ_COMMITTED
#: A transaction-scoped lock that serializes first-use schema checks across hosts.
_SCHEMA_LOCK: Final = "SELECT pg_advisory_xact_lock(7461001)"


class AsyncPostgresStore:
    """The PostgreSQL :class:`~invocation_store.adapters.AsyncInvocationStore` (see ``adapters.postgres``).

    - ``pool``: a ``psycopg_pool.AsyncConnectionPool``, open (a closed pool given here is
      STORE_UNAVAILABLE, cause ``PoolClosed``, at once); :meth:`from_dsn` makes one the store
      owns, opened on first use.
    - ``clock``: ``None`` (default) decides every time on the database's
      ``clock_timestamp()``, read inside each transaction after its row locks (one
      clock per deployment, CIS-STORE-10); a callable returning integer ms replaces it
      (tests move a fake clock).
    - ``prefix``: the start of every table name (letters, digits, ``_``).
    - ``synchronous_commit``: ``None`` keeps the server's setting; else one of
      :data:`SYNCHRONOUS_COMMIT`, set for every write transaction (``SET LOCAL``).
    - ``retry``: how long a transient failure (connection lost, server restarting,
      serialization failure, deadlock) is retried: the whole transaction runs again.
    - ``sweep_limit`` / ``sweep_interval_ms``: the scheduled lapse sweep's bound and
      period (0: never by itself).
    - ``owns_pool``: close the pool in :meth:`close`.

    Failures raise :class:`~invocation_store.adapters.StoreUnavailableError` naming
    the exception type only (never its text: it can carry values and the DSN).
    """

    def __init__(
        self,
        pool: psycopg_pool.AsyncConnectionPool[Any],
        *,
        clock: Callable[[], int] | None = None,
        prefix: str = "cis_",
        synchronous_commit: str | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        sweep_limit: int = DEFAULT_SWEEP_LIMIT,
        sweep_interval_ms: int = DEFAULT_SWEEP_INTERVAL_MS,
        owns_pool: bool = False,
    ) -> None:
        if synchronous_commit is not None and synchronous_commit not in SYNCHRONOUS_COMMIT:
            raise ValueError(f"synchronous_commit is one of {sorted(SYNCHRONOUS_COMMIT)}")
        self._pool = pool
        conninfo = pool.conninfo
        self._conninfo = conninfo if isinstance(conninfo, str) else ""
        # The pool's connection settings (a port, a password, TLS options given as
        # ``kwargs``) reach the one clock reading made outside the pool too.
        self._connect_kwargs: dict[str, Any] = {
            "connect_timeout": 5,
            **dict(getattr(pool, "kwargs", None) or {}),
        }
        self._clock = clock
        self._db_clock = DatabaseClock()
        self._sql = Statements(POSTGRES, prefix)
        self.prefix = prefix
        self.synchronous_commit = synchronous_commit
        self._retry = retry
        self._owns_pool = owns_pool
        self._schema_ready = False
        self._sweep_limit = sweep_limit
        self._sweep_interval_s = sweep_interval_ms / 1000
        self._last_sweep = time.monotonic()

    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        application_name: str = "invocation-store",
        **options: Any,
    ) -> AsyncPostgresStore:
        """A store on its own pool of ``min_size`` .. ``max_size`` connections to ``dsn`` (libpq or URL).

        Each connection is named ``application_name`` (as ``pg_stat_activity`` shows it)
        and gives up connecting after 5 s (``connect_timeout``). ``options`` are the
        store's keyword arguments. The pool opens on first use (its
        connections are made in the background; an operation waits for one no longer
        than its deadline leaves, the retry budget at most, so a database down at first
        use is STORE_UNAVAILABLE in that time, and served once the pool has reconnected:
        psycopg_pool retries with a growing pause, so after a long outage that can take a
        minute or two) and closes with the store.
        """
        pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"application_name": application_name, "connect_timeout": 5},
        )
        return cls(pool, owns_pool=True, **options)

    def now_ms(self) -> int:
        """The store's clock in integer ms: the injected clock, or the database's as this host sees it.

        With the database clock: the host's clock plus the offset measured at the last
        database reading, never ahead of ``clock_timestamp()`` (:class:`DatabaseClock`).
        Before any operation it reads the database once, on a short-lived connection
        made with the pool's connection string and ``kwargs`` (not its ``configure``).
        """
        if self._clock is not None:
            return self._clock()
        if not self._db_clock.calibrated:
            try:
                with psycopg.connect(self._conninfo, **self._connect_kwargs) as conn:
                    row = conn.execute(CLOCK_SQL).fetchone()
            except psycopg.Error as exc:
                raise StoreUnavailableError(type(exc).__name__) from None
            assert row is not None
            self._db_clock.observe(int(row[0]))
        return self._db_clock.now_ms()

    # -- I/O shell -------------------------------------------------------------------

    async def _answer(self, conn: psycopg.AsyncConnection[Any], step: object) -> Any:
        """Run one step of an operation on ``conn`` (the hook fault-injection tests wrap)."""
        if step is NOW:
            if self._clock is not None:
                now = self._clock()
            else:
                cursor = await conn.execute(CLOCK_SQL)
                row = await cursor.fetchone()
                assert row is not None
                now = self._db_clock.observe(int(row[0]))
            report_decided_at(now)  # the operation decides at it (the last attempt's counts)
            return now
        if isinstance(step, Fetch):
            cursor = await conn.execute(step.sql, step.params, prepare=True)
            return await cursor.fetchall()
        assert isinstance(step, Execute)
        cursor = await conn.execute(step.sql, step.params, prepare=True)
        return cursor.rowcount

    async def _transaction(self, make_steps: Callable[[], Steps], *, write: bool) -> Any:
        # Wait for a pooled connection (a down server) no longer than the step deadline leaves:
        # the retry budget, or less in an enclosing scope or on a later attempt.
        wait_s = max(MIN_STEP_WAIT_S, step_wait_s(self._retry.budget_ms / 1000))
        async with self._pool.connection(timeout=wait_s) as conn:
            if conn.isolation_level is not ISOLATION:
                # Whatever the server's default_transaction_isolation: every transaction
                # begins "BEGIN ISOLATION LEVEL READ COMMITTED" (no extra round trip).
                await conn.set_isolation_level(ISOLATION)
            async with conn.transaction():
                return await self._run_steps(conn, make_steps, write=write)

    async def _run_steps(
        self, conn: psycopg.AsyncConnection[Any], make_steps: Callable[[], Steps], *, write: bool
    ) -> Any:
        """Drive ``make_steps()`` on ``conn`` inside its open transaction; returns the operation's answer."""
        if write and self.synchronous_commit is not None:
            await conn.execute(
                sql.SQL("SET LOCAL synchronous_commit = {}").format(sql.Literal(self.synchronous_commit))
            )
        steps = make_steps()
        reply = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration as done:
                return done.value
            reply = await self._answer(conn, step)

    async def _ensure_schema(self) -> None:
        if self._schema_ready:
            return
        if self._pool.closed and self._owns_pool:
            # Opened without waiting: the pool connects in the background, and the
            # transaction below waits for a connection no longer than the deadline leaves.
            # (Waiting here would close the pool for good when the database is down at
            # first use: a closed pool cannot be opened again.)
            await self._pool.open(wait=False)

        def steps() -> Steps:
            yield Fetch(_SCHEMA_LOCK)
            return (yield from self._sql.ensure_schema())

        await self._transaction(steps, write=True)
        self._schema_ready = True

    async def _do(self, make_steps: Callable[[], Steps], write: bool = True) -> Any:
        """Run ``make_steps()`` as one transaction; transient failures and conflicts run it again.

        Retried within ``retry.budget_ms`` (and the enclosing operation deadline); then,
        and for any other database failure, StoreUnavailableError naming the type.
        """
        pauses = self._retry.pauses_ms()
        with operation_deadline(self._retry.budget_ms):
            if not attempt_allowed():  # an earlier step of this operation spent its budget
                raise StoreUnavailableError("TimeoutError")
            conflicts = 0
            while True:
                try:
                    await self._ensure_schema()
                    result = await self._transaction(make_steps, write=write)
                    break
                except Conflict:  # a concurrent insert of the same run: decide again on what is there now
                    conflicts += 1
                    if conflicts >= CONFLICT_ATTEMPTS:
                        raise StoreUnavailableError("Conflict") from None
                except psycopg_pool.PoolClosed:  # an OperationalError, but closed for good: not retried
                    raise StoreUnavailableError("PoolClosed") from None
                except TRANSIENT as exc:
                    wait = next(pauses) / 1000
                    if not retry_allowed(wait):
                        raise StoreUnavailableError(type(exc).__name__) from None
                    await async_pause(wait)
                except psycopg.Error as exc:
                    raise StoreUnavailableError(type(exc).__name__) from None
        if write and self._sweep_interval_s > 0:
            await self._sweep_if_due()
        return result

    async def _sweep_if_due(self) -> None:
        if time.monotonic() - self._last_sweep < self._sweep_interval_s:
            return
        self._last_sweep = time.monotonic()
        with contextlib.suppress(StoreUnavailableError):  # the write succeeded; the sweep can wait
            await self.sweep_lapsed()

    # -- the Protocol ----------------------------------------------------------------

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Kernel ``open_run`` on the run row locked FOR UPDATE, at the database clock (CIS-RUN-1)."""
        parameters = {
            "deadline_ms": deadline_ms,
            "ttl_ms": ttl_ms,
            "tool_call_budget": tool_call_budget,
            "byte_budget": byte_budget,
        }
        result: RunState | ErrorCode = await self._do(lambda: self._sql.open_run(run_id, parameters))
        return result

    async def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED (kernel ``cancel_run``) on the locked run row (CIS-RUN-2)."""
        result: RunState | ErrorCode = await self._do(lambda: self._sql.end_run(run_id, cancel=True))
        return result

    async def close_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED (kernel ``close_run``) on the locked run row (CIS-RUN-2)."""
        result: RunState | ErrorCode = await self._do(lambda: self._sql.end_run(run_id, cancel=False))
        return result

    async def get_run(self, run_id: str) -> RunState | None:
        """The live run state, or None (CIS-RUN-3)."""
        result: RunState | None = await self._do(lambda: self._sql.get_run(run_id), write=False)
        return result

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Kernel ``admit`` in one READ COMMITTED transaction, run and record rows locked (CIS-PRE-8).

        The clock is read after the locks are held (CIS-STORE-10); a resent create of
        the same invocation token is its replay (CIS-RETRY-2).
        """
        result: Admission | ErrorCode = await self._do(lambda: self._sql.create(request, limits))
        return result

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Kernel ``decide_completion`` on the locked rows; the expiry is kept (CIS-STORE-3)."""
        result: CanonicalRecord | ErrorCode = await self._do(lambda: self._sql.complete(before, after))
        return result

    async def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """One live record, or None (CIS-TTL-4, CIS-TTL-5)."""
        found = await self.get_many(run_id, [tool_call_id])
        return found[tool_call_id]

    async def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Records of one run in one SELECT; ``include_raw=False`` is kernel ``without_raw`` (CIS-PROG-5)."""
        result: Mapping[str, CanonicalRecord | None] = await self._do(
            lambda: self._sql.get_many(run_id, tool_call_ids, include_raw), write=False
        )
        return result

    async def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> ViewMap:
        """Progress views of one run's records in one SELECT (CIS-PERF-3)."""
        result: ViewMap = await self._do(lambda: self._sql.get_progress(run_id, tool_call_ids), write=False)
        return result

    async def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered ids of completed calls; () once the run lapsed (CIS-PROG-1)."""
        result: tuple[str, ...] = await self._do(lambda: self._sql.list_ids(run_id, "done"), write=False)
        return result

    async def calls(self, run_id: str) -> tuple[str, ...]:
        """Ids of every record created in the run, in admission order; () once the run lapsed."""
        result: tuple[str, ...] = await self._do(lambda: self._sql.list_ids(run_id, "calls"), write=False)
        return result

    async def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """Kernel ``remaining_ms`` of the record at the store's clock; None if absent (CIS-TTL-5)."""
        result: int | None = await self._do(lambda: self._sql.ttl_remaining(run_id, tool_call_id), False)
        return result

    async def sweep_lapsed(self, limit: int | None = None) -> int:
        """Delete at most ``limit`` (default ``sweep_limit``) lapsed records and lapsed runs (CIS-TTL-4).

        Returns how many rows were deleted. Lapsed rows already read as absent; the
        sweep keeps the tables from growing without end.
        """
        bound = self._sweep_limit if limit is None else limit
        if bound <= 0:
            return 0
        deleted: int = await self._do(lambda: self._sql.sweep_lapsed(bound), write=False)
        return deleted

    async def close(self) -> None:
        """Close the pool if the store owns it."""
        if self._owns_pool:
            await self._pool.close()
