"""The Redis store, written once as asyncio code; the blocking flavour is generated from it.

``scripts/unasync.py`` derives the blocking store from the asyncio one by line
substitutions (see its ``SUBS``). :mod:`invocation_store.adapters.redis` states
the contract (scripts, round trips, durability, failures, clocks) and re-exports
both. What text substitution cannot derive (reaching every cluster primary,
waiting for durability on a cluster, sleeping) lives in ``_redis_flavour.py``, one
class per flavour; what both share outside the class lives in ``_redis_common.py``.

Size: one class, the store protocol's operations each with its full contract
docstring (the generated sync twin carries the same text).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio.cluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from ..._deadline import attempt_allowed, cleanup_attempt, monotonic, operation_deadline, retry_allowed
from ..._decided import report_decided_at
from ...kernel import (
    PROGRESS_FIELDS,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Limits,
    ProgressView,
    RunState,
    is_live,
    is_safe_id,
    live,
)
from .. import _redis_core as core
from .._protocol import CorruptRecordError, StoreUnavailableError
from .._redis_clock import ServerClock, monotonic_ms
from .._redis_common import (
    DEFAULT_OPTIONS,
    DEFAULT_PREFIX,
    FAILURES,
    LOG,
    bad_url,
    is_hello_failure,
    nonce,
    old_version_error,
    raise_first_error,
    report_corrupt,
    report_failure,
    resp2_connection,
    server_ms,
    socket_timeout_ms,
    split_command,
)
from .._redis_flavour import AsyncCommand, AsyncRedisFlavour, AsyncSend
from .._redis_keys import call_key, done_key, run_key
from .._redis_reads import MAX_ATTEMPTS, corrupt_cause, decide_snapshot, snapshot_commands
from .._redis_retry import DEFAULT_RETRY, TRANSIENT, RetryPolicy
from .._redis_scripts import (
    COMPLETE_SCRIPT,
    CREATE_SCRIPT,
    END_RUN_SCRIPT,
    OPEN_RUN_SCRIPT,
    PROGRESS_SCRIPT,
    RUN_FIELDS,
    UNDO_OPEN_SCRIPT,
)
from .._redis_send import HOLD_MIN_POOL, pack
from .._redis_server import (
    POLICY_CHECK_INTERVAL_MS,
    VERSION_INFO,
    VERSION_PROBE,
    Durability,
    UnsupportedRedisError,
    check_commands,
    judge_hello,
    judge_hello_refused,
    judge_policy,
    judge_server,
)
from ..memory import wall_clock_ms

__all__ = ["AsyncRedisStore"]

T = TypeVar("T")

#: The staging key's lifetime as a command argument (``core.STAGE_TTL_MS``).
_STAGE_TTL = str(core.STAGE_TTL_MS)


class AsyncHeldConnection:
    """One pool connection a store keeps between its hot-path calls (CIS-STORE-9).

    Taken from the client's pool on first use (and again in a forked child, whose
    parent's socket it never touches), given back by :meth:`release`. ``lock`` lets
    one caller at a time use it: a caller that finds it taken uses a pool connection.
    A connection the pool disconnects (``client.close()``) reconnects on its next use.
    """

    def __init__(self, pool: Any) -> None:
        self.lock = threading.Lock()
        self._pool = pool
        self._connection: Any = None
        self._pid = 0

    async def connection(self) -> Any:
        """The held connection (taken from the pool if this process holds none). Call with ``lock`` held."""
        if self._connection is None or self._pid != os.getpid():
            self._connection = await self._pool.get_connection()
            self._pid = os.getpid()
        return self._connection

    async def release(self) -> None:
        """Give the held connection back to the pool (this process's only), unless a call is using it.

        Never waits for ``lock`` (an asyncio caller holds it across its round trip):
        a connection in use at that moment is only forgotten, and the pool closes it
        when the client is closed.
        """
        if not self.lock.acquire(blocking=False):
            self._connection = None
            return
        try:
            connection, self._connection = self._connection, None
            if connection is not None and self._pid == os.getpid():
                await self._pool.release(connection)
        finally:
            self.lock.release()


class AsyncRedisStore:
    """The Redis :class:`AsyncInvocationStore` on ``redis.asyncio.Redis`` (CIS-STORE-1).

    ``client`` is used as given (its ``decode_responses`` setting does not matter)
    and is not closed by :meth:`close` unless the store built it (``from_url``). A
    ``redis.asyncio.cluster.RedisCluster`` works too: every script and pipelined read
    of a run touches the one slot of the run's hash tag (CIS-KEY-2).
    ``prefix`` starts every key (default ``"cis"``; non-empty, no braces: else
    ``ValueError``). Clocks (CIS-STORE-10): by default every decision that compares
    times is taken by the scripts on the server's clock (``TIME``), which every host
    shares, and :meth:`now_ms` is a lower bound of it (``_redis_clock``:
    ``local_clock``, the host's monotonic clock in ms, interpolates between readings of
    the server's; :meth:`synced_now_ms` reads ``TIME`` first when the store has no
    reading, and is the clock of every decision taken outside a script). ``clock``
    (integer ms) replaces the server's clock in every decision and in :meth:`now_ms`:
    for tests, and for deployments whose every host passes the same clock; never give
    hosts that share a run different clocks.
    ``durability`` (default: wait for nothing) makes run opens and creates wait for
    replicas and/or the AOF before they answer; a create that misses it is
    DURABILITY_NOT_REACHED and its executor never runs (CIS-DUR-2).
    ``allow_eviction=True`` accepts a server whose ``maxmemory-policy`` can evict
    the store's keys, which is refused otherwise (CIS-DUR-3). ``retry_policy``
    bounds how long transient failures are retried (CIS-DUR-4). A waiting
    ``durability`` whose ``timeout_ms`` the client's socket timeout would cut short
    is a ``ValueError`` (CIS-DUR-2).
    Safe to share as redis-py's connection pool is: across threads for the blocking
    store; within the one event loop that uses it (and closes it) for the asyncio store.
    A waiting durability mode is a ``ValueError`` on redis-py's asyncio cluster client,
    which cannot pipeline ``WAIT`` behind the write on one node's connection (see
    ``_redis_flavour``: ``WAITS_ON_CLUSTER``).
    """

    def __init__(
        self,
        client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], int] | None = None,
        owns_client: bool = False,
        durability: Durability | None = None,
        allow_eviction: bool = False,
        retry_policy: RetryPolicy = DEFAULT_RETRY,
        local_clock: Callable[[], float] | None = None,
    ) -> None:
        self._client = client
        self._prefix = core.check_prefix(prefix)
        self._clock = clock
        self._server_clock = ServerClock(local_clock or monotonic_ms)
        self._owns_client = owns_client
        self._durability = durability or Durability()
        self._allow_eviction = allow_eviction
        self._retry = retry_policy
        self._ready = False
        self._checked = False  # the first check_server passed once (replicas are counted then only)
        self._versioned = False  # the server's version was found supported (check_server or a read's probe)
        self._policy_checked = 0.0  # _deadline.monotonic() of the last maxmemory-policy reading
        self._cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        if self._cluster and self._durability.waits and not AsyncRedisFlavour.WAITS_ON_CLUSTER:
            raise ValueError("a durability mode that waits is not supported on an asyncio cluster client")
        socket_ms = socket_timeout_ms(client)
        if self._durability.waits and socket_ms is not None and socket_ms <= self._durability.timeout_ms:
            raise ValueError(
                f"Durability.timeout_ms ({self._durability.timeout_ms} ms) must be shorter than the "
                f"client's socket timeout ({socket_ms:.0f} ms): a wait cut short would be resent"
            )
        # redis-py leaves execute_command untyped; this is the one place it is named.
        self._execute: AsyncCommand = client.execute_command
        # The scripts go on a held pool connection unless the client pins one itself.
        holds = not self._cluster and getattr(client, "connection", None) is None
        self._holds = holds
        self._send: AsyncCommand = self._send_held if holds else self._execute
        pool: Any = getattr(client, "connection_pool", None)
        roomy = holds and getattr(pool, "max_connections", 0) >= HOLD_MIN_POOL
        self._held = AsyncHeldConnection(pool) if roomy else None
        self._open: AsyncScript = client.register_script(OPEN_RUN_SCRIPT)
        self._end: AsyncScript = client.register_script(END_RUN_SCRIPT)
        self._create: AsyncScript = client.register_script(CREATE_SCRIPT)
        self._complete: AsyncScript = client.register_script(COMPLETE_SCRIPT)
        self._progress: AsyncScript = client.register_script(PROGRESS_SCRIPT)
        self._undo_open: AsyncScript = client.register_script(UNDO_OPEN_SCRIPT)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], int] | None = None,
        durability: Durability | None = None,
        allow_eviction: bool = False,
        retry_policy: RetryPolicy = DEFAULT_RETRY,
        local_clock: Callable[[], float] | None = None,
        **options: Any,
    ) -> AsyncRedisStore:
        """Build a store on a new client for ``url`` (``redis://``, ``rediss://``, ``unix://``).

        ``options`` go to ``redis.asyncio.Redis.from_url`` (timeouts, retries, TLS); socket
        and connect timeouts default to :data:`DEFAULT_TIMEOUT_S` seconds rather than
        redis-py's "wait forever", and redis-py's own retries are off (``retry``), so
        that ``retry_policy`` alone bounds the wait (CIS-DUR-4): a client given to the
        constructor keeps its own retries, each of which multiplies one round trip.
        Raises ``ValueError`` (without the URL, which may hold a password) if redis-py
        cannot parse ``url``. No connection is made
        until the first operation.
        """
        options = {**DEFAULT_OPTIONS, "retry": AsyncRedisFlavour.no_retry(), **options}
        try:
            client = redis.asyncio.Redis.from_url(url, **options)
        except (ValueError, TypeError, redis.RedisError):
            client = None
        if client is None:
            raise bad_url()
        return cls(
            client,
            prefix=prefix,
            clock=clock,
            owns_client=True,
            durability=durability,
            allow_eviction=allow_eviction,
            retry_policy=retry_policy,
            local_clock=local_clock,
        )

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self._prefix

    def now_ms(self) -> int:
        """The store's clock in integer ms: the given ``clock``, else a lower bound of the server's.

        CIS-STORE-10.

        Never ahead of server ``TIME``; behind it by at most the round trip of the
        reading it rests on plus 0.2% of the time since (``_redis_clock``). Readings
        come with every script reply, every server check and :meth:`synced_now_ms`.
        Before the store's first reading the blocking store reads ``TIME`` once here; the
        asyncio store, which cannot wait here, answers the host's wall clock until then,
        as does a store that cannot read ``TIME`` (a user with ``+@read`` rights alone,
        CIS-DUR-9). That fallback is for arithmetic only (a deadline's base): no decision
        of the store or of the boundary compares times with it. Decisions take
        :meth:`synced_now_ms`, which reads the server's clock first; ``await
        store.synced_now_ms()`` is also the deadline base to use on a fresh asyncio store.
        """
        if self._clock is not None:
            return self._clock()
        now = self._server_clock.now_ms()
        if now is not None:
            return now
        try:
            reading = AsyncRedisFlavour.time_reading(self._execute, self._server_clock.local_ms)
        except FAILURES:  # no TIME for this user (+@read alone), an old or unreachable server
            reading = None
        if reading is None:
            return wall_clock_ms()
        reply, sent, received = reading
        self._server_clock.observe(server_ms(reply), sent, received)
        now = self._server_clock.now_ms()
        return wall_clock_ms() if now is None else now

    def clock_error_ms(self) -> float | None:
        """How far behind the server's clock :meth:`now_ms` may be, in ms (0 with a given clock).

        None before the first reading.
        """
        if self._clock is not None:
            return 0.0
        return self._server_clock.error_ms()

    def _observe(self, decided_at: int, sent: float) -> None:
        """A script's reported time, taken between ``sent`` and now on the local clock, as a reading."""
        if self._clock is None:
            self._server_clock.observe(decided_at, sent, self._server_clock.local_ms())

    async def synced_now_ms(self) -> int:
        """The store's clock for a decision that compares times: never the host's (CIS-STORE-10).

        With a given ``clock``, that clock. Otherwise :meth:`now_ms` once the store holds
        a reading of the server's clock; before its first, one ``TIME`` round trip (on
        every primary of a cluster, within ``retry_policy``) takes one. The boundary
        takes every time it compares with here: a call's ``not_before_ms``, its
        completion's stamp, a sweep's age, a citation's and progress' liveness. Raises
        :class:`StoreUnavailableError` when the server's clock cannot be read (an
        unreachable server, a user who may not call ``TIME``): never a host-clock answer.
        """
        if self._clock is not None:
            return self._clock()
        now = self._server_clock.now_ms()
        if now is not None:
            return now
        failure: StoreUnavailableError | None = None
        with operation_deadline(self._retry.budget_ms):
            try:
                sent = self._server_clock.local_ms()
                everyone = await self._on_every_node((("TIME",),))
                received = self._server_clock.local_ms()
                raise_first_error(everyone[0])
                self._server_clock.observe(server_ms(everyone[0][0]), sent, received)
            except FAILURES as exc:
                failure = await self._failure("clock", exc)
        if failure is not None:
            raise failure
        now = self._server_clock.now_ms()
        if now is None:  # pragma: no cover - a reading in order is always kept
            raise StoreUnavailableError("NoClockReading")
        return now

    def _read_now(self) -> int | None:
        """The time a read judges liveness at, reported as its decision time; None: judge as Redis did.

        The given clock's reading, or the lower bound of server ``TIME``. A store with no
        reading yet (one that has only read: reads send ``@read`` commands alone, never
        ``TIME``, CIS-DUR-9) judges on no clock of its own: a key Redis returned is live
        on the server's clock, which lapses every key at its ``expires_at_ms``
        (CIS-STORE-10). Never the host's clock.
        """
        now = self._clock() if self._clock is not None else self._server_clock.now_ms()
        if now is not None:
            report_decided_at(now)
        return now

    def _given_now(self) -> int | None:
        """The ``now`` a script decides at: the given clock's reading, or None (the server's clock)."""
        return None if self._clock is None else self._clock()

    async def check_server(self) -> None:
        """Check the server once, before the first write; later calls do nothing.

        In one pipelined round trip per primary: the scripts are loaded and the server
        is judged (``_redis_server``): version >= 6.2 (CIS-STORE-7), a
        ``maxmemory-policy`` that cannot evict the store's keys unless
        ``allow_eviction`` (CIS-DUR-3), every command the scripts write with
        (CIS-DUR-6), and what the durability mode needs (CIS-DUR-2). Writes call this
        first; reads never do (they need neither INFO nor scripts, CIS-DUR-9: they ask
        the version with ``HELLO`` instead, ``_check_version``). Raises
        :class:`UnsupportedRedisError` (also when a RESP3 ``HELLO`` fails on an older
        server), :class:`UnsafeServerError`, or :class:`StoreUnavailableError` if
        Redis cannot be reached.
        """
        if self._ready:
            return
        scripts = (self._open, self._end, self._create, self._complete, self._progress, self._undo_open)
        checks = check_commands(self._durability)
        commands: tuple[tuple[Any, ...], ...] = (
            *checks,
            *(("SCRIPT LOAD", script.script) for script in scripts),
            ("TIME",),
        )
        failure: StoreUnavailableError | None = None
        try:
            sent = self._server_clock.local_ms()
            everyone = await self._on_every_node(commands)
            received = self._server_clock.local_ms()
            for replies in everyone:
                judge_server(
                    replies[: len(checks)],
                    durability=self._durability,
                    allow_eviction=self._allow_eviction,
                    first=not self._checked,
                )
                raise_first_error(replies)
            self._server_clock.observe(server_ms(everyone[0][-1]), sent, received)
        except StoreUnavailableError as exc:  # a refusal: the message names what to change
            report_failure("check_server", exc)
            failure = exc
        except FAILURES as exc:  # an old server fails in many ways (its replies parsed as RESP2 too)
            old = None if self._cluster else await self._old_server(self._client)  # type: ignore[arg-type]
            failure = old or StoreUnavailableError(report_failure("check_server", exc))
        if failure is not None:
            raise failure
        self._ready = self._checked = self._versioned = True
        self._policy_checked = monotonic()

    async def _on_every_node(self, commands: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
        """``commands`` pipelined on the server, or on every primary of a cluster: replies per node.

        Error replies are values (``raise_on_error=False``); resent within the retry budget.
        """
        client = self._client

        async def pipelined(node: redis.asyncio.Redis) -> list[Any]:
            pipe = node.pipeline(transaction=False)
            queue: Callable[..., object] = pipe.execute_command  # untyped in redis-py
            for command in commands:
                queue(*command)
            return await pipe.execute(raise_on_error=False)

        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            cluster = client
            return await self._io(lambda: AsyncRedisFlavour.on_primaries(cluster, pipelined, commands))
        single = client
        return [await self._io(lambda: pipelined(single))]

    async def _check_drift(self, *, at_open: bool) -> None:
        """Before a write: check the server once, then read ``maxmemory-policy`` again on a schedule.

        At every run open (``at_open``) and before a create when the last reading is at
        least :data:`POLICY_CHECK_INTERVAL_MS` old, one ``INFO memory`` per primary: an
        evicting policy set on the running server (``CONFIG SET``) raises
        :class:`UnsafeServerError` naming it, and the store checks the whole server again
        before its next write (CIS-DUR-3). So a changed policy admits creates for at
        most that interval, and no run opens under it.
        """
        if not self._ready:
            await self.check_server()
            return
        if not at_open and monotonic() - self._policy_checked < POLICY_CHECK_INTERVAL_MS / 1000:
            return
        failure: StoreUnavailableError | None = None
        try:
            sent = self._server_clock.local_ms()
            everyone = await self._on_every_node((("INFO", "memory"), ("TIME",)))
            received = self._server_clock.local_ms()
            for replies in everyone:
                raise_first_error(replies)
                judge_policy(replies[0], allow_eviction=self._allow_eviction, drifted=True)
            # The clock is re-measured on the same schedule.
            self._server_clock.observe(server_ms(everyone[0][1]), sent, received)
        except StoreUnavailableError as exc:
            self._ready = False
            report_failure("check_server", exc)
            failure = exc
        except FAILURES as exc:
            failure = StoreUnavailableError(report_failure("check_server", exc))
        if failure is not None:
            raise failure
        self._policy_checked = monotonic()

    async def _check_version(self) -> None:
        """Before the first read of a store that has not checked the server: refuse one below 6.2.

        CIS-STORE-7, CIS-DUR-8. Reads need no ``INFO`` (CIS-DUR-9), so they ask with
        ``HELLO`` (``_redis_server.VERSION_PROBE``, which any user may send) on every
        primary, then ``INFO server`` where it was refused; once per store. Raises
        :class:`UnsupportedRedisError`; a failure to reach the server propagates to the
        read, whose failure handling names it (a RESP3 ``HELLO`` refused at connect is
        an old server there too).
        """
        if self._versioned:
            return
        hellos = [replies[0] for replies in await self._on_every_node((VERSION_PROBE,))]
        if not all(judge_hello(reply) for reply in hellos):
            infos = await self._on_every_node((VERSION_INFO,))
            for hello, replies in zip(hellos, infos, strict=True):
                if isinstance(hello, Exception):
                    judge_hello_refused(hello, replies[0])
        self._versioned = True

    @staticmethod
    async def _old_server(client: redis.asyncio.Redis) -> UnsupportedRedisError | None:
        """After a failure: ask the version over RESP2; the error for a server below 6.2, else None.

        A client speaking RESP3 (``protocol=3``, or no protocol with redis-py >= 8)
        opens every connection with ``HELLO 3``, which a Redis 5 server refuses before
        any command can ask its version (CIS-DUR-8).
        """
        try:
            connection = resp2_connection(client.connection_pool)
        except FAILURES:
            return None
        if connection is None:
            return None
        try:
            await connection.connect()
            await connection.send_command("INFO", "server")
            reply = await connection.read_response()
        except FAILURES:
            return None
        finally:
            await connection.disconnect()
        return old_version_error(reply)

    # -- runs --------------------------------------------------------------------------

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Open an ACTIVE run: kernel ``open_run`` in one script (CIS-RUN-1, CIS-RETRY-3).

        A live run opened with the same parameters is returned unchanged; another
        live run is INVALID_TRANSITION; an unsafe id is RUN_MISMATCH. Raises
        ``ValueError`` for negative budgets, a non-positive TTL or ints >= 2**53.
        """
        plan = core.plan_open(
            self._prefix,
            run_id,
            self._given_now(),
            deadline_ms=deadline_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=tool_call_budget,
            byte_budget=byte_budget,
            touch=self._durability.waits,
        )
        if isinstance(plan, ErrorCode):
            return plan
        with operation_deadline(self._retry.budget_ms):
            await self._check_drift(at_open=True)
            try:
                if self._durability.waits:
                    return await self._durable_open(plan)
                sent = self._server_clock.local_ms()
                reply = core.refuse_corrupt(
                    await self._io(lambda: self._open(keys=plan.keys, args=plan.args, client=self._client))
                )
                opened, decided_at = core.finish_open(plan, reply)
                self._observe(decided_at, sent)
                report_decided_at(decided_at)
                return opened
            except FAILURES as exc:
                failure = await self._failure("open_run", exc)
        raise failure

    async def _end_run(self, run_id: str, cancel: bool) -> RunState | ErrorCode:
        if not is_safe_id(run_id):
            return ErrorCode.RUN_INACTIVE
        with operation_deadline(self._retry.budget_ms):
            await self.check_server()
            planned = core.plan_end_run(self._prefix, run_id, cancel, self._given_now())
            if planned is None:  # pragma: no cover - the id was checked above
                return ErrorCode.RUN_INACTIVE
            try:
                sent = self._server_clock.local_ms()
                key, args = planned
                reply = core.refuse_corrupt(
                    await self._io(lambda: self._end(keys=(key,), args=args, client=self._client))
                )
                ended, decided_at = core.finish_end_run(run_id, cancel, reply)
                if decided_at:
                    self._observe(decided_at, sent)
                    report_decided_at(decided_at)
                return ended
            except FAILURES as exc:
                failure = await self._failure("end_run", exc)
        raise failure

    async def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED (kernel ``cancel_run``); RUN_INACTIVE or INVALID_TRANSITION (CIS-RUN-2)."""
        return await self._end_run(run_id, cancel=True)

    async def close_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED (kernel ``close_run``); RUN_INACTIVE or INVALID_TRANSITION (CIS-RUN-2)."""
        return await self._end_run(run_id, cancel=False)

    async def get_run(self, run_id: str) -> RunState | None:
        """The run's state (one HMGET), or None if unknown or lapsed by the store clock."""
        if not is_safe_id(run_id):
            return None
        key = run_key(self._prefix, run_id)
        try:
            with operation_deadline(self._retry.budget_ms):  # one budget: the version check and the read
                await self._check_version()
                values = await self._io(lambda: self._client.hmget(key, RUN_FIELDS))
            run = core.decode_run(values, run_id)
            now = self._read_now()
            return run if now is None else live(run, now)
        except FAILURES as exc:
            failure = await self._failure("get_run", exc)
        raise failure

    # -- records -----------------------------------------------------------------------

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Admit and create in one script mirroring kernel ``admit`` (CIS-PRE-8, CIS-STORE-2).

        Returns the kernel's Admission (``replayed=True`` for a retried create with
        the same invocation token, CIS-RETRY-2) or RUN_INACTIVE,
        RUN_DEADLINE_EXCEEDED, DUPLICATE_TOOL_CALL, TOOL_BUDGET_EXHAUSTED,
        INVALID_ARGUMENTS, RUN_BYTES_EXHAUSTED or a Begin code. The record's TTL is
        set once, here (CIS-TTL-1). Time is the server's clock, read by the script, which
        stamps the record with it (or the given clock, CIS-STORE-10); in a waiting
        durability mode OK means the record itself reached it, also when the create was
        resent and replayed (CIS-DUR-2).
        """
        plan = core.plan_create(
            self._prefix, request, limits, self._given_now(), touch=self._durability.waits
        )
        if isinstance(plan, ErrorCode):
            return plan
        with operation_deadline(self._retry.budget_ms):
            await self._check_drift(at_open=False)
            try:
                return await self._create_planned(plan, limits)
            except FAILURES as exc:
                failure = await self._failure("create", exc, request.run_id, request.tool_call_id)
        raise failure

    async def _create_planned(self, plan: core.CreatePlan, limits: Limits) -> Admission | ErrorCode:
        """Send the planned create (pipelined with the durability wait in a waiting mode)."""
        sent = self._server_clock.local_ms()
        if self._durability.waits:
            reply, waited = await self._io(functools.partial(self._send_waited, self._create, plan.command))
        else:
            reply, waited = await self._io(functools.partial(self._evalsha, self._create, plan.command)), None
        admitted, decided_at = core.finish_create(plan, core.refuse_corrupt(reply))
        self._observe(decided_at, sent)
        report_decided_at(decided_at)
        if (
            not self._durability.waits
            or not isinstance(admitted, Admission)
            or self._durability.reached(waited)
        ):
            return admitted
        # Not reached: DURABILITY_NOT_REACHED, so the executor never runs; the record the
        # script wrote (or replayed) is moved to ERROR/DURABILITY_NOT_REACHED, best effort.
        LOG.warning("redis store: create not durable in time: %s", ErrorCode.DURABILITY_NOT_REACHED.value)
        failed = core.undurable(admitted.record, max(self.now_ms(), admitted.record.updated_at_ms), limits)
        if failed is not None:
            with contextlib.suppress(StoreUnavailableError), cleanup_attempt():
                await self.complete(admitted.record, failed)
        return ErrorCode.DURABILITY_NOT_REACHED

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Compare-and-set ``before`` -> ``after`` in one script mirroring kernel ``decide_complete``.

        WRITE (fields updated with ``HSET``/``HDEL``, so the TTL is kept, CIS-TTL-3)
        returns ``after``; REPLAY returns the stored record (CIS-RETRY-2); otherwise
        INVALID_TRANSITION and nothing written (CIS-STORE-3). Liveness is judged on the
        server's clock (the record's own expiry) unless the store was given a clock
        (CIS-STORE-10). Raises ``ValueError`` if ``after`` changes an identity field
        (kernel programming error).
        """
        with operation_deadline(self._retry.budget_ms):
            # The kernel re-checks the script's answer at this time; a live record on the
            # server's clock is live at it too (it is never ahead of the server).
            now = await self.synced_now_ms()
            report_decided_at(now)
            server_clock = self._clock is None
            plan = core.plan_complete(self._prefix, before, after, now, nonce, server_clock=server_clock)
            if isinstance(plan, ErrorCode):
                return plan
            if not self._ready:
                await self.check_server()
            try:
                reply = await self._io(lambda: self._send_complete(plan.call))
                result = core.finish_complete(plan, core.refuse_corrupt(reply))
                if result is None:  # RESEND: the kept raw response was not the expected one
                    reply = await self._io(lambda: self._send_complete(plan.resend))
                    result = core.finish_complete(plan, core.refuse_corrupt(reply))
                if result is None:
                    raise core.CorruptReplyError("UnexpectedReply")
                return result
            except FAILURES as exc:
                failure = await self._failure("complete", exc, before.run_id, before.tool_call_id)
        raise failure

    async def _durable_open(self, plan: core.OpenPlan) -> RunState | ErrorCode:
        """Open the run and wait for the durability mode in the same round trip (CIS-DUR-2).

        A run this call stored (see ``core.takes_back``: the script answered FRESH, or an
        attempt resent after a lost reply found the run its first attempt stored) whose
        wait was not reached is deleted again (UNDO_OPEN_SCRIPT, unless a call was
        admitted into it meanwhile), so that a refused open leaves nothing behind and
        opening the run again, with any parameters, works (CIS-DUR-14). A run a first
        attempt found stored is never taken back.
        """
        command = (str(len(plan.keys)), *plan.keys, *plan.args)
        given = self._given_now()
        not_before = given if given is not None else self._server_clock.now_ms()
        attempts: list[None] = []

        async def send() -> tuple[object, object]:
            attempts.append(None)
            return await self._send_waited(self._open, command)

        sent = self._server_clock.local_ms()
        reply, waited = await self._io(send)
        checked = core.refuse_corrupt(reply)
        opened, decided_at = core.finish_open(plan, checked)
        self._observe(decided_at, sent)
        report_decided_at(decided_at)
        if isinstance(opened, RunState) and not self._durability.reached(waited):
            LOG.warning(
                "redis store: open_run not durable in time: %s", ErrorCode.DURABILITY_NOT_REACHED.value
            )
            if core.takes_back(checked, opened, resent=len(attempts) > 1, not_before_ms=not_before):
                keys, args = core.plan_undo_open(plan, opened)
                with contextlib.suppress(*FAILURES), cleanup_attempt():
                    await self._io(lambda: self._undo_open(keys=keys, args=args))  # on its own client
            return ErrorCode.DURABILITY_NOT_REACHED
        return opened

    async def _send_waited(
        self,
        script: AsyncScript,
        command: tuple[bytes | str, ...],
    ) -> tuple[object, object]:
        """``EVALSHA`` then the durability wait, pipelined on one connection: (script reply, wait reply).

        ``WAIT``/``WAITAOF`` count the writes of the connection they run on, so both go
        to the node that owns the run's slot (on a cluster: that node's client, see
        ``_redis_flavour``). After NOSCRIPT the server is checked again and the pair
        resent once.
        """
        client = self._client
        if isinstance(client, redis.asyncio.cluster.RedisCluster):
            client = AsyncRedisFlavour.node_client(client, command[1])

        async def send_pair() -> list[Any]:
            pipe = client.pipeline(transaction=False)
            queue: Callable[..., object] = pipe.execute_command  # untyped in redis-py
            queue("EVALSHA", script.sha, *command)
            queue(*self._durability.command())
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            return replies

        try:
            replies = await send_pair()
            if isinstance(replies[0], NoScriptError):  # a flushed or restarted server: judged again
                await self._recheck()
                replies = await send_pair()  # once: a second NOSCRIPT is raised below
        except TRANSIENT:
            if isinstance(self._client, redis.asyncio.cluster.RedisCluster):  # the slot may have moved
                with contextlib.suppress(*FAILURES):
                    await AsyncRedisFlavour.relearn(self._client)
            raise
        raise_first_error(replies)
        return replies[0], replies[1]

    async def _io(self, send: AsyncSend[T]) -> T:
        """``send()``, resent after a transient failure within the operation's deadline (CIS-DUR-4).

        See ``_redis_retry``: connection loss, timeouts, TRYAGAIN, MOVED/ASK,
        CLUSTERDOWN and READONLY are retried with backoff (safe: every write is
        idempotent, every read has no effect); anything else is raised at once. The
        deadline is ``retry_policy.budget_ms`` from the start of the store operation,
        or an enclosing caller's earlier one (``invocation_store._deadline``: the
        boundary's completion retry), so a retry never starts after it; the last
        failure is raised then, at most one round trip past the deadline.
        """
        with operation_deadline(self._retry.budget_ms):
            if not attempt_allowed():  # an earlier step of this operation spent its budget
                raise redis.exceptions.TimeoutError("the operation's deadline passed")
            try:
                return await send()
            except TRANSIENT as exc:
                failure: Exception = exc
            for pause_ms in self._retry.pauses_ms():
                if not retry_allowed(pause_ms / 1000):
                    break
                LOG.info("redis store: retrying after %s", type(failure).__name__)
                await AsyncRedisFlavour.sleep(pause_ms / 1000)
                try:
                    return await send()
                except TRANSIENT as exc:
                    failure = exc
            raise failure

    async def _failure(
        self, operation: str, exc: BaseException, run_id: str = "", tool_call_id: str = ""
    ) -> StoreUnavailableError:
        """The error to raise for a failed operation (raise it outside the ``except`` block: no chaining).

        A server that refused ``HELLO`` is asked its version over RESP2 and refused as
        too old (:class:`UnsupportedRedisError`, CIS-DUR-8); a corrupt record of a
        one-record operation is a :class:`CorruptRecordError` naming it (CIS-DUR-7);
        anything else is a StoreUnavailableError naming the failure's type.
        """
        if is_hello_failure(exc) and not self._cluster:
            old = await self._old_server(self._client)  # type: ignore[arg-type]
            if old is not None:
                report_failure(operation, old)
                return old
        cause = corrupt_cause(exc) if tool_call_id else None
        if cause is not None:
            corrupt = {tool_call_id: cause}
            report_corrupt(operation, run_id, corrupt)
            return CorruptRecordError(run_id, corrupt)
        return StoreUnavailableError(report_failure(operation, exc))

    async def _evalsha(self, script: AsyncScript, command: tuple[bytes | str, ...]) -> object:
        """``EVALSHA <sha> <command>`` in one round trip; after NOSCRIPT, load the script and retry once.

        ``command`` is numkeys, KEYS, ARGV (see ``_redis_core``). On a plain client the
        command goes straight to ``execute_command`` (redis-py's ``AsyncScript`` object adds
        argument copies but nothing else: it too loads and retries on NOSCRIPT, CIS-STORE-5);
        a cluster client goes through the ``AsyncScript``, which routes by the keys.
        """
        client = self._client
        if self._cluster:
            keys, args = split_command(command)
            return await script(keys=keys, args=args, client=client)
        try:
            return await self._send("EVALSHA", script.sha, *command)
        except NoScriptError:
            await self._recheck()
            return await self._send("EVALSHA", script.sha, *command)

    async def _send_held(self, *args: bytes | str) -> object:
        """One command on the store's held connection (a pool connection otherwise): packed once, sent, read.

        The cheapest path redis-py offers for the two hot scripts (CIS-STORE-9): see
        :meth:`_exchange`. An error reply raises as with ``execute_command``
        (``NoScriptError`` included).
        """
        (reply,) = await self._exchange((args,))
        if isinstance(reply, redis.ResponseError):
            raise reply
        return reply

    async def _exchange(self, commands: tuple[tuple[bytes | str, ...], ...]) -> list[object]:
        """``commands`` written in one go, their replies read in order (error replies as values).

        The command packed in one call (``_redis_send.pack``: hiredis' packer when the
        client encodes as UTF-8), written with ``send_packed_command`` and the replies
        read on the connection the store holds between calls, so that no pool
        hand-over (its lock, its readiness probe of the socket) is paid per command;
        no per-command option handling, retry wrapper or client-side metrics (the
        store's ``_io`` retries; its log names failures). One caller at a time uses the
        held connection (a non-blocking lock); a concurrent one takes a pool connection
        as before. A connection that failed or was interrupted mid-exchange is
        disconnected (it reconnects on its next use, never reading a stale reply).
        """
        held = self._held
        if held is not None and held.lock.acquire(blocking=False):
            try:
                return await self._exchange_on(await held.connection(), commands)
            finally:
                held.lock.release()
        pool: Any = getattr(self._client, "connection_pool", None)  # untyped in redis-py
        connection = await pool.get_connection()
        try:
            return await self._exchange_on(connection, commands)
        finally:
            await pool.release(connection)

    @staticmethod
    async def _exchange_on(connection: Any, commands: tuple[tuple[bytes | str, ...], ...]) -> list[object]:
        try:
            await connection.send_packed_command(
                [part for command in commands for part in pack(connection, command)]
            )
            replies: list[object] = []
            for _command in commands:
                try:
                    replies.append(await connection.read_response())
                except redis.ResponseError as exc:  # an error reply, read whole: the next one is intact
                    replies.append(exc)
            return replies
        except BaseException:
            await connection.disconnect()
            raise

    async def _recheck(self) -> None:
        """After NOSCRIPT (a restarted or flushed server): judge the server again and reload the scripts.

        A restarted server may come back with another configuration (an evicting
        policy, a renamed command): it is refused as on first use (CIS-STORE-5, CIS-DUR-3).
        """
        self._ready = False
        await self.check_server()

    async def _send_complete(self, call: core.CompleteCall) -> object:
        """One COMPLETE_SCRIPT call; a staged raw response is SET first, in the same round trip."""
        if call.staged is None or call.stage_key is None:
            return await self._evalsha(self._complete, call.command)
        stage = call.stage_key
        if self._cluster:  # a cluster pipeline cannot carry EVALSHA
            await self._client.set(stage, call.staged, nx=True, px=core.STAGE_TTL_MS)
            return await self._evalsha(self._complete, call.command)
        staged = call.staged

        async def stage_and_send() -> object:
            if self._holds:  # both on the store's connection, in one write (its str packed as UTF-8 once)
                staging = ("SET", stage, staged, "NX", "PX", _STAGE_TTL)
                _, sent = await self._exchange((staging, ("EVALSHA", self._complete.sha, *call.command)))
                return sent
            pipe = self._client.pipeline(transaction=False)
            pipe.set(stage, staged, nx=True, px=core.STAGE_TTL_MS)
            pipe.evalsha(self._complete.sha, int(call.command[0]), *call.command[1:])
            return (await pipe.execute(raise_on_error=False))[1]

        reply = await stage_and_send()
        if isinstance(reply, NoScriptError):
            await self._recheck()  # the staged value waits for the resend (SET NX)
            reply = await stage_and_send()  # once: a second NOSCRIPT is raised below
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Read one record and its raw response consistently, with read rights alone; None if absent/expired.

        One pipelined round trip of plain ``@read`` commands, checked as a double
        collect (``_redis_reads``: no ``MULTI``, no script, so a ``+@read`` user can
        read, CIS-DUR-9). Never touches a TTL (CIS-TTL-5); expired by the store clock
        reads as absent (CIS-TTL-4); a record of another run or call, one without
        expiry or of a foreign type raises :class:`CorruptRecordError` at once
        (STORE_UNAVAILABLE, never retried, CIS-STORE-6, CIS-DUR-7).
        """
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        records = await self._read_records(run_id, [tool_call_id], include_raw=True, operation="get")
        return records[tool_call_id]

    async def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Read several records of one run in one pipelined round trip (CIS-PROG-5, CIS-STORE-6).

        With raw responses, each record is read consistently with its raw STRING
        (``_redis_reads``' double collect); ``include_raw=False`` reads the hashes
        only, and ``raw_response`` is None in the result. Only ``@read`` commands
        (CIS-DUR-9). Unsafe ids map to None unread. Corrupt records (no expiry, a
        foreign type or value) raise :class:`CorruptRecordError` naming them, with
        every other id's result in its ``readable`` (CIS-DUR-7).
        """
        ids = list(tool_call_ids)
        result: dict[str, CanonicalRecord | None] = dict.fromkeys(ids)
        wanted = [tcid for tcid in dict.fromkeys(ids) if is_safe_id(run_id) and is_safe_id(tcid)]
        if not wanted:
            return result
        corrupt: CorruptRecordError | None = None
        try:
            found = await self._read_records(run_id, wanted, include_raw=include_raw, operation="get_many")
            result.update(found)
        except CorruptRecordError as exc:  # the unsafe ids' None with the others' records
            corrupt = CorruptRecordError(run_id, exc.corrupt, {**result, **exc.readable})
        if corrupt is not None:
            raise corrupt
        return result

    async def _read_records(
        self, run_id: str, wanted: list[str], *, include_raw: bool, operation: str
    ) -> dict[str, CanonicalRecord | None]:
        """Consistent reads of ``wanted`` (safe ids, run ``run_id``), live by the store clock.

        Raises :class:`CorruptRecordError` (with the other ids' records in
        ``readable``) if any is corrupt, StoreUnavailableError if Redis fails.
        """
        keys = core.run_keys(self._prefix, run_id)
        if keys is None:
            return dict.fromkeys(wanted)
        found: dict[str, CanonicalRecord | None] = {}
        corrupt: dict[str, str] = {}

        async def round_trip(pending: list[str]) -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            queue: Callable[..., object] = pipe.execute_command  # untyped in redis-py
            for command in snapshot_commands(keys, pending, include_raw):
                queue(*command)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
            for reply in replies:
                if isinstance(reply, TRANSIENT):  # e.g. TRYAGAIN in a cluster: resent within the budget
                    raise reply
            return replies

        failure: StoreUnavailableError | None = None
        try:
            with operation_deadline(self._retry.budget_ms):
                await self._check_version()
                pending = wanted
                for _attempt in range(MAX_ATTEMPTS):
                    replies = await self._io(functools.partial(round_trip, pending))
                    snapshot = decide_snapshot(replies, run_id, pending, include_raw)
                    found.update(snapshot.records)
                    corrupt.update(snapshot.corrupt)
                    pending = snapshot.unstable
                    if not pending:
                        break
                if pending:
                    raise core.CorruptReplyError("UnstableRead")
        except FAILURES as exc:
            failure = await self._failure(operation, exc)
        if failure is not None:
            raise failure
        now = self._read_now()
        records = found if now is None else {tcid: live(record, now) for tcid, record in found.items()}
        if corrupt:
            report_corrupt(operation, run_id, corrupt)
            raise CorruptRecordError(run_id, corrupt, records)
        return records

    async def get_progress(
        self,
        run_id: str,
        tool_call_ids: Sequence[str],
    ) -> Mapping[str, ProgressView | None]:
        """The progress fields of several records of one run: one round trip (CIS-PERF-3, CIS-PROG-5).

        One PROGRESS_SCRIPT call (an ``HMGET`` of
        :data:`~invocation_store.kernel.PROGRESS_FIELDS` per record, server-side):
        never the request text, the raw response or the token. None if absent or
        expired by the store clock; unsafe ids map to None unread; a record of
        another run or call, or an ill-formed one, is STORE_UNAVAILABLE (CIS-STORE-6).
        A store that has written (and so checked the server) sends PROGRESS_SCRIPT; one
        that has only read sends one pipelined ``HMGET`` per record instead, which read
        rights alone allow (CIS-DUR-9). After NOSCRIPT (SCRIPT FLUSH, a restarted
        server) the script is loaded and the call retried.
        """
        ids = list(tool_call_ids)
        result: dict[str, ProgressView | None] = dict.fromkeys(ids)
        keys = core.run_keys(self._prefix, run_id)
        wanted = [tcid for tcid in dict.fromkeys(ids) if is_safe_id(tcid)] if keys is not None else []
        if keys is None or not wanted:
            return result
        try:
            with operation_deadline(self._retry.budget_ms):
                await self._check_version()
                if self._ready:  # a writer: one script call
                    command = (b"%d" % len(wanted), *map(keys.record_wire, wanted), *PROGRESS_FIELDS)
                    reply = await self._io(lambda: self._evalsha(self._progress, command))
                else:  # read rights may be all there is: one HMGET per record, pipelined
                    reply = await self._io(lambda: self._hmget_progress(keys, wanted))
            views = core.decode_progress_reply(reply, run_id, wanted)
            now = self._read_now()
            for tcid, view in zip(wanted, views, strict=True):
                result[tcid] = view if now is None else live(view, now)
            return result
        except FAILURES as exc:
            failure = await self._failure("get_progress", exc)
        raise failure

    async def _hmget_progress(self, keys: core.RunKeys, wanted: Sequence[str]) -> list[object]:
        """PROGRESS_SCRIPT's reply built from pipelined ``HMGET`` s (``@read`` commands only)."""
        pipe = self._client.pipeline(transaction=False)
        for tcid in wanted:
            pipe.hmget(keys.record(tcid), PROGRESS_FIELDS)
        return [value for values in await pipe.execute() for value in values]

    async def raw_sizes(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, int | None]:
        """UTF-8 byte size of each record's stored raw response (None: none stored), one round trip.

        Pipelined ``EXISTS`` + ``STRLEN`` of the raw STRING keys: read-only commands of
        the ``@read`` category, no payload travels (CIS-DUR-9). Unsafe ids map to None.
        """
        ids = list(tool_call_ids)
        result: dict[str, int | None] = dict.fromkeys(ids)
        wanted = [tcid for tcid in dict.fromkeys(ids) if is_safe_id(run_id) and is_safe_id(tcid)]
        if not wanted:
            return result

        async def round_trip() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for tcid in wanted:
                key = core.raw_key(self._prefix, run_id, tcid)
                pipe.exists(key)
                pipe.strlen(key)
            replies: list[Any] = await pipe.execute()
            return replies

        try:
            with operation_deadline(self._retry.budget_ms):
                await self._check_version()
                replies = await self._io(round_trip)
            for index, tcid in enumerate(wanted):
                exists, size = replies[2 * index], replies[2 * index + 1]
                if not (isinstance(exists, int) and isinstance(size, int)):
                    raise core.CorruptReplyError("UnexpectedReply")
                result[tcid] = size if exists else None
            return result
        except FAILURES as exc:
            failure = await self._failure("raw_sizes", exc)
        raise failure

    async def _list(
        self,
        run_id: str,
        list_key: Callable[[str, str], str],
        operation: str,
    ) -> tuple[str, ...]:
        if not is_safe_id(run_id):
            return ()

        async def round_trip() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(run_key(self._prefix, run_id), RUN_FIELDS)
            pipe.lrange(list_key(self._prefix, run_id), 0, -1)
            replies: list[Any] = await pipe.execute()
            return replies

        try:
            with operation_deadline(self._retry.budget_ms):
                await self._check_version()
                values, items = await self._io(round_trip)
            run = core.decode_run(values, run_id)
            now = self._read_now()
            if run is None or (now is not None and not is_live(run, now)):
                return ()
            return core.decode_ids(items)
        except FAILURES as exc:
            failure = await self._failure(operation, exc)
        raise failure

    async def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered ids of the run's completed calls, () if the run is gone (CIS-PROG-1)."""
        return await self._list(run_id, done_key, "completed")

    async def calls(self, run_id: str) -> tuple[str, ...]:
        """Ids of every record created in the run, in admission order; () if the run is gone."""
        return await self._list(run_id, core.calls_key, "calls")

    async def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """Remaining TTL in ms: min(Redis PTTL, expires_at_ms - clock); None if absent. Read-only.

        A record without expiry, of a foreign type or another identity raises
        :class:`CorruptRecordError` at once (CIS-DUR-7).
        """
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        key = call_key(self._prefix, run_id, tool_call_id)

        async def round_trip() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(key, ("run_id", "tool_call_id", "expires_at_ms"))
            pipe.pttl(key)
            replies: list[Any] = await pipe.execute()
            return replies

        try:
            with operation_deadline(self._retry.budget_ms):
                await self._check_version()
                fields, pttl = await self._io(round_trip)
            return core.finish_ttl(fields, pttl, run_id, tool_call_id, self._read_now())
        except FAILURES as exc:
            failure = await self._failure("ttl_remaining_ms", exc, run_id, tool_call_id)
        raise failure

    async def close(self) -> None:
        """Give the held connection back; close the client if the store built it (a given one stays open)."""
        if self._held is not None:
            await self._held.release()
        if self._owns_client:
            await self._client.aclose()
