"""``query_db``: one read-only SQL statement against a SQLite database.

The database is opened with the URI ``file:<path>?mode=ro`` so that SQLite itself
refuses every write (``attempt to write a readonly database``): no statement is
inspected or matched as text. ``ATTACH`` is disabled through the connection limit
``SQLITE_LIMIT_ATTACHED = 0``, so a statement cannot open a second, writable
database either, and ``PRAGMA query_only`` also refuses writes to the connection's
TEMP schema (which ``mode=ro`` leaves writable; it is never the file). A progress
handler aborts a statement that runs past ``statement_timeout_ms``.

Arguments (a JSON object; unknown keys are refused):

- ``sql`` (string, required): exactly one statement (several are refused by sqlite3).
- ``params`` (array of strings, numbers, booleans or nulls, optional): bound to ``?``.
- ``max_rows`` (integer 1-1000, default 200): the tool reads at most this many rows
  and says so (``more_rows``) when more exist; this is the query's row limit, like
  ``LIMIT``, not a truncation of a stored value.

Raw response: ``{"columns": [...], "rows": [[...]], "row_count": n, "more_rows": b}``;
blobs are written as ``{"blob_hex": "..."}``. The projector reports EVIDENCE_FOUND
with the first rows that fit, or NO_EVIDENCE scoped to the database and statement.
"""

from __future__ import annotations

import sqlite3
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..kernel import EvidenceStatus, Projection
from ._common import (
    ToolArgumentError,
    bounded_summary,
    clip,
    dump_raw,
    load_raw,
    optional_int,
    quote,
    reject_unknown,
    required_str,
)

__all__ = ["SqliteQuery", "connect_read_only"]

_ARGS = {"sql", "params", "max_rows"}
_MAX_ROWS = 1000


def connect_read_only(path: Path, *, timeout_ms: int = 5_000) -> sqlite3.Connection:
    """Open ``path`` read-only at the database level (URI ``mode=ro``), ATTACH disabled.

    Raises ``sqlite3.OperationalError`` if the file does not exist or is not a
    database. Every write statement on the returned connection fails inside SQLite.
    ``timeout_ms`` bounds each statement (a progress handler interrupts it).
    """
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    connection = sqlite3.connect(uri, uri=True, timeout=timeout_ms / 1000, check_same_thread=False)
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    # Second layer: also refuse writes to the connection's TEMP database, which
    # mode=ro does not cover (it never touches the file, but a read-only tool has no
    # business writing anything). The file itself is protected by mode=ro alone.
    connection.execute("PRAGMA query_only = ON")
    deadline = time.monotonic() + timeout_ms / 1000
    connection.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
    return connection


def _param(value: object) -> str | int | float | None:
    if value is None or isinstance(value, str | float):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    raise ToolArgumentError("params must be strings, numbers, booleans or null")


def _cell(value: object) -> object:
    if isinstance(value, bytes):
        return {"blob_hex": value.hex()}
    return value


class SqliteQuery:
    """The ``query_db`` tool over the SQLite database at ``path`` (opened per call, read-only).

    :meth:`execute` raises ``sqlite3.Error`` for any statement SQLite refuses (writes,
    syntax errors, ATTACH, timeouts) and :class:`ToolArgumentError` for bad
    arguments: the boundary records EXECUTION_FAILED.
    """

    name = "query_db"

    def __init__(self, path: Path, summary_bytes: int, statement_timeout_ms: int = 5_000) -> None:
        self.path = path
        self.summary_bytes = summary_bytes
        self.statement_timeout_ms = statement_timeout_ms

    def execute(self, arguments: Mapping[str, Any]) -> str:
        """Run the statement; returns the raw JSON text of its columns and rows."""
        reject_unknown(arguments, _ARGS)
        sql = required_str(arguments, "sql")
        raw_params = arguments.get("params", [])
        if not isinstance(raw_params, list):
            raise ToolArgumentError("params must be an array")
        params = [_param(value) for value in raw_params]
        max_rows = optional_int(arguments, "max_rows", 200, 1, _MAX_ROWS)
        connection = connect_read_only(self.path, timeout_ms=self.statement_timeout_ms)
        try:
            cursor = connection.execute(sql, params)
            columns = [column[0] for column in cursor.description or ()]
            fetched = cursor.fetchmany(max_rows + 1)
        finally:
            connection.close()
        rows = [[_cell(value) for value in row] for row in fetched[:max_rows]]
        return dump_raw(
            {"columns": columns, "rows": rows, "row_count": len(rows), "more_rows": len(fetched) > max_rows}
        )

    def project(self, raw: str, arguments: Mapping[str, Any]) -> Projection:
        """Bounded rows summary: EVIDENCE_FOUND, or NO_EVIDENCE scoped to the statement."""
        data = load_raw(raw)
        columns: list[str] = [str(column) for column in data["columns"]]
        rows: list[list[Any]] = data["rows"]
        scope = f"{self.path.name} (read-only): {quote(required_str(arguments, 'sql'))}"
        if arguments.get("params"):
            scope += f" with parameters {clip(dump_raw(arguments['params']))}"
        if not rows:
            return Projection(
                evidence_status=EvidenceStatus.NO_EVIDENCE,
                content=f"The query returned no rows (columns: {', '.join(columns) or 'none'}).",
                scope=scope,
            )
        count = f"at least {len(rows)}" if data["more_rows"] else str(len(rows))
        head = f"{count} row{'' if count == '1' else 's'}; columns: {', '.join(columns)}"
        items = [
            clip("; ".join(f"{column}={_show(value)}" for column, value in zip(columns, row, strict=False)))
            for row in rows
        ]
        content = bounded_summary(head, items, scope, self.summary_bytes)
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=content, scope=scope)


def _show(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict):
        return "<blob>"
    return str(value)
