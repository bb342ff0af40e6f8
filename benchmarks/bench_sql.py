"""SQL store benchmarks beside Redis: invocation / floor per store, and records per second with 8 processes.

Run: ``.venv/bin/python benchmarks/bench_sql.py [--rounds 5] [--ops 200] [--processes 8]``.

Per store (SQLite on a temporary file with WAL and ``synchronous=FULL``; PostgreSQL on a
private server started from the installed binaries; Redis on a private redis-server), in
rounds interleaved with its floor, each figure the median of per-round values:

- **invocation**: one successful call's store work, as the boundary does it: ``create``
  then ``complete`` of a READY record (kernel transitions included), wall time and
  client CPU time per invocation;
- **floor**: what two trips to the same store cost at the least, with the same sizes:
  PostgreSQL, two trivial prepared statements (``SELECT $1``, the request text and the
  record's size) in one round trip each; SQLite, two trivial transactions
  (``BEGIN IMMEDIATE; SELECT ?; COMMIT``) on the same file; Redis, two ``PING``;
- **durable floor** (rows ``sqlite/w``, ``postgres/w``): two trivial *writing*
  transactions (one small INSERT each), i.e. two durable commits: a create and a
  completion are two commits, so this is the floor of a durable store;
- **ratio** invocation / floor (wall time), what the store adds over its transport;
- **records/s with N processes** (``--processes``): N worker processes each creating and
  completing records in its own run on one shared store, total completed records per
  second of wall time.

Nothing here is asserted; the figures go to benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import redis

from invocation_store.adapters import RedisStore
from invocation_store.adapters.postgres import PostgresStore
from invocation_store.adapters.sqlite import SqliteStore
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    EvidenceStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    transition,
)
from invocation_store.testing._factories import drop_tables
from invocation_store.testing.postgres_server import postgres_server
from invocation_store.testing.redis_server import redis_server

LIMITS = Limits()
REQUEST = '{"query": "checkout 5xx since 09:00", "limit": 20}'
RAW = '{"lines": ["' + "x" * 400 + '"]}'


def _invoke(store: Any, run_id: str, index: int) -> None:
    """One successful invocation's store work: create, then complete a READY record."""
    admitted = store.create(
        AdmissionRequest(
            run_id=run_id,
            tool_call_id=f"call_{index}",
            tool_name="search",
            request_json=REQUEST,
            invocation_token=secrets.token_hex(8),
        ),
        LIMITS,
    )
    assert isinstance(admitted, Admission), admitted
    now = store.now_ms()
    raw = transition(admitted.record, RawReceived(raw_response=RAW, now_ms=now), LIMITS)
    projection = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="3 errors", scope="logs")
    done = transition(raw, ProjectionReceived(projection=projection, now_ms=now), LIMITS)  # type: ignore[arg-type]
    store.complete(admitted.record, done)  # type: ignore[arg-type]


def _open(store: Any, run_id: str, calls: int) -> None:
    store.open_run(
        run_id,
        deadline_ms=store.now_ms() + 3_600_000,
        ttl_ms=3_600_000,
        tool_call_budget=calls,
        byte_budget=10**12,
    )


def _per_op(operation: Callable[[int], object], ops: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for index in range(ops):
        operation(index)
    return (time.perf_counter() - wall) / ops, (time.process_time() - cpu) / ops


def measure(name: str, store: Any, floor: Callable[[], None], rounds: int, ops: int) -> dict[str, float]:
    """Median per-invocation wall/CPU time of the store and of its floor, interleaved round by round."""
    ours, floors, cpus = [], [], []
    for round_ in range(rounds):
        run_id = f"bench-{round_}-{secrets.token_hex(3)}"
        _open(store, run_id, ops)
        wall, cpu = _per_op(lambda index, run_id=run_id: _invoke(store, run_id, index), ops)
        ours.append(wall)
        cpus.append(cpu)
        floors.append(_per_op(lambda _index: floor(), ops)[0])
    result = {
        "invocation_us": statistics.median(ours) * 1e6,
        "cpu_us": statistics.median(cpus) * 1e6,
        "floor_us": statistics.median(floors) * 1e6,
    }
    result["ratio"] = result["invocation_us"] / result["floor_us"]
    print(
        f"{name:10} invocation {result['invocation_us']:8.0f} us (client CPU {result['cpu_us']:6.0f} us)   "
        f"floor {result['floor_us']:7.0f} us   invocation/floor {result['ratio']:5.2f}"
    )
    return result


# -- floors --------------------------------------------------------------------------


def sqlite_floor(path: str) -> Callable[[], None]:
    """Two trivial transactions on the same file (WAL, synchronous=FULL): BEGIN IMMEDIATE; SELECT; COMMIT."""
    import sqlite3  # noqa: PLC0415

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS floor (n INTEGER)")

    def floor() -> None:
        for text in (REQUEST, RAW):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("SELECT ?", (text,)).fetchall()
            conn.execute("COMMIT")

    return floor


def postgres_floor(dsn: str) -> Callable[[], None]:
    """Two trivial prepared statements (SELECT of the request, of a record-sized text), a round trip each."""
    conn = psycopg.connect(dsn, autocommit=True)

    def floor() -> None:
        conn.execute("SELECT %s::text", (REQUEST,), prepare=True).fetchall()
        conn.execute("SELECT %s::text", (RAW,), prepare=True).fetchall()

    return floor


def sqlite_durable_floor(path: str) -> Callable[[], None]:
    """Two trivial *writing* transactions (one small INSERT each): what two fsync'd commits cost."""
    import sqlite3  # noqa: PLC0415

    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS floor (t TEXT)")

    def floor() -> None:
        for text in (REQUEST, RAW):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO floor (t) VALUES (?)", (text,))
            conn.execute("COMMIT")

    return floor


def postgres_durable_floor(dsn: str) -> Callable[[], None]:
    """Two single-INSERT transactions (autocommit), each a durable commit at synchronous_commit=on."""
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("CREATE TABLE IF NOT EXISTS cis_bench_floor (t text)")

    def floor() -> None:
        conn.execute("INSERT INTO cis_bench_floor (t) VALUES (%s)", (REQUEST,), prepare=True)
        conn.execute("INSERT INTO cis_bench_floor (t) VALUES (%s)", (RAW,), prepare=True)

    return floor


def redis_floor(url: str) -> Callable[[], None]:
    """Two PINGs on one connection."""
    client = redis.Redis.from_url(url)

    def floor() -> None:
        client.ping()
        client.ping()

    return floor


# -- throughput with N processes -----------------------------------------------------------


def _opener(kind: str, target: str, prefix: str) -> Any:
    if kind == "sqlite":
        return SqliteStore(target, timeout_s=60.0)
    if kind == "postgres":
        return PostgresStore.from_dsn(target, max_size=1, prefix=prefix)
    return RedisStore.from_url(target, prefix=prefix)


def _worker(kind: str, target: str, prefix: str, seconds: float, counter: Any) -> None:
    store = _opener(kind, target, prefix)
    run_id = f"proc-{secrets.token_hex(4)}"
    _open(store, run_id, 10**6)
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _invoke(store, run_id, done)
        done += 1
    with counter.get_lock():
        counter.value += done
    store.close()


def throughput(kind: str, target: str, prefix: str, processes: int, seconds: float) -> float:
    """Completed records per second of wall time, ``processes`` workers on one shared store."""
    context = multiprocessing.get_context("spawn")
    counter = context.Value("q", 0)
    workers = [
        context.Process(target=_worker, args=(kind, target, prefix, seconds, counter))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    rate = counter.value / seconds
    print(f"{kind:10} {processes} processes: {rate:8.0f} records/s")
    return rate


@contextlib.contextmanager
def _sqlite_file() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="cis-bench-sql-") as directory:
        yield str(Path(directory) / "bench.db")


def main() -> None:
    """Measure every store and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    prefix = f"cis_bench_{secrets.token_hex(3)}_"
    with _sqlite_file() as path, postgres_server() as pg, redis_server() as url:
        sqlite_store = SqliteStore(path)
        measure("sqlite", sqlite_store, sqlite_floor(path + "-floor"), args.rounds, args.ops)
        measure("sqlite/w", sqlite_store, sqlite_durable_floor(path + "-floor2"), args.rounds, args.ops)
        postgres_store = PostgresStore.from_dsn(pg.dsn, prefix=prefix)
        measure("postgres", postgres_store, postgres_floor(pg.dsn), args.rounds, args.ops)
        measure("postgres/w", postgres_store, postgres_durable_floor(pg.dsn), args.rounds, args.ops)
        redis_store = RedisStore.from_url(url, prefix=prefix)
        measure("redis", redis_store, redis_floor(url), args.rounds, args.ops)
        for kind, target in (("sqlite", path), ("postgres", pg.dsn), ("redis", url)):
            throughput(kind, target, prefix, args.processes, args.seconds)
        for store in (sqlite_store, postgres_store, redis_store):
            store.close()
        drop_tables(pg.dsn, prefix)


if __name__ == "__main__":
    main()
