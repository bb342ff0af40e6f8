"""A private, throwaway PostgreSQL server for tests, the stateful suite and benchmarks.

:class:`PostgresServer` finds the server binaries (``initdb`` and ``postgres`` on
``PATH``, else in ``pg_config --bindir``, else the directory named by
``INVOCATION_STORE_PG_BINDIR``), creates a fresh data directory with ``initdb``
(trust authentication on loopback only, superuser ``cis``), and starts ``postgres``
itself as a child process on a free loopback port, with its socket in the data
directory. It is stopped by its pid (SIGINT: a fast shutdown; :meth:`PostgresServer.crash`
sends SIGKILL, as a power cut would leave it) and the directory removed. Nothing
else is touched: the machine's own PostgreSQL (port 5432) is never used.

PostgreSQL refuses to run as root. Run as root (a container, CI), the server runs as
the unprivileged user named by ``INVOCATION_STORE_PG_USER``, else ``postgres`` if that
user exists, else ``nobody``; the data directory is given to that user.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "HOW_TO_GET_POSTGRES",
    "PostgresServer",
    "PostgresUnavailableError",
    "find_postgres_bindir",
    "postgres_server",
]

#: What to tell a user who has no PostgreSQL server binaries.
HOW_TO_GET_POSTGRES: Final = (
    "install the PostgreSQL server (e.g. `apt-get install postgresql`, `brew install postgresql`) "
    "so that initdb and postgres are on PATH or in `pg_config --bindir`"
)
_HOST: Final = "127.0.0.1"
_SUPERUSER: Final = "cis"


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL server binaries were found, or the server did not start; the message says why."""


def find_postgres_bindir() -> str | None:
    """The directory of ``initdb`` and ``postgres``: ``$INVOCATION_STORE_PG_BINDIR``, PATH, ``pg_config``."""
    chosen = os.environ.get("INVOCATION_STORE_PG_BINDIR")
    candidates = [chosen] if chosen else []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).resolve().parent))
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            found = subprocess.run(  # noqa: S603 - a fixed argument list, no shell
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            )
            candidates.append(found.stdout.strip())
    for directory in candidates:
        if all(os.access(Path(directory) / name, os.X_OK) for name in ("initdb", "postgres")):
            return directory
    return None


def _server_user() -> str | None:
    """The unprivileged user to run the server as, when we are root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in (os.environ.get("INVOCATION_STORE_PG_USER"), "postgres", "nobody"):
        if name:
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                return name
    raise PostgresUnavailableError("running as root and no unprivileged user to run PostgreSQL as")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        return int(sock.getsockname()[1])


def _main_thread_on_linux() -> bool:
    return sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    # PR_SET_PDEATHSIG (1): the server gets SIGTERM if the process that started it dies.
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


class PostgresServer:
    """A private PostgreSQL server: ``initdb`` once, then :meth:`start`, :meth:`stop`, :meth:`crash`.

    ``settings``: extra ``-c name=value`` server settings (e.g.
    ``("synchronous_standby_names=standby",)``). ``standby_of``: make this server a
    streaming standby of that (running) one, by ``pg_basebackup``; ``name`` is its
    ``cluster_name``, the name its primary's ``synchronous_standby_names`` lists.
    ``dsn``: a libpq connection string
    for the ``postgres`` database as the superuser. Use it as a context manager: the
    server is started on entry and stopped, and its directory removed, on exit.
    Raises :class:`PostgresUnavailableError` without binaries or when it does not start.
    """

    def __init__(
        self,
        settings: Sequence[str] = (),
        *,
        startup_timeout_s: float = 30.0,
        standby_of: PostgresServer | None = None,
        name: str = "cis",
    ) -> None:
        bindir = find_postgres_bindir()
        if bindir is None:
            raise PostgresUnavailableError(f"no PostgreSQL server binaries: {HOW_TO_GET_POSTGRES}")
        self.bindir = Path(bindir)
        self.settings = tuple(settings)
        self.startup_timeout_s = startup_timeout_s
        self.user = _server_user()
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._root = Path(tempfile.mkdtemp(prefix="cis-postgres-"))
        self.data_dir = self._root / "data"
        self.name = name
        if standby_of is None:
            self._initdb()
        else:
            self._base_backup(standby_of)

    @property
    def dsn(self) -> str:
        """A libpq connection string for the server's ``postgres`` database (superuser ``cis``, trust)."""
        return f"host={_HOST} port={self.port} user={_SUPERUSER} dbname=postgres"

    def _initdb(self) -> None:
        if self.user:
            os.chown(self._root, pwd.getpwnam(self.user).pw_uid, -1)
        args = [
            str(self.bindir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            _SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-instructions",
            "--no-sync",  # a test cluster: a crashed server (not host) keeps the page cache
        ]
        done = subprocess.run(  # noqa: S603 - a fixed argument list, no shell
            args, capture_output=True, check=False, timeout=120, user=self.user
        )
        if done.returncode != 0:
            raise PostgresUnavailableError(f"initdb failed with exit code {done.returncode}")

    def _base_backup(self, primary: PostgresServer) -> None:
        """A streaming standby of ``primary``: ``pg_basebackup -R`` (standby.signal, primary_conninfo)."""
        if self.user:
            os.chown(self._root, pwd.getpwnam(self.user).pw_uid, -1)
        args = [
            str(self.bindir / "pg_basebackup"),
            "-h",
            _HOST,
            "-p",
            str(primary.port),
            "-U",
            _SUPERUSER,
            "-D",
            str(self.data_dir),
            "-R",
            "-X",
            "stream",
            "--no-sync",
        ]
        done = subprocess.run(  # noqa: S603 - a fixed argument list, no shell
            args, capture_output=True, check=False, timeout=120, user=self.user
        )
        if done.returncode != 0:
            raise PostgresUnavailableError(f"pg_basebackup failed with exit code {done.returncode}")

    def start(self) -> None:
        """Start the server on its port and wait until it accepts connections."""
        args = [
            str(self.bindir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-c",
            f"listen_addresses={_HOST}",
            "-c",
            f"unix_socket_directories={self.data_dir}",
            "-c",
            "max_connections=200",
            "-c",
            f"cluster_name={self.name}",  # a standby's application_name on its primary
        ]
        for setting in self.settings:
            args += ["-c", setting]
        log = (self._root / "server.log").open("ab")
        self.process = subprocess.Popen(  # noqa: S603 - a fixed argument list, no shell
            args,
            stdout=log,
            stderr=log,
            # PR_SET_PDEATHSIG fires when the starting *thread* ends: only from the main thread
            # (a restart from a fault thread must outlive that thread).
            preexec_fn=_die_with_parent if _main_thread_on_linux() else None,  # noqa: PLW1509
            user=self.user,
        )
        log.close()
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PostgresUnavailableError(f"postgres exited with code {self.process.returncode}")
            if self._accepts():
                return
            time.sleep(0.05)
        self.stop()
        raise PostgresUnavailableError("postgres did not accept connections in time")

    def _accepts(self) -> bool:
        import psycopg  # noqa: PLC0415 - the postgres extra

        try:
            with psycopg.connect(self.dsn, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """Stop the server by its pid: SIGINT (a fast shutdown), SIGKILL if it lingers."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def crash(self) -> None:
        """Kill the server and its backends by pid with SIGKILL, as a power cut would (no shutdown)."""
        process, self.process = self.process, None
        if process is None:
            return
        children = _children(process.pid)
        process.kill()
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        process.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(Path(f"/proc/{child}").exists() for child in children):
            time.sleep(0.02)
        (self.data_dir / "postmaster.pid").unlink(missing_ok=True)

    def restart(self, *, crash: bool = True) -> None:
        """Crash (or stop) the server and start it again on the same port and data: recovery runs."""
        if crash:
            self.crash()
        else:
            self.stop()
        for attempt in range(5):  # a crashed server's last backends may hold its lock for a moment
            try:
                self.start()
                break
            except PostgresUnavailableError:
                if attempt == 4:
                    raise
                time.sleep(0.5)
        self.restarts += 1

    def __enter__(self) -> PostgresServer:
        try:
            self.start()
        except BaseException:
            shutil.rmtree(self._root, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self._root, ignore_errors=True)


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux ``/proc``; empty elsewhere)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(child) for child in text.split()]


@contextlib.contextmanager
def postgres_server(settings: Sequence[str] = ()) -> Iterator[PostgresServer]:
    """Run a private PostgreSQL server for the ``with`` block (see :class:`PostgresServer`)."""
    with PostgresServer(settings) as server:
        yield server
