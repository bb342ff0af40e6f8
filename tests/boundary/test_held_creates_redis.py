"""Creates whose reply is lost on a real Redis: a reply-dropping TCP proxy and a server kill (CIS-BND-7).

The proxy forwards every command to a private redis-server; while it drops, each
``EVALSHA`` runs on the server and its reply never reaches the client (the connection
is cut), so the store's retries replay the create until its budget ends and the call
gets STORE_UNAVAILABLE with the record written. The harness then re-sends the call, as
docs/durability.md says to: the tool must run exactly once, sync and async. The server-kill
test kills redis-server (``appendonly yes``, ``appendfsync always``) while calls run,
restarts it on its data, and re-sends every call not answered: no call is ever told
DUPLICATE_TOOL_CALL while its tool never ran, and every tool runs exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import invocation_store
from invocation_store import (
    AsyncRedisStore,
    AsyncToolBoundary,
    CompletionRetry,
    EvidenceStatus,
    Projection,
    RedisStore,
    RunContext,
    ToolBoundary,
    ToolCallEnvelope,
    ToolRegistry,
    ToolSpec,
)
from invocation_store.adapters import RetryPolicy
from invocation_store.kernel import ErrorCode, InvocationStatus
from invocation_store.testing.redis_server import redis_server

pytestmark = pytest.mark.redis

RUN = "run-held"
FAST_RETRY = RetryPolicy(budget_ms=150, first_delay_ms=5, max_delay_ms=40)
FAST_COMPLETION = CompletionRetry(budget_ms=150, first_delay_ms=5, max_delay_ms=40)
FOUND = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="ok", scope="s")


class ReplyDroppingProxy:
    """A loopback TCP proxy to redis-server; while :attr:`dropping` is set, every ``EVALSHA``
    reaches the server and its reply is lost (both ends of that connection are cut).
    :attr:`drop_once` (a command name, e.g. ``b"TIME"``) loses the next reply to that command
    the same way, once."""

    def __init__(self, target_port: int, on_drop: Callable[[], object] | None = None) -> None:
        self.target_port = target_port
        self.on_drop = on_drop
        self.dropping = threading.Event()
        self.dropped = 0
        self.drop_once: bytes | None = None
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:  # the server is down: so is this connection
                downstream.close()
                continue
            state = {"evalsha": False, "once": False}
            threading.Thread(target=self._up, args=(downstream, upstream, state), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, downstream, state), daemon=True).start()

    def _up(self, source: socket.socket, sink: socket.socket, state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if b"EVALSHA" in chunk.upper():
                    state["evalsha"] = True
                once = self.drop_once
                if once is not None and f"${len(once)}\r\n".encode() + once in chunk.upper():
                    state["once"] = True
                sink.sendall(chunk)

    def _down(self, source: socket.socket, sink: socket.socket, state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if state["once"] and self.drop_once is not None:
                    self.drop_once = None
                    for end in (sink, source):  # the command ran; its reply is lost
                        with contextlib.suppress(OSError):
                            end.shutdown(socket.SHUT_RDWR)
                        end.close()
                    return
                if state["evalsha"] and self.dropping.is_set():
                    self.dropped += 1
                    if self.on_drop is not None:  # e.g. kill the server: the reply was never sent
                        self.dropping.clear()
                        self.on_drop()
                    for end in (sink, source):  # the script ran; its reply is lost
                        with contextlib.suppress(OSError):
                            end.shutdown(socket.SHUT_RDWR)
                        end.close()
                    return
                state["evalsha"] = False
                sink.sendall(chunk)

    def close(self) -> None:
        self.closed = True
        self.listener.close()


@contextlib.contextmanager
def proxied_server() -> Iterator[tuple[str, ReplyDroppingProxy]]:
    with redis_server() as url:
        proxy = ReplyDroppingProxy(int(url.rsplit(":", 1)[1].split("/", 1)[0]))
        try:
            yield f"redis://127.0.0.1:{proxy.port}/0", proxy
        finally:
            proxy.close()


class Counting:
    """A sync executor counting its runs per tool_call_id (from the arguments)."""

    def __init__(self, sleep_s: float = 0.0) -> None:
        self.runs: Counter[str] = Counter()
        self.sleep_s = sleep_s
        self.lock = threading.Lock()

    def __call__(self, arguments: Any) -> object:
        with self.lock:
            self.runs[arguments["id"]] += 1
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return {"id": arguments["id"]}


def _registry(executor: Counting) -> ToolRegistry:
    return ToolRegistry([ToolSpec(name="t", executor=executor, projector=lambda raw, args: FOUND)])


def _call(tool_call_id: str) -> ToolCallEnvelope:
    return ToolCallEnvelope(
        run_id=RUN, tool_call_id=tool_call_id, tool_name="t", arguments=f'{{"id":"{tool_call_id}"}}'
    )


def _open(boundary: ToolBoundary) -> RunContext:
    context = boundary.open_run(
        RUN,
        deadline_ms=boundary.now_ms() + 600_000,
        ttl_ms=600_000,
        tool_call_budget=10_000,
        byte_budget=1 << 26,
    )
    assert isinstance(context, RunContext), context
    return context


def test_a_create_whose_reply_the_network_drops_runs_its_tool_once_when_resent() -> None:
    """CIS-BND-7, CIS-DUR-4, CIS-ID-5: every reply to the create is dropped past the store's retry
    budget: STORE_UNAVAILABLE, the record written (PROJECTING), the tool not run, the create held.
    The re-send, network healed, replays the token: the tool runs exactly once and the call is READY;
    another re-send is then DUPLICATE_TOOL_CALL (the tool did run)."""
    executor = Counting()
    with proxied_server() as (url, proxy):
        store = RedisStore.from_url(url, prefix=f"held-{secrets.token_hex(4)}", retry_policy=FAST_RETRY)
        try:
            boundary = ToolBoundary(store, _registry(executor), completion_retry=FAST_COMPLETION)
            context = _open(boundary)
            proxy.dropping.set()
            first = boundary.invoke(context, _call("call_1"))
            proxy.dropping.clear()
            assert first.code is ErrorCode.STORE_UNAVAILABLE
            assert proxy.dropped >= 2  # the store resent the create; each reply was lost
            assert executor.runs == {}
            record = store.get(RUN, "call_1")
            assert record is not None
            assert record.status is InvocationStatus.PROJECTING
            assert boundary.pending_creates() == ((RUN, "call_1"),)
            again = boundary.invoke(context, _call("call_1"))
            assert again.ok, again
            assert executor.runs == {"call_1": 1}
            stored = store.get(RUN, "call_1")
            assert stored is not None
            assert stored.status is InvocationStatus.READY
            assert boundary.invoke(context, _call("call_1")).code is ErrorCode.DUPLICATE_TOOL_CALL
            assert executor.runs == {"call_1": 1}
        finally:
            store.close()


def test_the_async_boundary_runs_a_dropped_create_once_when_resent() -> None:
    """CIS-BND-7, CIS-DUR-10: the same through AsyncToolBoundary and AsyncRedisStore."""
    executor = Counting()

    async def scenario(url: str, proxy: ReplyDroppingProxy) -> None:
        store = AsyncRedisStore.from_url(url, prefix=f"held-{secrets.token_hex(4)}", retry_policy=FAST_RETRY)
        try:
            boundary = AsyncToolBoundary(store, _registry(executor), completion_retry=FAST_COMPLETION)
            context = await boundary.open_run(
                RUN,
                deadline_ms=store.now_ms() + 600_000,
                ttl_ms=600_000,
                tool_call_budget=9,
                byte_budget=1 << 20,
            )
            assert isinstance(context, RunContext)
            proxy.dropping.set()
            first = await boundary.invoke(context, _call("call_1"))
            proxy.dropping.clear()
            assert first.code is ErrorCode.STORE_UNAVAILABLE
            assert executor.runs == {}
            assert boundary.pending_creates() == ((RUN, "call_1"),)
            again = await boundary.invoke(context, _call("call_1"))
            assert again.ok, again
            assert executor.runs == {"call_1": 1}
            assert (await boundary.invoke(context, _call("call_1"))).code is ErrorCode.DUPLICATE_TOOL_CALL
        finally:
            await store.close()

    with proxied_server() as (url, proxy):
        asyncio.run(scenario(url, proxy))


#: A harness process that makes two calls whose create replies are lost, reports, and exits:
#: it dies holding both creates (CIS-BND-7).
_HOLDER = textwrap.dedent(
    """
    import sys
    from invocation_store import (
        CompletionRetry, EvidenceStatus, Projection, RedisStore, RunContext, ToolBoundary,
        ToolCallEnvelope, ToolRegistry, ToolSpec,
    )
    from invocation_store.adapters import RetryPolicy

    url, prefix, run_id = sys.argv[1:4]
    ran = []
    found = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="ok", scope="s")
    spec = ToolSpec(name="t", executor=lambda args: ran.append(args) or {}, projector=lambda raw, args: found)
    store = RedisStore.from_url(
        url, prefix=prefix, retry_policy=RetryPolicy(budget_ms=150, first_delay_ms=5, max_delay_ms=40)
    )
    boundary = ToolBoundary(
        store, ToolRegistry([spec]), completion_retry=CompletionRetry(budget_ms=150, first_delay_ms=5)
    )
    for tool_call_id in ("call_1", "call_2"):
        envelope = ToolCallEnvelope(
            run_id=run_id, tool_call_id=tool_call_id, tool_name="t", arguments='{"id":"%s"}' % tool_call_id
        )
        print(boundary.invoke(RunContext(run_id=run_id), envelope).code.value)
    print(len(boundary.pending_creates()), len(ran))
    """
)


def test_a_holder_process_that_died_leaves_each_call_its_fate_on_redis() -> None:
    """CIS-BND-7, CIS-ID-5, CIS-DUR-10: a harness process makes two calls whose create replies are lost
    past the retry budget (STORE_UNAVAILABLE, both held, no tool run) and exits, holding them. A
    successor (this process: another boundary and store, sync and async) re-sends each call: it is
    CALL_IN_PROGRESS while its record is PROJECTING, then, after ``sweep_stale``, STALE_PROJECTION
    (the record's terminal code): never DUPLICATE_TOOL_CALL, and the tool never runs."""
    executor = Counting()
    prefix = f"died-{secrets.token_hex(4)}"
    root = str(Path(invocation_store.__file__).resolve().parent.parent)
    with proxied_server() as (url, proxy):
        opener = RedisStore.from_url(url, prefix=prefix)
        context = _open(ToolBoundary(opener, _registry(executor)))
        proxy.dropping.set()
        holder = subprocess.run(
            [sys.executable, "-c", _HOLDER, url, prefix, RUN],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": root},
            check=True,
        )
        proxy.dropping.clear()
        assert holder.stdout.split() == ["STORE_UNAVAILABLE", "STORE_UNAVAILABLE", "2", "0"]
        for tool_call_id in ("call_1", "call_2"):
            record = opener.get(RUN, tool_call_id)
            assert record is not None
            assert record.status is InvocationStatus.PROJECTING

        async def async_successor(tool_call_id: str) -> ErrorCode | None:
            store = AsyncRedisStore.from_url(url, prefix=prefix)
            try:
                boundary = AsyncToolBoundary(store, _registry(executor))
                return (await boundary.invoke(context, _call(tool_call_id))).code
            finally:
                await store.close()

        successor = ToolBoundary(RedisStore.from_url(url, prefix=prefix), _registry(executor))
        assert successor.invoke(context, _call("call_1")).code is ErrorCode.CALL_IN_PROGRESS
        assert asyncio.run(async_successor("call_2")) is ErrorCode.CALL_IN_PROGRESS
        assert successor.sweep_stale(context, older_than_ms=0) == 2
        assert successor.invoke(context, _call("call_1")).code is ErrorCode.STALE_PROJECTION
        assert asyncio.run(async_successor("call_2")) is ErrorCode.STALE_PROJECTION
        assert successor.invoke(context, _call("call_2")).code is ErrorCode.STALE_PROJECTION
        assert executor.runs == {}
        opener.close()


def _pid(url: str) -> int:
    with redis.Redis.from_url(url) as client:
        return int(client.info("server")["process_id"])


def test_a_server_killed_after_applying_a_create_keeps_it_and_the_resend_runs_once(tmp_path: Path) -> None:
    """CIS-BND-7, CIS-DUR-1: redis-server (AOF, ``appendfsync always``) applies a create, writes it to
    the AOF, and is killed (SIGKILL) before its reply reaches the client (the proxy kills it when the
    reply arrives). The caller gets STORE_UNAVAILABLE; the server restarted on its data still holds the
    PROJECTING record; the re-sent call replays the held create's token, is recognised as the call's own
    create and runs its tool exactly once: never CALL_IN_PROGRESS or DUPLICATE_TOOL_CALL for a tool
    that never ran."""
    args = ["--appendonly", "yes", "--appendfsync", "always"]
    executor = Counting()
    with redis_server(extra_args=args, data_dir=str(tmp_path)) as url:
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        pid = _pid(url)
        proxy = ReplyDroppingProxy(port, on_drop=lambda: os.kill(pid, signal.SIGKILL))
        store = RedisStore.from_url(
            f"redis://127.0.0.1:{proxy.port}/0", prefix="kill", retry_policy=FAST_RETRY, socket_timeout=1.0
        )
        boundary = ToolBoundary(store, _registry(executor), completion_retry=FAST_COMPLETION)
        context = _open(boundary)
        proxy.dropping.set()
        first = boundary.invoke(context, _call("call_1"))
        assert proxy.dropped == 1
        assert first.code is ErrorCode.STORE_UNAVAILABLE
        assert boundary.pending_creates() == ((RUN, "call_1"),)
    try:
        with redis_server(extra_args=args, data_dir=str(tmp_path), port=port):
            survived = store.get(RUN, "call_1")
            assert survived is not None
            assert survived.status is InvocationStatus.PROJECTING  # the create was durable
            assert executor.runs == {}
            again = boundary.invoke(context, _call("call_1"))
            assert again.ok, again
            assert executor.runs == {"call_1": 1}
            assert boundary.invoke(context, _call("call_1")).code is ErrorCode.DUPLICATE_TOOL_CALL
            store.close()
    finally:
        proxy.close()


class _KillTrial:
    """One trial: 40 calls in a thread, the server killed at a random point and restarted on its data."""

    ARGS = ("--appendonly", "yes", "--appendfsync", "always")

    def __init__(self, trial: int, data: Path) -> None:
        self.data = data
        self.executor = Counting(sleep_s=0.001)
        self.ids = [f"call_{trial}_{index}" for index in range(40)]
        self.answers: dict[str, Any] = {}
        self.never_ran_duplicates: list[str] = []

    def answer(self, boundary: ToolBoundary, context: RunContext, tool_call_id: str) -> None:
        result = boundary.invoke(context, _call(tool_call_id))
        self.answers[tool_call_id] = result
        if result.code is ErrorCode.DUPLICATE_TOOL_CALL and self.executor.runs[tool_call_id] == 0:
            self.never_ran_duplicates.append(tool_call_id)

    def run(self, rng: random.Random) -> ToolBoundary:
        with redis_server(extra_args=self.ARGS, data_dir=str(self.data)) as url:
            port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
            store = RedisStore.from_url(url, prefix="kill", retry_policy=FAST_RETRY, socket_timeout=1.0)
            boundary = ToolBoundary(store, _registry(self.executor), completion_retry=FAST_COMPLETION)
            context = _open(boundary)
            caller = threading.Thread(
                target=lambda: [self.answer(boundary, context, tcid) for tcid in self.ids], daemon=True
            )
            caller.start()
            time.sleep(rng.uniform(0.005, 0.04))
            os.kill(_pid(url), signal.SIGKILL)
            time.sleep(0.4)  # down for longer than the store's and the completion's retry budgets
        with redis_server(extra_args=self.ARGS, data_dir=str(self.data), port=port):
            caller.join(60)
            assert not caller.is_alive()
            for _ in range(5):
                unanswered = [tcid for tcid in self.ids if not self.answers[tcid].ok]
                if not unanswered:
                    break
                for tool_call_id in unanswered:
                    self.answer(boundary, context, tool_call_id)
            store.close()
        return boundary


def test_a_server_killed_under_appendfsync_always_loses_no_call(tmp_path: Path) -> None:
    """CIS-BND-7, CIS-DUR-1, CIS-DUR-5: redis-server (AOF, ``appendfsync always``) is killed (SIGKILL)
    while calls run, three times, at random points, kept down past the retry budgets and restarted on
    its data. Every call not answered is re-sent until it is: no answer is ever DUPLICATE_TOOL_CALL for
    a call whose tool never ran, and every tool runs exactly once (held creates and held completions
    are replayed, never re-run)."""
    rng = random.Random(19)
    for trial in range(3):
        data = tmp_path / f"trial-{trial}"
        data.mkdir()
        kill = _KillTrial(trial, data)
        boundary = kill.run(rng)
        assert kill.never_ran_duplicates == []
        assert {tcid: result.code for tcid, result in kill.answers.items() if not result.ok} == {}
        assert dict(kill.executor.runs) == dict.fromkeys(kill.ids, 1)
        assert boundary.pending_creates() == ()
        assert boundary.pending_completions() == ()
