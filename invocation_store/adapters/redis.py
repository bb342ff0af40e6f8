"""Redis stores: :class:`RedisStore` (``redis.Redis``) and :class:`AsyncRedisStore` (``redis.asyncio``).

Both apply what the kernel decides and hold no lifecycle rule of their own
(CIS-LIFE-4): every write is one Lua script from ``_redis_scripts.py`` that mirrors a
kernel function, and the value returned is the kernel's answer on the state the
script saw (``_redis_core.py``). One successful invocation costs two round trips,
``create`` and ``complete`` (CIS-STORE-9); a raw response over 16 KiB rides in the
same round trip as ``complete``, as a plain ``SET`` to a staging key that the script
renames into place (see ``_redis_scripts.py`` for the layout and why). Reads are
plain ``HGETALL``/``GET``/``HMGET``/``LRANGE``/``PTTL`` (a record and its raw
response in one ``MULTI``), one round trip each, never an expire command (CIS-TTL-5).

Scripts are registered once through redis-py ``Script`` objects (CIS-STORE-5). The
two hot scripts (create, complete) are sent as ``EVALSHA`` straight through the
client's ``execute_command`` with pre-encoded keys and header, which spares redis-py's
``Script`` wrapper its argument copies; after ``NOSCRIPT`` (``SCRIPT FLUSH``, a
restarted server) the script is loaded and the call retried once, as the ``Script``
object itself does. A cluster client goes through the ``Script`` object, which routes
by the keys. The first operation checks the server version (>= 6.2, CIS-STORE-7) and
loads the scripts, in one pipelined round trip.

Failures: every redis-py, connection, timeout, encoding or decoding failure, and
every reply that is not what the store wrote (a record of another run or call,
CIS-STORE-6), raises :class:`~invocation_store.adapters.StoreUnavailableError`
without chaining the original exception; only exception *type* names are logged
(CIS-FAIL-5, CIS-ERR-2). Keys, URLs, passwords and payloads never appear in an
exception or a log line.

Clocks: the store's clock (default: wall clock) is an argument of every script, and
every read also compares ``expires_at_ms`` with it, so an injected fake clock
behaves exactly as with :class:`~invocation_store.adapters.MemoryStore`; Redis' own
TTL (real time) removes the data. Integers must stay below 2**53 (Lua numbers).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import redis
import redis.asyncio
from redis.cluster import RedisCluster
from redis.commands.core import AsyncScript, Script
from redis.exceptions import NoScriptError

from ..kernel import (
    PROGRESS_FIELDS,
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    Limits,
    ProgressView,
    RunState,
    call_key,
    done_key,
    is_safe_id,
    run_key,
)
from . import _redis_core as core
from ._protocol import StoreUnavailableError
from ._redis_scripts import (
    COMPLETE_SCRIPT,
    CREATE_SCRIPT,
    END_RUN_SCRIPT,
    OPEN_RUN_SCRIPT,
    PROGRESS_SCRIPT,
    RUN_FIELDS,
)
from .memory import wall_clock_ms

__all__ = ["DEFAULT_PREFIX", "DEFAULT_TIMEOUT_S", "AsyncRedisStore", "RedisStore", "UnsupportedRedisError"]

#: Default key prefix (CIS-KEY-1).
DEFAULT_PREFIX: Final = "cis"

#: Socket and connect timeout of stores built by ``from_url``, in seconds.
DEFAULT_TIMEOUT_S: Final = 5.0
_DEFAULT_OPTIONS: Final = {"socket_timeout": DEFAULT_TIMEOUT_S, "socket_connect_timeout": DEFAULT_TIMEOUT_S}

_LOG = logging.getLogger("invocation_store.redis")
_LOG.addHandler(logging.NullHandler())

# What a Redis round trip can raise that means "the store failed": redis-py errors
# (connection, timeout, response, data), socket errors and TimeoutError (OSError),
# encoding/decoding errors and corrupt replies (ValueError), and malformed replies.
_FAILURES: Final = (redis.RedisError, OSError, ValueError, KeyError, IndexError, TypeError)


class UnsupportedRedisError(StoreUnavailableError):
    """The server is older than Redis 6.2, which the store requires (CIS-STORE-7).

    A :class:`StoreUnavailableError` whose message says ``requires Redis >= 6.2``
    and names the version found.
    """

    def __init__(self, found: str) -> None:
        super().__init__(cause=f"requires Redis >= 6.2, found {found}")


def _failure(operation: str, exc: BaseException) -> str:
    cause = exc.cause if isinstance(exc, core.CorruptReplyError) else type(exc).__name__
    _LOG.warning("redis store: %s failed (%s)", operation, cause)
    return cause


def _check_version(info: Mapping[str, object]) -> None:
    version = core.parse_version(info)
    if version < core.MIN_VERSION:
        raise UnsupportedRedisError(".".join(str(part) for part in version))


def _nonce() -> str:
    """A fresh name part for a staging key (16 hex digits)."""
    return secrets.token_hex(8)


def _split_command(
    command: tuple[bytes | str, ...],
) -> tuple[tuple[bytes | str, ...], tuple[bytes | str, ...]]:
    """A script call's (KEYS, ARGV) from numkeys, KEYS, ARGV."""
    count = int(command[0])
    return command[1 : 1 + count], command[1 + count :]


def _bad_url() -> ValueError:
    return ValueError("not a usable Redis URL (expected redis://, rediss:// or unix://)")


class RedisStore:
    """The Redis :class:`~invocation_store.adapters.InvocationStore` on ``redis.Redis`` (CIS-STORE-1).

    ``client`` is used as given (its ``decode_responses`` setting does not matter)
    and is not closed by :meth:`close` unless the store built it (``from_url``). A
    ``redis.cluster.RedisCluster`` works too: every script and pipelined read of a
    run touches the one slot of the run's hash tag (CIS-KEY-2).
    ``prefix`` starts every key (default ``"cis"``; non-empty, no braces: else
    ``ValueError``). ``clock`` returns integer ms (default: wall clock).
    Thread-safe as redis-py's connection pool is.
    """

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], int] | None = None,
        owns_client: bool = False,
    ) -> None:
        self._client = client
        self._prefix = core.check_prefix(prefix)
        self._clock = clock or wall_clock_ms
        self._owns_client = owns_client
        self._ready = False
        self._cluster = isinstance(client, RedisCluster)
        # redis-py leaves execute_command untyped; this is the one place it is named.
        self._execute: Callable[..., object] = client.execute_command
        self._open: Script = client.register_script(OPEN_RUN_SCRIPT)
        self._end: Script = client.register_script(END_RUN_SCRIPT)
        self._create: Script = client.register_script(CREATE_SCRIPT)
        self._complete: Script = client.register_script(COMPLETE_SCRIPT)
        self._progress: Script = client.register_script(PROGRESS_SCRIPT)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], int] | None = None,
        **options: Any,
    ) -> RedisStore:
        """Build a store on a new client for ``url`` (``redis://``, ``rediss://``, ``unix://``).

        ``options`` go to ``redis.Redis.from_url`` (timeouts, retries, TLS); socket
        and connect timeouts default to :data:`DEFAULT_TIMEOUT_S` seconds rather than
        redis-py's "wait forever". Raises ``ValueError`` (without the URL, which may
        hold a password) if redis-py cannot parse ``url``. No connection is made
        until the first operation.
        """
        options = {**_DEFAULT_OPTIONS, **options}
        try:
            client = redis.Redis.from_url(url, **options)
        except (ValueError, TypeError, redis.RedisError):
            client = None
        if client is None:
            raise _bad_url()
        return cls(client, prefix=prefix, clock=clock, owns_client=True)

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self._prefix

    def now_ms(self) -> int:
        """The store's clock in integer ms."""
        return self._clock()

    def check_server(self) -> None:
        """Check the version (>= 6.2) and load the scripts, once; later calls do nothing.

        Every operation calls this first. Raises :class:`UnsupportedRedisError` for an
        older server and :class:`StoreUnavailableError` if Redis cannot be reached.
        """
        if self._ready:
            return
        scripts = (self._open, self._end, self._create, self._complete, self._progress)
        try:
            if isinstance(self._client, RedisCluster):
                # INFO and SCRIPT LOAD cannot be pipelined in a cluster.
                info = self._client.info("server")
                for script in scripts:
                    self._client.script_load(script.script)
            else:
                pipe = self._client.pipeline(transaction=False)
                pipe.info("server")
                for script in scripts:
                    pipe.script_load(script.script)
                info = pipe.execute()[0]
        except _FAILURES as exc:
            cause = _failure("check_server", exc)
        else:
            _check_version(info)
            self._ready = True
            return
        raise StoreUnavailableError(cause)

    # -- runs --------------------------------------------------------------------------

    def open_run(
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
        self.check_server()
        try:
            reply = self._open(keys=plan.keys, args=plan.args, client=self._client)
            return core.finish_open(plan, reply, now)
        except _FAILURES as exc:
            cause = _failure("open_run", exc)
        raise StoreUnavailableError(cause)

    def _end_run(self, run_id: str, cancel: bool) -> RunState | ErrorCode:
        planned = core.plan_end_run(self._prefix, run_id, cancel)
        if planned is None:
            return ErrorCode.RUN_INACTIVE
        self.check_server()
        now = self._clock()
        key, target = planned
        try:
            reply = self._end(keys=(key,), args=(str(now), target), client=self._client)
            return core.finish_end_run(run_id, cancel, reply, now)
        except _FAILURES as exc:
            cause = _failure("end_run", exc)
        raise StoreUnavailableError(cause)

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CANCELLED (kernel ``cancel_run``); RUN_INACTIVE or INVALID_TRANSITION (CIS-RUN-2)."""
        return self._end_run(run_id, cancel=True)

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """ACTIVE -> CLOSED (kernel ``close_run``); RUN_INACTIVE or INVALID_TRANSITION (CIS-RUN-2)."""
        return self._end_run(run_id, cancel=False)

    def get_run(self, run_id: str) -> RunState | None:
        """The run's state (one HMGET), or None if unknown or lapsed by the store clock."""
        if not is_safe_id(run_id):
            return None
        self.check_server()
        try:
            values = self._client.hmget(run_key(self._prefix, run_id), RUN_FIELDS)
            run = core.decode_run(values, run_id)
            return None if run is None or self._clock() >= run.expires_at_ms else run
        except _FAILURES as exc:
            cause = _failure("get_run", exc)
        raise StoreUnavailableError(cause)

    # -- records -----------------------------------------------------------------------

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Admit and create in one script mirroring kernel ``admit`` (CIS-PRE-8, CIS-STORE-2).

        Returns the kernel's Admission (``replayed=True`` for a retried create with
        the same invocation token, CIS-RETRY-2) or RUN_INACTIVE,
        RUN_DEADLINE_EXCEEDED, DUPLICATE_TOOL_CALL, TOOL_BUDGET_EXHAUSTED,
        INVALID_ARGUMENTS, RUN_BYTES_EXHAUSTED or a Begin code. The record's TTL is
        set once, here (CIS-TTL-1). Time is ``request.now_ms``.
        """
        plan = core.plan_create(self._prefix, request, limits)
        if isinstance(plan, ErrorCode):
            return plan
        if not self._ready:
            self.check_server()
        try:
            return core.finish_create(plan, self._evalsha(self._create, plan.command))
        except _FAILURES as exc:
            cause = _failure("create", exc)
        raise StoreUnavailableError(cause)

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Compare-and-set ``before`` -> ``after`` in one script mirroring kernel ``decide_complete``.

        WRITE (fields updated with ``HSET``/``HDEL``, so the TTL is kept, CIS-TTL-3)
        returns ``after``; REPLAY returns the stored record (CIS-RETRY-2); otherwise
        INVALID_TRANSITION and nothing written (CIS-STORE-3). Raises ``ValueError``
        if ``after`` changes an identity field (kernel programming error).
        """
        now = self._clock()
        plan = core.plan_complete(self._prefix, before, after, now, _nonce)
        if isinstance(plan, ErrorCode):
            return plan
        if not self._ready:
            self.check_server()
        try:
            result = core.finish_complete(plan, self._send_complete(plan.call))
            if result is None:  # RESEND: the kept raw response was not the expected one
                result = core.finish_complete(plan, self._send_complete(plan.resend))
            if result is None:
                raise core.CorruptReplyError("UnexpectedReply")
            return result
        except _FAILURES as exc:
            cause = _failure("complete", exc)
        raise StoreUnavailableError(cause)

    def _evalsha(self, script: Script, command: tuple[bytes | str, ...]) -> object:
        """``EVALSHA <sha> <command>`` in one round trip; after NOSCRIPT, load the script and retry once.

        ``command`` is numkeys, KEYS, ARGV (see ``_redis_core``). On a plain client the
        command goes straight to ``execute_command`` (redis-py's ``Script`` object adds
        argument copies but nothing else: it too loads and retries on NOSCRIPT, CIS-STORE-5);
        a cluster client goes through the ``Script``, which routes by the keys.
        """
        client = self._client
        if self._cluster:
            keys, args = _split_command(command)
            return script(keys=keys, args=args, client=client)
        try:
            return self._execute("EVALSHA", script.sha, *command)
        except NoScriptError:
            script.sha = client.script_load(script.script)
            return self._execute("EVALSHA", script.sha, *command)

    def _send_complete(self, call: core.CompleteCall) -> object:
        """One COMPLETE_SCRIPT call; a staged raw response is SET first, in the same round trip."""
        if call.staged is None or call.stage_key is None:
            return self._evalsha(self._complete, call.command)
        stage = call.stage_key
        if self._cluster:  # a cluster pipeline cannot carry EVALSHA
            self._client.set(stage, call.staged, nx=True, px=core.STAGE_TTL_MS)
            return self._evalsha(self._complete, call.command)
        for attempt in range(2):
            pipe = self._client.pipeline(transaction=False)
            pipe.set(stage, call.staged, nx=True, px=core.STAGE_TTL_MS)
            pipe.evalsha(self._complete.sha, int(call.command[0]), *call.command[1:])
            reply = (pipe.execute(raise_on_error=False))[1]
            if isinstance(reply, NoScriptError) and attempt == 0:
                # The staged value waits for the retry (SET NX).
                self._complete.sha = self._client.script_load(COMPLETE_SCRIPT)
                continue
            if isinstance(reply, Exception):
                raise reply
            return reply
        raise core.CorruptReplyError("NoScript")

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Read one record (HGETALL + GET of its raw response in one MULTI); None if absent or expired.

        Never touches a TTL (CIS-TTL-5); expired by the store clock reads as absent
        (CIS-TTL-4); a record of another run or call is STORE_UNAVAILABLE (CIS-STORE-6).
        """
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        self.check_server()
        try:
            pipe = self._client.pipeline(transaction=True)  # one consistent snapshot
            pipe.hgetall(call_key(self._prefix, run_id, tool_call_id))
            pipe.get(core.raw_key(self._prefix, run_id, tool_call_id))
            fields, raw = pipe.execute()
            record = core.decode_record(fields, raw, run_id, tool_call_id)
            return None if record is None or self._clock() >= record.expires_at_ms else record
        except _FAILURES as exc:
            cause = _failure("get", exc)
        raise StoreUnavailableError(cause)

    def get_many(
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
        self.check_server()
        try:
            # With raw responses: HGETALL + GET per record in one MULTI (a consistent
            # snapshot); without: HGETALL only, pipelined. One round trip either way.
            pipe = self._client.pipeline(transaction=include_raw)
            for tcid in wanted:
                pipe.hgetall(call_key(self._prefix, run_id, tcid))
                if include_raw:
                    pipe.get(core.raw_key(self._prefix, run_id, tcid))
            replies = pipe.execute()
            step = 2 if include_raw else 1
            now = self._clock()
            for index, tcid in enumerate(wanted):
                raw = replies[index * step + 1] if include_raw else None
                record = core.decode_record(replies[index * step], raw, run_id, tcid)
                result[tcid] = None if record is None or now >= record.expires_at_ms else record
            return result
        except _FAILURES as exc:
            cause = _failure("get_many", exc)
        raise StoreUnavailableError(cause)

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, ProgressView | None]:
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
        self.check_server()
        try:
            command = (b"%d" % len(wanted), *map(keys.record_wire, wanted), *PROGRESS_FIELDS)
            views = core.decode_progress_reply(self._evalsha(self._progress, command), run_id, wanted)
            now = self._clock()
            for tcid, view in zip(wanted, views, strict=True):
                result[tcid] = None if view is None or now >= view.expires_at_ms else view
            return result
        except _FAILURES as exc:
            cause = _failure("get_progress", exc)
        raise StoreUnavailableError(cause)

    def _list(self, run_id: str, list_key: Callable[[str, str], str], operation: str) -> tuple[str, ...]:
        if not is_safe_id(run_id):
            return ()
        self.check_server()
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(run_key(self._prefix, run_id), RUN_FIELDS)
            pipe.lrange(list_key(self._prefix, run_id), 0, -1)
            values, items = pipe.execute()
            run = core.decode_run(values, run_id)
            if run is None or self._clock() >= run.expires_at_ms:
                return ()
            return core.decode_ids(items)
        except _FAILURES as exc:
            cause = _failure(operation, exc)
        raise StoreUnavailableError(cause)

    def completed(self, run_id: str) -> tuple[str, ...]:
        """Ordered ids of the run's completed calls, () if the run is gone (CIS-PROG-1)."""
        return self._list(run_id, done_key, "completed")

    def calls(self, run_id: str) -> tuple[str, ...]:
        """Ids of every record created in the run, in admission order; () if the run is gone."""
        return self._list(run_id, core.calls_key, "calls")

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """Remaining TTL in ms: min(Redis PTTL, expires_at_ms - clock); None if absent. Read-only."""
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        self.check_server()
        key = call_key(self._prefix, run_id, tool_call_id)
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(key, ("run_id", "tool_call_id", "expires_at_ms"))
            pipe.pttl(key)
            fields, pttl = pipe.execute()
            return core.finish_ttl(fields, pttl, run_id, tool_call_id, self._clock())
        except _FAILURES as exc:
            cause = _failure("ttl_remaining_ms", exc)
        raise StoreUnavailableError(cause)

    def close(self) -> None:
        """Close the client if the store built it; a given client stays open."""
        if self._owns_client:
            self._client.close()


class AsyncRedisStore:
    """The asyncio twin of :class:`RedisStore` on ``redis.asyncio.Redis``: same contract per method.

    Close it with ``await store.close()`` in the loop that used it.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], int] | None = None,
        owns_client: bool = False,
    ) -> None:
        self._client = client
        self._prefix = core.check_prefix(prefix)
        self._clock = clock or wall_clock_ms
        self._owns_client = owns_client
        self._ready = False
        # redis-py leaves execute_command untyped; this is the one place it is named.
        self._execute: Callable[..., Awaitable[object]] = client.execute_command
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
        **options: Any,
    ) -> AsyncRedisStore:
        """See :meth:`RedisStore.from_url`; the client is a ``redis.asyncio.Redis``."""
        options = {**_DEFAULT_OPTIONS, **options}
        try:
            client = redis.asyncio.Redis.from_url(url, **options)
        except (ValueError, TypeError, redis.RedisError):
            client = None
        if client is None:
            raise _bad_url()
        return cls(client, prefix=prefix, clock=clock, owns_client=True)

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self._prefix

    def now_ms(self) -> int:
        """The store's clock in integer ms."""
        return self._clock()

    async def check_server(self) -> None:
        """See :meth:`RedisStore.check_server`."""
        if self._ready:
            return
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.info("server")
            for script in (self._open, self._end, self._create, self._complete, self._progress):
                pipe.script_load(script.script)
            info = (await pipe.execute())[0]
        except _FAILURES as exc:
            cause = _failure("check_server", exc)
        else:
            _check_version(info)
            self._ready = True
            return
        raise StoreUnavailableError(cause)

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """See :meth:`RedisStore.open_run`."""
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
            reply = await self._open(keys=plan.keys, args=plan.args, client=self._client)
            return core.finish_open(plan, reply, now)
        except _FAILURES as exc:
            cause = _failure("open_run", exc)
        raise StoreUnavailableError(cause)

    async def _end_run(self, run_id: str, cancel: bool) -> RunState | ErrorCode:
        planned = core.plan_end_run(self._prefix, run_id, cancel)
        if planned is None:
            return ErrorCode.RUN_INACTIVE
        await self.check_server()
        now = self._clock()
        key, target = planned
        try:
            reply = await self._end(keys=(key,), args=(str(now), target), client=self._client)
            return core.finish_end_run(run_id, cancel, reply, now)
        except _FAILURES as exc:
            cause = _failure("end_run", exc)
        raise StoreUnavailableError(cause)

    async def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """See :meth:`RedisStore.cancel_run`."""
        return await self._end_run(run_id, cancel=True)

    async def close_run(self, run_id: str) -> RunState | ErrorCode:
        """See :meth:`RedisStore.close_run`."""
        return await self._end_run(run_id, cancel=False)

    async def get_run(self, run_id: str) -> RunState | None:
        """See :meth:`RedisStore.get_run`."""
        if not is_safe_id(run_id):
            return None
        await self.check_server()
        try:
            values = await self._client.hmget(run_key(self._prefix, run_id), RUN_FIELDS)
            run = core.decode_run(values, run_id)
            return None if run is None or self._clock() >= run.expires_at_ms else run
        except _FAILURES as exc:
            cause = _failure("get_run", exc)
        raise StoreUnavailableError(cause)

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """See :meth:`RedisStore.create`."""
        plan = core.plan_create(self._prefix, request, limits)
        if isinstance(plan, ErrorCode):
            return plan
        if not self._ready:
            await self.check_server()
        try:
            return core.finish_create(plan, await self._evalsha(self._create, plan.command))
        except _FAILURES as exc:
            cause = _failure("create", exc)
        raise StoreUnavailableError(cause)

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """See :meth:`RedisStore.complete`."""
        now = self._clock()
        plan = core.plan_complete(self._prefix, before, after, now, _nonce)
        if isinstance(plan, ErrorCode):
            return plan
        if not self._ready:
            await self.check_server()
        try:
            result = core.finish_complete(plan, await self._send_complete(plan.call))
            if result is None:  # RESEND: the kept raw response was not the expected one
                result = core.finish_complete(plan, await self._send_complete(plan.resend))
            if result is None:
                raise core.CorruptReplyError("UnexpectedReply")
            return result
        except _FAILURES as exc:
            cause = _failure("complete", exc)
        raise StoreUnavailableError(cause)

    async def _evalsha(self, script: AsyncScript, command: tuple[bytes | str, ...]) -> object:
        """See :meth:`RedisStore._evalsha`."""
        try:
            return await self._execute("EVALSHA", script.sha, *command)
        except NoScriptError:
            script.sha = await self._client.script_load(script.script)
            return await self._execute("EVALSHA", script.sha, *command)

    async def _send_complete(self, call: core.CompleteCall) -> object:
        """One COMPLETE_SCRIPT call; a staged raw response is SET first, in the same round trip."""
        if call.staged is None or call.stage_key is None:
            return await self._evalsha(self._complete, call.command)
        stage = call.stage_key
        for attempt in range(2):
            pipe = self._client.pipeline(transaction=False)
            pipe.set(stage, call.staged, nx=True, px=core.STAGE_TTL_MS)
            pipe.evalsha(self._complete.sha, int(call.command[0]), *call.command[1:])
            reply = (await pipe.execute(raise_on_error=False))[1]
            if isinstance(reply, NoScriptError) and attempt == 0:
                self._complete.sha = await self._client.script_load(COMPLETE_SCRIPT)  # the staged value waits
                continue
            if isinstance(reply, Exception):
                raise reply
            return reply
        raise core.CorruptReplyError("NoScript")

    async def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """See :meth:`RedisStore.get`."""
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        await self.check_server()
        try:
            pipe = self._client.pipeline(transaction=True)  # one consistent snapshot
            pipe.hgetall(call_key(self._prefix, run_id, tool_call_id))
            pipe.get(core.raw_key(self._prefix, run_id, tool_call_id))
            fields, raw = await pipe.execute()
            record = core.decode_record(fields, raw, run_id, tool_call_id)
            return None if record is None or self._clock() >= record.expires_at_ms else record
        except _FAILURES as exc:
            cause = _failure("get", exc)
        raise StoreUnavailableError(cause)

    async def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """See :meth:`RedisStore.get_many`."""
        ids = list(tool_call_ids)
        result: dict[str, CanonicalRecord | None] = dict.fromkeys(ids)
        wanted = [tcid for tcid in dict.fromkeys(ids) if is_safe_id(run_id) and is_safe_id(tcid)]
        if not wanted:
            return result
        await self.check_server()
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
                result[tcid] = None if record is None or now >= record.expires_at_ms else record
            return result
        except _FAILURES as exc:
            cause = _failure("get_many", exc)
        raise StoreUnavailableError(cause)

    async def get_progress(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> Mapping[str, ProgressView | None]:
        """See :meth:`RedisStore.get_progress`."""
        ids = list(tool_call_ids)
        result: dict[str, ProgressView | None] = dict.fromkeys(ids)
        keys = core.run_keys(self._prefix, run_id)
        wanted = [tcid for tcid in dict.fromkeys(ids) if is_safe_id(tcid)] if keys is not None else []
        if keys is None or not wanted:
            return result
        await self.check_server()
        try:
            command = (b"%d" % len(wanted), *map(keys.record_wire, wanted), *PROGRESS_FIELDS)
            reply = await self._evalsha(self._progress, command)
            views = core.decode_progress_reply(reply, run_id, wanted)
            now = self._clock()
            for tcid, view in zip(wanted, views, strict=True):
                result[tcid] = None if view is None or now >= view.expires_at_ms else view
            return result
        except _FAILURES as exc:
            cause = _failure("get_progress", exc)
        raise StoreUnavailableError(cause)

    async def _list(
        self, run_id: str, list_key: Callable[[str, str], str], operation: str
    ) -> tuple[str, ...]:
        if not is_safe_id(run_id):
            return ()
        await self.check_server()
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(run_key(self._prefix, run_id), RUN_FIELDS)
            pipe.lrange(list_key(self._prefix, run_id), 0, -1)
            values, items = await pipe.execute()
            run = core.decode_run(values, run_id)
            if run is None or self._clock() >= run.expires_at_ms:
                return ()
            return core.decode_ids(items)
        except _FAILURES as exc:
            cause = _failure(operation, exc)
        raise StoreUnavailableError(cause)

    async def completed(self, run_id: str) -> tuple[str, ...]:
        """See :meth:`RedisStore.completed`."""
        return await self._list(run_id, done_key, "completed")

    async def calls(self, run_id: str) -> tuple[str, ...]:
        """See :meth:`RedisStore.calls`."""
        return await self._list(run_id, core.calls_key, "calls")

    async def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """See :meth:`RedisStore.ttl_remaining_ms`."""
        if not (is_safe_id(run_id) and is_safe_id(tool_call_id)):
            return None
        await self.check_server()
        key = call_key(self._prefix, run_id, tool_call_id)
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hmget(key, ("run_id", "tool_call_id", "expires_at_ms"))
            pipe.pttl(key)
            fields, pttl = await pipe.execute()
            return core.finish_ttl(fields, pttl, run_id, tool_call_id, self._clock())
        except _FAILURES as exc:
            cause = _failure("ttl_remaining_ms", exc)
        raise StoreUnavailableError(cause)

    async def close(self) -> None:
        """Close the client if the store built it; a given client stays open."""
        if self._owns_client:
            await self._client.aclose()
