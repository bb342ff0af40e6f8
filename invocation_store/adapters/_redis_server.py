"""What the Redis store demands of a server before its first write, and how it says no.

I/O-free, like ``_redis_core``: :func:`check_commands` lists the commands that
``check_server`` pipelines (after its ``SCRIPT LOAD`` s), and :func:`judge_server`
decides on their replies. A refusal is an exception whose message names the setting
and the way out, never a key, a URL or a reply (CIS-FAIL-5).

The demands (CIS-STORE-7, CIS-DUR-3, CIS-DUR-6, CIS-DUR-2):

- ``redis_version`` >= 6.2 (``INFO server``). A client speaking RESP3 to an older
  server fails its ``HELLO 3`` before any command runs; the adapters then ask the
  version over RESP2 (:func:`parse_info_text`) and refuse with the same error. A store
  that reads before it ever writes (a ``+@read`` user, ``inspect``) asks with
  :data:`VERSION_PROBE` instead, which needs no rights (:func:`judge_hello`,
  :func:`judge_hello_refused`), so an old server is refused on reads too.
- ``maxmemory_policy`` is ``noeviction`` (``INFO memory``, which managed services
  allow): every key the store writes has a TTL, so every ``volatile-*`` policy can
  evict records and runs, and every ``allkeys-*`` one can too. An evicted record lets
  a re-sent tool_call_id run its executor again; an evicted run fails its remaining
  calls. ``allow_eviction=True`` opts out, explicitly.
- Every command the scripts write with exists (``COMMAND INFO``): a script stopped
  by an unknown command at its second write would keep its first (Redis scripts have
  no rollback), so a server missing one (``rename-command``) is refused before any
  script runs.
- A durability mode that waits for the AOF needs ``WAITAOF`` (Redis >= 7.2, Valkey:
  refused naming the server's version otherwise) and ``appendonly yes`` (``INFO
  persistence``); one that waits for N replicas needs N replicas online (``INFO
  replication``) when the store starts (CIS-DUR-2).
- The policy is read again on a schedule (:data:`POLICY_CHECK_INTERVAL_MS`, and at
  every run open), so that an operator's ``CONFIG SET maxmemory-policy`` on a running
  server stops new creates within that window (:func:`judge_policy`).

Every message is written here from fixed text and values checked to be a version or
a policy name, so a log line may carry it (``StoreUnavailableError.operator_text``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import redis.exceptions
from attrs import field, frozen

from ..kernel import ErrorCode
from ._protocol import StoreUnavailableError
from ._redis_decode import MIN_VERSION, parse_version

__all__ = [
    "POLICY_CHECK_INTERVAL_MS",
    "SAFE_POLICIES",
    "SCRIPT_WRITE_COMMANDS",
    "VERSION_INFO",
    "VERSION_PROBE",
    "Durability",
    "UnsafeServerError",
    "UnsupportedRedisError",
    "check_commands",
    "judge_hello",
    "judge_hello_refused",
    "judge_policy",
    "judge_server",
    "parse_info_text",
]

#: ``maxmemory-policy`` values that never evict the store's keys (CIS-DUR-3).
SAFE_POLICIES: Final = frozenset({"noeviction"})

#: Every command a store script calls (reads too: a missing read fails before any
#: write, but is refused all the same), in ``COMMAND INFO`` order (CIS-DUR-6).
SCRIPT_WRITE_COMMANDS: Final = (
    "HSET",
    "HDEL",
    "HINCRBY",
    "PEXPIRE",
    "PEXPIREAT",
    "DEL",
    "RPUSH",
    "SET",
    "RENAME",
    "HMGET",
    "HGET",
    "HGETALL",
    "GET",
    "PTTL",
    "STRLEN",
    "EXISTS",
    "TYPE",
)


def _non_negative(_: object, attribute: object, value: int) -> None:
    if type(value) is not int or value < 0:
        raise ValueError("Durability counts and timeouts are non-negative ints")


@frozen(kw_only=True)
class Durability:
    """How far a run open and a create must have reached before the store answers (CIS-DUR-2).

    ``replicas``: replicas that must have acknowledged the write (``WAIT``);
    ``aof``: the write must also be fsynced to the local append-only file
    (``WAITAOF 1 <replicas>``, then the replicas' AOFs too); ``timeout_ms``: how long
    the server may wait, in integer ms (> 0). ``Durability()`` (0 replicas, no AOF)
    waits for nothing: the default, a write acknowledged by the master alone.
    A create that does not reach it in time is refused with DURABILITY_NOT_REACHED
    and its executor never runs.
    """

    replicas: int = field(default=0, validator=_non_negative)
    aof: bool = False
    timeout_ms: int = field(default=1_000, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        if type(self.aof) is not bool:
            raise TypeError("Durability.aof is a bool")
        if self.timeout_ms == 0 and self.waits:
            raise ValueError("a durability mode needs timeout_ms > 0 (0 would wait forever)")

    @property
    def waits(self) -> bool:
        """Whether any acknowledgement is awaited."""
        return self.replicas > 0 or self.aof

    def command(self) -> tuple[str, ...]:
        """The wait command to pipeline after a write (``WAIT`` or ``WAITAOF``); () if none."""
        if self.aof:
            return ("WAITAOF", "1", str(self.replicas), str(self.timeout_ms))
        if self.replicas:
            return ("WAIT", str(self.replicas), str(self.timeout_ms))
        return ()

    def reached(self, reply: object) -> bool:
        """Whether the wait command's ``reply`` shows the write reached this durability.

        ``WAIT`` answers the number of replicas that acknowledged; ``WAITAOF`` the pair
        (local fsyncs, replica fsyncs). Anything else is not reached.
        """
        if self.aof:
            if not isinstance(reply, list | tuple) or len(reply) != 2:
                return False
            local, replicas = reply
            return (
                isinstance(local, int)
                and isinstance(replicas, int)
                and local >= 1
                and replicas >= self.replicas
            )
        return isinstance(reply, int) and reply >= self.replicas


class UnsupportedRedisError(StoreUnavailableError):
    """The server is older than Redis 6.2, which the store requires (CIS-STORE-7).

    A :class:`StoreUnavailableError` whose message says ``requires Redis >= 6.2``
    and names the version found.
    """

    permanent = True

    def __init__(self, found: str) -> None:
        super().__init__(cause=f"requires Redis >= 6.2, found {found}")

    def operator_text(self) -> str:
        """The message, written by this module (the version is digits and dots)."""
        return self.cause


class UnsafeServerError(StoreUnavailableError):
    """The server is configured so that the store's guarantees would not hold (CIS-DUR-3, CIS-DUR-6).

    Code STORE_UNAVAILABLE; the message names the setting and how to fix it or opt
    out (e.g. ``maxmemory-policy allkeys-lru can evict the store's keys``).
    """

    permanent = True

    def __init__(self, reason: str) -> None:
        super().__init__(cause=reason, code=ErrorCode.STORE_UNAVAILABLE)
        self.reason = reason

    def operator_text(self) -> str:
        """The reason, written by this module from fixed text (policy names and versions checked)."""
        return self.reason


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("ascii", "replace")
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return None


def parse_info_text(text: object) -> dict[str, str]:
    """An unparsed ``INFO`` reply (``name:value`` lines) as a dict; {} for anything else."""
    body = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    if not isinstance(body, str):
        return {}
    pairs = (line.split(":", 1) for line in body.splitlines() if ":" in line and not line.startswith("#"))
    return {name.strip(): value.strip() for name, value in pairs}


#: How often, at most, a running store reads ``maxmemory-policy`` again before a create, in
#: integer ms; every run open reads it too (CIS-DUR-3). Also the longest a policy changed
#: on a running server admits creates unnoticed.
POLICY_CHECK_INTERVAL_MS: Final = 5_000

#: The replies :func:`check_commands` lists before ``COMMAND INFO``.
_INFO_SECTIONS: Final = ("server", "memory", "persistence", "replication")


def check_commands(durability: Durability) -> tuple[tuple[bytes | str, ...], ...]:
    """The commands ``check_server`` pipelines, in the order :func:`judge_server` reads their replies.

    ``INFO server``, ``memory``, ``persistence``, ``replication``, then ``COMMAND INFO``
    of every command the scripts and the durability mode call. ``COMMAND`` is sent as
    bytes so that redis-py hands back its raw reply (its own ``COMMAND`` parser fails
    on the nil of an unknown command).
    """
    return (
        *(("INFO", section) for section in _INFO_SECTIONS),
        (b"COMMAND", b"INFO", *_checked_commands(durability)),
    )


def _checked_commands(durability: Durability) -> tuple[str, ...]:
    if durability.aof:
        return (*SCRIPT_WRITE_COMMANDS, "WAITAOF")
    if durability.replicas:
        return (*SCRIPT_WRITE_COMMANDS, "WAIT")
    return SCRIPT_WRITE_COMMANDS


def _info(reply: object) -> Mapping[str, object]:
    if isinstance(reply, Mapping):
        return {str(_text(name)): value for name, value in reply.items()}
    return parse_info_text(reply)


def _server_name(server: Mapping[str, object]) -> str:
    """``Redis 7.0.15`` from ``INFO server``: the ``server_name`` it reports (``valkey``, or none
    for Redis) and its Redis-compatible ``redis_version``, the one the version rules judge."""
    kind = "Valkey" if _text(server.get("server_name")) == "valkey" else "Redis"
    return f"{kind} {_version_text(parse_version(server))}"


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


_POLICY_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz-")


def _policy(memory: Mapping[str, object]) -> str:
    """The ``maxmemory_policy`` value, or a fixed stand-in if it is not a policy name (never echoed)."""
    policy = _text(memory.get("maxmemory_policy"))
    if policy is None:
        raise ValueError("NoPolicy")
    return policy if 0 < len(policy) <= 32 and set(policy) <= _POLICY_CHARS else "(an unrecognised policy)"


def judge_policy(memory_reply: object, *, allow_eviction: bool, drifted: bool = False) -> None:
    """Refuse a ``maxmemory-policy`` that can evict the store's keys (CIS-DUR-3); None if it cannot.

    ``memory_reply`` is an ``INFO memory`` reply; ``drifted``: the policy was accepted
    before and changed on the running server (the message says so). Raises
    :class:`UnsafeServerError` naming the policy and the setting to change, or
    ``ValueError`` for a reply without a policy.
    """
    policy = _policy(_info(memory_reply))
    if policy in SAFE_POLICIES or allow_eviction:
        return
    when = " (changed on the running server)" if drifted else ""
    raise UnsafeServerError(
        f"maxmemory-policy {policy}{when} can evict the store's keys (every key has a TTL): "
        "set maxmemory-policy noeviction (CONFIG SET and the server's configuration file), or pass "
        "allow_eviction=True to accept that an evicted record lets its executor run again"
    )


def _online_replicas(replication: Mapping[str, object]) -> int:
    """Replicas attached and online, from ``INFO replication`` (parsed by redis-py or raw text)."""
    count = 0
    for name, value in replication.items():
        if not (name.startswith("slave") and name[5:].isdigit()):
            continue
        if isinstance(value, Mapping):
            state = _text(value.get("state") or value.get(b"state"))
        else:
            text = _text(value) or ""
            fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
            state = fields.get("state")
        count += state == "online"
    return count


def judge_server(
    replies: Sequence[object], *, durability: Durability, allow_eviction: bool, first: bool = True
) -> None:
    """Refuse a server that breaks a demand (module docstring); return None if it keeps them all.

    ``replies`` are the replies to :func:`check_commands`, in order (an exception
    stands for an error reply: the version is judged first, then it is raised).
    ``first``: the store's first check; later ones (after NOSCRIPT: a restarted or
    failed-over server) do not count replicas, which a failover leaves missing for a
    while (a create then misses the durability mode, DURABILITY_NOT_REACHED, rather
    than being refused as misconfigured). Raises :class:`UnsupportedRedisError`
    (version), :class:`UnsafeServerError` (eviction policy, a missing command, a
    durability mode the server cannot give: ``WAITAOF`` absent, the AOF off, too few
    replicas; each message names the setting to change) or ``ValueError`` for replies
    that are not what those commands answer.
    """
    if len(replies) != len(_INFO_SECTIONS) + 1:
        raise ValueError("UnexpectedReply")
    if isinstance(replies[0], Exception):
        raise replies[0]
    server = _info(replies[0])
    version = parse_version(server)
    if version < MIN_VERSION:  # first: an old server fails the other checks for being old
        raise UnsupportedRedisError(_version_text(version))
    for reply in replies[1:]:
        if isinstance(reply, Exception):
            raise reply
    memory, persistence, replication = (_info(reply) for reply in replies[1:4])
    commands = replies[4]
    judge_policy(memory, allow_eviction=allow_eviction)
    names = _checked_commands(durability)
    if not isinstance(commands, list | tuple) or len(commands) != len(names):
        raise ValueError("UnexpectedReply")
    missing = [str(name) for name, info in zip(names, commands, strict=True) if not info]
    if "WAITAOF" in missing and version < (7, 2) and server.get("valkey_version") is None:
        raise UnsafeServerError(
            f"Durability(aof=True) needs the WAITAOF command (Redis >= 7.2 or Valkey), and this server "
            f"is {_server_name(server)}: upgrade it, or use Durability(aof=False) with appendfsync always"
        )
    if missing:
        raise UnsafeServerError(
            f"the server lacks command(s) {', '.join(missing)} (renamed or disabled): the store's "
            "scripts and durability mode need them; restore them (rename-command in the server's "
            "configuration)"
        )
    if durability.aof and _text(persistence.get("aof_enabled")) != "1":
        raise UnsafeServerError(
            "Durability(aof=True) waits for the AOF, but appendonly is off: set appendonly yes "
            "(CONFIG SET appendonly yes and the server's configuration file), or use Durability(aof=False)"
        )
    if first and durability.replicas:
        online = _online_replicas(replication)
        if online < durability.replicas:
            raise UnsafeServerError(
                f"Durability(replicas={durability.replicas}) waits for {durability.replicas} replica(s), "
                f"but the server has {online} online: attach replicas (replicaof), or lower "
                "Durability.replicas"
            )


#: Sent before the first read of a store that has not checked the server (it has not
#: written yet): ``HELLO`` without arguments, which every connection may send whatever
#: its ACL rights (a ``+@read`` user too) and which leaves the connection's protocol as
#: it is. Redis >= 6.2 and Valkey answer with their ``version``; Redis 6.0 refuses it
#: for want of a protocol version; Redis < 6.0 does not know it (CIS-STORE-7, CIS-DUR-8).
#: Bytes, so that redis-py hands back the raw reply.
VERSION_PROBE: Final = (b"HELLO",)

#: Sent after a refused :data:`VERSION_PROBE`, to name the version (:func:`judge_hello_refused`).
VERSION_INFO: Final = ("INFO", "server")

#: What the refusal names when no reply tells the version of a server without ``HELLO``.
_BEFORE_HELLO: Final = "a version before 6.0 (no HELLO command)"


def _fields(reply: object) -> dict[str, object]:
    """A ``HELLO`` reply (a RESP3 map, or the flat RESP2 array of name, value pairs) as a dict."""
    if isinstance(reply, Mapping):
        return {str(_text(name)): value for name, value in reply.items()}
    if isinstance(reply, list | tuple) and len(reply) % 2 == 0:
        return {str(_text(name)): value for name, value in zip(reply[::2], reply[1::2], strict=True)}
    return {}


def judge_hello(reply: object) -> bool:
    """Judge the reply to :data:`VERSION_PROBE`: True if it names a supported server (CIS-STORE-7).

    False if the server refused ``HELLO`` (an error reply, as an exception):
    :func:`judge_hello_refused` then decides with the reply to :data:`VERSION_INFO`.
    Raises :class:`UnsupportedRedisError` if the reply names a version below 6.2, and
    ``ValueError`` for a reply that names none.
    """
    if isinstance(reply, Exception):
        return False
    version = parse_version({"redis_version": _fields(reply).get("version")})
    if version < MIN_VERSION:
        raise UnsupportedRedisError(_version_text(version))
    return True


def judge_hello_refused(refusal: Exception, info: object) -> None:
    """Decide on a server that refused :data:`VERSION_PROBE` with ``refusal``; None if it may be used.

    ``info`` is the reply to :data:`VERSION_INFO` (an exception for an error reply).
    An ``INFO`` that names the version decides: below 6.2 is refused naming it. An
    ``INFO`` refused by an ACL (``NOPERM``) shows a server with ACLs, so 6.0 or later:
    then a ``HELLO`` refused for want of arguments is 6.0 (refused), and any other
    refusal (``HELLO`` renamed away) leaves a server that may be used. An ``INFO`` that
    fails otherwise leaves the ``HELLO`` refusal to decide: unknown, a server older than
    6.0; wanting arguments, 6.0; anything else, a server that may be used. Raises
    :class:`UnsupportedRedisError` (CIS-STORE-7, CIS-DUR-8).
    """
    if not isinstance(info, Exception):
        try:
            version = parse_version(_info(info))
        except ValueError:
            version = None
        if version is not None:
            if version < MIN_VERSION:
                raise UnsupportedRedisError(_version_text(version))
            return
    text = str(refusal).lower()
    wants_arguments = "wrong number of arguments" in text
    if wants_arguments:
        raise UnsupportedRedisError("6.0")
    if "unknown command" in text and not isinstance(info, redis.exceptions.NoPermissionError):
        raise UnsupportedRedisError(_BEFORE_HELLO)
