"""Helpers shared by the store tests: kernel-built records, run setup, Redis probes.

:class:`StoreDriver` puts a store of any flavour (memory, async memory, Redis, async
Redis, Redis Cluster) behind the synchronous :class:`InvocationStore` interface, so a
contract test is written once and runs on every flavour.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import redis
from attrs import evolve

from invocation_store.adapters import AsyncInvocationStore, InvocationStore, call_key
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    Limits,
    ProgressView,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    transition,
)
from invocation_store.testing import FakeClock

LIMITS = Limits()
_T = TypeVar("_T")
RUN = "run-1"
DEADLINE_IN_MS = 60_000
TTL_MS = 30_000

#: Commands that set, change or drop a key's expiry, or overwrite a value whole.
EXPIRE_FAMILY = frozenset(
    {"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "GETEX", "SET", "SETEX", "PSETEX", "GETSET"}
)


def token() -> str:
    """A fresh invocation token, drawn as a boundary would."""
    return secrets.token_hex(8)


class StoreDriver:
    """A sync or async store behind the sync :class:`InvocationStore` interface (CIS-STORE-1).

    A sync store's methods are called directly; an async store's coroutines run to
    completion on the driver's own event loop (one loop for the store's life, as
    redis-py's asyncio connections require). :meth:`concurrently` runs calls at the
    same time in the flavour's own way: one thread per call for a sync store, one
    task per call for an async one. ``flavour`` names the store for messages;
    ``redis_client`` is a sync client on the store's server (None for memory stores).
    """

    def __init__(
        self,
        store: InvocationStore | AsyncInvocationStore,
        flavour: str,
        *,
        redis_client: redis.Redis | redis.RedisCluster | None = None,
    ) -> None:
        self.store = store
        self.flavour = flavour
        self.redis_client = redis_client
        self.is_async = inspect.iscoroutinefunction(store.create)
        self._loop = asyncio.new_event_loop() if self.is_async else None

    @property
    def prefix(self) -> str:
        """The Redis key prefix of a Redis store."""
        prefix = getattr(self.store, "prefix", None)
        assert isinstance(prefix, str), self.flavour
        return prefix

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(self.store, name)(*args, **kwargs)
        if inspect.isawaitable(result):
            assert self._loop is not None
            return self._loop.run_until_complete(result)
        return result

    def now_ms(self) -> int:
        """The store's clock."""
        return self.store.now_ms()

    def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """See :meth:`InvocationStore.open_run`."""
        result: RunState | ErrorCode = self._call(
            "open_run",
            run_id,
            deadline_ms=deadline_ms,
            ttl_ms=ttl_ms,
            tool_call_budget=tool_call_budget,
            byte_budget=byte_budget,
        )
        return result

    def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """See :meth:`InvocationStore.cancel_run`."""
        result: RunState | ErrorCode = self._call("cancel_run", run_id)
        return result

    def close_run(self, run_id: str) -> RunState | ErrorCode:
        """See :meth:`InvocationStore.close_run`."""
        result: RunState | ErrorCode = self._call("close_run", run_id)
        return result

    def get_run(self, run_id: str) -> RunState | None:
        """See :meth:`InvocationStore.get_run`."""
        result: RunState | None = self._call("get_run", run_id)
        return result

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """See :meth:`InvocationStore.create`."""
        result: Admission | ErrorCode = self._call("create", request, limits)
        return result

    def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """See :meth:`InvocationStore.complete`."""
        result: CanonicalRecord | ErrorCode = self._call("complete", before, after)
        return result

    def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """See :meth:`InvocationStore.get`."""
        result: CanonicalRecord | None = self._call("get", run_id, tool_call_id)
        return result

    def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """See :meth:`InvocationStore.get_many`."""
        result: Mapping[str, CanonicalRecord | None] = self._call(
            "get_many", run_id, tool_call_ids, include_raw=include_raw
        )
        return result

    def get_progress(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, ProgressView | None]:
        """See :meth:`InvocationStore.get_progress`."""
        result: Mapping[str, ProgressView | None] = self._call("get_progress", run_id, tool_call_ids)
        return result

    def raw_sizes(self, run_id: str, tool_call_ids: Sequence[str]) -> Mapping[str, int | None]:
        """See :meth:`RedisStore.raw_sizes` (Redis stores only)."""
        result: Mapping[str, int | None] = self._call("raw_sizes", run_id, tool_call_ids)
        return result

    def completed(self, run_id: str) -> tuple[str, ...]:
        """See :meth:`InvocationStore.completed`."""
        result: tuple[str, ...] = self._call("completed", run_id)
        return result

    def calls(self, run_id: str) -> tuple[str, ...]:
        """See :meth:`InvocationStore.calls`."""
        result: tuple[str, ...] = self._call("calls", run_id)
        return result

    def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """See :meth:`InvocationStore.ttl_remaining_ms`."""
        result: int | None = self._call("ttl_remaining_ms", run_id, tool_call_id)
        return result

    def concurrently(self, calls: Sequence[Callable[[Any], _T | Awaitable[_T]]]) -> list[_T]:
        """Run ``call(store)`` for every call at once; results in the calls' order.

        Sync store: one thread per call, released together by a barrier. Async store:
        one task per call on the driver's loop (``asyncio.gather``), so the coroutines
        interleave at every ``await``.
        """
        if self._loop is not None:

            async def gather() -> list[_T]:
                return list(await asyncio.gather(*(call(self.store) for call in calls)))  # type: ignore[arg-type]

            return self._loop.run_until_complete(gather())
        barrier = threading.Barrier(len(calls))
        results: list[Any] = [None] * len(calls)

        def work(index: int) -> None:
            barrier.wait()
            results[index] = calls[index](self.store)

        threads = [threading.Thread(target=work, args=(index,)) for index in range(len(calls))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not any(thread.is_alive() for thread in threads), "a call never returned"
        return results

    def close(self) -> None:
        """Close the store (in its loop for an async store), then the loop."""
        self._call("close")
        if self._loop is not None:
            self._loop.close()


#: ``make_driver(clock)``: the factory the ``make_driver`` fixtures hand a test.
MakeDriver = Callable[[FakeClock], StoreDriver]


def with_planted_script(driver: StoreDriver, attribute: str, text: str, replacement: str) -> StoreDriver:
    """``driver`` with its Redis store's script ``attribute`` (e.g. ``"_create"``) changed.

    ``text`` (which must occur) is replaced by ``replacement``; call before the store's
    first operation, which loads the scripts. A planted fault for the reply checks.
    """
    store: Any = driver.store
    source = getattr(store, attribute).script
    assert text in source, (attribute, text)
    setattr(store, attribute, store._client.register_script(source.replace(text, replacement)))
    return driver


def open_default_run(
    store: InvocationStore,
    now_ms: int,
    *,
    run_id: str = RUN,
    tool_call_budget: int = 10,
    byte_budget: int = 1_000_000,
    ttl_ms: int = TTL_MS,
    deadline_in_ms: int = DEADLINE_IN_MS,
) -> RunState:
    """Open a run and return its state (fails the test on a code)."""
    run = store.open_run(
        run_id,
        deadline_ms=now_ms + deadline_in_ms,
        ttl_ms=ttl_ms,
        tool_call_budget=tool_call_budget,
        byte_budget=byte_budget,
    )
    assert isinstance(run, RunState), run
    return run


def request(
    tool_call_id: str = "call_1",
    *,
    run_id: str = RUN,
    arguments: str = '{"q": "weather"}',
    invocation_token: str | None = None,
    tool_name: str = "search",
) -> AdmissionRequest:
    """An admission request as the boundary builds it after preflight."""
    return AdmissionRequest(
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        request_json=arguments,
        invocation_token=invocation_token if invocation_token is not None else token(),
    )


def admitted(store: InvocationStore, req: AdmissionRequest) -> CanonicalRecord:
    """Create and return the PROJECTING record (fails the test on a code)."""
    result = store.create(req, LIMITS)
    assert isinstance(result, Admission), result
    return result.record


def with_raw(record: CanonicalRecord, now_ms: int, raw: str = '{"temp": 21}') -> CanonicalRecord:
    """The kernel's PROJECTING-with-raw record."""
    result = transition(record, RawReceived(raw_response=raw, now_ms=now_ms), LIMITS)
    assert isinstance(result, CanonicalRecord), result
    return result


def ready(
    record: CanonicalRecord,
    now_ms: int,
    *,
    raw: str = '{"temp": 21}',
    content: str = "21 C",
    evidence: EvidenceStatus = EvidenceStatus.EVIDENCE_FOUND,
    scope: str = "city=Paris",
) -> CanonicalRecord:
    """The kernel's READY record from a PROJECTING one (raw added if missing)."""
    base = record if record.raw_response is not None else with_raw(record, now_ms, raw)
    projection = Projection(evidence_status=evidence, content=content, scope=scope)
    result = transition(base, ProjectionReceived(projection=projection, now_ms=now_ms), LIMITS)
    assert isinstance(result, CanonicalRecord), result
    return result


def failed(record: CanonicalRecord, now_ms: int, code: Any) -> CanonicalRecord:
    """The kernel's ERROR record with ``code``."""
    result = transition(record, Failed(code=code, now_ms=now_ms), LIMITS)
    assert isinstance(result, CanonicalRecord), result
    return result


def moved(record: CanonicalRecord, **changes: Any) -> CanonicalRecord:
    """``attrs.evolve`` shorthand."""
    return evolve(record, **changes)


# -- Redis probes ------------------------------------------------------------------------


def record_key(prefix: str, run_id: str, tool_call_id: str) -> str:
    """The kernel's key of a record."""
    return call_key(prefix, run_id, tool_call_id)


@contextlib.contextmanager
def monitored(url: str) -> Iterator[list[dict[str, Any]]]:
    """Capture, with MONITOR, every command the server runs inside the block.

    The list is filled when the block ends (after a sentinel ECHO is seen), so read
    it after the ``with``. Each entry is redis-py's parsed MONITOR line, with
    ``client_type`` ``"lua"`` for commands a script ran. Use only on a server the
    tests started (``private_redis_url``).
    """
    commands: list[dict[str, Any]] = []
    sentinel = f"cis-sentinel-{secrets.token_hex(6)}"
    with redis.Redis.from_url(url) as watcher, redis.Redis.from_url(url) as client:
        client.ping()  # connect (HELLO, CLIENT SETINFO) before MONITOR starts
        with watcher.monitor() as monitor:
            yield commands
            client.echo(sentinel)
            while True:
                entry = monitor.next_command()
                if sentinel in entry["command"]:
                    break
                commands.append(entry)


def name_and_key(entry: dict[str, Any]) -> tuple[str, str]:
    """(upper-case command name, first argument) of a MONITOR entry."""
    parts = str(entry["command"]).split(" ")
    return parts[0].upper(), parts[1] if len(parts) > 1 else ""
