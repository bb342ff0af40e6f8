"""What both Redis store flavours share outside their generated classes: defaults, failures, replies.

``_async/redis.py`` (the source) and ``_sync/redis.py`` (generated from it) import these
helpers; none does I/O. See :mod:`invocation_store.adapters.redis` for the stores.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Final

import redis

from . import _redis_decode as core
from ._redis_server import UnsupportedRedisError, parse_info_text

__all__ = [
    "DEFAULT_OPTIONS",
    "DEFAULT_PREFIX",
    "DEFAULT_TIMEOUT_S",
    "FAILURES",
    "LOG",
    "bad_url",
    "is_hello_failure",
    "nonce",
    "old_version_error",
    "raise_first_error",
    "report_corrupt",
    "report_failure",
    "resp2_connection",
    "server_ms",
    "socket_timeout_ms",
    "split_command",
]

#: Default key prefix (CIS-KEY-1).
DEFAULT_PREFIX: Final = "cis"

#: Socket and connect timeout of stores built by ``from_url``, in seconds.
DEFAULT_TIMEOUT_S: Final = 5.0
DEFAULT_OPTIONS: Final = {"socket_timeout": DEFAULT_TIMEOUT_S, "socket_connect_timeout": DEFAULT_TIMEOUT_S}


LOG = logging.getLogger("invocation_store.redis")
LOG.addHandler(logging.NullHandler())

# What a Redis round trip can raise that means "the store failed": redis-py errors
# (connection, timeout, response, data), socket errors and TimeoutError (OSError),
# encoding/decoding errors and corrupt replies (ValueError), and malformed replies.
FAILURES: Final = (redis.RedisError, OSError, ValueError, KeyError, IndexError, TypeError)


def report_failure(operation: str, exc: BaseException) -> str:
    cause = exc.cause if isinstance(exc, core.CorruptReplyError) else type(exc).__name__
    LOG.warning("redis store: %s failed (%s)", operation, cause)
    return cause


def report_corrupt(operation: str, run_id: str, corrupt: Mapping[str, str]) -> None:
    """Log each corrupt record of a read or write by run id, tool_call_id and cause label (CIS-DUR-7).

    Ids are safe ids (CIS-ID-2) and causes fixed labels: no key, payload or reply is logged.
    """
    for tool_call_id, cause in sorted(corrupt.items()):
        LOG.warning(
            "redis store: %s found record %s of run %s corrupt (%s): left as is, not retried",
            operation,
            tool_call_id,
            run_id,
            cause,
        )


def is_hello_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a server refusing ``HELLO`` as an unknown command: a server older than 6.0.

    redis-py (>= 8) opens every connection with ``HELLO 3`` unless told ``protocol=2``;
    Redis 5 answers ``ERR unknown command 'HELLO'`` (CIS-DUR-8). The text is read to
    classify the failure, never logged.
    """
    if not isinstance(exc, redis.ResponseError):
        return False
    text = str(exc).lower()
    return "unknown command" in text and "hello" in text


def old_version_error(reply: object) -> UnsupportedRedisError | None:
    """The UnsupportedRedisError for an unparsed ``INFO server`` reply naming a server below 6.2, else None.

    Returned, not raised, so that the store raises it outside any ``except`` block
    (no exception context travels with it, CIS-FAIL-5).
    """
    try:
        version = core.parse_version(parse_info_text(reply))
    except ValueError:
        return None
    if version < core.MIN_VERSION:
        return UnsupportedRedisError(".".join(str(part) for part in version))
    return None


def socket_timeout_ms(client: Any) -> float | None:
    """The socket timeout (ms) of ``client``'s connections, None if it has none or it cannot be told.

    A plain client keeps it in its pool's connection arguments; a cluster client in its
    nodes manager's. A waiting durability mode needs it longer than the wait (CIS-DUR-2).
    """
    for holder in (getattr(client, "connection_pool", None), getattr(client, "nodes_manager", None)):
        kwargs = getattr(holder, "connection_kwargs", None)
        if isinstance(kwargs, Mapping):
            value = kwargs.get("socket_timeout")
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value) * 1000
            return None
    return None


def server_ms(reply: object) -> int:
    """Milliseconds of a ``TIME`` reply (seconds, microseconds)."""
    if not isinstance(reply, list | tuple) or len(reply) != 2:
        raise core.CorruptReplyError("UnexpectedReply")
    seconds, micros = (int(part) for part in reply)
    return seconds * 1000 + micros // 1000


def raise_first_error(replies: Sequence[object]) -> None:
    """Raise the first error reply of a pipeline run with ``raise_on_error=False``."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


def resp2_connection(pool: Any) -> Any:
    """A fresh RESP2 connection (no ``HELLO``) of ``pool``'s kind, for a version probe; None if RESP2 already.

    A client opens connections with ``HELLO 3`` when it is built with ``protocol=3``
    and also when it is built with no protocol at all (redis-py >= 8 defaults to
    RESP3); only an explicit ``protocol=2`` client needs no probe. Maintenance
    notifications (a RESP3 feature) are left out of the probe.
    """
    kwargs = dict(pool.connection_kwargs)
    if str(kwargs.get("protocol")) == "2":
        return None
    for name in ("maint_notifications_pool_handler", "maint_notifications_config"):
        kwargs.pop(name, None)
    return pool.connection_class(**{**kwargs, "protocol": 2})


def nonce() -> str:
    """A fresh name part for a staging key (16 hex digits)."""
    return secrets.token_hex(8)


def split_command(
    command: tuple[bytes | str, ...],
) -> tuple[tuple[bytes | str, ...], tuple[bytes | str, ...]]:
    """A script call's (KEYS, ARGV) from numkeys, KEYS, ARGV."""
    count = int(command[0])
    return command[1 : 1 + count], command[1 + count :]


def bad_url() -> ValueError:
    return ValueError("not a usable Redis URL (expected redis://, rediss:// or unix://)")
