"""A simulated Redis deployment: fakeredis nodes running the store's real Lua scripts, on simulated time.

Theory of operation
-------------------
Each node is a ``fakeredis`` server (a pure-Python implementation of Redis' commands)
whose scripts run in a real Lua interpreter (``lupa``): the store's own
``CREATE_SCRIPT``, ``COMPLETE_SCRIPT`` and the rest run exactly as on a Redis server,
so the adapter's planning and reply handling and the scripts' decisions are all in
the loop; nothing here restates a rule of the store. What fakeredis lacks, or what a
deployment adds, lives here, in :class:`SimRedisNode` and :class:`SimRedisDeployment`:

- **Time.** A node's clock (key expiry, ``TIME``, inside scripts too) is the
  simulation's clock: fakeredis' readings of ``time.time()`` are redirected to it while
  a node runs a command (:func:`simulated_server_time`).
- **Commands fakeredis does not answer:** ``INFO`` (the sections the store judges),
  ``HELLO`` without arguments (the version a store's first read checks: fakeredis would
  name its own),
  ``CONFIG GET/SET`` of the settings the simulation changes, ``WAIT`` and ``WAITAOF``
  (answered from the simulated replication and AOF), all blocking a connection on
  simulated time as the real server does.
- **Replication.** A write (any command that changed the data set) is propagated to the
  replica after a simulated delay, in order, unless the replication link is cut; the
  replica runs the same command at the master's time, so it reaches the same data.
  ``WAIT`` counts the replica when it has applied the connection's last write. Which
  writes count is the server's flavour: ``valkey`` (a connection's offset moves only when
  one of its commands propagated: a connection that wrote nothing is answered at once)
  or ``redis`` (the offset moves with every command, to the master's current offset).
- **Persistence.** ``none`` (a restart loses everything), ``everysec`` (the AOF is
  fsynced each simulated second: a restart loses what came after the last fsync;
  ``WAITAOF`` waits for the next one) or ``always`` (every write fsynced: nothing lost).
- **Faults.** A restart (connections reset, the node down for a while, the data as its
  persistence kept it, the script cache empty), a failover (the replica promoted with
  what it had applied; the old master's unreplicated suffix lost; it rejoins as a
  replica later), an eviction (a key deleted, as an evicting ``maxmemory-policy``
  would), memory full (writes refused with ``OOM``) and a configuration change
  (``maxmemory-policy`` set on the running server).

What a real server does that this does not model stays with the real-server tests:
the exact bytes of ``INFO``, RDB/AOF file formats, cluster topology and slot
migration, client output buffers, and every server's own ``WAIT`` corner cases beyond
the two flavours above.

Size: the node (its commands, replication, persistence) and the deployment (its faults)
are one model of a Redis server: splitting them would only pass their state around.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import time as _real_time
from collections.abc import Callable, Iterator
from typing import Any, Final

import fakeredis
import fakeredis._helpers
import fakeredis._socket._base
import fakeredis.commands_mixins.server_mixin
from fakeredis._helpers import SimpleError, SimpleString
from fakeredis._socket import FakeSocket

__all__ = [
    "PERSISTENCE",
    "SERVER_FLAVOURS",
    "SimRedisDeployment",
    "SimRedisNode",
    "encode_resp",
    "simulated_server_time",
]

#: How a node keeps its data across a restart.
PERSISTENCE: Final = ("none", "everysec", "always")
#: Which writes a connection's ``WAIT`` counts (module docstring).
SERVER_FLAVOURS: Final = ("redis", "valkey")

_EPOCH_MS: Final = 1_700_000_000_000


class _TimeShim:
    """Stands for the ``time`` module inside fakeredis: ``time()`` is the running node's clock."""

    def __init__(self) -> None:
        self.now_s: float | None = None
        self.on_time_command: Callable[[], None] | None = None

    def time(self) -> float:
        return _real_time.time() if self.now_s is None else self.now_s

    def __getattr__(self, name: str) -> Any:
        return getattr(_real_time, name)


class _TimeCommandShim(_TimeShim):
    """The ``time`` module of fakeredis' ``TIME`` command: reports each reading to the simulation."""

    def __init__(self, clock: _TimeShim) -> None:
        super().__init__()
        self._clock = clock

    def time(self) -> float:
        if self._clock.on_time_command is not None:
            self._clock.on_time_command()
        return self._clock.time()


_SHIM: Final = _TimeShim()
_TIME_COMMAND: Final = _TimeCommandShim(_SHIM)


@contextlib.contextmanager
def simulated_server_time() -> Iterator[_TimeShim]:
    """Redirect fakeredis' clock to the simulation for the scope (nodes set ``now_s`` per command)."""
    patched = (
        (fakeredis._socket._base, _SHIM),
        (fakeredis._helpers, _SHIM),
        (fakeredis.commands_mixins.server_mixin, _TIME_COMMAND),
    )
    saved = [(module, module.time) for module, _ in patched]
    for module, shim in patched:
        module.time = shim  # type: ignore[attr-defined]
    try:
        yield _SHIM
    finally:
        for module, original in saved:
            module.time = original  # type: ignore[attr-defined]
        _SHIM.now_s = None
        _SHIM.on_time_command = None


def encode_resp(value: object) -> bytes:
    """A fakeredis reply as RESP2 bytes (what a server writes on the socket)."""
    if isinstance(value, SimpleString):
        return b"+" + value.value + b"\r\n"
    if isinstance(value, SimpleError):
        return b"-" + value.value.replace("\r", " ").replace("\n", " ").encode() + b"\r\n"
    if value is None:
        return b"$-1\r\n"
    if isinstance(value, bool):
        return b":%d\r\n" % int(value)
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, float):
        value = repr(value).encode()
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes):
        return b"$%d\r\n%s\r\n" % (len(value), value)
    if isinstance(value, dict):
        items: list[object] = []
        for key, item in value.items():
            items.extend((key, item))
        value = items
    if isinstance(value, list | tuple | set):
        return b"*%d\r\n" % len(value) + b"".join(encode_resp(item) for item in value)
    raise TypeError(f"no RESP2 form for {type(value).__name__}")


#: Commands handled by the node itself (fakeredis answers none of them as a server would).
_NODE_COMMANDS: Final = frozenset({b"info", b"wait", b"waitaof", b"config", b"command"})
#: Commands ``COMMAND INFO`` reports as present (what the store's scripts and waits use).
_KNOWN: Final = frozenset(
    {
        "hset",
        "hdel",
        "hincrby",
        "pexpire",
        "pexpireat",
        "del",
        "rpush",
        "set",
        "rename",
        "hmget",
        "hget",
        "hgetall",
        "get",
        "pttl",
        "strlen",
        "exists",
        "type",
        "wait",
        "waitaof",
        "time",
        "lrange",
        "evalsha",
        "eval",
    }
)
#: Commands refused while memory is full (they may write).
#: The commands whose ``TIME`` readings are decisions (reported through ``on_time``).
_SCRIPTS: Final = frozenset({b"eval", b"evalsha", b"eval_ro", b"evalsha_ro", b"fcall", b"fcall_ro"})
#: The plain reads a store's read path sends (for ``on_read``: the time a read decided at).
_READS: Final = frozenset(
    {b"get", b"mget", b"hget", b"hmget", b"hgetall", b"lrange", b"llen", b"pttl", b"exists"}
)
#: The commands a client's request can take effect through (for ``on_write``).
_EFFECTS: Final = (
    _SCRIPTS | {b"set", b"hset", b"rpush", b"rename", b"pexpire", b"pexpireat", b"exec", b"del"} | {b"unlink"}
)
_WRITES: Final = frozenset(
    {b"eval", b"evalsha", b"set", b"hset", b"rpush", b"rename", b"pexpire", b"pexpireat"}
)


class _NodeSocket(FakeSocket):
    """The server end of one connection: commands run one at a time, ``WAIT`` blocks the connection."""

    def __init__(self, node: SimRedisNode, reply: Callable[[bytes], None] | None) -> None:
        super().__init__(node.server, 0, client_class=object)
        self.node = node
        self._reply = reply
        self._inbox: collections.deque[list[bytes]] = collections.deque()
        self._blocked = False
        self.closed = False
        self.woff = 0  # the master offset this connection's WAIT must see acknowledged
        self.tag: object = None  # the client operation of the message being processed

    def put_response(self, msg: Any) -> None:
        if self._reply is not None and not self.closed:
            self._reply(encode_resp(msg))

    def _decode_result(self, result: Any) -> Any:
        return result  # encoded as RESP by put_response, not turned into client objects

    def _process_command(self, fields: list[bytes]) -> None:
        self._inbox.append(fields)
        self.pump()

    def pump(self) -> None:
        """Run queued commands until the connection blocks (WAIT) or the queue is empty."""
        while self._inbox and not self._blocked and not self.closed:
            fields = self._inbox.popleft()
            self.run(fields)

    def run(self, fields: list[bytes], at_s: float | None = None) -> None:
        """Run one command at the node's time (or ``at_s``: a replica applying the master's write)."""
        node = self.node
        name = fields[0].lower() if fields else b""
        _SHIM.now_s = node.time_s() if at_s is None else at_s
        # A script's TIME is the time it decided at; a plain TIME is a clock reading only.
        _SHIM.on_time_command = node.time_command_read if name in _SCRIPTS else None
        node.current_tag = self.tag
        if at_s is None and name in _EFFECTS and node.deployment.on_write is not None:
            # A script is timed only if it runs: an EVALSHA of a script the node does not
            # hold (after a restart) is refused NOSCRIPT, and the client sends EVAL after it.
            runs = name in _SCRIPTS and not (
                name in (b"evalsha", b"evalsha_ro")
                and len(fields) > 1
                and fields[1] not in self._server.script_cache
            )
            node.deployment.on_write(self.tag, node.time_ms() if runs else None)
        elif at_s is None and name in _READS and node.deployment.on_read is not None:
            node.deployment.on_read(self.tag, node.time_ms())
        try:
            if (
                name in _NODE_COMMANDS or (name == b"hello" and len(fields) == 1)
            ) and self._reply is not None:
                reply = node.node_command(self, name, fields[1:])
                if reply is not _BLOCKED:
                    self.put_response(reply)
                return
            if node.oom and name in _WRITES and self._reply is not None:
                self.put_response(SimpleError("OOM command not allowed when used memory > 'maxmemory'."))
                return
            before = node.dirty
            super()._process_command(fields)
            if node.dirty != before:
                node.propagate(fields, _SHIM.now_s)
                self.woff = node.offset
            elif node.flavour == "redis":
                self.woff = node.offset
        finally:
            _SHIM.now_s = None
            _SHIM.on_time_command = None
            node.current_tag = None
            if node.dirty != node.observed:
                node.observed = node.dirty
                node.changed()

    def block(self) -> None:
        self._blocked = True

    def unblock(self, reply: object) -> None:
        self._blocked = False
        self.put_response(reply)
        self.pump()

    def close_socket(self) -> None:
        self.closed = True
        self._inbox.clear()


_BLOCKED: Final = object()


class SimRedisNode:
    """One simulated Redis server (module docstring); ``name`` is its address in the simulation."""

    def __init__(self, deployment: SimRedisDeployment, name: str) -> None:
        self.deployment = deployment
        self.name = name
        self.flavour = deployment.flavour
        self.server = self._new_server()
        self.config: dict[str, str] = {
            "maxmemory-policy": "noeviction",
            "appendonly": "no" if deployment.persistence == "none" else "yes",
            "appendfsync": "always" if deployment.persistence == "always" else "everysec",
        }
        self.up = True
        self.oom = False
        self.dirty = 0
        self.observed = 0
        self.offset = 0  # master replication offset: one per propagated write
        self.replica: SimRedisNode | None = None
        self.replica_acked = 0
        self.repl_queue: collections.deque[tuple[int, list[bytes], float]] = collections.deque()
        self.repl_cut_until_ms = 0
        self.sockets: list[_NodeSocket] = []
        self.waiters: list[tuple[_NodeSocket, int, int, int, Any]] = []  # sock, need, woff, kind, timer
        self.fsynced_snapshot: dict[bytes, Any] = {}
        self.fsynced_offset = 0
        self.current_tag: object = None
        self._applier: _NodeSocket | None = None

    def _new_server(self) -> fakeredis.FakeServer:
        server = fakeredis.FakeServer(
            version=(8, 1) if self.flavour == "valkey" else (7, 2),
            server_type="valkey" if self.flavour == "valkey" else "redis",
            config={b"requirepass": self.deployment.password.encode()} if self.deployment.password else None,
        )
        database = server.dbs[0]
        database.add_change_callback(self._dirtied)
        return server

    def _dirtied(self) -> None:
        self.dirty += 1

    # -- time ------------------------------------------------------------------------

    def time_ms(self) -> int:
        """The node's clock: the simulation's reference clock (integer ms since the epoch)."""
        return _EPOCH_MS + int(self.deployment.loop.now_ns) // 1_000_000

    def time_s(self) -> float:
        return (_EPOCH_MS * 1_000 + int(self.deployment.loop.now_ns) // 1_000) / 1e6

    def time_command_read(self) -> None:
        self.deployment.on_time_command(self.current_tag, self.time_ms())

    # -- connections -------------------------------------------------------------------

    def accept(self, reply: Callable[[bytes], None]) -> _NodeSocket:
        sock = _NodeSocket(self, reply)
        self.sockets.append(sock)
        return sock

    def drop_connections(self) -> None:
        for sock in self.sockets:
            sock.close_socket()
        self.sockets.clear()
        for sock, _need, _woff, _kind, timer in self.waiters:
            timer.cancel()
            del sock
        self.waiters.clear()
        self.deployment.network_reset(self)

    # -- commands fakeredis does not answer ----------------------------------------------

    def node_command(self, sock: _NodeSocket, name: bytes, args: list[bytes]) -> object:
        if name == b"hello":  # no arguments: the connection's context, as Redis >= 6.2 answers it
            server, version = (b"valkey", b"8.1.1") if self.flavour == "valkey" else (b"redis", b"7.2.4")
            return [b"server", server, b"version", version, b"proto", 2, b"mode", b"standalone"]
        if name == b"info":
            return self.info(args[0].decode().lower() if args else "all")
        if name == b"config":
            return self.config_command(args)
        if name == b"command":
            if not args or args[0].lower() != b"info":
                return SimpleError("ERR unsupported COMMAND subcommand in the simulation")
            return [
                [arg.lower(), -1, [], 0, 0, 0] if arg.decode().lower() in _KNOWN else None for arg in args[1:]
            ]
        if name == b"wait":
            need, timeout_ms = int(args[0]), int(args[1])
            return self.wait(sock, need, timeout_ms, aof=False)
        need, timeout_ms = int(args[1]), int(args[2])  # WAITAOF numlocal numreplicas timeout
        return self.wait(sock, need, timeout_ms, aof=True)

    def info(self, section: str) -> bytes:
        lines: list[str] = []
        if section in ("server", "all"):
            lines += ["# Server", "redis_version:7.2.4"]
            if self.flavour == "valkey":
                lines += ["server_name:valkey", "valkey_version:8.1.1"]
        if section in ("memory", "all"):
            lines += ["# Memory", f"maxmemory_policy:{self.config['maxmemory-policy']}"]
        if section in ("persistence", "all"):
            lines += ["# Persistence", f"aof_enabled:{int(self.config['appendonly'] == 'yes')}"]
        if section in ("replication", "all"):
            replica = self.replica
            online = replica is not None and replica.up
            lines += ["# Replication", "role:master", f"connected_slaves:{int(online)}"]
            if online:
                lines.append(f"slave0:ip=127.0.0.1,port=1,state=online,offset={self.replica_acked},lag=0")
            lines.append(f"master_repl_offset:{self.offset}")
        return ("\r\n".join(lines) + "\r\n").encode()

    def config_command(self, args: list[bytes]) -> object:
        verb = args[0].lower() if args else b""
        if verb == b"get" and len(args) == 2:
            name = args[1].decode().lower()
            return [name.encode(), self.config[name].encode()] if name in self.config else []
        if verb == b"set" and len(args) == 3:
            self.config[args[1].decode().lower()] = args[2].decode()
            return SimpleString(b"OK")
        return SimpleError("ERR unsupported CONFIG subcommand in the simulation")

    def _acked(self, woff: int, aof: bool) -> tuple[int, int]:
        """(local fsynced, replicas acknowledged) for a connection whose last write is at ``woff``."""
        local = int(self.config["appendonly"] == "yes" and (self.fsynced_offset >= woff))
        replica = self.replica
        acked = int(replica is not None and replica.up and self.replica_acked >= woff)
        del aof
        return local, acked

    def _wait_reply(self, woff: int, aof: bool) -> object:
        local, acked = self._acked(woff, aof)
        return [local, acked] if aof else acked

    def _wait_done(self, need: int, woff: int, aof: bool) -> bool:
        local, acked = self._acked(woff, aof)
        return acked >= need and (not aof or local >= 1)

    def wait(self, sock: _NodeSocket, need: int, timeout_ms: int, *, aof: bool) -> object:
        woff = sock.woff
        if self._wait_done(need, woff, aof):
            return self._wait_reply(woff, aof)
        sock.block()
        loop = self.deployment.loop
        entry: list[Any] = []

        def expire() -> None:
            if entry and entry[0] in self.waiters:
                self.waiters.remove(entry[0])
                if not sock.closed:
                    sock.unblock(self._wait_reply(woff, aof))

        timer = loop.call_later(max(timeout_ms, 1) / 1000, expire)
        entry.append((sock, need, woff, int(aof), timer))
        self.waiters.append(entry[0])
        return _BLOCKED

    def wake_waiters(self) -> None:
        for waiter in list(self.waiters):
            sock, need, woff, aof, timer = waiter
            if self._wait_done(need, woff, bool(aof)):
                self.waiters.remove(waiter)
                timer.cancel()
                if not sock.closed:
                    sock.unblock(self._wait_reply(woff, bool(aof)))

    # -- replication and persistence -----------------------------------------------------

    def propagate(self, fields: list[bytes], at_s: float) -> None:
        """A write that changed the data set: count it, fsync it if ``always``, send it to the replica."""
        self.offset += 1
        if self.config["appendonly"] == "yes" and self.config["appendfsync"] == "always":
            self.fsynced_offset = self.offset
        if fields and fields[0].lower() == b"evalsha":  # the replica may not hold the script: send its text
            source = self.server.script_cache.get(fields[1])
            if source is not None:
                fields = [b"EVAL", source, *fields[2:]]
        if self.replica is not None:
            self.repl_queue.append((self.offset, list(fields), at_s))
            self.deployment.schedule_replication(self)

    def apply_replicated(self, fields: list[bytes], at_s: float) -> None:
        """Run the master's write here, at the master's time (the replica's responses are discarded)."""
        if self._applier is None:
            self._applier = _NodeSocket(self, None)
        self._applier.run(fields, at_s)

    def fsync_tick(self) -> None:
        """``appendfsync everysec``: what is written so far survives a restart from now on."""
        if self.config["appendonly"] == "yes":
            self.fsynced_snapshot = copy.deepcopy(self.server.dbs[0]._dict)
            self.fsynced_offset = self.offset
            self.wake_waiters()

    def data(self) -> dict[bytes, Any]:
        """The node's keys and items (fakeredis ``Item``: ``value``, ``expireat`` in seconds)."""
        database = self.server.dbs[0]
        now = self.time_s()
        return {
            key: item for key, item in database._dict.items() if item.expireat is None or item.expireat >= now
        }

    def replace_data(self, items: dict[bytes, Any]) -> None:
        """Start over with ``items`` (a restart from disk, a full resync) and an empty script cache."""
        self.server = self._new_server()
        database = self.server.dbs[0]
        for key, item in copy.deepcopy(items).items():
            database[key] = item
        self._applier = None
        self.dirty += 1  # the data set changed: observers look again
        self.observed = self.dirty

    def changed(self) -> None:
        self.deployment.on_change(self)


class SimRedisDeployment:
    """A master, optionally one replica, the network's view of them and the simulated faults.

    ``loop`` is the simulation's :class:`~._sim_loop.VirtualLoop`; ``persistence`` one of
    :data:`PERSISTENCE`; ``replica``: whether a replica follows the master;
    ``flavour`` one of :data:`SERVER_FLAVOURS`; ``repl_delay_ms`` a callable drawing
    each write's replication delay; ``on_change(node)`` is called after every command
    that changed a master's data; ``on_time(tag, ms)`` after each ``TIME`` a script read (its decision time);
    ``on_reset(node)`` when a node drops its connections; ``on_write(tag, ms)`` before a master
    runs a write or a script sent by a client (the request may take effect from then on;
    ``ms`` the node's time for a script, which decides at it, else None); ``on_read(tag,
    ms)`` when a master or replica runs a plain read sent by a client (a read decides at
    the node's time: Redis lapses keys on its own clock); ``password``: ``requirepass``.
    """

    def __init__(
        self,
        loop: Any,
        *,
        persistence: str,
        replica: bool,
        flavour: str,
        repl_delay_ms: Callable[[], int],
        on_change: Callable[[SimRedisNode], None],
        on_time: Callable[[object, int], None],
        on_reset: Callable[[SimRedisNode], None],
        on_write: Callable[[object, int | None], None] | None = None,
        on_read: Callable[[object, int], None] | None = None,
        password: str = "",
    ) -> None:
        if persistence not in PERSISTENCE or flavour not in SERVER_FLAVOURS:
            raise ValueError("unknown persistence or server flavour")
        self.loop = loop
        self.password = password
        self.persistence = persistence
        self.flavour = flavour
        self._repl_delay_ms = repl_delay_ms
        self._on_change = on_change
        self._on_time = on_time
        self._on_reset = on_reset
        self.on_write = on_write
        self.on_read = on_read
        self.master = SimRedisNode(self, "node-a")
        self.standby: SimRedisNode | None = SimRedisNode(self, "node-b") if replica else None
        if self.standby is not None:
            self.master.replica = self.standby
        self._repl_busy: set[str] = set()
        if persistence == "everysec":
            self._tick()

    def _tick(self) -> None:
        for node in self.nodes():
            if node.up:
                node.fsync_tick()
        self.loop.call_later(1.0, self._tick)

    def nodes(self) -> list[SimRedisNode]:
        return [node for node in (self.master, self.standby) if node is not None]

    def on_change(self, node: SimRedisNode) -> None:
        if node is self.master:
            self._on_change(node)

    def on_time_command(self, tag: object, ms: int) -> None:
        self._on_time(tag, ms)

    def network_reset(self, node: SimRedisNode) -> None:
        self._on_reset(node)

    # -- replication ---------------------------------------------------------------------

    def schedule_replication(self, master: SimRedisNode) -> None:
        if master.name in self._repl_busy or not master.repl_queue:
            return
        self._repl_busy.add(master.name)
        now_ms = self.loop.now_ns // 1_000_000
        wait_ms = max(master.repl_cut_until_ms - now_ms, 0) + self._repl_delay_ms()
        self.loop.call_later(wait_ms / 1000, self._deliver, master)

    def _deliver(self, master: SimRedisNode) -> None:
        self._repl_busy.discard(master.name)
        replica = master.replica
        if replica is None or not master.up or master is not self.master:
            master.repl_queue.clear()
            return
        now_ms = self.loop.now_ns // 1_000_000
        if master.repl_cut_until_ms > now_ms or not replica.up:
            self.schedule_replication(master)
            return
        if not master.repl_queue:
            return
        offset, fields, at_s = master.repl_queue.popleft()
        replica.apply_replicated(fields, at_s)
        master.replica_acked = offset
        master.wake_waiters()
        self.schedule_replication(master)

    # -- faults ----------------------------------------------------------------------------

    def restart(self, down_ms: int) -> None:
        """The master is killed and restarts ``down_ms`` later with what its persistence kept."""
        node = self.master
        if not node.up:
            return
        if self.persistence == "always":
            kept = node.data()
        elif self.persistence == "everysec":
            kept = node.fsynced_snapshot
        else:
            kept = {}
        node.up = False
        node.drop_connections()
        node.repl_queue.clear()
        node.replace_data(kept)
        node.offset = node.fsynced_offset = node.replica_acked = 0
        self._on_change(node)

        def back() -> None:
            node.up = True
            if node.replica is not None:
                node.replica.replace_data(node.data())  # full resync from the restarted master

        self.loop.call_later(down_ms / 1000, back)

    def failover(self, down_ms: int, rejoin_ms: int) -> bool:
        """Promote the replica (what it applied survives; the rest is lost); the old master rejoins later."""
        old, new = self.master, self.standby
        if new is None or not old.up or not new.up:
            return False
        old.up = False
        old.drop_connections()
        old.repl_queue.clear()
        old.replica = None
        new.replica = None
        new.offset = new.fsynced_offset = new.replica_acked = 0
        new.server.script_cache.clear()  # a promoted replica holds no scripts: NOSCRIPT, then reload
        new.up = False
        self.master, self.standby = new, old
        self._on_change(new)

        def promoted() -> None:
            new.up = True

        def rejoin() -> None:
            old.replace_data(new.data())
            old.offset = old.fsynced_offset = old.replica_acked = 0
            old.up = True
            if self.master is new:
                new.replica = old
                new.replica_acked = new.offset

        self.loop.call_later(down_ms / 1000, promoted)
        self.loop.call_later((down_ms + rejoin_ms) / 1000, rejoin)
        return True

    def evict(self, choose: Callable[[list[bytes]], bytes | None]) -> bytes | None:
        """Delete one key, as an evicting policy would (and propagate the DEL); None if none."""
        node = self.master
        if not node.up:
            return None
        keys = sorted(node.data())
        key = choose(keys) if keys else None
        if key is None:
            return None
        sock = node._applier or _NodeSocket(node, None)
        node._applier = sock
        sock.run([b"DEL", key])
        return key

    def set_policy(self, policy: str) -> None:
        for node in self.nodes():
            node.config["maxmemory-policy"] = policy

    def set_oom(self, full: bool) -> None:
        self.master.oom = full

    def cut_replication(self, until_ms: int) -> None:
        self.master.repl_cut_until_ms = max(self.master.repl_cut_until_ms, until_ms)
