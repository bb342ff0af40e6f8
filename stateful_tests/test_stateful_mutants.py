"""The suite is not vacuous: every planted fault is caught (CIS-STATE-2)."""

from __future__ import annotations

import pytest

from invocation_store.testing import INVARIANTS, MUTANTS, MachineStats, make_invocation_machine

from ._support import CAUGHT, run_machine, violation_in


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_planted_fault_is_caught(name: str, request: pytest.FixtureRequest) -> None:
    """CIS-STATE-2: a store or boundary with one planted fault fails the machine, on its invariant."""
    mutant = MUTANTS[name]
    stats = MachineStats()
    machine = make_invocation_machine(mutant.store, boundary_factory=mutant.boundary, stats=stats)
    with pytest.raises(CAUGHT) as caught:
        run_machine(machine, "mutant", stats, request)
    violation = violation_in(caught.value)
    assert violation is not None, f"{name} failed the machine without an InvariantViolation: {caught.value!r}"
    assert violation.invariant in mutant.caught_by, f"{name} was caught by {violation.invariant}"


def test_every_invariant_catches_a_mutant() -> None:
    """CIS-STATE-2: each named invariant is the intended catcher of at least one planted fault."""
    intended = {mutant.caught_by[0] for mutant in MUTANTS.values()}
    assert set(INVARIANTS) <= intended, sorted(set(INVARIANTS) - intended)
