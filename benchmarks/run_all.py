"""Run every ``benchmarks/bench_*.py`` and print each figure: ``python benchmarks/run_all.py``.

Each benchmark runs as its own subprocess (same interpreter, repository root as the
working directory), one after the other so that they do not compete for the CPU.
Their output is printed as it comes; at the end, a summary repeats each script's
figures, plus its exit status and wall time. A figure is a line starting with
``FIGURE`` (the convention: one result, a ratio measured within that one run); for a
script that prints none, the lines that state a ratio (containing ``ratio`` or a
number followed by ``x``) are shown instead.

Options: ``--only TEXT`` runs the scripts whose name contains TEXT (repeatable);
``--quick`` sets ``CIS_BENCH_QUICK=1`` for scripts that offer a shorter run;
``--timeout S`` bounds each script (default 900 s). Exit status 1 if any script
failed or timed out, else 0. Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def discover(only: list[str]) -> list[Path]:
    """The ``bench_*.py`` scripts beside this file, sorted, filtered by ``only`` substrings."""
    scripts = sorted(HERE.glob("bench_*.py"))
    if only:
        scripts = [path for path in scripts if any(text in path.name for text in only)]
    return scripts


_RATIO = re.compile(r"\bratio\b|\d(?:\.\d+)?x\b", re.IGNORECASE)


def figures_of(lines: list[str]) -> list[str]:
    """The ``FIGURE`` lines of a script's output, else its lines that state a ratio."""
    marked = [line.strip() for line in lines if line.startswith("FIGURE")]
    return marked or [line.strip() for line in lines if _RATIO.search(line)]


def run_one(path: Path, env: dict[str, str], timeout_s: float) -> tuple[int | None, float, list[str]]:
    """Run one script, echoing its output; returns (exit status or None on timeout, seconds, FIGURE lines)."""
    lines: list[str] = []
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert process.stdout is not None
    deadline = start + timeout_s
    for line in process.stdout:
        print(f"  {line}", end="", flush=True)
        lines.append(line.rstrip("\n"))
        if time.perf_counter() > deadline:
            break
    try:
        status: int | None = process.wait(timeout=max(0.0, deadline - time.perf_counter()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        status = None
    return status, time.perf_counter() - start, figures_of(lines)


def main() -> int:
    """Run the selected benchmarks, then print the summary; returns the exit status."""
    parser = argparse.ArgumentParser(description="Run every benchmarks/bench_*.py and print each figure.")
    parser.add_argument(
        "--only", action="append", default=[], metavar="TEXT", help="run scripts matching TEXT"
    )
    parser.add_argument("--quick", action="store_true", help="set CIS_BENCH_QUICK=1 (shorter, noisier runs)")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds per script")
    args = parser.parse_args()
    scripts = discover(args.only)
    if not scripts:
        print("run_all: no benchmarks/bench_*.py matched", file=sys.stderr)
        return 1
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if args.quick:
        env["CIS_BENCH_QUICK"] = "1"
    summary: list[tuple[str, int | None, float, list[str]]] = []
    for path in scripts:
        print(f"== {path.name}", flush=True)
        status, seconds, figures = run_one(path, env, args.timeout)
        summary.append((path.name, status, seconds, figures))
        state = "timed out" if status is None else f"exit {status}"
        print(f"== {path.name}: {state} in {seconds:.1f} s\n", flush=True)
    print("== summary (figures are ratios measured within one run of each script)")
    failed = False
    for name, status, seconds, figures in summary:
        state = "timed out" if status is None else ("ok" if status == 0 else f"FAILED (exit {status})")
        failed = failed or status != 0
        print(f"{name}: {state}, {seconds:.1f} s")
        for figure in figures:
            print(f"  {figure}")
        if not figures:
            print("  (no figure lines: see its output above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
