"""Write the conformance vectors and the trace JSON Schema from the kernel (CIS-SPEC-3, CIS-ORC-1).

Usage::

    .venv/bin/python scripts/generate_vectors.py           # (re)write the files
    .venv/bin/python scripts/generate_vectors.py --check   # exit 1 if any file differs

Writes ``spec/vectors/*.json`` (see :mod:`invocation_store.oracle._vectors`),
``spec/trace.schema.json`` (see :func:`invocation_store.oracle.trace_schema`) and
``spec/history.schema.json`` (see :func:`invocation_store.history._schema.history_schema`). The files
are generated: never edit them by hand. ``tests/oracle/test_vectors.py`` regenerates
everything in memory and fails on any difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from invocation_store.history._schema import history_schema
from invocation_store.oracle import trace_schema
from invocation_store.oracle._vectors import dump_document, generate_vectors

ROOT = Path(__file__).resolve().parent.parent


def expected_files(root: Path = ROOT) -> dict[Path, str]:
    """Every generated file's path and exact text."""
    files = {root / "spec" / "vectors" / name: dump_document(doc) for name, doc in generate_vectors().items()}
    files[root / "spec" / "trace.schema.json"] = dump_document(trace_schema())
    files[root / "spec" / "history.schema.json"] = (
        json.dumps(history_schema(), indent=1, sort_keys=True) + "\n"
    )
    return files


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    """Write (or with ``--check`` compare) the generated files under ``root``; returns the exit code."""
    parser = argparse.ArgumentParser(
        description="Generate spec/vectors/ and spec/trace.schema.json from the kernel."
    )
    parser.add_argument(
        "--check", action="store_true", help="compare instead of writing; exit 1 on any difference"
    )
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected_files(root).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path.relative_to(root))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("out of date (run scripts/generate_vectors.py): " + ", ".join(map(str, stale)), file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
