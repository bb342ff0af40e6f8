"""Adapters: the I/O half. Each applies what the kernel decided (CIS-STORE-1).

The Redis store and its settings load redis-py; they are imported on first use
(module ``__getattr__``), so the in-memory path never imports ``redis``. Every name
below is importable from here exactly as before.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._face import AsyncFace
from ._forwarding import AsyncForwardingStore, ForwardingStore
from ._protocol import AsyncInvocationStore, CorruptRecordError, InvocationStore, StoreUnavailableError
from ._reads import read_records, read_views, wanted_ids
from ._redis_keys import call_key, done_key, run_key
from .memory import AsyncMemoryStore, MemoryStore, wall_clock_ms

if TYPE_CHECKING:
    from .redis import (
        DEFAULT_PREFIX,
        AsyncRedisStore,
        Durability,
        RedisStore,
        RetryPolicy,
        UnsafeServerError,
        UnsupportedRedisError,
    )

__all__ = [
    "DEFAULT_PREFIX",
    "AsyncFace",
    "AsyncForwardingStore",
    "AsyncInvocationStore",
    "AsyncMemoryStore",
    "AsyncRedisStore",
    "CorruptRecordError",
    "Durability",
    "ForwardingStore",
    "InvocationStore",
    "MemoryStore",
    "RedisStore",
    "RetryPolicy",
    "StoreUnavailableError",
    "UnsafeServerError",
    "UnsupportedRedisError",
    "call_key",
    "done_key",
    "read_records",
    "read_views",
    "run_key",
    "wall_clock_ms",
    "wanted_ids",
]

#: Names that live in :mod:`.redis` (which imports redis-py), loaded on first use.
_LAZY: dict[str, str] = dict.fromkeys(
    (
        "DEFAULT_PREFIX",
        "AsyncRedisStore",
        "Durability",
        "RedisStore",
        "RetryPolicy",
        "UnsafeServerError",
        "UnsupportedRedisError",
    ),
    ".redis",
)


def __getattr__(name: str) -> Any:
    """Import a Redis name's module on first use, then keep the name here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
