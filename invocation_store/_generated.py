"""Write, or check, a file generated from the package's own sources (CIS-SPEC-2).

The generator scripts (``scripts/generate_transitions.py``, ``generate_error_docs.py``,
``gen_provider_tables.py``) share one command line: no argument (re)writes the file,
``--check`` compares it and exits 1 when it is stale. No I/O beyond that one file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def generate_main(
    argv: list[str] | None, path: Path, make_text: Callable[[], str], *, description: str, script: str
) -> int:
    """Write ``make_text()`` to ``path`` (UTF-8), or with ``--check`` only compare it.

    Returns the exit code: 0 (written, or already current), 1 (``--check`` and stale;
    a line on stderr names ``script`` to run).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 if stale")
    args = parser.parse_args(argv)
    text = make_text()
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current == text:
        return 0
    if args.check:
        print(f"{path.name} is stale: run {script}", file=sys.stderr)
        return 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.name}")
    return 0
