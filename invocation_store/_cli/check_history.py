"""`invocation-store check-history FILE|-`: is a concurrent history linearizable? (CIS-HIST-2).

Exit codes as ``check-trace``: 0 linearizable; 1 not (a minimal window: the
operations involved, the orders tried, the requirement); 2 for a malformed history
(its line and JSON path) or an unreadable file; 3 undecided within the search budget
(``--max-states``, ``--max-seconds``: the run and the window it could not decide).
Never prints a traceback or a payload for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

from ..history import (
    DEFAULT_BUDGET,
    HISTORY_FORMAT,
    HISTORY_VERSION,
    Budget,
    HistoryReport,
    MalformedHistoryError,
    check_history_lines,
)
from ._common import positive_int

__all__ = ["register", "run"]

_DESCRIPTION = f"""\
Decide whether a concurrent history of store operations is linearizable with
respect to this project's kernel: whether some order of the operations that
respects real time (an operation that returned before another was invoked comes
first) explains every observed result by the kernel's sequential rules.

The history is JSON Lines ({HISTORY_FORMAT}, version {HISTORY_VERSION}; see
spec/history.md and spec/history.schema.json): a header with the limits in force,
then 'invoke' lines (process, operation, arguments with now_ms) and their
completions: 'ok' with the observed result, 'fail' (did not take effect) or
'info' (unknown outcome). Runs are independent, so each run is searched alone.
"""

_EPILOG = """\
exit status:
  0  linearizable
  1  not linearizable: prints the run (and the key, when one key's operations
     alone contradict the kernel), the first completion no order explains, the
     window of operations whose results contradict the kernel, the orders tried
     and the requirement IDs (spec/requirements.md)
  2  malformed history (line number and JSON path), or the file cannot be read
  3  undecided within the budget: no run was found not linearizable, but some run
     could not be decided in --max-states configurations or --max-seconds CPU
     seconds; prints each such run, the limit reached and the window of
     operations not yet placed where the search stopped

--json prints exactly one JSON object on stdout whatever the outcome:
  {"status": "linearizable", "lines", "operations", "unknown", "runs"}
  {"status": "not_linearizable", "requirement", "rule", "run_id", "key",
   "minimal", "first_unexplained", "window", "orders", "orders_total",
   "undecided"}
  {"status": "undecided", "lines", "operations", "unknown", "runs",
   "undecided": [{"run_id", "limit", "placed", "operations", "lines", "window"}]}
  {"status": "malformed", "line", "where", "message"}
  {"status": "error", "line": null, "where": null, "message"}

examples:
  invocation-store check-history workers.history.jsonl
  invocation-store check-history --json - < workers.history.jsonl
"""


def register(subparsers: Any) -> None:
    """Add the ``check-history`` subcommand."""
    parser = subparsers.add_parser(
        "check-history",
        help=(
            "check a concurrent history for linearizability against the kernel "
            "(exit 0 yes, 1 no, 2 bad, 3 undecided)"
        ),
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "history", metavar="FILE", help="the history (JSON Lines, UTF-8); '-' reads standard input"
    )
    parser.add_argument(
        "--max-states",
        type=positive_int,
        default=DEFAULT_BUDGET.max_states,
        metavar="N",
        help="configurations one search may hold, the memory bound (default %(default)s)",
    )
    parser.add_argument(
        "--max-seconds",
        type=_positive_float,
        default=DEFAULT_BUDGET.max_seconds,
        metavar="S",
        help="CPU seconds the whole check may spend (default %(default)s)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print the verdict as one JSON object on standard output"
    )
    output.add_argument(
        "-q", "--quiet", action="store_true", help="print nothing when the history is linearizable"
    )
    parser.set_defaults(func=run)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a positive number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return value


def _error(message: str, args: argparse.Namespace) -> int:
    if args.json:
        print(
            json.dumps({"status": "error", "line": None, "where": None, "message": message}, sort_keys=True)
        )
    print(f"check-history: {message}", file=sys.stderr)
    return 2


def _malformed(exc: MalformedHistoryError, args: argparse.Namespace) -> int:
    if args.json:
        verdict = {"status": "malformed", "line": exc.line, "where": exc.where, "message": exc.message}
        print(json.dumps(verdict, sort_keys=True))
    else:
        print(f"check-history: malformed history: {exc}", file=sys.stderr)
    return 2


def _report(report: HistoryReport, args: argparse.Namespace) -> int:
    if args.json:
        verdict: dict[str, Any] = report.as_json()
        print(json.dumps(verdict, ensure_ascii=True, sort_keys=True))
    elif report.violation is not None:
        print(report.violation.render())
    elif report.undecided:
        print("\n".join(run.render() for run in report.undecided))
    elif not args.quiet:
        print(
            f"check-history: linearizable ({report.operations} operations, {report.unknown} with unknown "
            f"outcome, {report.runs} runs)"
        )
    return report.exit_code


def _check(stream: IO[bytes], args: argparse.Namespace) -> int:
    budget = Budget(
        max_states=getattr(args, "max_states", DEFAULT_BUDGET.max_states),
        max_seconds=getattr(args, "max_seconds", DEFAULT_BUDGET.max_seconds),
    )
    try:
        report = check_history_lines(stream, budget)
    except MalformedHistoryError as exc:
        return _malformed(exc, args)
    return _report(report, args)


def run(args: argparse.Namespace) -> int:
    """Check the history named by ``args.history``; returns the exit code (0, 1 or 2)."""
    if args.history == "-":
        return _check(sys.stdin.buffer, args)
    try:
        with open(args.history, "rb") as stream:
            return _check(stream, args)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return _error(f"cannot read {args.history}: {reason}", args)
