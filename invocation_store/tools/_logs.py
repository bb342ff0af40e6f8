"""``search_logs``: search a folder of log files by pattern, minimum level and time window.

Log line format (one entry per line)::

    2026-11-01T03:10:53.122Z ERROR checkout-web req=9367da POST /checkout 502: ...

that is an ISO-8601 UTC timestamp ending in ``Z``, a level (TRACE, DEBUG, INFO,
WARN/WARNING, ERROR, FATAL) and the rest of the line. Lines that do not parse are
counted (``unparsed_lines``) and never match.

Arguments (a JSON object; unknown keys are refused):

- ``pattern`` (string, required): case-insensitive substring, or a Python regular
  expression when ``regex`` is true; ``""`` matches every line.
- ``regex`` (boolean, default false).
- ``level`` (string, optional): minimum level, e.g. ``"ERROR"`` keeps ERROR and FATAL.
- ``start`` / ``end`` (ISO-8601 with a timezone, optional): the window, start
  inclusive, end exclusive.
- ``files`` (glob, default ``*.log``): which files of the folder; no ``/`` or ``..``.

Raw response (complete, harness-only): ``{"files": [...], "lines_scanned": n,
"unparsed_lines": k, "matches": [{"file", "line", "ts", "level", "text"}]}`` with
matches ordered by time. The projector reports EVIDENCE_FOUND with the count and the
first lines that fit, or NO_EVIDENCE with a scope naming the folder, files, level,
window and pattern that were searched (CIS-EVID-3).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..kernel import EvidenceStatus, Projection
from ._common import (
    ToolArgumentError,
    bounded_summary,
    clip,
    dump_raw,
    load_raw,
    optional_bool,
    optional_str,
    quote,
    reject_unknown,
    required_str,
)

__all__ = ["LEVELS", "LogSearch"]

#: Severity order of the levels; ``WARNING`` is read as ``WARN``.
LEVELS: dict[str, int] = {"TRACE": 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4, "FATAL": 5}

_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z)\s+([A-Z]+)\s")
_GLOB = re.compile(r"^[A-Za-z0-9_.*?\-\[\]]+$")
_ARGS = {"pattern", "regex", "level", "start", "end", "files"}


def _level(name: str | None) -> str | None:
    if name is None:
        return None
    upper = name.strip().upper()
    upper = "WARN" if upper == "WARNING" else upper
    if upper not in LEVELS:
        raise ToolArgumentError("unknown level")
    return upper


def _instant(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ToolArgumentError(f"{name} is not an ISO-8601 time") from None
    if value.tzinfo is None:
        raise ToolArgumentError(f"{name} needs a timezone (e.g. Z)")
    return value.astimezone(UTC)


def _iso(value: datetime | None) -> str:
    if value is None:
        return "*"
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + "Z"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


class _Query:
    """Parsed, validated arguments of one search."""

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        reject_unknown(arguments, _ARGS)
        self.pattern = required_str(arguments, "pattern")
        self.regex = optional_bool(arguments, "regex", default=False)
        self.level = _level(optional_str(arguments, "level"))
        self.start = _instant(optional_str(arguments, "start"), "start")
        self.end = _instant(optional_str(arguments, "end"), "end")
        self.files = optional_str(arguments, "files") or "*.log"
        if not _GLOB.match(self.files) or ".." in self.files:
            raise ToolArgumentError("files must be a glob inside the log folder")
        try:
            self.matcher = re.compile(self.pattern if self.regex else re.escape(self.pattern), re.IGNORECASE)
        except re.error:
            raise ToolArgumentError("pattern is not a valid regular expression") from None

    def scope(self, folder: str, files: int, lines: int) -> str:
        """What was searched, exactly (the NO_EVIDENCE scope, CIS-EVID-3)."""
        level = f"level>={self.level}" if self.level else "any level"
        if self.start is None and self.end is None:
            window = "any time"
        else:
            window = f"time {_iso(self.start)}..{_iso(self.end)} (end exclusive)"
        kind = "regex" if self.regex else "substring"
        return (
            f"{folder}/{self.files} ({_count(files, 'file')}, {_count(lines, 'line')}); {level}; {window}; "
            f"{kind} {quote(self.pattern)} (case-insensitive)"
        )


class LogSearch:
    """The ``search_logs`` tool over the ``*.log`` files of ``folder``.

    ``summary_bytes`` bounds the agent result (content + scope, UTF-8 bytes).
    :meth:`execute` raises :class:`ToolArgumentError` (or ``OSError``) on bad
    arguments or unreadable files: the boundary records EXECUTION_FAILED.
    """

    name = "search_logs"

    def __init__(self, folder: Path, summary_bytes: int) -> None:
        self.folder = folder
        self.summary_bytes = summary_bytes

    def execute(self, arguments: Mapping[str, Any]) -> str:
        """Run the search; returns the raw JSON text (all matching lines, complete)."""
        query = _Query(arguments)
        paths = sorted(path for path in self.folder.glob(query.files) if path.is_file())
        matches: list[dict[str, Any]] = []
        scanned = unparsed = 0
        for path in paths:
            with path.open(encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, start=1):
                    text = line.rstrip("\r\n")
                    if not text:
                        continue
                    scanned += 1
                    parsed = _LINE.match(text)
                    if parsed is None:
                        unparsed += 1
                        continue
                    stamp, level = parsed.group(1), parsed.group(2)
                    level = "WARN" if level == "WARNING" else level
                    if level not in LEVELS:
                        unparsed += 1
                        continue
                    if query.level is not None and LEVELS[level] < LEVELS[query.level]:
                        continue
                    when = datetime.fromisoformat(stamp)
                    if (query.start is not None and when < query.start) or (
                        query.end is not None and when >= query.end
                    ):
                        continue
                    if not query.matcher.search(text):
                        continue
                    matches.append(
                        {"file": path.name, "line": number, "ts": stamp, "level": level, "text": text}
                    )
        matches.sort(key=lambda match: (match["ts"], match["file"], match["line"]))
        return dump_raw(
            {
                "files": [path.name for path in paths],
                "lines_scanned": scanned,
                "unparsed_lines": unparsed,
                "matches": matches,
            }
        )

    def project(self, raw: str, arguments: Mapping[str, Any]) -> Projection:
        """Bounded summary of ``raw``: EVIDENCE_FOUND or scoped NO_EVIDENCE (CIS-EVID-2, CIS-EVID-3)."""
        query = _Query(arguments)
        data = load_raw(raw)
        matches: list[dict[str, Any]] = data["matches"]
        scope = query.scope(self.folder.name, len(data["files"]), int(data["lines_scanned"]))
        if not matches:
            return Projection(
                evidence_status=EvidenceStatus.NO_EVIDENCE, content="No log line matched.", scope=scope
            )
        levels = Counter(str(match["level"]) for match in matches)
        by_level = ", ".join(f"{name} {levels[name]}" for name in sorted(levels, key=LEVELS.__getitem__))
        files = len({match["file"] for match in matches})
        head = (
            f"{_count(len(matches), 'matching log line')} in {_count(files, 'file')} ({by_level}), "
            f"{matches[0]['ts']} to {matches[-1]['ts']}:"
        )
        items = [f"{match['file']}:{match['line']} {clip(str(match['text']))}" for match in matches]
        content = bounded_summary(head, items, scope, self.summary_bytes)
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=content, scope=scope)
