"""Benchmark: `invocation-store check-trace` on long traces (issue 6, CIS-ORC-2).

Generates conforming traces of 100,000 and 1,000,000 lines (an episode recorded from
MemoryStore + ToolBoundary + the trace recorder, replicated with new run ids and
shifted times: see ``invocation_store.oracle._synthetic``), then checks each one in a
fresh subprocess running the CLI's code path, and reports for both lengths:

- lines per second (wall clock, and per CPU second: the machine may be shared);
- peak memory: the subprocess's maximum resident set size (``ru_maxrss``), before
  the check (after imports) and after it; the difference is what the check used.

Target: at least 30,000 lines/s, and peak memory independent of the trace's length.
Run: ``.venv/bin/python benchmarks/bench_oracle.py [--lines 100000 1000000] [--repeat 1]``
(``CIS_BENCH_QUICK=1``: 20,000 and 100,000 lines). Prints ``FIGURE`` lines for
``benchmarks/run_all.py``. Numbers are measured in this run; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time

from invocation_store.oracle._synthetic import write_synthetic_trace

CHILD = r"""
import gc, json, resource, sys, time
import argparse
from invocation_store._cli import check_trace

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
args = argparse.Namespace(trace=sys.argv[1], json=False, quiet=True, max_line_bytes=256 * 1024 * 1024)
wall, cpu = time.perf_counter(), time.process_time()
code = check_trace.run(args)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"exit": code, "wall": wall, "cpu": cpu, "rss_before_kb": before, "rss_after_kb": after}))
"""


def _generate(path: str, lines: int) -> int:
    with open(path, "w", encoding="utf-8") as out:
        return write_synthetic_trace(out, lines)


def _check(path: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, path], capture_output=True, text=True, check=True, timeout=3600
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    quick = os.environ.get("CIS_BENCH_QUICK") == "1"
    parser.add_argument(
        "--lines", type=int, nargs="+", default=[20_000, 100_000] if quick else [100_000, 1_000_000]
    )
    parser.add_argument("--repeat", type=int, default=1, help="checks per length; the fastest is reported")
    args = parser.parse_args()
    # The synthetic episode makes tools fail on purpose; the boundary's warnings about
    # them (exception types and codes) are expected here, not news: keep them quiet.
    logging.getLogger("invocation_store").addHandler(logging.NullHandler())
    rows = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for target in args.lines:
            path = os.path.join(tmp, f"trace-{target}.jsonl")
            started = time.perf_counter()
            lines = _generate(path, target)
            generated = time.perf_counter() - started
            size = os.path.getsize(path)
            best: dict[str, float] | None = None
            for _ in range(args.repeat):
                result = _check(path)
                if result["exit"] != 0:
                    print(f"check-trace exited {result['exit']} on the synthetic trace", file=sys.stderr)
                    return 1
                if best is None or result["wall"] < best["wall"]:
                    best = result
            assert best is not None
            rows.append((lines, size, generated, best))
            os.remove(path)
    load_after = os.getloadavg()[0]
    print(f"load average (1 min) before/after: {load_before:.2f} / {load_after:.2f} on {os.cpu_count()} CPUs")
    print(
        f"{'lines':>10} {'MiB':>7} {'wall s':>8} {'lines/s':>9} {'lines/cpu-s':>12} {'rss before':>11} "
        f"{'rss after':>10} {'check used':>11}"
    )
    for lines, size, _generated, best in rows:
        used = best["rss_after_kb"] - best["rss_before_kb"]
        print(
            f"{lines:>10,} {size / 2**20:>7.1f} {best['wall']:>8.2f} {lines / best['wall']:>9,.0f} "
            f"{lines / best['cpu']:>12,.0f} {best['rss_before_kb'] / 1024:>8.1f} MiB "
            f"{best['rss_after_kb'] / 1024:>7.1f} MiB {used / 1024:>8.1f} MiB"
        )
    for lines, _size, _generated, best in rows:
        print(
            f"FIGURE check-trace {lines:,} lines: {lines / best['wall']:,.0f} lines/s wall, "
            f"{lines / best['cpu']:,.0f} lines/CPU-s (target >= 30,000), "
            f"peak RSS {best['rss_after_kb'] / 1024:.1f} MiB"
        )
    if len(rows) >= 2:
        ratio = rows[-1][3]["rss_after_kb"] / max(1, rows[0][3]["rss_after_kb"])
        print(
            f"FIGURE check-trace peak RSS ratio {rows[-1][0]:,} / {rows[0][0]:,} lines: {ratio:.2f}x "
            "(1.00x = independent of length)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
