"""Benchmark: peak memory of `check-trace` on one huge line (issue 13, CIS-ORC-2).

Pipes one line of ``--line-mb`` MB (default 300, no newline until the end) into
``invocation-store check-trace --max-line-bytes N -`` in a fresh subprocess, for the
default limit (256 MiB) and for smaller ones, and reports the subprocess's peak
resident set size (``ru_maxrss`` from ``os.wait4``), the time until it refused the
line, and the exit status (2: malformed, longer than the limit). The line is written
in 1 MiB pieces from this process, never held whole here either.

Expectation: peak memory is about the limit plus a constant (the interpreter and one
1 MiB piece), whatever the line's length; before reading in pieces it was about
twice the limit (570 MB for a 300 MB line).
Run: ``.venv/bin/python benchmarks/bench_line_memory.py [--line-mb 300] [--limits-mb 256 64 1]``
(``CIS_BENCH_QUICK=1``: a 40 MB line). Prints ``FIGURE`` lines. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

PIECE = 1024 * 1024


def measure(line_bytes: int, limit: int) -> tuple[int, float, int]:
    """(exit status, seconds, peak RSS in KiB) of check-trace refusing one line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "invocation_store.cli", "check-trace", "--max-line-bytes", str(limit), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    piece = b"x" * PIECE
    start = time.perf_counter()
    written = 0
    try:
        while written < line_bytes:
            size = min(PIECE, line_bytes - written)
            process.stdin.write(piece if size == PIECE else piece[:size])
            written += size
        process.stdin.write(b"\n")
        process.stdin.close()
    except BrokenPipeError:
        pass  # the checker refused the line and exited: the rest is never read
    _pid, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, elapsed, usage.ru_maxrss


def main() -> int:
    """Measure and print one line per limit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    quick = os.environ.get("CIS_BENCH_QUICK") == "1"
    parser.add_argument("--line-mb", type=int, default=40 if quick else 300)
    parser.add_argument("--limits-mb", type=int, nargs="+", default=[256, 64, 1])
    args = parser.parse_args()
    line_bytes = args.line_mb * 1000 * 1000
    baseline_code, _, baseline = measure(10, 1 << 20)  # a tiny line: the interpreter alone
    print(f"interpreter + imports, a 10-byte line: peak RSS {baseline / 1024:.0f} MiB (exit {baseline_code})")
    for limit_mb in args.limits_mb:
        limit = limit_mb * 1024 * 1024
        code, seconds, peak = measure(line_bytes, limit)
        print(
            f"line {args.line_mb} MB, --max-line-bytes {limit_mb} MiB: exit {code}, refused in "
            f"{seconds:.2f} s, peak RSS {peak / 1024:.0f} MiB ({(peak - baseline) / 1024:.0f} MiB above "
            "the interpreter)"
        )
        print(f"FIGURE check_trace_line_{args.line_mb}mb_limit_{limit_mb}mib_rss_mib {peak / 1024:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
