#!/usr/bin/env python3
"""Run the conformance vectors against any implementation, through JSON over stdio (CIS-SPEC-3).

This runner is deliberately minimal and self-contained: it uses only the Python
standard library, reads only ``spec/vectors/*.json`` and never imports
``invocation_store``. It proves that the vectors alone define the expected
behaviour: any implementation, in any language, that answers the protocol below
can be checked with it.

Protocol (``spec/vectors/README.md`` is the normative description):

1. The runner starts ``COMMAND`` once, with pipes on its standard input and output.
2. For each vector it writes one line: the vector object without its ``expect``
   member, as JSON (ASCII, so a lone surrogate travels as ``\\ud800``), ended by
   ``\\n``. The implementation answers each line with one line, in order: its
   outcome, one JSON object. (The runner may write ahead of the answers.)
3. The outcome must equal ``expect`` as a JSON value: same members, same strings,
   integers equal, ``true``/``false`` never equal to a number, ``null`` only equal to
   ``null``. A kind the implementation does not implement is answered
   ``{"unsupported": "<kind>"}`` (counted as a failure unless ``--skip-kind``).
4. After the last vector the runner closes the implementation's standard input;
   the implementation exits.

Usage::

    python3 scripts/run_vectors.py -- python -m invocation_store.oracle.vector_adapter
    python3 scripts/run_vectors.py --vectors spec/vectors -- java -jar my-kernel-adapter.jar

Exit status: 0 every vector passes; 1 some vector fails (each failure printed with
its id, expected and observed outcome); 2 the implementation broke the protocol
(exited early, answered with something that is not one JSON object) or bad usage.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_VECTORS = Path(__file__).resolve().parent.parent / "spec" / "vectors"


def same(expected: Any, observed: Any) -> bool:
    """JSON value equality: booleans are not numbers, objects compare by members."""
    if isinstance(expected, bool) or isinstance(observed, bool):
        return type(expected) is type(observed) and expected == observed
    if isinstance(expected, dict):
        return (
            isinstance(observed, dict)
            and expected.keys() == observed.keys()
            and all(same(value, observed[key]) for key, value in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(observed, list)
            and len(expected) == len(observed)
            and all(same(a, b) for a, b in zip(expected, observed, strict=True))
        )
    if isinstance(expected, (int, float)):
        return isinstance(observed, (int, float)) and expected == observed
    return type(expected) is type(observed) and expected == observed


def load_vectors(directory: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every vector of every document in ``directory``: (file name, vector), files in name order."""
    for path in sorted(directory.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("format") != "canonical-invocation-vectors":
            continue
        for vector in document.get("vectors", []):
            yield path.name, vector
        for row in document.get("rows", []):
            for vector in row["vectors"]:
                yield path.name, vector
        for entry in document.get("codes", []):
            yield path.name, entry["vector"]


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, sort_keys=True)
    return text if len(text) <= 400 else text[:400] + "..."


def run(command: list[str], directory: Path, *, skip: frozenset[str], quiet: bool, max_shown: int) -> int:
    """Drive ``command`` through every vector; returns the exit status (0, 1 or 2)."""
    vectors = [(name, vector) for name, vector in load_vectors(directory) if vector["kind"] not in skip]
    if not vectors:
        print(f"run_vectors: no vectors in {directory}", file=sys.stderr)
        return 2
    process = subprocess.Popen(  # noqa: S603 - the command is the user's own implementation
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        bufsize=1,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin = process.stdin

    def feed() -> None:
        # Requests are written from their own thread, so that neither side blocks on a
        # full pipe; answers come back in request order.
        try:
            for _name, vector in vectors:
                request = {key: value for key, value in vector.items() if key != "expect"}
                stdin.write(json.dumps(request, ensure_ascii=True) + "\n")
            stdin.close()
        except (BrokenPipeError, ValueError):
            pass  # the implementation went away; the reader reports it

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    failures = 0
    try:
        for name, vector in vectors:
            line = process.stdout.readline()
            if not line:
                print(f"run_vectors: the implementation exited at {vector['id']} ({name})", file=sys.stderr)
                return 2
            try:
                observed = json.loads(line)
            except ValueError:
                print(f"run_vectors: not one JSON object in answer to {vector['id']}", file=sys.stderr)
                return 2
            if not same(vector["expect"], observed):
                failures += 1
                if failures <= max_shown:
                    print(f"FAIL {vector['id']} ({name}): {vector.get('description', '')}")
                    print(f"  expected: {_show(vector['expect'])}")
                    print(f"  observed: {_show(observed)}")
    finally:
        process.stdout.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        writer.join(timeout=5)
    if failures:
        print(f"run_vectors: {failures} of {len(vectors)} vectors failed")
        return 1
    if not quiet:
        print(f"run_vectors: all {len(vectors)} vectors pass")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run."""
    parser = argparse.ArgumentParser(description="Run spec/vectors against an implementation over stdio.")
    parser.add_argument("--vectors", type=Path, default=DEFAULT_VECTORS, help="the vectors directory")
    parser.add_argument("--skip-kind", action="append", default=[], help="a vector kind not to run")
    parser.add_argument("--max-shown", type=int, default=20, help="failures printed at most")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing when all pass")
    parser.add_argument("command", nargs="+", help="the implementation's adapter command (after --)")
    args = parser.parse_args(argv)
    return run(
        args.command,
        args.vectors,
        skip=frozenset(args.skip_kind),
        quiet=args.quiet,
        max_shown=args.max_shown,
    )


if __name__ == "__main__":
    raise SystemExit(main())
