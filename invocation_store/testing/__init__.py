"""Test kit: a fake clock, a private redis-server launcher and the stateful machine.

Ships inside the package so that anyone can verify their own store with it.
The stateful machine needs Hypothesis; its names are imported on first use, so
that ``FakeClock`` works without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._clock import FakeClock

if TYPE_CHECKING:
    from ._factories import PostgresStoreFactory, RedisStoreFactory, SqliteStoreFactory
    from ._mutants import MUTANTS, Mutant
    from .stateful import (
        INVARIANTS,
        MACHINE_LIMITS,
        InvariantViolation,
        InvocationMachine,
        MachineStats,
        make_invocation_machine,
    )

__all__ = [
    "INVARIANTS",
    "MACHINE_LIMITS",
    "MUTANTS",
    "FakeClock",
    "InvariantViolation",
    "InvocationMachine",
    "MachineStats",
    "Mutant",
    "PostgresStoreFactory",
    "RedisStoreFactory",
    "SqliteStoreFactory",
    "make_invocation_machine",
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
    "PostgresStoreFactory": "._factories",
    "SqliteStoreFactory": "._factories",
}


def __getattr__(name: str) -> Any:
    """Import the stateful kit's names on first use (they need Hypothesis)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
