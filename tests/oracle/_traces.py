"""Hand-editable traces: the shipped example as dicts, and helpers to edit and check them."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from invocation_store.oracle import CheckReport, check_lines

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "spec" / "examples" / "example-trace.jsonl"

Line = dict[str, Any]


def example() -> list[Line]:
    """The shipped example trace, one dict per line (a fresh copy each time)."""
    return [json.loads(text) for text in EXAMPLE.read_text(encoding="utf-8").splitlines()]


def text(lines: list[Line]) -> str:
    """JSON Lines text of ``lines``."""
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)


def check(lines: list[Line]) -> CheckReport:
    """Check ``lines`` in memory."""
    return check_lines(text(lines).splitlines(keepends=True))


def find(lines: list[Line], predicate: Callable[[Line], bool]) -> int:
    """Index (0-based) of the first line satisfying ``predicate``."""
    for index, line in enumerate(lines):
        if predicate(line):
            return index
    raise AssertionError("no such line")


def op(name: str, **fields: Any) -> Callable[[Line], bool]:
    """A predicate: the line has ``op == name`` and the given top-level values."""
    return lambda line: line["op"] == name and all(line.get(k) == v for k, v in fields.items())


def clone(line: Line) -> Line:
    """A deep copy of one line."""
    return copy.deepcopy(line)
