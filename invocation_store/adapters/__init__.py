"""Adapters: the I/O half. Each applies what the kernel decided (CIS-STORE-1)."""

from ._face import AsyncFace
from ._forwarding import AsyncForwardingStore, ForwardingStore
from ._protocol import AsyncInvocationStore, CorruptRecordError, InvocationStore, StoreUnavailableError
from ._reads import read_records, read_views, wanted_ids
from ._redis_keys import call_key, done_key, run_key
from .memory import AsyncMemoryStore, MemoryStore, wall_clock_ms
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
