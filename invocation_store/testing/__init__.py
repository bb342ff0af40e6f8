"""Test kit: a fake clock, a private redis-server launcher and the stateful machine.

Ships inside the package so that anyone can verify their own store with it.
"""

from ._clock import FakeClock

__all__ = ["FakeClock"]
