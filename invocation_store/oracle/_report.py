"""What a trace check reports: divergences, malformed lines, the whole check (CIS-ORC-2).

:class:`Divergence` is the first observed outcome that differs from the kernel's,
:class:`MalformedTraceError` a line that is not valid trace JSON, :class:`CheckReport`
the outcome of a whole check. The line checkers build a :data:`Mismatch` (where,
expected, observed, requirement, message) and the oracle turns the first one into a
:class:`Divergence`. Kernel ``CODE_REQUIREMENTS`` names what a wrong answer with
each code violates (re-exported here for the checker's modules).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from attrs import frozen

__all__ = ["CODE_REQUIREMENTS", "CheckReport", "Divergence", "MalformedTraceError"]

from ..kernel import (
    CODE_REQUIREMENTS,
    CanonicalRecord,
    utf8_len,
)

_MAX_SHOWN: Final = 240


# ---------------------------------------------------------------------------
# Reports


@frozen(kw_only=True)
class Divergence:
    """The first observed outcome that differs from the kernel's (CIS-ORC-2).

    ``line`` is 1-based; ``where`` the JSON path of the differing value in the line;
    ``expected``/``observed`` JSON values; ``requirement`` the violated ID;
    ``message`` one sentence saying what went wrong.
    """

    line: int
    op: str
    where: str
    expected: Any
    observed: Any
    requirement: str
    message: str

    def render(self) -> str:
        """Human-readable, several lines (values shown as JSON, long ones shortened)."""
        return (
            f"line {self.line}: {self.op}: divergence [{self.requirement}] {self.message}\n"
            f"  at:       {self.where}\n"
            f"  expected: {_show(self.expected)}\n"
            f"  observed: {_show(self.observed)}"
        )

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form (for ``check-trace --json``)."""
        return {
            "status": "divergence",
            "line": self.line,
            "op": self.op,
            "where": self.where,
            "expected": self.expected,
            "observed": self.observed,
            "requirement": self.requirement,
            "message": self.message,
        }


class MalformedTraceError(Exception):
    """The trace is not valid trace JSON Lines at ``line`` (1-based).

    ``where`` is the JSON path in the line (``<line>`` for the whole line) and
    ``reason`` what is wrong; neither quotes the offending value.
    """

    def __init__(self, line: int, where: str, reason: str) -> None:
        super().__init__(f"line {line}: malformed trace: {where}: {reason}")
        self.line = line
        self.where = where
        self.reason = reason

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form (for ``check-trace --json``): ``reason`` is under ``message``."""
        return {"status": "malformed", "line": self.line, "where": self.where, "message": self.reason}


@frozen(kw_only=True)
class CheckReport:
    """Outcome of a whole check: ``divergence`` or ``malformed`` set, or neither (conforms).

    ``lines`` counts the lines read; ``peak_records``/``peak_calls`` the largest number
    of live records and unfinished calls held at once; ``unfinished`` the calls that
    never got a result line (crashed workers are allowed).
    """

    lines: int
    divergence: Divergence | None = None
    malformed: MalformedTraceError | None = None
    peak_records: int = 0
    peak_calls: int = 0
    unfinished: int = 0

    @property
    def exit_code(self) -> int:
        """0 conforms, 1 divergence, 2 malformed (CIS-ORC-2)."""
        if self.malformed is not None:
            return 2
        return 1 if self.divergence is not None else 0


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, sort_keys=True)
    if len(text) > _MAX_SHOWN:
        return f"{text[:_MAX_SHOWN]}... ({len(text)} characters)"
    return text


_Mismatch = tuple[str, Any, Any, str, str]  # where, expected, observed, requirement, message


def _mismatch(where: str, expected: Any, observed: Any, requirement: str, message: str) -> _Mismatch:
    return (where, expected, observed, requirement, message)


def _because(found: _Mismatch | None, explain: Callable[[], str] | None) -> _Mismatch | None:
    """``found`` with the kernel's quantities appended to its message (CIS-ORC-2)."""
    if found is None or explain is None:
        return found
    clause = explain()
    if not clause:
        return found
    where, expected, observed, requirement, message = found
    return (where, expected, observed, requirement, f"{message}: {clause}")


def _contains_raw(value: Any, raw: str | None) -> bool:
    """True if the agent-facing ``value`` (any JSON) carries the raw response."""
    if not raw:
        return False
    if isinstance(value, str):
        return value == raw or (len(raw) >= 16 and raw in value)
    if isinstance(value, dict):
        return any(_contains_raw(item, raw) for item in value.values())
    if isinstance(value, list):
        return any(_contains_raw(item, raw) for item in value)
    return False


#: Other counts of a text an implementation may take for its size in UTF-8 bytes (CIS-SIZE-1):
#: (the unit's name, the count). A JavaScript ``length`` or Java ``String.length()`` counts
#: UTF-16 code units; Java's ``getBytes(UTF_8)`` writes one replacement byte per lone surrogate.
SIZE_MISREADINGS: Final[tuple[tuple[str, Callable[[str], int]], ...]] = (
    ("UTF-16 code units", lambda text: len(text.encode("utf-16-le", "surrogatepass")) // 2),
    ("code points (characters)", len),
    ("bytes with one replacement byte per lone surrogate", lambda text: len(text.encode("utf-8", "replace"))),
)


def misread_sizes(text: str | None) -> tuple[int, ...]:
    """``text``'s count in each unit of :data:`SIZE_MISREADINGS` (0 each for None)."""
    if text is None:
        return (0,) * len(SIZE_MISREADINGS)
    if str.isascii(text):
        return (str.__len__(text),) * len(SIZE_MISREADINGS)
    return tuple(count(text) for _unit, count in SIZE_MISREADINGS)


def misread_charge(before: CanonicalRecord, after: CanonicalRecord) -> tuple[int, ...]:
    """What a completion ``before -> after`` charges its run counted in each misreading unit.

    The kernel's charge is ``max(0, record_bytes(after) - record_bytes(before))``, the
    raw response, agent result and scope it stored (CIS-RUN-6); the same texts counted
    in each unit of :data:`SIZE_MISREADINGS`.
    """

    def stored(record: CanonicalRecord) -> list[int]:
        counts = [0] * len(SIZE_MISREADINGS)
        for text in (record.raw_response, record.agent_result, record.scope):
            for n, count in enumerate(misread_sizes(text)):
                counts[n] += count
        return counts

    return tuple(max(0, a - b) for a, b in zip(stored(after), stored(before), strict=True))


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    size = utf8_len(text)
    return size if size is not None else len(text.encode("utf-8", "surrogatepass"))
