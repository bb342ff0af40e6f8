"""A slot moving between cluster nodes while its run is live: creates and completions succeed (CIS-DUR-4)."""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
import redis
from redis.cluster import RedisCluster

from invocation_store.adapters import RedisStore, RetryPolicy, StoreUnavailableError, call_key, run_key
from invocation_store.kernel import Admission, CanonicalRecord, ErrorCode, InvocationStatus
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import RedisServerUnavailableError, redis_cluster

from ._support import LIMITS, admitted, open_default_run, ready, request

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PREFIX = "mig"
RUN = "run-migrating"


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    """A private two-master cluster (its slots are moved by the tests)."""
    try:
        with redis_cluster(2) as urls:
            yield urls
    except RedisServerUnavailableError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no local Redis Cluster: {exc}", pytrace=False)
        pytest.skip(f"no local Redis Cluster: {exc}")


def _node_id(client: redis.Redis) -> str:
    value = client.cluster("MYID")
    return value.decode() if isinstance(value, bytes) else str(value)


def _keys_in_slot(client: redis.Redis, slot: int) -> list[bytes]:
    return list(client.cluster("GETKEYSINSLOT", slot, 1000))


class _Migration:
    """Moves one slot from ``source`` to ``target`` in two halves, as ``redis-cli --cluster reshard`` does."""

    def __init__(self, urls: list[str], slot: int, source_index: int) -> None:
        self.slot = slot
        self.source = redis.Redis.from_url(urls[source_index])
        self.target = redis.Redis.from_url(urls[1 - source_index])
        self.target_port = int(urls[1 - source_index].rsplit(":", 1)[1].split("/", 1)[0])
        self.source_id, self.target_id = _node_id(self.source), _node_id(self.target)

    def begin(self, first_keys: list[bytes]) -> None:
        """IMPORTING / MIGRATING, then move ``first_keys`` only: the run's keys are split over two nodes."""
        self.target.cluster("SETSLOT", self.slot, "IMPORTING", self.source_id)
        self.source.cluster("SETSLOT", self.slot, "MIGRATING", self.target_id)
        if first_keys:
            self.source.migrate("127.0.0.1", self.target_port, first_keys, 0, 5000)

    def finish(self) -> None:
        """Move the remaining keys and give the slot to the target on both nodes."""
        rest = _keys_in_slot(self.source, self.slot)
        if rest:
            self.source.migrate("127.0.0.1", self.target_port, rest, 0, 5000)
        for client in (self.target, self.source):
            client.cluster("SETSLOT", self.slot, "NODE", self.target_id)

    def close(self) -> None:
        self.source.close()
        self.target.close()


def _finish_after(migration: _Migration, delay_s: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay_s), migration.finish()), daemon=True)
    thread.start()
    return thread


def test_creates_and_completions_succeed_while_their_slot_migrates(cluster: list[str]) -> None:
    """CIS-DUR-4, CIS-KEY-2: with the run's slot MIGRATING and its keys split over two nodes, the node
    answers TRYAGAIN (the script cannot run); the store retries within its budget and the create and
    the completion both land once the reshard finishes, each exactly once."""
    clock = FakeClock()
    client = RedisCluster.from_url(cluster[0])
    store = RedisStore(client, prefix=PREFIX, clock=clock, retry_policy=RetryPolicy(budget_ms=5_000))
    try:
        open_default_run(store, clock(), run_id=RUN, tool_call_budget=5)
        first = admitted(store, request("call_1", run_id=RUN))
        slot = client.keyslot(run_key(PREFIX, RUN))
        owner = client.get_node_from_key(run_key(PREFIX, RUN))
        source_index = next(i for i, url in enumerate(cluster) if url.endswith(f":{owner.port}/0"))

        migration = _Migration(cluster, slot, source_index)
        migration.begin([run_key(PREFIX, RUN).encode()])  # the run moves first; its records not yet
        mover = _finish_after(migration, 0.5)
        started = time.monotonic()
        created = store.create(request("call_2", run_id=RUN), LIMITS)
        took = time.monotonic() - started
        mover.join()
        assert isinstance(created, Admission), created
        assert not created.replayed
        assert took >= 0.4  # it waited for the reshard, it did not fail fast
        assert _keys_in_slot(migration.target, slot)  # the slot now lives on the other node

        migration_back = _Migration(cluster, slot, 1 - source_index)
        migration_back.begin([call_key(PREFIX, RUN, "call_1").encode()])  # the record moves first
        mover = _finish_after(migration_back, 0.5)
        done = ready(first, clock())
        assert store.complete(first, done) == done
        mover.join()
        assert store.get(RUN, "call_1") == done
        assert store.calls(RUN) == ("call_1", "call_2")
        assert store.completed(RUN) == ("call_1",)
        for moved in (migration, migration_back):
            moved.close()
    finally:
        client.close()


def test_a_migration_longer_than_the_budget_is_store_unavailable(cluster: list[str]) -> None:
    """CIS-DUR-4: a slot stuck in MIGRATING for longer than the retry budget fails the create with
    STORE_UNAVAILABLE after about the budget, having written nothing; it succeeds once the reshard ends."""
    clock = FakeClock()
    client = RedisCluster.from_url(cluster[0])
    store = RedisStore(client, prefix=PREFIX, clock=clock, retry_policy=RetryPolicy(budget_ms=600))
    run = "run-stuck"
    try:
        open_default_run(store, clock(), run_id=run)
        admitted(store, request("call_1", run_id=run))
        slot = client.keyslot(run_key(PREFIX, run))
        owner = client.get_node_from_key(run_key(PREFIX, run))
        source_index = next(i for i, url in enumerate(cluster) if url.endswith(f":{owner.port}/0"))
        migration = _Migration(cluster, slot, source_index)
        migration.begin([run_key(PREFIX, run).encode()])
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            store.create(request("call_2", run_id=run), LIMITS)
        took = time.monotonic() - started
        assert caught.value.code is ErrorCode.STORE_UNAVAILABLE
        assert 0.5 <= took < 5.0
        migration.finish()
        assert isinstance(store.create(request("call_2", run_id=run), LIMITS), Admission)
        assert store.calls(run) == ("call_1", "call_2")
        migration.close()
    finally:
        client.close()


def test_the_retry_schedule_doubles_up_to_its_cap() -> None:
    """CIS-DUR-4: pauses start at first_delay_ms and double up to max_delay_ms; times are non-negative
    int ms; the default budget is two seconds."""
    pauses = RetryPolicy().pauses_ms()
    assert [next(pauses) for _ in range(8)] == [5, 10, 20, 40, 80, 160, 200, 200]
    assert RetryPolicy().budget_ms == 2_000
    for bad in ({"budget_ms": -1}, {"first_delay_ms": 1.5}, {"max_delay_ms": -3}):
        with pytest.raises(ValueError):
            RetryPolicy(**bad)


#: ``redis-cli --cluster reshard`` pace asked for: one key moved every 50 ms.
RESHARD_PACE_S = 0.05
#: Workers invoking during the move: half create, half complete what was created.
CREATORS = 3
COMPLETERS = 3
#: Keys of another application in the run's slot (they share its hash tag), moved with it.
FOREIGN_KEYS = 60
#: What one key's MIGRATE (and the GETKEYSINSLOT before it) may add to the pace, in ms: the
#: documented budget counts the time per key, not the pause alone.
MIGRATE_ALLOWANCE_MS = 30


#: The reshard, run in a process of its own as ``redis-cli`` would be (a thread of the test process
#: would share its interpreter lock with the workload): IMPORTING / MIGRATING, then one MIGRATE per key
#: every ``pace`` s, then the slot to the target on both nodes. argv: source URL, target URL, slot,
#: pace. Prints two JSON lines: once the slot is MIGRATING, when (CLOCK_MONOTONIC, s) and the keys in
#: the slot then; at the end, the keys moved, when the last one was, and when the slot was the target's.
_RESHARD_SCRIPT = """
import json, sys, time
import redis
source, target = redis.Redis.from_url(sys.argv[1]), redis.Redis.from_url(sys.argv[2])
slot, pace = int(sys.argv[3]), float(sys.argv[4])
port = target.connection_pool.connection_kwargs["port"]
source_id, target_id = (c.cluster("MYID") for c in (source, target))
target.cluster("SETSLOT", slot, "IMPORTING", source_id)
source.cluster("SETSLOT", slot, "MIGRATING", target_id)
began = time.monotonic()
print(json.dumps({"began": began, "keys": source.cluster("COUNTKEYSINSLOT", slot)}), flush=True)
moved, last = 0, began
while keys := list(source.cluster("GETKEYSINSLOT", slot, 1)):
    source.migrate("127.0.0.1", port, keys, 0, 5000)
    moved, last = moved + 1, time.monotonic()
    time.sleep(pace)
for client in (target, source):
    client.cluster("SETSLOT", slot, "NODE", target_id)
print(json.dumps({"moved": moved, "last": last, "ended": time.monotonic()}), flush=True)
"""


def _reshard_in_a_process(
    source_url: str, target_url: str, slot: int, pace_s: float
) -> subprocess.Popen[str]:
    """Start :data:`_RESHARD_SCRIPT` moving ``slot`` key by key (read its JSON lines from stdout)."""
    return subprocess.Popen(
        [sys.executable, "-c", _RESHARD_SCRIPT, source_url, target_url, str(slot), str(pace_s)],
        stdout=subprocess.PIPE,
        text=True,
    )


def _neighbour(client: RedisCluster, run_id: str) -> str:
    """Another run id whose keys hash to the same slot as ``run_id``'s (another live run of the slot)."""
    slot = client.keyslot(run_key(PREFIX, run_id))
    return next(
        f"run-neighbour-{index}"
        for index in range(1_000_000)
        if client.keyslot(run_key(PREFIX, f"run-neighbour-{index}")) == slot
    )


class _Op(NamedTuple):
    """One store call of the workload: kind, run, call, start and end (monotonic s), outcome."""

    kind: str
    run_id: str
    tool_call_id: str
    started: float
    ended: float
    outcome: object


class _Workload:
    """Creators admit new calls in two runs of the slot; completers complete what they admitted.

    Every call is recorded as an :class:`_Op`; a StoreUnavailableError is an outcome (a lost call).
    """

    def __init__(self, store: RedisStore, clock: FakeClock, runs: tuple[str, ...]) -> None:
        self.store = store
        self.clock = clock
        self.runs = runs
        self.admitted: queue.Queue[CanonicalRecord] = queue.Queue()
        self.ops: list[_Op] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.created = itertools.count()

    def _call(self, kind: str, record_or_request: Any, send: Callable[[], object]) -> object:
        started = time.monotonic()
        try:
            outcome = send()
        except StoreUnavailableError as exc:
            outcome = exc
        with self.lock:
            self.ops.append(
                _Op(
                    kind,
                    record_or_request.run_id,
                    record_or_request.tool_call_id,
                    started,
                    time.monotonic(),
                    outcome,
                )
            )
        return outcome

    def create_one(self) -> None:
        index = next(self.created)
        req = request(f"live_{index}", run_id=self.runs[index % len(self.runs)])
        created = self._call("create", req, lambda: self.store.create(req, LIMITS))
        if isinstance(created, Admission):
            self.admitted.put(created.record)

    def complete_one(self, record: CanonicalRecord) -> None:
        done = ready(record, self.clock())
        self._call("complete", record, lambda: self.store.complete(record, done))

    def creator(self) -> None:
        while not self.stop.is_set():
            self.create_one()

    def completer(self) -> None:
        while not (self.stop.is_set() and self.admitted.empty()):
            try:
                record = self.admitted.get(timeout=0.05)
            except queue.Empty:
                continue
            self.complete_one(record)


def test_a_live_reshard_at_cli_pace_loses_no_call_within_the_documented_budget(cluster: list[str]) -> None:
    """CIS-DUR-4, CIS-KEY-2: the slot of two live runs (20 calls made in each) that also holds another
    application's keys is resharded one key per 50 ms, as ``redis-cli --cluster reshard`` paces it (in
    a process of its own), while three threads keep creating calls in both runs and three keep
    completing them. A script whose keys are split over the two nodes, or that writes a key not yet
    there, cannot run (ASK, then TRYAGAIN on the importing node), so every create and completion in
    flight waits until the whole slot has moved: the slot's keys when the move begins (CLUSTER
    COUNTKEYSINSLOT: every run's and every other key in it) x the time per key. With
    RetryPolicy.budget_ms set to that plus one second (the documented rule) no call is lost: creates
    and completions were in flight during the whole move, every create was admitted once, every
    completion written, every record READY. The move, the failures (none) and the added latency
    (median, max) are printed."""
    clock = FakeClock()
    client = RedisCluster.from_url(cluster[0])
    run = "run-reshard"
    neighbour = _neighbour(client, run)
    warm = RedisStore(client, prefix=PREFIX, clock=clock)
    for run_id in (run, neighbour):
        open_default_run(warm, clock(), run_id=run_id, tool_call_budget=10_000)
        for index in range(20):
            made = admitted(warm, request(f"warm_{index}", run_id=run_id))
            done = ready(made, clock())
            assert warm.complete(made, done) == done
    for index in range(FOREIGN_KEYS):
        client.set(f"other-app:{{{run}}}:{index}", "x" * 64)
    slot = client.keyslot(run_key(PREFIX, run))
    owner = client.get_node_from_key(run_key(PREFIX, run))
    source_index = next(i for i, url in enumerate(cluster) if url.endswith(f":{owner.port}/0"))
    source_url, target_url = cluster[source_index], cluster[1 - source_index]
    store_of = RedisStore(client, prefix=PREFIX, clock=clock)
    workload = _Workload(store_of, clock, (run, neighbour))
    for _ in range(2 * COMPLETERS):  # admitted before the move: completions in flight from its start
        workload.create_one()
    baseline = [op.ended - op.started for op in workload.ops]
    with redis.Redis.from_url(source_url) as source:
        keys = int(source.cluster("COUNTKEYSINSLOT", slot))
    own = 2 * (3 + 2 * 20) + 2 * COMPLETERS  # two runs of 20 READY calls; PROJECTING ones (no raw)
    assert keys == own + FOREIGN_KEYS  # the slot holds more than the runs' own keys
    # The documented budget: the slot's keys x the time per key (the pace plus what one MIGRATE and
    # the GETKEYSINSLOT before it take, MIGRATE_ALLOWANCE_MS), plus one second.
    budget_ms = int(keys * (RESHARD_PACE_S * 1000 + MIGRATE_ALLOWANCE_MS)) + 1_000
    workload.store = RedisStore(
        client, prefix=PREFIX, clock=clock, retry_policy=RetryPolicy(budget_ms=budget_ms)
    )
    workers = [threading.Thread(target=workload.creator, daemon=True) for _ in range(CREATORS)]
    workers += [threading.Thread(target=workload.completer, daemon=True) for _ in range(COMPLETERS)]
    mover = _reshard_in_a_process(source_url, target_url, slot, RESHARD_PACE_S)
    try:
        assert mover.stdout is not None
        start = json.loads(mover.stdout.readline())
        assert start["keys"] == keys  # nothing was written between the count and the move
        for worker in workers:  # the workload starts as the slot starts MIGRATING
            worker.start()
        out, _ = mover.communicate(timeout=budget_ms / 1000 + 60)
        assert mover.returncode == 0
        report = json.loads(out)
        began, ended = float(start["began"]), float(report["ended"])
        assert report["moved"] == keys
        time.sleep(0.3)  # calls after the move too
        workload.stop.set()
        for worker in workers:
            worker.join(timeout=budget_ms / 1000 + 10)
        assert not any(worker.is_alive() for worker in workers)
        moved_s = ended - began
        lost = [op for op in workload.ops if isinstance(op.outcome, StoreUnavailableError)]
        assert lost == [], (
            f"{len(lost)} calls lost (a slot of {keys} keys moved in {moved_s:.2f} s; budget {budget_ms} ms, "
            f"{budget_ms - 1000} ms of which for the move): {lost[:3]}"
        )
        during = [op for op in workload.ops if op.started < ended and op.ended > began]
        kinds = {kind: [op for op in during if op.kind == kind] for kind in ("create", "complete")}
        # Every worker had a call in flight from the start of the move (its thread started then) until
        # the last key had moved.
        for kind, workers_of_kind in (("create", CREATORS), ("complete", COMPLETERS)):
            spanning = [
                op for op in kinds[kind] if op.started <= began + 1.0 and op.ended >= float(report["last"])
            ]
            assert len(spanning) >= workers_of_kind, (kind, len(spanning))
        creates = [op for op in workload.ops if op.kind == "create"]
        completes = [op for op in workload.ops if op.kind == "complete"]
        assert all(isinstance(op.outcome, Admission) and not op.outcome.replayed for op in creates)
        assert len(completes) == len(creates)  # every admitted call completed
        assert all(
            isinstance(op.outcome, CanonicalRecord) and op.outcome.status is InvocationStatus.READY
            for op in completes
        )
        for run_id in (run, neighbour):
            ids = [op.tool_call_id for op in creates if op.run_id == run_id]
            records = workload.store.get_many(run_id, ids)
            assert all(r is not None and r.status is InvocationStatus.READY for r in records.values())
            assert sorted(workload.store.calls(run_id)[20:]) == sorted(ids)
        with redis.Redis.from_url(target_url) as target:
            assert int(target.cluster("COUNTKEYSINSLOT", slot)) >= keys
        longest = max(op.ended - op.started for op in workload.ops)
        assert longest * 1000 <= budget_ms + 500
        after = [op.ended - op.started for op in workload.ops if op.started >= ended]
        print(
            f"live reshard of a slot of {keys} keys ({own} of the two runs, {FOREIGN_KEYS} foreign) at "
            f"{RESHARD_PACE_S * 1000:.0f} ms/key: moved in {moved_s:.2f} s "
            f"({moved_s / keys * 1000:.0f} ms/key); "
            f"{CREATORS} creators + {COMPLETERS} completers: {len(creates)} creates, {len(completes)} "
            f"completions, 0 lost; in flight during the move: {len(kinds['create'])} creates "
            f"({_stats([op.ended - op.started for op in kinds['create']])}), {len(kinds['complete'])} "
            f"completions ({_stats([op.ended - op.started for op in kinds['complete']])}); outside the "
            f"move: before {_stats(baseline)}, after {_stats(after)}; budget {budget_ms} ms"
        )
    finally:
        workload.stop.set()
        if mover.poll() is None:
            mover.kill()
            mover.wait()
        client.close()


def _stats(latencies: list[float]) -> str:
    """``median X ms, max Y ms`` of latencies in s."""
    ordered = sorted(latencies)
    return f"median {ordered[len(ordered) // 2] * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"
