"""A Jepsen-style workload: many workers, one store, faults, a recorded history (CIS-HIST-3).

:func:`run_workload` opens a few runs, then lets worker threads (and, for a Redis
store, worker processes) drive :class:`~invocation_store.boundary.ToolBoundary`
calls against one shared store: invocations whose tool_call_ids collide on
purpose, sweeps racing the workers' completions, progress reads, citations and
an occasional cancel. Every worker's store is wrapped in a
:class:`~invocation_store.history.HistoryRecorder`, so the history holds every
store operation the boundaries performed; check it with
:func:`~invocation_store.history.check_history_lines`.

Faults (Redis only, and only on a server the caller started, see
:class:`AofRedisServer`) run in a thread beside the workers: ``SCRIPT FLUSH``
(scripts must be reloaded: NOSCRIPT), ``DEBUG SLEEP`` (the server stalls past the
clients' socket timeout: redis-py retries, a write may land twice), ``CLIENT
KILL`` (connections dropped mid-command: writes are held by ``CLIENT PAUSE ...
WRITE`` while the workers' connections are killed) and a ``restart`` (the server killed with
SIGKILL and started again from its append-only file, ``appendfsync always``).
Operations a fault interrupts end as unknown outcomes in the history.

The clock is a fixed fake time shared by every worker: the store's decisions then
depend on the order of operations only, which is what linearizability judges.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import random
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import redis
from attrs import frozen
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from ..adapters import InvocationStore, RedisStore, StoreUnavailableError
from ..boundary import ToolBoundary, ToolRegistry, ToolSpec
from ..history import HistoryRecorder, HistoryWriter
from ..kernel import EvidenceStatus, Limits, Projection, RunContext, ToolCallEnvelope
from .redis_server import HOW_TO_GET_REDIS, RedisServerUnavailableError, find_redis_server

__all__ = [
    "FAULTS",
    "AofRedisServer",
    "Control",
    "Nemesis",
    "RedisOpener",
    "Workload",
    "fixed_clock",
    "redis_worker_options",
    "run_workload",
]

#: The faults :func:`run_workload` can inject into a Redis server.
FAULTS: Final = ("script-flush", "debug-sleep", "client-kill", "restart")
#: The fixed fake time of every workload operation (ms).
CLOCK_MS: Final = 1_700_000_000_000
_LIMITS: Final = Limits()
_OPENER: Final = 999
_FAULT_CLIENT: Final = "cis-fault-injector"
# The workload's boundaries log refusals and failures by the hundred: keep them quiet.
_QUIET: Final = logging.getLogger("invocation_store.testing.workload")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


@frozen(kw_only=True)
class Workload:
    """The shape of a workload: ``threads`` and ``processes`` workers, each ``steps`` boundary calls.

    ``runs`` runs, each with ``ids`` tool_call_ids that workers pick at random (so
    they collide) and a ``budget`` of tool calls smaller than the ids workers try;
    ``seed`` makes the choices repeatable (the interleaving is not).
    """

    threads: int = 4
    processes: int = 0
    steps: int = 40
    runs: int = 3
    ids: int = 6
    budget: int = 8
    seed: int = 14


def _registry() -> ToolRegistry:
    def execute(args: Any) -> str:
        time.sleep(random.random() * 0.002)  # noqa: S311 - jitter widens race windows, not security
        if args.get("mode") == "raise":
            raise RuntimeError("tool failed")
        return f"raw:{args.get('q')}"

    def project(raw: str, _args: Any) -> Projection:
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="found", scope="search")

    return ToolRegistry([ToolSpec(name="search", executor=execute, projector=project, timeout_ms=5_000)])


def _run_ids(workload: Workload) -> list[str]:
    return [f"run-{n}" for n in range(workload.runs)]


def _worker(store: InvocationStore, writer: HistoryWriter, process: int, workload: Workload) -> None:
    """One worker's boundary calls, recorded through its own HistoryRecorder."""
    rng = random.Random(workload.seed * 1_000 + process)  # noqa: S311 - repeatable choices, not security
    boundary = ToolBoundary(
        HistoryRecorder(store, writer, process), _registry(), limits=_LIMITS, logger=_QUIET
    )
    runs = _run_ids(workload)
    for _step in range(workload.steps):
        context = RunContext(run_id=rng.choice(runs))
        tool_call_id = f"call_{rng.randrange(workload.ids)}"
        roll = rng.random()
        try:
            if roll < 0.6:
                mode = "raise" if rng.random() < 0.1 else "ok"
                arguments = f'{{"q":"{tool_call_id}","mode":"{mode}"}}'
                envelope = ToolCallEnvelope(
                    run_id=context.run_id, tool_call_id=tool_call_id, tool_name="search", arguments=arguments
                )
                boundary.invoke(context, envelope)
            elif roll < 0.75:
                boundary.sweep_stale(context, 0)
            elif roll < 0.87:
                boundary.project_progress(context)
            elif roll < 0.99:
                boundary.cite(context, tool_call_id)
            else:
                boundary.cancel_run(context)
        except StoreUnavailableError:
            continue  # recorded as an unknown outcome; the worker goes on, as a harness would


def redis_worker_options(process: int) -> dict[str, Any]:
    """redis-py options of worker ``process``: short timeouts, so faults bite.

    Even workers retry (three times, as redis-py does by default: a write may reach
    the server twice); odd workers never retry (a timeout is an unknown outcome
    whose command may still run on the server later).
    """
    retries = 3 if process % 2 == 0 else 0
    return {
        "socket_timeout": 0.25,
        "socket_connect_timeout": 0.25,
        "retry": Retry(ExponentialBackoff(cap=0.05, base=0.005), retries),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }


def fixed_clock() -> int:
    """The workload's clock: :data:`CLOCK_MS`, always (a picklable function for worker processes)."""
    return CLOCK_MS


@frozen
class RedisOpener:
    """Opens worker ``process``'s store in a worker process: a RedisStore on ``url`` under ``prefix``."""

    url: str
    prefix: str

    def __call__(self, process: int) -> InvocationStore:
        """The worker's own client and store on the shared server and key prefix."""
        return RedisStore.from_url(
            self.url, prefix=self.prefix, clock=fixed_clock, **redis_worker_options(process)
        )


@frozen
class Control:
    """What a nemesis (a fault thread, :data:`Nemesis`) sees of a running workload.

    ``stop`` is set when the workers are done; ``counts`` counts injections by name;
    ``processes`` are the worker processes (a nemesis may kill them: ``killed`` holds
    their pids, so their exit is not a failure).
    """

    stop: threading.Event
    counts: dict[str, int]
    processes: list[Any]
    killed: set[int]


#: A fault thread's body: runs until ``control.stop`` is set, counting what it injected.
Nemesis = Callable[[Control], None]


def _process_main(
    opener: Callable[[int], InvocationStore], path: str, process: int, workload: Workload
) -> None:
    """A worker process: its own store (from the picklable ``opener``) on the shared data."""
    store = opener(process)
    writer = HistoryWriter(path)
    try:
        _worker(store, writer, process, workload)
    finally:
        writer.close()
        store.close()


def _inject(
    fault: str,
    admin: Callable[[], redis.Redis],
    server: AofRedisServer | None,
    stop: threading.Event,
    counts: dict[str, int],
) -> None:
    """Inject ``fault`` repeatedly until ``stop`` is set; count the injections that succeeded."""
    pauses = {"script-flush": 0.03, "debug-sleep": 0.3, "client-kill": 0.06, "restart": 0.5}
    while not stop.wait(pauses[fault]):
        try:
            if fault == "restart":
                if server is None:
                    raise ValueError("the restart fault needs an AofRedisServer")
                server.restart()
                counts[fault] += 1
                continue
            client = admin()
            # redis-py leaves execute_command untyped.
            command: Callable[..., Any] = client.execute_command
            # A restart never cuts another injection short: each one counted really happened.
            hold = server.lock if server is not None else contextlib.nullcontext()
            try:
                with hold:
                    if fault == "script-flush":
                        client.script_flush()
                    elif fault == "debug-sleep":
                        command("DEBUG", "SLEEP", "0.4")
                    else:
                        # Hold writes for a moment so that workers' scripts are sent but not
                        # run, then drop every worker connection (not the other injectors'):
                        # a connection killed mid-command, its reply never coming.
                        command("CLIENT", "PAUSE", "200", "WRITE")
                        time.sleep(0.02)
                        for entry in client.client_list(_type="normal"):
                            if entry.get("name") != _FAULT_CLIENT:
                                counts["clients-killed"] += int(command("CLIENT", "KILL", "ID", entry["id"]))
                        command("CLIENT", "UNPAUSE")
                    counts[fault] += 1
            finally:
                client.close()
        except (redis.ConnectionError, redis.TimeoutError):
            continue  # the server is restarting or stalled: try again later


def run_workload(
    path: str | os.PathLike[str],
    make_store: Callable[[int], InvocationStore],
    workload: Workload = Workload(),
    *,
    redis_url: str | None = None,
    redis_prefix: str | None = None,
    faults: Sequence[str] = (),
    server: AofRedisServer | None = None,
    process_store: Callable[[int], InvocationStore] | None = None,
    nemeses: Sequence[Nemesis] = (),
) -> dict[str, int]:
    """Run ``workload`` against the store ``make_store(process)`` builds; write the history to ``path``.

    Each thread worker gets its own store from ``make_store`` (they must share
    state: one MemoryStore, clients of one Redis with one prefix, one SQL database).
    Worker processes (``workload.processes``) open theirs with ``process_store``, a
    picklable callable (default for Redis: a :class:`RedisOpener` of ``redis_url`` and
    ``redis_prefix``). ``faults`` (from :data:`FAULTS`) need ``redis_url``; ``restart``
    needs ``server``. ``nemeses`` are other fault threads (any store), each given the
    workload's :class:`Control`. Returns how many times each fault was injected (and
    ``clients-killed``, and whatever the nemeses counted). Raises whatever a worker
    raised other than StoreUnavailableError, or RuntimeError for a worker process that
    failed without a nemesis killing it.
    """
    unknown = set(faults) - set(FAULTS)
    if unknown:
        raise ValueError(f"unknown faults: {sorted(unknown)}")
    if faults and (redis_url is None or redis_prefix is None):
        raise ValueError("Redis faults need redis_url and redis_prefix")
    if process_store is None and redis_url is not None and redis_prefix is not None:
        process_store = RedisOpener(redis_url, redis_prefix)
    if workload.processes and process_store is None:
        raise ValueError("worker processes need process_store (or redis_url and redis_prefix)")
    writer = HistoryWriter(path, _LIMITS, "invocation_store.testing workload")
    try:
        recorder = HistoryRecorder(make_store(_OPENER), writer, _OPENER)
        opener = ToolBoundary(recorder, _registry(), limits=_LIMITS, logger=_QUIET)
        for run_id in _run_ids(workload):
            opener.open_run(
                run_id,
                deadline_ms=CLOCK_MS + 3_600_000,
                ttl_ms=3_600_000,
                tool_call_budget=workload.budget,
                byte_budget=1_000_000,
            )
        errors: list[BaseException] = []

        def guarded(process: int) -> None:
            try:
                _worker(make_store(process), writer, process, workload)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                errors.append(exc)

        stop = threading.Event()
        counts = dict.fromkeys((*FAULTS, "clients-killed"), 0)
        url = redis_url or ""

        def admin() -> redis.Redis:
            return redis.Redis.from_url(url, socket_timeout=1.0, client_name=_FAULT_CLIENT)

        injectors = [
            threading.Thread(
                target=_inject,
                args=(
                    fault,
                    lambda: redis.Redis.from_url(url or "", socket_timeout=1.0),
                    server,
                    stop,
                    counts,
                ),
                daemon=True,
            )
            for fault in faults
        ]
        threads = [threading.Thread(target=guarded, args=(n,)) for n in range(workload.threads)]
        context = multiprocessing.get_context("spawn")
        processes = [
            context.Process(
                target=_process_main,
                args=(process_store, os.fspath(path), workload.threads + n, workload),
            )
            for n in range(workload.processes)
        ]
        control = Control(stop=stop, counts=counts, processes=processes, killed=set())
        injectors += [threading.Thread(target=nemesis, args=(control,), daemon=True) for nemesis in nemeses]
        for injector in injectors:
            injector.start()
        for thread in threads:
            thread.start()
        for process in processes:
            process.start()
        for thread in threads:
            thread.join()
        for process in processes:
            process.join()
        stop.set()
        for injector in injectors:
            injector.join()
        if errors:
            raise errors[0]
        failed = [p.exitcode for p in processes if p.exitcode != 0 and p.pid not in control.killed]
        if failed:
            raise RuntimeError(f"worker processes failed with exit codes {failed}")
        return counts
    finally:
        writer.close()


# ---------------------------------------------------------------------------
# A restartable private server with an append-only file


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _major_version(binary: str) -> int:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout  # noqa: S603
    for part in out.split():
        if part.startswith("v="):
            with contextlib.suppress(ValueError):
                return int(part[2:].split(".")[0])
    return 0


class AofRedisServer:
    """A private redis-server with ``appendonly yes``/``appendfsync always`` that can be restarted.

    Started on a free loopback port in a temporary directory; :meth:`restart` kills
    it with SIGKILL (no shutdown save: only what the AOF holds survives) and starts
    it again on the same port and directory. ``DEBUG`` is enabled for local clients
    on Redis >= 7 (``enable-debug-command local``). Use as a context manager; it is
    stopped (by its pid) on exit. Raises :class:`RedisServerUnavailableError`
    without a binary.
    """

    def __init__(self) -> None:
        binary = find_redis_server()
        if binary is None:
            raise RedisServerUnavailableError(f"no redis-server binary found: {HOW_TO_GET_REDIS}")
        self._binary = binary
        self._dir = tempfile.mkdtemp(prefix="cis-aof-")
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._debug = ["--enable-debug-command", "local"] if _major_version(binary) >= 7 else []
        self._process: subprocess.Popen[bytes] | None = None
        #: Held by :meth:`restart`; hold it to keep the server up meanwhile.
        self.lock = threading.RLock()
        self.restarts = 0

    def _start(self) -> None:
        args = [
            self._binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            self._dir,
            "--daemonize",
            "no",
            *self._debug,
        ]
        with open(Path(self._dir) / "redis.log", "ab") as log:
            self._process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            probe = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=0.5)
            with (
                contextlib.suppress(redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError),
                probe,
            ):
                if probe.ping():
                    return
            if self._process.poll() is not None:
                break
            time.sleep(0.02)
        raise RedisServerUnavailableError(f"redis-server with AOF did not start: {HOW_TO_GET_REDIS}")

    def _kill(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        self._process = None

    def restart(self) -> None:
        """Kill the server (SIGKILL) and start it again from its AOF on the same port."""
        with self.lock:
            self._kill()
            self._start()
            self.restarts += 1

    def __enter__(self) -> AofRedisServer:
        self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self._kill()
        for name in os.listdir(self._dir):
            with contextlib.suppress(OSError):
                target = Path(self._dir) / name
                if target.is_dir():
                    for inner in target.iterdir():
                        inner.unlink()
                    target.rmdir()
                else:
                    target.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(self._dir)


@contextlib.contextmanager
def aof_redis_server() -> Iterator[AofRedisServer]:
    """``with aof_redis_server() as server:`` a started :class:`AofRedisServer`."""
    with AofRedisServer() as server:
        yield server
