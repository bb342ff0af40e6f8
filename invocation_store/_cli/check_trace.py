"""`invocation-store check-trace`: placeholder until its issue lands (not a feature)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the `check-trace` subcommand."""
    parser = subparsers.add_parser("check-trace", help="(not yet available)")
    parser.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    """Report that the subcommand is not available yet."""
    print("invocation-store: 'check-trace' is not available yet", file=sys.stderr)
    return 2
