"""`invocation-store model-check`: explore the kernel's small scope exhaustively (CIS-HIST-4).

Exit codes: 0 every invariant holds in every state reached; 1 a violation (a
shortest event sequence reaching it is printed); 2 bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from attrs import evolve

from ..testing._modelcheck import CI_SCOPE, LARGE_SCOPE, model_check

__all__ = ["register", "run"]

_EPILOG = """\
The universe: 2 runs x 2 tool_call_ids, tool-call budgets 1-2, byte limits of a
few bytes, a clock moving in 1 s steps. Events: open, admit (and a retried
admission), raw, project, fail, complete (the worker's compare-and-set), sweep,
cancel, close, tick. Breadth first with state deduplication, so a violation comes
with a shortest event sequence.

exit status:
  0  every invariant holds in every state reached
  1  a violation: the invariant and a shortest event sequence reaching it
  2  bad options

examples:
  invocation-store model-check                 # the CI size (depth 8)
  invocation-store model-check --large         # depth 9, two clock steps
  invocation-store model-check --depth 8 --json
"""


def register(subparsers: Any) -> None:
    """Add the ``model-check`` subcommand."""
    parser = subparsers.add_parser(
        "model-check",
        help="explore every kernel state within a depth, checking the invariants (exit 0 ok, 1 violation)",
        description="Bounded model checking of the pure kernel over a small universe.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--depth",
        type=int,
        default=None,
        metavar="N",
        help="most events in a sequence (default 8, or 9 with --large; given, it replaces either)",
    )
    parser.add_argument(
        "--large", action="store_true", help="the larger scope (depth 9, clock steps 1 and 2 s)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the model checker; returns the exit code (0, 1 or 2)."""
    scope = LARGE_SCOPE if args.large else CI_SCOPE
    if args.depth is not None:
        if args.depth < 1:
            print("model-check: --depth must be positive", file=sys.stderr)
            return 2
        scope = evolve(scope, depth=args.depth)
    report = model_check(scope)
    if args.json:
        found = report.counterexample
        violation = None
        if found is not None:
            events = [list(event) for event in found.events]
            violation = {"invariant": found.invariant, "message": found.message, "events": events}
        verdict = {
            "states": report.states,
            "transitions": report.transitions,
            "depth": report.depth,
            "seconds": round(report.seconds, 3),
            "violation": violation,
        }
        print(json.dumps(verdict, sort_keys=True))
    else:
        print(report.render())
    return 0 if report.counterexample is None else 1
