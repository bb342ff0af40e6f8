"""Every rule check-trace enforces has a fault it catches (CIS-ORC-2).

The rules are read from the checker's own code: every requirement ID it can name in a
divergence (string constants of ``invocation_store/oracle/_checker.py`` and the modules
it is split into, docstrings aside). Each must have at least one fault below whose
trace the oracle rejects naming that ID, except the few no conforming sequence of
events can reach (listed with the reason). Faults are matched by requirement ID, never by message text.

Two kinds of faults:

- implementations (``_faults``): wrappers around a correct store or boundary that
  plant one bug (a spurious refusal per code, a shortened expiry, an ignored limit,
  and the faults of ``test_faulty_implementations``);
- reported outcomes: a correct run's trace with one observation changed the way a
  faulty implementation in any language would report it (its read loses a field, its
  sweep miscounts, its executor runs twice). The oracle sees only traces, so this is
  exactly what it is given by such an implementation.
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import invocation_store.kernel._codes as codes_module
import invocation_store.oracle._calls as calls_module
import invocation_store.oracle._checker as checker_module
import invocation_store.oracle._compare as compare_module
import invocation_store.oracle._decode as decode_module
import invocation_store.oracle._reads as reads_module
import invocation_store.oracle._report as report_module
import invocation_store.oracle._runs as runs_module
import invocation_store.oracle._state as state_module
from invocation_store.adapters import MemoryStore
from invocation_store.kernel import ErrorCode, Limits
from invocation_store.oracle import check_lines
from invocation_store.testing import FakeClock

from . import _faults
from ._scenario import LIMITS, RUN, TTL_MS, envelope, open_run, record_scenario, recorder

Lines = list[dict[str, Any]]

#: Requirement IDs a divergence can carry but no trace reaches, with the reason.
UNREACHABLE = {
    "CIS-STORE-3": (
        "a call's completion meets a live PROJECTING record of another invocation only if two "
        "invocations hold one key at once, which admission refuses (a duplicate or a replay)"
    ),
    "CIS-STORE-8": (
        "the fallback when an ended call has no error code to name: every ERROR record carries a "
        "code, and every code has a requirement in CODE_REQUIREMENTS"
    ),
}


def checker_requirements() -> set[str]:
    """The requirement IDs the checker's code can name (string constants, docstrings excluded)."""
    found = set()
    for module in CHECKER_MODULES:
        found |= _requirements_in(Path(module.__file__))
    return found


#: The checker and the modules it is split into, by concern, and the kernel's table of
#: each code's requirement, which the checker names a wrong code by.
CHECKER_MODULES = (
    codes_module,
    checker_module,
    decode_module,
    report_module,
    state_module,
    compare_module,
    runs_module,
    calls_module,
    reads_module,
)


def _requirements_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
            parts = text.split("-")
            if len(parts) == 3 and parts[0] == "CIS" and parts[1].isalpha() and parts[2].isdigit():
                found.add(text)
    return found


# -- implementations --------------------------------------------------------------------


def _refused_victim(code: ErrorCode) -> Callable[[], str]:
    def trace() -> str:
        clock = FakeClock()
        boundary, _hooks, sink = recorder(
            MemoryStore(clock), clock, boundary_factory=_faults.factory(_faults.refusing(code))
        )
        context = open_run(boundary, clock)
        boundary.invoke(context, envelope("search", "victim"))
        return sink.getvalue()

    return trace


def _early_expiry() -> str:
    clock = FakeClock()
    boundary, _hooks, sink = recorder(_faults.EarlyExpiringStore(MemoryStore(clock)), clock)
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))
    clock.advance(TTL_MS // 2 + 1)
    boundary.read(RUN, "call_1")
    return sink.getvalue()


def _record_limit_ignored() -> str:
    clock = FakeClock()
    store = _faults.RecordLimitIgnoringStore(clock)
    boundary, _hooks, sink = recorder(store, clock, limits=Limits(request_bytes=128, record_bytes=24))
    context = open_run(boundary, clock)
    boundary.invoke(context, envelope("search", "call_1"))  # 5 + 6 + 6 + 9 = 26 record bytes
    return sink.getvalue()


def _wrapped(
    cls: type[_faults.WrappedBoundary], store: Any, steps: Callable[[Any, Any, FakeClock], None]
) -> str:
    clock = FakeClock()
    boundary, _hooks, sink = recorder(store(clock), clock, boundary_factory=_faults.factory(cls))
    context = open_run(boundary, clock)
    steps(boundary, context, clock)
    return sink.getvalue()


def _store_fault(store: Callable[[FakeClock], Any], steps: Callable[[Any, Any, FakeClock], None]) -> str:
    return _wrapped(_faults.WrappedBoundary, store, steps)


def _read_later(boundary: Any, context: Any, clock: FakeClock) -> None:
    boundary.invoke(context, envelope("search", "call_1"))
    clock.advance(5_000)
    boundary.read(RUN, "call_1")


def _misreported_size(unit: str) -> Callable[[], str]:
    """A correct run's trace whose submit reports the request size in ``unit`` instead of UTF-8 bytes."""

    def trace() -> str:
        clock = FakeClock()
        boundary, _hooks, sink = recorder(MemoryStore(clock), clock)
        context = open_run(boundary, clock)
        arguments = '{"q":"\U0001f600\u00e9"}'  # 14 UTF-8 bytes, 11 UTF-16 units, 10 code points
        boundary.invoke(context, envelope("search", "call_1", arguments=arguments))
        lines = [json.loads(line) for line in sink.getvalue().splitlines()]
        submit = next(line for line in lines if line["op"] == "submit")
        units = {"utf-16": len(arguments.encode("utf-16-le")) // 2, "code points": len(arguments)}
        submit["observed"]["record"]["request_bytes"] = units[unit]
        return "".join(json.dumps(line) + "\n" for line in lines)

    return trace


#: A refusal the checker names more specifically than the code's own requirement: a
#: REQUEST_TOO_LARGE for arguments within the request limit misjudged the record limit.
_REFUSAL_REQUIREMENT: dict[ErrorCode, str] = {ErrorCode.REQUEST_TOO_LARGE: "CIS-SIZE-5"}

IMPLEMENTATIONS: dict[str, tuple[str, Callable[[], str]]] = {
    **{
        f"refuses-with-{code.value}": (
            _REFUSAL_REQUIREMENT.get(code, report_module.CODE_REQUIREMENTS[code]),
            _refused_victim(code),
        )
        for code in ErrorCode
    },
    "expires-early": ("CIS-TTL-1", _early_expiry),
    "ignores-the-record-limit": ("CIS-SIZE-5", _record_limit_ignored),
    "refreshes-ttl-on-read": (
        "CIS-TTL-5",
        lambda: _store_fault(lambda c: _faults.RefreshingStore(MemoryStore(c)), _read_later),
    ),
    "reports-a-longer-ttl": (
        "CIS-TTL-2",
        lambda: _store_fault(lambda c: _faults.LongerTtlStore(MemoryStore(c)), _read_later),
    ),
    "accepts-duplicates": (
        "CIS-ID-5",
        lambda: _store_fault(
            _faults.DuplicateAcceptingStore,
            lambda b, ctx, _c: [b.invoke(ctx, envelope("search", "call_1")) for _ in range(2)],
        ),
    ),
    "leaks-raw-to-the-agent": (
        "CIS-BND-4",
        lambda: _wrapped(
            _faults.RawLeakingBoundary,
            MemoryStore,
            lambda b, ctx, _c: b.invoke(ctx, envelope("search", "c1")),
        ),
    ),
    "sweeps-terminal-records": (
        "CIS-LIFE-3",
        lambda: _wrapped(
            _faults.TerminalSweepingBoundary,
            _faults.TokenOnlyCasStore,
            lambda b, ctx, c: (
                b.invoke(ctx, envelope("search", "c1")),
                c.advance(1_000),
                b.sweep_stale(ctx, 500),
            ),
        ),
    ),
    "authorizes-before-parsing": (
        "CIS-PRE-2",
        lambda: _wrapped(
            _faults.AuthorizationFirstBoundary,
            MemoryStore,
            lambda b, ctx, _c: b.invoke(ctx, envelope("secret", "c2", arguments="[1]")),
        ),
    ),
    "request-size-in-utf16-units": ("CIS-SIZE-1", _misreported_size("utf-16")),
    "request-size-in-code-points": ("CIS-SIZE-1", _misreported_size("code points")),
}


# -- reported outcomes ------------------------------------------------------------------


def _index(lines: Lines, op: str, tool_call_id: str | None = None, nth: int = 0) -> int:
    """Index of the ``nth`` line of ``op`` about ``tool_call_id`` (by its call number for call lines)."""
    calls = {
        line["call"]
        for line in lines
        if line["op"] == "submit" and line["envelope"]["tool_call_id"] == tool_call_id
    }
    found = [
        index
        for index, line in enumerate(lines)
        if line["op"] == op
        and (tool_call_id is None or line.get("call") in calls or line.get("tool_call_id") == tool_call_id)
    ]
    return found[nth]


def _set(op: str, tool_call_id: str | None, path: str, value: Any, nth: int = 0) -> Callable[[Lines], Lines]:
    """An edit setting ``path`` (dot-separated) of one line to ``value``."""

    def edit(lines: Lines) -> Lines:
        target = lines[_index(lines, op, tool_call_id, nth)]
        *parents, last = path.split(".")
        for name in parents:
            target = target[name]
        target[last] = value(target[last]) if callable(value) else value
        return lines

    return edit


def _move(
    op: str, tool_call_id: str, *, after_op: str | None, as_call_of: str | None = None
) -> Callable[[Lines], Lines]:
    """An edit copying (``after_op`` given: after that line of the call) or removing one line."""

    def edit(lines: Lines) -> Lines:
        index = _index(lines, op, tool_call_id)
        line = lines.pop(index) if after_op is None else copy.deepcopy(lines[index])
        if after_op is None:
            return lines
        if as_call_of is not None:
            line["call"] = lines[_index(lines, "submit", as_call_of)]["call"]
        anchor = _index(lines, after_op, as_call_of or tool_call_id)
        line["now_ms"] = lines[anchor]["now_ms"]
        lines.insert(anchor + 1, line)
        return lines

    return edit


def _copy_record(lines: Lines) -> Lines:
    """The expired call_0 still reads as the record it was (a store that serves expired records)."""
    live = lines[_index(lines, "read", "call_0", 0)]["observed"]["record"]
    lines[_index(lines, "read", "call_0", 1)]["observed"]["record"] = copy.deepcopy(live)
    return lines


def _swap_facts(lines: Lines) -> Lines:
    facts = lines[_index(lines, "progress")]["observed"]["facts"]
    facts[0], facts[1] = facts[1], facts[0]
    return lines


REPORTED: dict[str, tuple[str, Callable[[Lines], Lines]]] = {
    "open-refused": (
        "CIS-RUN-1",
        _set("run_open", None, "observed", {"code": "INVALID_TRANSITION", "run": None}),
    ),
    "retried-open-refused": (
        "CIS-RETRY-3",
        _set("run_open", None, "observed", {"code": "INVALID_TRANSITION", "run": None}, nth=1),
    ),
    "cancel-refused": (
        "CIS-RUN-2",
        _set("run_cancel", None, "observed", {"code": "INVALID_TRANSITION", "run": None}),
    ),
    "open-counts-a-call": ("CIS-RUN-5", _set("run_open", None, "observed.run.tool_calls_used", 1)),
    "open-counts-bytes": ("CIS-RUN-6", _set("run_open", None, "observed.run.bytes_used", 1)),
    "admits-without-a-token": ("CIS-RETRY-1", _set("submit", "call_0", "token", None)),
    "admits-oversized-arguments": ("CIS-SIZE-2", _set("submit", "call_z", "observed.code", None)),
    "admits-without-a-record": ("CIS-REC-4", _set("submit", "call_0", "observed.record", None)),
    "creates-with-an-outcome": (
        "CIS-LIFE-5",
        _set("submit", "call_0", "observed.record.evidence_status", "EVIDENCE_FOUND"),
    ),
    "creates-under-another-id": (
        "CIS-ID-4",
        _set("submit", "call_0", "observed.record.tool_call_id", "call_00"),
    ),
    "stores-another-request": (
        "CIS-REC-2",
        _set("submit", "call_0", "observed.record.request_bytes", lambda v: v + 1),
    ),
    "expiry-not-creation-plus-ttl": (
        "CIS-TTL-1",
        _set("submit", "call_0", "observed.record.expires_at_ms", lambda v: v - 1),
    ),
    "creation-time-moved": (
        "CIS-REC-1",
        _set("submit", "call_0", "observed.record.created_at_ms", lambda v: v - 1),
    ),
    "executor-runs-after-the-answer": ("CIS-BND-6", _move("execute", "call_2", after_op="result")),
    "projector-before-executor": ("CIS-BND-1", _move("execute", "call_0", after_op=None)),
    "executor-runs-for-a-refused-call": (
        "CIS-PRE-1",
        _move("execute", "call_2", after_op="submit", as_call_of="call_z"),
    ),
    "projector-after-an-oversized-raw": (
        "CIS-SIZE-3",
        _move("project", "call_0", after_op="execute", as_call_of="call_5"),
    ),
    "answer-is-not-the-projection": (
        "CIS-REC-5",
        _set("result", "call_0", "observed.result.content", "other"),
    ),
    "negative-observation-turned-failure": (
        "CIS-EVID-3",
        _set("result", "call_1", "observed.result.ok", False),
    ),
    "negative-flag-flipped": ("CIS-EVID-4", _set("result", "call_0", "observed.result.negative", True)),
    "message-with-details": (
        "CIS-ERR-1",
        _set("result", "call_2", "observed.result.message", "boom: secret"),
    ),
    "unsafe-id-echoed": ("CIS-ERR-1", _set("result", "call 1", "observed.result.tool_call_id", "call 1")),
    "safe-id-echoed-wrong": ("CIS-ID-4", _set("result", "call_0", "observed.result.tool_call_id", "call_00")),
    "read-of-another-run": ("CIS-STORE-6", _set("read", "call_0", "observed.record.run_id", "run-b")),
    "tool-name-rewritten": ("CIS-LIFE-6", _set("read", "call_0", "observed.record.tool_name", "other")),
    "raw-response-cut": ("CIS-REC-3", _set("read", "call_0", "observed.record.raw_bytes", lambda v: v - 1)),
    "raw-dropped-on-projection-failure": (
        "CIS-FAIL-6",
        _set("project", "call_7", "observed.record.raw_bytes", None),
    ),
    "error-with-other-evidence": (
        "CIS-EVID-1",
        _set("execute", "call_2", "observed.record.evidence_status", "NO_EVIDENCE"),
    ),
    "ttl-grows-on-completion": (
        "CIS-TTL-3",
        _set("project", "call_0", "observed.record.ttl_remaining_ms", lambda v: v + 10_000_000),
    ),
    "serves-an-expired-record": ("CIS-TTL-4", _copy_record),
    "evidence-cited-otherwise": ("CIS-REF-1", _set("cite", "call_0", "observed.citation.content", "other")),
    "negative-cited-otherwise": ("CIS-REF-2", _set("cite", "call_1", "observed.citation.scope", "elsewhere")),
    "missing-cited-as-evidence": ("CIS-REF-3", _set("cite", "nope", "observed.citation.kind", "EVIDENCE")),
    "facts-out-of-order": ("CIS-PROG-2", _swap_facts),
    "exclusions-miscounted": ("CIS-PROG-3", _set("progress", None, "observed.excluded", {"ERROR": 99})),
    "omissions-miscounted": ("CIS-PROG-4", _set("progress", None, "observed.omitted", 1)),
    "sweep-miscounted": ("CIS-LIFE-7", _set("sweep", None, "observed.swept", 2)),
}


@pytest.fixture(scope="module")
def correct_trace() -> Lines:
    """A whole scenario recorded from the memory store, which conforms."""
    clock = FakeClock()
    text = record_scenario(MemoryStore(clock), clock)
    assert check_lines(text.splitlines(keepends=True)).exit_code == 0
    return [json.loads(line) for line in text.splitlines()]


def _requirement_of(text: str) -> str:
    report = check_lines(text.splitlines(keepends=True))
    assert report.malformed is None, report.malformed
    assert report.divergence is not None, "the oracle accepted a faulty trace"
    return report.divergence.requirement


@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_each_faulty_implementation_is_rejected_for_its_requirement(name: str) -> None:
    """CIS-ORC-2, CIS-TTL-1: every planted bug diverges, naming the requirement it breaks."""
    requirement, trace = IMPLEMENTATIONS[name]
    assert _requirement_of(trace()) == requirement


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_each_faulty_report_is_rejected_for_its_requirement(correct_trace: Lines, name: str) -> None:
    """CIS-ORC-2: one wrong observation in a correct trace diverges, naming the requirement it breaks."""
    requirement, edit = REPORTED[name]
    lines = edit(copy.deepcopy(correct_trace))
    assert _requirement_of("".join(json.dumps(line) + "\n" for line in lines)) == requirement


def test_every_rule_of_the_checker_has_a_fault() -> None:
    """CIS-ORC-2: each requirement the checker can name has a fault caught for it (or a reason it
    cannot be reached); a rule added to the checker without a fault fails here."""
    rules = checker_requirements()
    assert len(rules) > 40, sorted(rules)  # the scan really reads the checker
    covered = {requirement for requirement, _ in (*IMPLEMENTATIONS.values(), *REPORTED.values())}
    assert sorted(rules - covered - set(UNREACHABLE)) == []
    assert set(UNREACHABLE) <= rules - covered  # no stale exemption
    assert covered <= rules


def test_the_scenario_limits_are_the_recorders() -> None:
    """CIS-ORC-1: the faults run under the scenario's limits unless they say otherwise."""
    assert LIMITS.request_bytes == 128
