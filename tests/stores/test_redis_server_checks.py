"""What the Redis store demands of a server on first use: version, eviction policy, commands, rights."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
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


class _OldServer:
    """A RESP2-only server claiming Redis 5.0.14: HELLO is an unknown command, as in Redis 5."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self.hello_seen = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buffer += chunk
                while True:
                    parsed = _parse_command(buffer)
                    if parsed is None:
                        break
                    command, buffer = parsed
                    conn.sendall(self._answer(command))

    def _answer(self, command: list[bytes]) -> bytes:
        name = command[0].upper()
        if name == b"HELLO":
            self.hello_seen += 1
        if name == b"INFO":
            body = b"# Server\r\nredis_version:5.0.14\r\nredis_mode:standalone\r\n"
            return b"$%d\r\n%s\r\n" % (len(body), body)
        if name == b"PING":
            return b"+PONG\r\n"
        return b"-ERR unknown command '" + name.lower() + b"'\r\n"

    def close(self) -> None:
        self._stop = True
        self.sock.close()


def _parse_command(buffer: bytes) -> tuple[list[bytes], bytes] | None:
    if not buffer.startswith(b"*"):
        return None
    head, sep, rest = buffer.partition(b"\r\n")
    if not sep:
        return None
    items: list[bytes] = []
    for _ in range(int(head[1:])):
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep or len(rest) < int(size_line[1:]) + 2:
            return None
        size = int(size_line[1:])
        items.append(rest[:size])
        rest = rest[size + 2 :]
    return items, rest


@pytest.fixture
def old_server() -> Iterator[_OldServer]:
    server = _OldServer()
    yield server
    server.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_5_gets_the_minimum_version_error_over_resp2_and_resp3(
    old_server: _OldServer, protocol: int, clock: FakeClock
) -> None:
    """CIS-STORE-7, CIS-DUR-8: a Redis 5 server is refused with "requires Redis >= 6.2, found 5.0.14",
    also when the client speaks RESP3 (whose HELLO 3 Redis 5 rejects before any command runs)."""
    url = f"redis://127.0.0.1:{old_server.port}/0?protocol={protocol}"
    store = RedisStore.from_url(url, clock=clock)
    with pytest.raises(UnsupportedRedisError) as caught:
        open_default_run(store, clock())
    assert "requires Redis >= 6.2, found 5.0.14" in str(caught.value)
    store.close()

    async def async_side() -> str:
        async_store = AsyncRedisStore.from_url(url, clock=clock)
        try:
            await async_store.create(request("call_1"), LIMITS)
        except UnsupportedRedisError as exc:
            return str(exc)
        finally:
            await async_store.close()
        return "accepted"

    assert "requires Redis >= 6.2, found 5.0.14" in asyncio.run(async_side())
    assert (old_server.hello_seen > 0) is (protocol == 3)


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
