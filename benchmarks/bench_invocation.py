"""One tool call through the boundary, against the physical floor, measured honestly.

Run: ``.venv/bin/python benchmarks/bench_invocation.py [--rounds 15] [--ops 150]``
(``CIS_BENCH_QUICK=1`` or ``--quick``: fewer rounds). Starts its own throwaway
redis-server on a free loopback port (never the one on 6379). Nothing is asserted
about time; the script does assert that every call it times succeeded.

Method. Every figure is a ratio (or a time) measured within this one run; the
variants of a section are interleaved round by round (the order rotating), and both
CPU placements are interleaved too: each round pins this process (every thread) and
the private redis-server (every thread) with ``os.sched_setaffinity``, first to the
same CPU, then to different CPUs, because placement alone changes a loopback round
trip several-fold on a small machine. Each figure is the median over rounds of the
per-round value, printed with its spread (min..max over rounds). ``uptime`` load
averages are printed at the start and the end: the machine may be shared.

The work: arguments of 1 KiB, a raw response of 4 KiB, a projection of a few bytes.

1. **Invocation vs the floor** (sync, per placement). The floor is two ``EVALSHA`` of a
   trivial script (``return 1``) sent through redis-py with the exact keys and
   arguments the store sent for one invocation (recorded), so with its argument sizes,
   and with hiredis when installed. Also two ``PING``. Variants: ``ToolBoundary`` +
   ``RedisStore`` with a tool declared without a time limit (runs inline) and with
   one (runs on a persistent worker); the seed's protocol (``SET NX PX``, ``GET``,
   ``PTTL``, ``SET PX``; ``seed_store.py``) behind the same ``ToolBoundary`` and
   tool, so that "ours vs the seed" compares protocols only; both stores bare
   (create, the kernel's transitions, complete; no boundary); and the boundary on a
   client that does not use hiredis (``_RESP2Parser``): hiredis' effect.
2. **project_progress per completed call** (per placement): 1,000 READY calls; the
   boundary's read (``get_progress``: one ``HMGET`` of the progress fields per
   record) against the previous read (``get_many(include_raw=False)``: ``HGETALL``
   per record), each with and without hiredis. Time per completed call, and bytes the
   server sent per completed call (``INFO stats`` ``total_net_output_bytes`` delta,
   less the ``INFO`` reply itself).
3. **64 concurrent invocations** (async, per placement): ``AsyncToolBoundary`` +
   ``AsyncRedisStore`` (async no-op tool) against plain ``redis.asyncio`` sending the
   same successful commands: the two ``EVALSHA`` recorded from one invocation, ids
   rewritten, and the sequence in the complete's header taken from each create's
   reply. Before any ratio is printed the script asserts that every replayed create
   answered ``OK`` and every complete ``WRITE``, and that every replayed call's record
   is READY on the server.
4. **MemoryStore invocation** (this process pinned to one CPU), in process CPU time
   (every thread: the worker's too) beside wall time: the default ``ToolSpec``
   (``timeout_ms=30_000``, so the executor runs on a persistent worker) and a tool
   declared ``timeout_ms=None`` (inline), against a bare call (the argument parse, the
   executor and the projector); the pure kernel's share of one invocation
   (``bench_kernel.py``'s whole-invocation function, same sizes); what telemetry costs
   without an OpenTelemetry SDK (the telemetry decorator and the pipeline's stopwatch
   calls around a no-op pipeline, less the no-op pipeline); the worker
   hand-off alone (a no-op on a worker less the same call in the thread); and the
   projector's copy of the parsed arguments made three ways: ``copy_json`` (what the
   boundary does), a second parse, ``copy.deepcopy``.
5. **Fixed RTT** (``--rtt-ms``, default 1; ``none`` skips): section 1's floor, PINGs,
   boundary (inline) and seed-behind-the-boundary through the user-space delay relay
   of ``bench_redis.py`` (unpinned: the relay is a third process).

Each figure is also printed as a ``FIGURE`` line for ``run_all.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

import redis
import redis.asyncio
from redis._parsers import _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ is not a package

from bench_kernel import invocation as kernel_invocation
from bench_redis import relay_server
from seed_store import SeedStore

from invocation_store import (
    AsyncRedisStore,
    AsyncToolBoundary,
    MemoryStore,
    RedisStore,
    ToolBoundary,
    ToolRegistry,
    ToolSpec,
)
from invocation_store._runners import WORKERS, call_inline
from invocation_store.adapters import ForwardingStore
from invocation_store.boundary import copy_json
from invocation_store.boundary._telemetry import NO_WATCH, Stopwatch, active_otel, observed_invoke
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    EvidenceStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    ToolCallEnvelope,
    transition,
)
from invocation_store.kernel._ijson import parse_arguments
from invocation_store.testing.redis_server import redis_server

HOUR_MS = 3_600_000
LIMITS = Limits()
PROGRESS_CALLS = 1000
CONCURRENCY = 64


def _exact_json(size: int, filler: str) -> str:
    head = '{"query": "quarterly revenue by region", "limit": 25, "filters": {"year": 2024}, "text": "'
    body = (filler * size)[: size - len(head) - 2]
    text = head + body + '"}'
    assert len(text.encode()) == size
    return text


ARGUMENTS = _exact_json(1024, "lorem ipsum dolor sit amet ")
RAW = _exact_json(4096, "row,2024-Q1,EMEA,1234567.89;")
PROJECTION = Projection(
    evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="EMEA 1,234,567.89", scope="2024"
)


def executor(_args: Mapping[str, Any]) -> str:
    return RAW


def projector(_raw: str, _args: Mapping[str, Any]) -> Projection:
    return PROJECTION


async def async_executor(_args: Mapping[str, Any]) -> str:
    return RAW


async def async_projector(_raw: str, _args: Mapping[str, Any]) -> Projection:
    return PROJECTION


def _tools() -> ToolRegistry:
    return ToolRegistry(
        [
            # The default ToolSpec (timeout_ms 30 s: the tool runs on the boundary's worker).
            ToolSpec(name="default", executor=executor, projector=projector),
            # Non-default: timeout_ms=None, the tool runs inline on the caller's thread.
            ToolSpec(name="inline", executor=executor, projector=projector, timeout_ms=None),
        ]
    )


def _load() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return "load average " + " ".join(f.read().split()[:3])


# -- placement ---------------------------------------------------------------------------


def _pin(pid: int | None, cpus: set[int]) -> None:
    """Pin every thread of ``pid`` (None: this process) to ``cpus``."""
    base = f"/proc/{pid or 'self'}/task"
    for tid in os.listdir(base):
        with suppress(ProcessLookupError, PermissionError):  # a thread that just ended
            os.sched_setaffinity(int(tid), cpus)


def placements(server_pid: int) -> list[tuple[str, Callable[[], None]]]:
    """(name, pin) for client and server on the same CPU, and on different CPUs when there are two."""
    cpus = sorted(os.sched_getaffinity(0))

    def pinner(client_cpu: int, server_cpu: int) -> Callable[[], None]:
        def pin() -> None:
            _pin(None, {client_cpu})
            _pin(server_pid, {server_cpu})

        return pin

    result = [("same CPU", pinner(cpus[0], cpus[0]))]
    if len(cpus) > 1:
        result.append(("different CPUs", pinner(cpus[0], cpus[1])))
    return result


# -- statistics --------------------------------------------------------------------------


def _spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    med = statistics.median(values) * scale
    return f"{med:.{digits}f} ({min(values) * scale:.{digits}f}..{max(values) * scale:.{digits}f})"


def figure(label: str, values: list[float], unit: str = "x", scale: float = 1.0, target: str = "") -> None:
    digits = 2 if unit == "x" else 1
    text = f"{label}: {_spread(values, scale, digits)} {unit}"
    if target:
        text += f"  [target {target}]"
    print(f"FIGURE {text}")


def _time(op: Callable[[], object], ops: int) -> float:
    start = time.perf_counter()
    for _ in range(ops):
        op()
    return (time.perf_counter() - start) / ops


#: CPU seconds per op of the last ``interleave`` call:
#: ``{placement: {variant: [(client process CPU, server main thread CPU) per round]}}``.
CPU: dict[str, dict[str, list[tuple[float, float]]]] = {}


def server_cpu_reader(pid: int) -> Callable[[], float] | None:
    """CPU seconds used so far by the main thread of local process ``pid`` (schedstat), if readable."""
    path = f"/proc/{pid}/task/{pid}/schedstat"
    if not os.path.exists(path):
        return None

    def read() -> float:
        with open(path, encoding="ascii") as stats:
            return int(stats.read().split()[0]) / 1e9

    return read


def interleave(
    variants: dict[str, Callable[[], object]],
    rounds: int,
    ops: int,
    places: list[tuple[str, Callable[[], None]]],
    server_cpu: Callable[[], float] | None = None,
) -> dict[str, dict[str, list[float]]]:
    """Seconds per op: ``{placement: {variant: [per round]}}``, everything interleaved.

    Client CPU per op (``time.process_time``: every thread of this process) is kept in
    :data:`CPU`, with the server's when ``server_cpu`` reads it.
    """
    out: dict[str, dict[str, list[float]]] = {name: {v: [] for v in variants} for name, _ in places}
    CPU.clear()
    CPU.update({name: {v: [] for v in variants} for name, _ in places})
    names = list(variants)
    for index in range(rounds):
        for place, pin in places:
            pin()
            order = names[index % len(names) :] + names[: index % len(names)]
            for name in order:
                server = server_cpu() if server_cpu else 0.0
                client = time.process_time()  # every thread of this process (a worker tool's too)
                out[place][name].append(_time(variants[name], ops))
                client = (time.process_time() - client) / ops
                server = ((server_cpu() - server) / ops) if server_cpu else 0.0
                CPU[place][name].append((client, server))
    return out


def cpu_line(place: str, name: str) -> str:
    samples = CPU.get(place, {}).get(name, [])
    if not samples:
        return ""
    client = statistics.median(c for c, _ in samples) * 1e6
    server = statistics.median(s for _, s in samples) * 1e6
    return f"  [CPU: client {client:6.1f} us, server {server:6.1f} us]"


def ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=True)]


# -- 1. invocation vs floor ----------------------------------------------------------------


class Counter:
    def __init__(self, head: str) -> None:
        self.head = head
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"{self.head}{self.n:08d}"


def _envelope(run_id: str, tool_call_id: str, tool: str, arguments: str = ARGUMENTS) -> ToolCallEnvelope:
    return ToolCallEnvelope(run_id=run_id, tool_call_id=tool_call_id, tool_name=tool, arguments=arguments)


def _open(boundary: Any, run_id: str) -> RunContext:
    context = boundary.open_run(
        run_id,
        deadline_ms=boundary.now_ms() + HOUR_MS,
        ttl_ms=HOUR_MS,
        tool_call_budget=10**9,
        byte_budget=10**14,
    )
    assert isinstance(context, RunContext), context
    return context


def _record_evalshas(store: RedisStore, action: Callable[[], object]) -> list[tuple[Any, ...]]:
    """The EVALSHA commands the store sends while ``action`` runs."""
    sent: list[tuple[Any, ...]] = []
    original = store._send

    def recording(*args: Any, **options: Any) -> Any:
        sent.append(args)
        return original(*args, **options)

    store._send = recording
    try:
        action()
    finally:
        store._send = original
    return [command for command in sent if command[0] == "EVALSHA"]


def _ready(record: CanonicalRecord, now: int) -> CanonicalRecord:
    raw = transition(record, RawReceived(raw_response=RAW, now_ms=now), LIMITS)
    assert isinstance(raw, CanonicalRecord)
    done = transition(raw, ProjectionReceived(projection=PROJECTION, now_ms=now), LIMITS)
    assert isinstance(done, CanonicalRecord)
    return done


def section_invocation(
    url: str, places: list[tuple[str, Callable[[], None]]], rounds: int, ops: int, server_pid: int
) -> None:
    print("\n1. One invocation (1 KiB arguments, 4 KiB raw) vs the floor, sync, per CPU placement")
    prefix = f"cis-bench-{secrets.token_hex(3)}"
    client = redis.Redis.from_url(url)
    plain_client = redis.Redis.from_url(url, parser_class=_RESP2Parser)
    store = RedisStore(client, prefix=prefix)
    plain_store = RedisStore(plain_client, prefix=prefix)
    seed = SeedStore(client, prefix)
    ours = ToolBoundary(store, _tools())
    no_hiredis = ToolBoundary(plain_store, _tools())
    seeded = ToolBoundary(seed, _tools())
    contexts = {name: _open(b, f"run-{name}") for name, b in (("o", ours), ("p", no_hiredis), ("s", seeded))}
    next_id = Counter("call_")

    def invoke(boundary: ToolBoundary, context: RunContext, tool: str) -> Callable[[], None]:
        run_id = context.run_id

        def op() -> None:
            assert boundary.invoke(context, _envelope(run_id, next_id(), tool)).ok

        return op

    def bare(target: Any, run_id: str) -> Callable[[], None]:
        def op() -> None:
            now = target.now_ms()
            request = AdmissionRequest(
                run_id=run_id,
                tool_call_id=next_id(),
                tool_name="inline",
                request_json=ARGUMENTS,
                invocation_token=secrets.token_hex(16),
            )
            admitted = target.create(request, LIMITS)
            assert isinstance(admitted, Admission), admitted
            done = _ready(admitted.record, now)
            assert target.complete(admitted.record, done) is done

        return op

    invoke(ours, contexts["o"], "inline")()  # server check, script load
    commands = _record_evalshas(store, invoke(ours, contexts["o"], "inline"))
    assert len(commands) == 2, commands
    trivial = client.script_load("return 1")
    floor_commands = [("EVALSHA", trivial, *command[2:]) for command in commands]
    sizes = [sum(len(a) if isinstance(a, bytes | str) else 8 for a in c[2:]) for c in commands]
    print(
        "  floor: 2 EVALSHA of 'return 1' with the store's recorded keys and arguments "
        f"({sizes[0]} B, {sizes[1]} B)"
    )
    print(f"  hiredis: {'installed (redis-py uses it)' if HIREDIS_AVAILABLE else 'NOT installed'}")

    def floor() -> None:
        for command in floor_commands:
            assert client.execute_command(*command) == 1

    def pings() -> None:
        client.ping()
        client.ping()

    variants: dict[str, Callable[[], object]] = {
        "floor": floor,
        "pings": pings,
        "default": invoke(ours, contexts["o"], "default"),
        "inline": invoke(ours, contexts["o"], "inline"),
        "seed": invoke(seeded, contexts["s"], "default"),
        "store": bare(store, "run-o"),
        "seed_store": bare(seed, "run-s"),
        "no_hiredis": invoke(no_hiredis, contexts["p"], "default"),
    }
    for op in variants.values():
        for _ in range(20):
            op()
    got = interleave(variants, rounds, ops, places, server_cpu_reader(server_pid))
    print(f"  {rounds} rounds x {ops} ops per variant and placement; median (min..max) over rounds")
    for place, t in got.items():
        print(f"  -- {place}")
        for name, values in t.items():
            print(f"     {name:11s} {_spread(values, 1e6, 1)} us/op{cpu_line(place, name)}")
        target_floor = "<= 2.0x" if place == "same CPU" else "<= 1.5x"
        cpu = {name: [c + v for c, v in CPU[place][name]] for name in t}
        server = {name: [v for _, v in CPU[place][name]] for name in t}
        # The headline: the default ToolSpec, CPU time (client + server), then wall time.
        figure(
            f"redis invocation CPU (client + server) / floor CPU, default ToolSpec, {place}",
            ratios(cpu["default"], cpu["floor"]),
            target=target_floor,
        )
        figure(
            f"redis invocation wall / floor wall, default ToolSpec, {place}", ratios(t["default"], t["floor"])
        )
        if server_cpu_reader(server_pid) is not None:
            figure(
                f"redis-server CPU per invocation / floor's, default ToolSpec, {place}",
                ratios(server["default"], server["floor"]),
                target="<= 1.5x",
            )
        figure(
            f"redis invocation CPU (client + server) / floor CPU, timeout_ms=None (inline tool), {place}",
            ratios(cpu["inline"], cpu["floor"]),
        )
        figure(
            f"redis invocation wall / floor wall, timeout_ms=None (inline tool), {place}",
            ratios(t["inline"], t["floor"]),
        )
        figure(f"floor / two PINGs (wall), {place}", ratios(t["floor"], t["pings"]))
        figure(
            f"seed protocol behind the same boundary / ours (wall, default ToolSpec), {place}",
            ratios(t["seed"], t["default"]),
        )
        figure(f"seed store bare / RedisStore bare (wall), {place}", ratios(t["seed_store"], t["store"]))
        figure(
            f"boundary without hiredis / with hiredis (wall, default ToolSpec), {place}",
            ratios(t["no_hiredis"], t["default"]),
        )
        figure(f"redis invocation, default ToolSpec (wall), {place}", t["default"], unit="us", scale=1e6)
        figure(f"redis invocation, default ToolSpec (CPU), {place}", cpu["default"], unit="us", scale=1e6)
        figure(f"floor (wall), {place}", t["floor"], unit="us", scale=1e6)
        figure(f"floor (CPU), {place}", cpu["floor"], unit="us", scale=1e6)
    for c in (client, plain_client):
        keys = list(c.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            c.unlink(*keys[start : start + 500])
    client.close()
    plain_client.close()


# -- 2. progress ---------------------------------------------------------------------------


def _sent_bytes(client: redis.Redis) -> int:
    return int(client.info("stats")["total_net_output_bytes"])


def section_progress(
    url: str, places: list[tuple[str, Callable[[], None]]], rounds: int, server_pid: int
) -> None:
    print(
        f"\n2. project_progress of {PROGRESS_CALLS} READY calls (1 KiB request, 4 KiB raw each), "
        "per placement"
    )
    prefix = f"cis-bench-p{secrets.token_hex(3)}"
    client = redis.Redis.from_url(url)
    plain_client = redis.Redis.from_url(url, parser_class=_RESP2Parser)
    observer = redis.Redis.from_url(url)
    store = RedisStore(client, prefix=prefix)
    plain_store = RedisStore(plain_client, prefix=prefix)
    writer = ToolBoundary(store, _tools())
    context = _open(writer, "run-progress")
    for i in range(PROGRESS_CALLS):
        assert writer.invoke(context, _envelope("run-progress", f"p_{i:06d}", "inline")).ok
    boundaries = {
        "hmget": ToolBoundary(store, _tools()),
        "hgetall": ToolBoundary(ForwardingStore(store), _tools()),  # no get_progress: get_many fallback
        "hmget_no_hiredis": ToolBoundary(plain_store, _tools()),
        "hgetall_no_hiredis": ToolBoundary(ForwardingStore(plain_store), _tools()),
    }

    def op(boundary: ToolBoundary) -> Callable[[], None]:
        def run() -> None:
            report = boundary.project_progress(context)
            assert report.facts
            assert len(report.facts) + report.omitted == PROGRESS_CALLS

        return run

    variants = {name: op(b) for name, b in boundaries.items()}
    info_cost = _sent_bytes(observer)
    info_cost = _sent_bytes(observer) - info_cost
    for name, run in variants.items():
        run()
        before = _sent_bytes(observer)
        run()
        sent = _sent_bytes(observer) - before - info_cost
        print(f"  {name:19s} server sent {sent / PROGRESS_CALLS:7.0f} B per completed call")
        if name == "hmget":
            print(
                "FIGURE project_progress bytes read per completed call (HMGET): "
                f"{sent / PROGRESS_CALLS:.0f} B"
            )
        if name == "hgetall":
            print(
                f"FIGURE project_progress bytes read per completed call (HGETALL, before): "
                f"{sent / PROGRESS_CALLS:.0f} B"
            )
    got = interleave(variants, rounds, 1, places, server_cpu_reader(server_pid))
    for place, t in got.items():
        print(f"  -- {place}")
        for name, values in t.items():
            samples = CPU[place][name]
            client_us = statistics.median(c for c, _ in samples) * 1e6 / PROGRESS_CALLS
            server_us = statistics.median(v for _, v in samples) * 1e6 / PROGRESS_CALLS
            print(
                f"     {name:19s} {_spread(values, 1e6 / PROGRESS_CALLS, 2)} us per completed call"
                f"  [CPU: client {client_us:5.2f} us, server {server_us:5.2f} us]"
            )
        figure(
            f"project_progress per completed call (HMGET, hiredis), {place}",
            t["hmget"],
            unit="us",
            scale=1e6 / PROGRESS_CALLS,
            target="<= 10 us",
        )
        figure(
            f"project_progress CPU (client + server) per completed call (HMGET, hiredis), {place}",
            [c + v for c, v in CPU[place]["hmget"]],
            unit="us",
            scale=1e6 / PROGRESS_CALLS,
        )
        figure(f"project_progress HMGET / HGETALL, {place}", ratios(t["hmget"], t["hgetall"]))
        figure(f"project_progress without hiredis / with, {place}", ratios(t["hmget_no_hiredis"], t["hmget"]))
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for start in range(0, len(keys), 500):
        client.unlink(*keys[start : start + 500])
    for c in (client, plain_client, observer):
        c.close()


# -- 3. async 64 concurrent ------------------------------------------------------------------


def _rewrite(value: Any, old: str, new: str) -> Any:
    if isinstance(value, bytes):
        return value.replace(old.encode(), new.encode())
    if isinstance(value, str):
        return value.replace(old, new)
    return value


async def _async_section(
    url: str, places: list[tuple[str, Callable[[], None]]], rounds: int, batches: int
) -> dict[str, dict[str, list[float]]]:
    prefix = f"cis-bench-a{secrets.token_hex(3)}"
    client = redis.asyncio.Redis.from_url(url)
    plain = redis.asyncio.Redis.from_url(url)
    # Default settings: the scripts read the server's clock, so a recorded create carries
    # no time and replays exactly (CIS-STORE-10).
    store = AsyncRedisStore(client, prefix=prefix)
    # The default ToolSpec (an async tool runs on the caller's loop within its timeout).
    registry = ToolRegistry([ToolSpec(name="inline", executor=async_executor, projector=async_projector)])
    boundary = AsyncToolBoundary(store, registry)
    contexts = {}
    for run_id in ("run-rec", "run-bnd", "run-pln"):  # same length on purpose
        opened = await boundary.open_run(
            run_id,
            deadline_ms=boundary.now_ms() + HOUR_MS,
            ttl_ms=HOUR_MS,
            tool_call_budget=10**9,
            byte_budget=10**14,
        )
        assert isinstance(opened, RunContext)
        contexts[run_id] = opened
    assert (await boundary.invoke(contexts["run-rec"], _envelope("run-rec", "w_00000000", "inline"))).ok
    sent: list[tuple[Any, ...]] = []
    original = store._send

    async def recording(*args: Any, **options: Any) -> Any:
        sent.append(args)
        return await original(*args, **options)

    store._send = recording
    assert (await boundary.invoke(contexts["run-rec"], _envelope("run-rec", "r_00000000", "inline"))).ok
    store._send = original
    create, complete = (c for c in sent if c[0] == "EVALSHA")
    # The complete's header (the argument after the 4 keys) ends with the created record's
    # created_at_ms, expires_at_ms and sequence: the server stamps them, so each replay
    # takes them from its own create's reply.
    header_index = 2 + 1 + 4
    assert complete[2] == b"4", complete[2]
    head = b" ".join(complete[header_index].split(b" ")[:-3])
    replay_create = [_rewrite(a, "run-rec", "run-pln") for a in create]
    replay_complete = [_rewrite(a, "run-rec", "run-pln") for a in complete]
    execute = plain.execute_command
    counter = Counter("")
    failures: list[object] = []
    replayed_ids: list[str] = []

    async def plain_one(tcid: str) -> None:
        c = [_rewrite(a, "r_00000000", tcid) for a in replay_create]
        reply = await execute(*c)
        text = reply if isinstance(reply, bytes) else b""
        if not text.startswith(b"OK "):
            failures.append(reply)
            return
        # "OK <now> <status> <tool_calls_used> <bytes_used> <run_id> <opened> <deadline>
        # <ttl> ...": the script's time and the run as it found it, before this admission,
        # so the record was created at now, expires at now + ttl, and its sequence is one more.
        words = text.split(b" ")
        now, sequence, ttl = int(words[1]), int(words[3]) + 1, int(words[8])
        k = [_rewrite(a, "r_00000000", tcid) for a in replay_complete]
        k[header_index] = head + b" %d %d %d" % (now, now + ttl, sequence)
        reply = await execute(*k)
        if reply != b"WRITE":
            failures.append(reply)

    async def plain_batch() -> None:
        ids = [f"t_{counter()}" for _ in range(CONCURRENCY)]
        replayed_ids.extend(ids)
        await asyncio.gather(*(plain_one(tcid) for tcid in ids))

    async def boundary_batch() -> None:
        ids = [f"t_{counter()}" for _ in range(CONCURRENCY)]
        results = await asyncio.gather(
            *(boundary.invoke(contexts["run-bnd"], _envelope("run-bnd", tcid, "inline")) for tcid in ids)
        )
        assert all(r.ok for r in results)

    for _ in range(3):
        await boundary_batch()
        await plain_batch()
    out: dict[str, dict[str, list[float]]] = {
        name: {"boundary": [], "plain": [], "boundary_cpu": [], "plain_cpu": []} for name, _ in places
    }
    for index in range(rounds):
        for place, pin in places:
            pin()
            order = [("boundary", boundary_batch), ("plain", plain_batch)]
            if index % 2:
                order.reverse()
            for name, batch in order:
                cpu = time.thread_time()
                start = time.perf_counter()
                for _ in range(batches):
                    await batch()
                out[place][name].append((time.perf_counter() - start) / (batches * CONCURRENCY))
                out[place][name + "_cpu"].append((time.thread_time() - cpu) / (batches * CONCURRENCY))
    # Every replayed command must have done its work before a ratio means anything.
    assert not failures, f"{len(failures)} replayed commands failed, e.g. {failures[0]!r}"
    ready = 0
    for start in range(0, len(replayed_ids), 500):
        found = await store.get_progress("run-pln", replayed_ids[start : start + 500])
        ready += sum(1 for view in found.values() if view is not None and view.status.value == "READY")
    assert ready == len(replayed_ids), (ready, len(replayed_ids))
    print(f"  replayed calls: {len(replayed_ids)}, every create OK and complete WRITE, {ready} READY records")
    keys = [k async for k in client.scan_iter(match=f"{prefix}:*", count=1000)]
    for start in range(0, len(keys), 500):
        await client.unlink(*keys[start : start + 500])
    await plain.aclose()
    await client.aclose()
    return out


def section_async(url: str, places: list[tuple[str, Callable[[], None]]], rounds: int, batches: int) -> None:
    print(
        f"\n3. {CONCURRENCY} concurrent invocations, AsyncToolBoundary + AsyncRedisStore "
        "vs plain redis.asyncio"
    )
    got = asyncio.run(_async_section(url, places, rounds, batches))
    for place, t in got.items():
        print(
            f"  -- {place}: boundary {_spread(t['boundary'], 1e6, 1)} us, "
            f"plain {_spread(t['plain'], 1e6, 1)} us per invocation  [client CPU: boundary "
            f"{statistics.median(t['boundary_cpu']) * 1e6:.1f} us, "
            f"plain {statistics.median(t['plain_cpu']) * 1e6:.1f} us]"
        )
        figure(
            f"async 64-concurrent boundary / plain redis.asyncio (same successful commands), {place}",
            ratios(t["boundary"], t["plain"]),
            target="<= 1.3x",
        )
        figure(
            f"async 64-concurrent client CPU, boundary / plain, {place}",
            ratios(t["boundary_cpu"], t["plain_cpu"]),
        )


# -- 4. memory -------------------------------------------------------------------------------


def _cpu_interleave(
    variants: dict[str, Callable[[], object]], rounds: int, ops: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(wall, process CPU) seconds per op, ``{variant: [per round]}``, variants interleaved.

    Process CPU (``time.process_time``: every thread of this process) counts the worker
    thread a tool with a time limit runs on, which the calling thread's CPU leaves out.
    """
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for index in range(rounds):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            op = variants[name]
            started_cpu = time.process_time()
            wall[name].append(_time(op, ops))
            cpu[name].append((time.process_time() - started_cpu) / ops)
    return wall, cpu


def section_memory(rounds: int, ops: int) -> None:
    print("\n4. MemoryStore invocation (one CPU), against a bare call, the kernel alone and the hand-off")
    boundary = ToolBoundary(MemoryStore(), _tools())
    context = _open(boundary, "run-mem")
    next_id = Counter("m_")
    parsed = parse_arguments(ARGUMENTS)
    assert isinstance(parsed, dict)
    assert active_otel() is None, "an OpenTelemetry SDK is installed: the no-SDK rows would not be"

    def bare() -> None:  # what the tool costs anyway: the argument parse, executor, projector
        arguments = json.loads(ARGUMENTS)
        projector(executor(arguments), arguments)

    def invoke(tool: str) -> Callable[[], None]:
        def op() -> None:
            assert boundary.invoke(context, _envelope("run-mem", next_id(), tool)).ok

        return op

    # Telemetry without an SDK, isolated: a no-op pipeline making the real one's stopwatch
    # calls (start/stop of the create, executor, projector and complete, and the
    # completed record), run through the telemetry decorator and without it.
    done = boundary.invoke(context, _envelope("run-mem", next_id(), "default"))

    def stub(_core: Any, _store: Any, _context: Any, _envelope: Any, watch: Stopwatch) -> Any:
        for phase in ("store", "execute", "project", "store"):
            watch.start()
            watch.stop(phase)
        watch.completed(None)  # type: ignore[arg-type]  # a no-op stopwatch reads nothing
        return done

    observed_stub = observed_invoke(stub)
    stub_envelope = _envelope("run-mem", "call_stub", "default")

    def no_op(_value: object) -> str:
        return RAW

    # The projector's independent copy of the arguments (CIS-PERF-2): what it costs
    # made three ways, interleaved with the invocations.
    variants = {
        "bare": bare,
        "kernel": kernel_invocation,  # bench_kernel.py: the pure kernel's share of one invocation
        "default": invoke("default"),  # the default ToolSpec: timeout_ms=30_000, run on a worker
        "inline": invoke("inline"),  # timeout_ms=None: run in the calling thread
        "observed stub": lambda: observed_stub(boundary, None, context, stub_envelope),
        "bare stub": lambda: stub(boundary, None, context, stub_envelope, NO_WATCH),
        "hand-off": lambda: WORKERS.call(no_op, 30_000, None),
        "in-thread": lambda: call_inline(no_op, None),
        "reparse": lambda: parse_arguments(ARGUMENTS),
        "deepcopy": lambda: copy.deepcopy(parsed),
        "copy_json": lambda: copy_json(parsed),
    }
    wall, cpu = _cpu_interleave(variants, rounds, ops)
    for name in variants:
        spread_wall, spread_cpu = _spread(wall[name], 1e6, 2), _spread(cpu[name], 1e6, 2)
        print(f"     {name:12s} {spread_wall} us/op wall, {spread_cpu} us/op CPU")
    figure(
        "MemoryStore invocation, default ToolSpec (timeout_ms=30000: a worker thread), process CPU",
        cpu["default"],
        unit="us",
        scale=1e6,
        target="<= 30 us",
    )
    figure("MemoryStore invocation, default ToolSpec, wall", wall["default"], unit="us", scale=1e6)
    figure(
        "MemoryStore invocation, inline tool (timeout_ms=None), process CPU",
        cpu["inline"],
        unit="us",
        scale=1e6,
    )
    figure("pure kernel share of one invocation (bench_kernel.py), CPU", cpu["kernel"], unit="us", scale=1e6)
    figure(
        "telemetry without an OpenTelemetry SDK, per invoke (decorator and stopwatch calls), CPU",
        [a - b for a, b in zip(cpu["observed stub"], cpu["bare stub"], strict=True)],
        unit="us",
        scale=1e6,
        target="< 1 us",
    )
    figure(
        "worker hand-off: a no-op on a worker less the same call in the thread, process CPU",
        [a - b for a, b in zip(cpu["hand-off"], cpu["in-thread"], strict=True)],
        unit="us",
        scale=1e6,
    )
    figure(
        "MemoryStore invocation, default ToolSpec / bare call (argument parse + executor + projector), CPU",
        ratios(cpu["default"], cpu["bare"]),
    )
    figure(
        "projector's copy of 1 KiB arguments: copy_json / a second parse",
        ratios(wall["copy_json"], wall["reparse"]),
    )
    figure(
        "projector's copy of 1 KiB arguments: copy_json / copy.deepcopy",
        ratios(wall["copy_json"], wall["deepcopy"]),
    )


# -- 5. fixed RTT ----------------------------------------------------------------------------


def section_rtt(rtt_ms: float, rounds: int) -> None:
    print(f"\n5. Fixed RTT {rtt_ms} ms (user-space relay), unpinned")
    with relay_server(rtt_ms) as server:
        print(f"  {server.label}")
        prefix = f"cis-bench-r{secrets.token_hex(3)}"
        client = redis.Redis.from_url(server.url)
        store = RedisStore(client, prefix=prefix)
        ours = ToolBoundary(store, _tools())
        seeded = ToolBoundary(SeedStore(client, prefix), _tools())
        o, s = _open(ours, "run-o"), _open(seeded, "run-s")
        next_id = Counter("call_")
        assert ours.invoke(o, _envelope("run-o", next_id(), "default")).ok
        commands = _record_evalshas(store, lambda: ours.invoke(o, _envelope("run-o", next_id(), "default")))
        trivial = client.script_load("return 1")
        floor_commands = [("EVALSHA", trivial, *command[2:]) for command in commands]

        def floor() -> None:
            for command in floor_commands:
                client.execute_command(*command)

        variants: dict[str, Callable[[], object]] = {
            "floor": floor,
            "pings": lambda: (client.ping(), client.ping()),
            "default": lambda: ours.invoke(o, _envelope("run-o", next_id(), "default")),
            "seed": lambda: seeded.invoke(s, _envelope("run-s", next_id(), "default")),
        }
        ops = max(5, int(0.15 / (rtt_ms / 1000 * 4)))
        t = interleave(variants, rounds, ops, [("relay", lambda: None)])["relay"]
        for name, values in t.items():
            print(f"     {name:7s} {_spread(values, 1e6, 1)} us/op")
        figure(
            f"redis invocation (default ToolSpec) / floor, RTT {rtt_ms} ms", ratios(t["default"], t["floor"])
        )
        figure(f"redis invocation / two PINGs, RTT {rtt_ms} ms", ratios(t["default"], t["pings"]))
        figure(
            f"seed behind the same boundary / ours (throughput), RTT {rtt_ms} ms",
            ratios(t["seed"], t["default"]),
        )
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.unlink(*keys)
        client.close()


@contextmanager
def _restored_affinity() -> Iterator[None]:
    mine = os.sched_getaffinity(0)
    try:
        yield
    finally:
        _pin(None, mine)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ops", type=int, default=150)
    parser.add_argument("--rtt-ms", default="1")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", action="append", choices=["invocation", "progress", "async", "memory", "rtt"]
    )
    args = parser.parse_args(argv)
    quick = args.quick or os.environ.get("CIS_BENCH_QUICK") == "1"
    rounds = 5 if quick else args.rounds
    ops = 60 if quick else args.ops
    only = set(args.only or ["invocation", "progress", "async", "memory", "rtt"])
    print(
        f"start: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {_load()}, nproc {os.cpu_count()}"
    )
    print(
        f"python {sys.version.split()[0]}, redis-py {redis.__version__}, hiredis "
        f"{__import__('hiredis').__version__ if HIREDIS_AVAILABLE else 'absent'}"
    )
    with _restored_affinity():
        if only & {"invocation", "progress", "async"}:
            with redis_server() as url:
                with redis.Redis.from_url(url) as probe:
                    info = probe.info("server")
                print(f"private redis-server {info['redis_version']} on {url.split('@')[-1]}")
                places = placements(int(info["process_id"]))
                if "invocation" in only:
                    section_invocation(url, places, rounds, ops, int(info["process_id"]))
                if "progress" in only:
                    section_progress(url, places, rounds, int(info["process_id"]))
                if "async" in only:
                    section_async(url, places, rounds, 2 if quick else 4)
        if "memory" in only:
            _pin(None, {sorted(os.sched_getaffinity(0))[0]})
            section_memory(rounds, ops * 10)
    if "rtt" in only and args.rtt_ms != "none":
        for rtt in (float(x) for x in args.rtt_ms.split(",")):
            section_rtt(rtt, max(3, rounds // 3))
    print(f"\nend: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
