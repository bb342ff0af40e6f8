"""Helpers shared by the CLI subcommands: one home for each.

- :data:`REDIS_URL_ENV` and :func:`redis_url_from`: where a Redis URL comes from;
- :func:`positive_int`: the argparse type of every positive count option;
- :func:`fail`: one ``<prog>: <message>`` line on stderr, and the exit status;
- :func:`unavailable`: the safe one-line message of a failed Redis store;
- :func:`record_row`, :func:`table`, :func:`ttl_text`: the record rows and the plain
  text tables of ``replay`` and ``inspect``.

Nothing here prints a raw payload, a request text, a URL or exception text.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..adapters import StoreUnavailableError
from ..kernel import CanonicalRecord, utf8_len

__all__ = [
    "REDIS_URL_ENV",
    "fail",
    "positive_int",
    "record_row",
    "redis_url_from",
    "table",
    "ttl_text",
    "unavailable",
]

#: Environment variable read for the Redis URL when ``--redis-url`` is not given (replay,
#: inspect and fuzz): keeps a URL with a password out of ``ps`` and the shell history.
REDIS_URL_ENV = "INVOCATION_STORE_REDIS_URL"


def positive_int(text: str) -> int:
    """argparse type: a positive integer; raises ``ArgumentTypeError`` otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a positive integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def fail(prog: str, message: str, code: int) -> int:
    """Print ``<prog>: <message>`` on stderr; returns ``code`` (the exit status)."""
    print(f"{prog}: {message}", file=sys.stderr)
    return code


def redis_url_from(args: argparse.Namespace) -> str | None:
    """``--redis-url`` if given, else :data:`REDIS_URL_ENV` if set and not empty, else None."""
    given: str | None = args.redis_url
    if given:
        return given
    return os.environ.get(REDIS_URL_ENV) or None


def unavailable(exc: StoreUnavailableError) -> str:
    """The one-line message for a failed Redis store (CIS-FAIL-5).

    The store's own operator text: a cause label (an exception *type*), or for a
    refused server the setting to change (``requires Redis >= 6.2, found 5.0.14``,
    an evicting ``maxmemory-policy``), written by the library, never foreign text.
    """
    return f"the Redis store is unavailable ({exc.operator_text()})"


def _size(text: str | None) -> int | None:
    return None if text is None else utf8_len(text)


def record_row(record: CanonicalRecord, ttl_ms: int | None) -> dict[str, Any]:
    """One record as a JSON-ready row: identity, status, sizes (UTF-8 bytes) and TTL left (ms).

    ``raw_bytes`` is None when no raw response is stored (RESULT_TOO_LARGE, executor
    failures); ``agent_result_bytes`` counts content + scope, as the agent-result
    limit does. No request text or raw response is copied into the row (CIS-BND-4).
    """
    result = None
    if record.agent_result is not None:
        result = (_size(record.agent_result) or 0) + (_size(record.scope) or 0)
    return {
        "sequence": record.sequence,
        "tool_call_id": record.tool_call_id,
        "tool": record.tool_name,
        "status": record.status.value,
        "evidence_status": None if record.evidence_status is None else record.evidence_status.value,
        "error_code": None if record.error_code is None else record.error_code.value,
        "request_bytes": _size(record.request_json),
        "raw_bytes": _size(record.raw_response),
        "agent_result_bytes": result,
        "ttl_remaining_ms": ttl_ms,
    }


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric: set[int] | None = None) -> str:
    """A plain-text table: ``numeric`` column indexes are right-aligned, ``None`` shows as ``-``."""
    numeric = numeric or set()
    cells = [[("-" if value is None else str(value)) for value in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in cells:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(values: Sequence[str]) -> str:
        parts = [
            value.rjust(widths[index]) if index in numeric else value.ljust(widths[index])
            for index, value in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers)), *(line(row) for row in cells)])


def ttl_text(ttl_ms: int | None) -> str | None:
    """Remaining TTL as seconds with one decimal (``3599.9s``), None when unknown."""
    return None if ttl_ms is None else f"{ttl_ms / 1000:.1f}s"
