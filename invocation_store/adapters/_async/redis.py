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
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio.cluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

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
from .._protocol import StoreUnavailableError
from .._redis_common import (
    DEFAULT_OPTIONS,
    DEFAULT_PREFIX,
    FAILURES,
    LOG,
    bad_url,
    check_old_version,
    max_lag,
    nonce,
    raise_first_error,
    report_failure,
    resp2_connection,
    server_ms,
    split_command,
)
from .._redis_flavour import AsyncCommand, AsyncRedisFlavour, AsyncSend
from .._redis_keys import call_key, done_key, run_key
from .._redis_retry import DEFAULT_RETRY, TRANSIENT, RetryPolicy
from .._redis_scripts import (
    COMPLETE_SCRIPT,
    CREATE_SCRIPT,
    END_RUN_SCRIPT,
    OPEN_RUN_SCRIPT,
    PROGRESS_SCRIPT,
    RUN_FIELDS,
)
from .._redis_server import Durability, check_commands, judge_server
from ..memory import wall_clock_ms

__all__ = ["AsyncRedisStore"]

T = TypeVar("T")


class AsyncRedisStore:
    """The Redis :class:`AsyncInvocationStore` on ``redis.asyncio.Redis`` (CIS-STORE-1).

    ``client`` is used as given (its ``decode_responses`` setting does not matter)
    and is not closed by :meth:`close` unless the store built it (``from_url``). A
    ``redis.asyncio.cluster.RedisCluster`` works too: every script and pipelined read
    of a run touches the one slot of the run's hash tag (CIS-KEY-2).
    ``prefix`` starts every key (default ``"cis"``; non-empty, no braces: else
    ``ValueError``). ``clock`` returns integer ms (default: wall clock).
    ``durability`` (default: wait for nothing) makes run opens and creates wait for
    replicas and/or the AOF before they answer; a create that misses it is
    DURABILITY_NOT_REACHED and its executor never runs (CIS-DUR-2).
    ``allow_eviction=True`` accepts a server whose ``maxmemory-policy`` can evict
    the store's keys, which is refused otherwise (CIS-DUR-3). ``retry_policy``
    bounds how long transient failures are retried (CIS-DUR-4). ``max_lag_ms``
    bounds how much later than sent a create's script may start by server ``TIME``
    (default: :data:`DEFAULT_MAX_LAG_MS` with the wall clock, no check with an
    injected clock; 0: no check); a later one writes nothing and is resent once
    with a fresh ``now`` (CIS-DUR-11).
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
        max_lag_ms: int | None = None,
    ) -> None:
        self._client = client
        self._prefix = core.check_prefix(prefix)
        self._clock = clock or wall_clock_ms
        self._owns_client = owns_client
        self._durability = durability or Durability()
        self._allow_eviction = allow_eviction
        self._retry = retry_policy
        self._max_lag = max_lag(max_lag_ms, injected_clock=clock is not None)
        self._offset_ms = 0  # server TIME minus the store clock, measured by _calibrate
        self._ready = False
        self._cluster = isinstance(client, redis.asyncio.cluster.RedisCluster)
        if self._cluster and self._durability.waits and not AsyncRedisFlavour.WAITS_ON_CLUSTER:
            raise ValueError("a durability mode that waits is not supported on an asyncio cluster client")
        # redis-py leaves execute_command untyped; this is the one place it is named.
        self._execute: AsyncCommand = client.execute_command
        self._open: AsyncScript = client.register_script(OPEN_RUN_SCRIPT)
        self._end: AsyncScript = client.register_script(END_RUN_SCRIPT)
        self._create: AsyncScript = client.register_script(CREATE_SCRIPT)
        self._complete: AsyncScript = client.register_script(COMPLETE_SCRIPT)
        self._progress: AsyncScript = client.register_script(PROGRESS_SCRIPT)

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
        max_lag_ms: int | None = None,
        **options: Any,
    ) -> AsyncRedisStore:
        """Build a store on a new client for ``url`` (``redis://``, ``rediss://``, ``unix://``).

        ``options`` go to ``redis.asyncio.Redis.from_url`` (timeouts, retries, TLS); socket
        and connect timeouts default to :data:`DEFAULT_TIMEOUT_S` seconds rather than
        redis-py's "wait forever". Raises ``ValueError`` (without the URL, which may
        hold a password) if redis-py cannot parse ``url``. No connection is made
        until the first operation.
        """
        options = {**DEFAULT_OPTIONS, **options}
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
            max_lag_ms=max_lag_ms,
        )

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self._prefix

    def now_ms(self) -> int:
        """The store's clock in integer ms."""
        return self._clock()

    async def check_server(self) -> None:
        """Check the server once, before the first write; later calls do nothing.

        In one pipelined round trip per primary: the scripts are loaded and the server
        is judged (``_redis_server``): version >= 6.2 (CIS-STORE-7), a
        ``maxmemory-policy`` that cannot evict the store's keys unless
        ``allow_eviction`` (CIS-DUR-3), every command the scripts write with
        (CIS-DUR-6), and what the durability mode needs (CIS-DUR-2). Writes call this
        first; reads never do (they need neither INFO nor scripts, CIS-DUR-9). Raises
        :class:`UnsupportedRedisError` (also when a RESP3 ``HELLO`` fails on an older
        server), :class:`UnsafeServerError`, or :class:`StoreUnavailableError` if
        Redis cannot be reached.
        """
        if self._ready:
            return
        scripts = (self._open, self._end, self._create, self._complete, self._progress)
        checks = check_commands(self._durability)
        commands: tuple[tuple[Any, ...], ...] = (
            *checks,
            *(("SCRIPT LOAD", script.script) for script in scripts),
        )
        client = self._client

        async def pipelined(node: redis.asyncio.Redis) -> list[Any]:
            pipe = node.pipeline(transaction=False)
            queue: Callable[..., object] = pipe.execute_command  # untyped in redis-py
            for command in commands:
                queue(*command)
            return await pipe.execute(raise_on_error=False)

        try:
            if isinstance(client, redis.asyncio.cluster.RedisCluster):
                cluster = client
                every_node = await self._io(
                    lambda: AsyncRedisFlavour.on_primaries(cluster, pipelined, commands),
                )
            else:
                single = client
                every_node = [await self._io(lambda: pipelined(single))]
            for replies in every_node:
                judge_server(
                    replies[: len(checks)], durability=self._durability, allow_eviction=self._allow_eviction
                )
                raise_first_error(replies)
        except (redis.ResponseError, redis.ConnectionError) as exc:
            if not isinstance(client, redis.asyncio.cluster.RedisCluster):
                await self._refuse_old_resp2(client)
            cause = report_failure("check_server", exc)
        except FAILURES as exc:
            cause = report_failure("check_server", exc)
        else:
            self._ready = True
            if self._max_lag is not None:
                try:
                    await self._calibrate()
                except FAILURES as exc:
                    self._ready = False
                    raise StoreUnavailableError(report_failure("check_server", exc)) from None
            return
        raise StoreUnavailableError(cause)

    @staticmethod
    async def _refuse_old_resp2(client: redis.asyncio.Redis) -> None:
        """After a failed check: ask the version over RESP2 and refuse a server below 6.2.

        A client built with ``protocol=3`` opens every connection with ``HELLO 3``,
        which a Redis 5 server refuses before any command can ask its version.
        """
        try:
            connection = resp2_connection(client.connection_pool)
        except FAILURES:
            return
        if connection is None:
            return
        try:
            await connection.connect()
            await connection.send_command("INFO", "server")
            reply = await connection.read_response()
        except FAILURES:
            return
        finally:
            await connection.disconnect()
        check_old_version(reply)

    # -- runs --------------------------------------------------------------------------

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Open an ACTIVE run: kernel ``open_run`` in one script (CIS-RUN-1, CIS-RETRY-3).

        A live run opened with the same parameters is returned unchanged; another
        live run is INVALID_TRANSITION; an unsafe id is RUN_MISMATCH. Raises
        ``ValueError`` for negative budgets, a non-positive TTL or ints >= 2**53.
        """
        now = self._clock()
        plan = core.plan_open(
            self._prefix,
            run_id,
            now,
            deadline_ms=deadline_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=tool_call_budget,
            byte_budget=byte_budget,
        )
        if isinstance(plan, ErrorCode):
            return plan
        await self.check_server()
        try:
            if self._durability.waits:
                return await self._durable_open(plan, now)
            reply = core.refuse_corrupt(
                await self._io(lambda: self._open(keys=plan.keys, args=plan.args, client=self._client))
            )
            return core.finish_open(plan, reply, now)
        except FAILURES as exc:
            cause = report_failure("open_run", exc)
        raise StoreUnavailableError(cause)

    async def _end_run(self, run_id: str, cancel: bool) -> RunState | ErrorCode:
        planned = core.plan_end_run(self._prefix, run_id, cancel)
        if planned is None:
            return ErrorCode.RUN_INACTIVE
        await self.check_server()
        now = self._clock()
        key, target = planned
        try:
            reply = core.refuse_corrupt(
                await self._io(lambda: self._end(keys=(key,), args=(str(now), target), client=self._client))
            )
            return core.finish_end_run(run_id, cancel, reply, now)
        except FAILURES as exc:
            cause = report_failure("end_run", exc)
        raise StoreUnavailableError(cause)

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
        try:
            values = await self._client.hmget(run_key(self._prefix, run_id), RUN_FIELDS)
            run = core.decode_run(values, run_id)
            return live(run, self._clock())
        except FAILURES as exc:
            cause = report_failure("get_run", exc)
        raise StoreUnavailableError(cause)

    # -- records -----------------------------------------------------------------------

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Admit and create in one script mirroring kernel ``admit`` (CIS-PRE-8, CIS-STORE-2).

        Returns the kernel's Admission (``replayed=True`` for a retried create with
        the same invocation token, CIS-RETRY-2) or RUN_INACTIVE,
        RUN_DEADLINE_EXCEEDED, DUPLICATE_TOOL_CALL, TOOL_BUDGET_EXHAUSTED,
        INVALID_ARGUMENTS, RUN_BYTES_EXHAUSTED or a Begin code. The record's TTL is
        set once, here (CIS-TTL-1). Time is the store's clock (CIS-STORE-10).
        """
        plan = core.plan_create(self._prefix, request, limits, self._clock())
        if isinstance(plan, ErrorCode):
            return plan
        if not self._ready:
            await self.check_server()
        try:
            for attempt in range(2):
                command = self._timed(plan)
                if self._durability.waits:
                    reply, waited = await self._io(
                        functools.partial(self._send_waited, self._create, command),
                    )
                else:
                    reply, waited = (
                        await self._io(functools.partial(self._evalsha, self._create, command)),
                        None,
                    )
                if not core.is_late(reply):
                    return await self._finish_create(plan, reply, waited, limits)
                if attempt:
                    raise core.CorruptReplyError("ServerLag")
                # The script started too late for its now: learn the offset again, resend with a fresh now.
                LOG.warning("redis store: create started later than its bound; resent with a fresh clock")
                await self._calibrate()
                replanned = core.plan_create(self._prefix, plan.request, limits, self._clock())
                if isinstance(replanned, ErrorCode):
                    return replanned
                plan = replanned
        except FAILURES as exc:
            cause = report_failure("create", exc)
        raise StoreUnavailableError(cause)

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Compare-and-set ``before`` -> ``after`` in one script mirroring kernel ``decide_complete``.

        WRITE (fields updated with ``HSET``/``HDEL``, so the TTL is kept, CIS-TTL-3)
        returns ``after``; REPLAY returns the stored record (CIS-RETRY-2); otherwise
        INVALID_TRANSITION and nothing written (CIS-STORE-3). Raises ``ValueError``
        if ``after`` changes an identity field (kernel programming error).
        """
        now = self._clock()
        plan = core.plan_complete(self._prefix, before, after, now, nonce)
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
            cause = report_failure("complete", exc)
        raise StoreUnavailableError(cause)

    async def _durable_open(self, plan: core.OpenPlan, now: int) -> RunState | ErrorCode:
        """Open the run and wait for the durability mode in the same round trip (CIS-DUR-2)."""
        command = (str(len(plan.keys)), *plan.keys, *plan.args)
        reply, waited = await self._io(lambda: self._send_waited(self._open, command))
        opened = core.finish_open(plan, core.refuse_corrupt(reply), now)
        if isinstance(opened, RunState) and not self._durability.reached(waited):
            LOG.warning(
                "redis store: open_run not durable in time: %s", ErrorCode.DURABILITY_NOT_REACHED.value
            )
            return ErrorCode.DURABILITY_NOT_REACHED
        return opened

    def _timed(self, plan: core.CreatePlan) -> tuple[bytes | str, ...]:
        """The create's command, with the server time it should start by when lag is checked (CIS-DUR-11)."""
        if self._max_lag is None:
            return plan.command
        return (*plan.command, str(plan.now_ms + self._offset_ms), str(self._max_lag))

    async def _calibrate(self) -> None:
        """Measure server ``TIME`` minus the store clock (one round trip; a cluster: any node)."""
        server = server_ms(await self._io(lambda: self._execute("TIME")))
        self._offset_ms = server - self._clock()

    async def _finish_create(
        self, plan: core.CreatePlan, reply: object, waited: object, limits: Limits
    ) -> Admission | ErrorCode:
        """The kernel's answer to the create; in a durability mode, only once it reached it (CIS-DUR-2).

        Not reached: DURABILITY_NOT_REACHED, so the executor never runs; the record
        the script wrote is moved to ERROR/DURABILITY_NOT_REACHED, best effort.
        """
        admitted = core.finish_create(plan, core.refuse_corrupt(reply))
        if (
            not self._durability.waits
            or not isinstance(admitted, Admission)
            or self._durability.reached(waited)
        ):
            return admitted
        LOG.warning("redis store: create not durable in time: %s", ErrorCode.DURABILITY_NOT_REACHED.value)
        failed = core.undurable(admitted.record, self._clock(), limits)
        if failed is not None:
            with contextlib.suppress(StoreUnavailableError):
                await self.complete(admitted.record, failed)
        return ErrorCode.DURABILITY_NOT_REACHED

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
        try:
            for attempt in range(2):
                pipe = client.pipeline(transaction=False)
                queue: Callable[..., object] = pipe.execute_command  # untyped in redis-py
                queue("EVALSHA", script.sha, *command)
                queue(*self._durability.command())
                replies = await pipe.execute(raise_on_error=False)
                if isinstance(replies[0], NoScriptError) and attempt == 0:
                    await self._recheck()
                    continue
                raise_first_error(replies)
                return replies[0], replies[1]
        except TRANSIENT:
            if isinstance(self._client, redis.asyncio.cluster.RedisCluster):  # the slot may have moved
                with contextlib.suppress(*FAILURES):
                    await AsyncRedisFlavour.relearn(self._client)
            raise
        raise core.CorruptReplyError("NoScript")

    async def _io(self, send: AsyncSend[T]) -> T:
        """``send()``, resent after a transient failure within the retry budget (CIS-DUR-4).

        See ``_redis_retry``: connection loss, timeouts, TRYAGAIN, MOVED/ASK,
        CLUSTERDOWN and READONLY are retried with backoff (safe: every write is
        idempotent); the last failure is raised once the budget is spent.
        """
        try:
            return await send()
        except TRANSIENT as exc:
            failure: Exception = exc
        deadline = time.monotonic() + self._retry.budget_ms / 1000
        for pause_ms in self._retry.pauses_ms():
            if time.monotonic() + pause_ms / 1000 > deadline:
                break
            LOG.info("redis store: retrying after %s", type(failure).__name__)
            await AsyncRedisFlavour.sleep(pause_ms / 1000)
            try:
                return await send()
            except TRANSIENT as exc:
                failure = exc
        raise failure

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
            return await self._execute("EVALSHA", script.sha, *command)
        except NoScriptError:
            await self._recheck()
            return await self._execute("EVALSHA", script.sha, *command)

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
        for attempt in range(2):
            pipe = self._client.pipeline(transaction=False)
            pipe.set(stage, call.staged, nx=True, px=core.STAGE_TTL_MS)
            pipe.evalsha(self._complete.sha, int(call.command[0]), *call.command[1:])
            reply = (await pipe.execute(raise_on_error=False))[1]
            if isinstance(reply, NoScriptError) and attempt == 0:
                await self._recheck()  # the staged value waits for the retry (SET NX)
                continue
            if isinstance(reply, Exception):
                raise reply
            return reply
        raise core.CorruptReplyError("NoScript")

    async def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Read one record (HGETALL + GET of its raw response in one MULTI); None if absent or expired.

        Never touches a TTL (CIS-TTL-5); expired by the store clock reads as absent
        (CIS-TTL-4); a record of another run or call is STORE_UNAVAILABLE (CIS-STORE-6).
        """
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        try:
            pipe = self._client.pipeline(transaction=True)  # one consistent snapshot
            key = call_key(self._prefix, run_id, tool_call_id)
            pipe.hgetall(key)
            pipe.get(core.raw_key(self._prefix, run_id, tool_call_id))
            pipe.pttl(key)
            fields, raw, pttl = await pipe.execute()
            core.check_lifetime(fields, pttl)
            record = core.decode_record(fields, raw, run_id, tool_call_id)
            return live(record, self._clock())
        except FAILURES as exc:
            cause = report_failure("get", exc)
        raise StoreUnavailableError(cause)

    async def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Read several records of one run in one pipelined round trip (CIS-PROG-5, CIS-STORE-6).

        With raw responses, every record HASH and raw STRING is read in one
        ``MULTI`` (a consistent snapshot); ``include_raw=False`` reads the hashes only,
        and ``raw_response`` is None in the result. Unsafe ids map to None unread.
        """
        ids = list(tool_call_ids)
        result: dict[str, CanonicalRecord | None] = dict.fromkeys(ids)
        wanted = [tcid for tcid in dict.fromkeys(ids) if is_safe_id(run_id) and is_safe_id(tcid)]
        if not wanted:
            return result
        try:
            # With raw responses: HGETALL + GET per record in one MULTI (a consistent
            # snapshot); without: HGETALL only, pipelined. One round trip either way.
            pipe = self._client.pipeline(transaction=include_raw)
            for tcid in wanted:
                pipe.hgetall(call_key(self._prefix, run_id, tcid))
                if include_raw:
                    pipe.get(core.raw_key(self._prefix, run_id, tcid))
            replies = await pipe.execute()
            step = 2 if include_raw else 1
            now = self._clock()
            for index, tcid in enumerate(wanted):
                raw = replies[index * step + 1] if include_raw else None
                record = core.decode_record(replies[index * step], raw, run_id, tcid)
                result[tcid] = live(record, now)
            return result
        except FAILURES as exc:
            cause = report_failure("get_many", exc)
        raise StoreUnavailableError(cause)

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
        After NOSCRIPT (SCRIPT FLUSH, a restarted server) the script is loaded and the call retried.
        """
        ids = list(tool_call_ids)
        result: dict[str, ProgressView | None] = dict.fromkeys(ids)
        keys = core.run_keys(self._prefix, run_id)
        wanted = [tcid for tcid in dict.fromkeys(ids) if is_safe_id(tcid)] if keys is not None else []
        if keys is None or not wanted:
            return result
        await self.check_server()
        try:
            command = (b"%d" % len(wanted), *map(keys.record_wire, wanted), *PROGRESS_FIELDS)
            views = core.decode_progress_reply(await self._evalsha(self._progress, command), run_id, wanted)
            now = self._clock()
            for tcid, view in zip(wanted, views, strict=True):
                result[tcid] = live(view, now)
            return result
        except FAILURES as exc:
            cause = report_failure("get_progress", exc)
        raise StoreUnavailableError(cause)

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
        try:
            pipe = self._client.pipeline(transaction=False)
            for tcid in wanted:
                key = core.raw_key(self._prefix, run_id, tcid)
                pipe.exists(key)
                pipe.strlen(key)
            replies = await pipe.execute()
            for index, tcid in enumerate(wanted):
                exists, size = replies[2 * index], replies[2 * index + 1]
                if not (isinstance(exists, int) and isinstance(size, int)):
                    raise core.CorruptReplyError("UnexpectedReply")
                result[tcid] = size if exists else None
            return result
        except FAILURES as exc:
            cause = report_failure("raw_sizes", exc)
        raise StoreUnavailableError(cause)

    async def _list(
        self,
        run_id: str,
        list_key: Callable[[str, str], str],
        operation: str,
    ) -> tuple[str, ...]:
        if not is_safe_id(run_id):
            return ()
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(run_key(self._prefix, run_id), RUN_FIELDS)
            pipe.lrange(list_key(self._prefix, run_id), 0, -1)
            values, items = await pipe.execute()
            run = core.decode_run(values, run_id)
            if not is_live(run, self._clock()):
                return ()
            return core.decode_ids(items)
        except FAILURES as exc:
            cause = report_failure(operation, exc)
        raise StoreUnavailableError(cause)

    async def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered ids of the run's completed calls, () if the run is gone (CIS-PROG-1)."""
        return await self._list(run_id, done_key, "completed")

    async def calls(self, run_id: str) -> tuple[str, ...]:
        """Ids of every record created in the run, in admission order; () if the run is gone."""
        return await self._list(run_id, core.calls_key, "calls")

    async def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """Remaining TTL in ms: min(Redis PTTL, expires_at_ms - clock); None if absent. Read-only."""
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        key = call_key(self._prefix, run_id, tool_call_id)
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(key, ("run_id", "tool_call_id", "expires_at_ms"))
            pipe.pttl(key)
            fields, pttl = await pipe.execute()
            return core.finish_ttl(fields, pttl, run_id, tool_call_id, self._clock())
        except FAILURES as exc:
            cause = report_failure("ttl_remaining_ms", exc)
        raise StoreUnavailableError(cause)

    async def close(self) -> None:
        """Close the client if the store built it; a given client stays open."""
        if self._owns_client:
            await self._client.aclose()
