"""Kernel cost of one whole successful invocation, against one Redis PING round trip.

Run: ``.venv/bin/python benchmarks/bench_kernel.py [--number N] [--repeat R] [--profile]``

What is timed (pure kernel, no store): ``check_envelope`` (preflight checks 1-6),
``admit`` (run checks 7-11 and Begin), ``transition`` with ``RawReceived``,
``transition`` with ``ProjectionReceived`` and ``decide_complete`` (the store's
compare-and-set decision), for a call with 1 KiB of arguments and a 4 KiB raw
response (UTF-8 bytes). In the same run, one redis-py ``PING`` round trip is timed
against a private ``redis-server`` that this script starts on a free loopback port
(through :func:`invocation_store.testing.redis_server.redis_server` when available),
or against ``REDIS_URL`` when that is set. A Redis on the default port is never used.

``CIS_BENCH_QUICK=1`` (``benchmarks/run_all.py --quick``) caps the runs at 3 x 500.
Both figures are timeit-style: ``--repeat`` runs of ``--number`` loops each; the
per-call best and median are printed, and the ratio kernel / PING of the medians.
Target (issue 2): kernel <= 0.25 x PING. When the kernel is over target (or with
``--profile``), a cProfile of the invocation is printed, hottest functions first.

Timings are printed, never asserted: this is a script run on demand, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator

import redis

from invocation_store.kernel import (
    Admission,
    AdmissionRequest,
    CanonicalRecord,
    CompareAndSet,
    EvidenceStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunState,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    check_envelope,
    decide_complete,
    open_run,
    run_usage_after,
    transition,
)

TARGET_RATIO = 0.25
T0 = 1_700_000_000_000
RUN_ID = "run-bench"
TOOL_CALL_ID = "call_9sKdLq2Vx0pN3mR7tY1uWz4e"
TOOL = "search_documents"


def _exact_json(size: int, filler: str) -> str:
    """A JSON object of exactly ``size`` UTF-8 bytes (ASCII) with a few realistic members."""
    head = '{"query": "quarterly revenue by region", "limit": 25, "filters": {"year": 2024}, "text": "'
    tail = '"}'
    body = (filler * size)[: size - len(head) - len(tail)]
    text = head + body + tail
    assert len(text.encode("utf-8")) == size
    json.loads(text)
    return text


ARGUMENTS = _exact_json(1024, "lorem ipsum dolor sit amet ")
RAW = _exact_json(4096, "row,2024-Q1,EMEA,1234567.89;")
CONTEXT = RunContext(run_id=RUN_ID)
POLICY = ToolPolicy(name=TOOL, authorized=True, read_only=True)
LIMITS = Limits()
ENVELOPE = ToolCallEnvelope(run_id=RUN_ID, tool_call_id=TOOL_CALL_ID, tool_name=TOOL, arguments=ARGUMENTS)
PROJECTION = Projection(
    evidence_status=EvidenceStatus.EVIDENCE_FOUND,
    content="EMEA revenue 2024-Q1: 1,234,567.89 (3 rows)",
    scope="finance.revenue 2024",
)


def _run() -> RunState:
    run = open_run(
        run_id=RUN_ID,
        now_ms=T0,
        deadline_ms=T0 + 3_600_000,
        ttl_ms=86_400_000,
        tool_call_budget=1_000,
        byte_budget=100 * 1024 * 1024,
    )
    assert isinstance(run, RunState)
    return run


RUN = _run()
REQUEST = AdmissionRequest(
    run_id=RUN_ID,
    tool_call_id=TOOL_CALL_ID,
    tool_name=TOOL,
    request_json=ARGUMENTS,
    invocation_token="0f8e4c2a9b7d4e61a3c5",
)
RAW_EVENT = RawReceived(raw_response=RAW, now_ms=T0 + 40)
PROJECTION_EVENT = ProjectionReceived(projection=PROJECTION, now_ms=T0 + 45)


def invocation() -> CanonicalRecord:
    """One whole successful invocation through the kernel; returns the READY record."""
    if check_envelope(CONTEXT, ENVELOPE, POLICY, LIMITS) is not None:
        raise AssertionError("preflight refused the benchmark call")
    admission = admit(RUN, None, REQUEST, LIMITS, T0)
    if not isinstance(admission, Admission):
        raise AssertionError(f"admit refused: {admission}")
    created = admission.record
    with_raw = transition(created, RAW_EVENT, LIMITS)
    if not isinstance(with_raw, CanonicalRecord):
        raise AssertionError(f"raw refused: {with_raw}")
    final = transition(with_raw, PROJECTION_EVENT, LIMITS)
    if not isinstance(final, CanonicalRecord):
        raise AssertionError(f"projection refused: {final}")
    if decide_complete(created, created, final, T0 + 46) is not CompareAndSet.WRITE:
        raise AssertionError("compare-and-set refused")
    return final


def _per_call(func: Callable[[], object], number: int, repeat: int) -> tuple[float, float]:
    """(best, median) seconds per call over ``repeat`` runs of ``number`` calls."""
    totals = timeit.Timer(func).repeat(repeat=repeat, number=number)
    per_call = [total / number for total in totals]
    return min(per_call), statistics.median(per_call)


def _steps() -> dict[str, Callable[[], object]]:
    """Each kernel step alone, on precomputed inputs, for the breakdown."""
    admission = admit(RUN, None, REQUEST, LIMITS, T0)
    assert isinstance(admission, Admission)
    created = admission.record
    with_raw = transition(created, RAW_EVENT, LIMITS)
    assert isinstance(with_raw, CanonicalRecord)
    final = transition(with_raw, PROJECTION_EVENT, LIMITS)
    assert isinstance(final, CanonicalRecord)
    return {
        "check_envelope (preflight 1-6)": lambda: check_envelope(CONTEXT, ENVELOPE, POLICY, LIMITS),
        "admit (preflight 7-11 + Begin)": lambda: admit(RUN, None, REQUEST, LIMITS, T0),
        "transition RawReceived (4 KiB)": lambda: transition(created, RAW_EVENT, LIMITS),
        "transition ProjectionReceived": lambda: transition(with_raw, PROJECTION_EVENT, LIMITS),
        "decide_complete": lambda: decide_complete(created, created, final, T0 + 46),
        "(store extra) run_usage_after": lambda: run_usage_after(RUN, created, final),
    }


# -- Redis -------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _own_redis_server() -> Iterator[str]:
    """Fallback: start ``redis-server`` from PATH on a free loopback port, in a temp dir."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("no redis-server on PATH; set REDIS_URL to a throwaway Redis")
    with tempfile.TemporaryDirectory(prefix="cis-bench-") as workdir:
        port = _free_port()
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        process = subprocess.Popen(
            [*args, "--dir", workdir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            client = redis.Redis(host="127.0.0.1", port=port)
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise SystemExit("redis-server did not start") from None
                    time.sleep(0.02)
            client.close()
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=10)


@contextlib.contextmanager
def _redis_url() -> Iterator[tuple[str, str]]:
    """Yield (url, where it came from); the URL itself is never printed (it may hold a password)."""
    override = os.environ.get("REDIS_URL")
    if override:
        yield override, "REDIS_URL"
        return
    try:
        from invocation_store.testing.redis_server import redis_server  # noqa: PLC0415 - optional helper
    except ImportError:
        with _own_redis_server() as url:
            yield url, "private redis-server started by this script"
        return
    with redis_server() as url:
        yield url, "private redis-server (invocation_store.testing.redis_server)"


# -- main ----------------------------------------------------------------------------------------


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:8.2f} us"


def _profile(number: int, top: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(number):
        invocation()
    profiler.disable()
    print(f"\ncProfile of {number} invocations (sorted by own time; profiler overhead inflates absolutes):")
    pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    """Print the kernel cost, the PING cost and their ratio; exit 0 (timings are not a verdict)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--number", type=int, default=2_000, help="calls per timed run (default 2000)")
    parser.add_argument(
        "--repeat", type=int, default=7, help="timed runs; best and median reported (default 7)"
    )
    parser.add_argument("--profile", action="store_true", help="always print the cProfile hot spots")
    args = parser.parse_args(argv)
    if os.environ.get("CIS_BENCH_QUICK") == "1":  # benchmarks/run_all.py --quick
        args.number, args.repeat = min(args.number, 500), min(args.repeat, 3)

    invocation()  # warm up and check the scenario succeeds
    print(f"arguments: {len(ARGUMENTS.encode())} bytes, raw response: {len(RAW.encode())} bytes")
    print(f"timeit: {args.repeat} runs x {args.number} calls; per call: best / median\n")

    kernel_best, kernel_median = _per_call(invocation, args.number, args.repeat)
    print(f"{'kernel, one whole invocation':34} {_us(kernel_best)} / {_us(kernel_median)}")
    for name, step in _steps().items():
        best, median = _per_call(step, args.number, args.repeat)
        print(f"  {name:32} {_us(best)} / {_us(median)}")

    with _redis_url() as (url, origin):
        client = redis.Redis.from_url(url)
        try:
            client.ping()
            ping_best, ping_median = _per_call(client.ping, args.number, args.repeat)
        finally:
            client.close()
    print(f"\n{'redis-py PING round trip':34} {_us(ping_best)} / {_us(ping_median)}   ({origin})")

    ratio = kernel_median / ping_median
    print(f"\nratio kernel / PING (medians): {ratio:.3f}  (best/best: {kernel_best / ping_best:.3f})")
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    print(f"target <= {TARGET_RATIO}: {verdict} target")
    print(
        f"FIGURE kernel invocation {kernel_median * 1e6:.1f} us / PING {ping_median * 1e6:.1f} us"
        f" = {ratio:.3f} (target <= {TARGET_RATIO}, {verdict.lower()})"
    )
    if args.profile or ratio > TARGET_RATIO:
        _profile(args.number, top=25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
