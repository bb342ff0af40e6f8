"""The simulated network between harness hosts and the store: delays, losses, resets, partitions.

Theory of operation
-------------------
Every byte a host sends to the store, and every reply, is a message on a simulated
link, delivered on simulated time (``_sim_loop``). One :class:`Network` serves every
host; each host has its own weather (:class:`LinkFaults`) and its own random stream for
delays, so messages of different hosts reorder freely while each connection keeps TCP's
order (a message never overtakes an earlier one of the same connection and direction).

- **Redis.** :class:`SimConnection` is a ``redis.asyncio.Connection`` whose socket is a
  simulated one: redis-py's own parser, socket timeouts, connection pool, pipelines and
  error handling run unchanged over a real ``asyncio`` stream pair (``StreamReader`` /
  ``StreamWriter``) whose transport is a :class:`_Wire`. The server end is a
  :class:`~._sim_redis.SimRedisNode` connection, which runs the commands.
- **The memory store.** :class:`RemoteMemoryStore` is the store interface of a shared
  ``MemoryStore`` reached over the same kind of link: each operation is a request and a
  reply message; the operation runs on the store side, at the store's clock.

Faults, per host: a request lost (the connection goes silent from that message on:
nothing more it sends arrives, as a TCP stream stalls; the client's read times out), a
reply lost after the store applied the request (likewise, in the other direction), a
connection reset (every open connection of the host fails at once; what was delivered
was applied), a partition (nothing gets through, connects time out) and a slow spell
(extra delay). Delays are integer microseconds.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import redis.asyncio

from ..adapters import StoreUnavailableError
from ..kernel import Admission, AdmissionRequest, CanonicalRecord, ErrorCode, Limits, ProgressView, RunState

__all__ = [
    "CURRENT_OP",
    "LinkFaults",
    "Network",
    "RemoteMemoryStore",
    "SimConnection",
]

T = TypeVar("T")

#: The store operation a host's task is performing (set by the simulation's recorder);
#: messages carry it so that the store side can tell which operation read ``TIME``.
CURRENT_OP: Final[contextvars.ContextVar[object]] = contextvars.ContextVar("sim_current_op", default=None)


class LinkFaults:
    """One host's network weather: pending losses, a partition, a slow spell (times in simulated ms)."""

    def __init__(self) -> None:
        self.lose_requests = 0
        self.lose_replies = 0
        self.partitioned_until_ms = 0
        self.slow_until_ms = 0
        self.slow_extra_us = 0


class _Wire(asyncio.Transport):
    """One simulated TCP connection; as the client's asyncio transport, it sends what redis-py writes."""

    def __init__(self, network: Network, host: int, node: Any) -> None:
        super().__init__()
        self.network = network
        self.host = host
        self.node = node
        self.protocol: asyncio.Protocol | None = None
        self.server_end: Any = None
        self.closed = False
        self.c2s_dead = False
        self.s2c_dead = False
        self.c2s_last_us = 0
        self.s2c_last_us = 0

    # -- the asyncio transport redis-py writes to ----------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed:
            return
        self.network.send_request(self, bytes(data), CURRENT_OP.get())

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(bytes(chunk) for chunk in list_of_data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._close_server_end()
            if self.protocol is not None:
                self.network.loop.call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def can_write_eof(self) -> bool:
        return False

    def is_reading(self) -> bool:
        return not self.closed

    def pause_reading(self) -> None:
        """Never paused: replies are small."""

    def resume_reading(self) -> None:
        """Never paused: replies are small."""

    def get_write_buffer_size(self) -> int:
        return 0

    # -- the network's side ----------------------------------------------------------------

    def _close_server_end(self) -> None:
        end = self.server_end
        if end is not None:
            end.close_socket()
            self.server_end = None

    def reset(self) -> None:
        """The connection is reset: the client sees the error at its next read or write."""
        if self.closed:
            return
        self.closed = True
        self._close_server_end()
        if self.protocol is not None:
            self.network.loop.call_soon(
                self.protocol.connection_lost, ConnectionResetError("connection reset")
            )


class Network:
    """The links of every host (module docstring). ``loop`` is the simulation's loop.

    ``seed`` fixes every host's delay stream; ``base_delay_us`` is the (min, max) of a
    message's delay; ``deployment`` (set later) is the simulated Redis deployment, if any.
    """

    def __init__(self, loop: Any, seed: int, base_delay_us: tuple[int, int] = (100, 2_000)) -> None:
        self.loop = loop
        self._seed = seed
        self.base_delay_us = base_delay_us
        self.faults: dict[int, LinkFaults] = {}
        self._rngs: dict[int, random.Random] = {}
        self.wires: list[_Wire] = []
        self.deployment: Any = None
        self.messages = 0
        self.lost = 0

    def link(self, host: int) -> LinkFaults:
        faults = self.faults.get(host)
        if faults is None:
            faults = self.faults[host] = LinkFaults()
        return faults

    def _rng(self, host: int) -> random.Random:
        rng = self._rngs.get(host)
        if rng is None:
            rng = self._rngs[host] = random.Random(self._seed * 7_919 + host)  # noqa: S311 - repeatable delays
        return rng

    def now_us(self) -> int:
        return int(self.loop.now_ns // 1_000)

    def delay_us(self, host: int) -> int:
        low, high = self.base_delay_us
        delay = self._rng(host).randint(low, high)
        faults = self.link(host)
        if faults.slow_until_ms * 1_000 > self.now_us():
            delay += self._rng(host).randint(0, faults.slow_extra_us)
        return delay

    def partitioned(self, host: int) -> bool:
        return self.link(host).partitioned_until_ms * 1_000 > self.now_us()

    def _at(self, last_us: int, host: int) -> int:
        """Delivery time of a message sent now: after its delay, never before the previous one."""
        return max(self.now_us() + self.delay_us(host), last_us + 1)

    def _later(self, at_us: int, callback: Callable[..., None], *args: Any) -> None:
        self.loop.call_at(at_us / 1e6, callback, *args)

    # -- Redis connections -----------------------------------------------------------------

    async def open(self, host: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect ``host`` to the current master: refused while it is down, silent while partitioned."""
        self.messages += 1
        await asyncio.sleep(self.delay_us(host) / 1e6)
        if self.partitioned(host):
            await asyncio.Event().wait()  # SYNs dropped: the caller's connect timeout ends this
        node = self.deployment.master
        if not node.up:
            raise ConnectionRefusedError(111, "Connection refused")
        wire = _Wire(self, host, node)
        reader = asyncio.StreamReader(limit=2**20)
        protocol = asyncio.StreamReaderProtocol(reader)
        wire.protocol = protocol
        protocol.connection_made(wire)
        writer = asyncio.StreamWriter(wire, protocol, reader, asyncio.get_running_loop())
        wire.server_end = node.accept(lambda data: self.send_reply(wire, data))
        self.wires.append(wire)
        return reader, writer

    def send_request(self, wire: _Wire, data: bytes, tag: object) -> None:
        self.messages += 1
        faults = self.link(wire.host)
        if wire.c2s_dead or self.partitioned(wire.host):
            wire.c2s_dead = True
            self.lost += 1
            return
        if faults.lose_requests > 0:
            faults.lose_requests -= 1
            wire.c2s_dead = True
            self.lost += 1
            return
        wire.c2s_last_us = self._at(wire.c2s_last_us, wire.host)
        self._later(wire.c2s_last_us, self._deliver_request, wire, data, tag)

    def _deliver_request(self, wire: _Wire, data: bytes, tag: object) -> None:
        end = wire.server_end
        if wire.closed or end is None or end.closed:
            return
        end.tag = tag
        try:
            end.sendall(data)
        except Exception:  # noqa: BLE001 - a server-side protocol error resets the connection
            wire.reset()

    def send_reply(self, wire: _Wire, data: bytes) -> None:
        self.messages += 1
        if wire.closed or wire.s2c_dead or self.partitioned(wire.host):
            wire.s2c_dead = True
            self.lost += 1
            return
        faults = self.link(wire.host)
        if faults.lose_replies > 0:
            faults.lose_replies -= 1
            wire.s2c_dead = True
            self.lost += 1
            return
        wire.s2c_last_us = self._at(wire.s2c_last_us, wire.host)
        self._later(wire.s2c_last_us, self._deliver_reply, wire, data)

    def _deliver_reply(self, wire: _Wire, data: bytes) -> None:
        if not wire.closed and wire.protocol is not None:
            wire.protocol.data_received(data)

    def reset_host(self, host: int) -> int:
        """Reset every open connection of ``host``; the number reset."""
        count = 0
        for wire in self.wires:
            if wire.host == host and not wire.closed:
                wire.reset()
                count += 1
        self.wires = [wire for wire in self.wires if not wire.closed]
        return count

    def reset_node(self, node: Any) -> None:
        """A server went away: every connection to it is reset."""
        for wire in self.wires:
            if wire.node is node and not wire.closed:
                wire.reset()
        self.wires = [wire for wire in self.wires if not wire.closed]

    # -- the memory store's link -------------------------------------------------------------

    async def call(self, host: int, apply: Callable[[], T], timeout_s: float) -> T:
        """One request/reply exchange: ``apply()`` runs on the store side on delivery.

        A lost request or reply (or a partition) ends in ``TimeoutError`` after ``timeout_s``.
        """
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()
        faults = self.link(host)
        self.messages += 2

        def deliver() -> None:
            if self.partitioned(host):
                self.lost += 1
                return
            result = apply()
            if faults.lose_replies > 0 or self.partitioned(host):
                faults.lose_replies = max(faults.lose_replies - 1, 0)
                self.lost += 1
                return
            self._later(self.now_us() + self.delay_us(host), _settle, answer, result)

        if faults.lose_requests > 0 or self.partitioned(host):
            faults.lose_requests = max(faults.lose_requests - 1, 0)
            self.lost += 1
        else:
            self._later(self.now_us() + self.delay_us(host), deliver)
        async with asyncio.timeout(timeout_s):
            return await answer


def _settle(answer: asyncio.Future[T], result: T) -> None:
    if not answer.done():
        answer.set_result(result)


class SimConnection(redis.asyncio.Connection):
    """A redis-py asyncio connection over the simulated network (module docstring).

    Built by redis-py's connection pool with two extra keyword arguments:
    ``sim_network`` (the :class:`Network`) and ``sim_host`` (the host's number).
    """

    def __init__(self, *, sim_network: Network, sim_host: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._sim_network = sim_network
        self._sim_host = sim_host

    async def _connect(self) -> None:
        async with asyncio.timeout(self.socket_connect_timeout):
            reader, writer = await self._sim_network.open(self._sim_host)
        self._reader = reader
        self._writer = writer

    def _host_error(self) -> str:
        return "simulated-redis"


class RemoteMemoryStore:
    """The store interface of a shared ``MemoryStore`` over the simulated network (module docstring).

    ``store``: the shared store (its clock is the deployment's one clock); ``now_ms``
    reads it, as an embedded store's does. ``decide_at`` (planted fault
    ``caller-clock``): when given, every operation is decided at the caller's clock,
    passed with the request, instead of the store's. ``timeout_ms``: how long the
    client waits for a reply before the operation fails (StoreUnavailableError).
    """

    def __init__(
        self,
        store: Any,
        network: Network,
        host: int,
        *,
        timeout_ms: int,
        caller_clock: Callable[[], int] | None = None,
        on_applied: Callable[[object, int], None] | None = None,
    ) -> None:
        self._store = store
        self._network = network
        self._host = host
        self._timeout_s = timeout_ms / 1000
        self._caller_clock = caller_clock
        self._on_applied = on_applied

    def now_ms(self) -> int:
        """The shared store's clock (the caller's own clock under the planted ``caller-clock`` fault)."""
        return self._caller_clock() if self._caller_clock is not None else self._store.now_ms()

    async def _call(self, operation: Callable[[], T]) -> T:
        tag = CURRENT_OP.get()
        sent_clock = self._caller_clock() if self._caller_clock is not None else None

        def apply() -> T:
            store = self._store
            if sent_clock is not None:
                store.decide_at = sent_clock  # planted: the store decides at the caller's reading
            try:
                if self._on_applied is not None:
                    self._on_applied(tag, store.now_ms())
                return operation()
            finally:
                store.decide_at = None
                store.after_operation()

        try:
            return await self._network.call(self._host, apply, self._timeout_s)
        except TimeoutError:
            failure = StoreUnavailableError("TimeoutError")
        raise failure

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        """Remote ``open_run``."""
        return await self._call(
            lambda: self._store.open_run(
                run_id,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            )
        )

    async def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        """Remote ``cancel_run``."""
        return await self._call(lambda: self._store.cancel_run(run_id))

    async def close_run(self, run_id: str) -> RunState | ErrorCode:
        """Remote ``close_run``."""
        return await self._call(lambda: self._store.close_run(run_id))

    async def get_run(self, run_id: str) -> RunState | None:
        """Remote ``get_run``."""
        return await self._call(lambda: self._store.get_run(run_id))

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        """Remote ``create``."""
        return await self._call(lambda: self._store.create(request, limits))

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        """Remote ``complete``."""
        return await self._call(lambda: self._store.complete(before, after))

    async def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        """Remote ``get``."""
        return await self._call(lambda: self._store.get(run_id, tool_call_id))

    async def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        """Remote ``get_many``."""
        ids = tuple(tool_call_ids)
        return await self._call(lambda: self._store.get_many(run_id, ids, include_raw=include_raw))

    async def get_progress(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> Mapping[str, ProgressView | None]:
        """Remote ``get_progress``."""
        ids = tuple(tool_call_ids)
        return await self._call(lambda: self._store.get_progress(run_id, ids))

    async def completed(self, run_id: str) -> tuple[str, ...]:
        """Remote ``completed``."""
        return await self._call(lambda: self._store.completed(run_id))

    async def calls(self, run_id: str) -> tuple[str, ...]:
        """Remote ``calls``."""
        return await self._call(lambda: self._store.calls(run_id))

    async def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        """Remote ``ttl_remaining_ms``."""
        return await self._call(lambda: self._store.ttl_remaining_ms(run_id, tool_call_id))

    async def close(self) -> None:
        """Nothing to release."""
