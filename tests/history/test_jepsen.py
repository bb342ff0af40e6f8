"""The project's own stores, tested as Jepsen would (issue 14, point 2).

Worker threads (and, against Redis, worker processes) drive boundaries over one
shared store; every store operation is recorded as a history, faults are injected
into a Redis server this test started, and the history must be linearizable with
respect to the kernel. A store with a planted race must be caught.

Sizes: the default run takes well under a minute; set
``INVOCATION_STORE_JEPSEN=long`` for the long profile (more workers, ten times the
steps).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from invocation_store.adapters import MemoryStore, RedisStore
from invocation_store.cli import main
from invocation_store.history import HistoryReport, check_history_lines, decode_history
from invocation_store.testing._jepsen import (
    CLOCK_MS,
    FAULTS,
    AofRedisServer,
    Workload,
    redis_worker_options,
    run_workload,
)
from invocation_store.testing._racy import RacyCreateStore
from invocation_store.testing.redis_server import RedisServerUnavailableError

from ._build import assert_race_window

LONG = os.environ.get("INVOCATION_STORE_JEPSEN") == "long"
MEMORY = Workload(threads=12, steps=2_000) if LONG else Workload(threads=8, steps=200)
REDIS = Workload(threads=6, processes=4, steps=1_000) if LONG else Workload(threads=4, processes=2, steps=200)


def _check(path: Path) -> HistoryReport:
    with path.open("rb") as stream:
        return check_history_lines(stream)


def test_memory_store_history_is_linearizable(tmp_path: Path) -> None:
    """CIS-HIST-3, CIS-STORE-4: concurrent boundaries over one MemoryStore leave a linearizable history."""
    store = MemoryStore(lambda: CLOCK_MS)
    path = tmp_path / "memory.jsonl"
    run_workload(path, lambda _process: store, MEMORY)
    report = _check(path)
    assert report.violation is None, report.violation.render()
    assert report.operations > MEMORY.threads * MEMORY.steps  # every boundary call is >= 1 store operation
    assert report.runs == MEMORY.runs


def test_planted_race_is_caught(tmp_path: Path) -> None:
    """CIS-HIST-3: a create done as a read then a write (RacyCreateStore) is found not linearizable,
    by the library and by ``invocation-store check-history`` (exit 1)."""
    found = None
    for attempt in range(5):  # the race needs an unlucky interleaving; it comes within one run in practice
        path = tmp_path / f"racy-{attempt}.jsonl"
        store = RacyCreateStore(lambda: CLOCK_MS)
        run_workload(path, lambda _process, store=store: store, Workload(threads=8, steps=80, seed=attempt))
        report = _check(path)
        if report.violation is not None:
            found = (path, report.violation)
            break
    assert found is not None, "five racy workloads all looked linearizable"
    path, violation = found
    assert violation.requirement == "CIS-HIST-2"
    assert_race_window(violation)
    assert main(["check-history", "--quiet", str(path)]) == 1


@pytest.fixture(scope="module")
def aof_server() -> Iterator[AofRedisServer]:
    """A private redis-server with AOF this module started (faults are only injected into it)."""
    try:
        server = AofRedisServer()
        server.__enter__()
    except RedisServerUnavailableError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no redis-server for the Jepsen test: {exc}", pytrace=False)
        pytest.skip(f"no redis-server for the Jepsen test: {exc}")
    try:
        yield server
    finally:
        server.__exit__(None, None, None)


@pytest.mark.redis
@pytest.mark.parametrize(
    "faults", [(), *((fault,) for fault in FAULTS), FAULTS], ids=lambda f: "+".join(f) or "none"
)
def test_redis_history_under_faults_is_linearizable(
    tmp_path: Path, aof_server: AofRedisServer, faults: tuple[str, ...]
) -> None:
    """CIS-HIST-3, CIS-RETRY-1, CIS-RETRY-2: threads and processes sharing one private Redis, under
    client timeouts with and without retries, SCRIPT FLUSH, DEBUG SLEEP, CLIENT KILL and a SIGKILL
    restart from the AOF, leave a history linearizable w.r.t. the kernel."""
    prefix = f"cis-jepsen-{secrets.token_hex(4)}"
    stores: list[RedisStore] = []

    def make(process: int) -> RedisStore:
        store = RedisStore.from_url(
            aof_server.url, prefix=prefix, clock=lambda: CLOCK_MS, **redis_worker_options(process)
        )
        stores.append(store)
        return store

    path = tmp_path / "redis.jsonl"
    restarts = aof_server.restarts
    try:
        counts = run_workload(
            path, make, REDIS, redis_url=aof_server.url, redis_prefix=prefix, faults=faults, server=aof_server
        )
    finally:
        for store in stores:
            store.close()
    report = _check(path)
    assert report.violation is None, report.violation.render()
    for fault in faults:  # the faults really happened
        assert counts[fault] >= 1, fault
    if "restart" in faults:
        assert aof_server.restarts > restarts
    assert report.operations > (REDIS.threads + REDIS.processes) * REDIS.steps
    with path.open("rb") as stream:  # every thread and every process wrote into the one history
        processes = {op.process for op in decode_history(stream).ops}
    assert processes >= set(range(REDIS.threads + REDIS.processes))
