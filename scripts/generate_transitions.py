"""Write ``spec/transitions.json`` from the kernel's lifecycle table (CIS-SPEC-2).

Usage::

    .venv/bin/python scripts/generate_transitions.py           # (re)write the file
    .venv/bin/python scripts/generate_transitions.py --check   # exit 1 if it differs

The file is generated from :data:`invocation_store.kernel.TABLE` (see
:mod:`invocation_store.oracle._table`): never edit it by hand.
``tests/kernel/test_transition_table.py`` fails when it is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from invocation_store._generated import generate_main
from invocation_store.oracle._table import dump_table_document

SPEC_FILE = Path(__file__).resolve().parent.parent / "spec" / "transitions.json"


def main(argv: list[str] | None = None, path: Path = SPEC_FILE) -> int:
    """Write (or with ``--check`` compare) ``path``; returns the exit code (0, or 1 if stale)."""
    return generate_main(
        argv,
        path,
        dump_table_document,
        description="Generate spec/transitions.json from the kernel's table.",
        script="scripts/generate_transitions.py",
    )


if __name__ == "__main__":
    sys.exit(main())
