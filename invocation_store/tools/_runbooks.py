"""``search_runbooks`` and ``runbook_outline``: read-only tools over a folder of Markdown runbooks.

``search_runbooks`` arguments (unknown keys refused):

- ``query`` (string, required): keywords separated by spaces; each is matched
  case-insensitively as a substring of the runbook text.
- ``match`` (``"all"`` or ``"any"``, default ``"all"``).

Its raw response lists every matching runbook with its score (keyword
occurrences in the whole file) and every body line (after the front matter) that
contains a keyword; the projector reports the best
runbooks (EVIDENCE_FOUND) or NO_EVIDENCE scoped to the folder, file count and
keywords.

``runbook_outline`` arguments: ``name`` (a runbook file name such as
``"checkout-5xx.md"``; letters, digits, ``-`` and ``_`` only, ``.md`` optional).
Its raw response is the complete Markdown text. The projector needs the runbook's
front matter block (``---`` lines with ``title:``, ``service:``, ``owner:``) and
raises ``ValueError`` when it is missing: the boundary records PROJECTION_FAILED
for such a runbook, while its raw text stays in the record for the harness
(CIS-EVID-5, CIS-FAIL-6).
"""

from __future__ import annotations

import re
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
    optional_str,
    reject_unknown,
    required_str,
)

__all__ = ["RunbookOutline", "RunbookSearch", "front_matter"]

_WORD = re.compile(r"[^\s]+")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}(?:\.md)?$")
_FRONT_KEYS = ("title", "service", "owner")


def front_matter(text: str) -> dict[str, str] | None:
    """The ``key: value`` pairs of a leading ``---`` block, or None if there is none."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return fields
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return None


def _body_start(text: str) -> int:
    """Line number of the front matter block's closing ``---`` (0 without a block)."""
    lines = text.splitlines()
    if front_matter(text) is None:
        return 0
    return next(number for number, line in enumerate(lines[1:], start=2) if line.strip() == "---")


def _title(path: Path, text: str) -> str:
    fields = front_matter(text) or {}
    if "title" in fields:
        return fields["title"]
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


class RunbookSearch:
    """The ``search_runbooks`` tool over the ``*.md`` files of ``folder``."""

    name = "search_runbooks"

    def __init__(self, folder: Path, summary_bytes: int) -> None:
        self.folder = folder
        self.summary_bytes = summary_bytes

    @staticmethod
    def _keywords(arguments: Mapping[str, Any]) -> tuple[list[str], str]:
        reject_unknown(arguments, {"query", "match"})
        keywords = [word.lower() for word in _WORD.findall(required_str(arguments, "query"))]
        if not keywords:
            raise ToolArgumentError("query needs at least one keyword")
        mode = optional_str(arguments, "match") or "all"
        if mode not in ("all", "any"):
            raise ToolArgumentError("match must be 'all' or 'any'")
        return keywords, mode

    def execute(self, arguments: Mapping[str, Any]) -> str:
        """Search every runbook; returns raw JSON with all hits and all matching lines."""
        keywords, mode = self._keywords(arguments)
        paths = sorted(path for path in self.folder.glob("*.md") if path.is_file())
        hits: list[dict[str, Any]] = []
        for path in paths:
            text = path.read_text(encoding="utf-8", errors="replace")
            lower = text.lower()
            counts = {word: lower.count(word) for word in keywords}
            found = [word for word, count in counts.items() if count]
            if not found or (mode == "all" and len(found) < len(keywords)):
                continue
            body_start = _body_start(text)
            lines = [
                {"line": number, "text": line}
                for number, line in enumerate(text.splitlines(), start=1)
                if number > body_start and any(word in line.lower() for word in keywords)
            ]
            hits.append(
                {
                    "file": path.name,
                    "title": _title(path, text),
                    "score": sum(counts.values()),
                    "lines": lines,
                }
            )
        hits.sort(key=lambda hit: (-int(hit["score"]), str(hit["file"])))
        return dump_raw({"files_searched": len(paths), "keywords": keywords, "match": mode, "hits": hits})

    def project(self, raw: str, arguments: Mapping[str, Any]) -> Projection:
        """Best runbooks first (EVIDENCE_FOUND), or NO_EVIDENCE scoped to what was searched."""
        keywords, mode = self._keywords(arguments)
        data = load_raw(raw)
        hits: list[dict[str, Any]] = data["hits"]
        scope = (
            f"{self.folder.name}/*.md ({data['files_searched']} file"
            f"{'' if data['files_searched'] == 1 else 's'}); {mode} of keywords "
            f"{', '.join(repr(word) for word in keywords)} (case-insensitive substring)"
        )
        if not hits:
            return Projection(
                evidence_status=EvidenceStatus.NO_EVIDENCE, content="No runbook matched.", scope=scope
            )
        items = []
        for hit in hits:
            first = hit["lines"][0] if hit["lines"] else {"line": 0, "text": ""}
            items.append(
                clip(
                    f"{hit['file']} \u2014 {hit['title']} (score {hit['score']}): "
                    f"line {first['line']}: {str(first['text']).strip()}"
                )
            )
        content = bounded_summary(
            f"{len(hits)} runbook{' matches' if len(hits) == 1 else 's match'}:",
            items,
            scope,
            self.summary_bytes,
        )
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=content, scope=scope)


class RunbookOutline:
    """The ``runbook_outline`` tool: one runbook's front matter and section headings."""

    name = "runbook_outline"

    def __init__(self, folder: Path, summary_bytes: int) -> None:
        self.folder = folder
        self.summary_bytes = summary_bytes

    def _path(self, arguments: Mapping[str, Any]) -> Path:
        reject_unknown(arguments, {"name"})
        name = required_str(arguments, "name")
        if not _NAME.match(name):
            raise ToolArgumentError("name must be a runbook file name")
        return self.folder / (name if name.endswith(".md") else name + ".md")

    def execute(self, arguments: Mapping[str, Any]) -> str:
        """The complete Markdown text; ``FileNotFoundError`` for an unknown runbook."""
        return self._path(arguments).read_text(encoding="utf-8")

    def project(self, raw: str, arguments: Mapping[str, Any]) -> Projection:
        """Title, service, owner and headings; ``ValueError`` without a front matter block."""
        path = self._path(arguments)
        fields = front_matter(raw)
        if fields is None or any(key not in fields for key in _FRONT_KEYS):
            raise ValueError("runbook has no complete front matter block")
        headings = [line.lstrip("#").strip() for line in raw.splitlines() if line.startswith("## ")]
        head = f"{fields['title']} (service {fields['service']}, owner {fields['owner']}"
        head += f", reviewed {fields['reviewed']})" if "reviewed" in fields else ")"
        scope = f"{self.folder.name}/{path.name}"
        items = [f"- {heading}" for heading in headings]
        content = bounded_summary(head + "; sections:", items, scope, self.summary_bytes)
        return Projection(evidence_status=EvidenceStatus.EVIDENCE_FOUND, content=content, scope=scope)
