"""The deterministic simulator: harness hosts, their clocks, a lossy network and a faulty store, one seed.

Theory of operation
-------------------
:func:`simulate` runs one :class:`~._sim_schedule.Schedule` in one thread, on simulated
time (``_sim_loop``): every host is a real :class:`~invocation_store.boundary.AsyncToolBoundary`
over a real store client (``AsyncRedisStore`` through redis-py, or the memory store
behind a link), with its own clock (skewed, drifting); every message crosses the
simulated network (``_sim_net``); the Redis servers are simulated nodes running the
store's own Lua scripts (``_sim_redis``). The boundary's and the stores' retry loops,
sleeps and socket timeouts all run as in production, on simulated time. Nothing is
drawn from a clock or a random source the seed does not fix, so the same schedule
replays the same run: :attr:`SimulationResult.trace` and its digest are byte-identical.

While it runs, the simulation watches the store's data from the outside (a *ledger*
of every record version: who created it, when, until when it lives by the store's own
clock, what ended it), every execution of every tool, every answer every agent got,
every store operation (its times, for the history), and every log line. At the end it
checks the product's promises (:data:`PROMISES`) and returns the violations.

Planted faults (:data:`PLANTED_FAULTS`) put a known seam fault into the deployment, so
that tests can show the checks find each one within a documented number of seeds.

Size: one simulation is one object (``_Simulation``) whose parts share its clock, its
ledger and its records of operations: the stores as hosts see them (the recorder and
the planted wrappers), the hosts, the harness, the faults and the checks at the end.
The network, the Redis servers, the loop and the schedule live in their own modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
import logging
import random
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeVar

import redis.asyncio
from attrs import define, field, frozen

from .. import _deadline
from .._completion import CompletionRetry
from .._decided import watch_decisions
from .._logs import package_logger
from ..adapters import AsyncRedisStore, StoreUnavailableError
from ..adapters._async.protocol import async_decision_clock
from ..adapters._redis_flavour import AsyncRedisFlavour
from ..adapters._redis_retry import RetryPolicy
from ..adapters._redis_server import POLICY_CHECK_INTERVAL_MS, Durability
from ..adapters.memory import MemoryStore
from ..boundary import AsyncToolBoundary, ToolRegistry, ToolSpec
from ..history import (
    BudgetExhausted,
    History,
    HistoryOp,
    check_history,
    decode_history,
    encode_args,
    encode_result,
    header_line,
    is_linearizable,
)
from ..kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    ErrorCode,
    EvidenceStatus,
    Limits,
    ProgressView,
    Projection,
    RunContext,
    RunState,
    ToolCallEnvelope,
    remaining_ms,
)
from ._sim_loop import SimulationStalledError, VirtualLoop, run_simulated
from ._sim_net import CURRENT_OP, Network, RemoteMemoryStore, SimConnection
from ._sim_redis import SimRedisDeployment, SimRedisNode, simulated_server_time
from ._sim_schedule import DEPLOYMENTS, Schedule, Step, describe_step, generate, shrink

__all__ = [
    "PLANTED_FAULTS",
    "PROMISES",
    "SIM_LIMITS",
    "PlantedFault",
    "SimulationResult",
    "Violation",
    "history_of",
    "seed_schedule",
    "seeds_to_find",
    "shrink_failure",
    "simulate",
]

T = TypeVar("T")

#: The reference clock's reading at the start of every simulation (integer ms since the epoch).
EPOCH_MS: Final = 1_700_000_000_000
#: The prefix of every Redis key of a simulation.
PREFIX: Final = "cis"
#: Marks every raw response (and the Redis password): an agent-facing text or log line holding it leaked.
RAW_MARKER: Final = "RAWDATA"
_SECRET: Final = "sim-password-Zq7"  # noqa: S105 - the password of throwaway simulated servers
#: Limits of every simulated boundary (small, so that budgets bite).
SIM_LIMITS: Final = Limits(raw_bytes=2_048, agent_result_bytes=512)

#: Client and retry settings of every simulated host (integer ms).
SOCKET_TIMEOUT_MS: Final = 2_000
CONNECT_TIMEOUT_MS: Final = 500
MEMORY_TIMEOUT_MS: Final = 500
RETRY: Final = RetryPolicy(budget_ms=4_000)  # above the completion budget: nested budgets would show
COMPLETION: Final = CompletionRetry(budget_ms=1_000)  # below the store's: nested budgets would show
DURABILITY_TIMEOUT_MS: Final = 1_200  # above the AOF's fsync period, below the socket timeout
TOOL_TIMEOUT_MS: Final = 1_000
#: After the last step, how long the simulation lets retries, re-sends and replication settle.
QUIESCE_MS: Final = 15_000
#: The largest run whose non-linearizable window the simulation explains (see ``_check_history``).
EXPLAIN_OPS: Final = 12
#: How long an evicting ``maxmemory-policy`` stays set before the operator restores ``noeviction``.
POLICY_RESTORED_MS: Final = 6_000
#: The error bound on a stale ``now`` a Redis store may decide at (CIS-DUR-11), tolerated by the once check.
STALE_NOW_MS: Final = 1_000
#: How long a crashed host stays down.
HOST_DOWN_MS: Final = 300
#: Harness re-sends of a call answered STORE_UNAVAILABLE (as docs/durability.md invites).
RESENDS_AFTER_UNAVAILABLE: Final = 2

#: Every promise the simulator checks: id -> (requirement, statement).
PROMISES: Final[Mapping[str, tuple[str, str]]] = {
    "once": ("CIS-SIM-3", "the executor runs at most once per (run, tool_call_id) while its record exists"),
    "durable": ("CIS-SIM-4", "no acknowledged create is lost in a deployment whose mode promises to keep it"),
    "fate": ("CIS-SIM-5", "a call made once is never refused as a duplicate while its tool never ran"),
    "budget": ("CIS-SIM-6", "a run's tool-call and byte budgets are never overspent"),
    "raw": ("CIS-SIM-7", "no agent-facing result and no log line carries raw data, keys or secrets"),
    "wait": ("CIS-SIM-8", "every wait stays within its budget plus one round trip (simulated time)"),
    "history": ("CIS-SIM-9", "the recorded history is linearizable (check-history)"),
    "drift": ("CIS-SIM-10", "an evicting policy set on a running server stops creates within its window"),
    "stalled": ("CIS-SIM-1", "the simulation itself ran to its end"),
}


@frozen(kw_only=True)
class Violation:
    """One broken promise: ``promise`` (a :data:`PROMISES` key), its requirement, when, and what."""

    promise: str
    requirement: str
    at_ms: int
    message: str

    def render(self) -> str:
        """``[CIS-SIM-3 once] t=1234ms: ...``."""
        return f"[{self.requirement} {self.promise}] t={self.at_ms}ms: {self.message}"


@frozen(kw_only=True)
class PlantedFault:
    """A known seam fault the simulator must find: what it does, and the deployment it lives in."""

    name: str
    description: str
    deployment: str
    promise: str


#: The planted faults (``invocation-store simulate --planted NAME``).
PLANTED_FAULTS: Final[Mapping[str, PlantedFault]] = {
    "caller-clock": PlantedFault(
        name="caller-clock",
        description="the store decides deadlines and expiry on the caller's clock instead of its own",
        deployment="memory",
        promise="once",
    ),
    "dropped-create": PlantedFault(
        name="dropped-create",
        description="the boundary forgets a create whose outcome is unknown: a re-send is a new invocation",
        deployment="memory",
        promise="fate",
    ),
    "nested-retry": PlantedFault(
        name="nested-retry",
        description="each completion retry is a store call with a budget of its own (nested retry budgets)",
        deployment="redis",
        promise="wait",
    ),
    "replay-ack": PlantedFault(
        name="replay-ack",
        description="a create resent after an unknown outcome is acknowledged without waiting for its record",
        deployment="redis-replicas",
        promise="durable",
    ),
}


@frozen(kw_only=True)
class SimulationResult:
    """What one simulation did and found.

    ``violations`` (empty: every promise held), ``trace`` (one line per harness answer
    and fault, in simulated-time order: the same schedule gives the same lines),
    ``digest`` (SHA-256 of the trace), ``stats`` (counts), ``planted`` (the planted
    fault's name or None).
    """

    schedule: Schedule
    planted: str | None
    violations: tuple[Violation, ...]
    trace: tuple[str, ...]
    digest: str
    stats: Mapping[str, int]

    @property
    def ok(self) -> bool:
        """Every promise held."""
        return not self.violations


# -- what the simulation observes ------------------------------------------------------------


@define
class _Version:
    """One version of a record in the store: one invocation token's record, from birth to its end."""

    token: str
    born_ms: int
    expiry_ms: int | None
    run_incarnation: int
    ended_ms: int | None = None
    end: str | None = None  # expired, replaced, deleted, restart, failover, evict
    acknowledged: bool = False
    executed: int = 0


@define
class _RunObs:
    incarnation: int = 0
    opened_at: str | None = None
    used: int = 0
    born_ms: int = 0
    lost: bool = False


@define
class _Execution:
    host: int
    incarnation: int
    run_id: str
    tool_call_id: str
    token: str | None
    at_ms: int


@define
class _Attempt:
    """One harness call: which host made it, and the token its create was admitted with."""

    host: int
    incarnation: int
    run_id: str
    tool_call_id: str
    token: str | None = None
    number: int = 0
    started_ms: int = 0
    answered_ms: int | None = None


@define
class _Op:
    """One store operation a host performed, for the history and the wait checks."""

    id: int
    process: str
    host: int
    name: str
    args: dict[str, Any]
    start_ms: int
    run_id: str
    end_ms: int | None = None
    result: Any = None
    failed: str | None = None
    attempt: int = 0  # the harness call it belongs to (0: none)
    host_times: list[int] = field(factory=list)
    server_times: list[int] = field(factory=list)
    decided_at: int | None = None  # what the store reported it decided at (``_decided``)
    reached: bool = False  # a request of it reached the store (else it certainly took no effect)
    script_times: list[int] = field(factory=list)  # the server's time at each of its script runs
    read_times: list[int] = field(factory=list)  # the server's time at each plain read it sent


_TASK: Final[contextvars.ContextVar[tuple[str, _Attempt | None]]] = contextvars.ContextVar(
    "sim_task", default=("unknown", None)
)
#: The wall clock of the host whose task is running (see ``_host_wall_clocks``).
_HOST_CLOCK: Final[contextvars.ContextVar[Callable[[], int] | None]] = contextvars.ContextVar(
    "sim_host_clock", default=None
)


class _Ledger:
    """Every record version and run incarnation, as seen in the store's data after each write."""

    def __init__(self, sim: _Simulation) -> None:
        self.sim = sim
        self.versions: dict[tuple[str, str], list[_Version]] = {}
        self.runs: dict[str, _RunObs] = {}
        self.cause: str | None = None
        self.lost_runs: set[str] = set()

    def current(self, key: tuple[str, str]) -> _Version | None:
        versions = self.versions.get(key)
        if versions and versions[-1].ended_ms is None:
            return versions[-1]
        return None

    def record(self, key: tuple[str, str], token: str | None, expiry_ms: int | None, now_ms: int) -> None:
        live = self.current(key)
        if live is not None and live.token == token:
            return
        if live is not None:
            live.ended_ms = now_ms
            if live.expiry_ms is not None and live.expiry_ms <= now_ms:
                live.end = "expired"
            else:
                live.end = self.cause or ("replaced" if token is not None else "deleted")
                if self.cause is not None:
                    self.lost_runs.add(key[0])
        if token is None:
            return
        run = self.runs.get(key[0])
        version = _Version(
            token=token,
            born_ms=now_ms,
            expiry_ms=expiry_ms,
            run_incarnation=run.incarnation if run is not None else 0,
        )
        self.versions.setdefault(key, []).append(version)
        self.sim.on_birth(key, version)

    def run(self, run_id: str, fields: Mapping[str, str] | None, now_ms: int) -> None:
        obs = self.runs.get(run_id)
        if fields is None:
            if obs is not None and obs.opened_at is not None and self.cause is not None:
                self.lost_runs.add(run_id)
            if obs is not None:
                obs.opened_at = None
            return
        if obs is None:
            obs = self.runs[run_id] = _RunObs()
        opened = fields.get("opened_at_ms")
        if opened != obs.opened_at:
            if obs.opened_at is not None or self.cause is not None:
                pass
            obs.incarnation += 1
            obs.opened_at = opened
            obs.used = 0
            obs.born_ms = now_ms
            self.sim.on_run_birth(run_id, now_ms)
        used = _int(fields.get("tool_calls_used"))
        budget = _int(fields.get("tool_call_budget"))
        spent = _int(fields.get("bytes_used"))
        bytes_budget = _int(fields.get("byte_budget"))
        if used > obs.used:
            if used > budget:
                self.sim.violate("budget", f"{run_id} admitted call {used} with a budget of {budget} calls")
            if spent > bytes_budget and self.cause is None:
                self.sim.violate(
                    "budget",
                    f"{run_id} admitted a call with {spent} bytes used of a {bytes_budget}-byte budget",
                )
        elif used < obs.used and self.cause is not None:
            self.lost_runs.add(run_id)
        obs.used = used

    @contextlib.contextmanager
    def caused_by(self, cause: str) -> Iterator[None]:
        self.cause = cause
        try:
            yield
        finally:
            self.cause = None


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None if value is None else str(value)


# -- stores as the hosts see them --------------------------------------------------------------


class _SharedMemoryStore(MemoryStore):
    """The memory deployment's one store; its clock is the reference clock (or, planted, the caller's)."""

    def __init__(self, sim: _Simulation) -> None:
        self.decide_at: int | None = None
        self._sim = sim
        super().__init__(self._decision_clock)

    def _decision_clock(self) -> int:
        return self.decide_at if self.decide_at is not None else self._sim.reference_ms()

    def after_operation(self) -> None:
        self._sim.observe_memory(self)


class _Recorder:
    """A host's store as its boundary sees it: every operation timed and recorded for the history."""

    def __init__(self, inner: Any, sim: _Simulation, host: _Host) -> None:
        self.inner = inner
        self.sim = sim
        self.host = host

    def now_ms(self) -> int:
        now: int = self.inner.now_ms()
        return now

    async def synced_now_ms(self) -> int:
        """The inner store's clock for a decision (not an operation of the history)."""
        return await async_decision_clock(self.inner)

    async def _record(
        self, name: str, run_id: str, args: dict[str, Any], call: Callable[[], Awaitable[T]]
    ) -> T:
        process, attempt = _TASK.get()
        op = self.sim.start_op(self.host, process, name, run_id, args)
        token = CURRENT_OP.set(op)
        try:
            with watch_decisions() as decided:
                try:
                    result = await call()
                finally:
                    op.decided_at = decided[-1] if decided else None
        except BaseException as exc:
            self.sim.end_op(op, None, type(exc).__name__)
            if name == "create" and attempt is not None:
                self.host.unknown_creates.add((attempt.run_id, attempt.tool_call_id))
            raise
        finally:
            CURRENT_OP.reset(token)
        self.sim.end_op(op, result, None)
        if name == "create" and attempt is not None:
            self.host.unknown_creates.discard((attempt.run_id, attempt.tool_call_id))
            if isinstance(result, Admission):
                attempt.token = result.record.invocation_token
                self.sim.acknowledged(result.record)
        return result

    async def open_run(
        self, run_id: str, *, deadline_ms: int, ttl_ms: int, tool_call_budget: int, byte_budget: int
    ) -> RunState | ErrorCode:
        args = {
            "run_id": run_id,
            "deadline_ms": deadline_ms,
            "ttl_ms": ttl_ms,
            "tool_call_budget": tool_call_budget,
            "byte_budget": byte_budget,
        }
        return await self._record(
            "open_run",
            run_id,
            args,
            lambda: self.inner.open_run(
                run_id,
                deadline_ms=deadline_ms,
                ttl_ms=ttl_ms,
                tool_call_budget=tool_call_budget,
                byte_budget=byte_budget,
            ),
        )

    async def cancel_run(self, run_id: str) -> RunState | ErrorCode:
        return await self._record(
            "cancel_run", run_id, {"run_id": run_id}, lambda: self.inner.cancel_run(run_id)
        )

    async def close_run(self, run_id: str) -> RunState | ErrorCode:
        return await self._record(
            "close_run", run_id, {"run_id": run_id}, lambda: self.inner.close_run(run_id)
        )

    async def get_run(self, run_id: str) -> RunState | None:
        return await self._record("get_run", run_id, {"run_id": run_id}, lambda: self.inner.get_run(run_id))

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        args = {
            "run_id": request.run_id,
            "tool_call_id": request.tool_call_id,
            "tool_name": request.tool_name,
            "request_json": request.request_json,
            "invocation_token": request.invocation_token,
            "limits": limits,
        }
        _process, attempt = _TASK.get()
        if attempt is not None:
            self.sim.token_attempts[request.invocation_token] = attempt
        return await self._record("create", request.run_id, args, lambda: self.inner.create(request, limits))

    async def complete(self, before: CanonicalRecord, after: CanonicalRecord) -> CanonicalRecord | ErrorCode:
        args = {"before": before, "after": after}
        return await self._record("complete", before.run_id, args, lambda: self.inner.complete(before, after))

    async def get(self, run_id: str, tool_call_id: str) -> CanonicalRecord | None:
        args = {"run_id": run_id, "tool_call_id": tool_call_id}
        return await self._record("get", run_id, args, lambda: self.inner.get(run_id, tool_call_id))

    async def get_many(
        self, run_id: str, tool_call_ids: Sequence[str], *, include_raw: bool = True
    ) -> Mapping[str, CanonicalRecord | None]:
        ids = tuple(tool_call_ids)
        args = {"run_id": run_id, "tool_call_ids": ids, "include_raw": include_raw}
        return await self._record(
            "get_many", run_id, args, lambda: self.inner.get_many(run_id, ids, include_raw=include_raw)
        )

    async def get_progress(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> Mapping[str, ProgressView | None]:
        """Forwarded unrecorded: the history format has no progress read."""
        result: Mapping[str, ProgressView | None] = await self.inner.get_progress(run_id, tool_call_ids)
        return result

    async def completed(self, run_id: str) -> tuple[str, ...]:
        return await self._record(
            "completed", run_id, {"run_id": run_id}, lambda: self.inner.completed(run_id)
        )

    async def calls(self, run_id: str) -> tuple[str, ...]:
        return await self._record("calls", run_id, {"run_id": run_id}, lambda: self.inner.calls(run_id))

    async def ttl_remaining_ms(self, run_id: str, tool_call_id: str) -> int | None:
        result: int | None = await self.inner.ttl_remaining_ms(run_id, tool_call_id)
        return result

    async def close(self) -> None:
        await self.inner.close()


class _DetachedDeadlines:
    """Planted ``nested-retry``: each store call runs outside the caller's deadline, with its own budget."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def now_ms(self) -> int:
        now: int = self._inner.now_ms()
        return now

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        async def detached(*args: Any, **kwargs: Any) -> Any:
            token = _deadline._DEADLINE.set(None)  # the planted fault: forget the caller's deadline
            try:
                return await method(*args, **kwargs)
            finally:
                _deadline._DEADLINE.reset(token)

        return detached


class _ReplayWithoutWaiting:
    """Planted ``replay-ack``: a create that failed with an unknown outcome is resent through a store
    that does not wait for durability, whose replay is acknowledged at once."""

    def __init__(self, durable: AsyncRedisStore, eager: AsyncRedisStore) -> None:
        self._durable = durable
        self._eager = eager

    def now_ms(self) -> int:
        return self._durable.now_ms()

    async def create(self, request: AdmissionRequest, limits: Limits) -> Admission | ErrorCode:
        try:
            return await self._durable.create(request, limits)
        except StoreUnavailableError:
            pass
        return await self._eager.create(request, limits)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._durable, name)


# -- hosts --------------------------------------------------------------------------------------


class _Host:
    """One harness host: its clock, and for each life (incarnation) a boundary over its own store client."""

    def __init__(self, sim: _Simulation, index: int) -> None:
        self.sim = sim
        self.index = index
        self.spec = sim.schedule.hosts[index]
        self.incarnation = 0
        self.tokens = 0
        self.tasks: set[asyncio.Task[Any]] = set()
        self.up = False
        self.boundary: AsyncToolBoundary | None = None
        self.store: _Recorder | None = None
        self.unknown_creates: set[tuple[str, str]] = set()
        self.processes = 0

    def clock_ms(self) -> int:
        true_ms = self.sim.loop.now_ns // 1_000_000
        return EPOCH_MS + self.spec.offset_ms + true_ms + true_ms * self.spec.drift_ppm // 1_000_000

    def monotonic_ms(self) -> float:
        """The host's monotonic clock in ms: simulated time at the host's drift (no offset)."""
        true_ns = self.sim.loop.now_ns
        return (true_ns + true_ns * self.spec.drift_ppm // 1_000_000) / 1_000_000

    def store_clock(self) -> int:
        """The host clock as the store reads it: the first reading of each operation is recorded."""
        now = self.clock_ms()
        op = CURRENT_OP.get()
        if isinstance(op, _Op):
            op.host_times.append(now)
        return now

    def next_token(self) -> str:
        self.tokens += 1
        return f"h{self.index}i{self.incarnation}n{self.tokens}"

    def start(self) -> None:
        self.incarnation += 1
        self.unknown_creates = set()
        inner = self.sim.build_store(self)
        self.store = _Recorder(inner, self.sim, self)
        self.boundary = self.new_boundary()
        self.up = True

    def new_boundary(self) -> AsyncToolBoundary:
        assert self.store is not None
        return AsyncToolBoundary(
            self.store,
            self.sim.registry,
            limits=SIM_LIMITS,
            token_factory=self.next_token,
            logger=self.sim.logger,
            completion_retry=COMPLETION,
        )

    def spawn(self, work: Callable[[], Awaitable[None]], attempt: _Attempt | None = None) -> None:
        self.processes += 1
        process = f"h{self.index}.{self.incarnation}.{self.processes}"

        async def run() -> None:
            _TASK.set((process, attempt))
            _HOST_CLOCK.set(self.store_clock)
            await work()

        task = asyncio.get_running_loop().create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def crash(self) -> None:
        self.up = False
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        store, self.store, self.boundary = self.store, None, None
        if store is not None:
            with contextlib.suppress(Exception):
                await store.close()


# -- the simulation ---------------------------------------------------------------------------------


class _Simulation:
    def __init__(self, schedule: Schedule, planted: str | None) -> None:
        self.schedule = schedule
        self.planted = planted
        self.deployment = schedule.deployment
        self.loop = VirtualLoop()
        self.network = Network(self.loop, schedule.seed)
        self.ledger = _Ledger(self)
        self.trace: list[str] = []
        self.violations: list[Violation] = []
        self.executions: list[_Execution] = []
        self.answers: list[tuple[int, _Attempt, str, _Version | None]] = []
        self.ops: list[_Op] = []
        self.events: list[tuple[str, _Op]] = []
        self.logs: list[str] = []
        self.policy_changed_ms: int | None = None
        self.attempts = 0
        self.token_attempts: dict[str, _Attempt] = {}
        self.rng = random.Random(schedule.seed * 31 + 7)  # noqa: S311 - repeatable fault choices
        self.logger = package_logger("invocation_store.testing.simulation")
        self.registry = self._registry()
        self.redis: SimRedisDeployment | None = None
        self.memory: _SharedMemoryStore | None = None
        if self.deployment.store == "redis":
            self.redis = SimRedisDeployment(
                self.loop,
                persistence=self.deployment.persistence,
                replica=self.deployment.replica,
                flavour=self.deployment.flavour,
                repl_delay_ms=lambda: self.rng.randint(1, 20),
                on_change=self.observe_redis,
                on_time=self._server_time_read,
                on_write=self._write_received,
                on_read=self._read_received,
                on_reset=self.network.reset_node,
                password=_SECRET,
            )
            self.network.deployment = self.redis
        else:
            self.memory = _SharedMemoryStore(self)
        self.hosts = [_Host(self, index) for index in range(len(schedule.hosts))]
        self.stats: dict[str, int] = {"invocations": 0, "executions": 0, "store_ops": 0, "faults": 0}

    # -- clocks ------------------------------------------------------------------------------

    def true_ms(self) -> int:
        return self.loop.now_ns // 1_000_000

    def reference_ms(self) -> int:
        return EPOCH_MS + self.true_ms()

    def _server_time_read(self, tag: object, ms: int) -> None:
        if isinstance(tag, _Op):
            tag.server_times.append(ms)
            tag.reached = True  # a memory store's application, or a script's TIME

    @staticmethod
    def _write_received(tag: object, script_ms: int | None) -> None:
        if isinstance(tag, _Op):
            tag.reached = True
            if script_ms is not None:
                tag.script_times.append(script_ms)

    @staticmethod
    def _read_received(tag: object, ms: int) -> None:
        if isinstance(tag, _Op):
            tag.read_times.append(ms)

    # -- building ------------------------------------------------------------------------------

    def _registry(self) -> ToolRegistry:
        async def execute(args: Any) -> Any:
            _process, attempt = _TASK.get()
            call = str(args.get("q", ""))
            if attempt is not None:
                self.executed(attempt)
            await asyncio.sleep(_tool_ms(call) / 1000)
            if args.get("mode") == "raise":
                raise RuntimeError("the tool failed")
            return {"hits": [call] * (1 + len(call) % 3), "trace": f"{RAW_MARKER}-{call}-{_SECRET}"}

        async def project(raw: str, args: Any) -> Projection:
            call = str(args.get("q", ""))
            if len(call) % 4 == 0:
                return Projection(evidence_status=EvidenceStatus.NO_EVIDENCE, content="no hits", scope="sim")
            count = raw.count(call)
            return Projection(
                evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=f"{count} hits", scope="sim"
            )

        return ToolRegistry(
            [ToolSpec(name="search", executor=execute, projector=project, timeout_ms=TOOL_TIMEOUT_MS)]
        )

    def build_store(self, host: _Host) -> Any:
        if self.memory is not None:
            caller = host.clock_ms if self.planted == "caller-clock" else None
            return RemoteMemoryStore(
                self.memory,
                self.network,
                host.index,
                timeout_ms=MEMORY_TIMEOUT_MS,
                caller_clock=caller,
                on_applied=self._server_time_read,
            )
        deployment = self.deployment
        durability = {
            "none": Durability(),
            "replicas": Durability(replicas=1, timeout_ms=DURABILITY_TIMEOUT_MS),
            "aof": Durability(aof=True, timeout_ms=DURABILITY_TIMEOUT_MS),
        }[deployment.durability]
        client = self._client(host)
        store: Any = AsyncRedisStore(
            client,
            prefix=PREFIX,
            durability=durability,
            retry_policy=RETRY,
            owns_client=True,
            local_clock=host.monotonic_ms,
        )
        if self.planted == "replay-ack":
            eager = AsyncRedisStore(client, prefix=PREFIX, retry_policy=RETRY, local_clock=host.monotonic_ms)
            store = _ReplayWithoutWaiting(store, eager)
        if self.planted == "nested-retry":
            store = _DetachedDeadlines(store)
        return store

    def _client(self, host: _Host) -> redis.asyncio.Redis:
        pool = redis.asyncio.ConnectionPool(
            connection_class=SimConnection,
            sim_network=self.network,
            sim_host=host.index,
            socket_timeout=SOCKET_TIMEOUT_MS / 1000,
            socket_connect_timeout=CONNECT_TIMEOUT_MS / 1000,
            protocol=2,
            password=_SECRET,
            retry=AsyncRedisFlavour.no_retry(),
        )
        return redis.asyncio.Redis(connection_pool=pool, retry=AsyncRedisFlavour.no_retry())

    # -- observing the store ------------------------------------------------------------------------

    def observe_memory(self, store: _SharedMemoryStore) -> None:
        now = self.true_ms()
        seen = set()
        for (run_id, tcid), record in list(store._records.items()):
            key = (run_id, tcid)
            seen.add(key)
            live = self.ledger.current(key)
            if live is not None and live.token == record.invocation_token:
                continue
            lifetime = remaining_ms(record, record.created_at_ms) or 0  # its whole TTL, from its creation
            self.ledger.record(key, record.invocation_token, now + lifetime, now)
        for key in list(self.ledger.versions):
            if key not in seen and self.ledger.current(key) is not None:
                self.ledger.record(key, None, None, now)
        for run_id, run in list(store._runs.items()):
            self.ledger.run(
                run_id,
                {
                    "opened_at_ms": str(run.opened_at_ms),
                    "tool_calls_used": str(run.tool_calls_used),
                    "tool_call_budget": str(run.tool_call_budget),
                    "bytes_used": str(run.bytes_used),
                    "byte_budget": str(run.byte_budget),
                },
                now,
            )

    def observe_redis(self, node: SimRedisNode) -> None:
        now = self.true_ms()
        data = node.data()
        runs: dict[str, Mapping[str, str] | None] = {}
        records: dict[tuple[str, str], tuple[str | None, int | None]] = {}
        for key_bytes, item in data.items():
            parsed = _parse_key(key_bytes)
            if parsed is None:
                continue
            run_id, kind, tcid = parsed
            value = item.value
            if not hasattr(value, "items"):  # fakeredis keeps a hash as its own mapping type
                continue
            if kind == "run":
                runs[run_id] = {str(_text(k)): str(_text(v)) for k, v in value.items()}
            elif kind == "call" and tcid is not None:
                token = _text(item.value.get(b"invocation_token"))
                expiry = None if item.expireat is None else int(item.expireat * 1000) - EPOCH_MS
                records[(run_id, tcid)] = (token, expiry)
        for key, (token, expiry) in records.items():
            self.ledger.record(key, token, expiry, now)
        for key in list(self.ledger.versions):
            if key not in records and self.ledger.current(key) is not None:
                self.ledger.record(key, None, None, now)
        for run_id in sorted(set(self.ledger.runs) | set(runs)):
            self.ledger.run(run_id, runs.get(run_id), now)

    def on_birth(self, key: tuple[str, str], version: _Version) -> None:
        changed = self.policy_changed_ms
        if changed is not None and version.born_ms > changed + POLICY_CHECK_INTERVAL_MS + self.op_bound_ms():
            self.violate(
                "drift",
                f"{key[0]}/{key[1]} admitted {version.born_ms - changed} ms after an evicting policy was set "
                f"(window {POLICY_CHECK_INTERVAL_MS} ms)",
            )

    def on_run_birth(self, run_id: str, now_ms: int) -> None:
        changed = self.policy_changed_ms
        if changed is not None and now_ms > changed + self.op_bound_ms():
            self.violate("drift", f"{run_id} opened {now_ms - changed} ms after an evicting policy was set")

    def acknowledged(self, record: CanonicalRecord) -> None:
        """A host got ``record`` as its admission: the version living now is acknowledged."""
        live = self.ledger.current((record.run_id, record.tool_call_id))
        if live is not None and live.token == record.invocation_token:
            live.acknowledged = True

    def executed(self, attempt: _Attempt) -> None:
        now = self.true_ms()
        self.stats["executions"] += 1
        key = (attempt.run_id, attempt.tool_call_id)
        self.executions.append(
            _Execution(
                host=attempt.host,
                incarnation=attempt.incarnation,
                run_id=attempt.run_id,
                tool_call_id=attempt.tool_call_id,
                token=attempt.token,
                at_ms=now,
            )
        )
        for version in self.ledger.versions.get(key, []):
            if version.token == attempt.token:
                version.executed += 1
        self.log_trace(f"h{attempt.host}.{attempt.incarnation} executes {key[0]}/{key[1]}")

    # -- operations --------------------------------------------------------------------------------

    def start_op(self, host: _Host, process: str, name: str, run_id: str, args: dict[str, Any]) -> _Op:
        _process, attempt = _TASK.get()
        op = _Op(
            attempt=0 if attempt is None else attempt.number,
            id=len(self.ops),
            process=process,
            host=host.index,
            name=name,
            args=args,
            start_ms=self.true_ms(),
            run_id=run_id,
        )
        self.ops.append(op)
        self.events.append(("invoke", op))
        self.stats["store_ops"] += 1
        return op

    def end_op(self, op: _Op, result: Any, failed: str | None) -> None:
        op.end_ms = self.true_ms()
        op.result = result
        op.failed = failed
        self.events.append(("info" if failed is not None else "ok", op))

    def op_bound_ms(self) -> int:
        if self.redis is None:
            return MEMORY_TIMEOUT_MS + 50
        return RETRY.budget_ms + self.round_trip_ms()

    def round_trip_ms(self) -> int:
        if self.redis is None:
            return MEMORY_TIMEOUT_MS + 50
        return CONNECT_TIMEOUT_MS + SOCKET_TIMEOUT_MS + 100

    # -- recording ------------------------------------------------------------------------------------

    def log_trace(self, line: str) -> None:
        self.trace.append(f"{self.true_ms():>8} {line}")

    def violate(self, promise: str, message: str) -> None:
        requirement = PROMISES[promise][0]
        self.violations.append(
            Violation(promise=promise, requirement=requirement, at_ms=self.true_ms(), message=message)
        )

    # -- the harness ------------------------------------------------------------------------------------

    def run_id(self, index: int) -> str:
        return f"run-{index}"

    def envelope(self, run: int, call: int) -> ToolCallEnvelope:
        run_id = self.run_id(run)
        q = f"{run_id}/call_{call}"
        mode = "raise" if call % 7 == 6 else "ok"
        return ToolCallEnvelope(
            run_id=run_id,
            tool_call_id=f"call_{call}",
            tool_name="search",
            arguments=json.dumps({"q": q, "mode": mode}),
        )

    async def harness(self, host: _Host, step: Step) -> None:
        boundary = host.boundary
        if boundary is None:
            return
        action = step.action
        run_id = self.run_id(step.run % len(self.schedule.runs))
        context = RunContext(run_id=run_id)
        if action == "open":
            spec = self.schedule.runs[step.run % len(self.schedule.runs)]
            opened = await boundary.open_run(
                run_id,
                deadline_ms=boundary.now_ms() + step.arg,
                ttl_ms=spec.ttl_ms,
                tool_call_budget=spec.budget,
                byte_budget=spec.byte_budget,
            )
            self.answer_line(host, f"open {run_id}", opened.value if isinstance(opened, ErrorCode) else "ok")
        elif action in ("call", "resend"):
            await self.invoke(
                host, step.run % len(self.schedule.runs), step.call % self.schedule.calls_per_run, 0
            )
        elif action == "sweep":
            await self._read(host, f"sweep {run_id}", lambda: boundary.sweep_stale(context, step.arg))
        elif action == "progress":
            await self._read(host, f"progress {run_id}", lambda: boundary.project_progress(context))
        elif action == "cite":
            tcid = f"call_{step.call % self.schedule.calls_per_run}"
            await self._read(host, f"cite {run_id}/{tcid}", lambda: boundary.cite(context, tcid))
        elif action == "close":
            closed = await boundary.close_run(context)
            self.answer_line(host, f"close {run_id}", closed.value if isinstance(closed, ErrorCode) else "ok")

    async def _read(self, host: _Host, what: str, read: Callable[[], Awaitable[Any]]) -> None:
        try:
            result = await read()
        except StoreUnavailableError as exc:
            self.answer_line(host, what, exc.code.value)
            return
        self.check_agent_text(repr(result), what)
        summary = str(result) if isinstance(result, int) else type(result).__name__
        if hasattr(result, "facts"):
            summary = f"{len(result.facts)} facts"
        elif hasattr(result, "kind"):
            summary = str(result.kind.value)
        self.answer_line(host, what, summary)

    async def invoke(self, host: _Host, run: int, call: int, resent: int) -> None:
        boundary = host.boundary
        if boundary is None:
            return
        envelope = self.envelope(run, call)
        key = (self.run_id(run), f"call_{call}")
        if self.planted == "dropped-create" and key in host.unknown_creates:
            boundary = host.new_boundary()  # planted: the held create is forgotten
        self.attempts += 1
        attempt = _Attempt(
            host=host.index,
            incarnation=host.incarnation,
            run_id=key[0],
            tool_call_id=key[1],
            number=self.attempts,
            started_ms=self.true_ms(),
        )
        process, _ = _TASK.get()
        _TASK.set((process, attempt))
        self.stats["invocations"] += 1
        started = self.true_ms()
        result = await boundary.invoke(RunContext(run_id=key[0]), envelope)
        attempt.answered_ms = self.true_ms()
        elapsed = self.true_ms() - started
        text = json.dumps(result.as_dict(), sort_keys=True)
        self.check_agent_text(text, f"{key[0]}/{key[1]}")
        code = result.code.value if result.code is not None else f"ok {result.evidence_status}"
        self.answers.append((self.true_ms(), attempt, code, self.ledger.current(key)))
        self.answer_line(host, f"invoke {key[0]}/{key[1]}", code)
        bound = self.op_bound_ms() + TOOL_TIMEOUT_MS + COMPLETION.budget_ms + self.round_trip_ms() + 100
        if elapsed > bound:
            self.violate(
                "wait", f"invoke {key[0]}/{key[1]} on host {host.index} took {elapsed} ms (bound {bound} ms)"
            )
        if result.code is ErrorCode.STORE_UNAVAILABLE and resent < RESENDS_AFTER_UNAVAILABLE:
            pause = 300 + (run * 131 + call * 71 + resent * 997) % 1_200
            await asyncio.sleep(pause / 1000)
            if host.up and host.boundary is not None:
                await self.invoke(host, run, call, resent + 1)

    def answer_line(self, host: _Host, what: str, answer: str) -> None:
        self.log_trace(f"h{host.index}.{host.incarnation} {what} -> {answer}")

    def check_agent_text(self, text: str, where: str) -> None:
        for leak in (RAW_MARKER, _SECRET, f"{PREFIX}:{{", "Traceback"):
            if leak in text:
                self.violate("raw", f"what the agent got for {where} holds {leak!r}")

    # -- faults ---------------------------------------------------------------------------------------

    def apply_fault(self, step: Step) -> None:
        self.stats["faults"] += 1
        link = self.network.link(step.host)
        now = self.true_ms()
        action = step.action
        applied = True
        if action == "lose-request":
            link.lose_requests += max(step.arg, 1)
        elif action == "lose-reply":
            link.lose_replies += max(step.arg, 1)
        elif action == "reset":
            if self.redis is not None:
                self.network.reset_host(step.host)
            else:
                link.lose_replies += 1
        elif action == "partition":
            link.partitioned_until_ms = max(link.partitioned_until_ms, now + max(step.arg, 1))
        elif action == "slow":
            link.slow_until_ms = now + 3_000
            link.slow_extra_us = max(step.arg, 1) * 1_000
        elif self.redis is None:
            applied = False
        elif action == "restart":
            before = _fingerprints(self.redis.master)
            with self.ledger.caused_by("restart"):
                self.redis.restart(max(step.arg, 50))
            self._lost_since(before)
        elif action == "failover":
            before = _fingerprints(self.redis.master)
            with self.ledger.caused_by("failover"):
                applied = self.redis.failover(max(step.arg, 50), rejoin_ms=3_000)
            self._lost_since(before)
        elif action == "evict":
            if self.redis.master.config["maxmemory-policy"] == "noeviction":
                applied = False
            else:
                before = _fingerprints(self.redis.master)
                with self.ledger.caused_by("evict"):
                    self.redis.evict(self._choose_key)
                self._lost_since(before)
        elif action == "policy":
            if self.policy_changed_ms is None:
                self.policy_changed_ms = now
            self.redis.set_policy("allkeys-lfu")
            # The operator puts it back after a while (the store then checks the server again).
            self.loop.call_later(POLICY_RESTORED_MS / 1000, self._restore_policy)
        elif action == "oom":
            self.redis.set_oom(True)
            self.loop.call_later(max(step.arg, 1) / 1000, self.redis.set_oom, False)
        elif action == "repl-cut":
            self.redis.cut_replication(now + max(step.arg, 1))
        self.log_trace(("fault " if applied else "fault (no effect) ") + describe_step(step).split(" ", 1)[1])

    def _restore_policy(self) -> None:
        assert self.redis is not None
        self.redis.set_policy("noeviction")
        self.policy_changed_ms = None

    def _lost_since(self, before: Mapping[str, str]) -> None:
        """Runs whose data a fault changed (a write lost, a record evicted) leave the history check."""
        assert self.redis is not None
        after = _fingerprints(self.redis.master)
        for run_id in sorted(set(before) | set(after)):
            if before.get(run_id) != after.get(run_id):
                self.ledger.lost_runs.add(run_id)

    def _choose_key(self, keys: list[bytes]) -> bytes | None:
        calls = [key for key in keys if b":call:" in key]
        pool = calls or keys
        return pool[self.rng.randrange(len(pool))] if pool else None

    # -- running -----------------------------------------------------------------------------------------

    async def main(self) -> None:
        for host in self.hosts:
            host.start()
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        steps = sorted(self.schedule.steps, key=lambda step: step.at_ms)
        last = steps[-1].at_ms if steps else 0
        for index, step in enumerate(steps):
            loop.call_at(step.at_ms / 1000, self._start_step, index, step)
        await asyncio.sleep((last + QUIESCE_MS) / 1000)
        del done
        for host in self.hosts:
            if host.tasks:
                await asyncio.wait(set(host.tasks), timeout=QUIESCE_MS / 1000)
        for host in self.hosts:
            await host.crash()

    def _start_step(self, index: int, step: Step) -> None:
        del index
        if step.host >= len(self.hosts):
            return
        host = self.hosts[step.host]
        if step.action in ("call", "resend", "open", "sweep", "progress", "cite", "close"):
            if host.up:
                if step.action in ("call", "resend"):
                    host.spawn(lambda: self.harness(host, step))
                else:
                    host.spawn(lambda: self.harness(host, step))
        elif step.action == "crash":
            if host.up:
                asyncio.get_running_loop().create_task(self._crash(host))
        else:
            self.apply_fault(step)

    async def _crash(self, host: _Host) -> None:
        self.log_trace(f"h{host.index}.{host.incarnation} crashes")
        await host.crash()
        await asyncio.sleep(HOST_DOWN_MS / 1000)
        host.start()
        self.log_trace(f"h{host.index}.{host.incarnation} starts")

    # -- the checks at the end -------------------------------------------------------------------------------

    def check(self, *, history: bool = True) -> None:
        self._check_once()
        self._check_durable()
        self._check_fate()
        self._check_budgets()
        self._check_logs()
        self._check_waits()
        if history:
            self._check_history()

    def _check_once(self) -> None:
        tokens: dict[str, int] = {}
        for execution in self.executions:
            if execution.token is None:
                continue
            tokens[execution.token] = tokens.get(execution.token, 0) + 1
            if tokens[execution.token] == 2:
                self.violations.append(
                    self._violation(
                        "once",
                        execution.at_ms,
                        f"{execution.run_id}/{execution.tool_call_id}: one admission "
                        f"(token {execution.token}) ran its executor twice",
                    )
                )
        for (run_id, tcid), versions in self.ledger.versions.items():
            for index, version in enumerate(versions):
                if not version.executed or version.end not in ("replaced", "deleted"):
                    continue
                tolerance = 0 if self.redis is None else STALE_NOW_MS
                expiry, ended = version.expiry_ms, version.ended_ms
                if expiry is not None and ended is not None and ended + tolerance >= expiry:
                    continue  # within the store's stated bound on a stale clock reading
                later = [v for v in versions[index + 1 :] if v.executed]
                if later:
                    lived = "" if version.expiry_ms is None else f", due to expire at t={version.expiry_ms}ms"
                    self.violations.append(
                        self._violation(
                            "once",
                            later[0].born_ms,
                            f"{run_id}/{tcid} ran its executor for {version.token} and again for "
                            f"{later[0].token}: the first record was {version.end} at "
                            f"t={version.ended_ms}ms while it lived{lived}",
                        )
                    )

    def _promises_to_keep(self, cause: str) -> bool:
        deployment = self.deployment
        if cause == "restart":
            return deployment.persistence == "always" or (
                deployment.durability == "aof" and deployment.persistence == "everysec"
            )
        if cause == "failover":
            return deployment.durability == "replicas"
        return False

    def _check_durable(self) -> None:
        for (run_id, tcid), versions in self.ledger.versions.items():
            for version in versions:
                end = version.end
                if end in ("restart", "failover") and version.acknowledged and self._promises_to_keep(end):
                    self.violations.append(
                        self._violation(
                            "durable",
                            version.ended_ms or 0,
                            f"{run_id}/{tcid} (token {version.token}) was acknowledged, then lost in a {end} "
                            f"of a deployment that promises to keep it ({self.deployment.label()})",
                        )
                    )

    def _check_fate(self) -> None:
        first_run: dict[tuple[str, str], int] = {}
        for execution in self.executions:
            first_run.setdefault((execution.run_id, execution.tool_call_id), execution.at_ms)
        executed_tokens = {execution.token for execution in self.executions}
        attempts = {id(attempt): attempt for _, attempt, _, _ in self.answers}
        attempts.update((id(attempt), attempt) for attempt in self.token_attempts.values())

        def running_when_sent(attempt: _Attempt) -> bool:
            # Another send of this call by the same host process was still running when the
            # harness sent this one: a duplicate still running (CALL_IN_PROGRESS) is its answer.
            return any(
                other is not attempt
                and (other.host, other.incarnation) == (attempt.host, attempt.incarnation)
                and (other.run_id, other.tool_call_id) == (attempt.run_id, attempt.tool_call_id)
                and other.started_ms <= attempt.started_ms
                and (other.answered_ms is None or other.answered_ms > attempt.started_ms)
                for other in attempts.values()
            )

        for at_ms, attempt, code, version in self.answers:
            key = (attempt.run_id, attempt.tool_call_id)
            ran_at = first_run.get(key)
            if code == ErrorCode.DUPLICATE_TOOL_CALL.value and (ran_at is None or ran_at > at_ms):
                self.violations.append(
                    self._violation(
                        "fate", at_ms, f"{key[0]}/{key[1]} answered DUPLICATE_TOOL_CALL; its tool never ran"
                    )
                )
            if code not in (ErrorCode.CALL_IN_PROGRESS.value, ErrorCode.DUPLICATE_TOOL_CALL.value):
                continue
            if code == ErrorCode.CALL_IN_PROGRESS.value and running_when_sent(attempt):
                continue
            earlier = None if version is None else self.token_attempts.get(version.token)
            if (
                version is not None
                and earlier is not None
                and earlier is not attempt
                and (earlier.host, earlier.incarnation) == (attempt.host, attempt.incarnation)
                # The harness sent this call again after the earlier attempt had answered: a
                # re-send made while that attempt still ran is a duplicate still running.
                and earlier.answered_ms is not None
                and earlier.answered_ms <= attempt.started_ms
                and version.token not in executed_tokens
            ):
                self.violations.append(
                    self._violation(
                        "fate",
                        at_ms,
                        f"{key[0]}/{key[1]}: host {attempt.host} was answered {code} for its own earlier "
                        f"attempt (token {version.token}, answered at t={earlier.answered_ms}ms), "
                        "whose tool never ran",
                    )
                )

    def _check_budgets(self) -> None:
        spent: dict[tuple[str, int], set[str]] = {}
        for (run_id, _tcid), versions in self.ledger.versions.items():
            for version in versions:
                if version.executed and version.end not in ("restart", "failover", "evict"):
                    spent.setdefault((run_id, version.run_incarnation), set()).add(version.token)
        for (run_id, _incarnation), tokens in spent.items():
            index = int(run_id.rsplit("-", 1)[1])
            budget = self.schedule.runs[index % len(self.schedule.runs)].budget
            if len(tokens) > budget:
                self.violations.append(
                    self._violation(
                        "budget", 0, f"{run_id} ran {len(tokens)} tools with a budget of {budget}"
                    )
                )

    def _check_logs(self) -> None:
        for line in self.logs:
            for leak in (RAW_MARKER, _SECRET, f"{PREFIX}:{{", "Traceback"):
                if leak in line:
                    self.violations.append(self._violation("raw", 0, f"a log line holds {leak!r}"))
                    return

    def _check_waits(self) -> None:
        bound = self.op_bound_ms() + 50
        names: dict[int, str] = {}
        phases: dict[int, tuple[int, int]] = {}
        for op in self.ops:
            if op.end_ms is None or op.failed == "CancelledError":
                continue
            took = op.end_ms - op.start_ms
            if took > bound:
                self.violations.append(
                    self._violation(
                        "wait",
                        op.end_ms,
                        f"store {op.name} on host {op.host} took {took} ms (bound {bound} ms)",
                    )
                )
            if op.name == "complete" and op.attempt:
                first, _ = phases.get(op.attempt, (op.start_ms, op.end_ms))
                phases[op.attempt] = (first, op.end_ms)
                names[op.attempt] = (
                    f"{op.args['before'].run_id}/{op.args['before'].tool_call_id} on host {op.host}"
                )
        limit = COMPLETION.budget_ms + self.round_trip_ms() + 50
        for number, (first, last) in phases.items():
            if last - first > limit:
                self.violations.append(
                    self._violation(
                        "wait",
                        last,
                        f"the completion of {names[number]} took {last - first} ms (budget "
                        f"{COMPLETION.budget_ms} ms + one round trip: {limit} ms)",
                    )
                )

    def excluded_runs(self) -> set[str]:
        """Runs the history check leaves out: data lost by a fault, a create or open refused not durable.

        The history's sequential specification (the kernel) knows neither a store that
        loses data nor the store's own take-back of a write it could not make durable (a
        record moved to ERROR/DURABILITY_NOT_REACHED, a run it opened deleted again):
        writes no operation of the history performs.
        """
        excluded = set(self.ledger.lost_runs)
        for op in self.ops:
            if op.name in ("create", "open_run") and op.result is ErrorCode.DURABILITY_NOT_REACHED:
                excluded.add(op.run_id)
        return excluded

    def history_lines(self) -> list[str]:
        lost = self.excluded_runs()
        clock = self.decision_clock()
        lines = [json.dumps(header_line(SIM_LIMITS, "simulation"))]
        for kind, op in self.events:
            if op.run_id in lost:
                continue
            if kind == "invoke":
                args = {**op.args, "now_ms": self._time_used(op, clock)}
                obj: dict[str, Any] = {
                    "type": "invoke",
                    "id": op.id,
                    "process": op.process,
                    "op": op.name,
                    "args": encode_args(op.name, args),
                }
            elif kind == "ok":
                obj = {
                    "type": "ok",
                    "id": op.id,
                    "process": op.process,
                    "result": encode_result(op.name, op.result),
                }
            else:  # no request of it reached the store: it certainly took no effect (a ``fail``)
                ended = "info" if op.reached else "fail"
                obj = {"type": ended, "id": op.id, "process": op.process, "reason": op.failed or "unknown"}
            lines.append(json.dumps(obj, separators=(",", ":")))
        return lines

    def decision_clock(self) -> str:
        """Which clock the store decides on, as its admissions show: ``host`` or ``server``.

        A fresh admission's ``created_at_ms`` is the time the store decided at; it is one
        of the host-clock readings of that operation (a store that takes the caller's
        ``now``) or one of the server ``TIME`` readings (a store on the server's clock).
        """
        votes = {"host": 0, "server": 0}
        for op in self.ops:
            result = op.result
            if op.name == "create" and isinstance(result, Admission) and not result.replayed:
                created = result.record.created_at_ms
                in_server, in_host = created in op.server_times, created in op.host_times
                votes["server"] += in_server and not in_host
                votes["host"] += in_host and not in_server
        return "server" if votes["server"] > votes["host"] else "host"

    def _time_used(self, op: _Op, clock: str) -> int:
        """The ``now_ms`` an operation was decided at (spec/history.md: the time the store really used).

        An admission carries it (``created_at_ms``); a script its server time when it ran
        (an EVALSHA refused NOSCRIPT ran nothing, and is not timed); a plain read the
        server's time when it ran; otherwise the store's decision clock's
        reading: the first server ``TIME`` of the operation, or the host clock's first
        reading (a refused create: its last, since a create that started too late is
        planned again with a fresh reading).
        """
        result = op.result
        if op.name == "create" and isinstance(result, Admission):
            return result.record.created_at_ms
        if op.name == "open_run" and op.script_times:
            # Its first script run opens the run (the answer may be a retry's, which finds the
            # run as that attempt left it or moved on): the open is replayed at that time.
            return op.script_times[0]
        if op.name == "complete" and op.script_times:
            # A completion decides inside its script, on the server's clock: the answer is the
            # last attempt's (a lost reply's attempt may have applied it first, then the retry
            # answers as a replay); an unknown outcome's first attempt applies it.
            return op.script_times[0] if op.failed is not None else op.script_times[-1]
        if op.decided_at is not None and op.failed is None:  # the store said when it decided
            return op.decided_at
        if op.read_times and op.failed is None and not op.server_times and not op.script_times:
            # A plain read decides at the server's time when it runs (Redis lapses keys on its
            # own clock); the answer is its last attempt's.
            return op.read_times[-1]
        if op.server_times:  # an unknown outcome that reached the store: its first application
            return op.server_times[0]
        if op.host_times:
            return op.host_times[-1] if op.name == "create" else op.host_times[0]
        if op.server_times:
            return op.server_times[0]
        return EPOCH_MS + op.start_ms

    def _check_history(self) -> None:
        """Each run's sub-history searched alone (linearizability is local); the window explained when small.

        The explanation tries every order of the contradicting window, which grows
        exponentially with a run's concurrency: it is computed for runs of at most
        :data:`EXPLAIN_OPS` operations; for larger ones the report names the run and
        ``--history`` writes the file for ``invocation-store check-history``.
        """
        history = decode_history(self.history_lines())
        by_run: dict[str, list[HistoryOp]] = {}
        for op in history.ops:
            by_run.setdefault(op.run_id, []).append(op)
        self.stats["history_ops"] = len(history.ops)
        self.stats["history_runs_excluded"] = len(self.excluded_runs())
        for run_id, ops in by_run.items():
            try:
                if is_linearizable(ops):
                    continue
            except BudgetExhausted as exhausted:  # neither verdict: reported, never taken as a pass
                detail = (
                    f"undecided within the search budget ({exhausted.limit}, {len(ops)} operations); "
                    "write the history with --history and run check-history with a larger budget"
                )
                self.violations.append(self._violation("history", 0, f"{run_id}: {detail}"))
                continue
            detail = f"{len(ops)} operations; write the history with --history and run check-history"
            if len(ops) <= EXPLAIN_OPS:
                report = check_history(History(limits=history.limits, ops=tuple(ops), lines=history.lines))
                if report.violation is not None:
                    rendered = report.violation.render().splitlines()
                    detail = " / ".join(line.strip() for line in rendered[1:4])
            self.violations.append(self._violation("history", 0, f"{run_id} is not linearizable: {detail}"))

    def _violation(self, promise: str, at_ms: int, message: str) -> Violation:
        return Violation(promise=promise, requirement=PROMISES[promise][0], at_ms=at_ms, message=message)


def _tool_ms(call: str) -> int:
    return 5 + int(hashlib.sha256(call.encode()).hexdigest()[:4], 16) % 300


def _fingerprints(node: SimRedisNode) -> dict[str, str]:
    """A digest of each run's keys and values on ``node`` (expiry aside)."""
    parts: dict[str, list[str]] = {}
    for key, item in sorted(node.data().items()):
        parsed = _parse_key(key) or _parse_any(key)
        if parsed is None:
            continue
        value = item.value
        shown = sorted(value.items()) if hasattr(value, "items") else value
        parts.setdefault(parsed[0], []).append(repr((key, shown)))
    return {run_id: hashlib.sha256("|".join(lines).encode()).hexdigest() for run_id, lines in parts.items()}


def _parse_any(key: bytes) -> tuple[str, str, str | None] | None:
    """The run of any key of the store (raw responses and lists too)."""
    text = key.decode("utf-8", "replace")
    head = PREFIX + ":{"
    end = text.find("}", len(head))
    if not text.startswith(head) or end < 0:
        return None
    return (text[len(head) : end], "other", None)


def _parse_key(key: bytes) -> tuple[str, str, str | None] | None:
    """``cis:{run}:call:id`` -> (run, "call", id); ``cis:{run}:run`` -> (run, "run", None); else None."""
    text = key.decode("utf-8", "replace")
    head = PREFIX + ":{"
    if not text.startswith(head):
        return None
    end = text.find("}:", len(head))
    if end < 0:
        return None
    run_id, rest = text[len(head) : end], text[end + 2 :]
    if rest == "run":
        return (run_id, "run", None)
    if rest.startswith("call:"):
        return (run_id, "call", rest[5:])
    return None


class _Capture(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def _captured_logs(lines: list[str]) -> Iterator[None]:
    package = logging.getLogger("invocation_store")
    handler = _Capture(lines)
    saved = (package.level, package.propagate)
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    package.propagate = False
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.setLevel(saved[0])
        package.propagate = saved[1]


@contextlib.contextmanager
def _host_wall_clocks(reference: Callable[[], int]) -> Iterator[None]:
    """The Redis store's wall-clock fallback (before its first reading of server ``TIME``) reads
    the simulated host's clock: the one reading of real time the simulation stands in for."""
    from ..adapters._async import redis as async_redis  # noqa: PLC0415 - patched for the scope only

    saved: Callable[[], int] = getattr(async_redis, "wall_clock_ms")  # noqa: B009 - not re-exported

    def host_wall_clock() -> int:
        clock = _HOST_CLOCK.get()
        return clock() if clock is not None else reference()

    setattr(async_redis, "wall_clock_ms", host_wall_clock)  # noqa: B010 - not re-exported
    try:
        yield
    finally:
        setattr(async_redis, "wall_clock_ms", saved)  # noqa: B010 - not re-exported


def _run(schedule: Schedule, planted: str | None) -> _Simulation:
    if planted is not None and planted not in PLANTED_FAULTS:
        raise ValueError(f"unknown planted fault {planted!r}")
    sim = _Simulation(schedule, planted)
    with _captured_logs(sim.logs), simulated_server_time(), _host_wall_clocks(sim.reference_ms):
        try:
            run_simulated(sim.main(), sim.loop)
        except SimulationStalledError as exc:
            sim.violate("stalled", f"the simulation stalled ({type(exc).__name__})")
    return sim


def history_of(schedule: Schedule, planted: str | None = None) -> list[str]:
    """The history (JSON Lines, header first) ``schedule`` records, for ``invocation-store check-history``.

    Runs whose data a fault changed, or with a create refused as not durable, are left
    out (see :meth:`_Simulation.excluded_runs`).
    """
    return _run(schedule, planted).history_lines()


def simulate(schedule: Schedule, *, planted: str | None = None, history: bool = True) -> SimulationResult:
    """Run ``schedule`` (planted fault ``planted``: a :data:`PLANTED_FAULTS` key) and check every promise.

    Deterministic: the same schedule and planted fault give the same result, trace and
    digest. ``history=False`` skips the linearizability check (CIS-SIM-9), the costliest
    one (shrinking a failure of another promise does). Raises ``ValueError`` for an
    unknown planted fault.
    """
    sim = _run(schedule, planted)
    sim.check(history=history)
    trace = tuple(sim.trace)
    digest = hashlib.sha256("\n".join(trace).encode()).hexdigest()
    violations = tuple(sorted(sim.violations, key=lambda v: (v.at_ms, v.promise, v.message)))
    return SimulationResult(
        schedule=schedule,
        planted=planted,
        violations=violations,
        trace=trace,
        digest=digest,
        stats=dict(sim.stats),
    )


# -- seeds, shrinking, replay -------------------------------------------------------------------


def seed_schedule(
    seed: int,
    *,
    hosts: int = 3,
    steps: int = 200,
    deployment: str | None = None,
    planted: str | None = None,
    max_skew_ms: int = 12_000,
) -> Schedule:
    """The schedule of ``seed`` (``_sim_schedule.generate``) on the named deployment.

    ``deployment`` None (or ``mixed``): the planted fault's deployment if one is planted,
    else one drawn from the seed. Raises ``ValueError`` for unknown names.
    """
    name = deployment if deployment not in (None, "mixed") else None
    if name is None and planted is not None:
        if planted not in PLANTED_FAULTS:
            raise ValueError(f"unknown planted fault {planted!r}")
        name = PLANTED_FAULTS[planted].deployment
    if name is not None and name not in DEPLOYMENTS:
        raise ValueError(f"unknown deployment {name!r}")
    return generate(
        seed,
        hosts=hosts,
        steps=steps,
        deployment=None if name is None else DEPLOYMENTS[name],
        max_skew_ms=max_skew_ms,
    )


def shrink_failure(
    result: SimulationResult, *, promise: str | None = None, budget: int = 300
) -> SimulationResult:
    """A minimal schedule (``_sim_schedule.shrink``) that still breaks ``promise`` (default: the
    first broken one of ``result``), run; ``result`` itself if it broke none."""
    if not result.violations:
        return result
    promises = {promise if promise is not None else result.violations[0].promise}

    def fails(candidate: Schedule) -> bool:
        found = simulate(candidate, planted=result.planted, history="history" in promises)
        return bool(promises & {violation.promise for violation in found.violations})

    smaller = shrink(result.schedule, fails, budget=budget)
    return simulate(smaller, planted=result.planted)


def seeds_to_find(
    planted: str, *, first_seed: int = 0, max_seeds: int = 200, hosts: int = 3, steps: int = 150
) -> int | None:
    """How many seeds from ``first_seed`` on it takes to find ``planted`` (None: not in ``max_seeds``)."""
    promise = PLANTED_FAULTS[planted].promise
    for count in range(1, max_seeds + 1):
        schedule = seed_schedule(first_seed + count - 1, hosts=hosts, steps=steps, planted=planted)
        if any(violation.promise == promise for violation in simulate(schedule, planted=planted).violations):
            return count
    return None
