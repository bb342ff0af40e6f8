"""The store contract suite, shipped for any store: ``class TestMyStore(StoreContract)`` (CIS-STORE-8).

Theory of operation
-------------------
:class:`StoreContract` is a pytest test class. Subclass it in a test module and give it
one fixture, ``make_store``: ``make_store(clock) -> store``, a fresh, empty store (sync
or async) on a :class:`~invocation_store.testing.FakeClock` whose reading is the
store's clock (integer ms). Every test then runs against your store::

    import pytest
    from invocation_store.testing.contract import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def make_store(self):
            return lambda clock: MyStore(clock=clock)

Each test is written once against :class:`StoreDriver`, which puts a sync or async
store behind one synchronous face, and compares the store's answer with what the
kernel decides for the same state: admission and its check order, budgets and their
edges, the compare-and-set of completions and their charges, lapse at the clock's
edge, reads (raw omission, progress views, unsafe ids), concurrent creates (threads
for a sync store, tasks for an async one). Stores are closed after each test (an
async store in its own loop). Run the stateful machine beside it
(:func:`~invocation_store.testing.make_invocation_machine`) with the same factory.

Needs pytest (the ``testing`` extra). The helpers below (:func:`request`,
:func:`admitted`, :func:`ready`, ...) build kernel records for your own tests too.

Size: one contract, one class: its tests are read (and subclassed) together, each a
short kernel-checked scenario; the driver and builders above them are what the tests
call, kept beside them so that a failing test reads in one file.
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pytest
from attrs import evolve

from ..adapters import AsyncInvocationStore, InvocationStore
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    ObservedFact,
    ProgressView,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunState,
    RunStatus,
    SweptStale,
    admit,
    project_progress,
    record_bytes,
    transition,
    utf8_len,
    without_raw,
)
from ._clock import FakeClock

__all__ = [
    "DEADLINE_IN_MS",
    "LIMITS",
    "RUN",
    "TTL_MS",
    "MakeDriver",
    "StoreContract",
    "StoreDriver",
    "admitted",
    "failed",
    "moved",
    "open_default_run",
    "ready",
    "request",
    "token",
    "with_raw",
]

LIMITS = Limits()
_T = TypeVar("_T")
#: The run id the contract's tests use.
RUN = "run-1"
#: Deadline of the default run, ms after its opening.
DEADLINE_IN_MS = 60_000
#: Record TTL of the default run, ms.
TTL_MS = 30_000


def _size(text: str) -> int:
    """UTF-8 bytes of ``text`` (which has a UTF-8 form)."""
    size = utf8_len(text)
    assert size is not None
    return size


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
        redis_client: Any = None,
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


class StoreContract:
    """The contract every store keeps, as pytest tests (CIS-STORE-1, CIS-STORE-8); see the module docstring.

    Subclasses provide ``make_store`` (``make_store(clock) -> store``), or override
    ``make_driver`` to build :class:`StoreDriver` values themselves (e.g. to
    parametrize over several flavours).
    """

    @pytest.fixture
    def clock(self) -> FakeClock:
        """The store's clock: a fake one at a fixed start, moved by the tests."""
        return FakeClock()

    @pytest.fixture
    def make_store(self) -> Callable[[FakeClock], InvocationStore | AsyncInvocationStore]:
        """``make_store(clock) -> store``: a fresh, empty store. Subclasses must provide it."""
        raise NotImplementedError("a StoreContract subclass provides the make_store fixture")

    @pytest.fixture
    def make_driver(
        self, make_store: Callable[[FakeClock], InvocationStore | AsyncInvocationStore]
    ) -> Iterator[MakeDriver]:
        """``make_driver(clock)`` -> a :class:`StoreDriver` over ``make_store(clock)``, closed after the
        test.
        """
        drivers: list[StoreDriver] = []

        def build(clock: FakeClock) -> StoreDriver:
            driver = StoreDriver(make_store(clock), type(self).__name__)
            drivers.append(driver)
            return driver

        yield build
        for driver in drivers:
            driver.close()

    def test_open_run_builds_the_kernel_run(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RUN-1: a run is opened with deadline, budgets and TTL; it lapses at deadline + ttl."""
        store = make_driver(clock)
        run = open_default_run(store, clock(), tool_call_budget=3, byte_budget=500)
        assert run == RunState(
            run_id=RUN,
            status=RunStatus.ACTIVE,
            opened_at_ms=clock(),
            deadline_ms=clock() + 60_000,
            ttl_ms=TTL_MS,
            expires_at_ms=clock() + 60_000 + TTL_MS,
            tool_call_budget=3,
            byte_budget=500,
        )
        assert store.get_run(RUN) == run

    def test_reopening_a_live_run(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RETRY-3: an identical reopen returns the live run unchanged; other parameters are refused."""
        store = make_driver(clock)
        run = open_default_run(store, clock(), tool_call_budget=2)
        admitted(store, request())
        used = store.get_run(RUN)
        assert used is not None
        assert used.tool_calls_used == 1
        again = store.open_run(
            RUN, deadline_ms=run.deadline_ms, ttl_ms=TTL_MS, tool_call_budget=2, byte_budget=run.byte_budget
        )
        assert again == used  # counters kept: nothing was reset
        other = store.open_run(
            RUN, deadline_ms=run.deadline_ms, ttl_ms=TTL_MS, tool_call_budget=3, byte_budget=run.byte_budget
        )
        assert other is ErrorCode.INVALID_TRANSITION
        assert store.get_run(RUN) == used

    def test_open_run_rejects_unsafe_ids_and_bad_numbers(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-RUN-1, CIS-ID-1: an unsafe run id is RUN_MISMATCH; negative budgets raise ValueError."""
        store = make_driver(clock)
        for bad in ("", "run 1", "run{1}", "r" * 129, "rün"):
            assert (
                store.open_run(bad, deadline_ms=clock() + 1, ttl_ms=1, tool_call_budget=1, byte_budget=1)
                is ErrorCode.RUN_MISMATCH
            )
        with pytest.raises(ValueError):
            store.open_run(RUN, deadline_ms=clock() + 1, ttl_ms=1, tool_call_budget=-1, byte_budget=1)
        with pytest.raises(ValueError):
            store.open_run(RUN, deadline_ms=clock() + 1, ttl_ms=0, tool_call_budget=1, byte_budget=1)
        assert store.get_run(RUN) is None

    def test_cancel_and_close(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RUN-2, CIS-RETRY-3: ACTIVE -> CANCELLED / CLOSED; a retry repeats; the rest fail."""
        store = make_driver(clock)
        run = open_default_run(store, clock())
        assert store.cancel_run(RUN) == evolve(run, status=RunStatus.CANCELLED)
        assert store.get_run(RUN) == evolve(run, status=RunStatus.CANCELLED)
        assert store.cancel_run(RUN) == evolve(run, status=RunStatus.CANCELLED)  # a retry
        assert store.close_run(RUN) is ErrorCode.INVALID_TRANSITION
        other = open_default_run(store, clock(), run_id="run-2")
        assert store.close_run("run-2") == evolve(other, status=RunStatus.CLOSED)
        assert store.cancel_run("run-2") is ErrorCode.INVALID_TRANSITION
        assert store.cancel_run("unknown") is ErrorCode.RUN_INACTIVE
        assert store.close_run("not safe") is ErrorCode.RUN_INACTIVE

    def test_a_lapsed_run_is_gone_and_can_be_opened_afresh(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-RUN-3, CIS-TTL-4: at deadline + ttl the run reads as absent, its lists empty, and reopens
        fresh.
        """
        store = make_driver(clock)
        run = open_default_run(store, clock())
        record = admitted(store, request())
        assert store.complete(record, ready(record, clock())) == ready(record, clock())
        clock.now = run.expires_at_ms
        assert store.get_run(RUN) is None
        assert store.calls(RUN) == ()
        assert store.completed(RUN) == ()
        assert store.cancel_run(RUN) is ErrorCode.RUN_INACTIVE
        fresh = open_default_run(store, clock())
        assert fresh.opened_at_ms == clock()
        assert fresh.tool_calls_used == 0
        assert store.calls(RUN) == ()
        assert store.completed(RUN) == ()

    def test_create_is_the_kernel_admission(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-REC-4, CIS-STORE-2, CIS-STORE-8: create returns exactly kernel admit() and stores its
        record.
        """
        store = make_driver(clock)
        run = open_default_run(store, clock())
        req = request("call_abc", arguments='{"city": "Paris", "unit": "C"}')
        expected = admit(run, None, req, LIMITS, clock())
        assert isinstance(expected, Admission)
        assert store.create(req, LIMITS) == expected
        record = expected.record
        assert record.status is InvocationStatus.PROJECTING
        assert (record.evidence_status, record.error_code, record.agent_result, record.raw_response) == (
            None,
            None,
            None,
            None,
        )
        assert record.request_json == '{"city": "Paris", "unit": "C"}'
        assert store.get(RUN, "call_abc") == record
        assert store.get_run(RUN) == expected.run
        assert store.calls(RUN) == ("call_abc",)
        assert store.completed(RUN) == ()

    @pytest.mark.parametrize(
        "tool_call_id",
        [
            "call_DhJ0AuBn7Cq3sWZq1lI8pOa2",
            "toolu_01A09q90qw90lq917835lq9",
            "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
            "D681PevKs",
            "chatcmpl-tool-8a1b2c3d4e5f",
            "functions.get_weather:0",
            "3f2b7c1e-9a4d-4e8b-b6a1-2c5d7e9f0a1b",
            "x" * 128,
        ],
    )
    def test_framework_ids_are_kept_exactly(
        self, make_driver: MakeDriver, clock: FakeClock, tool_call_id: str
    ) -> None:
        """CIS-ID-4, CIS-ID-1, CIS-KEY-3: real framework ids are stored, listed and read back byte for
        byte.
        """
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request(tool_call_id))
        assert record.tool_call_id == tool_call_id
        assert store.get(RUN, tool_call_id) == record
        assert store.calls(RUN) == (tool_call_id,)
        done = ready(record, clock())
        assert store.complete(record, done) == done
        assert store.completed(RUN) == (tool_call_id,)

    def test_retried_create_is_recognised_as_itself(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RETRY-2, CIS-ID-5: the same token replays (nothing written); another token is refused with
        the first call's fate: CALL_IN_PROGRESS while PROJECTING, DUPLICATE_TOOL_CALL once its tool ran."""
        store = make_driver(clock)
        open_default_run(store, clock())
        req = request()
        first = store.create(req, LIMITS)
        assert isinstance(first, Admission)
        run_after = store.get_run(RUN)
        clock.advance(5)
        again = store.create(req, LIMITS)
        assert again == Admission(run=first.run, record=first.record, replayed=True)
        assert store.get_run(RUN) == run_after
        assert store.calls(RUN) == ("call_1",)
        assert store.create(request(), LIMITS) is ErrorCode.CALL_IN_PROGRESS
        assert store.create(evolve(req, invocation_token=""), LIMITS) is ErrorCode.CALL_IN_PROGRESS
        assert store.get(RUN, "call_1") == first.record
        done = ready(first.record, clock())
        assert store.complete(first.record, done) == done
        assert store.create(request(), LIMITS) is ErrorCode.DUPLICATE_TOOL_CALL
        # A swept record answers with its fate: the call was abandoned.
        other = admitted(store, request("call_2"))
        clock.advance(10)
        swept = transition(other, SweptStale(now_ms=clock(), older_than_ms=1), LIMITS)
        assert isinstance(swept, CanonicalRecord)
        assert store.complete(other, swept) == swept
        assert store.create(request("call_2"), LIMITS) is ErrorCode.STALE_PROJECTION
        assert store.get(RUN, "call_2") == swept

    def test_duplicates_never_overwrite_nor_spend(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-ID-5, CIS-PRE-8: a duplicate leaves the first record and the run's budgets exactly as they
        were.
        """
        store = make_driver(clock)
        open_default_run(store, clock(), tool_call_budget=1, byte_budget=100)
        record = admitted(store, request(arguments='{"a": 1}'))
        done = ready(record, clock() + 1)
        clock.advance(1)
        assert store.complete(record, done) == done
        run = store.get_run(RUN)
        clock.advance(1)
        # The budget is spent, yet the duplicate is reported as a duplicate: it comes first.
        dup = request(arguments='{"a": "a different and longer request"}', tool_name="other")
        assert store.create(dup, LIMITS) is ErrorCode.DUPLICATE_TOOL_CALL
        assert store.get(RUN, "call_1") == done
        assert store.get_run(RUN) == run
        assert store.calls(RUN) == ("call_1",)

    def test_admission_checks_come_in_the_kernel_order(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-PRE-8, CIS-PRE-2, CIS-RUN-3, CIS-RUN-4, CIS-RUN-5, CIS-RUN-6: the kernel's check order."""
        store = make_driver(clock)
        now = clock()
        assert store.create(request(run_id="nope"), LIMITS) is ErrorCode.RUN_INACTIVE
        assert store.create(request(run_id="not safe"), LIMITS) is ErrorCode.RUN_INACTIVE
        open_default_run(store, now, tool_call_budget=2, byte_budget=30, deadline_in_ms=1_000)
        admitted(store, request("a", arguments='{"n": 1}'))  # 8 bytes
        # Byte budget: 8 used, 23 more would pass 30.
        assert store.create(request("b", arguments='{"n": "' + "x" * 15 + '"}'), LIMITS) is (
            ErrorCode.RUN_BYTES_EXHAUSTED
        )
        # A request without a UTF-8 form is INVALID_ARGUMENTS, decided after the call budget.
        assert store.create(request("b", arguments='{"n": "\ud800"}'), LIMITS) is ErrorCode.INVALID_ARGUMENTS
        admitted(store, request("b", arguments='{"n": 2}'))
        assert store.create(request("c"), LIMITS) is ErrorCode.TOOL_BUDGET_EXHAUSTED
        assert store.create(request("a"), LIMITS) is ErrorCode.CALL_IN_PROGRESS
        clock.now = now + 1_000
        assert store.create(request("a"), LIMITS) is ErrorCode.RUN_DEADLINE_EXCEEDED
        assert store.create(request("c"), LIMITS) is ErrorCode.RUN_DEADLINE_EXCEEDED
        second = open_default_run(store, now, run_id="run-2")
        assert store.cancel_run("run-2") == evolve(second, status=RunStatus.CANCELLED)
        assert store.create(request(run_id="run-2"), LIMITS) is ErrorCode.RUN_INACTIVE
        third = open_default_run(store, now, run_id="run-3")
        assert store.close_run("run-3") == evolve(third, status=RunStatus.CLOSED)
        assert store.create(request(run_id="run-3"), LIMITS) is ErrorCode.RUN_INACTIVE
        assert store.calls(RUN) == ("a", "b")

    def test_begin_codes_come_last(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-ID-2, CIS-ID-3, CIS-ID-6, CIS-SIZE-5: bad ids, oversized records: nothing, after run checks."""
        store = make_driver(clock)
        now = clock()
        assert store.create(request("bad id"), LIMITS) is ErrorCode.RUN_INACTIVE  # the run comes first
        open_default_run(store, now, tool_call_budget=5)
        assert store.create(request("bad id"), LIMITS) is ErrorCode.UNSAFE_TOOL_CALL_ID
        assert store.create(request("call{1}"), LIMITS) is ErrorCode.UNSAFE_TOOL_CALL_ID
        assert store.create(request("   "), LIMITS) is ErrorCode.MISSING_TOOL_CALL_ID
        assert store.create(request(""), LIMITS) is ErrorCode.MISSING_TOOL_CALL_ID
        tight = Limits(record_bytes=40)
        assert store.create(request("call_2", arguments='{"q": "' + "y" * 40 + '"}'), tight) is (
            ErrorCode.REQUEST_TOO_LARGE
        )
        assert store.calls(RUN) == ()
        run = store.get_run(RUN)
        assert run is not None
        assert (run.tool_calls_used, run.bytes_used) == (0, 0)

    def test_sequence_counts_admissions(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-REC-1, CIS-RUN-6: each record's sequence is its admission position; bytes are counted in
        UTF-8.
        """
        store = make_driver(clock)
        open_default_run(store, clock())
        texts = ['{"a": 1}', '{"b": "é"}', '{"c": "日本"}']
        for index, text in enumerate(texts, start=1):
            record = admitted(store, request(f"c{index}", arguments=text))
            assert record.sequence == index
        run = store.get_run(RUN)
        assert run is not None
        assert run.bytes_used == sum(_size(text) or 0 for text in texts)
        assert store.calls(RUN) == ("c1", "c2", "c3")

    def test_complete_writes_replays_and_refuses(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-STORE-3, CIS-RETRY-2, CIS-LIFE-3, CIS-REC-5: CAS writes once, replays, refuses a change."""
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request())
        clock.advance(10)
        done = ready(record, clock())
        assert store.complete(record, done) == done
        assert store.get(RUN, "call_1") == done
        run = store.get_run(RUN)
        assert store.complete(record, done) == done  # replay: nothing written
        assert store.get_run(RUN) == run
        assert store.completed(RUN) == ("call_1",)
        error = failed(record, clock(), ErrorCode.EXECUTION_FAILED)
        assert store.complete(record, error) is ErrorCode.INVALID_TRANSITION
        later = ready(record, clock() + 1, content="other")
        assert store.complete(record, later) is ErrorCode.INVALID_TRANSITION
        assert store.get(RUN, "call_1") == done
        assert store.completed(RUN) == ("call_1",)

    def test_complete_of_another_invocation_or_absent_record(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-STORE-3, CIS-LIFE-2: a stale token or a missing record is INVALID_TRANSITION and writes
        nothing.
        """
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request())
        impostor = evolve(record, invocation_token="not-the-token")
        assert store.complete(impostor, ready(impostor, clock())) is ErrorCode.INVALID_TRANSITION
        assert store.get(RUN, "call_1") == record
        ghost = evolve(record, tool_call_id="call_ghost")
        assert store.complete(ghost, ready(ghost, clock())) is ErrorCode.INVALID_TRANSITION
        assert store.get(RUN, "call_ghost") is None
        unsafe = evolve(record, tool_call_id="no good")
        assert store.complete(unsafe, ready(unsafe, clock())) is ErrorCode.INVALID_TRANSITION
        assert store.completed(RUN) == ()

    def test_complete_rejects_identity_changes(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-LIFE-6, CIS-KERN-2: an ``after`` that changes identity or expiry is a programming error."""
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request())
        for change in ({"expires_at_ms": record.expires_at_ms + 1}, {"request_json": "{}"}, {"sequence": 9}):
            with pytest.raises(ValueError):
                store.complete(record, evolve(ready(record, clock()), **change))
        assert store.get(RUN, "call_1") == record

    def test_two_step_completion_and_error_paths(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-LIFE-1, CIS-FAIL-6, CIS-SIZE-3, CIS-EVID-3: raw, then READY; ERROR keeps or drops raw."""
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request("two-step"))
        raw = with_raw(record, clock() + 1)
        assert store.complete(record, raw) == raw
        assert store.completed(RUN) == ()  # PROJECTING is not completed
        negative = ready(
            raw, clock() + 2, evidence=EvidenceStatus.NO_EVIDENCE, content="", scope="inbox 2024"
        )
        assert store.complete(raw, negative) == negative
        assert store.get(RUN, "two-step") == negative
        # Projection failure keeps the raw response (harness-only).
        second = admitted(store, request("proj-fail"))
        with_raw_second = with_raw(second, clock())
        kept = failed(with_raw_second, clock() + 3, ErrorCode.PROJECTION_FAILED)
        assert store.complete(second, kept) == kept
        assert store.get(RUN, "proj-fail") == kept
        assert kept.raw_response is not None
        # An oversized raw response is dropped whole: the record holds no raw at all.
        third = admitted(store, request("too-big"))
        tiny = Limits(raw_bytes=4)
        dropped = transition(third, RawReceived(raw_response="12345", now_ms=clock()), tiny)
        assert isinstance(dropped, CanonicalRecord)
        assert (dropped.status, dropped.error_code, dropped.raw_response) == (
            InvocationStatus.ERROR,
            ErrorCode.RESULT_TOO_LARGE,
            None,
        )
        assert store.complete(third, dropped) == dropped
        assert store.get(RUN, "too-big") == dropped
        assert store.completed(RUN) == ("two-step", "proj-fail", "too-big")

    def test_a_stale_before_still_lands_on_after(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-STORE-3, CIS-STORE-8: the kernel's WRITE decision makes the stored record exactly ``after``."""
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request())
        first_raw = with_raw(record, clock() + 1, raw="first raw response")
        assert store.complete(record, first_raw) == first_raw
        # The caller completes again from a before holding another raw of another size.
        other_raw = with_raw(record, clock() + 2, raw="2nd")
        final = ready(other_raw, clock() + 3)
        assert store.complete(other_raw, final) == final
        assert store.get(RUN, "call_1") == final

    def test_completion_charges_stored_bytes(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RUN-6: a completion charges the bytes it stored to the run's byte budget."""
        store = make_driver(clock)
        open_default_run(store, clock(), byte_budget=200)
        record = admitted(store, request(arguments='{"q": 1}'))
        before = store.get_run(RUN)
        assert before is not None
        done = ready(record, clock(), raw="r" * 100, content="c" * 10, scope="s" * 5)
        assert store.complete(record, done) == done
        after = store.get_run(RUN)
        assert after is not None
        assert after.bytes_used == before.bytes_used + record_bytes(done) - record_bytes(record)
        assert store.create(request("next", arguments='{"q": "' + "z" * 80 + '"}'), LIMITS) is (
            ErrorCode.RUN_BYTES_EXHAUSTED
        )

    def test_get_many_in_one_call(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-PROG-5, CIS-REF-3: batched reads answer every id; missing, unsafe and other-run ids are
        None.
        """
        store = make_driver(clock)
        open_default_run(store, clock())
        open_default_run(store, clock(), run_id="run-2")
        first = admitted(store, request("a"))
        second = admitted(store, request("b"))
        done = ready(second, clock())
        store.complete(second, done)
        admitted(store, request("c", run_id="run-2"))
        found = store.get_many(RUN, ["b", "a", "missing", "c", "bad id", "a"])
        assert dict(found) == {"b": done, "a": first, "missing": None, "c": None, "bad id": None}
        lean = store.get_many(RUN, ["b", "a"], include_raw=False)
        assert dict(lean) == {"b": without_raw(done), "a": first}
        assert store.get_many(RUN, []) == {}
        assert dict(store.get_many("not safe", ["a"])) == {"a": None}

    def test_ttl_is_set_once_and_never_extended(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-TTL-1, CIS-TTL-2, CIS-TTL-5: remaining TTL is positive after each step and never grows."""
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request())
        assert record.expires_at_ms == clock() + TTL_MS
        seen = [store.ttl_remaining_ms(RUN, "call_1")]
        for _ in range(3):
            store.get(RUN, "call_1")
            store.get_many(RUN, ["call_1"])
            seen.append(store.ttl_remaining_ms(RUN, "call_1"))
        clock.advance(1_000)
        raw = with_raw(record, clock())
        store.complete(record, raw)
        seen.append(store.ttl_remaining_ms(RUN, "call_1"))
        clock.advance(1_000)
        done = ready(raw, clock())
        store.complete(raw, done)
        seen.append(store.ttl_remaining_ms(RUN, "call_1"))
        values = [value for value in seen if value is not None]
        assert len(values) == len(seen)
        assert all(0 < value <= TTL_MS for value in values)
        assert values == sorted(values, reverse=True)
        assert values[-1] <= TTL_MS - 2_000
        stored = store.get(RUN, "call_1")
        assert stored is not None
        assert stored.expires_at_ms == record.expires_at_ms

    def test_an_expired_record_is_absent_and_never_recreated(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-TTL-4, CIS-STORE-4: past expiry (injected clock) a record is absent; a late CAS writes
        nothing.
        """
        store = make_driver(clock)
        open_default_run(store, clock())
        record = admitted(store, request())
        other = admitted(store, request("other"))
        late_ready = ready(record, record.expires_at_ms - 1)  # decided just in time, delivered late
        late_error = failed(other, other.expires_at_ms - 1, ErrorCode.EXECUTION_TIMEOUT)
        clock.now = record.expires_at_ms
        assert store.get(RUN, "call_1") is None
        assert dict(store.get_many(RUN, ["call_1", "other"])) == {"call_1": None, "other": None}
        assert store.ttl_remaining_ms(RUN, "call_1") is None
        assert store.complete(record, late_ready) is ErrorCode.INVALID_TRANSITION
        assert store.complete(other, late_error) is ErrorCode.INVALID_TRANSITION
        assert store.get(RUN, "call_1") is None
        assert store.completed(RUN) == ()

    def test_an_expired_key_can_be_admitted_again(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-TTL-4, CIS-TTL-1: once expired, the key is absent: a new invocation gets a fresh record and
        TTL, every field its own (another tool and arguments here: nothing of the lapsed record stays).
        """
        store = make_driver(clock)
        open_default_run(store, clock(), ttl_ms=1_000)
        record = admitted(store, request())
        late = ready(record, record.expires_at_ms - 1)
        clock.now = record.expires_at_ms
        again = admitted(store, request(tool_name="lookup", arguments='{"q": "snow"}'))
        assert (again.tool_name, again.request_json) == ("lookup", '{"q": "snow"}')
        assert again.sequence == 2
        assert again.expires_at_ms == clock() + 1_000
        assert store.get(RUN, "call_1") == again
        assert store.complete(record, late) is ErrorCode.INVALID_TRANSITION
        assert store.calls(RUN) == ("call_1", "call_1")

    def test_unsafe_ids_read_as_absent(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-ID-3, CIS-STORE-1: reads answer any id without raising; unsafe ids have no record."""
        store = make_driver(clock)
        open_default_run(store, clock())
        for bad in ("", "a b", "a*", "x" * 129, "{run}"):
            assert store.get(RUN, bad) is None
            assert store.get(bad, "call_1") is None
            assert store.ttl_remaining_ms(RUN, bad) is None
            assert store.get_run(bad) is None
            assert store.calls(bad) == ()
            assert store.completed(bad) == ()

    def test_eight_concurrent_creates_race_for_one_key(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-ID-5, CIS-STORE-2, CIS-STORE-4: 8 threads (or tasks) create one key: one wins, 7 are refused
        as CALL_IN_PROGRESS (the winner's record is PROJECTING)."""
        store = make_driver(clock)
        open_default_run(store, clock())
        requests = [request("contended", arguments=f'{{"worker": {index}}}') for index in range(8)]
        results: list[object] = store.concurrently(
            [lambda s, req=req: s.create(req, LIMITS) for req in requests]  # type: ignore[misc]
        )
        winners = [result for result in results if isinstance(result, Admission)]
        assert len(winners) == 1
        assert results.count(ErrorCode.CALL_IN_PROGRESS) == 7
        assert store.get(RUN, "contended") == winners[0].record
        run = store.get_run(RUN)
        assert run is not None
        assert run.tool_calls_used == 1

    def test_budget_race_creates_exactly_k(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RUN-5: 8 threads (or tasks) on a run with budget 3 create exactly 3; 5
        TOOL_BUDGET_EXHAUSTED.
        """
        store = make_driver(clock)
        open_default_run(store, clock(), tool_call_budget=3)
        requests = [request(f"call_{index}") for index in range(8)]
        results: list[object] = store.concurrently(
            [lambda s, req=req: s.create(req, LIMITS) for req in requests]  # type: ignore[misc]
        )
        winners = [result for result in results if isinstance(result, Admission)]
        assert len(winners) == 3
        assert results.count(ErrorCode.TOOL_BUDGET_EXHAUSTED) == 5
        assert sorted(winner.record.sequence for winner in winners) == [1, 2, 3]
        assert sorted(store.calls(RUN)) == sorted(winner.record.tool_call_id for winner in winners)

    def test_concurrent_completions_charge_every_byte(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-RUN-5, CIS-STORE-4: 8 completions of different calls of one run at once (threads or
        tasks) are all written and charge the run exactly what the same completions charge one
        after another: no charge is lost to a concurrent one."""
        store = make_driver(clock)
        totals = []
        for run_id, at_once in (("run-seq", False), ("run-par", True)):
            open_default_run(store, clock(), run_id=run_id, byte_budget=10_000_000)
            records = [admitted(store, request(f"call_{index}", run_id=run_id)) for index in range(8)]
            done = [
                ready(record, clock(), raw="r" * (100 * (index + 1))) for index, record in enumerate(records)
            ]
            pairs = list(zip(records, done, strict=True))
            if at_once:
                results: list[object] = store.concurrently(
                    [lambda s, pair=pair: s.complete(*pair) for pair in pairs]  # type: ignore[misc]
                )
            else:
                results = [store.complete(*pair) for pair in pairs]
            assert results == done
            run = store.get_run(run_id)
            assert run is not None
            totals.append(run.bytes_used)
            assert sorted(store.completed(run_id)) == sorted(record.tool_call_id for record in records)
        assert totals[0] == totals[1]
        assert totals[0] > 0

    def test_large_raw_responses_are_kept_whole(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-REC-3, CIS-SIZE-1, CIS-RETRY-2: a 300 KiB raw response is kept whole, replayed, not
        overwritten.
        """
        store = make_driver(clock)
        open_default_run(store, clock(), byte_budget=10_000_000)
        record = admitted(store, request("big"))
        raw = "é" + "r" * (300 * 1024) + "日"
        with_big = with_raw(record, clock() + 1, raw=raw)
        assert store.complete(record, with_big) == with_big
        done = ready(with_big, clock() + 2)
        assert store.complete(with_big, done) == done
        assert store.complete(with_big, done) == done  # replay
        other = ready(with_raw(record, clock() + 3, raw="x" * 200_000), clock() + 3)
        assert store.complete(record, other) is ErrorCode.INVALID_TRANSITION
        assert store.get(RUN, "big") == done
        assert dict(store.get_many(RUN, ["big"])) == {"big": done}
        # A stale before whose big raw differs from the stored one still lands on after.
        second = admitted(store, request("big-2"))
        first_raw = with_raw(second, clock() + 1, raw="a" * 40_000)
        assert store.complete(second, first_raw) == first_raw
        other_raw = with_raw(second, clock() + 2, raw="b" * 50_000)
        final = ready(other_raw, clock() + 3)
        assert store.complete(other_raw, final) == final
        assert store.get(RUN, "big-2") == final

    def test_tool_call_budget_edges(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RUN-5, CIS-STORE-8: with budget k, calls k-1 and k are admitted, call k+1 is refused."""
        store = make_driver(clock)
        budget = 3
        run = open_default_run(store, clock(), tool_call_budget=budget)
        for index in range(1, budget + 1):
            req = request(f"call_{index}")
            expected = admit(run, None, req, LIMITS, clock())
            assert isinstance(expected, Admission)
            assert store.create(req, LIMITS) == expected
            run = expected.run
            assert (run.tool_calls_used, expected.record.sequence) == (index, index)
        refused = request("call_over")
        assert admit(run, None, refused, LIMITS, clock()) is ErrorCode.TOOL_BUDGET_EXHAUSTED
        assert store.create(refused, LIMITS) is ErrorCode.TOOL_BUDGET_EXHAUSTED
        assert store.get_run(RUN) == run
        assert store.get(RUN, "call_over") is None

    @pytest.mark.parametrize(("spare", "admitted_too"), [(-1, False), (0, True), (1, True)])
    def test_run_byte_budget_edges(
        self, make_driver: MakeDriver, clock: FakeClock, spare: int, admitted_too: bool
    ) -> None:
        """CIS-RUN-6, CIS-PRE-8: a request needing budget - 1, exactly the budget or budget + 1 bytes.

        ``used + size == budget`` is admitted and spends the budget exactly; one byte more
        is RUN_BYTES_EXHAUSTED and spends nothing (CIS-STORE-8: the answer is kernel admit's).
        """
        store = make_driver(clock)
        arguments = '{"n": "é"}'  # 11 UTF-8 bytes, 10 characters
        first = '{"a": 1}'
        need = _size(first) + _size(arguments)
        run = open_default_run(store, clock(), byte_budget=need + spare)
        spent = store.create(request("first", arguments=first), LIMITS)
        assert isinstance(spent, Admission)
        req = request("edge", arguments=arguments)
        expected = admit(spent.run, None, req, LIMITS, clock())
        assert store.create(req, LIMITS) == expected
        if admitted_too:
            assert isinstance(expected, Admission)
            assert expected.run.bytes_used == need == run.byte_budget - spare
        else:
            assert expected is ErrorCode.RUN_BYTES_EXHAUSTED
            assert store.get_run(RUN) == spent.run
        current = store.get_run(RUN)
        assert current is not None
        more = request("more", arguments="{}")
        expected_more = admit(current, None, more, LIMITS, clock())
        assert store.create(more, LIMITS) == expected_more
        assert (expected_more is ErrorCode.RUN_BYTES_EXHAUSTED) is (spare >= 0)  # 2 bytes never fit then

    @pytest.mark.parametrize("spare", [-1, 0, 1])
    def test_a_one_byte_completion_is_charged(
        self, make_driver: MakeDriver, clock: FakeClock, spare: int
    ) -> None:
        """CIS-RUN-6: a completion storing 1 byte more is charged 1 byte; the next admission sees it
        exactly.
        """
        store = make_driver(clock)
        arguments = '{"a": 1}'
        size = _size(arguments)
        open_default_run(store, clock(), byte_budget=size + 1 + size + spare)
        record = admitted(store, request("a", arguments=arguments))
        one_byte = with_raw(record, clock(), raw="x")
        assert record_bytes(one_byte) == record_bytes(record) + 1
        assert store.complete(record, one_byte) == one_byte
        run = store.get_run(RUN)
        assert run is not None
        assert run.bytes_used == size + 1
        req = request("b", arguments=arguments)
        expected = admit(run, None, req, LIMITS, clock())
        assert store.create(req, LIMITS) == expected
        assert isinstance(expected, Admission) is (spare >= 0)

    def test_a_completion_is_never_refused_for_the_byte_budget(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-RUN-6: the charge of a completion may pass the budget; it is written and counted in full."""
        store = make_driver(clock)
        arguments = '{"a": 1}'
        open_default_run(store, clock(), byte_budget=_size(arguments))
        record = admitted(store, request("a", arguments=arguments))
        done = ready(record, clock(), raw="r" * 50, content="c" * 7, scope="s" * 3)
        assert store.complete(record, done) == done
        run = store.get_run(RUN)
        assert run is not None
        assert run.bytes_used == _size(arguments) + record_bytes(done) - record_bytes(record)
        assert run.bytes_used > run.byte_budget

    @pytest.mark.parametrize("spare", [-1, 0, 1])
    def test_whole_record_limit_edges_at_creation(
        self, make_driver: MakeDriver, clock: FakeClock, spare: int
    ) -> None:
        """CIS-SIZE-5, CIS-ID-6: a new record of record_bytes - 1, exactly, or + 1 bytes against the limit."""
        store = make_driver(clock)
        run = open_default_run(store, clock())
        req = request("call_1", arguments='{"q": "日本"}')
        probe = admit(run, None, req, LIMITS, clock())
        assert isinstance(probe, Admission)
        limits = Limits(record_bytes=record_bytes(probe.record) + spare)
        expected = admit(run, None, req, limits, clock())
        assert store.create(req, limits) == expected
        assert (expected is ErrorCode.REQUEST_TOO_LARGE) is (spare < 0)
        assert store.calls(RUN) == (() if spare < 0 else ("call_1",))

    @pytest.mark.parametrize("spare", [-1, 0, 1])
    def test_raw_and_agent_result_limit_edges(
        self, make_driver: MakeDriver, clock: FakeClock, spare: int
    ) -> None:
        """CIS-SIZE-3, CIS-SIZE-4, CIS-STORE-3: raw and agent result at limit - 1, limit, limit + 1 bytes.

        At or under the limit the value is stored whole; one byte over, the record is
        ERROR/RESULT_TOO_LARGE (the raw response dropped, the result never stored). The
        store holds exactly the kernel's record either way.
        """
        store = make_driver(clock)
        open_default_run(store, clock())
        limit = 12
        limits = Limits(raw_bytes=limit, agent_result_bytes=limit)
        raw_case = admitted(store, request("raw"))
        raw_after = transition(
            raw_case, RawReceived(raw_response="é" * 6 + "x" * spare, now_ms=clock()), limits
        )
        assert isinstance(raw_after, CanonicalRecord)
        assert store.complete(raw_case, raw_after) == raw_after
        assert store.get(RUN, "raw") == raw_after
        assert (raw_after.status is InvocationStatus.ERROR) is (spare > 0)
        result_record = admitted(store, request("result"))
        result_case = with_raw(result_record, clock())
        assert store.complete(result_record, result_case) == result_case
        content = "c" * (limit - 3 + spare)  # with the 3-byte scope: limit + spare bytes
        projection = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=content, scope="日")
        result_after = transition(
            result_case, ProjectionReceived(projection=projection, now_ms=clock()), limits
        )
        assert isinstance(result_after, CanonicalRecord)
        assert store.complete(result_case, result_after) == result_after
        assert store.get(RUN, "result") == result_after
        assert result_after.error_code is (ErrorCode.RESULT_TOO_LARGE if spare > 0 else None)

    def test_deadline_edges(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-RUN-4: admitted at deadline - 1 ms; RUN_DEADLINE_EXCEEDED at the deadline and after it."""
        store = make_driver(clock)
        run = open_default_run(store, clock(), deadline_in_ms=1_000)
        clock.now = run.deadline_ms - 1
        assert isinstance(store.create(request("just_in_time"), LIMITS), Admission)
        for now in (run.deadline_ms, run.deadline_ms + 1):
            clock.now = now
            assert store.create(request(f"late_{now}"), LIMITS) is ErrorCode.RUN_DEADLINE_EXCEEDED
        assert store.calls(RUN) == ("just_in_time",)

    def test_record_and_run_expiry_edges(self, make_driver: MakeDriver, clock: FakeClock) -> None:
        """CIS-TTL-4, CIS-RUN-3: live at expiry - 1 ms (1 ms left, still completable); absent at expiry."""
        store = make_driver(clock)
        run = open_default_run(store, clock(), ttl_ms=5_000, deadline_in_ms=1_000)
        record = admitted(store, request())
        clock.now = record.expires_at_ms - 1
        assert store.get(RUN, "call_1") == record
        assert store.ttl_remaining_ms(RUN, "call_1") == 1
        done = ready(record, clock())
        assert store.complete(record, done) == done
        clock.now = record.expires_at_ms
        assert store.get(RUN, "call_1") is None
        assert store.ttl_remaining_ms(RUN, "call_1") is None
        clock.now = run.expires_at_ms - 1
        assert store.get_run(RUN) == store.get_run(RUN) is not None
        current = store.get_run(RUN)
        assert current is not None
        assert store.cancel_run(RUN) == evolve(current, status=RunStatus.CANCELLED)
        clock.now = run.expires_at_ms
        assert store.get_run(RUN) is None
        assert store.cancel_run(RUN) is ErrorCode.RUN_INACTIVE

    def test_completion_order_is_kept_and_facts_follow_it(
        self, make_driver: MakeDriver, clock: FakeClock
    ) -> None:
        """CIS-PROG-1, CIS-PROG-2, CIS-PROG-5: completed() lists calls in completion order, not admission
        order.

        Four calls are admitted 1..4 and completed 3, 1, 4, 2 (each completion a concurrent
        pair with a read, as threads or tasks); the kernel's progress over one batched read
        gives the four facts, field by field, in that order.
        """
        store = make_driver(clock)
        open_default_run(store, clock())
        records = {
            name: admitted(store, request(name, tool_name=f"tool_{name}")) for name in ("a", "b", "c", "d")
        }
        order = ("c", "a", "d", "b")
        finals = {}
        for index, name in enumerate(order):
            clock.advance(1)
            evidence = EvidenceStatus.NO_EVIDENCE if index % 2 else EvidenceStatus.EVIDENCE_FOUND
            finals[name] = ready(
                records[name], clock(), content=f"content {name}", scope=f"scope {name}", evidence=evidence
            )
            written, _read = store.concurrently(
                [lambda s, name=name: s.complete(records[name], finals[name]), lambda s: s.completed(RUN)]  # type: ignore[misc]
            )
            assert written == finals[name]
        assert store.completed(RUN) == order
        batch = store.get_many(RUN, list(order), include_raw=False)
        report = project_progress(RUN, list(order), batch, clock(), LIMITS)
        assert report.facts == tuple(
            ObservedFact(
                tool_call_id=name,
                tool_name=f"tool_{name}",
                sequence=records[name].sequence,
                evidence_status=finals[name].evidence_status,  # type: ignore[arg-type]
                negative=finals[name].evidence_status is EvidenceStatus.NO_EVIDENCE,
                content=f"content {name}",
                scope=f"scope {name}",
            )
            for name in order
        )
        assert [records[name].sequence for name in order] == [3, 1, 4, 2]
