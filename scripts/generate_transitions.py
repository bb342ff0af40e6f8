"""Write ``spec/transitions.json`` from the kernel's lifecycle table (CIS-SPEC-2).

Usage::

    .venv/bin/python scripts/generate_transitions.py           # (re)write the file
    .venv/bin/python scripts/generate_transitions.py --check   # exit 1 if it differs

The file is generated from :data:`invocation_store.kernel.TABLE` (see
:mod:`invocation_store.oracle._table`): never edit it by hand.
``tests/kernel/test_transition_table.py`` fails when it is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from invocation_store.oracle._table import dump_table_document

SPEC_FILE = Path(__file__).resolve().parent.parent / "spec" / "transitions.json"


def main(argv: list[str] | None = None, path: Path = SPEC_FILE) -> int:
    """Write (or with ``--check`` compare) ``path``; returns the exit code (0, or 1 if stale)."""
    parser = argparse.ArgumentParser(description="Generate spec/transitions.json from the kernel's table.")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    args = parser.parse_args(argv)
    text = dump_table_document()
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current == text:
        return 0
    if args.check:
        print(f"{path.name} is stale: run scripts/generate_transitions.py", file=sys.stderr)
        return 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
