"""What truly differs between the Redis store flavours, written once per flavour.

``_async/redis.py`` is the one source of both Redis stores; ``scripts/unasync.py``
generates ``_sync/redis.py`` from it, turning every ``AsyncRedisFlavour`` into
:class:`RedisFlavour`. This module holds the few things that text substitution cannot
derive, because redis-py's blocking and asyncio cluster clients differ in shape:

- **Reaching every primary.** ``redis.cluster.RedisCluster`` hands out a blocking
  client per node, which pipelines the server checks in one round trip per primary.
  ``redis.asyncio.cluster.RedisCluster`` learns its topology only in ``initialize()``
  and its nodes offer no pipeline: each check is one command per primary (they run
  once, before the first write).
- **Waiting for durability on a cluster.** ``WAIT``/``WAITAOF`` count the writes of the
  connection they run on, so they must be pipelined behind the script on the
  connection of the node owning the run's slot. The blocking cluster client gives that
  node's client (:meth:`RedisFlavour.node_client`); redis.asyncio's cluster client
  has no pipeline on one node's connection, so the asyncio store refuses a waiting
  durability mode on a cluster client (:data:`AsyncRedisFlavour.WAITS_ON_CLUSTER`)
  when it is built, rather than waiting on the wrong connection.
- **A first clock reading** inside the synchronous ``now_ms``: the blocking store sends
  one ``TIME``; the asyncio store cannot wait there and answers the wall clock until
  its first round trip.
- **Sleeping** between retries: ``time.sleep`` or ``asyncio.sleep``; and redis-py's
  retry object that turns its own retries off (``redis.retry`` or ``redis.asyncio.retry``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeAlias, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.backoff import NoBackoff

__all__ = ["AsyncCommand", "AsyncRedisFlavour", "AsyncSend", "Command", "RedisFlavour", "Send"]

#: One node's replies to a list of commands (error replies as values, not raised).
Replies = list[Any]


class RedisFlavour:
    """The blocking flavour (``redis.Redis``, ``redis.cluster.RedisCluster``)."""

    #: A durability mode that waits works on this flavour's cluster client (CIS-DUR-2).
    WAITS_ON_CLUSTER: Final = True

    @staticmethod
    def sleep(seconds: float) -> None:
        """Pause between retries."""
        time.sleep(seconds)

    @staticmethod
    def no_retry() -> redis.retry.Retry:
        """redis-py's retry object that never retries: the store's own budget retries (CIS-DUR-4)."""
        return redis.retry.Retry(NoBackoff(), 0)

    @staticmethod
    def on_primaries(
        cluster: redis.cluster.RedisCluster,
        pipelined: Callable[[redis.Redis], Replies],
        commands: Sequence[tuple[Any, ...]],
    ) -> list[Replies]:
        """``pipelined(node)`` on the client of every primary: one round trip per primary."""
        del commands  # pipelined knows them; the asyncio flavour sends them one by one
        primaries: Callable[[], list[Any]] = cluster.get_primaries  # untyped in redis-py
        return [pipelined(cluster.get_redis_connection(node)) for node in primaries()]

    @staticmethod
    def node_client(cluster: redis.cluster.RedisCluster, key: bytes | str) -> redis.Redis:
        """The client of the cluster node that owns ``key``'s slot."""
        node_of: Callable[[bytes | str], Any] = cluster.get_node_from_key  # untyped in redis-py
        return cluster.get_redis_connection(node_of(key))

    @staticmethod
    def time_reading(execute: Command, local_ms: Callable[[], float]) -> tuple[object, float, float]:
        """One ``TIME`` round trip for a clock with no reading yet: (reply, sent, received), local ms."""
        sent = local_ms()
        reply = execute("TIME")
        return reply, sent, local_ms()

    @staticmethod
    def relearn(cluster: redis.cluster.RedisCluster) -> None:
        """Learn the cluster's topology again (after a transient failure: a slot may have moved)."""
        cluster.nodes_manager.initialize()


class AsyncRedisFlavour:
    """The asyncio flavour (``redis.asyncio.Redis``, ``redis.asyncio.cluster.RedisCluster``)."""

    #: redis.asyncio's cluster client cannot pipeline a WAIT behind a write on one
    #: node's connection: a waiting durability mode is refused on it (CIS-DUR-2).
    WAITS_ON_CLUSTER: Final = False

    @staticmethod
    async def sleep(seconds: float) -> None:
        """Pause between retries without blocking the loop."""
        await asyncio.sleep(seconds)

    @staticmethod
    def no_retry() -> redis.asyncio.retry.Retry:
        """redis-py's asyncio retry object that never retries: the store's own budget retries (CIS-DUR-4)."""
        return redis.asyncio.retry.Retry(NoBackoff(), 0)

    @staticmethod
    async def on_primaries(
        cluster: redis.asyncio.cluster.RedisCluster,
        pipelined: Callable[[redis.asyncio.Redis], Awaitable[Replies]],
        commands: Sequence[tuple[Any, ...]],
    ) -> list[Replies]:
        """``commands`` on every primary, one command at a time (the asyncio nodes offer no pipeline).

        Error replies are kept as values, as a pipeline run with ``raise_on_error=False``
        keeps them, so that both flavours judge the same replies.
        """
        del pipelined  # no per-node client to pipeline on
        await cluster.initialize()
        everyone = []
        for node in cluster.get_primaries():
            replies: Replies = []
            for command in commands:
                try:
                    replies.append(await node.execute_command(*command))
                except redis.ResponseError as exc:
                    replies.append(exc)
            everyone.append(replies)
        return everyone

    @staticmethod
    def node_client(cluster: redis.asyncio.cluster.RedisCluster, key: bytes | str) -> redis.asyncio.Redis:
        """Never reached: the store refuses a waiting mode on this cluster client (WAITS_ON_CLUSTER)."""
        del cluster, key
        raise ValueError("a durability mode that waits is not supported on an asyncio cluster client")

    @staticmethod
    def time_reading(execute: AsyncCommand, local_ms: Callable[[], float]) -> None:
        """None: a synchronous ``now_ms`` cannot wait for the loop (the wall clock answers meanwhile)."""
        del execute, local_ms

    @staticmethod
    async def relearn(cluster: redis.asyncio.cluster.RedisCluster) -> None:
        """Learn the cluster's topology again (after a transient failure: a slot may have moved)."""
        await cluster.nodes_manager.initialize()


T = TypeVar("T")

#: A round trip the blocking store sends (and may resend): ``send()`` returns the reply.
Send: TypeAlias = Callable[[], T]

#: The same for the asyncio store: ``await send()`` returns the reply.
AsyncSend: TypeAlias = Callable[[], Awaitable[T]]

#: redis-py's ``execute_command`` of a blocking client (untyped there).
Command: TypeAlias = Callable[..., object]

#: redis-py's ``execute_command`` of an asyncio client (untyped there).
AsyncCommand: TypeAlias = Callable[..., Awaitable[object]]
