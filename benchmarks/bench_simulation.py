"""Throughput of the deterministic simulator and the seeds each planted fault needs (issue 27).

Prints seeds per second per deployment (3 hosts; 150 and 1000 steps) and, for each
planted fault, how many consecutive seeds it took to find it from several start
seeds. ``CIS_BENCH_QUICK=1`` measures fewer seeds. Run on demand:
``.venv/bin/python benchmarks/bench_simulation.py``; nothing here is asserted.
"""

from __future__ import annotations

import os
import statistics
import time

from invocation_store.testing import PLANTED_FAULTS, seed_schedule, seeds_to_find, simulate

QUICK = os.environ.get("CIS_BENCH_QUICK") == "1"


def throughput(deployment: str, steps: int, seeds: int) -> tuple[float, float]:
    """(seeds per CPU second, simulated seconds per CPU second) over ``seeds`` seeds."""
    simulated_ms = 0
    started = time.process_time()
    for seed in range(seeds):
        schedule = seed_schedule(seed, steps=steps, deployment=deployment)
        simulate(schedule)
        simulated_ms += schedule.steps[-1].at_ms + 15_000
    spent = time.process_time() - started
    return seeds / spent, simulated_ms / 1000 / spent


def main() -> None:
    """Print the figures."""
    seeds = 5 if QUICK else 20
    for deployment in ("memory", "redis", "redis-replicas"):
        for steps in (150, 1000):
            count = max(2, seeds // (5 if steps == 1000 else 1))
            rate, speed = throughput(deployment, steps, count)
            print(
                f"FIGURE simulate {deployment} 3 hosts {steps} steps: {rate:.2f} seeds/CPU s "
                f"({speed:.0f}x simulated time, {count} seeds)"
            )
    starts = (0, 1000, 2000) if QUICK else (0, 1000, 2000, 3000, 4000, 5000)
    for name in PLANTED_FAULTS:
        started = time.process_time()
        found = [seeds_to_find(name, first_seed=start, max_seeds=100, steps=150) for start in starts]
        spent = time.process_time() - started
        counts = [count for count in found if count is not None]
        shown = ", ".join("-" if count is None else str(count) for count in found)
        median = statistics.median(counts) if counts else float("nan")
        print(
            f"FIGURE planted {name}: seeds to find from {len(starts)} start seeds: {shown} "
            f"(median {median}, max {max(counts) if counts else '-'}; {spent:.1f} CPU s)"
        )


if __name__ == "__main__":
    main()
