"""Adapters: the I/O half. Each applies what the kernel decided (CIS-STORE-1)."""

from ._protocol import AsyncInvocationStore, InvocationStore, StoreUnavailableError
from .memory import AsyncMemoryStore, MemoryStore, wall_clock_ms

__all__ = [
    "AsyncInvocationStore",
    "AsyncMemoryStore",
    "InvocationStore",
    "MemoryStore",
    "StoreUnavailableError",
    "wall_clock_ms",
]
