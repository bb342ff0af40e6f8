"""A settable clock for tests and the stateful machine (times in integer ms)."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """A callable clock returning integer ms; starts at ``start_ms``, moves only on :meth:`advance`."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        """The current fake time in ms."""
        return self.now

    def advance(self, delta_ms: int) -> int:
        """Move forward by ``delta_ms`` (>= 0) and return the new time; raises ``ValueError`` if negative."""
        if delta_ms < 0:
            raise ValueError("a clock never moves backwards")
        self.now += delta_ms
        return self.now
