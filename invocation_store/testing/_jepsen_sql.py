"""The Jepsen-style workload on the SQL stores: worker openers and nemeses (CIS-HIST-3).

Worker processes open their own store from a picklable opener (:class:`SqliteOpener`,
:class:`PostgresOpener`); the nemeses are fault threads for
:func:`~invocation_store.testing._jepsen.run_workload`:

- :func:`kill_workers`: SIGKILL worker processes mid-workload (SQLite: a writer dies
  inside or between transactions; its in-flight operation ends as an unknown outcome);
- :func:`terminate_backends`: ``pg_terminate_backend`` of the workers' connections,
  mid-transaction (the store retries on a fresh connection: the transaction runs
  again, idempotently);
- :func:`restart_postgres`: the private server crashed (SIGKILL) and recovered.

Every store runs on the workload's fixed clock, so linearizability is judged on the
order of operations alone.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time

from attrs import frozen

from ..adapters import InvocationStore
from ._jepsen import Control, Nemesis, fixed_clock
from .postgres_server import PostgresServer

__all__ = [
    "WORKER_APPLICATION",
    "PostgresOpener",
    "SqliteOpener",
    "kill_workers",
    "restart_postgres",
    "terminate_backends",
]

#: The ``application_name`` of every workload connection (what :func:`terminate_backends` kills).
WORKER_APPLICATION = "cis-worker"


@frozen
class SqliteOpener:
    """``opener(process)`` -> a SqliteStore on the shared file ``path``, on the workload's clock."""

    path: str

    def __call__(self, process: int) -> InvocationStore:
        """The worker's own store (its own connections) on the shared file."""
        from ..adapters.sqlite import SqliteStore  # noqa: PLC0415 - in the worker process

        return SqliteStore(self.path, clock=fixed_clock)


@frozen
class PostgresOpener:
    """``opener(process)`` -> a PostgresStore on ``dsn`` under the tables ``prefix``, on the fixed clock."""

    dsn: str
    prefix: str

    def __call__(self, process: int) -> InvocationStore:
        """The worker's own pool (two connections, named :data:`WORKER_APPLICATION`) and store."""
        from ..adapters.postgres import PostgresStore  # noqa: PLC0415 - the postgres extra

        return PostgresStore.from_dsn(
            self.dsn, max_size=2, prefix=self.prefix, clock=fixed_clock, application_name=WORKER_APPLICATION
        )


def _count(control: Control, name: str, by: int = 1) -> None:
    control.counts[name] = control.counts.get(name, 0) + by


def kill_workers(*, after_s: float = 0.8, most: int = 1, seed: int = 0) -> Nemesis:
    """A nemesis that SIGKILLs worker processes ``after_s`` seconds after each started, ``most`` in all."""
    rng = random.Random(seed)  # noqa: S311 - repeatable choices, not security

    def nemesis(control: Control) -> None:
        first_seen: dict[int, float] = {}
        while len(control.killed) < most and not control.stop.wait(0.02):
            now = time.monotonic()
            for process in control.processes:
                if process.pid is not None:
                    first_seen.setdefault(process.pid, now)
            running = [
                p
                for p in control.processes
                if p.pid is not None and p.exitcode is None and now - first_seen[p.pid] >= after_s
            ]
            if not running:
                continue
            victim = rng.choice(running)
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim.pid, signal.SIGKILL)
                control.killed.add(victim.pid)
                _count(control, "kill-9")

    return nemesis


def terminate_backends(dsn: str, *, every_s: float = 0.05) -> Nemesis:
    """A nemesis killing the workers' connections (``pg_terminate_backend``) every ``every_s`` seconds."""
    import psycopg  # noqa: PLC0415 - the postgres extra

    def nemesis(control: Control) -> None:
        while not control.stop.wait(every_s):
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn,
            ):
                row = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (WORKER_APPLICATION,),
                ).fetchone()
                _count(control, "connections-killed", int(row[0]) if row else 0)
                _count(control, "connection-kill")

    return nemesis


def restart_postgres(server: PostgresServer, *, every_s: float = 1.0, most: int = 3) -> Nemesis:
    """A nemesis that crashes (SIGKILL) and restarts the private ``server`` every ``every_s`` seconds,
    ``most`` times (a connection pool needs about a second to reconnect after each)."""

    def nemesis(control: Control) -> None:
        for _restart in range(most):
            if control.stop.wait(every_s):
                return
            try:
                server.restart(crash=True)
            except Exception:  # noqa: BLE001 - counted: the test fails on a server that did not come back
                _count(control, "restart-failed")
                return
            _count(control, "restart")

    return nemesis
