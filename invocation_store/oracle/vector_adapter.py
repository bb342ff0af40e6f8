"""This project's kernel behind the vector protocol: ``python -m invocation_store.oracle.vector_adapter``.

The thin adapter that ``scripts/run_vectors.py`` (or any other runner of the
protocol in ``spec/vectors/README.md``) drives: it reads one vector per line on
standard input (JSON, without ``expect``), answers each with one line on standard
output (the kernel's outcome, shaped like ``expect``), and exits at end of input.
A vector of an unknown kind is answered ``{"unsupported": "<kind>"}``; an input the
kernel refuses as a caller's error is ``{"invalid_input": true}`` (as the vectors
expect); any other failure is ``{"error": "<exception type>"}`` (no exception text:
it could carry the vector's payload). CIS-SPEC-3.
"""

from __future__ import annotations

import json
import sys
from typing import IO

from ._vectors import UnknownKindError, run_vector

__all__ = ["main", "serve"]


def serve(source: IO[str], sink: IO[str]) -> int:
    """Answer every vector line of ``source`` on ``sink``; returns the number answered."""
    answered = 0
    for line in source:
        if not line.strip():
            continue
        vector = json.loads(line)
        try:
            outcome = run_vector(vector)
        except UnknownKindError:
            outcome = {"unsupported": vector.get("kind")}
        except Exception as exc:  # noqa: BLE001 - any kernel failure is an answer, not a crash
            outcome = {"error": type(exc).__name__}
        sink.write(json.dumps(outcome, ensure_ascii=True) + "\n")
        sink.flush()
        answered += 1
    return answered


def main() -> int:
    """Serve standard input to standard output; exit status 0."""
    serve(sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
