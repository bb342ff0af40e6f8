"""Benchmark: `invocation-store check-history` on concurrent histories (issue 14, issue 22, CIS-HIST-2).

Part 1, the hard cases: P = 2, 4, 8, 12, 16, 32, 64 fully overlapping operations of one
run (``invocation_store.history._synthetic``), linearizable and with one impossible
result: completions of P calls (they commute), creates of P calls (their answers pin
the order), two answers competing for one state (two creates claiming the last budget
slot, two admissions of one key, two completions of one record, a read listing both
claimants), and completions of unknown outcome followed by a read of the run whose
usage no subset gives (above every sum, or between the sums), or followed by a second
read no usage bound sees (every subset of them a state: the case the budget bounds).
Each check runs in a fresh subprocess through the CLI's code path, with the default
budget; the table (Markdown, as ``benchmarks/README.md`` publishes it) gives per shape
and P, linearizable and with one impossible result: the exit code, CPU seconds, the
configurations explored and the peak memory the check allocated (``tracemalloc``, in a
second run of the same check, untimed: under tracemalloc a check the CPU budget ends
explores fewer states, so its peak is a lower bound there), with the resident memory
the timed run added past the imports' peak when over 1 MiB. The machine's load
average is printed before and after.

Part 2 records real concurrent histories of 1,000, 10,000 and 100,000 store operations
(8 worker threads driving ToolBoundary calls against one MemoryStore, about 40
operations per run, so many runs: ``invocation_store.testing._jepsen``), then checks
each one in a fresh subprocess running the CLI's code path, and reports per size:

- wall and CPU seconds of decoding + checking, operations per second;
- peak memory: the subprocess's maximum resident set size (``ru_maxrss``) before the
  check (after imports) and after it; the difference is what the check used (the
  checker holds the decoded history in memory: it grows with the history).

Run: ``.venv/bin/python benchmarks/bench_history.py [--ops 1000 10000 100000] [--repeat 1]
[--p 2 4 8 12 16 32 64] [--skip-recorded]`` (``CIS_BENCH_QUICK=1``: 1,000 and 10,000
operations). Prints ``FIGURE`` lines for ``benchmarks/run_all.py``. Numbers are measured
in this run; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from invocation_store.adapters import MemoryStore
from invocation_store.testing._jepsen import CLOCK_MS, Workload, run_workload

CHILD = r"""
import json, resource, sys, time, tracemalloc
from invocation_store.history import check_history_lines

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
wall, cpu = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as stream:
    report = check_history_lines(stream)  # what `check-history` runs, without printing
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
status = report.as_json()["status"]
traced = None
if len(sys.argv) > 2:  # the same check again under tracemalloc: its peak allocation
    tracemalloc.start()
    with open(sys.argv[1], "rb") as stream:
        check_history_lines(stream)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
print(json.dumps({"exit": report.exit_code, "wall": wall, "cpu": cpu, "rss_before_kb": before,
                  "rss_after_kb": after, "status": status, "states": report.states,
                  "traced_peak_bytes": traced}))
"""

#: The hard cases of part 1: (name, builder name in invocation_store.history._synthetic, its options).
HARD_CASES: tuple[tuple[str, str, dict[str, bool]], ...] = (
    ("completes", "overlapping_completes", {}),
    ("creates", "overlapping_creates", {}),
    ("creates competing for the last slot", "competing_creates", {}),
    ("two admissions of one key", "same_key_creates", {}),
    ("two admissions of one key, a third unanswered", "same_key_creates", {"retried": True}),
    ("two completions of one record", "double_completes", {}),
    ("a read listing both claimants", "admissions_read", {}),
    ("unknown completes, read above every sum", "unknown_completes", {}),
    ("unknown completes, read between the sums", "unknown_completes", {"within": True}),
    ("unknown completes, a second read", "unknown_completes_reread", {}),
)


_THREADS = 8
_OPS_PER_STEP = 1.45  # store operations per boundary call, measured on this workload
_OPS_PER_RUN = 40


def _record(path: str, ops: int) -> tuple[int, int]:
    """Record a history of about ``ops`` operations; returns (operations, runs)."""
    runs = max(3, ops // _OPS_PER_RUN)
    steps = max(1, round(ops / _THREADS / _OPS_PER_STEP))
    store = MemoryStore(lambda: CLOCK_MS)
    # Enough budget and ids per run that calls keep being admitted.
    workload = Workload(threads=_THREADS, steps=steps, runs=runs, ids=8, budget=8)
    run_workload(path, lambda _process: store, workload)
    with open(path, "rb") as stream:
        invokes = sum(1 for line in stream if line.startswith(b'{"type":"invoke"'))
    return invokes, runs


def _check(path: str, traced: bool = False) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, path, *(["traced"] if traced else [])],
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _memory(result: dict[str, float]) -> str:
    """The peak the check allocated (tracemalloc), in KiB or MiB; and the resident memory it added
    past the imports' peak (``ru_maxrss``), when over 1 MiB."""
    peak = result["traced_peak_bytes"] / 1024
    text = f"{peak:,.0f} KiB" if peak < 10 * 1024 else f"{peak / 1024:,.1f} MiB"
    added = (result["rss_after_kb"] - result["rss_before_kb"]) / 1024
    return text + (f" (+{added:,.1f} MiB RSS)" if added > 1 else "")


def _cell(result: dict[str, float]) -> str:
    """``exit 1, 0.012 s, 85 states, 120 KiB`` for one check."""
    states = int(result["states"])
    return f"exit {int(result['exit'])}, {result['cpu']:.3f} s, {states:,} states, {_memory(result)}"


def _hard_cases(sizes: list[int], tmp: str) -> None:
    """Part 1: the hard cases, one subprocess per check, as one Markdown table."""
    from invocation_store.history import _synthetic  # noqa: PLC0415 - only for this part

    load = os.getloadavg()
    cpus = os.cpu_count()
    print(f"load average (1, 5, 15 min) before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {cpus} CPUs")
    figures = []
    print("| shape | P | linearizable | one impossible result |")
    print("| --- | --- | --- | --- |")
    for label, builder, options in HARD_CASES:
        for p in sizes:
            cells = []
            for forged in (False, True):
                path = os.path.join(tmp, f"hard-{builder}-{p}-{forged}.jsonl")
                with open(path, "w", encoding="utf-8") as stream:
                    stream.writelines(getattr(_synthetic, builder)(p, forged=forged, **options))
                result = _check(path, traced=True)
                os.remove(path)
                cells.append(_cell(result))
                kind = "one impossible" if forged else "linearizable"
                figures.append(
                    f"FIGURE check-history {label} P={p} {kind}: exit {int(result['exit'])}, "
                    f"{result['cpu']:.3f} CPU-s, {int(result['states']):,} states, peak {_memory(result)}"
                )
            print(f"| {label} | {p} | {cells[0]} | {cells[1]} |", flush=True)
    load = os.getloadavg()
    print(f"load average (1, 5, 15 min) after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for figure in figures:
        print(figure)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    quick = os.environ.get("CIS_BENCH_QUICK") == "1"
    parser.add_argument(
        "--ops", type=int, nargs="+", default=[1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    )
    parser.add_argument("--repeat", type=int, default=1, help="checks per size; the fastest is reported")
    parser.add_argument("--p", type=int, nargs="+", default=[2, 4, 8, 12, 16, 32, 64], help="hard-case sizes")
    parser.add_argument("--skip-recorded", action="store_true", help="run part 1 (the hard cases) only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        _hard_cases(args.p, tmp)
    if args.skip_recorded:
        return 0
    rows = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for target in args.ops:
            path = os.path.join(tmp, f"history-{target}.jsonl")
            started = time.perf_counter()
            ops, runs = _record(path, target)
            recorded = time.perf_counter() - started
            size = os.path.getsize(path)
            best: dict[str, float] | None = None
            for _ in range(args.repeat):
                result = _check(path)
                if result["exit"] != 0:
                    print(f"check-history exited {result['exit']} on a MemoryStore history", file=sys.stderr)
                    return 1
                if best is None or result["wall"] < best["wall"]:
                    best = result
            assert best is not None
            rows.append((ops, runs, size, recorded, best))
            os.remove(path)
    load_after = os.getloadavg()[0]
    print(f"load average (1 min) before/after: {load_before:.2f} / {load_after:.2f} on {os.cpu_count()} CPUs")
    print(
        f"{'operations':>10} {'runs':>6} {'MiB':>7} {'record s':>9} {'check s':>8} {'ops/s':>8} "
        f"{'ops/cpu-s':>10} {'rss before':>11} {'rss after':>10} {'check used':>11}"
    )
    for ops, runs, size, recorded, best in rows:
        used = best["rss_after_kb"] - best["rss_before_kb"]
        print(
            f"{ops:>10,} {runs:>6,} {size / 2**20:>7.1f} {recorded:>9.2f} {best['wall']:>8.2f} "
            f"{ops / best['wall']:>8,.0f} {ops / best['cpu']:>10,.0f} "
            f"{best['rss_before_kb'] / 1024:>7.1f} MiB {best['rss_after_kb'] / 1024:>6.1f} MiB "
            f"{used / 1024:>7.1f} MiB"
        )
    for ops, runs, _size, _recorded, best in rows:
        print(
            f"FIGURE check-history {ops:,} operations over {runs:,} runs: {best['wall']:.2f} s wall, "
            f"{ops / best['cpu']:,.0f} operations/CPU-s, peak RSS {best['rss_after_kb'] / 1024:.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
