"""What the Redis store demands of a server before its first write, and how it says no.

I/O-free, like ``_redis_core``: :func:`check_commands` lists the commands that
``check_server`` pipelines (after its ``SCRIPT LOAD`` s), and :func:`judge_server`
decides on their replies. A refusal is an exception whose message names the setting
and the way out, never a key, a URL or a reply (CIS-FAIL-5).

The demands (CIS-STORE-7, CIS-DUR-3, CIS-DUR-6, CIS-DUR-2):

- ``redis_version`` >= 6.2 (``INFO server``). A client speaking RESP3 to an older
  server fails its ``HELLO 3`` before any command runs; the adapters then ask the
  version over RESP2 (:func:`parse_info_text`) and refuse with the same error.
- ``maxmemory_policy`` is ``noeviction`` (``INFO memory``, which managed services
  allow): every key the store writes has a TTL, so every ``volatile-*`` policy can
  evict records and runs, and every ``allkeys-*`` one can too. An evicted record lets
  a re-sent tool_call_id run its executor again; an evicted run fails its remaining
  calls. ``allow_eviction=True`` opts out, explicitly.
- Every command the scripts write with exists (``COMMAND INFO``): a script stopped
  by an unknown command at its second write would keep its first (Redis scripts have
  no rollback), so a server missing one (``rename-command``) is refused before any
  script runs.
- A durability mode that waits for the AOF needs ``WAITAOF`` (Redis >= 7.2, Valkey)
  and ``appendonly yes`` (``INFO persistence``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from attrs import field, frozen

from ..kernel import ErrorCode
from ._protocol import StoreUnavailableError
from ._redis_core import MIN_VERSION, parse_version

__all__ = [
    "SAFE_POLICIES",
    "SCRIPT_WRITE_COMMANDS",
    "Durability",
    "UnsafeServerError",
    "UnsupportedRedisError",
    "check_commands",
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

    def __init__(self, found: str) -> None:
        super().__init__(cause=f"requires Redis >= 6.2, found {found}")


class UnsafeServerError(StoreUnavailableError):
    """The server is configured so that the store's guarantees would not hold (CIS-DUR-3, CIS-DUR-6).

    Code STORE_UNAVAILABLE; the message names the setting and how to fix it or opt
    out (e.g. ``maxmemory-policy allkeys-lru can evict the store's keys``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(cause=reason, code=ErrorCode.STORE_UNAVAILABLE)
        self.reason = reason


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


def check_commands(durability: Durability) -> tuple[tuple[bytes | str, ...], ...]:
    """The commands ``check_server`` pipelines, in the order :func:`judge_server` reads their replies.

    ``COMMAND`` is sent as bytes so that redis-py hands back its raw reply (its own
    ``COMMAND`` parser fails on the nil of an unknown command).
    """
    names: tuple[str, ...] = SCRIPT_WRITE_COMMANDS
    if durability.aof:
        names = (*names, "WAITAOF")
    elif durability.replicas:
        names = (*names, "WAIT")
    return (
        ("INFO", "server"),
        ("INFO", "memory"),
        ("INFO", "persistence"),
        (b"COMMAND", b"INFO", *names),
    )


def _info(reply: object) -> Mapping[str, object]:
    if isinstance(reply, Mapping):
        return {str(_text(name)): value for name, value in reply.items()}
    return parse_info_text(reply)


def judge_server(replies: Sequence[object], *, durability: Durability, allow_eviction: bool) -> None:
    """Refuse a server that breaks a demand (module docstring); return None if it keeps them all.

    ``replies`` are the replies to :func:`check_commands`, in order (an exception
    stands for an error reply: the version is judged first, then it is raised). Raises
    :class:`UnsupportedRedisError` (version), :class:`UnsafeServerError` (eviction
    policy, a missing command, no AOF for an AOF durability mode) or ``ValueError``
    for replies that are not what those commands answer.
    """
    if len(replies) != 4:
        raise ValueError("UnexpectedReply")
    if isinstance(replies[0], Exception):
        raise replies[0]
    version = parse_version(_info(replies[0]))
    if version < MIN_VERSION:  # first: an old server fails the other checks for being old
        raise UnsupportedRedisError(".".join(str(part) for part in version))
    for reply in replies[1:]:
        if isinstance(reply, Exception):
            raise reply
    memory, persistence = _info(replies[1]), _info(replies[2])
    commands = replies[3]
    policy = _text(memory.get("maxmemory_policy"))
    if policy is None:
        raise ValueError("NoPolicy")
    if policy not in SAFE_POLICIES and not allow_eviction:
        raise UnsafeServerError(
            f"maxmemory-policy {policy} can evict the store's keys (every key has a TTL): "
            "set maxmemory-policy noeviction, or pass allow_eviction=True to accept that an "
            "evicted record lets its executor run again"
        )
    names = check_commands(durability)[3][2:]
    if not isinstance(commands, list | tuple) or len(commands) != len(names):
        raise ValueError("UnexpectedReply")
    missing = [str(name) for name, info in zip(names, commands, strict=True) if not info]
    if missing:
        raise UnsafeServerError(
            f"the server lacks command(s) {', '.join(missing)} (renamed or disabled): the store's "
            "scripts need them to write a key and its TTL together"
        )
    if durability.aof and _text(persistence.get("aof_enabled")) != "1":
        raise UnsafeServerError("the durability mode waits for the AOF, but appendonly is off")
