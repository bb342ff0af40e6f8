"""Redis store benchmarks: ratios measured in one run, on one machine, against one server.

Run: ``.venv/bin/python benchmarks/bench_redis.py [--rounds 7] [--ops 300] [--rtt-ms 0.2,1]``.

Regimes. The targets of issue 3 compare round trips, so they are measured twice:

- **loopback**: a private redis-server on 127.0.0.1 (or ``REDIS_URL``, where only keys
  under a fresh prefix are written and deleted at the end; that server is never
  flushed). A round trip here costs little more than the CPU on both ends, so this
  regime shows what each side's CPU costs (client CPU and server CPU are printed).
- **RTT r ms** (default 0.2 and 1, ``--rtt-ms``; ``--rtt-ms none`` skips): the same
  comparisons against a redis-server placed behind an emulated network delay of r/2
  each way. With root, iproute2 and the kernel's netem qdisc: a network namespace, a
  veth pair with 10.213.x.1/30 (this side) and 10.213.x.2/30 (the namespace) that only
  joins the two namespaces of this machine, ``tc qdisc add dev <veth> root netem delay
  <r/2>ms`` on both ends, redis-server inside the namespace bound to its veth address,
  the client here; everything is torn down at the end, on failure and on Ctrl-C (the
  loopback device and any Redis on 127.0.0.1:6379 are never touched). That path
  changes the host's network configuration for the run, so it is opt-in (``--emulation
  netem`` or ``auto``); the default, ``--emulation relay``, is a user-space relay, and
  ``auto`` falls back to it when netem is missing (a kernel built without
  ``sch_netem``, as on the machine of benchmarks/README.md): a relay on 127.0.0.1 (a
  separate process, one thread per direction, timer slack 1 us) that forwards every
  chunk a fixed delay after it arrived, with a private loopback redis-server behind
  it. The relay's own forwarding costs time, so its delay is calibrated until a PING
  round trip through it measures about r; ``--emulation netem`` skips the section
  instead. Either way the PING round trip measured during the run is printed with the
  figures.

Comparisons, in every regime, interleaved round by round (ours, seed, PINGs, rotating
the order), each figure the median of per-round values:

(a) One successful invocation of a no-op tool through RedisStore (create, the kernel's
    raw + projection transitions, complete: 2 round trips) against the seed's protocol
    (``SET NX PX`` of the JSON record, then ``GET``, ``PTTL``, ``SET PX`` of the updated
    JSON: 4 round trips). Reported as our throughput / the seed's, on the time of the
    two store calls (the kernel's transitions are the boundary's work whatever the
    store; the ratio including them is printed too); target >= 1.8.
(b) The same invocation (store calls) against two redis-py ``PING`` s on the same
    connection, the physical floor of two round trips; target <= 1.3.
(c) Loopback only: completing a record with a 1 MiB raw response against a plain
    ``SET`` of the same 1 MiB string to a new key (storing a raw response always takes
    new server memory; overwriting one key reuses it and is also printed); target <= 1.5.

What this script does not show: (a) compares the *bare* stores, while users run the
boundary, and its "floor" is two PINGs on an unpinned client and server.
``bench_invocation.py`` measures the invocation through ``ToolBoundary`` against two
``EVALSHA`` with the store's argument sizes, with the seed's protocol behind the same
boundary, for both CPU placements; read its figures for the boundary's cost.

Each figure is printed as a ``FIGURE`` line (collected by ``benchmarks/run_all.py``).
``CIS_BENCH_QUICK=1`` runs fewer rounds. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType

import redis

from invocation_store.adapters import RedisStore
from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    EvidenceStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    transition,
)
from invocation_store.testing.redis_server import HOW_TO_GET_REDIS, find_redis_server, redis_server

LIMITS = Limits()
RUN = "bench-run"
ONE_MIB = 1024 * 1024
#: Wall time one round of the RTT comparisons aims at (ops per round follow from it).
ROUND_TARGET_S = 0.25


# -- servers ---------------------------------------------------------------------------


@dataclass
class Server:
    """Where the bench connects: URL, a label, and the server's pid when it runs here."""

    url: str
    label: str
    pid: int | None = None
    notes: list[str] = field(default_factory=list)


class EmulationUnavailableError(RuntimeError):
    """The requested network emulation cannot run here; the message says why."""


def _server_pid(url: str) -> int | None:
    with redis.Redis.from_url(url) as client:
        pid = client.info("server").get("process_id")
    return pid if isinstance(pid, int) else None


@contextlib.contextmanager
def loopback_server() -> Iterator[Server]:
    """``REDIS_URL`` when set, else a private redis-server on 127.0.0.1."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield Server(url, "REDIS_URL")
        return
    with redis_server() as private:
        yield Server(private, "private redis-server on 127.0.0.1", _server_pid(private))


def _run(*command: str) -> None:
    """Run one iproute2 command; raise EmulationUnavailableError with its error text."""
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=20)
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise EmulationUnavailableError(f"`{' '.join(command)}` failed: {message[0] if message else '?'}")


def _quiet(*command: str) -> None:
    subprocess.run(command, check=False, capture_output=True, timeout=20)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_namespaces(ip: str) -> None:
    """Delete namespaces (and veths) that an earlier, killed run of this bench left behind."""
    listed = subprocess.run([ip, "netns", "list"], check=False, capture_output=True, text=True, timeout=20)
    for match in re.finditer(r"^cisbench(\d+)\b", listed.stdout, re.MULTILINE):
        pid = int(match.group(1))
        if pid != os.getpid() and not _pid_alive(pid):
            _quiet(ip, "netns", "del", f"cisbench{pid}")
            _quiet(ip, "link", "del", f"cisb{pid}h")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _wait_for_ping(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise EmulationUnavailableError("redis-server exited while starting in the namespace")
            with contextlib.suppress(redis.RedisError, OSError):
                if client.ping():
                    return
            time.sleep(0.05)
    finally:
        client.close()
    raise EmulationUnavailableError("redis-server in the namespace did not answer PING")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)


@contextlib.contextmanager
def netem_server(rtt_ms: float) -> Iterator[Server]:
    """A redis-server in a fresh network namespace, RTT ``rtt_ms`` away through netem.

    Raises :class:`EmulationUnavailableError` (after undoing what it did) when root,
    iproute2, the netem qdisc or redis-server is missing.
    """
    if os.geteuid() != 0:
        raise EmulationUnavailableError("needs root (network namespaces and tc)")
    ip, tc = shutil.which("ip"), shutil.which("tc")
    if not ip or not tc:
        raise EmulationUnavailableError(
            "iproute2 is not installed (`apt-get update && apt-get install -y iproute2`)"
        )
    binary = find_redis_server()
    if binary is None:
        raise EmulationUnavailableError(f"no redis-server: {HOW_TO_GET_REDIS}")
    _remove_stale_namespaces(ip)
    pid = os.getpid()
    namespace, host_if, ns_if = f"cisbench{pid}", f"cisb{pid}h", f"cisb{pid}n"
    subnet = f"10.213.{pid % 250}"
    host_addr, ns_addr, port = f"{subnet}.1", f"{subnet}.2", 16379
    delay = f"{rtt_ms / 2:g}ms"
    process: subprocess.Popen[bytes] | None = None
    workdir = tempfile.mkdtemp(prefix="cis-bench-netns-")
    try:
        _run(ip, "netns", "add", namespace)
        _run(ip, "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _run(ip, "link", "set", ns_if, "netns", namespace)
        _run(ip, "addr", "add", f"{host_addr}/30", "dev", host_if)
        _run(ip, "link", "set", host_if, "up")
        _run(ip, "-n", namespace, "addr", "add", f"{ns_addr}/30", "dev", ns_if)
        _run(ip, "-n", namespace, "link", "set", ns_if, "up")
        try:
            _run(tc, "qdisc", "add", "dev", host_if, "root", "netem", "delay", delay)
            _run(
                ip,
                "netns",
                "exec",
                namespace,
                tc,
                "qdisc",
                "add",
                "dev",
                ns_if,
                "root",
                "netem",
                "delay",
                delay,
            )
        except EmulationUnavailableError as exc:
            raise EmulationUnavailableError(f"no netem qdisc in this kernel (sch_netem): {exc}") from None
        # The server listens on the namespace's veth address only, reachable from this
        # machine alone; protected mode is off because that peer is not a loopback address.
        process = subprocess.Popen(
            [
                *(ip, "netns", "exec", namespace, binary, "--bind", ns_addr, "--port", str(port)),
                *("--save", "", "--appendonly", "no", "--protected-mode", "no", "--dir", workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - one prctl call before exec
        )
        url = f"redis://{ns_addr}:{port}/0"
        _wait_for_ping(url, process, 10.0)
        yield Server(
            url,
            f"redis-server in netns {namespace} behind netem, {delay} each way",
            _server_pid(url),
            [f"veth {host_if} {host_addr} <-> {ns_if} {ns_addr} (namespace {namespace})"],
        )
    finally:
        if process is not None:
            _stop(process)
        _quiet(ip, "netns", "del", namespace)
        _quiet(ip, "link", "del", host_if)  # gone with the namespace already, normally
        shutil.rmtree(workdir, ignore_errors=True)


def _relay_main(listen_port: int, target_port: int, one_way_s: float) -> None:
    """Forward TCP 127.0.0.1:listen_port <-> 127.0.0.1:target_port, each chunk ``one_way_s`` late."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK: 1 us, not 50 us
    server = socket.create_server(("127.0.0.1", listen_port))
    print(f"READY {server.getsockname()[1]}", flush=True)

    def pump(source: socket.socket, sink: socket.socket) -> None:
        # One thread per direction: a command and its reply are single chunks here
        # (one request in flight), so "sleep until arrival + delay, then send" delays
        # every chunk by the one-way delay with one wake-up per hop.
        def forward() -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(1 << 16):
                    due = time.perf_counter() + one_way_s
                    while (wait := due - time.perf_counter()) > 0:
                        time.sleep(wait)
                    sink.sendall(data)
                sink.shutdown(socket.SHUT_WR)

        threading.Thread(target=forward, daemon=True).start()

    while True:
        downstream, _ = server.accept()
        upstream = socket.create_connection(("127.0.0.1", target_port))
        for sock in (downstream, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pump(downstream, upstream)
        pump(upstream, downstream)


def _ping_rtt(url: str, count: int = 300) -> float:
    """Median seconds of one PING on a fresh connection to ``url``."""
    with redis.Redis.from_url(url) as client:
        client.ping()
        times = []
        for _ in range(count):
            start = time.perf_counter()
            client.ping()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def _start_relay(target_port: int, one_way_s: float) -> tuple[subprocess.Popen[bytes], str]:
    relay = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve-relay", f"{target_port}:{one_way_s!r}"],
        stdout=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - one prctl call before exec
    )
    assert relay.stdout is not None
    line = relay.stdout.readline().decode().split()
    if len(line) != 2 or line[0] != "READY":
        _stop(relay)
        raise EmulationUnavailableError("the delay relay did not start")
    return relay, f"redis://127.0.0.1:{line[1]}/0"


@contextlib.contextmanager
def relay_server(rtt_ms: float) -> Iterator[Server]:
    """A private loopback redis-server behind a user-space delay relay, PING RTT about ``rtt_ms``.

    The relay's own forwarding costs time too, so the one-way delay starts at
    ``rtt_ms / 2`` and is corrected (up to three times) towards a PING round trip of
    ``rtt_ms``; the run uses the closest; the delay and the RTT measured are printed.
    """
    target = rtt_ms / 1000
    with redis_server() as private:
        target_port = redis.connection.parse_url(private)["port"]
        one_way = target / 2
        relay, url = _start_relay(target_port, one_way)
        try:
            measured = _ping_rtt(url)
            best = (abs(measured - target), one_way, measured)
            for _ in range(3):
                if best[0] <= target * 0.05:
                    break
                one_way = max(0.0, one_way + (target - measured) / 2)
                _stop(relay)
                relay, url = _start_relay(target_port, one_way)
                measured = _ping_rtt(url)
                best = min(best, (abs(measured - target), one_way, measured))
            if best[1] != one_way:
                _stop(relay)
                relay, url = _start_relay(target_port, best[1])
            _, one_way, measured = best
            yield Server(
                url,
                f"private redis-server on 127.0.0.1 behind a user-space relay, {one_way * 1e6:.0f} us "
                f"each way (PING round trip before the run {measured * 1e6:.0f} us)",
                _server_pid(private),
            )
        finally:
            _stop(relay)


# -- the work measured -----------------------------------------------------------------


class Bench:
    """Everything a round needs: one client, one store, counters for unique ids."""

    def __init__(self, server: Server) -> None:
        self.prefix = f"cis-bench-{secrets.token_hex(4)}"
        self.client = redis.Redis.from_url(server.url)
        self.store = RedisStore(self.client, prefix=self.prefix)
        self.counter = 0
        self._server_cpu = _schedstat_reader(server.pid)
        now = self.store.now_ms()
        opened = self.store.open_run(
            RUN,
            deadline_ms=now + 3_600_000,
            ttl_ms=600_000,
            tool_call_budget=10**12,
            byte_budget=10**15,
        )
        assert not isinstance(opened, str), opened

    def server_cpu_s(self) -> float | None:
        """CPU seconds the server's main thread has used so far (None when it runs elsewhere)."""
        return None if self._server_cpu is None else self._server_cpu()

    def next_id(self) -> str:
        self.counter += 1
        return f"call_{self.counter}"

    def request(self) -> AdmissionRequest:
        return AdmissionRequest(
            run_id=RUN,
            tool_call_id=self.next_id(),
            tool_name="noop",
            request_json='{"query": "weather in Paris"}',
            invocation_token=secrets.token_hex(8),
        )

    def create(self) -> CanonicalRecord:
        result = self.store.create(self.request(), LIMITS)
        assert isinstance(result, Admission), result
        return result.record

    def finish(self, record: CanonicalRecord, raw: str) -> CanonicalRecord:
        """The kernel's READY record for ``raw`` (what the boundary computes before complete)."""
        now = self.store.now_ms()
        with_raw = transition(record, RawReceived(raw_response=raw, now_ms=now), LIMITS)
        assert isinstance(with_raw, CanonicalRecord)
        projection = Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content="21 C", scope="Paris")
        done = transition(with_raw, ProjectionReceived(projection=projection, now_ms=now), LIMITS)
        assert isinstance(done, CanonicalRecord)
        return done

    def invocation(self) -> tuple[float, float]:
        """One successful no-op invocation: create, kernel transitions, complete.

        Returns (wall seconds, client CPU seconds) spent in the two store calls alone.
        """
        request = self.request()
        wall, cpu = time.perf_counter(), time.thread_time()
        admitted = self.store.create(request, LIMITS)
        wall_created, cpu_created = time.perf_counter(), time.thread_time()
        assert isinstance(admitted, Admission), admitted
        record = admitted.record
        done = self.finish(record, '{"temp": 21}')
        wall_decided, cpu_decided = time.perf_counter(), time.thread_time()
        stored = self.store.complete(record, done)
        wall_end, cpu_end = time.perf_counter(), time.thread_time()
        assert stored is done, stored
        return (wall_created - wall) + (wall_end - wall_decided), (cpu_created - cpu) + (
            cpu_end - cpu_decided
        )

    def seed_invocation(self) -> None:
        """The seed's protocol: SET NX PX, then GET, PTTL, SET PX of the whole JSON record."""
        client = self.client
        key = f"{self.prefix}:seed:{self.next_id()}"
        now = self.store.now_ms()
        record = {
            "runId": RUN,
            "toolCallId": key,
            "toolName": "noop",
            "status": "PROJECTING",
            "request": '{"query": "weather in Paris"}',
            "createdAt": now,
            "updatedAt": now,
        }
        assert client.set(key, json.dumps(record), nx=True, px=600_000)
        stored = client.get(key)
        assert stored is not None
        remaining = client.pttl(key)
        updated = json.loads(stored)
        updated.update(
            status="READY",
            evidence="EVIDENCE_FOUND",
            raw='{"temp": 21}',
            agentResult="21 C",
            scope="Paris",
            updatedAt=self.store.now_ms(),
        )
        assert client.set(key, json.dumps(updated), px=max(int(remaining), 1))

    def two_pings(self) -> None:
        self.client.ping()
        self.client.ping()

    def drop_big_keys(self) -> None:
        """Delete the raw responses and plain SET keys written so far."""
        for pattern in (f"{self.prefix}:plain:*", f"{self.prefix}:*:raw:*"):
            keys = list(self.client.scan_iter(match=pattern, count=1000))
            if keys:
                self.client.unlink(*keys)

    def close(self) -> None:
        keys = list(self.client.scan_iter(match=f"{self.prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            self.client.unlink(*keys[start : start + 500])
        self.client.close()


def _schedstat_reader(pid: int | None) -> Callable[[], float] | None:
    """CPU time of a local process's main thread (``/proc/<pid>/task/<pid>/schedstat``), in seconds."""
    if pid is None:
        return None
    path = f"/proc/{pid}/task/{pid}/schedstat"
    if not os.path.exists(path):
        return None

    def read() -> float:
        with open(path, encoding="ascii") as stats:
            return int(stats.read().split()[0]) / 1e9

    return read


# -- measuring -------------------------------------------------------------------------


@dataclass
class Sample:
    """Per-operation means of one batch: wall, client CPU and server CPU seconds."""

    wall: float
    cpu: float
    server: float | None
    store_wall: float = 0.0
    store_cpu: float = 0.0


def _batch(bench: Bench, operation: Callable[[], object], ops: int) -> Sample:
    server = bench.server_cpu_s()
    wall, cpu = time.perf_counter(), time.thread_time()
    store_wall = store_cpu = 0.0
    for _ in range(ops):
        spent = operation()
        if isinstance(spent, tuple):
            store_wall += spent[0]
            store_cpu += spent[1]
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    after = bench.server_cpu_s()
    used = None if server is None or after is None else (after - server) / ops
    return Sample(wall / ops, cpu / ops, used, store_wall / ops, store_cpu / ops)


@dataclass
class RoundTrips:
    """Medians over the rounds of one regime."""

    ours: Sample
    seed: Sample
    pings: Sample
    throughput_ratio: float  # seed time / our store-call time, per round
    throughput_ratio_full: float  # the same with the kernel transitions
    ping_ratio: float  # our store-call time / two PINGs, per round
    ping_rtt: float  # one PING, seconds
    rounds: int
    ops: int


def _median_sample(samples: list[Sample]) -> Sample:
    servers = [sample.server for sample in samples if sample.server is not None]
    return Sample(
        statistics.median(sample.wall for sample in samples),
        statistics.median(sample.cpu for sample in samples),
        statistics.median(servers) if servers else None,
        statistics.median(sample.store_wall for sample in samples),
        statistics.median(sample.store_cpu for sample in samples),
    )


def measure_round_trips(bench: Bench, rounds: int, ops: int) -> RoundTrips:
    """(a) and (b): ours, the seed and two PINGs, interleaved, the order rotating per round."""
    kinds: list[tuple[str, Callable[[], object]]] = [
        ("ours", bench.invocation),
        ("seed", bench.seed_invocation),
        ("pings", bench.two_pings),
    ]
    samples: dict[str, list[Sample]] = {name: [] for name, _ in kinds}
    ratios: list[float] = []
    full_ratios: list[float] = []
    ping_ratios: list[float] = []
    for index in range(rounds):
        order = kinds[index % 3 :] + kinds[: index % 3]
        got = {name: _batch(bench, operation, ops) for name, operation in order}
        for name, sample in got.items():
            samples[name].append(sample)
        ratios.append(got["seed"].wall / got["ours"].store_wall)
        full_ratios.append(got["seed"].wall / got["ours"].wall)
        ping_ratios.append(got["ours"].store_wall / got["pings"].wall)
    pings = _median_sample(samples["pings"])
    return RoundTrips(
        ours=_median_sample(samples["ours"]),
        seed=_median_sample(samples["seed"]),
        pings=pings,
        throughput_ratio=statistics.median(ratios),
        throughput_ratio_full=statistics.median(full_ratios),
        ping_ratio=statistics.median(ping_ratios),
        ping_rtt=pings.wall / 2,
        rounds=rounds,
        ops=ops,
    )


def _us(seconds: float | None) -> str:
    return "      -" if seconds is None else f"{seconds * 1e6:7.1f}"


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def _row(label: str, wall: float, cpu: float, server: float | None) -> None:
    print(f"    {label:40s} {_us(wall)}      {_us(cpu)}      {_us(server)}")


def report_round_trips(name: str, result: RoundTrips) -> None:
    ours, seed, pings = result.ours, result.seed, result.pings
    print(f"    {result.rounds} rounds x {result.ops} ops; PING round trip {result.ping_rtt * 1e6:.1f} us")
    print(f"    {'':40s} wall us/op  client CPU us  server CPU us")
    _row("seed: SET NX PX, GET, PTTL, SET PX", seed.wall, seed.cpu, seed.server)
    _row("ours: create + complete", ours.store_wall, ours.store_cpu, None)
    _row("ours: with the kernel transitions", ours.wall, ours.cpu, ours.server)
    _row("two PINGs", pings.wall, pings.cpu, pings.server)
    ratio, ping_ratio = result.throughput_ratio, result.ping_ratio
    if name.endswith(")"):  # "RTT r ms (kind)": the nominal RTT, and the PING measured
        name = f"{name[:-1]}; PING {result.ping_rtt * 1e6:.0f} us)"
    print(
        f"    (a) throughput ours/seed = {ratio:.2f}x (target >= 1.8x: {_verdict(ratio >= 1.8)}); "
        f"{result.throughput_ratio_full:.2f}x with the kernel transitions"
    )
    print(
        f"    (b) invocation / two PINGs = {ping_ratio:.2f}x (target <= 1.3x: {_verdict(ping_ratio <= 1.3)})"
    )
    print(
        f"FIGURE redis {name}: throughput ours/seed {ratio:.2f}x (target >= 1.8x: {_verdict(ratio >= 1.8)}); "
        f"seed {seed.wall * 1e6:.1f} us/op, ours {ours.store_wall * 1e6:.1f} us/op"
    )
    print(
        f"FIGURE redis {name}: invocation / two PINGs {ping_ratio:.2f}x (target <= 1.3x: "
        f"{_verdict(ping_ratio <= 1.3)}); {ours.store_wall * 1e6:.1f} us vs {pings.wall * 1e6:.1f} us"
    )


def report_cpu_bound(result: RoundTrips) -> None:
    """Why loopback is CPU bound: where the wall time of each side goes."""
    ours, seed, pings = result.ours, result.seed, result.pings
    print("    where the loopback time goes (per operation):")
    for label, wall, cpu, server in (
        ("seed", seed.wall, seed.cpu, seed.server),
        ("ours (store calls)", ours.store_wall, ours.store_cpu, None),
        ("ours (whole invocation)", ours.wall, ours.cpu, ours.server),
        ("two PINGs", pings.wall, pings.cpu, pings.server),
    ):
        share = "" if server is None else f", server CPU {server * 1e6:.0f} us ({server / wall:.0%})"
        client = f"client CPU {cpu * 1e6:.0f} us ({cpu / wall:.0%})"
        print(f"      {label:24s} wall {wall * 1e6:6.0f} us: {client}{share}")


def _time_prepared(prepare: Callable[[], object], operation: Callable[[object], None], ops: int) -> float:
    """Seconds per ``operation``, excluding ``prepare`` (run untimed before each call)."""
    total = 0.0
    for _ in range(ops):
        argument = prepare()
        start = time.perf_counter()
        operation(argument)
        total += time.perf_counter() - start
    return total / ops


def _time(operation: Callable[[], object], ops: int) -> float:
    start = time.perf_counter()
    for _ in range(ops):
        operation()
    return (time.perf_counter() - start) / ops


def measure_big(bench: Bench, rounds: int, ops: int) -> None:
    """(c): completing with a 1 MiB raw response vs a plain SET of the same string."""
    big = "x" * ONE_MIB

    def prepare() -> object:
        record = bench.create()
        return record, bench.finish(record, big)

    def complete(prepared: object) -> None:
        record, done = prepared  # type: ignore[misc]
        assert bench.store.complete(record, done) is done

    def fresh_set() -> None:
        # A record's raw response always needs new memory: SET a new key each time.
        bench.client.set(f"{bench.prefix}:plain:{bench.next_id()}", big)

    ours_times, plain_times, ratios = [], [], []
    for _ in range(rounds):
        try:
            ours = _time_prepared(prepare, complete, ops)
        finally:
            bench.drop_big_keys()  # untimed: keep the server's memory bounded
        try:
            plain = _time(fresh_set, ops)
        finally:
            bench.drop_big_keys()
        ours_times.append(ours)
        plain_times.append(plain)
        ratios.append(ours / plain)
    same_key = _time(lambda: bench.client.set(f"{bench.prefix}:plain:same", big), ops)
    bench.drop_big_keys()
    ours, plain, ratio = (
        statistics.median(ours_times),
        statistics.median(plain_times),
        statistics.median(ratios),
    )
    print("(c) completing with a 1 MiB raw response vs a plain SET of the same 1 MiB string (loopback)")
    print(f"    complete {ours * 1e3:8.3f} ms   SET (new key) {plain * 1e3:8.3f} ms")
    print(f"    ratio = {ratio:.2f}x   (target <= 1.3x: {_verdict(ratio <= 1.3)})")
    print(f"    (reference: SET overwriting one key {same_key * 1e3:.3f} ms: {ours / same_key:.2f}x)")
    print(
        f"FIGURE redis loopback: 1 MiB completion / plain SET {ratio:.2f}x (target <= 1.3x: "
        f"{_verdict(ratio <= 1.3)}); {ours * 1e3:.3f} ms vs {plain * 1e3:.3f} ms"
    )


# -- the run ---------------------------------------------------------------------------


def _warm(bench: Bench, count: int) -> float:
    """Warm up (scripts loaded, connection open, caches hot); seconds per ours+seed+pings set."""
    start = time.perf_counter()
    for _ in range(count):
        bench.invocation()
        bench.seed_invocation()
        bench.two_pings()
    return (time.perf_counter() - start) / count


def run_regime(name: str, server: Server, rounds: int, ops: int | None, big_ops: int) -> RoundTrips:
    """One regime: (a) and (b), plus the CPU breakdown and (c) on loopback."""
    print(f"\n== {name}: {server.label}")
    for note in server.notes:
        print(f"    {note}")
    bench = Bench(server)
    try:
        per_set = _warm(bench, 20)
        _warm(bench, max(5, min(100, int(1.0 / per_set))))
        if ops is None:  # RTT regimes: as many ops as fit in about ROUND_TARGET_S
            ops = max(10, min(300, int(ROUND_TARGET_S / per_set)))
        result = measure_round_trips(bench, rounds, ops)
        report_round_trips(name, result)
        if name == "loopback":
            report_cpu_bound(result)
            if big_ops > 0:
                measure_big(bench, rounds, big_ops)
        return result
    finally:
        bench.close()


def _rtts(text: str) -> list[float]:
    if text.strip().lower() in {"", "none", "0", "off"}:
        return []
    return [float(part) for part in text.split(",") if part.strip()]


def _raise_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every ``finally``: servers and namespaces go


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    quick = os.environ.get("CIS_BENCH_QUICK") == "1"
    parser.add_argument(
        "--rounds", type=int, default=5 if quick else 7, help="interleaved rounds per comparison"
    )
    parser.add_argument(
        "--ops", type=int, default=150 if quick else 300, help="loopback operations per round"
    )
    parser.add_argument(
        "--big-ops", type=int, default=20 if quick else 40, help="1 MiB completions per round"
    )
    parser.add_argument(
        "--rtt-ms",
        type=_rtts,
        default=[0.2, 1.0],
        help="emulated round-trip times in ms, comma-separated (default 0.2,1; 'none' skips)",
    )
    parser.add_argument(
        "--emulation",
        choices=("auto", "netem", "relay"),
        default="relay",
        help=(
            "how to delay (default relay: a user-space relay on 127.0.0.1, no change to the host); "
            "netem: a network namespace + veth + netem qdisc, needs root and changes host networking "
            "for the run; auto: netem when available, else the relay"
        ),
    )
    parser.add_argument("--serve-relay", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_relay:
        port, one_way = args.serve_relay.split(":")
        _relay_main(0, int(port), float(one_way))
        return 0

    signal.signal(signal.SIGTERM, _raise_exit)
    signal.signal(signal.SIGHUP, _raise_exit)
    print(f"redis-py {redis.__version__}; Python {sys.version.split()[0]}; medians of per-round values")
    with loopback_server() as server:
        with redis.Redis.from_url(server.url) as client:
            print(f"Redis {client.info('server')['redis_version']}")
        run_regime("loopback", server, args.rounds, args.ops, args.big_ops)

    unavailable: dict[str, str] = {}  # emulation kind -> why it cannot run here
    for rtt in args.rtt_ms:
        name = f"RTT {rtt:g} ms"
        factories: list[tuple[str, Callable[[float], contextlib.AbstractContextManager[Server]]]] = []
        if args.emulation in {"auto", "netem"}:
            factories.append(("netem", netem_server))
        if args.emulation in {"auto", "relay"}:
            factories.append(("relay", relay_server))
        for kind, factory in factories:
            if kind in unavailable:
                print(f"\n== {name} via {kind}: skipped (see above)")
                continue
            try:
                with factory(rtt) as server:
                    run_regime(f"{name} ({kind})", server, args.rounds, None, 0)
                break
            except EmulationUnavailableError as exc:
                unavailable[kind] = str(exc)
                print(f"\n== {name} via {kind}: skipped: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
