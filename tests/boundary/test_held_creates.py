"""A create whose outcome is unknown is held with its token; the re-sent call runs its tool exactly once.

The stores here apply a create and then lose its reply (raise StoreUnavailableError
after the write), as a connection cut past the retry budget does (CIS-BND-7). The
Redis versions, with a reply-dropping TCP proxy and a server kill under ``appendfsync
always``, are in ``test_held_creates_redis.py``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

import pytest

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    CompletionRetry,
    MemoryStore,
    StoreUnavailableError,
    ToolBoundary,
    ToolRegistry,
)
from invocation_store.adapters import CorruptRecordError, ForwardingStore, UnsafeServerError
from invocation_store.kernel import Admission, AdmissionRequest, ErrorCode, InvocationStatus, Limits
from invocation_store.testing import FakeClock

from ._fakes import RUN, FakeExecutor, boundary_for, envelope, open_run, tool


class LosingStore(ForwardingStore):
    """A memory store whose creates land and then lose their reply while ``lose`` > 0.

    ``down`` > 0 fails creates before they reach the store instead (nothing written).
    ``tick`` ms pass on the clock at every create, so that a later attempt reads a
    later time than the first.
    """

    def __init__(self, clock: FakeClock, tick: int = 0) -> None:
        super().__init__(MemoryStore(clock))
        self.clock = clock
        self.tick = tick
        self.lose = 0
        self.down = 0
        self.creates: list[AdmissionRequest] = []

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        self.clock.advance(self.tick)
        self.creates.append(request)
        if self.down > 0:
            self.down -= 1
            raise StoreUnavailableError("ConnectionError")
        answer = super().create(request, limits)
        if self.lose > 0:
            self.lose -= 1
            raise StoreUnavailableError("ConnectionError")  # applied; the reply is lost
        return answer


def _status(store: LosingStore, tool_call_id: str) -> InvocationStatus | None:
    record = store.get(RUN, tool_call_id)
    return None if record is None else record.status


def test_a_create_whose_reply_is_lost_is_held_and_the_resent_call_runs_once(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-ID-5: the create landed, its reply was lost: STORE_UNAVAILABLE, the tool did
    not run, the create is held (its record PROJECTING); the harness's re-send replays the same
    token, is recognised as the call's own create and runs the tool exactly once; only then is a
    further re-send a duplicate."""
    store = LosingStore(clock, tick=7)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.lose = 1
    first = boundary.invoke(context, envelope("call_1"))
    assert first.code is ErrorCode.STORE_UNAVAILABLE
    assert executor.calls == []
    assert boundary.pending_creates() == ((RUN, "call_1"),)
    assert boundary.pending_creates("other-run") == ()
    assert boundary.pending_completions() == ()
    assert _status(store, "call_1") is InvocationStatus.PROJECTING

    again = boundary.invoke(context, envelope("call_1"))
    assert again.ok, again
    assert len(executor.calls) == 1
    assert store.creates[1].invocation_token == store.creates[0].invocation_token  # the same token
    assert boundary.pending_creates() == ()
    assert _status(store, "call_1") is InvocationStatus.READY
    run = store.get_run(RUN)
    assert run is not None
    assert run.tool_calls_used == 1  # the replay charged nothing

    duplicate = boundary.invoke(context, envelope("call_1"))
    assert duplicate.code is ErrorCode.DUPLICATE_TOOL_CALL  # now the tool ran: a true duplicate
    assert len(executor.calls) == 1


def test_a_create_that_never_landed_is_made_by_the_resend(clock: FakeClock) -> None:
    """CIS-BND-7: the create failed before reaching the store (nothing written): held all the same (the
    boundary cannot tell); the re-send makes it, with the held token, and the tool runs once."""
    store = LosingStore(clock, tick=3)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.down = 1
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    assert _status(store, "call_1") is None
    assert boundary.pending_creates() == ((RUN, "call_1"),)
    assert boundary.invoke(context, envelope("call_1")).ok
    assert len(executor.calls) == 1
    assert store.creates[0].invocation_token == store.creates[1].invocation_token


def test_a_create_lost_twice_keeps_its_first_clock_reading(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-RETRY-2: the re-send's reply is lost too: the create is held again with the
    reading taken before its *first* send (the record was created then), so the third send is still
    recognised as the call's own create (kernel ``is_own_create``) and the tool runs once."""
    store = LosingStore(clock, tick=50)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.lose = 2
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    (first,) = (boundary.creates.take(RUN, "call_1", "search", '{"q":"disk"}'),)
    assert first is not None
    boundary.creates.hold(first)  # looked at, put back
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    held = boundary.creates.take(RUN, "call_1", "search", '{"q":"disk"}')
    assert held is not None
    assert held == first  # same token, same reading: nothing re-drawn
    boundary.creates.hold(held)
    assert boundary.invoke(context, envelope("call_1")).ok
    assert len(executor.calls) == 1


def test_another_call_under_the_id_is_not_a_resend(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-ID-5: other arguments under a held id are another call: it gets the stored
    record's fate (CALL_IN_PROGRESS) and the held create stays; the true re-send then runs once."""
    store = LosingStore(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.lose = 1
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    other = boundary.invoke(context, envelope("call_1", arguments='{"q":"cpu"}'))
    assert other.code is ErrorCode.CALL_IN_PROGRESS
    assert boundary.pending_creates() == ((RUN, "call_1"),)
    assert boundary.invoke(context, envelope("call_1")).ok
    assert [call["q"] for call in executor.calls] == ["disk"]


def test_concurrent_resends_replay_the_token_once(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-BND-6: two re-sends at once: one takes the held create and runs the tool; the
    other finds nothing held and gets the stored record's fate, CALL_IN_PROGRESS: never a second run."""
    store = LosingStore(clock)
    executor = FakeExecutor(block=True)
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.lose = 1
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(boundary.invoke(context, envelope("call_1"))))
    first.start()
    for _ in range(500):
        if executor.calls:
            break
        threading.Event().wait(0.01)
    assert len(executor.calls) == 1  # the first re-send is running the tool
    second = boundary.invoke(context, envelope("call_1"))
    assert second.code is ErrorCode.CALL_IN_PROGRESS
    executor.release.set()
    first.join(10)
    assert results[0].ok
    assert len(executor.calls) == 1


class _BlockingLosingStore(LosingStore):
    """A LosingStore whose next create waits for ``go`` once ``hold_next`` is set."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.hold_next = False
        self.entered = threading.Event()
        self.go = threading.Event()

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        if self.hold_next:
            self.hold_next = False
            self.entered.set()
            self.go.wait(10)
        return super().create(request, limits)


def test_a_resend_while_the_held_create_is_in_flight_draws_no_new_token(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-ID-5: a re-send arrives while another re-send is still sending the held create
    (its answer not back): STORE_UNAVAILABLE, no fresh token, nothing sent. The in-flight one
    loses its reply again and is held again with its token, so the next re-send runs the tool
    once (a fresh token would have been refused CALL_IN_PROGRESS for the call's own record)."""
    store = _BlockingLosingStore(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.lose = 1
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    token = store.creates[-1].invocation_token
    store.hold_next, store.lose = True, 1
    results: list[Any] = []
    flying = threading.Thread(target=lambda: results.append(boundary.invoke(context, envelope("call_1"))))
    flying.start()
    assert store.entered.wait(10)
    sent = len(store.creates)
    meanwhile = boundary.invoke(context, envelope("call_1"))
    assert meanwhile.code is ErrorCode.STORE_UNAVAILABLE
    assert len(store.creates) == sent  # nothing sent: the held create is in flight
    store.go.set()
    flying.join(10)
    assert results[0].code is ErrorCode.STORE_UNAVAILABLE  # its reply was lost again
    assert boundary.pending_creates() == ((RUN, "call_1"),)
    again = boundary.invoke(context, envelope("call_1"))
    assert again.ok, again
    assert {request.invocation_token for request in store.creates} == {token}
    assert len(executor.calls) == 1
    assert boundary.pending_creates() == ()


def test_a_call_sent_twice_at_once_sends_one_create(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-ID-5: the harness sends one call twice at once from one boundary: the second
    is CALL_IN_PROGRESS without a token of its own or a send, so when the first loses its reply the
    held create is the only token of the call and the next re-send runs the tool once (two fresh
    tokens in flight could leave the wrong one held: the re-send then refused, the tool never run)."""
    store = _BlockingLosingStore(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.hold_next, store.lose = True, 1
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(boundary.invoke(context, envelope("call_1"))))
    first.start()
    assert store.entered.wait(10)
    meanwhile = boundary.invoke(context, envelope("call_1"))
    assert meanwhile.code is ErrorCode.CALL_IN_PROGRESS
    store.go.set()
    first.join(10)
    assert results[0].code is ErrorCode.STORE_UNAVAILABLE  # landed, reply lost: held
    assert len(store.creates) == 1  # the second sent nothing
    token = store.creates[0].invocation_token
    again = boundary.invoke(context, envelope("call_1"))
    assert again.ok, again
    assert store.creates[-1].invocation_token == token
    assert len(executor.calls) == 1


class _RefusedBeforeSending(LosingStore):
    """A LosingStore whose creates raise ``UnsafeServerError`` before reaching the store while
    ``refuse`` > 0 (a server check that failed: permanent until the operator acts)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.refuse = 0

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        if self.refuse > 0:
            self.refuse -= 1
            raise UnsafeServerError("maxmemory-policy allkeys-lru: set it to noeviction")
        return super().create(request, limits)


def test_a_held_create_stays_held_when_a_resend_is_refused_before_sending(clock: FakeClock) -> None:
    """CIS-BND-7: a re-send of a held create that the store refuses before sending it (a permanent
    fault: the server's eviction policy) learns nothing of the first attempt's fate, so the create
    stays held with its token; once the operator fixed the server, the next re-send runs the tool
    once, never CALL_IN_PROGRESS against its own record."""
    store = _RefusedBeforeSending(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.lose = 1
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    token = store.creates[-1].invocation_token
    store.refuse = 1
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    assert boundary.pending_creates() == ((RUN, "call_1"),)
    again = boundary.invoke(context, envelope("call_1"))
    assert again.ok, again
    assert store.creates[-1].invocation_token == token
    assert len(executor.calls) == 1


class _NotDurableOnce(LosingStore):
    """Writes the first create but answers DURABILITY_NOT_REACHED, leaving the record PROJECTING:
    what a failover shows when the create reached the promoted replica but not in time."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.undurable = 1

    def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        answer = super().create(request, limits)
        if self.undurable > 0 and isinstance(answer, Admission):
            self.undurable -= 1
            return ErrorCode.DURABILITY_NOT_REACHED
        return answer


def test_a_create_not_acknowledged_durable_is_held_and_runs_once_if_its_record_survived(
    clock: FakeClock,
) -> None:
    """CIS-BND-7, CIS-DUR-2: DURABILITY_NOT_REACHED, the tool did not run, but the record survived
    (PROJECTING, a failover kept it): the create is held, and the re-send replays its token and
    runs the tool once, instead of being refused CALL_IN_PROGRESS for its own record."""
    store = _NotDurableOnce(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    first = boundary.invoke(context, envelope("call_1"))
    assert first.code is ErrorCode.DURABILITY_NOT_REACHED
    assert executor.calls == []
    assert boundary.pending_creates() == ((RUN, "call_1"),)
    again = boundary.invoke(context, envelope("call_1"))
    assert again.ok, again
    assert len(executor.calls) == 1
    assert len({request.invocation_token for request in store.creates}) == 1
    assert boundary.pending_creates() == ()


def test_held_creates_are_bounded_and_a_dropped_one_gets_its_fate(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-ID-5, CIS-LIFE-7: at most ``max_pending`` creates are held (oldest dropped first);
    a call whose create is no longer held (dropped by the bound or by ``drop_pending``) is answered by
    its record's fate: CALL_IN_PROGRESS while PROJECTING, STALE_PROJECTION once swept; never
    DUPLICATE_TOOL_CALL, and its tool never runs."""
    store = LosingStore(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor), completion_retry=CompletionRetry(max_pending=2))
    context = open_run(boundary)
    store.lose = 3
    for tool_call_id in ("call_1", "call_2", "call_3"):
        assert boundary.invoke(context, envelope(tool_call_id)).code is ErrorCode.STORE_UNAVAILABLE
    assert boundary.pending_creates() == ((RUN, "call_2"), (RUN, "call_3"))
    assert boundary.drop_pending(context, "call_3") is True
    assert boundary.drop_pending(context, "call_3") is False
    assert boundary.pending_creates() == ((RUN, "call_2"),)
    for tool_call_id in ("call_1", "call_3"):
        assert boundary.invoke(context, envelope(tool_call_id)).code is ErrorCode.CALL_IN_PROGRESS
    clock.advance(10_000)
    assert boundary.sweep_stale(context, older_than_ms=5_000) == 3
    for tool_call_id in ("call_1", "call_3"):
        assert boundary.invoke(context, envelope(tool_call_id)).code is ErrorCode.STALE_PROJECTION
    # call_2 was still held: its re-send replays the token and finds its record swept
    assert boundary.invoke(context, envelope("call_2")).code is ErrorCode.STALE_PROJECTION
    assert executor.calls == []
    assert boundary.pending_creates() == ()


def test_a_holder_that_died_leaves_the_call_its_fate(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-ID-5: across processes (a second boundary over the same store stands for the
    harness restarted after the holder died) the re-sent call is CALL_IN_PROGRESS while its record is
    PROJECTING, then STALE_PROJECTION once swept; its tool never runs, and no answer is
    DUPLICATE_TOOL_CALL."""
    store = LosingStore(clock)
    executor = FakeExecutor()
    holder = boundary_for(store, tool(executor))
    context = open_run(holder)
    store.lose = 1
    assert holder.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    successor = boundary_for(store, tool(executor))
    assert successor.invoke(context, envelope("call_1")).code is ErrorCode.CALL_IN_PROGRESS
    clock.advance(60_000)
    assert successor.sweep_stale(context, older_than_ms=30_000) == 1
    assert successor.invoke(context, envelope("call_1")).code is ErrorCode.STALE_PROJECTION
    assert executor.calls == []


def test_a_permanent_failure_or_a_repeated_token_is_not_held(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-RETRY-1: a permanent store fault (the same answer until repaired) is no unknown
    outcome: nothing is held. A token the factory repeated is not held either (fail closed: a replay
    under it could be another call's)."""

    class Corrupt(LosingStore):
        def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
            raise CorruptRecordError(RUN, {request.tool_call_id: "NoTTL"})

    corrupt = Corrupt(clock)
    boundary = boundary_for(corrupt, tool(FakeExecutor()))
    context = open_run(boundary)
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    assert boundary.pending_creates() == ()

    store = LosingStore(clock)
    repeating = boundary_for(store, tool(FakeExecutor()), token_factory=lambda: "same-token")
    context = open_run(repeating)
    store.lose = 2
    assert repeating.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    assert repeating.invoke(context, envelope("call_2")).code is ErrorCode.STORE_UNAVAILABLE
    assert repeating.pending_creates() == ((RUN, "call_1"),)  # call_2 drew a used token


class LosingAsyncStore:
    """The async face of a LosingStore (the same memory store and switches)."""

    def __init__(self, inner: LosingStore) -> None:
        self.inner = inner
        self.wrapped = AsyncMemoryStore(inner.inner)  # type: ignore[arg-type]
        self.hang = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        if self.hang:  # the create is in flight when the caller is cancelled
            self.inner.inner.create(request, limits)
            await asyncio.sleep(30)
        return self.inner.create(request, limits)


def test_the_async_boundary_holds_no_permanent_failure_and_no_repeated_token(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-RETRY-1: the same rule on AsyncToolBoundary (its own pipeline module): a
    permanent store fault holds nothing, and a token the factory repeated is not held (fail
    closed), while the first call's lost create under a fresh token is."""

    class Corrupt(LosingStore):
        def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
            raise CorruptRecordError(RUN, {request.tool_call_id: "NoTTL"})

    async def scenario(store: LosingStore, **options: Any) -> AsyncToolBoundary:
        boundary = AsyncToolBoundary(LosingAsyncStore(store), ToolRegistry([tool(FakeExecutor())]), **options)
        context = await boundary.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
        )
        assert not isinstance(context, ErrorCode)
        store.lose = 2
        assert (await boundary.invoke(context, envelope("call_1"))).code is ErrorCode.STORE_UNAVAILABLE
        assert (await boundary.invoke(context, envelope("call_2"))).code is ErrorCode.STORE_UNAVAILABLE
        return boundary

    corrupted = asyncio.run(scenario(Corrupt(clock)))
    assert corrupted.pending_creates() == ()
    repeating = asyncio.run(scenario(LosingStore(clock), token_factory=lambda: "same-token"))
    assert repeating.pending_creates() == ((RUN, "call_1"),)  # call_2 drew a used token


def test_the_async_boundary_holds_creates_too(clock: FakeClock) -> None:
    """CIS-BND-7: the same on AsyncToolBoundary: a lost reply is held and the re-send runs the tool
    once; a create in flight when the awaiting task is cancelled is held as well (its outcome is
    unknown), and the re-send after the cancellation runs the tool once."""
    sync = LosingStore(clock)
    store = LosingAsyncStore(sync)
    executor = FakeExecutor()
    boundary = AsyncToolBoundary(store, ToolRegistry([tool(executor)]))  # type: ignore[arg-type]

    async def scenario() -> None:
        context = await boundary.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=5, byte_budget=10**6
        )
        assert not isinstance(context, ErrorCode)
        sync.lose = 1
        assert (await boundary.invoke(context, envelope("call_1"))).code is ErrorCode.STORE_UNAVAILABLE
        assert boundary.pending_creates() == ((RUN, "call_1"),)
        assert (await boundary.invoke(context, envelope("call_1"))).ok
        assert len(executor.calls) == 1

        store.hang = True
        task = asyncio.ensure_future(boundary.invoke(context, envelope("call_2")))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert boundary.pending_creates() == ((RUN, "call_2"),)
        store.hang = False
        assert (await boundary.invoke(context, envelope("call_2"))).ok
        assert len(executor.calls) == 2
        assert boundary.pending_creates() == ()

    asyncio.run(scenario())


class _RacingStore:
    """An async store face over a memory store: task "B" reads the clock slowly (a TIME round trip
    on a fresh Redis store), task "A"'s create never lands, the others land and lose their reply,
    until ``healed``."""

    def __init__(self, clock: FakeClock) -> None:
        self.inner = AsyncMemoryStore(clock=clock)
        self.healed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def synced_now_ms(self) -> int:
        task = asyncio.current_task()
        if task is not None and task.get_name() == "B":
            await asyncio.sleep(0.02)
        return int(await self.inner.synced_now_ms())

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        if self.healed:
            return await self.inner.create(request, limits)
        task = asyncio.current_task()
        if task is not None and task.get_name() == "A":
            raise StoreUnavailableError("ConnectionError")  # never applied
        await self.inner.create(request, limits)
        raise StoreUnavailableError("ConnectionError")  # applied, the reply lost


def test_a_send_that_read_the_clock_while_another_held_its_create_adopts_it(clock: FakeClock) -> None:
    """CIS-BND-7: of two sends of one call at once, B finds nothing held and reads the clock; A's
    create meanwhile fails before landing and is held. B then sends A's held create (its token),
    never a second token of the call: a second token's record (B's, landed, reply lost) would be
    refused forever against the boundary's one held token, the tool never run. The re-send after
    the store heals runs the tool exactly once."""
    executor = FakeExecutor()

    async def main() -> tuple[list[ErrorCode | None], list[ErrorCode | None], int, InvocationStatus | None]:
        store = _RacingStore(clock)
        boundary = AsyncToolBoundary(store, ToolRegistry([tool(executor)]))  # type: ignore[arg-type]
        context = await boundary.open_run(
            RUN, deadline_ms=clock() + 60_000, ttl_ms=60_000, tool_call_budget=10, byte_budget=10**6
        )
        assert not isinstance(context, ErrorCode)
        second = asyncio.create_task(boundary.invoke(context, envelope("call_1")), name="B")
        first = asyncio.create_task(boundary.invoke(context, envelope("call_1")), name="A")
        racing = [(await first).code, (await second).code]
        store.healed = True
        resent = [(await boundary.invoke(context, envelope("call_1"))).code for _ in range(2)]
        record = await store.inner.get(RUN, "call_1")
        return racing, resent, len(boundary.pending_creates()), None if record is None else record.status

    racing, resent, pending, status = asyncio.run(main())
    assert racing == [ErrorCode.STORE_UNAVAILABLE, ErrorCode.STORE_UNAVAILABLE]
    assert resent == [None, ErrorCode.DUPLICATE_TOOL_CALL]
    assert len(executor.calls) == 1
    assert pending == 0
    assert status is InvocationStatus.READY


def test_threads_sending_one_call_at_once_never_strand_it(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-BND-6: the sync boundary from two threads sending each call at once; thread
    A's creates never land, B's land and lose their reply. Whichever order they interleave in, the
    boundary's held token is the record's, so the re-send after the store heals runs each tool
    exactly once (none refused forever, none run twice)."""
    executor = FakeExecutor()
    healed: set[str] = set()

    class _Split(ForwardingStore):
        def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
            if request.tool_call_id in healed:
                return super().create(request, limits)
            if threading.current_thread().name == "A":
                raise StoreUnavailableError("ConnectionError")  # never applied
            super().create(request, limits)
            raise StoreUnavailableError("ConnectionError")  # applied, the reply lost

    boundary = boundary_for(_Split(MemoryStore(clock)), tool(executor))
    context = open_run(boundary, tool_call_budget=10_000)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: the interleavings a loaded host makes
    try:
        codes = []
        for index in range(1_000):
            tool_call_id = f"call_{index}"
            start = threading.Barrier(2)

            def send(call: str = tool_call_id, barrier: threading.Barrier = start) -> None:
                barrier.wait()
                boundary.invoke(context, envelope(call))

            threads = [threading.Thread(target=send, name=name) for name in "AB"]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            healed.add(tool_call_id)
            codes.append(boundary.invoke(context, envelope(tool_call_id)).code)
    finally:
        sys.setswitchinterval(interval)
    assert codes == [None] * len(codes)
    assert len(executor.calls) == len(codes)
    assert boundary.pending_creates() == ()


def test_another_call_under_the_id_never_displaces_the_held_create(clock: FakeClock) -> None:
    """CIS-BND-7, CIS-ID-5: call X's create is in flight when Y (same id, other arguments) is sent
    and fails before landing; X's create lands and loses its reply. X's create is the one held,
    not Y's: X's re-send runs X's tool exactly once (Y's fate never takes X's place)."""
    executor = FakeExecutor()
    store = LosingStore(clock)
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    other = envelope("call_1", arguments='{"q":"other"}')
    inside: list[Any] = []

    class _YDuringX(ForwardingStore):
        def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
            if request.request_json == other.arguments:
                raise StoreUnavailableError("ConnectionError")  # Y never lands
            if not inside:
                inside.append(boundary.invoke(context, other))  # Y, while X is in flight
            answer = store.create(request, limits)
            if len(inside) == 1:
                raise StoreUnavailableError("ConnectionError")  # X landed; its reply is lost
            return answer

    boundary.store = _YDuringX(store)  # type: ignore[misc]
    first = boundary.invoke(context, envelope("call_1"))
    assert first.code is ErrorCode.STORE_UNAVAILABLE
    assert inside[0].code is ErrorCode.STORE_UNAVAILABLE
    inside.append("healed")
    resent = boundary.invoke(context, envelope("call_1"))
    assert resent.code is None
    assert len(executor.calls) == 1
    assert boundary.pending_creates() == ()


def test_a_create_dropped_while_in_flight_stays_dropped(clock: FakeClock) -> None:
    """CIS-BND-7: ``drop_pending`` of a call whose create is in flight forgets it for good: when
    that send ends without an answer the create is not held again (not listed, not replayed)."""
    store = LosingStore(clock)
    boundary = boundary_for(store, tool(FakeExecutor()))
    context = open_run(boundary)
    dropped: list[bool] = []

    class _DropDuringSend(ForwardingStore):
        def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
            dropped.append(boundary.drop_pending(context, "call_1"))
            raise StoreUnavailableError("ConnectionError")

    boundary.store = _DropDuringSend(store)  # type: ignore[misc]
    assert boundary.invoke(context, envelope("call_1")).code is ErrorCode.STORE_UNAVAILABLE
    assert dropped == [True]
    assert boundary.pending_creates() == ()


def test_a_held_create_outlives_the_token_window(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-BND-7, CIS-RETRY-2: a create held while more tokens than the repeat-detection window
    holds were drawn is still the call's own when re-sent: the tool runs exactly once (the window
    is 65,536 draws; made 4 here so the test draws a few)."""
    from invocation_store.boundary import _core  # noqa: PLC0415 - the window is the module's constant

    monkeypatch.setattr(_core, "_TOKEN_WINDOW", 4)
    store = LosingStore(clock)
    executor = FakeExecutor()
    boundary = boundary_for(store, tool(executor))
    context = open_run(boundary)
    store.lose = 1
    assert boundary.invoke(context, envelope("call_held")).code is ErrorCode.STORE_UNAVAILABLE
    for index in range(10):
        assert boundary.invoke(context, envelope(f"call_{index}")).code is None
    assert boundary.invoke(context, envelope("call_held")).code is None
    assert len(executor.calls) == 11


def test_the_token_window_keeps_exactly_the_last_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-BND-7, CIS-RETRY-1: the window of drawn tokens holds exactly the last N draws (4 here),
    evicting the oldest: a token drawn again inside it is not a first use (fail closed), one that
    left it is; the newest draw is never the one evicted."""
    from invocation_store.boundary import _core  # noqa: PLC0415 - the window is the module's constant

    monkeypatch.setattr(_core, "_TOKEN_WINDOW", 4)
    core = ToolBoundary(MemoryStore(), ToolRegistry())
    assert [core.claim(token) for token in ("t1", "t2", "t3", "t4")] == [True] * 4
    assert core.claim("t1") is False  # four draws held: t1 is still in the window
    assert core.sole_use("t1") is False
    assert core.claim("t5") is True  # the fifth distinct token evicts the oldest, t2
    assert core.claim("t5") is False  # the newest stays: drawn twice, never a first use again
    assert core.sole_use("t5") is False
    assert core.claim("t2") is True  # it left the window: counted afresh (and evicts t3)
    assert core.sole_use("t1") is False  # drawn twice, still held
    assert core.sole_use("t3") is True  # evicted: counts as drawn once
