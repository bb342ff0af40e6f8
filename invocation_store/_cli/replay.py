"""`invocation-store replay`: placeholder until its issue lands (not a feature)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the `replay` subcommand."""
    parser = subparsers.add_parser("replay", help="(not yet available)")
    parser.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    """Report that the subcommand is not available yet."""
    print("invocation-store: 'replay' is not available yet", file=sys.stderr)
    return 2
