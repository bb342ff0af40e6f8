"""One tool call through the boundary, against the physical floor, in CPU time and wall time.

Run::

    .venv/bin/python benchmarks/bench_invocation.py [--rounds 15] [--ops 150]
    .venv/bin/python benchmarks/bench_invocation.py --baseline-rev <git revision>   # before and after
    .venv/bin/python benchmarks/bench_invocation.py --profile 3000                  # cProfile shares

(``CIS_BENCH_QUICK=1`` or ``--quick``: fewer rounds and calls.) Starts its own
throwaway redis-server on a free loopback port (never the one on 6379). Nothing is
asserted about time; the script asserts that every call it times succeeded.

Method
------
**Workers.** Every measured variant runs in a worker process that imports
``invocation_store`` from one checkout: this one ("after") and, with
``--baseline-path DIR`` (a checkout) or ``--baseline-rev REV`` (exported with ``git
archive`` into a temporary directory), the code to compare against ("before"). The
driver (this process) sends each worker "run variant V for N calls" and waits: the
variants of both checkouts are interleaved round by round in one run, on one server,
so a before/after figure comes from the same run. The worker code is this file's, so
both checkouts are driven alike (it uses only the public API and the store's ``_send``,
present in both).

**CPU time** is what every Redis ratio is given in, beside wall time: the worker's
``time.process_time`` (every thread of it: a tool worker thread's too) plus the
redis-server main thread's (``/proc/<pid>/task/<pid>/schedstat``, read by the driver
around each run). On a shared, loaded machine wall times are inflated by waiting for a
CPU; CPU time is not.

**Placements.** Each round pins the worker (every thread) and the server with
``os.sched_setaffinity``, first to the same CPU, then to different CPUs (placement alone
changes a loopback round trip several-fold on a small machine). Within a placement the
variants of every worker run in a rotating order. A figure is the median over rounds of
the per-round value, with its spread (min..max). The load average is printed at the
start and the end, and its range over the rounds.

**The floor** is two ``EVALSHA`` of ``return 1`` carrying exactly the keys and arguments
the store sent for one invocation (recorded from that worker's own store), sent on the
store's cheapest path: one pool connection held, the command packed by hiredis, written
with ``send_packed_command``, its reply read (:class:`HeldSend`, the same steps the
store's ``_send_held`` takes, written here so that both checkouts' floors are the same
code). ``floor_exec`` is the same through ``execute_command``, for reference.

Sections (each variant named with every non-default setting it has):

1. **invocation** (per placement): ``ToolBoundary`` + ``RedisStore``, 1 KiB arguments, 4 KiB
   raw response: ``default`` (the default ``ToolSpec``: ``timeout_ms`` 30 s, the tool on
   the boundary's worker thread), ``inline`` (``timeout_ms=None``), ``store`` (the bare
   store: create, the kernel's transitions, complete), against the floor; in the
   "after" worker also two ``PING`` s, the seed's protocol behind the same boundary and
   bare (``seed_store.py``), and the boundary on a client whose RESP parser is redis-py's
   Python one (``no_hiredis``).
2. **1 MiB raw** (per placement): a whole invocation (default ``ToolSpec``) whose tool
   returns 1 MiB, against a plain ``SET`` of the same bytes (already encoded) to a new key
   on the held connection; the keys both write are deleted after each run, untimed.
3. **async** (per placement): 64 concurrent ``AsyncToolBoundary`` + ``AsyncRedisStore``
   invocations (default ``ToolSpec``, async tool) against plain ``redis.asyncio``
   (``execute_command``) replaying the same successful commands: the two ``EVALSHA``
   recorded from one invocation, ids rewritten, the sequence in the complete's header
   taken from each create's reply; every replayed create must answer ``OK``, every
   complete ``WRITE``, and every replayed record be READY before a ratio is printed.
4. **memory** (the worker on one CPU): ``MemoryStore`` invocation, default ``ToolSpec`` and
   ``inline``, against a bare call (the argument parse, the executor, the projector);
   the pure kernel's share (``bench_kernel.py``'s function); in the "after" worker also
   telemetry without an OpenTelemetry SDK (the decorator and stopwatch calls around a
   no-op pipeline, less the no-op pipeline) and the worker hand-off alone.
5. **progress** (this checkout only, in this process): ``project_progress`` of 1,000 READY
   calls, time and bytes per completed call (see ``section_progress``).
6. **RTT** (``--rtt-ms``, default 1; ``none`` skips; this checkout only): the floor,
   PINGs, the boundary and the seed behind a user-space delay relay.

``--profile N`` prints, for each checkout, the cProfile shares of N default-``ToolSpec``
invocations on Redis and on ``MemoryStore``: create, complete, the worker hand-off,
preflight, the kernel, telemetry and size accounting (shares of the whole invocation;
they overlap: the kernel runs inside create and complete).

Each figure is also printed as a ``FIGURE`` line for ``run_all.py``; the issue 25 table
(before, after, goal) is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

import redis
import redis.asyncio
from redis._parsers import _RESP2Parser
from redis.utils import HIREDIS_AVAILABLE

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # benchmarks/ is not a package

HOUR_MS = 3_600_000
PROGRESS_CALLS = 1000
CONCURRENCY = 64
BIG = 1024 * 1024


def _exact_json(size: int, filler: str) -> str:
    head = '{"query": "quarterly revenue by region", "limit": 25, "filters": {"year": 2024}, "text": "'
    body = (filler * size)[: size - len(head) - 2]
    text = head + body + '"}'
    assert len(text.encode()) == size
    return text


ARGUMENTS = _exact_json(1024, "lorem ipsum dolor sit amet ")
RAW = _exact_json(4096, "row,2024-Q1,EMEA,1234567.89;")
BIG_RAW = _exact_json(BIG, "row,2024-Q1,EMEA,1234567.89;")


def _load() -> str:
    with open("/proc/loadavg", encoding="ascii") as f:
        return "load average " + " ".join(f.read().split()[:3])


# -- placement ---------------------------------------------------------------------------


def _pin(pid: int | None, cpus: set[int]) -> None:
    """Pin every thread of ``pid`` (None: this process) to ``cpus``."""
    base = f"/proc/{pid or 'self'}/task"
    with suppress(FileNotFoundError):
        for tid in os.listdir(base):
            with suppress(ProcessLookupError, PermissionError, FileNotFoundError):  # a thread that just ended
                os.sched_setaffinity(int(tid), cpus)


def placements(
    server_pid: int, client_pids: Callable[[], list[int | None]]
) -> list[tuple[str, Callable[[], None]]]:
    """(name, pin) for client and server on the same CPU, and on different CPUs when there are two."""
    cpus = sorted(os.sched_getaffinity(0))

    def pinner(client_cpu: int, server_cpu: int) -> Callable[[], None]:
        def pin() -> None:
            for pid in client_pids():
                _pin(pid, {client_cpu})
            _pin(server_pid, {server_cpu})

        return pin

    result = [("same CPU", pinner(cpus[0], cpus[0]))]
    if len(cpus) > 1:
        result.append(("different CPUs", pinner(cpus[0], cpus[1])))
    return result


def server_cpu_reader(pid: int) -> Callable[[], float]:
    """CPU seconds used so far by the main thread of local process ``pid`` (schedstat); 0 if unreadable."""
    path = f"/proc/{pid}/task/{pid}/schedstat"

    def read() -> float:
        try:
            with open(path, encoding="ascii") as stats:
                return int(stats.read().split()[0]) / 1e9
        except OSError:
            return 0.0

    return read


# -- statistics --------------------------------------------------------------------------


def _spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    med = statistics.median(values) * scale
    return f"{med:.{digits}f} ({min(values) * scale:.{digits}f}..{max(values) * scale:.{digits}f})"


def figure(label: str, values: list[float], unit: str = "x", scale: float = 1.0, target: str = "") -> str:
    digits = 2 if unit == "x" else 1
    text = f"{_spread(values, scale, digits)} {unit}"
    line = f"FIGURE {label}: {text}"
    if target:
        line += f"  [target {target}]"
    print(line)
    return text


def ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=True)]


# -- the cheapest send path (both checkouts' floors) ---------------------------------------


class HeldSend:
    """One pool connection held; each command packed in one call, written, its reply read.

    The steps of the store's ``_send_held`` on its held connection, written here so that
    the floor of every checkout is the same code: hiredis' packer when installed (as
    redis-py uses it), ``send_packed_command``, ``read_response``.
    """

    def __init__(self, client: redis.Redis) -> None:
        self.connection: Any = client.connection_pool.get_connection()
        self.pack: Callable[[tuple[Any, ...]], Any]
        if HIREDIS_AVAILABLE:
            import hiredis  # noqa: PLC0415 - only with hiredis installed

            packer = hiredis.pack_command
            self.pack = lambda args: [packer(args)]
        else:
            self.pack = lambda args: self.connection.pack_command(*args)

    def __call__(self, *args: Any) -> Any:
        self.connection.send_packed_command(self.pack(args))
        return self.connection.read_response()


# ==========================================================================================
# Worker: builds the variants of a section with the checkout on its PYTHONPATH and runs them.
# ==========================================================================================


class Counter:
    def __init__(self, head: str) -> None:
        self.head = head
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"{self.head}{self.n:08d}"


def _rewrite(value: Any, old: str, new: str) -> Any:
    if isinstance(value, bytes):
        return value.replace(old.encode(), new.encode())
    if isinstance(value, str):
        return value.replace(old, new)
    return value


class Bench:
    """The variants of every section, on the ``invocation_store`` this process imported."""

    def __init__(self, url: str, full: bool) -> None:
        import invocation_store  # noqa: PLC0415 - imported from the checkout on PYTHONPATH
        from invocation_store import ToolRegistry, ToolSpec  # noqa: PLC0415
        from invocation_store.kernel import EvidenceStatus, Limits, Projection  # noqa: PLC0415

        self.url = url
        self.full = full  # the reference variants too (the checkout under study)
        self.module = invocation_store
        self.limits = Limits()
        self.projection = Projection(
            evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="EMEA 1,234,567.89", scope="2024"
        )
        projection = self.projection

        def executor(_args: Mapping[str, Any]) -> str:
            return RAW

        def big_executor(_args: Mapping[str, Any]) -> str:
            return BIG_RAW

        def projector(_raw: str, _args: Mapping[str, Any]) -> Any:
            return projection

        async def async_executor(_args: Mapping[str, Any]) -> str:
            return RAW

        async def async_projector(_raw: str, _args: Mapping[str, Any]) -> Any:
            return projection

        self.executor, self.projector = executor, projector
        self.tools = ToolRegistry(
            [
                # The default ToolSpec (timeout_ms 30 s: the tool runs on the boundary's worker).
                ToolSpec(name="default", executor=executor, projector=projector),
                # Non-default: timeout_ms=None, the tool runs inline on the caller's thread.
                ToolSpec(name="inline", executor=executor, projector=projector, timeout_ms=None),
                # The default ToolSpec, a 1 MiB raw response.
                ToolSpec(name="big", executor=big_executor, projector=projector),
            ]
        )
        self.async_tools = ToolRegistry(
            [ToolSpec(name="default", executor=async_executor, projector=async_projector)]
        )
        self.variants: dict[str, Callable[[], object]] = {}
        self.per_op: dict[str, int] = {}  # invocations per op (async batches)
        self.cleanups: list[Callable[[], None]] = []
        self.info: list[str] = []
        self.loop = asyncio.new_event_loop()

    # -- helpers ---------------------------------------------------------------------------

    def envelope(self, run_id: str, tool_call_id: str, tool: str) -> Any:
        from invocation_store.kernel import ToolCallEnvelope  # noqa: PLC0415

        return ToolCallEnvelope(run_id=run_id, tool_call_id=tool_call_id, tool_name=tool, arguments=ARGUMENTS)

    def open(self, boundary: Any, run_id: str, ttl_ms: int = HOUR_MS) -> Any:
        from invocation_store.kernel import RunContext  # noqa: PLC0415

        context = boundary.open_run(
            run_id,
            deadline_ms=boundary.now_ms() + HOUR_MS,
            ttl_ms=ttl_ms,
            tool_call_budget=10**9,
            byte_budget=10**14,
        )
        assert isinstance(context, RunContext), context
        return context

    def ready(self, record: Any, now: int) -> Any:
        from invocation_store.kernel import (  # noqa: PLC0415
            CanonicalRecord,
            ProjectionReceived,
            RawReceived,
            transition,
        )

        raw = transition(record, RawReceived(raw_response=RAW, now_ms=now), self.limits)
        assert isinstance(raw, CanonicalRecord)
        done = transition(raw, ProjectionReceived(projection=self.projection, now_ms=now), self.limits)
        assert isinstance(done, CanonicalRecord)
        return done

    @staticmethod
    def record_evalshas(store: Any, action: Callable[[], object]) -> list[tuple[Any, ...]]:
        """The EVALSHA commands ``store`` sends while ``action`` runs."""
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

    def unlink(self, client: redis.Redis, pattern: str) -> None:
        keys = list(client.scan_iter(match=pattern, count=1000))
        for start in range(0, len(keys), 500):
            client.unlink(*keys[start : start + 500])

    # -- 1. invocation -----------------------------------------------------------------------

    def setup_invocation(self) -> None:
        from invocation_store import RedisStore, ToolBoundary  # noqa: PLC0415
        from invocation_store.kernel import Admission, AdmissionRequest  # noqa: PLC0415

        prefix = f"cis-bench-{secrets.token_hex(3)}"
        client = redis.Redis.from_url(self.url)
        store = RedisStore(client, prefix=prefix)
        ours = ToolBoundary(store, self.tools)
        context = self.open(ours, "run-o")
        next_id = Counter("call_")

        def invoke(boundary: Any, run: Any, tool: str) -> Callable[[], None]:
            run_id = run.run_id

            def op() -> None:
                assert boundary.invoke(run, self.envelope(run_id, next_id(), tool)).ok

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
                admitted = target.create(request, self.limits)
                assert isinstance(admitted, Admission), admitted
                done = self.ready(admitted.record, now)
                assert target.complete(admitted.record, done) is done

            return op

        invoke(ours, context, "inline")()  # server check, script load
        commands = self.record_evalshas(store, invoke(ours, context, "inline"))
        assert len(commands) == 2, commands
        trivial = client.script_load("return 1")
        floor_commands = [("EVALSHA", trivial, *command[2:]) for command in commands]
        sizes = [sum(len(a) if isinstance(a, bytes | str) else 8 for a in c[2:]) for c in commands]
        self.info.append(
            "floor: 2 EVALSHA of 'return 1' with the store's recorded keys and arguments "
            f"({sizes[0]} B, {sizes[1]} B), on a held connection, packed by "
            f"{'hiredis' if HIREDIS_AVAILABLE else 'redis-py'}"
        )
        held = HeldSend(client)

        def floor() -> None:
            for command in floor_commands:
                assert held(*command) == 1

        commands_only = self.commands_only(client, prefix, commands, held)

        def floor_exec() -> None:
            for command in floor_commands:
                assert client.execute_command(*command) == 1

        variants: dict[str, Callable[[], object]] = {
            "floor": floor,
            "commands": commands_only,
            "default": invoke(ours, context, "default"),
            "inline": invoke(ours, context, "inline"),
            "store": bare(store, "run-o"),
        }
        if self.full:
            from seed_store import SeedStore  # noqa: PLC0415

            plain_client = redis.Redis.from_url(self.url, parser_class=_RESP2Parser)
            plain = ToolBoundary(RedisStore(plain_client, prefix=prefix), self.tools)
            seed = SeedStore(client, prefix)
            seeded = ToolBoundary(seed, self.tools)
            plain_context, seed_context = self.open(plain, "run-p"), self.open(seeded, "run-s")
            variants.update(
                {
                    "floor_exec": floor_exec,
                    "pings": lambda: (held("PING"), held("PING")),
                    "seed": invoke(seeded, seed_context, "default"),
                    "seed_store": bare(seed, "run-s"),
                    "no_hiredis": invoke(plain, plain_context, "default"),
                }
            )
        for op in variants.values():
            for _ in range(20):
                op()
        self.variants.update(variants)
        self.cleanups.append(lambda: self.unlink(client, f"{prefix}:*"))

    @staticmethod
    def commands_only(
        client: redis.Redis, prefix: str, commands: list[tuple[Any, ...]], held: HeldSend
    ) -> Callable[[], None]:
        """The redis commands of the scripts' hot paths alone, with none of their decisions.

        Two EVALSHA, framed like the store's (same key counts, the recorded ARGV: same
        sizes), each making exactly the ``redis.call``s its script makes on the hot path
        (CREATE_SCRIPT: TIME, HMGET run, HMGET record, RPUSH, HSET record, PEXPIREAT, HSET
        run; COMPLETE_SCRIPT: HMGET record, PTTL, HMGET run, RPUSH, HSET record, SET raw
        PXAT, HINCRBY), on keys of their own (a new record per call, as the store writes).
        What a script doing this work must cost the server at least: the lower bound of
        the "redis-server CPU / the floor's" figure for this design of keys.
        """
        from invocation_store.adapters._redis_scripts import CREATE_RUN_ORDER  # noqa: PLC0415

        run_fields = ", ".join(f"'{name}'" for name in CREATE_RUN_ORDER)
        create = client.script_load(
            f"""local t = redis.call('TIME')
local run = redis.call('HMGET', KEYS[1], {run_fields})
local found = redis.call('HMGET', KEYS[2], 'invocation_token', 'expires_at_ms', 'status', 'error_code')
redis.call('RPUSH', KEYS[3], 'call')
redis.call('HSET', KEYS[2], 'run_id', 'run', 'tool_call_id', 'call', 'tool_name', ARGV[3],
  'invocation_token', ARGV[2], 'sequence', '7', 'status', 'PROJECTING', 'request_json', ARGV[4],
  'created_at_ms', '1764892800000', 'updated_at_ms', '1764892800000', 'expires_at_ms', '4102444800000')
redis.call('PEXPIREAT', KEYS[2], '4102444800000')
redis.call('HSET', KEYS[1], 'tool_calls_used', '7', 'bytes_used', '7000')
return 1"""
        )
        complete = client.script_load(
            """local s = redis.call('HMGET', KEYS[1], 'status', 'invocation_token', 'error_code',
  'updated_at_ms', 'expires_at_ms', 'evidence_status', 'agent_result', 'scope',
  'created_at_ms', 'sequence', 'tool_name', 'request_json')
local left = redis.call('PTTL', KEYS[1])
local run = redis.call('HMGET', KEYS[2], 'expires_at_ms', 'bytes_used')
redis.call('RPUSH', KEYS[3], 'call')
redis.call('HSET', KEYS[1], 'status', 'READY', 'updated_at_ms', '1764892800001',
  'evidence_status', 'OBSERVED', 'agent_result', ARGV[4], 'scope', ARGV[5])
redis.call('SET', KEYS[4], ARGV[3], 'PXAT', '4102444800000')
redis.call('HINCRBY', KEYS[2], 'bytes_used', '100')
return 1"""
        )
        tag = f"{prefix}:cmds:{{run}}"
        run_key, calls_key, done_key = f"{tag}:run", f"{tag}:calls", f"{tag}:done"
        client.hset(run_key, mapping=dict.fromkeys(CREATE_RUN_ORDER, "1"))
        client.pexpireat(run_key, 4102444800000)
        create_args, complete_args = commands[0][3 + 4 :], commands[1][3 + 5 :]
        next_call = Counter("c")

        def op() -> None:
            record, raw = f"{tag}:call:{next_call()}", f"{tag}:raw:{next_call()}"
            assert held("EVALSHA", create, 4, run_key, record, calls_key, raw, *create_args) == 1
            assert (
                held("EVALSHA", complete, 5, record, run_key, done_key, raw, f"{tag}:s", *complete_args) == 1
            )

        return op

    # -- 2. 1 MiB raw ----------------------------------------------------------------------

    def setup_big(self) -> None:
        from invocation_store import RedisStore, ToolBoundary  # noqa: PLC0415

        prefix = f"cis-bench-b{secrets.token_hex(3)}"
        client = redis.Redis.from_url(self.url)
        boundary = ToolBoundary(RedisStore(client, prefix=prefix), self.tools)
        context = self.open(boundary, "run-big", ttl_ms=600_000)
        next_id = Counter("big_")
        held = HeldSend(client)
        next_key = Counter(f"{prefix}:plain-set:")
        payload = BIG_RAW.encode()

        def invoke() -> None:
            result = boundary.invoke(context, self.envelope("run-big", next_id(), "big"))
            assert result.ok, result

        def plain_set() -> None:  # a new key each time, as each invocation stores a new raw response
            assert held("SET", next_key(), payload) == b"OK"

        for op in (invoke, plain_set):
            for _ in range(3):
                op()
        self.variants.update({"big_default": invoke, "big_set": plain_set})
        # Stored 1 MiB responses are deleted after each run (outside the timed calls).
        self.cleanups.append(lambda: self.unlink(client, f"{prefix}:{{run-big}}:call:*"))
        self.cleanups.append(lambda: self.unlink(client, f"{prefix}:{{run-big}}:raw:*"))
        self.cleanups.append(lambda: self.unlink(client, f"{prefix}:plain-set:*"))

    # -- 3. async ----------------------------------------------------------------------------

    def setup_async(self) -> None:
        self.loop.run_until_complete(self._setup_async())

    async def _setup_async(self) -> None:
        from invocation_store import AsyncRedisStore, AsyncToolBoundary  # noqa: PLC0415
        from invocation_store.kernel import RunContext  # noqa: PLC0415

        prefix = f"cis-bench-a{secrets.token_hex(3)}"
        client = redis.asyncio.Redis.from_url(self.url)
        plain = redis.asyncio.Redis.from_url(self.url)
        # Default settings: the scripts read the server's clock, so a recorded create carries
        # no time and replays exactly (CIS-STORE-10).
        store = AsyncRedisStore(client, prefix=prefix)
        boundary = AsyncToolBoundary(store, self.async_tools)
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
        warm = await boundary.invoke(contexts["run-rec"], self.envelope("run-rec", "w_00000000", "default"))
        assert warm.ok
        sent: list[tuple[Any, ...]] = []
        original = store._send

        async def recording(*args: Any, **options: Any) -> Any:
            sent.append(args)
            return await original(*args, **options)

        store._send = recording
        result = await boundary.invoke(contexts["run-rec"], self.envelope("run-rec", "r_00000000", "default"))
        assert result.ok
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
        replayed: list[str] = []

        async def plain_one(tcid: str) -> None:
            c = [_rewrite(a, "r_00000000", tcid) for a in replay_create]
            reply = await execute(*c)
            text = reply if isinstance(reply, bytes) else b""
            if not text.startswith(b"OK "):
                failures.append(reply)
                return
            # "OK <now> <status> <tool_calls_used> <bytes_used> <run_id> <opened> <deadline>
            # <ttl> ...": the script's time and the run before this admission, so the record
            # was created at now, expires at now + ttl, and its sequence is one more.
            words = text.split(b" ")
            now, sequence, ttl = int(words[1]), int(words[3]) + 1, int(words[8])
            k = [_rewrite(a, "r_00000000", tcid) for a in replay_complete]
            k[header_index] = head + b" %d %d %d" % (now, now + ttl, sequence)
            reply = await execute(*k)
            if reply != b"WRITE":
                failures.append(reply)

        async def plain_batch() -> None:
            ids = [f"t_{counter()}" for _ in range(CONCURRENCY)]
            replayed.extend(ids)
            await asyncio.gather(*(plain_one(tcid) for tcid in ids))

        async def boundary_batch() -> None:
            ids = [f"t_{counter()}" for _ in range(CONCURRENCY)]
            results = await asyncio.gather(
                *(boundary.invoke(contexts["run-bnd"], self.envelope("run-bnd", t, "default")) for t in ids)
            )
            assert all(r.ok for r in results)

        for _ in range(3):
            await boundary_batch()
            await plain_batch()

        async def check() -> None:
            # Every replayed command must have done its work before a ratio means anything.
            assert not failures, f"{len(failures)} replayed commands failed, e.g. {failures[0]!r}"
            ready = 0
            for start in range(0, len(replayed), 500):
                found = await store.get_progress("run-pln", replayed[start : start + 500])
                ready += sum(
                    1 for view in found.values() if view is not None and view.status.value == "READY"
                )
            assert ready == len(replayed), (ready, len(replayed))

        self.async_check = lambda: self.loop.run_until_complete(check())
        self.variants.update(
            {
                "async_boundary": lambda: self.loop.run_until_complete(boundary_batch()),
                "async_plain": lambda: self.loop.run_until_complete(plain_batch()),
            }
        )
        self.per_op.update({"async_boundary": CONCURRENCY, "async_plain": CONCURRENCY})

    # -- 4. memory ---------------------------------------------------------------------------

    def setup_memory(self) -> None:
        from bench_kernel import invocation as kernel_invocation  # noqa: PLC0415

        from invocation_store import MemoryStore, ToolBoundary  # noqa: PLC0415

        boundary = ToolBoundary(MemoryStore(), self.tools)
        context = self.open(boundary, "run-mem")
        next_id = Counter("m_")
        executor, projector = self.executor, self.projector

        def bare() -> None:  # what the tool costs anyway: the argument parse, executor, projector
            arguments = json.loads(ARGUMENTS)
            projector(executor(arguments), arguments)

        def invoke(tool: str) -> Callable[[], None]:
            def op() -> None:
                assert boundary.invoke(context, self.envelope("run-mem", next_id(), tool)).ok

            return op

        variants: dict[str, Callable[[], object]] = {
            "mem_bare": bare,
            "mem_kernel": kernel_invocation,  # bench_kernel.py: the pure kernel's share of one invocation
            "mem_default": invoke("default"),  # the default ToolSpec: timeout_ms=30_000, run on a worker
            "mem_inline": invoke("inline"),  # timeout_ms=None: run in the calling thread
        }
        if self.full:
            from invocation_store._runners import WORKERS, call_inline  # noqa: PLC0415
            from invocation_store.boundary._telemetry import (  # noqa: PLC0415
                NO_WATCH,
                active_otel,
                observed_invoke,
            )

            assert active_otel() is None, "an OpenTelemetry SDK is installed: the no-SDK rows would not be"
            done = boundary.invoke(context, self.envelope("run-mem", next_id(), "default"))

            def stub(_core: Any, _store: Any, _context: Any, _envelope: Any, watch: Any) -> Any:
                for phase in ("store", "execute", "project", "store"):
                    watch.start()
                    watch.stop(phase)
                watch.completed(None)  # a no-op stopwatch reads nothing
                return done

            observed_stub = observed_invoke(stub)
            stub_envelope = self.envelope("run-mem", "call_stub", "default")

            def no_op(_value: object) -> str:
                return RAW

            variants.update(
                {
                    "observed_stub": lambda: observed_stub(boundary, None, context, stub_envelope),
                    "bare_stub": lambda: stub(boundary, None, context, stub_envelope, NO_WATCH),
                    "hand_off": lambda: WORKERS.call(no_op, 30_000, None),
                    "in_thread": lambda: call_inline(no_op, None),
                }
            )
        for op in variants.values():
            for _ in range(50):
                op()
        self.variants.update(variants)

    # -- profile -----------------------------------------------------------------------------

    def profile(self, count: int) -> dict[str, dict[str, float]]:
        """cProfile shares of ``count`` default invocations on Redis and on MemoryStore."""
        from invocation_store import MemoryStore, RedisStore, ToolBoundary  # noqa: PLC0415

        client = redis.Redis.from_url(self.url)
        prefix = f"cis-bench-q{secrets.token_hex(3)}"
        out = {}
        for name, store in (("redis", RedisStore(client, prefix=prefix)), ("memory", MemoryStore())):
            boundary = ToolBoundary(store, self.tools)
            context = self.open(boundary, "run-prof")
            next_id = Counter("prof_")
            for _ in range(100):
                boundary.invoke(context, self.envelope("run-prof", next_id(), "default"))
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(count):
                boundary.invoke(context, self.envelope("run-prof", next_id(), "default"))
            profiler.disable()
            out[name] = _shares(pstats.Stats(profiler))
        self.unlink(client, f"{prefix}:*")
        return out

    # -- the worker's loop -------------------------------------------------------------------

    def run(self, name: str, ops: int) -> dict[str, float]:
        op = self.variants[name]
        per_op = ops * self.per_op.get(name, 1)
        cpu = time.process_time()  # every thread of this process (a worker tool's too)
        start = time.perf_counter()
        for _ in range(ops):
            op()
        wall = time.perf_counter() - start
        return {"wall": wall / per_op, "cpu": (time.process_time() - cpu) / per_op, "per_op": per_op}


#: cProfile categories: (label, file suffix, function name or None for every function of the file,
#: "cum" for cumulative time of the named function, "tot" for own time summed over the file).
_CATEGORIES: tuple[tuple[str, str, str | None, str], ...] = (
    ("create (store.create)", "/_sync/redis.py", "create", "cum"),
    ("complete (store.complete)", "/_sync/redis.py", "complete", "cum"),
    ("create (MemoryStore.create)", "/adapters/memory.py", "create", "cum"),
    ("complete (MemoryStore.complete)", "/adapters/memory.py", "complete", "cum"),
    ("worker hand-off (call_with_timeout)", "/_runners.py", "call_with_timeout", "cum"),
    ("preflight", "/_sync/pipeline.py", "preflight", "cum"),
    ("kernel (own time of kernel/*)", "/kernel/", None, "tot"),
    ("telemetry (own time of _telemetry)", "/boundary/_telemetry.py", None, "tot"),
    ("sizes (own time of kernel/_sizes)", "/kernel/_sizes.py", None, "tot"),
)


def _shares(stats: pstats.Stats) -> dict[str, float]:
    """Each category's share of the profiled invocations' time (see :data:`_CATEGORIES`)."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]  # pstats keeps it untyped
    total = 0.0
    for (filename, _line, function), (_cc, _nc, _tt, cumulative, _callers) in table.items():
        if filename.endswith("/_sync/boundary.py") and function == "invoke":
            total = max(total, cumulative)
    shares: dict[str, float] = {}
    for label, suffix, name, kind in _CATEGORIES:
        value = 0.0
        for (filename, _line, function), (_cc, _nc, own, cumulative, _callers) in table.items():
            if suffix not in filename or (name is not None and function != name):
                continue
            value += cumulative if kind == "cum" else own
        if value:
            shares[label] = value / total if total else 0.0
    shares["total seconds"] = total
    return shares


def worker_main(url: str, code: str, full: bool) -> int:
    """Serve the driver: one JSON request per line on stdin, one JSON answer per line on stdout."""
    import invocation_store  # noqa: PLC0415

    where = str(Path(invocation_store.__file__).resolve())
    assert where.startswith(str(Path(code).resolve())), (where, code)
    bench = Bench(url, full)
    out: TextIO = sys.stdout
    sys.stdout = sys.stderr  # nothing but answers on the protocol stream
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "setup":
            before = set(bench.variants)
            getattr(bench, f"setup_{request['section']}")()
            answer: Any = {"variants": [n for n in bench.variants if n not in before], "info": bench.info}
            bench.info = []
        elif op == "run":
            answer = bench.run(request["variant"], request["ops"])
        elif op == "cleanup":
            for clean in bench.cleanups:
                clean()
            answer = {}
        elif op == "check_async":
            bench.async_check()
            answer = {}
        elif op == "profile":
            answer = bench.profile(request["count"])
        elif op == "pid":
            answer = {"pid": os.getpid()}
        else:
            answer = {"error": op}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


# ==========================================================================================
# Driver
# ==========================================================================================


class Worker:
    """A worker process importing ``invocation_store`` from ``code``."""

    def __init__(self, label: str, code: Path, url: str, full: bool) -> None:
        self.label = label
        env = dict(os.environ)
        env["PYTHONPATH"] = str(code)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--code",
            str(code),
            "--url",
            url,
        ]
        if full:
            command.append("--full")
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, cwd=str(code)
        )
        self.pid = self.process.pid

    def call(self, **request: Any) -> Any:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.label} stopped (exit {self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


#: Samples: {section: {placement: {(worker, variant): {"wall"|"client"|"server": [per round]}}}}.
Samples = dict[str, dict[str, list[float]]]
LOADS: list[float] = []


def measure(
    workers: list[Worker],
    section: str,
    places: list[tuple[str, Callable[[], None]]],
    rounds: int,
    ops: int,
    server_cpu: Callable[[], float],
    cleanup: bool = False,
) -> dict[str, dict[tuple[str, str], Samples]]:
    """Set up ``section`` in every worker, then run its variants interleaved, round by round."""
    names: list[tuple[str, str]] = []
    by_label = {worker.label: worker for worker in workers}
    for worker in workers:
        answer = worker.call(op="setup", section=section)
        names.extend((worker.label, name) for name in answer["variants"])
        for line in answer["info"]:
            print(f"  [{worker.label}] {line}")
    out: dict[str, dict[tuple[str, str], Samples]] = {
        place: {key: {"wall": [], "client": [], "server": []} for key in names} for place, _ in places
    }
    for index in range(rounds):
        LOADS.append(os.getloadavg()[0])
        for place, pin in places:
            pin()
            order = names[index % len(names) :] + names[: index % len(names)]
            for label, name in order:
                worker = by_label[label]
                server = server_cpu()
                answer = worker.call(op="run", variant=name, ops=ops)
                server = (server_cpu() - server) / answer["per_op"]
                sample = out[place][(label, name)]
                sample["wall"].append(answer["wall"])
                sample["client"].append(answer["cpu"])
                sample["server"].append(server)
                if cleanup:
                    worker.call(op="cleanup")
    return out


def _cpu(sample: Samples) -> list[float]:
    return [c + s for c, s in zip(sample["client"], sample["server"], strict=True)]


def print_samples(results: dict[str, dict[tuple[str, str], Samples]], scale: float = 1e6) -> None:
    for place, table in results.items():
        print(f"  -- {place}")
        for (label, name), sample in table.items():
            print(
                f"     [{label:6s}] {name:14s} wall {_spread(sample['wall'], scale, 1)} us"
                f"  CPU client {statistics.median(sample['client']) * scale:7.1f} us"
                f" server {statistics.median(sample['server']) * scale:7.1f} us"
            )


#: The issue's table: (figure, {label: text}, goal).
TABLE: list[tuple[str, dict[str, str], str]] = []


def table_row(name: str, goal: str) -> dict[str, str]:
    row: dict[str, str] = {}
    TABLE.append((name, row, goal))
    return row


def report_invocation(results: dict[str, dict[tuple[str, str], Samples]], labels: list[str]) -> None:
    for place, table in results.items():
        goal = "<= 2.0x" if place == "same CPU" else "<= 1.5x"
        headline = table_row(
            f"Redis invocation / floor, CPU (client + server), default ToolSpec, {place}", goal
        )
        wall_row = table_row(f"the same, wall time, {place}", "-")
        server_row = table_row(f"redis-server CPU per invocation / the floor's, {place}", "<= 1.5x")
        for label in labels:
            get = table.get
            default, floor = get((label, "default")), get((label, "floor"))
            if default is None or floor is None:
                continue
            headline[label] = figure(
                f"[{label}] redis invocation CPU (client + server) / floor CPU, default ToolSpec, {place}",
                ratios(_cpu(default), _cpu(floor)),
                target=goal,
            )
            wall_row[label] = figure(
                f"[{label}] redis invocation wall / floor wall, default ToolSpec, {place}",
                ratios(default["wall"], floor["wall"]),
            )
            server_row[label] = figure(
                f"[{label}] redis-server CPU per invocation / floor's, default ToolSpec, {place}",
                ratios(default["server"], floor["server"]),
                target="<= 1.5x",
            )
            bound = get((label, "commands"))
            if bound is not None:
                figure(
                    f"[{label}] redis-server CPU of the hot paths' commands alone / floor's, {place}",
                    ratios(bound["server"], floor["server"]),
                )
                figure(
                    f"[{label}] redis-server CPU per invocation / the commands alone, {place}",
                    ratios(default["server"], bound["server"]),
                )
            figure(
                f"[{label}] redis invocation CPU, default ToolSpec (client + server), {place}",
                _cpu(default),
                unit="us",
                scale=1e6,
            )
            figure(f"[{label}] floor CPU (client + server), {place}", _cpu(floor), unit="us", scale=1e6)
            inline, store = get((label, "inline")), get((label, "store"))
            if inline is not None:
                figure(
                    f"[{label}] redis invocation CPU / floor CPU, timeout_ms=None (inline tool), {place}",
                    ratios(_cpu(inline), _cpu(floor)),
                )
            if store is not None:
                figure(
                    f"[{label}] bare RedisStore (create, kernel, complete) CPU / floor CPU, {place}",
                    ratios(_cpu(store), _cpu(floor)),
                )
            for name, text in (
                ("floor_exec", "floor through execute_command / floor on the held connection"),
                ("pings", "two PINGs on the held connection / floor"),
            ):
                other = get((label, name))
                if other is not None:
                    figure(f"[{label}] {text}, CPU, {place}", ratios(_cpu(other), _cpu(floor)))
            for name, base, text in (
                ("seed", "default", "seed protocol behind the same boundary / ours (default ToolSpec)"),
                ("seed_store", "store", "seed store bare / RedisStore bare"),
                ("no_hiredis", "default", "boundary with redis-py's Python RESP parser / with hiredis"),
            ):
                other, mine = get((label, name)), get((label, base))
                if other is not None and mine is not None:
                    figure(f"[{label}] {text}, CPU, {place}", ratios(_cpu(other), _cpu(mine)))
                    figure(f"[{label}] {text}, wall, {place}", ratios(other["wall"], mine["wall"]))
        if "before" in labels and "after" in labels:
            default_after, default_before = table.get(("after", "default")), table.get(("before", "default"))
            if default_after is not None and default_before is not None:
                figure(
                    f"redis invocation CPU, default ToolSpec, after / before (same run), {place}",
                    ratios(_cpu(default_after), _cpu(default_before)),
                )


def report_big(results: dict[str, dict[tuple[str, str], Samples]], labels: list[str]) -> None:
    for place, table in results.items():
        row = table_row(f"1 MiB raw invocation / a plain SET of the same bytes, CPU, {place}", "<= 1.3x")
        wall = table_row(f"the same, wall time, {place}", "-")
        for label in labels:
            big, plain = table.get((label, "big_default")), table.get((label, "big_set"))
            if big is None or plain is None:
                continue
            row[label] = figure(
                f"[{label}] 1 MiB raw invocation (default ToolSpec) / plain SET of 1 MiB, CPU, {place}",
                ratios(_cpu(big), _cpu(plain)),
                target="<= 1.3x",
            )
            wall[label] = figure(
                f"[{label}] 1 MiB raw invocation / plain SET of 1 MiB, wall, {place}",
                ratios(big["wall"], plain["wall"]),
            )


def report_async(results: dict[str, dict[tuple[str, str], Samples]], labels: list[str]) -> None:
    for place, table in results.items():
        row = table_row(
            f"async, 64 concurrent / plain redis.asyncio, CPU (client + server), {place}", "<= 1.3x"
        )
        wall = table_row(f"the same, wall time, {place}", "-")
        for label in labels:
            ours, plain = table.get((label, "async_boundary")), table.get((label, "async_plain"))
            if ours is None or plain is None:
                continue
            row[label] = figure(
                f"[{label}] async 64-concurrent boundary / plain redis.asyncio (same successful commands), "
                f"CPU (client + server), {place}",
                ratios(_cpu(ours), _cpu(plain)),
                target="<= 1.3x",
            )
            wall[label] = figure(
                f"[{label}] async 64-concurrent boundary / plain redis.asyncio, wall, {place}",
                ratios(ours["wall"], plain["wall"]),
                target="<= 1.3x",
            )
            figure(
                f"[{label}] async 64-concurrent, redis-server CPU per invocation, boundary / plain, {place}",
                ratios(ours["server"], plain["server"]),
            )


def report_memory(results: dict[str, dict[tuple[str, str], Samples]], labels: list[str]) -> None:
    for place, table in results.items():
        row = table_row("MemoryStore invocation, default ToolSpec, process CPU", "<= 30 us")
        for label in labels:
            get = table.get
            default, inline, bare, kernel = (
                get((label, "mem_default")),
                get((label, "mem_inline")),
                get((label, "mem_bare")),
                get((label, "mem_kernel")),
            )
            if default is None or inline is None or bare is None or kernel is None:
                continue
            row[label] = figure(
                f"[{label}] MemoryStore invocation, default ToolSpec (timeout_ms=30000: a worker thread), "
                f"process CPU, {place}",
                default["client"],
                unit="us",
                scale=1e6,
                target="<= 30 us",
            )
            figure(
                f"[{label}] MemoryStore invocation, default ToolSpec, wall",
                default["wall"],
                unit="us",
                scale=1e6,
            )
            figure(
                f"[{label}] MemoryStore invocation, timeout_ms=None (inline tool), process CPU",
                inline["client"],
                unit="us",
                scale=1e6,
            )
            figure(
                f"[{label}] MemoryStore invocation, default ToolSpec / bare call (argument parse, executor, "
                "projector), CPU",
                ratios(default["client"], bare["client"]),
            )
            figure(
                f"[{label}] pure kernel share of one invocation (bench_kernel.py), CPU",
                kernel["client"],
                unit="us",
                scale=1e6,
            )
            observed, stub = get((label, "observed_stub")), get((label, "bare_stub"))
            if observed is not None and stub is not None:
                figure(
                    f"[{label}] telemetry without an OpenTelemetry SDK, per invoke, CPU",
                    [a - b for a, b in zip(observed["client"], stub["client"], strict=True)],
                    unit="us",
                    scale=1e6,
                    target="< 1 us",
                )
            hand_off, in_thread = get((label, "hand_off")), get((label, "in_thread"))
            if hand_off is not None and in_thread is not None:
                figure(
                    f"[{label}] worker hand-off: a no-op on a worker less the same call inline, process CPU",
                    [a - b for a, b in zip(hand_off["client"], in_thread["client"], strict=True)],
                    unit="us",
                    scale=1e6,
                )


# -- 5. progress (this checkout, in process) --------------------------------------------------


def interleave(
    variants: dict[str, Callable[[], object]],
    rounds: int,
    ops: int,
    places: list[tuple[str, Callable[[], None]]],
    server_cpu: Callable[[], float],
) -> dict[str, dict[str, Samples]]:
    """In-process variants: ``{placement: {variant: samples}}``, interleaved (see :func:`measure`)."""
    out: dict[str, dict[str, Samples]] = {
        place: {v: {"wall": [], "client": [], "server": []} for v in variants} for place, _ in places
    }
    names = list(variants)
    for index in range(rounds):
        for place, pin in places:
            pin()
            for name in names[index % len(names) :] + names[: index % len(names)]:
                server = server_cpu()
                client = time.process_time()
                start = time.perf_counter()
                for _ in range(ops):
                    variants[name]()
                sample = out[place][name]
                sample["wall"].append((time.perf_counter() - start) / ops)
                sample["client"].append((time.process_time() - client) / ops)
                sample["server"].append((server_cpu() - server) / ops)
    return out


def _sent_bytes(client: redis.Redis) -> int:
    return int(client.info("stats")["total_net_output_bytes"])


def section_progress(
    url: str, places: list[tuple[str, Callable[[], None]]], rounds: int, server_pid: int
) -> None:
    from invocation_store import RedisStore, ToolBoundary  # noqa: PLC0415

    print(f"\n5. project_progress of {PROGRESS_CALLS} READY calls (1 KiB request, 4 KiB raw), this checkout")
    bench = Bench(url, full=False)
    prefix = f"cis-bench-p{secrets.token_hex(3)}"
    client = redis.Redis.from_url(url)
    plain_client = redis.Redis.from_url(url, parser_class=_RESP2Parser)
    observer = redis.Redis.from_url(url)
    store = RedisStore(client, prefix=prefix)
    plain_store = RedisStore(plain_client, prefix=prefix)
    writer = ToolBoundary(store, bench.tools)
    context = bench.open(writer, "run-progress")
    for i in range(PROGRESS_CALLS):
        assert writer.invoke(context, bench.envelope("run-progress", f"p_{i:06d}", "inline")).ok
    boundaries = {
        "hmget": ToolBoundary(store, bench.tools),
        "hmget_no_hiredis": ToolBoundary(plain_store, bench.tools),
    }

    def op(boundary: Any) -> Callable[[], None]:
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
        print(
            f"FIGURE project_progress bytes sent per completed call ({name}): {sent / PROGRESS_CALLS:.0f} B"
        )
    got = interleave(variants, rounds, 1, places, server_cpu_reader(server_pid))
    for place, table in got.items():
        per = 1e6 / PROGRESS_CALLS
        figure(
            f"project_progress per completed call (HMGET, hiredis), wall, {place}",
            table["hmget"]["wall"],
            unit="us",
            scale=per,
            target="<= 10 us",
        )
        figure(
            f"project_progress per completed call (HMGET, hiredis), CPU (client + server), {place}",
            _cpu(table["hmget"]),
            unit="us",
            scale=per,
        )
        figure(
            f"project_progress with redis-py's Python RESP parser / with hiredis, CPU, {place}",
            ratios(_cpu(table["hmget_no_hiredis"]), _cpu(table["hmget"])),
        )
    bench.unlink(client, f"{prefix}:*")
    for c in (client, plain_client, observer):
        c.close()


# -- 6. fixed RTT (this checkout, in process) ------------------------------------------------


def section_rtt(rtt_ms: float, rounds: int) -> None:
    from bench_redis import relay_server  # noqa: PLC0415
    from seed_store import SeedStore  # noqa: PLC0415

    from invocation_store import RedisStore, ToolBoundary  # noqa: PLC0415

    print(f"\n6. Fixed RTT {rtt_ms} ms (user-space relay), unpinned, this checkout")
    bench = Bench("", full=False)
    with relay_server(rtt_ms) as server:
        print(f"  {server.label}")
        prefix = f"cis-bench-r{secrets.token_hex(3)}"
        client = redis.Redis.from_url(server.url)
        store = RedisStore(client, prefix=prefix)
        ours = ToolBoundary(store, bench.tools)
        seeded = ToolBoundary(SeedStore(client, prefix), bench.tools)
        o, s = bench.open(ours, "run-o"), bench.open(seeded, "run-s")
        next_id = Counter("call_")
        assert ours.invoke(o, bench.envelope("run-o", next_id(), "default")).ok
        commands = bench.record_evalshas(
            store, lambda: ours.invoke(o, bench.envelope("run-o", next_id(), "default"))
        )
        trivial = client.script_load("return 1")
        held = HeldSend(client)
        floor_commands = [("EVALSHA", trivial, *command[2:]) for command in commands]

        def floor() -> None:
            for command in floor_commands:
                held(*command)

        variants: dict[str, Callable[[], object]] = {
            "floor": floor,
            "pings": lambda: (held("PING"), held("PING")),
            "default": lambda: ours.invoke(o, bench.envelope("run-o", next_id(), "default")),
            "seed": lambda: seeded.invoke(s, bench.envelope("run-s", next_id(), "default")),
        }
        ops = max(5, int(0.15 / (rtt_ms / 1000 * 4)))
        table = interleave(variants, rounds, ops, [("relay", lambda: None)], lambda: 0.0)["relay"]
        figure(
            f"redis invocation (default ToolSpec) / floor, wall, RTT {rtt_ms} ms",
            ratios(table["default"]["wall"], table["floor"]["wall"]),
        )
        figure(
            f"redis invocation / two PINGs, wall, RTT {rtt_ms} ms",
            ratios(table["default"]["wall"], table["pings"]["wall"]),
        )
        figure(
            f"redis invocation / floor, client CPU, RTT {rtt_ms} ms",
            ratios(table["default"]["client"], table["floor"]["client"]),
        )
        figure(
            f"seed behind the same boundary / ours (throughput), wall, RTT {rtt_ms} ms",
            ratios(table["seed"]["wall"], table["default"]["wall"]),
        )
        bench.unlink(client, f"{prefix}:*")
        client.close()


# -- the run ---------------------------------------------------------------------------------


def _revision(path: Path) -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        marker = path / "REVISION"
        return marker.read_text(encoding="ascii").strip() if marker.exists() else "unknown"
    return head + (" (with uncommitted changes)" if dirty else "")


@contextmanager
def _baseline(path: str | None, rev: str | None) -> Iterator[Path | None]:
    """The "before" checkout: a given directory, or ``rev`` exported from this repository."""
    if path is not None:
        yield Path(path).resolve()
        return
    if rev is None:
        yield None
        return
    directory = Path(tempfile.mkdtemp(prefix="cis-bench-before-"))
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
        full = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True, check=True
        ).stdout.strip()
        (directory / "REVISION").write_text(full + "\n", encoding="ascii")
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def _restored_affinity() -> Iterator[None]:
    mine = os.sched_getaffinity(0)
    try:
        yield
    finally:
        _pin(None, mine)


def print_table(labels: list[str]) -> None:
    print("\nIssue 25 figures (median (min..max) over rounds; CPU: client process + redis-server thread)\n")
    header = "| figure | " + " | ".join(labels) + " | goal |"
    print(header)
    print("|" + " --- |" * (len(labels) + 2))
    for name, row, goal in TABLE:
        print(f"| {name} | " + " | ".join(row.get(label, "-") for label in labels) + f" | {goal} |")


def run_sections(
    args: argparse.Namespace, before: Path | None, only: set[str], rounds: int, ops: int, quick: bool
) -> list[str]:
    """Sections 1-5 on one private server, the workers of both checkouts interleaved; the labels."""
    from invocation_store.testing.redis_server import redis_server  # noqa: PLC0415

    with _restored_affinity(), redis_server() as url:
        with redis.Redis.from_url(url) as probe:
            info = probe.info("server")
        server_pid = int(info["process_id"])
        print(f"private redis-server {info['redis_version']} on {url.split('@')[-1]}")
        workers = [Worker("after", ROOT, url, full=True)]
        if before is not None:
            workers.append(Worker("before", before, url, full=False))
        labels = [w.label for w in workers][::-1]  # before first in the table
        try:
            if args.profile:
                for worker in workers:
                    shares = worker.call(op="profile", count=args.profile)
                    for store, values in shares.items():
                        total = values.pop("total seconds")
                        head = f"[{worker.label}] {store}, {args.profile} default invocations"
                        print(f"\ncProfile shares, {head} ({total:.2f} s)")
                        for name, share in values.items():
                            print(f"  {share * 100:5.1f}%  {name}")
            pids = lambda: [w.pid for w in workers]  # noqa: E731 - read at each pin (threads come and go)
            places = placements(server_pid, pids)
            server_cpu = server_cpu_reader(server_pid)
            if "invocation" in only:
                print("\n1. One invocation (1 KiB arguments, 4 KiB raw) vs the floor, per CPU placement")
                got = measure(workers, "invocation", places, rounds, ops, server_cpu)
                print(f"  {rounds} rounds x {ops} calls per variant and placement; median (min..max)")
                print_samples(got)
                report_invocation(got, labels)
            if "big" in only:
                print("\n2. A whole invocation with a 1 MiB raw response vs a plain SET of the same bytes")
                got = measure(workers, "big", places, rounds, max(3, ops // 15), server_cpu, cleanup=True)
                print_samples(got)
                report_big(got, labels)
            if "async" in only:
                print(f"\n3. {CONCURRENCY} concurrent invocations (async) vs plain redis.asyncio, per call")
                got = measure(workers, "async", places, rounds, 2 if quick else 4, server_cpu)
                for worker in workers:
                    worker.call(op="check_async")
                print(
                    "  every replayed create answered OK, every complete WRITE; every replayed record READY"
                )
                print_samples(got)
                report_async(got, labels)
            if "memory" in only:
                print(
                    "\n4. MemoryStore invocation (the worker on one CPU), against a bare call and the kernel"
                )
                cpu0 = sorted(os.sched_getaffinity(0))[0]

                def pin_memory() -> None:
                    for pid in pids():
                        _pin(pid, {cpu0})

                got = measure(workers, "memory", [("one CPU", pin_memory)], rounds, ops * 10, lambda: 0.0)
                print_samples(got)
                report_memory(got, labels)
        finally:
            for worker in workers:
                worker.close()
        if "progress" in only:
            section_progress(url, placements(server_pid, lambda: [None]), rounds, server_pid)
    return labels


def section_instructions(before: Path | None, count: int) -> None:
    """redis-server instructions per invocation and per floor, counted by callgrind, per checkout."""
    from invocation_store.testing.redis_server import SERVER_ENV, find_redis_server, redis_server  # noqa: PLC0415

    real = find_redis_server()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None or real is None:
        print("\ninstructions: valgrind (callgrind) or a redis-server binary is missing; skipped")
        return
    print(f"\n0. redis-server instructions (callgrind, user space), {count} calls per variant")
    with tempfile.TemporaryDirectory(prefix="cis-bench-cg-") as directory:
        wrapper = Path(directory) / "redis-server"
        wrapper.write_text(
            f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={directory}/%p.out "
            f'"{real}" "$@"\n',
            encoding="ascii",
        )
        wrapper.chmod(0o755)
        saved = os.environ.get(SERVER_ENV)
        os.environ[SERVER_ENV] = str(wrapper)
        try:
            with redis_server() as url:
                with redis.Redis.from_url(url) as probe:
                    pid = int(probe.info("server")["process_id"])
                workers = [Worker("after", ROOT, url, full=False)]
                if before is not None:
                    workers.append(Worker("before", before, url, full=False))

                def dump() -> None:
                    subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True, check=False)

                def counted(worker: Worker, variant: str) -> float:
                    dump()  # the counters start from zero after a dump
                    answer = worker.call(op="run", variant=variant, ops=count)
                    dump()
                    dumps = sorted(Path(directory).glob(f"{pid}.out.*"), key=lambda p: int(p.suffix[1:]))
                    lines = dumps[-1].read_text(encoding="ascii", errors="replace").splitlines()
                    total = next(
                        int(line.split()[1]) for line in lines if line.startswith(("summary:", "totals:"))
                    )
                    return total / answer["per_op"]

                try:
                    for worker in workers:
                        worker.call(op="setup", section="invocation")
                    row = table_row("redis-server instructions per invocation / the floor's (callgrind)", "-")
                    for worker in reversed(workers):
                        ours, floor = counted(worker, "default"), counted(worker, "floor")
                        bound = counted(worker, "commands")
                        label = f"[{worker.label}] redis-server instructions per invocation"
                        counts = f"{ours / 1000:.1f}k, floor {floor / 1000:.1f}k"
                        print(f"FIGURE {label}: {counts}, {ours / floor:.2f} x")
                        print(
                            f"FIGURE [{worker.label}] redis-server instructions of the hot paths' commands "
                            f"alone: {bound / 1000:.1f}k, {bound / floor:.2f} x the floor's; "
                            f"invocation / commands alone {ours / bound:.2f} x"
                        )
                        row[worker.label] = f"{ours / floor:.2f} x ({ours / 1000:.0f}k / {floor / 1000:.0f}k)"
                finally:
                    for worker in workers:
                        worker.close()
        finally:
            if saved is None:
                os.environ.pop(SERVER_ENV, None)
            else:
                os.environ[SERVER_ENV] = saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--ops", type=int, default=150)
    parser.add_argument("--rtt-ms", default="1")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", action="append", choices=["invocation", "big", "async", "memory", "progress", "rtt", "none"]
    )
    parser.add_argument("--baseline-path", help='a checkout of the code to compare against ("before")')
    parser.add_argument(
        "--baseline-rev", help="a revision of this repository to compare against (git archive)"
    )
    parser.add_argument("--profile", type=int, default=0, help="print cProfile shares of N invocations")
    parser.add_argument(
        "--instructions", type=int, default=0, help="count redis-server instructions over N calls (valgrind)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args.url, args.code, args.full)
    quick = args.quick or os.environ.get("CIS_BENCH_QUICK") == "1"
    rounds = 5 if quick else args.rounds
    ops = 60 if quick else args.ops
    only = set(args.only or ["invocation", "big", "async", "memory", "progress", "rtt"]) - {"none"}
    labels = ["after"]
    print(
        f"start: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {_load()}, nproc {os.cpu_count()}"
    )
    print(
        f"python {sys.version.split()[0]}, redis-py {redis.__version__}, hiredis "
        f"{__import__('hiredis').__version__ if HIREDIS_AVAILABLE else 'absent'}"
    )
    print(
        f"command: {' '.join([Path(sys.executable).name, 'benchmarks/bench_invocation.py', *sys.argv[1:]])}"
    )
    print(f"after: this checkout, revision {_revision(ROOT)}")
    with _baseline(args.baseline_path, args.baseline_rev) as before:
        if before is not None:
            print(f"before: {before}, revision {_revision(before)}")
            labels = ["before", "after"]
        if args.instructions:
            section_instructions(before, args.instructions)
        if only - {"rtt"} or args.profile:
            labels = run_sections(args, before, only, rounds, ops, quick)
    if "rtt" in only and args.rtt_ms != "none":
        for rtt in (float(x) for x in args.rtt_ms.split(",")):
            section_rtt(rtt, max(3, rounds // 3))
    if LOADS:
        print(f"\n1-minute load average over the rounds: {min(LOADS):.2f}..{max(LOADS):.2f}")
    print(f"end: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {_load()}")
    print_table(labels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
