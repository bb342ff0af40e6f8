"""Redis store benchmarks: ratios measured in one run, on one machine, against one server.

Run: ``.venv/bin/python benchmarks/bench_redis.py [--rounds 7] [--ops 400]``. Uses a
private redis-server started by :func:`invocation_store.testing.redis_server.redis_server`
unless ``REDIS_URL`` is set (then only keys under a fresh prefix are written, and
deleted at the end; the server is never flushed).

(a) One successful invocation of a no-op tool through RedisStore (create, the kernel's
    raw + projection transitions, complete: 2 round trips) against the seed's protocol
    (``SET NX PX`` of the JSON record, then ``GET``, ``PTTL``, ``SET PX`` of the updated
    JSON: 4 round trips). Reported as our throughput / the seed's; target >= 1.8.
(b) The same invocation against two redis-py ``PING`` s on the same connection, the
    physical floor of two round trips. Reported as our time / two pings; target <= 1.3.
(c) Completing a record with a 1 MiB raw response against a plain ``SET`` of the same
    1 MiB string to a new key (storing a raw response always takes new server memory;
    overwriting one key reuses it and is also printed). Reported as our time / SET;
    target <= 1.5.

The measurements are interleaved round by round (A, B, A, B, ...) and the median of the
per-round ratios is reported, so that a noisy, shared machine hurts both sides alike.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import redis

from invocation_store.adapters import RedisStore
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    EvidenceStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    transition,
)
from invocation_store.testing.redis_server import redis_server

LIMITS = Limits()
RUN = "bench-run"
ONE_MIB = 1024 * 1024


@contextlib.contextmanager
def _server() -> Iterator[tuple[str, str]]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url, "REDIS_URL"
        return
    with redis_server() as private:
        yield private, "private redis-server"


class Bench:
    """Everything a round needs: one client, one store, counters for unique ids."""

    def __init__(self, url: str) -> None:
        self.prefix = f"cis-bench-{secrets.token_hex(4)}"
        self.client = redis.Redis.from_url(url)
        self.store = RedisStore(self.client, prefix=self.prefix)
        self.counter = 0
        now = self.store.now_ms()
        opened = self.store.open_run(
            RUN,
            deadline_ms=now + 3_600_000,
            ttl_ms=600_000,
            tool_call_budget=10**12,
            byte_budget=10**15,
        )
        assert not isinstance(opened, str), opened

    def next_id(self) -> str:
        self.counter += 1
        return f"call_{self.counter}"

    def create(self) -> CanonicalRecord:
        now = self.store.now_ms()
        result = self.store.create(
            AdmissionRequest(
                run_id=RUN,
                tool_call_id=self.next_id(),
                tool_name="noop",
                request_json='{"query": "weather in Paris"}',
                invocation_token=secrets.token_hex(8),
                now_ms=now,
            ),
            LIMITS,
        )
        assert isinstance(result, Admission), result
        return result.record

    def finish(self, record: CanonicalRecord, raw: str) -> CanonicalRecord:
        """The kernel's READY record for ``raw`` (what the boundary computes before complete)."""
        now = self.store.now_ms()
        with_raw = transition(record, RawReceived(raw_response=raw, now_ms=now), LIMITS)
        assert isinstance(with_raw, CanonicalRecord)
        projection = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="21 C", scope="Paris")
        done = transition(with_raw, ProjectionReceived(projection=projection, now_ms=now), LIMITS)
        assert isinstance(done, CanonicalRecord)
        return done

    def invocation(self) -> float:
        """One successful no-op invocation: create, kernel transitions, complete.

        Returns the seconds spent in the two store calls alone (the kernel's
        transitions are the boundary's work, whatever the store).
        """
        start = time.perf_counter()
        record = self.create()
        created = time.perf_counter()
        done = self.finish(record, '{"temp": 21}')
        decided = time.perf_counter()
        assert self.store.complete(record, done) is done
        return (created - start) + (time.perf_counter() - decided)

    def seed_invocation(self) -> None:
        """The seed's protocol: SET NX PX, then GET, PTTL, SET PX of the whole JSON record."""
        client = self.client
        key = f"{self.prefix}:seed:{self.next_id()}"
        now = self.store.now_ms()
        record = {
            "runId": RUN,
            "toolCallId": key,
            "toolName": "noop",
            "status": "PROJECTING",
            "request": '{"query": "weather in Paris"}',
            "createdAt": now,
            "updatedAt": now,
        }
        assert client.set(key, json.dumps(record), nx=True, px=600_000)
        stored = client.get(key)
        assert stored is not None
        remaining = client.pttl(key)
        updated = json.loads(stored)
        updated.update(
            status="READY",
            evidence="EVIDENCE_FOUND",
            raw='{"temp": 21}',
            agentResult="21 C",
            scope="Paris",
            updatedAt=self.store.now_ms(),
        )
        assert client.set(key, json.dumps(updated), px=max(int(remaining), 1))

    def two_pings(self) -> None:
        self.client.ping()
        self.client.ping()

    def drop_big_keys(self) -> None:
        """Delete the raw responses and plain SET keys written so far."""
        for pattern in (f"{self.prefix}:plain:*", f"{self.prefix}:*:raw:*"):
            keys = list(self.client.scan_iter(match=pattern, count=1000))
            if keys:
                self.client.unlink(*keys)

    def close(self) -> None:
        keys = list(self.client.scan_iter(match=f"{self.prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            self.client.unlink(*keys[start : start + 500])
        self.client.close()


def _time(operation: Callable[[], object], ops: int) -> float:
    """Seconds per operation over ``ops`` calls."""
    start = time.perf_counter()
    for _ in range(ops):
        operation()
    return (time.perf_counter() - start) / ops


def _time_self(operation: Callable[[], float], ops: int) -> float:
    """Seconds per operation as reported by the operation itself."""
    return sum(operation() for _ in range(ops)) / ops


def _time_prepared(prepare: Callable[[], object], operation: Callable[[object], None], ops: int) -> float:
    """Seconds per ``operation``, excluding ``prepare`` (run untimed before each call)."""
    total = 0.0
    for _ in range(ops):
        argument = prepare()
        start = time.perf_counter()
        operation(argument)
        total += time.perf_counter() - start
    return total / ops


def _pair(rounds: int, first: Callable[[], float], second: Callable[[], float]) -> tuple[float, float, float]:
    """Median first time, median second time, median per-round ratio first/second."""
    firsts, seconds, ratios = [], [], []
    for _ in range(rounds):
        a, b = first(), second()
        firsts.append(a)
        seconds.append(b)
        ratios.append(a / b)
    return statistics.median(firsts), statistics.median(seconds), statistics.median(ratios)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per comparison")
    parser.add_argument("--ops", type=int, default=400, help="operations per round")
    parser.add_argument("--big-ops", type=int, default=40, help="1 MiB completions per round")
    args = parser.parse_args(argv)

    with _server() as (url, origin):
        bench = Bench(url)
        try:
            for _ in range(100):  # warm up: scripts loaded, connection open, caches hot
                bench.invocation()
                bench.seed_invocation()
                bench.two_pings()
            version = bench.client.info("server")["redis_version"]
            print(
                f"Redis {version} ({origin}); redis-py {redis.__version__}; Python {sys.version.split()[0]}"
            )
            print(f"{args.rounds} interleaved rounds; medians reported\n")

            full, seed, full_ratio = _pair(
                args.rounds,
                lambda: _time(bench.invocation, args.ops),
                lambda: _time(bench.seed_invocation, args.ops),
            )
            ours, _, ratio = _pair(
                args.rounds,
                lambda: _time_self(bench.invocation, args.ops),
                lambda: _time(bench.seed_invocation, args.ops),
            )
            print("(a) no-op invocation, RedisStore vs the seed's SET NX PX + GET + PTTL + SET PX")
            print(f"    seed                               {seed * 1e6:8.1f} us/op  ({1 / seed:8.0f} op/s)")
            print(f"    ours, create + complete            {ours * 1e6:8.1f} us/op  ({1 / ours:8.0f} op/s)")
            print(f"    ours, with the kernel transitions  {full * 1e6:8.1f} us/op  ({1 / full:8.0f} op/s)")
            verdict = "met" if 1 / ratio >= 1.8 else "MISSED"
            print(f"    throughput ours/seed = {1 / ratio:.2f}x store calls (target >= 1.8x: {verdict}),")
            print(f"                           {1 / full_ratio:.2f}x with the kernel transitions\n")

            ours, pings, ratio = _pair(
                args.rounds,
                lambda: _time_self(bench.invocation, args.ops),
                lambda: _time(bench.two_pings, args.ops),
            )
            print("(b) one successful invocation (create + complete) vs two PINGs on the same connection")
            print(f"    invocation {ours * 1e6:8.1f} us   two PINGs {pings * 1e6:8.1f} us")
            verdict = "met" if ratio <= 1.3 else "MISSED"
            print(f"    ratio = {ratio:.2f}x   (target <= 1.3x: {verdict})\n")

            big = "x" * ONE_MIB

            def prepare() -> object:
                record = bench.create()
                return record, bench.finish(record, big)

            def complete(prepared: object) -> None:
                record, done = prepared  # type: ignore[misc]
                assert bench.store.complete(record, done) is done

            def fresh_set() -> None:
                # A record's raw response always needs new memory: SET a new key each time.
                bench.client.set(f"{bench.prefix}:plain:{bench.next_id()}", big)

            def measured(operation: Callable[[], float]) -> Callable[[], float]:
                def run() -> float:
                    try:
                        return operation()
                    finally:
                        bench.drop_big_keys()  # untimed: keep the server's memory bounded

                return run

            ours, plain, ratio = _pair(
                args.rounds,
                measured(lambda: _time_prepared(prepare, complete, args.big_ops)),
                measured(lambda: _time(fresh_set, args.big_ops)),
            )
            same_key = _time(
                lambda: bench.client.set(f"{bench.prefix}:plain:same", big) and None, args.big_ops
            )
            print("(c) completing with a 1 MiB raw response vs a plain SET of the same 1 MiB string")
            print(f"    complete {ours * 1e3:8.3f} ms   SET (new key) {plain * 1e3:8.3f} ms")
            verdict = "met" if ratio <= 1.5 else "MISSED"
            print(f"    ratio = {ratio:.2f}x   (target <= 1.5x: {verdict})")
            print(f"    (reference: SET overwriting one key {same_key * 1e3:.3f} ms: {ours / same_key:.2f}x)")
        finally:
            bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
