"""The reference oracle: replay a trace through the kernel, stop at the first divergence.

Theory of operation
-------------------
:class:`Oracle` holds what a store would hold, decided only by the kernel: run states,
live records by key, each run's completed and PROJECTING ids, and the calls in
flight. Each trace line is checked for shape (:mod:`._validate`), then replayed: the
kernel computes what the implementation should have observed, and the line's
``observed`` object is compared with it. The first difference is a
:class:`Divergence` naming the line, the operation, the JSON path, the expected and
observed values and the requirement ID it violates (CIS-ORC-2). A line that is not
valid trace JSON raises :class:`MalformedTraceError`.

The replay model is the boundary's: a call's worker holds its own copy of the record
it created, applies the executor's and the projector's outcomes to that copy with
:func:`~invocation_store.kernel.transition`, and completes it with one
compare-and-set (:func:`~invocation_store.kernel.decide_complete`) against what the
store holds at that time, so a sweep that won the race makes the completion
INVALID_TRANSITION.

Memory grows with live state only, never with the trace's length: records and runs
are dropped when the trace clock passes their expiry (a heap of expiry times), a
call is dropped when its result line arrives, and lines are read one at a time.
"""

from __future__ import annotations

import functools
import heapq
import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Final, cast

from attrs import frozen

from ..kernel import AdmissionRequest as _AdmissionRequest
from ..kernel import (
    CanonicalRecord,
    CitationKind,
    CompareAndSet,
    Completion,
    ErrorCode,
    EvidenceStatus,
    Failed,
    InvocationStatus,
    Limits,
    Projection,
    ProjectionReceived,
    RawReceived,
    RunContext,
    RunState,
    SweptStale,
    ToolCallEnvelope,
    ToolPolicy,
    admit,
    cancel_run,
    check_envelope,
    cite,
    close_run,
    decide_completion,
    is_live,
    is_safe_id,
    live,
    open_run,
    project_progress,
    remaining_ms,
    sweep_candidates,
    text_bytes,
    transition,
    utf8_len,
)
from ._explain import explain_admission, explain_projection, explain_raw, explain_sweep
from ._model import LINE_TYPES, TRACE_FORMAT, TRACE_VERSION, Header
from ._validate import ShapeError, line_checker, structure_line
from ._views import citation_view, fact_view, failure_view, outcome_view, record_view, run_view

__all__ = ["CheckReport", "Divergence", "MalformedTraceError", "Oracle", "check_lines", "decode_line"]

#: Requirement of each preflight/admission code: what a wrong answer with it violates.
CODE_REQUIREMENTS: Final[dict[ErrorCode, str]] = {
    ErrorCode.MISSING_TOOL_CALL_ID: "CIS-ID-2",
    ErrorCode.UNSAFE_TOOL_CALL_ID: "CIS-ID-3",
    ErrorCode.RUN_MISMATCH: "CIS-PRE-3",
    ErrorCode.INVALID_ARGUMENTS: "CIS-JSON-1",
    ErrorCode.REQUEST_TOO_LARGE: "CIS-SIZE-2",
    ErrorCode.UNAUTHORIZED: "CIS-PRE-5",
    ErrorCode.NOT_READ_ONLY: "CIS-PRE-6",
    ErrorCode.RUN_INACTIVE: "CIS-RUN-3",
    ErrorCode.RUN_DEADLINE_EXCEEDED: "CIS-RUN-4",
    ErrorCode.DUPLICATE_TOOL_CALL: "CIS-ID-5",
    ErrorCode.TOOL_BUDGET_EXHAUSTED: "CIS-RUN-5",
    ErrorCode.RUN_BYTES_EXHAUSTED: "CIS-RUN-6",
    ErrorCode.EXECUTION_FAILED: "CIS-FAIL-2",
    ErrorCode.EXECUTION_TIMEOUT: "CIS-FAIL-3",
    ErrorCode.SERIALIZATION_FAILED: "CIS-FAIL-4",
    ErrorCode.PROJECTION_FAILED: "CIS-EVID-5",
    ErrorCode.PROJECTION_INVALID: "CIS-EVID-5",
    ErrorCode.RESULT_TOO_LARGE: "CIS-SIZE-4",
    ErrorCode.STALE_PROJECTION: "CIS-LIFE-7",
    ErrorCode.NOT_STALE: "CIS-LIFE-7",
    ErrorCode.STORE_UNAVAILABLE: "CIS-FAIL-5",
    ErrorCode.INVALID_TRANSITION: "CIS-LIFE-2",
    ErrorCode.DURABILITY_NOT_REACHED: "CIS-DUR-2",
}

_EXECUTOR_FAILURES: Final[dict[str, ErrorCode]] = {
    "raised": ErrorCode.EXECUTION_FAILED,
    "timeout": ErrorCode.EXECUTION_TIMEOUT,
    "not_serializable": ErrorCode.SERIALIZATION_FAILED,
}
_PROJECTOR_FAILURES: Final[dict[str, ErrorCode]] = {
    "raised": ErrorCode.PROJECTION_FAILED,
    "invalid": ErrorCode.PROJECTION_INVALID,
}

# Call stages.
_EXECUTE: Final = 0  # admitted, awaiting the executor's outcome
_PROJECT: Final = 1  # raw received, awaiting the projector's outcome
_ENDED: Final = 2  # answer decided, awaiting the result line

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


# ---------------------------------------------------------------------------
# Decoding


class _DuplicateKeyError(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _DuplicateKeyError("duplicate member name")
    return obj


def _no_constant(_name: str) -> Any:
    raise ValueError("NaN and Infinity are not JSON")


_DECODER: Final = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_no_constant)
#: The decoder's C scanner (an instance attribute: ``JSONDecoder.__init__`` sets it).
_SCAN: Final = cast(Callable[[str, int], tuple[Any, int]], vars(_DECODER)["scan_once"])


#: The hot path's decoder: JSON objects become tuples of pairs (a C call, no Python
#: frame per object); the line checkers turn them into dicts and reject repeated names.
_FAST_DECODER: Final = json.JSONDecoder(object_pairs_hook=tuple, parse_constant=_no_constant)
_FAST_SCAN: Final = cast(Callable[[str, int], tuple[Any, int]], vars(_FAST_DECODER)["scan_once"])


#: Longest integer literal a trace may carry (CIS-JSON-6), and a run of digits.
_MAX_INT_DIGITS: Final = 4300
_DIGIT_RUN: Final = re.compile(r"[0-9]{4301,}")


def _decode(text: str, line: int, *, fast: bool) -> Any:
    scan, decoder = (_FAST_SCAN, _FAST_DECODER) if fast else (_SCAN, _DECODER)
    try:
        if text[:1] == "{":
            value, end = scan(text, 0)  # the C scanner directly: a line is one value
            if end != len(text) and text[end:].strip(" \t\r\n"):
                raise ValueError("extra data")
            return value
        return decoder.decode(text)
    except StopIteration:
        raise MalformedTraceError(line, "<line>", "not valid JSON") from None
    except _DuplicateKeyError:
        raise MalformedTraceError(line, "<line>", "duplicate member name") from None
    except (ValueError, RecursionError):
        longest = max((len(match) for match in _DIGIT_RUN.findall(text)), default=0)
        if longest > _MAX_INT_DIGITS:
            raise MalformedTraceError(
                line,
                "<line>",
                f"an integer literal of {longest} digits: I-JSON allows at most {_MAX_INT_DIGITS} "
                "here (CIS-JSON-6)",
            ) from None
        raise MalformedTraceError(line, "<line>", "not valid JSON") from None


def decode_line(text: str, line: int) -> dict[str, Any]:
    """Decode one trace line strictly: one JSON object, I-JSON rules (no duplicate names,
    no NaN/Infinity, integers within the conversion limit). Raises :class:`MalformedTraceError`."""
    obj = _decode(text, line, fast=False)
    if type(obj) is not dict:
        raise MalformedTraceError(line, "<line>", "a trace line is a JSON object")
    return obj


def _decode_fast(text: str, line: int) -> dict[str, Any]:
    """:func:`decode_line` for :meth:`Oracle.feed`: nested objects stay pair tuples until
    the line's checker converts them (and rejects repeated names) in place."""
    pairs = _decode(text, line, fast=True)
    if type(pairs) is not tuple:
        raise MalformedTraceError(line, "<line>", "a trace line is a JSON object")
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise MalformedTraceError(line, "<line>", "duplicate member name")
    return obj


# ---------------------------------------------------------------------------
# Replay state


class _Call:
    """One call in flight: the worker's copy of its record and what it awaits."""

    __slots__ = (
        "admitted",
        "before",
        "copy",
        "echo",
        "end_requirement",
        "expected",
        "explain",
        "explain_submit",
        "key",
        "raw",
        "record_requirement",
        "stage",
    )

    def __init__(self, key: tuple[str, str], echo: str | None) -> None:
        self.key = key
        self.echo = echo
        self.stage = _ENDED
        self.admitted = False
        self.before: CanonicalRecord | None = None
        self.copy: CanonicalRecord | None = None
        self.raw: str | None = None
        self.expected: dict[str, Any] | None = None
        self.end_requirement = "CIS-BND-1"
        self.record_requirement = ""
        #: Builds the clause with the quantities behind the kernel's last decision on
        #: this call (only when a divergence is reported: it may measure large texts).
        self.explain: Callable[[], str] | None = None
        self.explain_submit: Callable[[ErrorCode | None], str] | None = None


class _RunBook:
    """What a store keeps per live run besides its state: completed ids, PROJECTING ids."""

    __slots__ = ("done", "projecting")

    def __init__(self) -> None:
        self.done: list[str] = []
        self.projecting: dict[str, None] = {}


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


#: Record fields whose difference the step's quantities explain.
_OUTCOME_FIELDS: Final = frozenset(
    {"status", "evidence_status", "error_code", "raw_bytes", "agent_result", "scope"}
)


@functools.lru_cache(maxsize=4096)
def _context(run_id: str) -> RunContext:
    return RunContext(run_id=run_id)


@functools.lru_cache(maxsize=1024)
def _policy(name: str, authorized: bool, read_only: bool, timeout_ms: int) -> ToolPolicy:
    return ToolPolicy(name=name, authorized=authorized, read_only=read_only, timeout_ms=timeout_ms)


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


def _size(text: str | None) -> int | None:
    if text is None:
        return None
    size = utf8_len(text)
    return size if size is not None else len(text.encode("utf-8", "surrogatepass"))


#: Record fields in the order they are compared (the most telling first).
_RECORD_FIELDS: Final[tuple[str, ...]] = (
    "run_id",
    "tool_call_id",
    "status",
    "evidence_status",
    "error_code",
    "raw_bytes",
    "agent_result",
    "scope",
    "tool_name",
    "sequence",
    "request_bytes",
    "created_at_ms",
    "expires_at_ms",
    "updated_at_ms",
)

_RECORD_GETTERS: Final[dict[str, Callable[[CanonicalRecord], Any]]] = {
    "run_id": lambda r: r.run_id,
    "tool_call_id": lambda r: r.tool_call_id,
    "status": lambda r: r.status,
    "evidence_status": lambda r: r.evidence_status,
    "error_code": lambda r: r.error_code,
    "raw_bytes": lambda r: _size(r.raw_response),
    "agent_result": lambda r: r.agent_result,
    "scope": lambda r: r.scope,
    "tool_name": lambda r: r.tool_name,
    "sequence": lambda r: r.sequence,
    "request_bytes": lambda r: _size(r.request_json),
    "created_at_ms": lambda r: r.created_at_ms,
    "expires_at_ms": lambda r: r.expires_at_ms,
    "updated_at_ms": lambda r: r.updated_at_ms,
}

#: Fields not compared while a record is PROJECTING (raw written early or at completion).
_PROJECTING_FREE: Final = frozenset({"raw_bytes", "updated_at_ms"})
#: Fields every transition must keep (CIS-LIFE-6).
_IDENTITY: Final = frozenset({"tool_name", "sequence", "request_bytes", "created_at_ms"})


class Oracle:
    """The replaying checker (CIS-ORC-2). Feed it decoded lines in order with :meth:`feed`.

    ``feed`` returns None while the trace conforms and the first :class:`Divergence`
    otherwise; it raises :class:`MalformedTraceError` for a line that is not valid trace
    JSON. After a divergence the oracle's state is undefined: stop feeding.
    """

    def __init__(self) -> None:
        self.limits: Limits | None = None
        self.now = 0
        self.runs: dict[str, RunState] = {}
        self.books: dict[str, _RunBook] = {}
        self.records: dict[tuple[str, str], CanonicalRecord] = {}
        self.calls: dict[int, _Call] = {}
        self.last_call = 0
        self.last_ttl: dict[tuple[str, str], int] = {}
        self.peak_records = 0
        self.peak_calls = 0
        self._record_expiry: list[tuple[int, str, str]] = []
        self._run_expiry: list[tuple[int, str]] = []
        self._line = 0
        self._view_cache: tuple[CanonicalRecord, dict[str, Any]] | None = None
        self._handlers: dict[str, tuple[Callable[[object], None], Callable[[dict[str, Any]], Any]]] = {
            op: (line_checker(cls), getattr(self, f"_op_{op}")) for op, cls in LINE_TYPES.items()
        }

    # -- entry point ----------------------------------------------------------------

    def feed(self, line: int, obj: dict[str, Any]) -> Divergence | None:
        """Check and replay one decoded line (``line`` is its 1-based number).

        ``obj`` is the line as :func:`decode_line` (or ``json.loads``) gives it; nested
        objects may also be tuples of (name, value) pairs, which the check turns into
        dicts in place.
        """
        self._line = line
        op = obj.get("op")
        entry = self._handlers.get(op) if type(op) is str else None
        if entry is None:
            raise MalformedTraceError(line, "op", "missing or unknown op")
        check, handler = entry
        try:
            check(obj)
        except ShapeError as exc:
            raise MalformedTraceError(line, exc.where, exc.reason) from None
        if self.limits is None and op != "header":
            raise MalformedTraceError(line, "op", "the first line must be the header")
        now = obj.get("now_ms")
        if now is not None and now != self.now and op != "header":
            self._advance(now)
        found = handler(obj)
        if found is None:
            return None
        where, expected, observed, requirement, message = found
        return Divergence(
            line=line,
            op=str(op),
            where=where,
            expected=expected,
            observed=observed,
            requirement=requirement,
            message=message,
        )

    def _malformed(self, where: str, reason: str) -> MalformedTraceError:
        return MalformedTraceError(self._line, where, reason)

    # -- clock and expiry -----------------------------------------------------------

    def _advance(self, now: int) -> None:
        if now < self.now:
            raise self._malformed("now_ms", "the trace clock moved backwards")
        self.now = now
        heap = self._record_expiry
        while heap and heap[0][0] <= now:
            _expires, run_id, tool_call_id = heapq.heappop(heap)
            key = (run_id, tool_call_id)
            record = self.records.get(key)
            if record is not None and not is_live(record, now):
                del self.records[key]
                self.last_ttl.pop(key, None)
                book = self.books.get(run_id)
                if book is not None:
                    book.projecting.pop(tool_call_id, None)
        runs = self._run_expiry
        while runs and runs[0][0] <= now:
            _expires, run_id = heapq.heappop(runs)
            run = self.runs.get(run_id)
            if run is not None and not is_live(run, now):
                del self.runs[run_id]
                self.books.pop(run_id, None)

    def _live_run(self, run_id: str) -> RunState | None:
        return live(self.runs.get(run_id), self.now)

    def _live_record(self, key: tuple[str, str]) -> CanonicalRecord | None:
        return live(self.records.get(key), self.now)

    def _store(self, record: CanonicalRecord, *, new: bool) -> None:
        key = (record.run_id, record.tool_call_id)
        self.records[key] = record
        if new:
            heapq.heappush(self._record_expiry, (record.expires_at_ms, record.run_id, record.tool_call_id))
            self.last_ttl.pop(key, None)
            self.peak_records = max(self.peak_records, len(self.records))

    # -- header and runs --------------------------------------------------------------

    def _op_header(self, obj: dict[str, Any]) -> _Mismatch | None:
        if self.limits is not None:
            raise self._malformed("op", "a second header")
        if obj["format"] != TRACE_FORMAT:
            raise self._malformed("format", f'expected "{TRACE_FORMAT}"')
        if obj["version"] != TRACE_VERSION:
            raise self._malformed("version", f"unsupported version (this oracle reads {TRACE_VERSION})")
        header = structure_line(obj)  # the strict cattrs codec, on the one cold line
        assert isinstance(header, Header)
        limits = header.limits
        self.limits = Limits(
            request_bytes=limits.request_bytes,
            raw_bytes=limits.raw_bytes,
            agent_result_bytes=limits.agent_result_bytes,
            record_bytes=limits.record_bytes,
            max_json_depth=limits.max_json_depth,
            max_facts=limits.max_facts,
            max_fact_bytes=limits.max_fact_bytes,
        )
        self.now = header.now_ms
        return None

    def _op_clock(self, _obj: dict[str, Any]) -> _Mismatch | None:
        return None  # the clock already moved in feed()

    def _op_run_open(self, obj: dict[str, Any]) -> _Mismatch | None:
        run_id = obj["run_id"]
        existing = self._live_run(run_id)
        try:
            result = open_run(
                existing,
                run_id=run_id,
                now_ms=self.now,
                deadline_ms=obj["deadline_ms"],
                ttl_ms=obj["ttl_ms"],
                tool_call_budget=obj["tool_call_budget"],
                byte_budget=obj["byte_budget"],
            )
        except ValueError:
            raise self._malformed("<line>", "run parameters out of range") from None
        requirement = "CIS-RETRY-3" if existing is not None else "CIS-RUN-1"
        if isinstance(result, RunState) and result is not existing:
            self.runs[run_id] = result
            self.books[run_id] = _RunBook()
            heapq.heappush(self._run_expiry, (result.expires_at_ms, run_id))
        return self._run_outcome(obj, run_id, result, requirement)

    def _op_run_cancel(self, obj: dict[str, Any]) -> _Mismatch | None:
        run_id = obj["run_id"]
        result = cancel_run(self._live_run(run_id), self.now)
        if isinstance(result, RunState):
            self.runs[run_id] = result
        return self._run_outcome(obj, run_id, result, "CIS-RUN-2")

    def _op_run_close(self, obj: dict[str, Any]) -> _Mismatch | None:
        run_id = obj["run_id"]
        result = close_run(self._live_run(run_id), self.now)
        if isinstance(result, RunState):
            self.runs[run_id] = result
        return self._run_outcome(obj, run_id, result, "CIS-RUN-2")

    def _run_outcome(
        self, obj: dict[str, Any], run_id: str, result: RunState | ErrorCode, requirement: str
    ) -> _Mismatch | None:
        observed = obj["observed"]
        expected_code = result.value if isinstance(result, ErrorCode) else None
        if observed["code"] != expected_code:
            return _mismatch(
                "observed.code",
                expected_code,
                observed["code"],
                requirement,
                "the run operation's outcome differs",
            )
        seen = observed["run"]
        if seen is None:
            return None
        run = result if isinstance(result, RunState) else self._live_run(run_id)
        if run is None:
            return _mismatch("observed.run", None, seen, requirement, "the run should not exist")
        expected = run_view(run)
        for name in expected:
            value = seen.get(name)
            if value is None and name not in ("run_id", "status"):
                continue
            if value != expected[name]:
                field_requirement = {"tool_calls_used": "CIS-RUN-5", "bytes_used": "CIS-RUN-6"}.get(
                    name, requirement
                )
                return _mismatch(
                    f"observed.run.{name}",
                    expected[name],
                    value,
                    field_requirement,
                    f"the run's {name} differs",
                )
        return None

    # -- calls ----------------------------------------------------------------------

    def _op_submit(self, obj: dict[str, Any]) -> _Mismatch | None:
        number = obj["call"]
        if number <= self.last_call:
            raise self._malformed("call", "call numbers must increase from one submit line to the next")
        self.last_call = number
        context_run_id = obj["context_run_id"]
        if not is_safe_id(context_run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        call, code, requirement = self._admit(obj, context_run_id)
        explain_submit = call.explain_submit
        assert explain_submit is not None
        self.calls[number] = call
        self.peak_calls = max(self.peak_calls, len(self.calls))
        observed = obj["observed"]
        seen_code = observed["code"]
        if seen_code != code:
            if code is None:
                requirement = CODE_REQUIREMENTS.get(ErrorCode(seen_code), "CIS-PRE-2")
                if seen_code == ErrorCode.REQUEST_TOO_LARGE.value and self._request_fits(obj):
                    requirement = "CIS-SIZE-5"  # the request fits: the record limit was misjudged
                message = "the call was refused, but the kernel admits it"
            elif seen_code is None:
                message = "the call was admitted, but the kernel refuses it"
            else:
                requirement = "CIS-PRE-2"
                message = "wrong preflight code: the first failing check in the fixed order wins"
            focus = code if code is not None else ErrorCode(seen_code)
            return _because(
                _mismatch("observed.code", code, seen_code, requirement, message),
                lambda: explain_submit(focus),
            )
        seen_record = observed["record"]
        admitted = call.before
        if admitted is None:
            if seen_record is not None:
                requirement = "CIS-ID-5" if code is ErrorCode.DUPLICATE_TOOL_CALL else "CIS-PRE-1"
                return _mismatch(
                    "observed.record", None, seen_record, requirement, "a refused call must create no record"
                )
            return None
        if obj["token"] is None:
            return _mismatch(
                "token",
                "an invocation token",
                None,
                "CIS-RETRY-1",
                "an admitted call carries no invocation token",
            )
        if seen_record is None:
            return _mismatch(
                "observed.record",
                "a PROJECTING record",
                None,
                "CIS-REC-4",
                "the admitted call created no record",
            )
        found = self._compare_record(seen_record, admitted, "create", "CIS-REC-4")
        if found is not None and found[0] == "observed.record.sequence":
            # The position is tool_calls_used + 1 at admission: a different one means the
            # implementation's tool-call counter differs, e.g. a refused call consumed budget.
            return _because(
                _mismatch(
                    found[0],
                    found[1],
                    found[2],
                    "CIS-RUN-5",
                    "the record's sequence is not tool_calls_used + 1 at admission: the tool-call "
                    "counter differs (a refused call, such as a duplicate, must not consume budget)",
                ),
                lambda: explain_submit(None),
            )
        return found

    def _request_fits(self, obj: dict[str, Any]) -> bool:
        arguments = obj["envelope"]["arguments"]
        assert self.limits is not None
        return type(arguments) is str and text_bytes(arguments) <= self.limits.request_bytes

    def _admit(self, obj: dict[str, Any], context_run_id: str) -> tuple[_Call, ErrorCode | None, str]:
        """Preflight and admission of a submit line: the call, its code (None: admitted), the
        requirement a wrong answer would violate. An admitted call's record is stored."""
        limits = self.limits
        assert limits is not None
        env = obj["envelope"]
        envelope = ToolCallEnvelope(
            run_id=env["run_id"],
            tool_call_id=env["tool_call_id"],
            tool_name=env["tool_name"],
            arguments=env["arguments"],
        )
        pol = obj["policy"]
        policy = (
            None
            if pol is None
            else _policy(pol["name"], pol["authorized"], pol["read_only"], pol["timeout_ms"])
        )
        code = check_envelope(_context(context_run_id), envelope, policy, limits)
        tool_call_id = envelope.tool_call_id
        echo = tool_call_id if is_safe_id(tool_call_id) else None
        call = _Call((context_run_id, tool_call_id or ""), echo)
        requirement = "" if code is None else CODE_REQUIREMENTS[code]
        run_before = self._live_run(context_run_id)
        existing = self._live_record(call.key) if code is None else None
        now = self.now
        if code is None:
            assert isinstance(tool_call_id, str)
            assert isinstance(envelope.tool_name, str)
            assert isinstance(envelope.arguments, str)
            result = admit(
                run_before,
                existing,
                _AdmissionRequest(
                    run_id=context_run_id,
                    tool_call_id=tool_call_id,
                    tool_name=envelope.tool_name,
                    request_json=envelope.arguments,
                    invocation_token=obj["token"] or "",
                    now_ms=self.now,
                ),
                limits,
            )
            if isinstance(result, ErrorCode):
                code = result
                requirement = "CIS-SIZE-5" if code is ErrorCode.REQUEST_TOO_LARGE else CODE_REQUIREMENTS[code]
            elif result.replayed:
                # A reused token is a duplicate at the boundary: nothing runs twice (CIS-BND-6).
                code, requirement = ErrorCode.DUPLICATE_TOOL_CALL, "CIS-BND-6"
            else:
                admitted = result.record
                self.runs[context_run_id] = result.run
                self._store(admitted, new=True)
                book = self.books.get(context_run_id)
                if book is not None:
                    book.projecting[tool_call_id] = None
                call.admitted = True
                call.stage = _EXECUTE
                call.before = call.copy = admitted
        if code is not None:
            call.expected = failure_view(code, echo)
            call.end_requirement = requirement
        decided = code

        def explain(focus: ErrorCode | None = None) -> str:
            chosen = decided if focus is None else focus
            return explain_admission(chosen, context_run_id, env, limits, run_before, existing, now)

        call.explain = explain
        call.explain_submit = explain
        return call, code, requirement

    def _call(self, obj: dict[str, Any], what: str) -> _Call | _Mismatch:
        number = obj["call"]
        call = self.calls.get(number)
        if call is not None:
            return call
        if number > self.last_call:
            raise self._malformed("call", "no submit line opened this call")
        requirement = "CIS-BND-6" if what == "executor" else "CIS-BND-1"
        return _mismatch(
            "call", None, number, requirement, f"the {what} ran for a call that was already answered"
        )

    def _op_execute(self, obj: dict[str, Any]) -> _Mismatch | None:
        found = self._call(obj, "executor")
        if not isinstance(found, _Call):
            return found
        call = found
        if call.stage != _EXECUTE:
            if not call.admitted:
                requirement = "CIS-ID-5" if call.end_requirement == "CIS-ID-5" else "CIS-PRE-1"
                assert call.expected is not None
                refusal = call.expected["code"]
                number = obj["call"]
                return _mismatch(
                    "call",
                    f"no execute line: call {number} was refused with {refusal}",
                    f"an execute line for call {number}",
                    requirement,
                    f"the executor ran for call {number}, which the kernel refused with {refusal}: a "
                    "refused call never reaches the executor",
                )
            return _mismatch(
                "call", None, obj["call"], "CIS-BND-6", "the executor ran a second time for one call"
            )
        outcome = obj["outcome"]
        raw = outcome.get("raw")
        copy = call.copy
        assert copy is not None
        assert self.limits is not None
        limits = self.limits
        call.explain = lambda: explain_raw(raw, copy, limits)
        if raw is not None:
            call.raw = raw
            after = transition(copy, RawReceived(raw_response=raw, now_ms=self.now), self.limits)
        else:
            code = _EXECUTOR_FAILURES[outcome["failure"]]
            after = transition(copy, Failed(code=code, now_ms=self.now), self.limits)
        if isinstance(after, CanonicalRecord) and after.status is InvocationStatus.PROJECTING:
            call.copy = after
            call.stage = _PROJECT
            return self._compare_step(obj, call, "CIS-BND-1")
        requirement = self._raw_requirement(after, raw)
        self._finish(call, after, requirement)
        return self._compare_step(obj, call, call.record_requirement or call.end_requirement)

    def _raw_requirement(self, after: CanonicalRecord | ErrorCode, raw: str | None) -> str:
        if isinstance(after, ErrorCode):
            return CODE_REQUIREMENTS[after]
        code = after.error_code
        if code is ErrorCode.RESULT_TOO_LARGE:
            assert self.limits is not None
            too_big = raw is not None and (_size(raw) or 0) > self.limits.raw_bytes
            return "CIS-SIZE-3" if too_big else "CIS-SIZE-5"
        return CODE_REQUIREMENTS.get(code, "CIS-STORE-8") if code is not None else "CIS-STORE-8"

    def _op_project(self, obj: dict[str, Any]) -> _Mismatch | None:
        found = self._call(obj, "projector")
        if not isinstance(found, _Call):
            return found
        call = found
        if call.stage == _EXECUTE:
            return _mismatch(
                "call",
                "the executor's outcome first",
                obj["call"],
                "CIS-BND-1",
                "the projector ran before the executor",
            )
        if call.stage == _ENDED:
            if not call.admitted:
                requirement, message = "CIS-PRE-1", "the projector ran for a refused call"
            elif call.end_requirement in ("CIS-SIZE-3", "CIS-FAIL-2", "CIS-FAIL-3", "CIS-FAIL-4"):
                requirement, message = (
                    call.end_requirement,
                    "the projector ran although the executor's outcome ended the call",
                )
            else:
                requirement, message = "CIS-BND-1", "the projector ran for a call that had ended"
            return _mismatch("call", call.expected, obj["call"], requirement, message)
        outcome = obj["outcome"]
        copy = call.copy
        assert copy is not None
        assert self.limits is not None
        projection = outcome.get("projection")
        limits = self.limits
        call.explain = lambda: explain_projection(projection, copy, limits)
        if projection is not None:
            event: ProjectionReceived | Failed = ProjectionReceived(
                projection=Projection(
                    evidence_status=projection["evidence_status"],
                    content=projection["content"],
                    scope=projection["scope"],
                ),
                now_ms=self.now,
            )
        else:
            event = Failed(code=_PROJECTOR_FAILURES[outcome["failure"]], now_ms=self.now)
        after = transition(copy, event, self.limits)
        self._finish(call, after, self._projection_requirement(after, projection))
        return self._compare_step(obj, call, call.record_requirement or call.end_requirement)

    def _projection_requirement(self, after: CanonicalRecord | ErrorCode, projection: Any) -> str:
        if isinstance(after, ErrorCode):
            return CODE_REQUIREMENTS[after]
        if after.status is InvocationStatus.READY:
            return "CIS-EVID-3" if after.evidence_status is EvidenceStatus.NO_EVIDENCE else "CIS-REC-5"
        code = after.error_code
        if code is ErrorCode.RESULT_TOO_LARGE and projection is not None:
            assert self.limits is not None
            size = (_size(projection["content"]) or 0) + (_size(projection["scope"]) or 0)
            return "CIS-SIZE-4" if size > self.limits.agent_result_bytes else "CIS-SIZE-5"
        if (
            code is ErrorCode.PROJECTION_INVALID
            and projection is not None
            and projection["evidence_status"] == EvidenceStatus.NO_EVIDENCE.value
        ):
            return "CIS-EVID-3"
        return CODE_REQUIREMENTS.get(code, "CIS-STORE-8") if code is not None else "CIS-STORE-8"

    def _finish(self, call: _Call, after: CanonicalRecord | ErrorCode, requirement: str) -> None:
        """End a call: compare-and-set ``after`` against the store (CIS-STORE-3)."""
        call.stage = _ENDED
        call.end_requirement = requirement
        if isinstance(after, ErrorCode):
            call.expected = failure_view(after, call.echo)  # the worker's copy expired (CIS-TTL-4)
            return
        before = call.before
        assert before is not None
        key = call.key
        stored = self._live_record(key)
        effect = decide_completion(stored, before, after, self._live_run(after.run_id), self.now)
        if isinstance(effect, ErrorCode):
            call.expected = failure_view(effect, call.echo)
            terminal = stored is not None and stored.status is not InvocationStatus.PROJECTING
            # An event after READY/ERROR is refused and changes nothing (CIS-LIFE-2); a
            # record that changes anyway breaks CIS-LIFE-3.
            call.end_requirement = "CIS-LIFE-2" if terminal else "CIS-STORE-3"
            call.record_requirement = "CIS-LIFE-3" if terminal else "CIS-STORE-3"
            return
        if effect.action is CompareAndSet.WRITE:
            self._apply(effect)
        call.expected = outcome_view(after, call.echo)

    def _apply(self, effect: Completion) -> None:
        """Apply a WRITE completion's effects, as a store does (kernel ``decide_completion``)."""
        record = effect.record
        self._store(record, new=False)
        if effect.run is not None:
            self.runs[record.run_id] = effect.run
        book = self.books.get(record.run_id)
        if book is not None and effect.append_done:
            book.done.append(record.tool_call_id)
        if book is not None and record.terminal:
            book.projecting.pop(record.tool_call_id, None)

    def _compare_step(self, obj: dict[str, Any], call: _Call, requirement: str) -> _Mismatch | None:
        seen = obj["observed"]["record"]
        stored = self._live_record(call.key)
        context = "execute" if obj["op"] == "execute" else "project"
        if stored is None:
            if seen is not None:
                return _mismatch(
                    "observed.record", None, seen, "CIS-TTL-4", "the record should be absent (expired)"
                )
            return None
        if seen is None:
            return _mismatch(
                "observed.record",
                stored.status.value,
                None,
                "CIS-TTL-1",
                "the record vanished before its expiry",
            )
        found = self._compare_record(seen, stored, context, requirement, raw=call.raw)
        if found is not None and found[0].rsplit(".", 1)[-1] in _OUTCOME_FIELDS:
            return _because(found, call.explain)
        return found

    def _op_result(self, obj: dict[str, Any]) -> _Mismatch | None:
        found = self._call(obj, "boundary's answer")
        if not isinstance(found, _Call):
            return found
        call = found
        del self.calls[obj["call"]]
        seen = obj["observed"]["result"]
        if call.stage != _ENDED:
            awaited = "the executor's outcome" if call.stage == _EXECUTE else "the projector's outcome"
            return _mismatch(
                "observed.result",
                f"no answer before {awaited}",
                seen,
                "CIS-BND-1",
                f"the call was answered before {awaited}",
            )
        expected = call.expected
        assert expected is not None
        if seen == expected:
            return None
        return self._compare_result(seen, expected, call)

    def _compare_result(
        self, seen: dict[str, Any], expected: dict[str, Any], call: _Call
    ) -> _Mismatch | None:
        for name in (
            "ok",
            "code",
            "tool_call_id",
            "evidence_status",
            "negative",
            "content",
            "scope",
            "message",
        ):
            if name == "message" and seen.get("message") is None:
                continue
            value = seen.get(name)
            if value == expected[name]:
                continue
            where = f"observed.result.{name}"
            if _contains_raw(value, call.raw):
                return _mismatch(
                    where,
                    expected[name],
                    value,
                    "CIS-BND-4",
                    "the agent-facing result carries the raw response",
                )
            if name in ("ok", "code"):
                requirement = call.end_requirement
                message = "the agent-facing outcome differs from the kernel's"
                return _because(_mismatch(where, expected[name], value, requirement, message), call.explain)
            if name == "tool_call_id":
                requirement, message = (
                    "CIS-ID-4",
                    "the echoed tool_call_id differs (only a safe id is echoed)",
                )
            elif name == "message":
                requirement, message = "CIS-ERR-1", "the message is not the code's fixed message"
            elif name in ("evidence_status", "negative"):
                requirement, message = "CIS-EVID-4", "the evidence status was changed on its way to the agent"
            else:
                requirement, message = "CIS-REC-5", "the agent-facing result is not the bounded projection"
            return _mismatch(where, expected[name], value, requirement, message)
        return None

    # -- reads ------------------------------------------------------------------------

    def _op_read(self, obj: dict[str, Any]) -> _Mismatch | None:
        key = (obj["run_id"], obj["tool_call_id"])
        record = self._live_record(key)
        seen = obj["observed"]["record"]
        if record is None:
            if seen is not None:
                return _mismatch(
                    "observed.record",
                    None,
                    seen,
                    "CIS-TTL-4",
                    "the record should read as absent (missing or expired)",
                )
            return None
        if seen is None:
            return _mismatch(
                "observed.record",
                record.status.value,
                None,
                "CIS-TTL-1",
                "the record vanished before its expiry",
            )
        status_requirement = "CIS-LIFE-3" if record.terminal else "CIS-LIFE-2"
        return self._compare_record(seen, record, "read", status_requirement, raw=record.raw_response)

    def _compare_record(
        self,
        seen: dict[str, Any],
        record: CanonicalRecord,
        context: str,
        status_requirement: str,
        raw: str | None = None,
    ) -> _Mismatch | None:
        """Compare a RecordView with the kernel's record; the first difference, or None."""
        projecting = record.status is InvocationStatus.PROJECTING
        ttl = seen.get("ttl_remaining_ms")
        # Fast path: an implementation that reports every field matches one dict compare.
        expected = self._view(record)
        expected["ttl_remaining_ms"] = ttl
        if projecting:
            expected["raw_bytes"] = seen.get("raw_bytes")
            expected["updated_at_ms"] = seen.get("updated_at_ms")
        if seen != expected:
            found = self._record_difference(
                seen,
                record=record,
                context=context,
                status_requirement=status_requirement,
                raw=raw,
                projecting=projecting,
            )
            if found is not None:
                return found
        if ttl is not None:
            return self._check_ttl(ttl, record, context)
        return None

    def _view(self, record: CanonicalRecord) -> dict[str, Any]:
        """The record's view, computed once per record value (records are immutable)."""
        cached = self._view_cache
        if cached is not None and cached[0] is record:
            return cached[1]
        view = record_view(record)
        self._view_cache = (record, view)
        return view

    def _record_difference(
        self,
        seen: dict[str, Any],
        *,
        record: CanonicalRecord,
        context: str,
        status_requirement: str,
        raw: str | None,
        projecting: bool,
    ) -> _Mismatch | None:
        for name in _RECORD_FIELDS:
            value = seen.get(name)
            if value is None and name not in (
                "evidence_status",
                "error_code",
                "raw_bytes",
                "agent_result",
                "scope",
            ):
                continue  # optional and not reported
            if projecting and name in _PROJECTING_FREE:
                continue
            expected = _RECORD_GETTERS[name](record)
            if value == expected:
                continue
            where = f"observed.record.{name}"
            if name in ("agent_result", "scope") and _contains_raw(value, raw):
                return _mismatch(
                    where, expected, value, "CIS-REC-3", "the record's agent result holds the raw response"
                )
            requirement, message = self._field_requirement(
                name,
                context=context,
                record=record,
                status_requirement=status_requirement,
                value=value,
                expected=expected,
            )
            return _mismatch(where, expected, value, requirement, message)
        return None

    def _field_requirement(
        self,
        name: str,
        *,
        context: str,
        record: CanonicalRecord,
        status_requirement: str,
        value: Any,
        expected: Any,
    ) -> tuple[str, str]:
        if name in ("run_id", "tool_call_id"):
            if context == "read":
                return "CIS-STORE-6", "the read returned a record of another key"
            return ("CIS-ID-4" if context == "create" else "CIS-LIFE-6"), f"the record's {name} differs"
        if name in ("status", "evidence_status", "error_code", "agent_result", "scope"):
            if context == "create":
                requirement = "CIS-REC-4" if name == "status" else "CIS-LIFE-5"
                return requirement, "a new record is PROJECTING with no outcome"
            if name != "status" and record.status is InvocationStatus.PROJECTING:
                return (
                    "CIS-LIFE-5",
                    f"a PROJECTING record carries no outcome: its {name} must be null",
                )
            if record.terminal and record.evidence_status is not None and name == "evidence_status":
                if context == "read":
                    return "CIS-LIFE-3", "a terminal record changed"
                if record.status is InvocationStatus.READY:
                    return "CIS-EVID-4", "the projection's evidence status was not kept as it came"
                return "CIS-EVID-1", "an ERROR record has evidence ERROR"
            return status_requirement, f"the record's {name} differs from the kernel's outcome"
        if name == "raw_bytes":
            if record.status is InvocationStatus.ERROR and record.raw_response is None:
                if record.error_code is ErrorCode.RESULT_TOO_LARGE:
                    return "CIS-SIZE-3", "a raw response over its limit must not be stored (nor truncated)"
                return status_requirement, "no raw response should be stored"
            if record.status is InvocationStatus.ERROR:
                return "CIS-FAIL-6", "the raw response received before the failure must stay in the record"
            return "CIS-REC-3", "the stored raw response is not complete"
        if name == "request_bytes":
            return (
                "CIS-REC-2" if context == "create" else "CIS-LIFE-6"
            ), "the stored request is not the exact arguments"
        if name == "expires_at_ms":
            if isinstance(value, int) and value > expected:
                return ("CIS-TTL-5" if context == "read" else "CIS-TTL-2"), "the record's expiry moved later"
            return (
                "CIS-TTL-1" if context == "create" else "CIS-LIFE-6"
            ), "the record's expiry is not creation + TTL"
        if name in _IDENTITY:
            return ("CIS-REC-1" if context == "create" else "CIS-LIFE-6"), f"the record's {name} differs"
        return "CIS-REC-1", f"the record's {name} differs"

    def _check_ttl(self, ttl: int, record: CanonicalRecord, context: str) -> _Mismatch | None:
        """The remaining TTL is positive, at most expiry - now, and never grows (CIS-TTL-1..5).

        Stores whose physical TTL runs on another clock (Redis PTTL in real time under a
        test's fake clock) may report less than expiry - now, never more.
        """
        key = (record.run_id, record.tool_call_id)
        limit = remaining_ms(record, self.now) or 0
        last = self.last_ttl.get(key)
        where = "observed.record.ttl_remaining_ms"
        requirement = {"read": "CIS-TTL-5", "create": "CIS-TTL-2"}.get(context, "CIS-TTL-3")
        if ttl <= 0:
            return _mismatch(
                where,
                f"1..{limit}",
                ttl,
                "CIS-TTL-1",
                "a live record has no positive TTL (it was not set at creation)",
            )
        if ttl > limit:
            return _mismatch(
                where,
                f"<= {limit}",
                ttl,
                requirement,
                "the remaining TTL exceeds expiry - now: the TTL was extended",
            )
        if last is not None and ttl > last:
            return _mismatch(
                where,
                f"<= {last}",
                ttl,
                requirement,
                "the remaining TTL increased since the last observation",
            )
        self.last_ttl[key] = ttl
        return None

    def _op_cite(self, obj: dict[str, Any]) -> _Mismatch | None:
        context_run_id = obj["context_run_id"]
        if not is_safe_id(context_run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        tool_call_id = obj["tool_call_id"]
        record = self._live_record((context_run_id, tool_call_id))
        expected = citation_view(cite(context_run_id, tool_call_id, record, self.now))
        seen = obj["observed"]["citation"]
        raw = None if record is None else record.raw_response
        for name in ("kind", "reason", "tool_call_id", "content", "scope"):
            value = seen[name]
            if value == expected[name]:
                continue
            where = f"observed.citation.{name}"
            if _contains_raw(value, raw):
                return _mismatch(
                    where, expected[name], value, "CIS-BND-4", "the citation carries the raw response"
                )
            if name == "tool_call_id" and expected[name] is None:
                return _mismatch(
                    where, None, value, "CIS-ERR-1", "an id that is not a safe id is never echoed: null"
                )
            kind = expected["kind"]
            requirement = {
                CitationKind.EVIDENCE.value: "CIS-REF-1",
                CitationKind.NEGATIVE_OBSERVATION.value: "CIS-REF-2",
            }.get(kind, "CIS-REF-3")
            return _mismatch(
                where, expected[name], value, requirement, "the citation differs from the kernel's"
            )
        return None

    def _op_progress(self, obj: dict[str, Any]) -> _Mismatch | None:
        limits = self.limits
        assert limits is not None
        run_id = obj["context_run_id"]
        if not is_safe_id(run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        book = self.books.get(run_id) if self._live_run(run_id) is not None else None
        identities = () if book is None else tuple(book.done)
        records = {tcid: self._live_record((run_id, tcid)) for tcid in identities}
        report = project_progress(run_id, identities, records, self.now, limits)
        seen = obj["observed"]
        facts = [fact_view(fact) for fact in report.facts]
        for index in range(max(len(facts), len(seen["facts"]))):
            want = facts[index] if index < len(facts) else None
            got = seen["facts"][index] if index < len(seen["facts"]) else None
            if want == got:
                continue
            where = f"observed.facts.{index}"
            record = records.get(got["tool_call_id"]) if got is not None else None
            raw = None if record is None else record.raw_response
            if got is not None and _contains_raw(got, raw):
                return _mismatch(where, want, got, "CIS-BND-4", "a fact carries the raw response")
            if got is not None and (record is None or record.status is not InvocationStatus.READY):
                return _mismatch(where, want, got, "CIS-PROG-3", "only READY records of the run become facts")
            if want is None or got is None:
                return _mismatch(where, want, got, "CIS-PROG-4", "the facts are not capped as the limits say")
            return _mismatch(
                where,
                want,
                got,
                "CIS-PROG-2",
                "the facts differ (content, or the completion order of the completed-call list)",
            )
        excluded = {reason.value: count for reason, count in report.excluded.items() if count}
        seen_excluded = {reason: count for reason, count in seen["excluded"].items() if count}
        if excluded != seen_excluded:
            return _mismatch(
                "observed.excluded", excluded, seen_excluded, "CIS-PROG-3", "the excluded identities differ"
            )
        if seen["omitted"] != report.omitted:
            return _mismatch(
                "observed.omitted", report.omitted, seen["omitted"], "CIS-PROG-4", "the omitted count differs"
            )
        return None

    def _op_sweep(self, obj: dict[str, Any]) -> _Mismatch | None:
        limits = self.limits
        assert limits is not None
        run_id = obj["context_run_id"]
        if not is_safe_id(run_id):
            raise self._malformed("context_run_id", "a RunContext holds a safe run id")
        book = self.books.get(run_id) if self._live_run(run_id) is not None else None
        swept: list[str] = []
        event = SweptStale(now_ms=self.now, older_than_ms=obj["older_than_ms"])
        held = (self._live_record((run_id, tcid)) for tcid in list(() if book is None else book.projecting))
        before: dict[str, CanonicalRecord] = {}
        for record in sweep_candidates(held, run_id, self.now):
            before[record.tool_call_id] = record
            after = transition(record, event, limits)
            if isinstance(after, ErrorCode):
                continue  # NOT_STALE
            effect = decide_completion(record, record, after, self._live_run(run_id), self.now)
            assert isinstance(effect, Completion)  # the record is live and is ``before``
            self._apply(effect)
            swept.append(record.tool_call_id)
        seen = obj["observed"]
        ids = seen.get("tool_call_ids")
        older_than = obj["older_than_ms"]

        def why(tool_call_id: str) -> Callable[[], str]:
            def clause() -> str:
                record = before.get(tool_call_id)
                if record is None:
                    return f"{tool_call_id} held no live PROJECTING record"
                return f"{tool_call_id}: {explain_sweep(record, self.now, older_than)}"

            return clause

        if ids is not None and set(ids) != set(swept):
            extra = sorted(set(ids) - set(swept))
            if extra:
                moved = self._live_record((run_id, extra[0]))
                if moved is not None and moved.terminal:
                    return _mismatch(
                        "observed.tool_call_ids",
                        sorted(swept),
                        sorted(ids),
                        "CIS-LIFE-3",
                        "a sweep moved a terminal record",
                    )
            differing = sorted(set(ids) ^ set(swept))
            first = differing[0] if is_safe_id(differing[0]) else ""
            return _because(
                _mismatch(
                    "observed.tool_call_ids",
                    sorted(swept),
                    sorted(ids),
                    "CIS-LIFE-7",
                    "the sweep moved other records than the stale PROJECTING ones",
                ),
                why(first) if first else None,
            )
        if seen["swept"] != len(swept):
            return _mismatch(
                "observed.swept",
                len(swept),
                seen["swept"],
                "CIS-LIFE-7",
                "the number of swept records differs",
            )
        return None


# ---------------------------------------------------------------------------
# Whole traces


class OverlongLine:
    """Stands for a line longer than the line limit, which the reader did not keep."""

    __slots__ = ()


#: The one :class:`OverlongLine` (``check_lines`` reports it as malformed).
OVERLONG: Final = OverlongLine()


def check_lines(
    lines: Iterable[bytes | bytearray | str | OverlongLine], *, max_line_bytes: int = 256 * 1024 * 1024
) -> CheckReport:
    """Check a trace given as an iterable of lines (bytes or str, with or without ``\\n``).

    Streams: each line is decoded, checked and dropped before the next is read, so
    memory grows with the trace's live records and unfinished calls only (CIS-ORC-2).
    Never raises for bad input: a non-UTF-8 line, a line longer than
    ``max_line_bytes``, bad JSON or a bad shape is reported as ``malformed``.
    """
    oracle = Oracle()
    feed = oracle.feed
    count = 0
    try:
        for count, raw_line in enumerate(lines, start=1):
            if type(raw_line) is OverlongLine or len(raw_line) > max_line_bytes:  # type: ignore[arg-type]
                raise MalformedTraceError(count, "<line>", f"longer than {max_line_bytes} bytes")
            if type(raw_line) is bytes or type(raw_line) is bytearray:
                try:
                    text = raw_line.decode("utf-8")
                except UnicodeDecodeError:
                    raise MalformedTraceError(count, "<line>", "not UTF-8") from None
            else:
                text = str(raw_line)
            if text == "\n" or not text:
                raise MalformedTraceError(count, "<line>", "empty line")
            divergence = feed(count, _decode_fast(text, count))
            if divergence is not None:
                return CheckReport(
                    lines=count,
                    divergence=divergence,
                    peak_records=oracle.peak_records,
                    peak_calls=oracle.peak_calls,
                    unfinished=len(oracle.calls),
                )
        if oracle.limits is None:
            raise MalformedTraceError(
                count + 1 if count == 0 else count, "<line>", "the trace has no header line"
            )
    except MalformedTraceError as exc:
        return CheckReport(
            lines=count, malformed=exc, peak_records=oracle.peak_records, peak_calls=oracle.peak_calls
        )
    return CheckReport(
        lines=count,
        peak_records=oracle.peak_records,
        peak_calls=oracle.peak_calls,
        unfinished=len(oracle.calls),
    )
