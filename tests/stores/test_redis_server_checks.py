"""What the Redis store demands of a server on first use: version, eviction policy, commands, rights."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
import redis

from invocation_store.adapters import (
    AsyncRedisStore,
    RedisStore,
    StoreUnavailableError,
    UnsafeServerError,
    UnsupportedRedisError,
)
from invocation_store.adapters._redis_server import SCRIPT_WRITE_COMMANDS
from invocation_store.cli import main
from invocation_store.kernel import ErrorCode, RunState
from invocation_store.testing import FakeClock
from invocation_store.testing.redis_server import redis_server

from ._old_redis import TRANSCRIPT, answer, old_redis
from ._support import LIMITS, RUN, open_default_run, request

pytestmark = pytest.mark.redis

#: The commands the scripts write with (a subset of SCRIPT_WRITE_COMMANDS).
WRITE_COMMANDS = ("HSET", "HDEL", "HINCRBY", "PEXPIRE", "PEXPIREAT", "DEL", "RPUSH", "SET", "RENAME")


def _keys(url: str) -> list[bytes]:
    with redis.Redis.from_url(url) as client:
        return sorted(client.scan_iter(match="*"))


@pytest.mark.parametrize("policy", ["volatile-ttl", "allkeys-lru", "volatile-lru", "allkeys-random"])
def test_an_evicting_policy_is_refused_on_first_use(policy: str, clock: FakeClock) -> None:
    """CIS-DUR-3: under any evicting maxmemory-policy the first write is refused, naming the setting;
    nothing is written; reads still work; ``allow_eviction=True`` opts out explicitly."""
    with redis_server(extra_args=["--maxmemory", "64mb", "--maxmemory-policy", policy]) as url:
        store = RedisStore.from_url(url, clock=clock)
        with pytest.raises(UnsafeServerError) as caught:
            open_default_run(store, clock())
        assert f"maxmemory-policy {policy}" in str(caught.value)
        assert "allow_eviction=True" in str(caught.value)
        assert caught.value.code is ErrorCode.STORE_UNAVAILABLE
        with pytest.raises(UnsafeServerError):  # refused again, never cached as ready
            store.create(request("call_1"), LIMITS)
        assert store.get_run(RUN) is None  # reads need no check
        assert _keys(url) == []
        store.close()
        opted = RedisStore.from_url(url, clock=clock, allow_eviction=True)
        assert isinstance(open_default_run(opted, clock()), RunState)
        opted.close()

        async def async_side() -> None:
            refused = AsyncRedisStore.from_url(url, clock=clock, prefix="async")
            with pytest.raises(UnsafeServerError):
                await refused.open_run(
                    RUN, deadline_ms=clock() + 1000, ttl_ms=1000, tool_call_budget=1, byte_budget=100
                )
            await refused.close()
            allowed = AsyncRedisStore.from_url(url, clock=clock, prefix="async", allow_eviction=True)
            opened = await allowed.open_run(
                RUN, deadline_ms=clock() + 1000, ttl_ms=1000, tool_call_budget=1, byte_budget=100
            )
            assert isinstance(opened, RunState)
            await allowed.close()

        asyncio.run(async_side())


def test_noeviction_is_accepted(clock: FakeClock) -> None:
    """CIS-DUR-3: maxmemory with noeviction (and no maxmemory at all, the default) is accepted."""
    with redis_server(extra_args=["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"]) as url:
        store = RedisStore.from_url(url, clock=clock)
        assert isinstance(open_default_run(store, clock()), RunState)
        store.close()


@pytest.mark.parametrize("command", WRITE_COMMANDS)
def test_a_server_missing_a_script_command_is_refused_before_any_write(
    command: str, clock: FakeClock
) -> None:
    """CIS-DUR-6: a server with a command the scripts write with renamed away is refused on first
    use, naming the command, before any script runs: nothing is written, no key is left without TTL."""
    assert command in SCRIPT_WRITE_COMMANDS
    with redis_server(extra_args=["--rename-command", command, ""]) as url:
        store = RedisStore.from_url(url, clock=clock)
        with pytest.raises(UnsafeServerError) as caught:
            open_default_run(store, clock())
        assert command in str(caught.value)
        with pytest.raises(UnsafeServerError):
            store.create(request("call_1"), LIMITS)
        assert _keys(url) == []
        store.close()


# -- versions ----------------------------------------------------------------------


def _resp(command: tuple[bytes, ...]) -> bytes:
    return b"*%d\r\n" % len(command) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in command)


def test_the_fake_old_server_answers_as_redis_5_does() -> None:
    """The fake standing in for Redis 5.0.6 (when no real binary is given) answers every command of
    the transcript recorded from the real 5.0.6 with the same bytes; so does the server the version
    tests use, the real binary when INVOCATION_STORE_OLD_REDIS_SERVER names one (which keeps the
    recording honest) and the fake otherwise."""
    for command, reply in TRANSCRIPT:
        assert answer(list(command)) == reply, command
    assert b"\r\nredis_version:5.0.6\r\n" in answer([b"INFO", b"server"])
    with old_redis() as old, socket.create_connection((old.host, old.port), timeout=5) as conn:
        for command, reply in TRANSCRIPT:
            conn.sendall(_resp(command))
            received = b""
            while len(received) < len(reply) and (chunk := conn.recv(65536)):
                received += chunk
            assert received == reply, (old.real, command)


def test_an_unreachable_server_is_not_called_old(clock: FakeClock) -> None:
    """CIS-FAIL-5: a RESP3 client that cannot connect at all is STORE_UNAVAILABLE, not a version error."""
    store = RedisStore.from_url("redis://127.0.0.1:1/0?protocol=3", clock=clock, socket_connect_timeout=0.5)
    with pytest.raises(StoreUnavailableError) as caught:
        open_default_run(store, clock())
    assert not isinstance(caught.value, UnsupportedRedisError)
    store.close()


# -- read-only rights ----------------------------------------------------------------


def test_inspect_works_for_a_read_only_acl_user(capsys: pytest.CaptureFixture[str]) -> None:
    """CIS-DUR-9: ``inspect`` needs neither scripts nor INFO: a user granted only ``+@read`` lists a
    run (with and without raw sizes), while the same user cannot write (the store refuses)."""
    transcript = str(
        Path(__file__).resolve().parents[2] / "examples" / "transcripts" / "openai_responses.json"
    )
    run_id = "run-inc2031-responses"
    with redis_server() as url:
        assert main(["replay", "--json", transcript, "--redis-url", url, "--prefix", "acl"]) == 0
        capsys.readouterr()
        with redis.Redis.from_url(url) as admin:
            admin.acl_setuser(
                "reader", enabled=True, passwords=["+reader-pw"], keys=["acl:*"], commands=["-@all", "+@read"]
            )
        reader = url.replace("redis://", "redis://reader:reader-pw@")
        args = ["inspect", "--redis-url", reader, "--run", run_id, "--prefix", "acl", "--json"]
        assert main(args) == 0
        listing = json.loads(capsys.readouterr().out)
        assert len(listing["records"]) == 4
        assert listing["run"]["status"] == "CLOSED"
        assert main([*args, "--raw-sizes"]) == 0
        with_raw = json.loads(capsys.readouterr().out)
        assert all(row["raw_bytes"] is not None for row in with_raw["records"] if row["status"] == "READY")
        writer = RedisStore.from_url(reader, prefix="acl")
        with pytest.raises(StoreUnavailableError):
            writer.open_run("run-new", deadline_ms=10**12, ttl_ms=1000, tool_call_budget=1, byte_budget=10)
        writer.close()
