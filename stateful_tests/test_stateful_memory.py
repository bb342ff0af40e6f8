"""The stateful machine on the in-memory stores (CIS-STATE-1)."""

from __future__ import annotations

import pytest
from hypothesis import seed, settings
from hypothesis.stateful import get_state_machine_test

from invocation_store.adapters import AsyncMemoryStore, MemoryStore
from invocation_store.kernel import ErrorCode
from invocation_store.testing import FakeClock, MachineStats, make_invocation_machine
from invocation_store.testing._vocabulary import NOT_CALL_OUTCOMES, OUTCOME_RULES

from ._support import run_machine


def test_memory_store_machine(request: pytest.FixtureRequest) -> None:
    """CIS-STATE-1, CIS-STORE-4, CIS-STORE-8: every invariant holds after every step on MemoryStore."""
    stats = MachineStats()
    run_machine(make_invocation_machine(MemoryStore, stats=stats), "memory", stats, request)
    assert stats.steps > 0


def test_async_memory_store_machine(request: pytest.FixtureRequest) -> None:
    """CIS-STATE-1, CIS-STORE-4: the invariants hold through AsyncToolBoundary on AsyncMemoryStore."""

    def factory(clock: FakeClock) -> AsyncMemoryStore:
        return AsyncMemoryStore(clock=clock)

    stats = MachineStats()
    run_machine(make_invocation_machine(factory, stats=stats), "async-memory", stats, request)
    assert stats.steps > 0


def test_machine_reaches_every_outcome() -> None:
    """CIS-STATE-2, CIS-BND-2, CIS-FAIL-1: the generated calls reach every outcome the boundary has.

    A machine whose rules never produced, say, a timeout would check its invariants
    on nothing. This runs batches under fixed seeds (whatever the profile), counts
    the kernel's expected outcome of every operation and requires each one.
    """
    assert set(NOT_CALL_OUTCOMES) < set(ErrorCode)
    wanted = {code.value for code in ErrorCode if code not in NOT_CALL_OUTCOMES} | {
        "READY/EVIDENCE_FOUND",
        "READY/NO_EVIDENCE",
        "sweep:swept",
        "complete:written",
        "complete:refused",
        "complete:replayed",
        "create:replayed",
        "race:contended",
        "cite:EVIDENCE",
        "cite:NEGATIVE_OBSERVATION",
        "progress:facts",
        "progress:omitted",
    }
    stats = MachineStats()
    machine = make_invocation_machine(MemoryStore, stats=stats)
    batch = settings(
        settings.default, derandomize=False, database=None, max_examples=60, stateful_step_count=50
    )
    for batch_seed in range(10):  # fixed seeds: deterministic, and stops as soon as all are seen
        seed(batch_seed)(get_state_machine_test(machine, settings=batch))()
        if wanted <= set(stats.outcomes):
            break
    missing = sorted(wanted - set(stats.outcomes))
    where = {code: OUTCOME_RULES.get(ErrorCode(code)) for code in missing if code in ErrorCode.__members__}
    assert missing == [], (
        f"outcomes never reached: {missing}; the rules that invocation_store/testing/_vocabulary.py "
        "names for them "
        f"(OUTCOME_RULES): {where}; reached: {dict(stats.outcomes)}"
    )
