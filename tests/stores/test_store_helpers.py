"""Store helpers read directly, with no server: the host's view of the database clock, and the
asyncio cluster flavour's per-primary commands (CIS-STORE-10, CIS-DUR-3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from invocation_store.adapters import _postgres_common
from invocation_store.adapters._postgres_common import DatabaseClock
from invocation_store.adapters._redis_flavour import AsyncRedisFlavour


def test_the_database_clock_is_the_host_clock_plus_the_last_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    """CIS-STORE-10: now_ms is the host clock plus the offset of the latest reading (the database
    5 s ahead, then 2 s behind), never decreasing; before any reading it refuses, saying so."""
    host = [1_000_000]
    monkeypatch.setattr(_postgres_common, "wall_clock_ms", lambda: host[0])
    clock = DatabaseClock()
    assert not clock.calibrated
    with pytest.raises(RuntimeError, match=r"^the database clock was never read$"):
        clock.now_ms()
    assert clock.observe(1_005_000) == 1_005_000  # the database is 5 s ahead of the host
    assert clock.calibrated
    assert clock.now_ms() == 1_005_000
    host[0] += 250
    assert clock.now_ms() == 1_005_250
    clock.observe(host[0] - 2_000)  # the host clock jumped: the database is now 2 s behind it
    assert clock.now_ms() == 1_005_250  # never backwards
    host[0] += 10_000
    assert clock.now_ms() == 1_010_250 - 2_000  # host + offset (-2 s), once past the last answer


class _Node:
    def __init__(self, refused: str | None) -> None:
        self.refused = refused

    async def execute_command(self, *command: Any) -> object:
        if command[0] == self.refused:
            raise redis.ResponseError(f"ERR unknown command '{self.refused}'")
        return f"{command[0]} ok"


class _Cluster:
    def __init__(self, *nodes: _Node) -> None:
        self.nodes = nodes
        self.initialized = False

    async def initialize(self) -> None:
        self.initialized = True

    def get_primaries(self) -> tuple[_Node, ...]:
        return self.nodes


def test_the_async_cluster_keeps_each_primarys_error_replies_as_values() -> None:
    """CIS-DUR-3: every command runs on every primary, in order; an error reply is kept in its
    place as the exception (as a pipeline with raise_on_error=False keeps it), so both flavours'
    server checks judge the same replies."""
    cluster: Any = _Cluster(_Node(None), _Node("CONFIG"))

    async def not_used(_client: object) -> list[object]:
        raise AssertionError("the asyncio nodes are not pipelined")

    replies = asyncio.run(
        AsyncRedisFlavour.on_primaries(cluster, not_used, [("INFO", "server"), ("CONFIG", "GET")])
    )
    assert cluster.initialized
    assert replies[0] == ["INFO ok", "CONFIG ok"]
    assert replies[1][0] == "INFO ok"
    refused = replies[1][1]
    assert isinstance(refused, redis.ResponseError)
    assert str(refused) == "ERR unknown command 'CONFIG'"
