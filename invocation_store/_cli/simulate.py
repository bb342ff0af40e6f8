"""`invocation-store simulate`: a deterministic simulation of hosts, clocks, network, store (CIS-SIM-1).

Exit codes: 0 every promise held on every seed; 1 a promise broken (the seed, the
broken promises, a minimal schedule and the commands that replay it are printed);
2 bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any, Final

from ..testing._sim_schedule import DEPLOYMENTS, Schedule, decode, encode, render

if TYPE_CHECKING:
    from ..testing._sim import SimulationResult

__all__ = ["register", "run"]

#: The planted faults (``invocation_store.testing.PLANTED_FAULTS``, named here without loading it).
_PLANTED: Final = ("caller-clock", "dropped-create", "nested-retry", "replay-ack")
_DEFAULT_SKEW_MS: Final = 12_000

_EPILOG = """\
Each seed fixes one schedule: the deployment (memory store, or the Redis store on
simulated Redis servers running its real scripts, with a replica, persistence and a
durability mode), N harness hosts whose clocks are skewed and drift, and the steps:
calls, re-sends, sweeps, reads, crashes, network faults (lost requests and replies,
resets, partitions, slow links) and store faults (restart, failover, eviction, memory
full, a changed maxmemory-policy, a cut replication link). The same seed replays
the same run, byte for byte (the trace digest is printed).

promises checked on every run (spec/requirements.md, CIS-SIM-3..10):
  once     the executor runs at most once per (run, tool_call_id) while its record exists
  durable  no acknowledged create lost in a mode that promises to keep it
  fate     a call made once is never refused as a duplicate while its tool never ran
  budget   budgets never overspent
  raw      no agent-facing result or log line carries raw data, keys or secrets
  wait     waits stay within their budgets plus one round trip (simulated time)
  history  the recorded history is linearizable (check-history)
  drift    an evicting policy set on a running server stops creates within its window

exit status:
  0  every promise held on every seed
  1  a promise broken: seed, violations, minimal schedule, replay commands
  2  bad options

examples:
  invocation-store simulate --seed 7 --hosts 3 --steps 1000
  invocation-store simulate --seed 0 --seeds 200 --deployment redis-replicas
  invocation-store simulate --replay 7 --hosts 3 --steps 1000     # the full trace of seed 7
  invocation-store simulate --planted caller-clock --seeds 50     # a planted fault, found
  invocation-store simulate --schedule TEXT                        # replay a shrunk schedule
"""


def register(subparsers: Any) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help="simulate harness hosts, clocks, network and store faults from a seed (exit 0 ok, 1 broken)",
        description="A seeded, deterministic simulation of harness hosts, clocks, network and store faults.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--seed", type=int, default=0, metavar="N", help="the first seed (default 0)")
    parser.add_argument(
        "--seeds", type=int, default=1, metavar="K", help="run K consecutive seeds (default 1)"
    )
    parser.add_argument("--hosts", type=int, default=3, metavar="N", help="harness hosts (default 3)")
    parser.add_argument(
        "--steps", type=int, default=200, metavar="N", help="steps per schedule (default 200)"
    )
    parser.add_argument(
        "--deployment",
        default="mixed",
        choices=["mixed", *sorted(DEPLOYMENTS)],
        help="the store deployment (default mixed: drawn from each seed)",
    )
    parser.add_argument(
        "--planted",
        default=None,
        metavar="FAULT",
        help="plant a known fault: caller-clock, dropped-create, nested-retry, replay-ack",
    )
    parser.add_argument(
        "--max-skew-ms",
        type=int,
        default=12_000,
        metavar="MS",
        help="largest host clock offset (default 12000)",
    )
    parser.add_argument(
        "--replay", type=int, default=None, metavar="SEED", help="run SEED once and print its trace"
    )
    parser.add_argument("--schedule", default=None, metavar="TEXT", help="run an encoded (shrunk) schedule")
    parser.add_argument("--no-shrink", action="store_true", help="report a failing seed without shrinking it")
    parser.add_argument(
        "--history", default=None, metavar="FILE", help="write the last run's history (JSON Lines)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per seed")
    parser.set_defaults(func=run)


def _command(args: argparse.Namespace, *extra: str) -> str:
    parts = ["invocation-store", "simulate", *extra]
    if args.planted:
        parts += ["--planted", args.planted]
    return " ".join(parts)


def _shape(args: argparse.Namespace) -> list[str]:
    """The options that, with a seed, name a schedule (for the replay command)."""
    shape = ["--hosts", str(args.hosts), "--steps", str(args.steps)]
    if args.deployment != "mixed":
        shape += ["--deployment", args.deployment]
    if args.max_skew_ms != _DEFAULT_SKEW_MS:
        shape += ["--max-skew-ms", str(args.max_skew_ms)]
    return shape


def _schedules(args: argparse.Namespace) -> list[Schedule] | str:
    """The schedules the options name, or the error message."""
    if args.planted is not None and args.planted not in _PLANTED:
        return f"unknown planted fault {args.planted!r} (one of {', '.join(_PLANTED)})"
    if args.seeds < 1 or args.hosts < 1 or args.steps < 1 or args.max_skew_ms < 0:
        return "--seeds, --hosts and --steps must be at least 1, --max-skew-ms at least 0"
    if args.seed < 0 or (args.replay is not None and args.replay < 0):
        return "--seed and --replay must be at least 0"
    if args.replay is not None and args.schedule is not None:
        return "give --replay SEED or --schedule TEXT, not both"
    if args.schedule is not None:
        try:
            return [decode(args.schedule)]
        except ValueError as exc:
            return str(exc)
    first = args.replay if args.replay is not None else args.seed
    count = 1 if args.replay is not None else args.seeds
    from ..testing._sim import seed_schedule  # noqa: PLC0415 - fakeredis and redis-py load on first use

    return [
        seed_schedule(
            seed,
            hosts=args.hosts,
            steps=args.steps,
            deployment=args.deployment,
            planted=args.planted,
            max_skew_ms=args.max_skew_ms,
        )
        for seed in range(first, first + count)
    ]


def _report_failure(args: argparse.Namespace, result: SimulationResult, *, replaying: bool) -> None:
    """Print the violations, the replay command, and (unless replaying) a minimal schedule."""
    from ..testing._sim import shrink_failure  # noqa: PLC0415 - fakeredis and redis-py load on first use

    schedule = result.schedule
    print(f"seed {schedule.seed}: {len(result.violations)} violation(s) ({schedule.deployment.label()})")
    for violation in result.violations[:10]:
        print("  " + violation.render())
    if args.schedule is not None:  # a schedule replays as itself: its seed alone is another run
        print(f"  replay: {_command(args, '--schedule', args.schedule)}")
    else:
        print(f"  replay: {_command(args, '--replay', str(schedule.seed), *_shape(args))}")
    if args.no_shrink or replaying:
        return
    small = shrink_failure(result)
    print(f"  minimal schedule ({len(small.schedule.steps)} of {len(schedule.steps)} steps):")
    for line in render(small.schedule):
        print("    " + line)
    for violation in small.violations[:3]:
        print("    " + violation.render())
    print(f"  replay the minimal schedule: {_command(args, '--schedule', encode(small.schedule))}")


def _print_json(result: SimulationResult) -> None:
    schedule = result.schedule
    obj = {
        "seed": schedule.seed,
        "deployment": schedule.deployment.label(),
        "ok": result.ok,
        "violations": [v.render() for v in result.violations],
        "digest": result.digest,
        "stats": dict(result.stats),
    }
    print(json.dumps(obj, sort_keys=True))


def run(args: argparse.Namespace) -> int:
    """Run the simulation(s); returns the exit code (0, 1 or 2)."""
    from ..testing._sim import history_of, simulate  # noqa: PLC0415 - fakeredis and redis-py load on first use

    schedules = _schedules(args)
    if isinstance(schedules, str):
        print(f"simulate: {schedules}", file=sys.stderr)
        return 2
    replaying = args.replay is not None or args.schedule is not None
    history = None
    if args.history:
        try:  # opened before the run, so that a path that cannot be written loses no work
            history = open(args.history, "w", encoding="ascii")  # noqa: SIM115 - closed below
        except OSError as exc:
            print(
                f"simulate: cannot write --history {args.history}: {exc.strerror or 'error'}", file=sys.stderr
            )
            return 2
    failures = 0
    started = time.perf_counter()
    for schedule in schedules:
        result = simulate(schedule, planted=args.planted)
        if args.json:
            _print_json(result)
        elif replaying:
            for line in render(schedule):
                print(line)
            print("trace:")
            for line in result.trace:
                print("  " + line)
        if not result.ok:
            failures += 1
            if not args.json:
                _report_failure(args, result, replaying=replaying)
        elif not args.json:
            label = schedule.deployment.label()
            print(f"seed {schedule.seed}: every promise held ({label}, digest {result.digest[:16]})")
    if history is not None:
        with history:
            history.write("\n".join(history_of(schedules[-1], args.planted)) + "\n")
    elapsed = time.perf_counter() - started
    if not args.json:
        rate = len(schedules) / elapsed if elapsed > 0 else 0.0
        print(
            f"simulate: {len(schedules)} seed(s), {failures} with broken promises, "
            f"{elapsed:.1f} s ({rate:.1f} seeds/s)"
        )
    return 1 if failures else 0
