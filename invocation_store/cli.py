"""The ``invocation-store`` command line (argparse).

Subcommands live in ``invocation_store/_cli/<name>.py``; each module defines
``register(subparsers) -> None``, which adds its parser and sets
``func=run`` where ``run(args) -> int`` returns the exit code. Errors are one line on
stderr and a nonzero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS = ("replay", "inspect", "fuzz", "check_trace", "check_history", "model_check", "simulate")


def _version() -> str:
    """The installed distribution's version, ``0+unknown`` when it is not installed."""
    try:
        return importlib.metadata.version("canonical-invocation-store")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - source tree, not installed
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="invocation-store",
        description=(
            "Canonical tool-invocation store: replay agent transcripts through the ToolBoundary, "
            "inspect a run's records, fuzz a store with the stateful machine, check a trace "
            "against the reference kernel, check a concurrent history for linearizability, "
            "model-check the kernel over a small scope, simulate hosts, clocks, network and store faults."
        ),
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {_version()}",
        help="print the installed version (canonical-invocation-store) and exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"invocation_store._cli.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("invocation-store: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``... | head``): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
