"""Boundary benchmark against a private redis-server: what a progress read reads.

Run: ``python benchmarks/bench_boundary.py``. Starts its own throwaway
redis-server on a free loopback port (never the one on 6379) and prints figures
measured in this one run; nothing here is asserted.

**Progress projection of 1,000 calls.** 1,000 READY records whose raw responses are
4 KiB each; ``ToolBoundary.project_progress`` is measured for client round trips
(socket writes of redis-py), server commands (``INFO commandstats`` delta) and
bytes the server sent (``INFO stats`` ``total_net_output_bytes`` delta, minus the
observer's own ``INFO`` reply). ``get_many`` with and without raw responses shows
what reading whole records would cost.

The 64-concurrent comparison that used to open this script replayed complete
headers with a stale sequence, so its baseline wrote nothing; it now lives in
``bench_invocation.py`` (section 3), whose baseline replays only commands that
succeed and checks that they did.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import redis
import redis.asyncio

from invocation_store.adapters import RedisStore
from invocation_store.boundary import ToolBoundary, ToolRegistry, ToolSpec
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


# -- progress projection of 1,000 calls ---------------------------------------------------------


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
    del quick  # one measurement either way
    with redis_server() as url:
        print("bench_boundary: progress projection of 1,000 calls")
        progress = _progress(url)
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
