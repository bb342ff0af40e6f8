"""Helpers shared by the store tests: the shipped contract's driver and builders, and Redis probes.

:class:`StoreDriver` (from :mod:`invocation_store.testing.contract`) puts a store of any
flavour behind the synchronous :class:`InvocationStore` interface, so a contract test
is written once and runs on every flavour. The Redis probes below see what a Redis
store sent.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import redis

from invocation_store.adapters import call_key
from invocation_store.testing.contract import (
    DEADLINE_IN_MS,
    LIMITS,
    RUN,
    TTL_MS,
    MakeDriver,
    StoreDriver,
    admitted,
    failed,
    moved,
    open_default_run,
    ready,
    request,
    token,
    with_raw,
)

__all__ = [
    "DEADLINE_IN_MS",
    "EXPIRE_FAMILY",
    "LIMITS",
    "RUN",
    "TTL_MS",
    "MakeDriver",
    "StoreDriver",
    "admitted",
    "failed",
    "monitored",
    "moved",
    "name_and_key",
    "open_default_run",
    "ready",
    "record_key",
    "request",
    "token",
    "with_planted_script",
    "with_raw",
]

#: Commands that set, change or drop a key's expiry, or overwrite a value whole.
EXPIRE_FAMILY = frozenset(
    {"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "GETEX", "SET", "SETEX", "PSETEX", "GETSET"}
)


def with_planted_script(driver: StoreDriver, attribute: str, text: str, replacement: str) -> StoreDriver:
    """``driver`` with its Redis store's script ``attribute`` (e.g. ``"_create"``) changed.

    ``text`` (which must occur) is replaced by ``replacement``; call before the store's
    first operation, which loads the scripts. A planted fault for the reply checks.
    """
    store: Any = driver.store
    source = getattr(store, attribute).script
    assert text in source, (attribute, text)
    setattr(store, attribute, store._client.register_script(source.replace(text, replacement)))
    return driver


# -- Redis probes ------------------------------------------------------------------------


def record_key(prefix: str, run_id: str, tool_call_id: str) -> str:
    """The kernel's key of a record."""
    return call_key(prefix, run_id, tool_call_id)


@contextlib.contextmanager
def monitored(url: str) -> Iterator[list[dict[str, Any]]]:
    """Capture, with MONITOR, every command the server runs inside the block.

    The list is filled when the block ends (after a sentinel ECHO is seen), so read
    it after the ``with``. Each entry is redis-py's parsed MONITOR line, with
    ``client_type`` ``"lua"`` for commands a script ran. Use only on a server the
    tests started (``private_redis_url``).
    """
    commands: list[dict[str, Any]] = []
    sentinel = f"cis-sentinel-{secrets.token_hex(6)}"
    with redis.Redis.from_url(url) as watcher, redis.Redis.from_url(url) as client:
        client.ping()  # connect (HELLO, CLIENT SETINFO) before MONITOR starts
        with watcher.monitor() as monitor:
            yield commands
            client.echo(sentinel)
            while True:
                entry = monitor.next_command()
                if sentinel in entry["command"]:
                    break
                commands.append(entry)


def name_and_key(entry: dict[str, Any]) -> tuple[str, str]:
    """(upper-case command name, first argument) of a MONITOR entry."""
    parts = str(entry["command"]).split(" ")
    return parts[0].upper(), parts[1] if len(parts) > 1 else ""
