"""Helpers of the stateful suite: per-store sizing and running a machine."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import Phase, settings
from hypothesis.errors import FlakyFailure
from hypothesis.stateful import run_state_machine_as_test

from invocation_store.testing import InvariantViolation, InvocationMachine, MachineStats

#: Units of the profile's ``max_examples`` each kind of machine runs.
SCALE = {
    "memory": 3.0,
    "async-memory": 0.5,
    "redis": 1.0,
    "async-redis": 0.5,
    "differential": 0.5,
    "sqlite": 0.5,
    "async-sqlite": 0.25,
    "differential-sql": 0.25,
    "postgres": 0.25,
    "async-postgres": 0.25,
    "differential-postgres": 0.25,
}
#: The most examples a planted fault may take to be caught (each takes far fewer).
MUTANT_EXAMPLES = 500


def machine_settings(kind: str) -> settings:
    """The loaded profile, sized for a machine of ``kind`` (a key of :data:`SCALE`)."""
    base = settings.default
    assert base is not None
    examples = max(5, int(base.max_examples * SCALE.get(kind, 1.0)))
    if kind == "mutant":
        # Deterministic under every profile, at most MUTANT_EXAMPLES examples, and
        # stopping at the first failure, unshrunk: the test only needs to see it caught.
        return settings(
            base,
            max_examples=MUTANT_EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
        )
    return settings(base, max_examples=examples, deadline=None)


def run_machine(machine: type[InvocationMachine], kind: str, stats: MachineStats, request: Any) -> None:
    """Run ``machine`` under :func:`machine_settings` and record its counters for the summary."""
    started = time.perf_counter()
    try:
        run_state_machine_as_test(machine, settings=machine_settings(kind))
    finally:
        elapsed = time.perf_counter() - started
        request.node.user_properties.append(
            ("stateful", (kind, stats.examples, stats.steps, stats.checks, round(elapsed, 2)))
        )


def violation_in(error: BaseException) -> InvariantViolation | None:
    """The InvariantViolation ``error`` is or wraps (Hypothesis may group or flag it flaky)."""
    if isinstance(error, InvariantViolation):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = violation_in(inner)
            if found is not None:
                return found
    return None


#: Errors a run of a planted fault may end with: a violation, or (racing threads) a
#: violation that did not reproduce on Hypothesis' final replay.
CAUGHT = (InvariantViolation, FlakyFailure)
