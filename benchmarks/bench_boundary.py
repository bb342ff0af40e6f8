"""Boundary benchmarks against a private redis-server: concurrency and progress reads.

Run: ``python benchmarks/bench_boundary.py`` (``--quick`` or ``CIS_BENCH_QUICK=1`` for a
short run). Starts its
own throwaway redis-server on a free loopback port (never the one on 6379) and
prints figures measured in this one run; nothing here is asserted.

1. **64 concurrent invocations.** ``AsyncToolBoundary`` over ``AsyncRedisStore``
   runs batches of 64 ``invoke`` calls with ``asyncio.gather`` (an async no-op tool,
   so no thread hop). The baseline is plain ``redis.asyncio`` sending *the same
   commands*: the exact ``EVALSHA`` calls (same scripts, same arguments, ids
   rewritten to fresh ones of the same length) that the store sent for one recorded
   invocation, 64 at a time. The ratio is the Python cost of the boundary, kernel
   and store around the same server work.
2. **Progress projection of 1,000 calls.** 1,000 READY records whose raw responses
   are 4 KiB each; ``ToolBoundary.project_progress`` is measured for client round
   trips (socket writes of redis-py), server commands (``INFO commandstats``
   delta) and bytes the server sent (``INFO stats`` ``total_net_output_bytes``
   delta, minus the observer's own ``INFO`` reply). The same read with
   ``get_many(include_raw=True)`` shows what reading the raw responses would cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, cast

import redis
import redis.asyncio

from invocation_store.adapters import AsyncRedisStore, RedisStore
from invocation_store.boundary import AsyncToolBoundary, ToolBoundary, ToolRegistry, ToolSpec
from invocation_store.kernel import EvidenceStatus, Projection, RunContext, ToolCallEnvelope
from invocation_store.testing.redis_server import redis_server

CONCURRENCY = 64
RAW_BYTES = 4096
PROGRESS_CALLS = 1000
#: Arguments of each progress call: 512 B, to see whether the progress read fetches them.
PROGRESS_ARGS = '{"q":"' + "y" * 504 + '"}'
HOUR_MS = 3_600_000


def _projection(_raw: str, _args: Mapping[str, Any]) -> Projection:
    return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="ok: 1 hit", scope="bench")


async def _async_executor(_args: Mapping[str, Any]) -> str:
    return '{"hits":1}'


async def _async_projector(raw: str, args: Mapping[str, Any]) -> Projection:
    return _projection(raw, args)


def _envelope(run_id: str, tool_call_id: str, arguments: str = '{"q":"x"}') -> ToolCallEnvelope:
    return ToolCallEnvelope(run_id=run_id, tool_call_id=tool_call_id, tool_name="probe", arguments=arguments)


# -- 1. 64 concurrent invocations ------------------------------------------------------------------


class Recorder:
    """Wraps a client's ``execute_command`` to record the commands of one invocation."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self.original = cast(Callable[..., Awaitable[Any]], client.execute_command)
        self.recording = False
        self.commands: list[tuple[Any, ...]] = []

    async def __call__(self, *args: Any, **options: Any) -> Any:
        if self.recording:
            self.commands.append(args)
        return await self.original(*args, **options)


def _rewrite(value: Any, old: tuple[str, str], new: tuple[str, str]) -> Any:
    if isinstance(value, bytes):
        for before, after in zip(old, new, strict=True):
            value = value.replace(before.encode(), after.encode())
        return value
    if isinstance(value, str):
        for before, after in zip(old, new, strict=True):
            value = value.replace(before, after)
        return value
    return value


async def _concurrency(url: str, rounds: int, batches: int) -> dict[str, float]:
    client = redis.asyncio.Redis.from_url(url)
    recorder = Recorder(client)
    client.execute_command = recorder  # type: ignore[method-assign]
    store = AsyncRedisStore(client, prefix="bench-c")
    registry = ToolRegistry([ToolSpec(name="probe", executor=_async_executor, projector=_async_projector)])
    boundary = AsyncToolBoundary(store, registry)
    plain = redis.asyncio.Redis.from_url(url)
    runs = {name: f"{name}-run" for name in ("rec", "bnd", "pln")}  # same length on purpose
    contexts: dict[str, RunContext] = {}
    for name, run_id in runs.items():
        opened = await boundary.open_run(
            run_id,
            deadline_ms=boundary.now_ms() + HOUR_MS,
            ttl_ms=HOUR_MS,
            tool_call_budget=10_000_000,
            byte_budget=10**12,
        )
        assert isinstance(opened, RunContext)
        contexts[name] = opened
    # Record one invocation's commands (after the server check and script loading).
    await boundary.invoke(contexts["rec"], _envelope(runs["rec"], "w-0000000"))
    recorder.recording = True
    result = await boundary.invoke(contexts["rec"], _envelope(runs["rec"], "t-0000000"))
    recorder.recording = False
    assert result.ok
    recorded = list(recorder.commands)
    commands = [str(command[0]) for command in recorded]
    await plain.ping()

    counter = iter(range(1, 10**9))

    async def boundary_batch() -> None:
        ids = [f"t-{next(counter):07d}" for _ in range(CONCURRENCY)]
        results = await asyncio.gather(
            *(boundary.invoke(contexts["bnd"], _envelope(runs["bnd"], tcid)) for tcid in ids)
        )
        assert all(r.ok for r in results)

    async def plain_one(tcid: str) -> None:
        for command in recorded:
            args = [_rewrite(arg, ("rec-run", "t-0000000"), ("pln-run", tcid)) for arg in command]
            await cast(Callable[..., Awaitable[Any]], plain.execute_command)(*args)

    async def plain_batch() -> None:
        ids = [f"t-{next(counter):07d}" for _ in range(CONCURRENCY)]
        await asyncio.gather(*(plain_one(tcid) for tcid in ids))

    # Check that the replayed commands really create READY records (same server work).
    await plain_batch()
    probe = await store.get_many(runs["pln"], [f"t-{n:07d}" for n in range(1, 1 + CONCURRENCY)])
    replayed_ok = sum(1 for record in probe.values() if record is not None and record.status.value == "READY")

    for _ in range(2):  # warm-up
        await boundary_batch()
        await plain_batch()
    per_call: dict[str, list[float]] = {"boundary": [], "plain": []}
    for _ in range(rounds):
        for name, batch in (("boundary", boundary_batch), ("plain", plain_batch)):
            start = time.perf_counter()
            for _ in range(batches):
                await batch()
            per_call[name].append((time.perf_counter() - start) / (batches * CONCURRENCY))
    await plain.aclose()
    await store.close()
    await client.aclose()
    boundary_us = statistics.median(per_call["boundary"]) * 1e6
    plain_us = statistics.median(per_call["plain"]) * 1e6
    print(f"  commands per invocation (recorded): {len(recorded)} ({', '.join(commands)})")
    print(f"  replayed commands produced READY records: {replayed_ok}/{CONCURRENCY}")
    print(
        f"  {rounds} rounds x {batches} batches x {CONCURRENCY} concurrent invocations per side; "
        "median of rounds"
    )
    print(f"  AsyncToolBoundary + AsyncRedisStore: {boundary_us:.0f} us/invocation")
    print(f"  plain redis.asyncio, same commands:  {plain_us:.0f} us/invocation")
    return {"boundary_us": boundary_us, "plain_us": plain_us, "ratio": boundary_us / plain_us}


# -- 2. progress projection of 1,000 calls ---------------------------------------------------------


@contextlib.contextmanager
def count_round_trips() -> Iterator[list[int]]:
    """Count redis-py socket writes (one per command, one per pipeline) while the block runs."""
    counter = [0]
    original = cast(Callable[..., None], redis.connection.AbstractConnection.send_packed_command)

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        counter[0] += 1
        original(self, command, check_health)

    redis.connection.AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        redis.connection.AbstractConnection.send_packed_command = original  # type: ignore[method-assign]


class Observer:
    """Reads server counters (commandstats, total_net_output_bytes) over its own connection."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)

    def _output_bytes(self) -> int:
        return int(self.client.info("stats")["total_net_output_bytes"])

    def snapshot(self) -> tuple[int, dict[str, int]]:
        stats = self.client.info("commandstats")
        calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}
        return self._output_bytes(), calls

    def delta(
        self, before: tuple[int, dict[str, int]], after: tuple[int, dict[str, int]]
    ) -> tuple[int, dict[str, int]]:
        """Bytes sent to clients and commands run between two snapshots, minus the observer's."""
        sent = after[0] - before[0]  # includes the observer's own replies: see _measured
        calls = {
            name: count - before[1].get(name, 0)
            for name, count in after[1].items()
            if count - before[1].get(name, 0) > 0
        }
        calls["info"] = calls.get("info", 0) - 2  # the observer's own two INFO calls
        if calls["info"] <= 0:
            del calls["info"]
        return sent, calls

    def close(self) -> None:
        self.client.close()


def _measured(observer: Observer, action: Any) -> tuple[int, int, dict[str, int], float, Any]:
    """Run ``action``; returns (bytes sent to clients, round trips, commands, seconds, result)."""
    # Baseline: the observer's own snapshot traffic with nothing in between.
    idle_before = observer.snapshot()
    idle_after = observer.snapshot()
    idle_bytes, _ = observer.delta(idle_before, idle_after)
    before = observer.snapshot()
    with count_round_trips() as trips:
        start = time.perf_counter()
        result = action()
        elapsed = time.perf_counter() - start
    after = observer.snapshot()
    sent, calls = observer.delta(before, after)
    return sent - idle_bytes, trips[0], calls, elapsed, result


def _progress(url: str) -> dict[str, float]:
    raw = '{"blob":"' + "x" * (RAW_BYTES - 11) + '"}'
    assert len(raw) == RAW_BYTES

    def executor(_args: Mapping[str, Any]) -> str:
        return raw

    registry = ToolRegistry([ToolSpec(name="probe", executor=executor, projector=_projection)])
    store = RedisStore.from_url(url, prefix="bench-p")
    boundary = ToolBoundary(store, registry)
    run_id = "progress-run"
    context = boundary.open_run(
        run_id,
        deadline_ms=boundary.now_ms() + HOUR_MS,
        ttl_ms=HOUR_MS,
        tool_call_budget=PROGRESS_CALLS,
        byte_budget=10**12,
    )
    assert isinstance(context, RunContext)
    for number in range(PROGRESS_CALLS):
        assert boundary.invoke(context, _envelope(run_id, f"call_{number:05d}", PROGRESS_ARGS)).ok
    ids = store.completed(run_id)
    observer = Observer(url)
    sent, trips, calls, elapsed, report = _measured(observer, lambda: boundary.project_progress(context))
    assert len(report.facts) == 100  # Limits.max_facts: the facts are capped, the read is not
    raw_sent, raw_trips, raw_calls, raw_elapsed, _ = _measured(observer, lambda: store.get_many(run_id, ids))
    lean_sent, lean_trips, lean_calls, lean_elapsed, _ = _measured(
        observer, lambda: store.get_many(run_id, ids, include_raw=False)
    )
    observer.close()
    store.close()
    raw_total = RAW_BYTES * PROGRESS_CALLS
    request_total = len(PROGRESS_ARGS) * PROGRESS_CALLS
    print(
        f"  {PROGRESS_CALLS} READY records, raw response {RAW_BYTES} B "
        f"and request {len(PROGRESS_ARGS)} B each "
        f"({raw_total} B of raw, {request_total} B of requests in Redis)"
    )
    print(
        f"  project_progress: {trips} round trips, commands {calls}, "
        f"{sent} B sent by the server ({sent / PROGRESS_CALLS:.0f} B/call), {elapsed * 1e3:.1f} ms; "
        f"{len(report.facts)} facts kept (max_facts), {report.omitted} omitted"
    )
    print(
        f"  get_many(include_raw=False): {lean_trips} round trip(s), commands {lean_calls}, "
        f"{lean_sent} B, {lean_elapsed * 1e3:.1f} ms"
    )
    print(
        f"  get_many(include_raw=True):  {raw_trips} round trip(s), commands {raw_calls}, "
        f"{raw_sent} B, {raw_elapsed * 1e3:.1f} ms"
    )
    includes_raw = sent >= raw_total
    print(
        f"  finding: the projection reads {'INCLUDE' if includes_raw else 'do not include'} raw responses "
        f"({sent} B read vs {raw_total} B of raw stored)"
    )
    if lean_sent >= request_total:
        print(
            f"  finding: get_many(include_raw=False) still reads the request texts "
            f"({request_total} B of the {lean_sent} B it read, commands {lean_calls}); "
            "no progress fact uses them"
        )
    return {
        "round_trips": trips,
        "bytes": sent,
        "raw_total": raw_total,
        "request_total": request_total,
        "bytes_with_raw": raw_sent,
        "ms": elapsed * 1e3,
        "ms_with_raw": raw_elapsed * 1e3,
    }


def main() -> int:
    """Run both benchmarks and print their figures; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="fewer rounds (a smoke run, noisier); also CIS_BENCH_QUICK=1"
    )
    args = parser.parse_args()
    quick = args.quick or os.environ.get("CIS_BENCH_QUICK") == "1"
    rounds, batches = (2, 3) if quick else (5, 10)
    with redis_server() as url:
        print("bench_boundary: 64 concurrent invocations, AsyncToolBoundary vs plain redis.asyncio")
        concurrency = asyncio.run(_concurrency(url, rounds, batches))
        print("bench_boundary: progress projection of 1,000 calls")
        progress = _progress(url)
    print(
        f"FIGURE async 64-concurrent invocation, AsyncToolBoundary+AsyncRedisStore vs plain redis.asyncio "
        f"same commands: {concurrency['ratio']:.2f}x "
        f"({concurrency['boundary_us']:.0f} us vs {concurrency['plain_us']:.0f} us per invocation)"
    )
    print(
        f"FIGURE progress projection of {PROGRESS_CALLS} calls: {progress['round_trips']} round trips, "
        f"{progress['bytes']} B read = {progress['bytes'] / progress['raw_total']:.3f}x the raw bytes stored "
        f"(reading raw too: {progress['bytes_with_raw']} B = "
        f"{progress['bytes_with_raw'] / progress['raw_total']:.3f}x; "
        f"time {progress['ms']:.1f} ms vs {progress['ms_with_raw']:.1f} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
