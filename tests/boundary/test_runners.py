"""Where tool code runs: inline or on persistent workers, never a thread per call (CIS-PERF-1)."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

import pytest

from invocation_store import (
    AsyncMemoryStore,
    AsyncToolBoundary,
    ErrorCode,
    MemoryStore,
    RunContext,
    ToolRegistry,
    ToolSpec,
)
from invocation_store._runners import WORKERS, WorkerPool, call_with_timeout
from invocation_store.kernel import MAX_SAFE_INT

from ._fakes import RUN, FakeExecutor, FakeProjector, boundary_for, envelope, open_run


def _thread_of(_args: Mapping[str, Any]) -> str:
    return str(threading.get_ident())


def test_a_tool_without_a_time_limit_runs_inline_in_the_calling_thread() -> None:
    """CIS-PERF-1: timeout_ms=None runs the executor in the caller's thread; the kernel sees 2**53 - 1."""
    spec = ToolSpec(name="search", executor=_thread_of, projector=FakeProjector(), timeout_ms=None)
    assert spec.policy.timeout_ms == MAX_SAFE_INT
    store = MemoryStore()
    boundary = boundary_for(store, spec)
    context = open_run(boundary)
    started = WORKERS.stats().started
    assert boundary.invoke(context, envelope()).ok
    record = store.get(RUN, "call_1")
    assert record is not None
    assert record.raw_response == str(threading.get_ident())
    assert WORKERS.stats().started == started


def test_timed_calls_reuse_persistent_workers() -> None:
    """CIS-PERF-1: 200 sequential calls with a time limit start at most one worker thread."""
    store = MemoryStore()
    boundary = boundary_for(store, ToolSpec(name="search", executor=_thread_of, projector=FakeProjector()))
    context = open_run(boundary, tool_call_budget=500)
    assert boundary.invoke(context, envelope("call_warm")).ok
    started = WORKERS.stats().started
    threads = threading.active_count()
    for i in range(200):
        assert boundary.invoke(context, envelope(f"call_{i}")).ok
    assert WORKERS.stats().started - started <= 1
    assert threading.active_count() <= threads + 1
    workers = {store.get(RUN, f"call_{i}").raw_response for i in range(200)}  # type: ignore[union-attr]
    assert str(threading.get_ident()) not in workers
    assert len(workers) <= 2


def test_a_hung_worker_is_counted_replaced_and_blocks_no_other_call(caplog: pytest.LogCaptureFixture) -> None:
    """CIS-PERF-1, CIS-FAIL-3: a timed-out call's worker is hung; the next call gets another worker."""
    pool = WorkerPool(max_idle=1)
    release = threading.Event()
    try:
        with caplog.at_level("WARNING", logger="invocation_store.workers"):
            outcome = pool_call(pool, release.wait, 30)
        assert outcome.timed_out
        assert [r.getMessage() for r in caplog.records] == ["tool worker hung: 1 hung now, 1 since start"]
        stats = pool.stats()
        assert (stats.hung, stats.hung_total, stats.busy) == (1, 1, 0)
        began = time.monotonic()
        assert pool_call(pool, lambda: 7, 5_000).value == 7  # not queued behind the hung one
        assert time.monotonic() - began < 1
        assert pool.stats().started == 2
    finally:
        release.set()
    deadline = time.monotonic() + 5
    while pool.stats().hung and time.monotonic() < deadline:
        time.sleep(0.005)
    stats = pool.stats()
    assert (stats.hung, stats.hung_total, stats.idle) == (0, 1, 1)  # one rejoined, the other ended


def pool_call(pool: WorkerPool, fn: Any, timeout_ms: int) -> Any:
    return pool.call(fn, timeout_ms)


def test_tool_failures_keep_the_worker() -> None:
    """CIS-PERF-1, CIS-FAIL-2: a tool raising SystemExit is a failure and its worker serves the next call."""
    pool = WorkerPool()

    def exits() -> None:
        raise SystemExit(3)

    assert pool_call(pool, exits, 1_000).failure == "SystemExit"
    assert pool_call(pool, lambda: "ok", 1_000).value == "ok"
    assert pool.stats().started == 1
    with pytest.raises(ValueError, match="max_idle"):
        WorkerPool(max_idle=0)


def test_concurrent_calls_never_wait_for_each_other() -> None:
    """CIS-PERF-1: with every worker busy a new call starts a worker instead of queueing."""
    pool = WorkerPool(max_idle=2)
    gate = threading.Barrier(5)
    results: list[Any] = []

    def meet() -> str:
        gate.wait(timeout=5)  # only returns once all five calls run at the same time
        return "met"

    threads = [
        threading.Thread(target=lambda: results.append(pool_call(pool, meet, 5_000))) for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.value for r in results] == ["met"] * 5
    assert pool.stats().idle == 2  # the pool keeps max_idle workers, the others ended


def test_sync_tools_on_the_async_boundary_use_persistent_workers() -> None:
    """CIS-PERF-1, CIS-FAIL-3: 64 concurrent sync calls x 3 batches reuse workers; a timeout is hung."""
    blocked = FakeExecutor(block=True)

    async def main() -> None:
        boundary = AsyncToolBoundary(
            AsyncMemoryStore(),
            ToolRegistry(
                [
                    ToolSpec(name="search", executor=_thread_of, projector=FakeProjector()),
                    ToolSpec(name="hang", executor=blocked, projector=FakeProjector(), timeout_ms=30),
                ]
            ),
        )
        context = await boundary.open_run(
            RUN,
            deadline_ms=boundary.now_ms() + 60_000,
            ttl_ms=600_000,
            tool_call_budget=500,
            byte_budget=1 << 24,
        )
        assert isinstance(context, RunContext)
        first = await asyncio.gather(*(boundary.invoke(context, envelope(f"a_{i}")) for i in range(64)))
        assert all(r.ok for r in first)
        started = WORKERS.stats().started
        for batch in range(2):
            results = await asyncio.gather(
                *(boundary.invoke(context, envelope(f"b{batch}_{i}")) for i in range(64))
            )
            assert all(r.ok for r in results)
        assert WORKERS.stats().started - started <= 64 - WORKERS.max_idle + 2
        hung_total = WORKERS.stats().hung_total
        result = await boundary.invoke(context, envelope("h_1", tool_name="hang"))
        assert result.code is ErrorCode.EXECUTION_TIMEOUT
        await asyncio.sleep(0)  # the abandoned task takes its cancellation at its next step
        assert WORKERS.stats().hung_total == hung_total + 1

    try:
        asyncio.run(main())
    finally:
        blocked.release.set()


def test_the_pool_is_empty_in_a_forked_child() -> None:
    """CIS-PERF-1: after fork the child's pool holds no (dead) worker of the parent."""
    assert pool_call(WORKERS, lambda: 1, 1_000).value == 1
    assert WORKERS.stats().idle >= 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            idle = WORKERS.stats().idle
            value = call_with_timeout(lambda: 5, 1_000).value
            os.write(write, f"{idle},{value}".encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 100) == b"0,5"
    os.close(read)
    assert status == 0


def test_an_inline_executor_raising_keyboard_interrupt_is_a_failure() -> None:
    """CIS-PERF-1, CIS-FAIL-2: inline tool code's BaseException is EXECUTION_FAILED, never re-raised."""

    def interrupted(_args: Mapping[str, Any]) -> str:
        raise KeyboardInterrupt

    spec = ToolSpec(name="search", executor=interrupted, projector=FakeProjector(), timeout_ms=None)
    boundary = boundary_for(MemoryStore(), spec)
    context = open_run(boundary)
    assert boundary.invoke(context, envelope()).code is ErrorCode.EXECUTION_FAILED


def test_an_idle_worker_keeps_nothing_of_its_last_call() -> None:
    """CIS-PERF-1: a persistent worker drops its last call's arguments and result (a raw response, say)."""

    class Result:
        pass

    pool = WorkerPool()
    made: list[weakref.ref[Result]] = []

    def tool(argument: Result) -> Result:
        result = Result()
        made.append(weakref.ref(result))
        return result

    argument = Result()
    kept = weakref.ref(argument)
    outcome = pool.call(tool, 1_000, argument)
    assert isinstance(outcome.value, Result)
    del outcome, argument
    deadline = time.monotonic() + 5
    while (made[0]() is not None or kept() is not None) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.001)
    assert made[0]() is None
    assert kept() is None
    assert pool.stats().idle == 1
