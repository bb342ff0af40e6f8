"""Test kit: a fake clock, a private redis-server launcher, the stateful machine and the simulator.

Ships inside the package so that anyone can verify their own store with it.
The stateful machine needs Hypothesis, the simulator fakeredis (with lupa); their
names are imported on first use, so that ``FakeClock`` works without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._clock import FakeClock

if TYPE_CHECKING:
    from ._factories import PostgresStoreFactory, RedisStoreFactory, SqliteStoreFactory
    from ._mutants import MUTANTS, Mutant
    from ._sim import (
        PLANTED_FAULTS,
        PROMISES,
        PlantedFault,
        SimulationResult,
        Violation,
        history_of,
        seed_schedule,
        seeds_to_find,
        shrink_failure,
        simulate,
    )
    from ._sim_schedule import DEPLOYMENTS, Deployment, HostSpec, RunSpec, Schedule, Step, schedules
    from .stateful import (
        INVARIANTS,
        MACHINE_LIMITS,
        InvariantViolation,
        InvocationMachine,
        MachineStats,
        make_invocation_machine,
    )

__all__ = [
    "DEPLOYMENTS",
    "INVARIANTS",
    "MACHINE_LIMITS",
    "MUTANTS",
    "PLANTED_FAULTS",
    "PROMISES",
    "Deployment",
    "FakeClock",
    "HostSpec",
    "InvariantViolation",
    "InvocationMachine",
    "MachineStats",
    "Mutant",
    "PlantedFault",
    "PostgresStoreFactory",
    "RedisStoreFactory",
    "RunSpec",
    "Schedule",
    "SimulationResult",
    "SqliteStoreFactory",
    "Step",
    "Violation",
    "history_of",
    "make_invocation_machine",
    "schedules",
    "seed_schedule",
    "seeds_to_find",
    "shrink_failure",
    "simulate",
]

_LAZY = {
    "INVARIANTS": ".stateful",
    "MACHINE_LIMITS": ".stateful",
    "InvariantViolation": ".stateful",
    "InvocationMachine": ".stateful",
    "MachineStats": ".stateful",
    "make_invocation_machine": ".stateful",
    "MUTANTS": "._mutants",
    "Mutant": "._mutants",
    "RedisStoreFactory": "._factories",
    **dict.fromkeys(
        (
            "PLANTED_FAULTS",
            "PROMISES",
            "PlantedFault",
            "SimulationResult",
            "Violation",
            "history_of",
            "seed_schedule",
            "seeds_to_find",
            "shrink_failure",
            "simulate",
        ),
        "._sim",
    ),
    **dict.fromkeys(
        ("DEPLOYMENTS", "Deployment", "HostSpec", "RunSpec", "Schedule", "Step", "schedules"),
        "._sim_schedule",
    ),
    "PostgresStoreFactory": "._factories",
    "SqliteStoreFactory": "._factories",
}


def __getattr__(name: str) -> Any:
    """Import the stateful kit's names on first use (they need Hypothesis)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
