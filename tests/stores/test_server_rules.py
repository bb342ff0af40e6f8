"""Every server-check rule against fabricated replies of each server kind, independent of the local binary.

``judge_server`` decides on the replies to ``check_commands`` (INFO server, memory,
persistence, replication, COMMAND INFO); these tests hand it what Redis 5.0, 6.2, 7.0,
7.2 and Valkey answer, in both reply shapes redis-py produces (parsed dicts and raw INFO
text), so that each rule is held on every version whatever server CI happens to run.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.exceptions

from invocation_store.adapters import Durability, UnsafeServerError, UnsupportedRedisError
from invocation_store.adapters._redis_common import is_hello_failure, old_version_error, resp2_connection
from invocation_store.adapters._redis_server import (
    SCRIPT_WRITE_COMMANDS,
    check_commands,
    judge_hello,
    judge_hello_refused,
    judge_policy,
    judge_server,
    parse_info_text,
)

#: INFO server of each kind (Valkey reports a Redis-compatible redis_version besides its own).
SERVERS: dict[str, dict[str, str]] = {
    "redis-5.0": {"redis_version": "5.0.14"},
    "redis-6.2": {"redis_version": "6.2.14"},
    "redis-7.0": {"redis_version": "7.0.15"},
    "redis-7.2": {"redis_version": "7.2.5"},
    "valkey-8": {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.1.1"},
    "valkey-9": {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2"},
}
#: Which kinds have WAITAOF (Redis >= 7.2, Valkey).
HAS_WAITAOF = {"redis-5.0": False, "redis-6.2": False, "redis-7.0": False, "redis-7.2": True}
EVICTING = (
    "volatile-lru",
    "allkeys-lru",
    "volatile-lfu",
    "allkeys-lfu",
    "volatile-random",
    "allkeys-random",
    "volatile-ttl",
)


def _text(fields: dict[str, str], section: str) -> bytes:
    """``fields`` as raw INFO text, as a RESP2 probe or a pipeline without callbacks answers."""
    body = f"# {section}\r\n" + "".join(f"{name}:{value}\r\n" for name, value in fields.items())
    return body.encode()


def _replies(
    kind: str,
    *,
    durability: Durability | None = None,
    policy: str = "noeviction",
    aof: bool = False,
    replicas: int = 0,
    raw_text: bool = False,
) -> list[Any]:
    durability = durability or Durability()
    waitaof = HAS_WAITAOF.get(kind, True)
    server = SERVERS[kind]
    memory = {"maxmemory_policy": policy}
    persistence = {"aof_enabled": "1" if aof else "0"}
    replication: dict[str, Any] = {"role": "master", "connected_slaves": str(replicas)}
    for index in range(replicas):
        replication[f"slave{index}"] = (
            f"ip=127.0.0.1,port={7000 + index},state=online,offset=10,lag=0"
            if raw_text
            else {"ip": "127.0.0.1", "port": 7000 + index, "state": "online", "offset": 10, "lag": 0}
        )
    names = check_commands(durability)[-1][2:]
    commands = [None if name == "WAITAOF" and not waitaof else [name.lower(), -1] for name in names]
    sections = (server, memory, persistence, replication)
    if raw_text:
        infos: list[Any] = [
            _text(fields, name)
            for fields, name in zip(sections, ("Server", "Memory", "Persistence", "Replication"), strict=True)
        ]
    else:
        infos = list(sections)
    return [*infos, commands]


@pytest.mark.parametrize("raw_text", [False, True], ids=["parsed", "raw-text"])
@pytest.mark.parametrize("kind", list(SERVERS))
def test_the_version_rule(kind: str, raw_text: bool) -> None:
    """CIS-STORE-7: Redis 5.0 is refused with "requires Redis >= 6.2, found 5.0.14"; 6.2 and later,
    Valkey included, are accepted."""
    replies = _replies(kind, raw_text=raw_text)
    if kind == "redis-5.0":
        with pytest.raises(UnsupportedRedisError, match=r"requires Redis >= 6\.2, found 5\.0\.14"):
            judge_server(replies, durability=Durability(), allow_eviction=False)
    else:
        judge_server(replies, durability=Durability(), allow_eviction=False)


def test_the_version_is_judged_before_any_other_rule() -> None:
    """CIS-STORE-7: an old server is refused for its age even when it also breaks other rules."""
    replies = _replies("redis-5.0", policy="allkeys-lru", durability=Durability(aof=True))
    with pytest.raises(UnsupportedRedisError):
        judge_server(replies, durability=Durability(aof=True), allow_eviction=False)


@pytest.mark.parametrize(
    "message",
    [
        "ERR unknown command `HELLO`, with args beginning with: `3`, ",  # Redis 5.0
        "unknown command 'hello'",  # what redis-py surfaces from a terse server
        "ERR unknown command 'HELLO'",
    ],
)
def test_a_refused_hello_is_recognised_as_an_old_server(message: str) -> None:
    """CIS-DUR-8: a HELLO refused as an unknown command is an old server (then probed over RESP2);
    other failures are not, and the probe's INFO text decides the version."""
    assert is_hello_failure(redis.ResponseError(message))
    assert not is_hello_failure(redis.ResponseError("NOAUTH Authentication required."))
    assert not is_hello_failure(redis.ResponseError("ERR unknown command 'FOO'"))
    assert not is_hello_failure(redis.ConnectionError("unknown command hello"))
    old = old_version_error(_text(SERVERS["redis-5.0"], "Server"))
    assert old is not None
    assert "found 5.0.14" in str(old)
    assert old.permanent
    assert old_version_error(_text(SERVERS["redis-6.2"], "Server")) is None
    assert old_version_error(b"garbage") is None


@pytest.mark.parametrize("kind", [kind for kind in SERVERS if kind != "redis-5.0"])
@pytest.mark.parametrize("policy", EVICTING)
def test_the_eviction_policy_rule(kind: str, policy: str) -> None:
    """CIS-DUR-3: every evicting policy is refused naming it and the setting, on every version;
    allow_eviction=True accepts it; noeviction is accepted."""
    with pytest.raises(UnsafeServerError) as caught:
        judge_server(_replies(kind, policy=policy), durability=Durability(), allow_eviction=False)
    assert f"maxmemory-policy {policy} can evict" in caught.value.operator_text()
    assert "noeviction" in caught.value.operator_text()
    judge_server(_replies(kind, policy=policy), durability=Durability(), allow_eviction=True)
    judge_server(_replies(kind), durability=Durability(), allow_eviction=False)


def test_a_drifted_policy_is_named_as_changed_and_junk_is_never_echoed() -> None:
    """CIS-DUR-3, CIS-FAIL-5: a policy read again on a running server says it changed; a value that is
    not a policy name is not copied into the message."""
    with pytest.raises(UnsafeServerError, match=r"allkeys-lfu \(changed on the running server\)"):
        judge_policy({"maxmemory_policy": "allkeys-lfu"}, allow_eviction=False, drifted=True)
    with pytest.raises(UnsafeServerError) as caught:
        judge_policy({"maxmemory_policy": "x{secret}"}, allow_eviction=False)
    assert "secret" not in str(caught.value)
    judge_policy(b"# Memory\r\nmaxmemory_policy:noeviction\r\n", allow_eviction=False)
    with pytest.raises(ValueError, match=r"^NoPolicy$"):
        judge_policy({}, allow_eviction=False)


@pytest.mark.parametrize("kind", [kind for kind in SERVERS if kind != "redis-5.0"])
def test_the_aof_rules(kind: str) -> None:
    """CIS-DUR-2: Durability(aof=True) needs WAITAOF (refused naming the server's version where it is
    absent: Redis < 7.2) and appendonly yes (refused naming the setting otherwise)."""
    mode = Durability(aof=True)
    if not HAS_WAITAOF.get(kind, True):
        with pytest.raises(UnsafeServerError) as caught:
            judge_server(_replies(kind, durability=mode, aof=True), durability=mode, allow_eviction=False)
        version = SERVERS[kind]["redis_version"]
        assert f"this server is Redis {version}" in caught.value.operator_text()
        assert "Redis >= 7.2 or Valkey" in caught.value.operator_text()
        return
    with pytest.raises(UnsafeServerError, match="appendonly is off"):
        judge_server(_replies(kind, durability=mode, aof=False), durability=mode, allow_eviction=False)
    judge_server(_replies(kind, durability=mode, aof=True), durability=mode, allow_eviction=False)


def test_a_renamed_waitaof_on_a_server_that_has_it_is_a_missing_command() -> None:
    """CIS-DUR-6: on Redis 7.2 (which has WAITAOF) a missing WAITAOF was renamed or disabled."""
    mode = Durability(aof=True)
    replies = _replies("redis-7.2", durability=mode, aof=True)
    replies[-1] = [None if name == "WAITAOF" else [name, -1] for name in check_commands(mode)[-1][2:]]
    with pytest.raises(UnsafeServerError) as caught:
        judge_server(replies, durability=mode, allow_eviction=False)
    assert caught.value.operator_text().endswith(
        "lacks command(s) WAITAOF (renamed or disabled): the store's scripts and durability mode "
        "need them; restore them (rename-command in the server's configuration)"
    )


@pytest.mark.parametrize("command", SCRIPT_WRITE_COMMANDS)
def test_the_command_rule(command: str) -> None:
    """CIS-DUR-6: any command a script calls, missing, is refused by name."""
    replies = _replies("redis-7.0")
    replies[-1] = [None if name == command else [name, -1] for name in SCRIPT_WRITE_COMMANDS]
    with pytest.raises(UnsafeServerError, match=rf"\b{command}\b"):
        judge_server(replies, durability=Durability(), allow_eviction=False)


@pytest.mark.parametrize("raw_text", [False, True], ids=["parsed", "raw-text"])
@pytest.mark.parametrize("kind", [kind for kind in SERVERS if kind != "redis-5.0"])
def test_the_replica_rule(kind: str, raw_text: bool) -> None:
    """CIS-DUR-2: Durability(replicas=N) needs N online replicas on the first check (refused naming the
    count found); later checks (after NOSCRIPT: a failover) do not count them."""
    mode = Durability(replicas=2)
    with pytest.raises(UnsafeServerError, match=r"Durability\(replicas=2\).*has 1 online"):
        judge_server(
            _replies(kind, durability=mode, replicas=1, raw_text=raw_text),
            durability=mode,
            allow_eviction=False,
        )
    judge_server(
        _replies(kind, durability=mode, replicas=2, raw_text=raw_text), durability=mode, allow_eviction=False
    )
    judge_server(
        _replies(kind, durability=mode, replicas=0, raw_text=raw_text),
        durability=mode,
        allow_eviction=False,
        first=False,
    )
    offline = _replies(kind, durability=mode, replicas=2, raw_text=True)
    offline[3] = offline[3].replace(b"state=online", b"state=wait_bgsave", 1)
    with pytest.raises(UnsafeServerError, match="has 1 online"):
        judge_server(offline, durability=mode, allow_eviction=False)
    as_bytes = _replies(kind, durability=mode, replicas=2)  # a parser that keeps bytes keys
    as_bytes[3] = {
        **as_bytes[3],
        "slave0": {b"ip": b"127.0.0.1", b"state": b"online"},
        "slave1": {b"ip": b"127.0.0.1", b"state": b"wait_bgsave"},
    }
    with pytest.raises(UnsafeServerError, match="has 1 online"):
        judge_server(as_bytes, durability=mode, allow_eviction=False)


def test_replies_of_the_wrong_shape_are_refused() -> None:
    """An error reply is raised (after the version); a reply list of the wrong length is ValueError."""
    with pytest.raises(ValueError, match=r"^UnexpectedReply$"):
        judge_server(_replies("redis-7.0")[:-1], durability=Durability(), allow_eviction=False)
    replies = _replies("redis-7.0")
    replies[1] = redis.ResponseError("NOPERM")
    with pytest.raises(redis.ResponseError):
        judge_server(replies, durability=Durability(), allow_eviction=False)


# -- the version probe of a store that reads before it writes (CIS-STORE-7, CIS-DUR-8) ------------

#: What each server kind answers to ``HELLO`` without arguments (as redis-py hands it back raw:
#: a RESP3 map, or the flat RESP2 array), or the error it refuses it with.
HELLO_REPLIES: dict[str, Any] = {
    "redis-5.0": redis.ResponseError("unknown command `HELLO`, with args beginning with: "),
    "redis-6.0": redis.ResponseError("wrong number of arguments for 'hello' command"),
    "redis-6.2": {b"server": b"redis", b"version": b"6.2.14", b"proto": 3, b"mode": b"standalone"},
    "redis-7.0": [b"server", b"redis", b"version", b"7.0.15", b"proto", 2, b"mode", b"standalone"],
    "redis-7.2": {b"server": b"redis", b"version": b"7.2.5", b"proto": 3},
    "valkey-9": {b"server": b"valkey", b"version": b"9.1.2", b"proto": 3},
}
INFO_SERVER: dict[str, dict[str, str]] = {**SERVERS, "redis-6.0": {"redis_version": "6.0.16"}}
NOPERM = redis.exceptions.NoPermissionError("this user has no permissions to run the 'info' command")


@pytest.mark.parametrize("raw_text", [False, True], ids=["parsed", "raw-text"])
@pytest.mark.parametrize("kind", list(HELLO_REPLIES))
def test_the_version_probe_of_a_reading_store(kind: str, raw_text: bool) -> None:
    """CIS-STORE-7, CIS-DUR-8: a HELLO reply naming 6.2 or later (either shape) is accepted without
    INFO; a HELLO refused as unknown (Redis 5) or for want of arguments (Redis 6.0) sends the store to
    INFO server, whose version is named in the refusal."""
    hello = HELLO_REPLIES[kind]
    info = _text(INFO_SERVER[kind], "Server") if raw_text else INFO_SERVER[kind]
    if not isinstance(hello, Exception):
        assert judge_hello(hello) is True
        return
    assert judge_hello(hello) is False
    version = INFO_SERVER[kind]["redis_version"]
    with pytest.raises(UnsupportedRedisError, match=rf"requires Redis >= 6\.2, found {version}\)$"):
        judge_hello_refused(hello, info)


def test_a_refused_probe_without_info_falls_back_on_what_hello_told() -> None:
    """CIS-STORE-7, CIS-DUR-8: where INFO cannot name the version, the HELLO refusal decides: unknown,
    a server before 6.0 (refused, unless INFO was refused by an ACL, which only 6.0+ has: HELLO was
    renamed away); wanting arguments, 6.0 (refused); a HELLO reply naming an old version is refused; a
    reply without a version is ValueError."""
    unknown, wants_arguments = HELLO_REPLIES["redis-5.0"], HELLO_REPLIES["redis-6.0"]
    renamed_info = redis.ResponseError("unknown command `INFO`, with args beginning with: `server`, ")
    with pytest.raises(UnsupportedRedisError, match=r"found a version before 6\.0 \(no HELLO command\)"):
        judge_hello_refused(unknown, renamed_info)
    with pytest.raises(UnsupportedRedisError, match=r"found a version before 6\.0"):
        judge_hello_refused(unknown, b"garbage")
    judge_hello_refused(unknown, NOPERM)  # an ACL: 6.0 or later with HELLO renamed away
    with pytest.raises(UnsupportedRedisError, match=r"found 6\.0\)$"):
        judge_hello_refused(wants_arguments, NOPERM)
    with pytest.raises(UnsupportedRedisError, match=r"found 6\.0\)$"):
        judge_hello_refused(wants_arguments, renamed_info)
    judge_hello_refused(redis.ResponseError("NOPERM denied"), NOPERM)  # nothing tells: accepted
    judge_hello_refused(unknown, {"redis_version": "7.0.15"})  # INFO decides: HELLO renamed away
    with pytest.raises(UnsupportedRedisError, match=r"found 6\.0\.9\)$"):
        judge_hello({b"server": b"redis", b"version": b"6.0.9"})
    with pytest.raises(ValueError, match=r"^NoVersion$"):
        judge_hello({b"server": b"redis"})
    with pytest.raises(ValueError, match=r"^NoVersion$"):
        judge_hello(b"OK")


def test_an_info_reply_with_bytes_that_are_not_utf8_is_still_read() -> None:
    """CIS-DUR-3, CIS-DUR-8: INFO is read as UTF-8 with bad bytes replaced (a server name or an
    operator's config comment can hold any bytes), so the version and the policy are still found."""
    reply = b"# Server\r\nredis_version:7.0.15\r\nos:Linux \xff\xfe build\r\nmaxmemory_policy:noeviction\r\n"
    parsed = parse_info_text(reply)
    assert parsed["redis_version"] == "7.0.15"
    assert parsed["maxmemory_policy"] == "noeviction"
    assert parsed["os"] == "Linux \ufffd\ufffd build"
    assert parse_info_text(42) == {}


@pytest.mark.parametrize("raw_text", [False, True], ids=["parsed", "raw-text"])
@pytest.mark.parametrize(
    ("server", "named"),
    [
        ({"redis_version": "7.0.15"}, "Redis 7.0.15"),
        ({"redis_version": "6.2.14", "server_name": "redis"}, "Redis 6.2.14"),
        # a fork that calls itself valkey but reports a version without WAITAOF
        ({"redis_version": "7.0.4", "server_name": "valkey"}, "Valkey 7.0.4"),
    ],
)
def test_the_no_waitaof_refusal_names_the_server_as_it_reports_itself(
    server: dict[str, str], named: str, raw_text: bool
) -> None:
    """CIS-DUR-2: the refusal names the server as INFO's server_name calls it, with the
    redis_version the rule judged (the text an operator acts on)."""
    mode = Durability(aof=True)
    replies = _replies("redis-7.0", durability=mode, aof=True, raw_text=raw_text)
    replies[0] = _text(server, "Server") if raw_text else server
    with pytest.raises(UnsafeServerError) as caught:
        judge_server(replies, durability=mode, allow_eviction=False)
    assert f"this server is {named}: upgrade it" in caught.value.operator_text()


@pytest.mark.parametrize(
    ("client", "probes"),
    [
        (lambda: redis.Redis(protocol=2), False),
        (lambda: redis.Redis(protocol="2"), False),  # type: ignore[arg-type]  # a config file's string
        (lambda: redis.Redis(protocol=3), True),
        (redis.Redis, True),  # redis-py >= 8 defaults to RESP3: HELLO 3 on connect
        (lambda: redis.Redis.from_url("redis://127.0.0.1:1/0?protocol=2"), False),
        (lambda: redis.Redis.from_url("redis://127.0.0.1:1/0?protocol=3"), True),
    ],
    ids=["int-2", "str-2", "int-3", "default", "url-2", "url-3"],
)
def test_the_version_probe_connection_speaks_resp2_only_when_needed(client: Any, probes: bool) -> None:
    """CIS-DUR-8: a client that already speaks RESP2 needs no probe (None); any other client gets
    a fresh, unconnected connection of its pool's kind and address with protocol 2 and without
    RESP3-only options. Nothing is sent here."""
    pool = client().connection_pool
    connection = resp2_connection(pool)
    if not probes:
        assert connection is None
        return
    assert type(connection) is pool.connection_class
    assert connection.protocol == 2
    assert (connection.host, connection.port) == (
        pool.connection_kwargs.get("host", "localhost"),
        pool.connection_kwargs.get("port", 6379),
    )
    assert connection._sock is None  # not connected


def test_info_text_keeps_values_with_colons_and_skips_headers_and_blank_lines() -> None:
    """CIS-DUR-3: INFO text is split at the first colon only (an IPv6 replica address, a path), and
    section headers, comment lines (even holding a colon) and blank lines are not fields."""
    text = (
        b"# Replication\r\nrole:master\r\n\r\nslave0:ip=::1,port=7000,state=online\r\n"
        b"# Server\r\nexecutable:/usr/bin/redis-server\r\n"
        b"# A comment: with a colon\r\n"
    )
    assert parse_info_text(text) == {
        "role": "master",
        "slave0": "ip=::1,port=7000,state=online",
        "executable": "/usr/bin/redis-server",
    }


def test_version_6_2_0_exactly_is_accepted_on_every_path() -> None:
    """CIS-STORE-7, CIS-DUR-8: the oldest supported version itself is accepted by HELLO's reply, the
    HELLO-refused path and the RESP2 probe's reading; 6.1.9 is refused by both."""
    refusal = redis.exceptions.ResponseError("unknown command 'HELLO'")
    for oldest in ("6.2.0", "6.2"):  # with or without its patch number
        assert judge_hello({b"server": b"redis", b"version": oldest.encode()}) is True
        assert judge_hello({"server": "redis", "version": oldest}) is True
        judge_hello_refused(refusal, {"redis_version": oldest})
        assert old_version_error(f"# Server\r\nredis_version:{oldest}\r\n".encode()) is None
    with pytest.raises(UnsupportedRedisError, match=r"6\.1\.9"):
        judge_hello_refused(refusal, {"redis_version": "6.1.9"})
    assert isinstance(old_version_error(b"# Server\r\nredis_version:6.1.9\r\n"), UnsupportedRedisError)
