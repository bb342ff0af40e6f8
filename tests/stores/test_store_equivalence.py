"""Differential test: every store flavour answers every operation alike (CIS-STORE-8).

A seeded random walk over runs, creates (with replayed and duplicate tokens),
completions (fresh, replayed, stale and refused), reads and clock jumps is applied to
the memory, async memory, Redis, async Redis and Redis Cluster stores with one shared
fake clock; every answer must equal the memory store's.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest

from invocation_store.adapters import InvocationStore
from invocation_store.kernel import (
    Admission,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Failed,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    transition,
)
from invocation_store.testing import FakeClock

from ._support import StoreDriver, request

#: Fake milliseconds per "second" of the walk. Redis expires keys on its own (real) clock, at the
#: TTL the fake clock gave them: TTLs of minutes keep a slow, loaded run's real time from ever
#: expiring a key the fake clock still holds live, while clock jumps still cross every expiry.
_SCALE = 60_000

RUNS = ("run-a", "run-b")
CALLS = ("call_1", "call_2", "toolu_3", "functions.f:4")
TOKENS = ("tok-1", "tok-2", "tok-3")
LIMITS = Limits(raw_bytes=64, agent_result_bytes=32, record_bytes=400)


def _event(rng: random.Random, record: CanonicalRecord, now: int) -> CanonicalRecord | ErrorCode:
    choice = rng.randrange(4)
    if choice == 0:
        size = rng.choice((3, 40, 70))  # 70 is over raw_bytes: ERROR/RESULT_TOO_LARGE
        return transition(record, RawReceived(raw_response="r" * size, now_ms=now), LIMITS)
    if choice == 1:
        evidence = rng.choice((EvidenceStatus.EVIDENCE_FOUND, EvidenceStatus.NO_EVIDENCE, "BOGUS"))
        base = record
        if base.raw_response is None:
            raw = transition(base, RawReceived(raw_response="raw", now_ms=now), LIMITS)
            if isinstance(raw, ErrorCode):
                return raw
            base = raw
        projection = Projection(evidence_status=evidence, content="c" * rng.choice((1, 40)), scope="s")
        return transition(base, ProjectionReceived(projection=projection, now_ms=now), LIMITS)
    if choice == 2:
        return transition(record, Failed(code=ErrorCode.EXECUTION_FAILED, now_ms=now), LIMITS)
    return transition(record, Failed(code=ErrorCode.EXECUTION_TIMEOUT, now_ms=now), LIMITS)


def _step(
    rng: random.Random, stores: list[InvocationStore], clock: FakeClock, seen: list[CanonicalRecord]
) -> str:
    """Apply one random operation to every store; return its name; fail on any disagreement."""
    run = rng.choice(RUNS)
    tcid = rng.choice(CALLS)
    now = clock()
    op = rng.choices(range(11), weights=(4, 1, 6, 6, 6, 8, 8, 8, 4, 3, 3))[0]
    calls: Callable[[InvocationStore], object]
    if op == 0:
        budget = rng.choice((2, 5))
        ttl = rng.choice((2 * _SCALE, 4 * _SCALE))
        # 16 and 24 bytes are two and three 8-byte requests: admissions land on used == budget.
        byte_budget = rng.choice((16, 24, 300))

        def calls(store: InvocationStore) -> object:
            return store.open_run(
                run,
                deadline_ms=now + 8 * _SCALE,
                ttl_ms=ttl,
                tool_call_budget=budget,
                byte_budget=byte_budget,
            )

        name = "open_run"
    elif op == 1:
        cancel = rng.random() < 0.5

        def calls(store: InvocationStore) -> object:
            return store.cancel_run(run) if cancel else store.close_run(run)

        name = "end_run"
    elif op in (2, 3, 4):
        req = request(tcid, run_id=run, invocation_token=rng.choice(TOKENS), arguments='{"n": 1}')

        def calls(store: InvocationStore) -> object:
            return store.create(req, LIMITS)

        name = "create"
    elif op in (5, 6, 7) and seen:
        pending = [record for record in seen[-8:] if not record.terminal]
        before = rng.choice(pending if pending and rng.random() < 0.8 else seen[-6:])
        after = _event(rng, before, now)
        if isinstance(after, ErrorCode):
            return "skip"

        def calls(store: InvocationStore) -> object:
            return store.complete(before, after)

        name = "complete"
    elif op == 8:
        include_raw = rng.random() < 0.5

        def calls(store: InvocationStore) -> object:
            return (
                store.get(run, tcid),
                dict(store.get_many(run, list(CALLS), include_raw=include_raw)),
                store.ttl_remaining_ms(run, tcid) is None,
            )

        name = "reads"
    elif op == 9:

        def calls(store: InvocationStore) -> object:
            return store.get_run(run), store.calls(run), store.completed(run)

        name = "run reads"
    else:
        clock.advance(rng.choice((0, 1, 10, 300, int(2.5 * _SCALE), 9 * _SCALE)))
        return "tick"
    results = [calls(store) for store in stores]
    assert all(result == results[0] for result in results), (name, results)
    result = results[0]
    if isinstance(result, Admission):
        seen.append(result.record)
        if result.run.bytes_used == result.run.byte_budget and not result.replayed:
            return f"{name}:admitted-at-byte-budget"
        return f"{name}:admitted"
    if isinstance(result, CanonicalRecord):
        seen.append(result)
        return f"{name}:written"
    return f"{name}:{result}" if isinstance(result, ErrorCode) else name


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_flavour_agrees_on_a_random_walk(
    make_every_driver: Callable[[FakeClock], list[StoreDriver]], clock: FakeClock, seed: int
) -> None:
    """CIS-STORE-8, CIS-LIFE-4, CIS-RUN-6: 400 random operations give identical answers on every flavour."""
    rng = random.Random(seed)
    stores: list[InvocationStore] = list(make_every_driver(clock))
    seen: list[CanonicalRecord] = []
    outcomes = Counter(_step(rng, stores, clock, seen) for _ in range(400))
    # The walk must really exercise the interesting paths, on both sides of each check.
    for outcome in (
        "create:admitted",
        "create:DUPLICATE_TOOL_CALL",
        "create:RUN_INACTIVE",
        "complete:written",
        "complete:INVALID_TRANSITION",
    ):
        assert outcomes[outcome] >= 3, outcomes
    # Both sides of the run byte budget: used + size == budget admitted, one byte more refused.
    assert outcomes["create:admitted-at-byte-budget"] >= 1, outcomes
    assert outcomes["create:RUN_BYTES_EXHAUSTED"] >= 1, outcomes
