"""The verdicts of ``check-history``: violations, undecided runs, the report (CIS-HIST-2).

Payload-free by construction: every summary of a store result names ids, codes,
statuses, sequence numbers and tokens, never request or response text.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import attrs
from attrs import frozen

from ..codec import unstructure
from ..kernel import Admission, CanonicalRecord, ErrorCode, RunState, text_bytes
from ._format import HistoryOp

__all__ = [
    "REQUIREMENT",
    "HistoryReport",
    "OrderTried",
    "Undecided",
    "Violation",
    "difference",
    "disagreement",
    "json_value",
    "summary",
]

#: The requirement a non-linearizable history violates.
REQUIREMENT: Final = "CIS-HIST-2"
#: The most orders of a window tried, and shown.
MAX_ORDERS: Final = 720
SHOWN_ORDERS: Final = 24


@frozen(kw_only=True)
class OrderTried:
    """One order of the window's operations and why the kernel refuses it.

    ``op_ids`` in the order tried; ``failed_op`` the first that could not return
    what it returned there (None when the order breaks real time); ``expected`` the
    kernel's result for it there (JSON-ready); ``reason`` a one-line summary.
    """

    op_ids: tuple[int, ...]
    failed_op: int | None
    expected: Any
    reason: str


@frozen(kw_only=True)
class Violation:
    """A run whose history is not linearizable, with a minimal window (CIS-HIST-2).

    ``run_id``; ``first_unexplained`` the operation whose completion ends the shortest
    non-linearizable prefix; ``window`` the operations whose observed results
    together contradict the kernel (every other operation relaxed to an unknown
    outcome); ``orders`` the orders of the window tried; ``requirement`` CIS-HIST-2
    and ``rule`` the requirement of the kernel rule that disagreed. ``key`` is the
    tool_call_id when one key's operations alone contradict the kernel (None: the
    run's). ``minimal`` is False when the budget ran out while shrinking the window;
    ``orders_tried`` how many orders were tried (None: all of them, up to the bound).
    """

    run_id: str
    first_unexplained: HistoryOp
    window: tuple[HistoryOp, ...]
    orders: tuple[OrderTried, ...]
    orders_total: int
    requirement: str
    rule: str
    key: str | None = None
    minimal: bool = True
    orders_tried: int | None = None

    def render(self) -> str:
        """The human-readable report (payload-free: ids, codes, statuses and lines)."""
        first = self.first_unexplained
        scope = f" in run {self.run_id}" + (f", key {self.key}" if self.key is not None else "")
        rules = self.requirement if self.rule == self.requirement else f"{self.requirement}, {self.rule}"
        out = [
            f"check-history: not linearizable [{rules}]{scope}",
            f"  first completion no order explains: {first.describe()} (line {first.complete_line})",
            f"  window ({len(self.window)} operations whose observed results contradict the kernel"
            + ("" if self.minimal else "; the budget ran out before it was shrunk further")
            + "):",
        ]
        out.extend(
            f"    {op.describe()}, lines {op.invoke_line}-{op.complete_line}: observed {summary(op.result)}"
            for op in self.window
        )
        attempted = min(self.orders_total, MAX_ORDERS) if self.orders_tried is None else self.orders_tried
        count = str(attempted) if attempted == self.orders_total else f"{attempted} of {self.orders_total}"
        out.append(f"  orders tried ({count}, other operations placed wherever they fit):")
        for tried in self.orders:
            sequence = ", ".join(f"op {op_id}" for op_id in tried.op_ids)
            out.append(f"    {sequence}: {tried.reason}")
        if attempted > len(self.orders):
            out.append(f"    ... {attempted - len(self.orders)} more tried, not shown")
        return "\n".join(out)

    def as_json(self) -> dict[str, Any]:
        """The verdict as one JSON-ready object (``--json``)."""
        return {
            "status": "not_linearizable",
            "requirement": self.requirement,
            "rule": self.rule,
            "run_id": self.run_id,
            "key": self.key,
            "minimal": self.minimal,
            "first_unexplained": self.first_unexplained.op_id,
            "window": [_op_json(op) for op in self.window],
            "orders": [
                {"ids": list(t.op_ids), "failed": t.failed_op, "expected": t.expected, "reason": t.reason}
                for t in self.orders
            ],
            "orders_total": self.orders_total,
        }


@frozen(kw_only=True)
class Undecided:
    """A run the budget could not decide (CIS-HIST-2): exit code 3.

    ``run_id``; ``limit`` ``"states"`` (``Budget.max_states`` configurations held) or
    ``"seconds"`` (``Budget.max_seconds`` CPU seconds spent); ``window`` the
    operations with a known result not yet placed at the deepest point the search
    reached (where a linearization could not be found nor ruled out); ``placed`` how
    many were placed there; ``operations`` the run's; ``lines`` the first and last
    line of the run's operations.
    """

    run_id: str
    limit: str
    window: tuple[HistoryOp, ...]
    placed: int
    operations: int
    lines: tuple[int, int]

    def render(self) -> str:
        """The human-readable report: the run, the limit reached, the window."""
        out = [
            f"check-history: undecided within the budget [{REQUIREMENT}] in run {self.run_id} "
            f"({self.operations} operations, lines {self.lines[0]}-{self.lines[1]}): the {self.limit} "
            f"budget ran out after {self.placed} operations were placed",
            f"  window ({len(self.window)} operations not yet placed at the deepest point):",
        ]
        out.extend(
            f"    {op.describe()}, lines {op.invoke_line}-{op.complete_line}"
            for op in self.window[:SHOWN_ORDERS]
        )
        if len(self.window) > SHOWN_ORDERS:
            out.append(f"    ... {len(self.window) - SHOWN_ORDERS} more")
        out.append("  raise --max-states or --max-seconds (spec/history.md section 4) to decide it")
        return "\n".join(out)

    def as_json(self) -> dict[str, Any]:
        """The undecided run as one JSON-ready object."""
        return {
            "run_id": self.run_id,
            "limit": self.limit,
            "placed": self.placed,
            "operations": self.operations,
            "lines": list(self.lines),
            "window": [_op_json(op) for op in self.window],
        }


@frozen(kw_only=True)
class HistoryReport:
    """The verdict on a history: ``violation`` (None when none was found) and ``undecided`` runs.

    ``operations`` checked, ``unknown`` of them with an unknown outcome, ``runs``
    (partitions searched), ``lines`` read, ``states`` explored by every search.
    """

    lines: int
    operations: int
    unknown: int
    runs: int
    violation: Violation | None
    undecided: tuple[Undecided, ...] = ()
    states: int = 0

    @property
    def exit_code(self) -> int:
        """0 linearizable, 1 not, 3 undecided within the budget (no run found not linearizable)."""
        if self.violation is not None:
            return 1
        return 3 if self.undecided else 0

    def as_json(self) -> dict[str, Any]:
        """The verdict as one JSON-ready object (``--json``)."""
        if self.violation is not None:
            verdict = self.violation.as_json()
            verdict["undecided"] = [run.as_json() for run in self.undecided]
            return verdict
        counts = {
            "lines": self.lines,
            "operations": self.operations,
            "unknown": self.unknown,
            "runs": self.runs,
        }
        if self.undecided:
            return {"status": "undecided", **counts, "undecided": [run.as_json() for run in self.undecided]}
        return {"status": "linearizable", **counts}


def _op_json(op: HistoryOp) -> dict[str, Any]:
    return {
        "id": op.op_id,
        "process": op.process,
        "op": op.name,
        "invoke_line": op.invoke_line,
        "complete_line": op.complete_line,
        "observed": summary(op.result),
    }


def summary(value: Any) -> str:
    """A payload-free summary of a store result: codes, statuses, sequence numbers, ids."""
    if value is None:
        return "null (absent)"
    if isinstance(value, ErrorCode):
        return value.value
    if isinstance(value, Admission):
        record = value.record
        replay = ", replayed" if value.replayed else ""
        return (
            f"admitted {record.tool_call_id} sequence {record.sequence}{replay} "
            f"(run: {value.run.tool_calls_used} calls, {value.run.bytes_used} bytes used)"
        )
    if isinstance(value, CanonicalRecord):
        detail = value.error_code.value if value.error_code is not None else value.evidence_status
        suffix = f"/{detail}" if detail is not None else ""
        return f"{value.tool_call_id} {value.status.value}{suffix} token {value.invocation_token}"
    if isinstance(value, RunState):
        return f"run {value.status.value} ({value.tool_calls_used} calls, {value.bytes_used} bytes used)"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{tcid}: {summary(rec)}" for tcid, rec in value.items()) + "}"
    if isinstance(value, tuple):
        return "[" + ", ".join(value) + "]"
    return type(value).__name__


def json_value(value: Any) -> Any:
    if isinstance(value, ErrorCode):
        return value.value
    if isinstance(value, dict):
        return {tcid: json_value(rec) for tcid, rec in value.items()}
    if isinstance(value, tuple):
        return list(value)
    return unstructure(value) if value is not None else None


#: Record fields holding payload text: a difference in them is shown by size and hash only.
_PAYLOAD_FIELDS: Final = frozenset({"tool_name", "request_json", "raw_response", "agent_result", "scope"})


def _text_facts(value: str | None) -> str:
    return "absent" if value is None else f"{text_bytes(value)} bytes"


def _payload_difference(name: str, expected: str | None, observed: str | None) -> str:
    """``name (12 vs 14 bytes)``, or with equal sizes a short SHA-256 of each (never the text)."""
    facts = f"{_text_facts(expected)} vs {_text_facts(observed)}"
    if expected is not None and observed is not None and text_bytes(expected) == text_bytes(observed):
        digests = [
            hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
            for text in (expected, observed)
        ]
        facts += f", sha256 {digests[0]} vs {digests[1]}"
    return f"{name} ({facts})"


def _plain(value: Any) -> str:
    """An id, token, status, code, counter or time as the history format writes it (``null`` for None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(json_value(value))


def _field_differences(prefix: str, expected: Any, observed: Any) -> list[str]:
    parts = []
    for field in attrs.fields(type(expected)):
        want, seen = getattr(expected, field.name), getattr(observed, field.name)
        if want == seen:
            continue
        name = prefix + field.name
        if field.name in _PAYLOAD_FIELDS:
            parts.append(_payload_difference(name, want, seen))
        else:
            parts.append(f"{name} ({_plain(want)} vs {_plain(seen)})")
    return parts


def difference(expected: Any, observed: Any) -> str:
    """The fields in which two store results of one kind differ, payload-free; "" when there are none.

    Records, runs and admissions are compared field by field: ids, tokens, statuses,
    codes, counters and times are shown as ``name (expected vs observed)``; payload
    text (tool name, request, raw response, agent result, scope) only by its UTF-8
    size and, when the sizes agree, a short SHA-256 of each. Reads of several records
    name the ids whose records differ.
    """
    if type(expected) is not type(observed) or expected == observed:
        return ""
    parts: list[str] = []
    if isinstance(expected, Admission):
        if expected.replayed != observed.replayed:
            parts.append(f"replayed ({_plain(expected.replayed)} vs {_plain(observed.replayed)})")
        parts += _field_differences("record.", expected.record, observed.record)
        parts += _field_differences("run.", expected.run, observed.run)
    elif isinstance(expected, CanonicalRecord | RunState):
        parts = _field_differences("", expected, observed)
    elif isinstance(expected, dict):
        for tcid in sorted(set(expected) | set(observed)):
            inner = difference(expected.get(tcid), observed.get(tcid))
            if inner:
                parts.append(f"{tcid}: {inner}")
            elif expected.get(tcid) != observed.get(tcid):
                parts.append(f"{tcid} ({summary(expected.get(tcid))} vs {summary(observed.get(tcid))})")
    return ", ".join(parts)


def disagreement(op: HistoryOp, expected: Any) -> str:
    """``the kernel returns X, observed Y`` for ``op``, naming the fields that differ (payload-free)."""
    text = f"the kernel returns {summary(expected)}, observed {summary(op.result)}"
    differing = difference(expected, op.result)
    return f"{text}; they differ in {differing}" if differing else text
