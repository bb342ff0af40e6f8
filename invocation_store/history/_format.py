"""The concurrent history format: JSON Lines of invocations and completions (CIS-HIST-1).

Theory of operation
-------------------
A *history* is what several workers did to one store, as Jepsen records it: a
header line, then one line per *event*. Each store operation has an ``invoke`` line
(written just before the call, with the operation and its arguments, the caller's
``now_ms`` among them) and at most one completion line, written just after it
returned: ``ok`` (with the observed result), ``fail`` (it certainly did not take
effect) or ``info`` (unknown outcome: a timeout, a dropped connection, a crash). An
invoke with no completion line is an unknown outcome too. The order of the lines is
real time: an operation whose completion line comes before another's invoke line
returned before the other was called. This module decodes lines into
:class:`HistoryOp` values holding kernel objects (records, run states, codes), so
that the checker compares exactly what the store protocol returns
(:class:`~invocation_store.adapters.InvocationStore`), and encodes those values for
recorders. It is the one place that knows the wire shape; ``spec/history.md`` and
``spec/history.schema.json`` describe the same shape.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, TypeAlias

import attrs
from attrs import define, frozen

from ..codec import CodecError, limits_from_obj, record_from_obj, run_state_from_obj, unstructure
from ..kernel import Admission, AdmissionRequest, CanonicalRecord, ErrorCode, Limits, RunState

__all__ = [
    "HISTORY_FORMAT",
    "HISTORY_VERSION",
    "OPERATIONS",
    "History",
    "HistoryOp",
    "MalformedHistoryError",
    "Outcome",
    "decode_history",
    "encode_args",
    "encode_result",
    "header_line",
]

#: The ``format`` member of a history header.
HISTORY_FORMAT: Final = "canonical-invocation-history"
#: The only version this checker reads.
HISTORY_VERSION: Final = 1

#: Store operations a history may hold, each with its required argument members.
OPERATIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "open_run": ("run_id", "now_ms", "deadline_ms", "ttl_ms", "tool_call_budget", "byte_budget"),
    "cancel_run": ("run_id", "now_ms"),
    "close_run": ("run_id", "now_ms"),
    "get_run": ("run_id", "now_ms"),
    "create": ("run_id", "tool_call_id", "tool_name", "request_json", "invocation_token", "now_ms"),
    "complete": ("now_ms", "before", "after"),
    "get": ("run_id", "tool_call_id", "now_ms"),
    "get_many": ("run_id", "tool_call_ids", "include_raw", "now_ms"),
    "completed": ("run_id", "now_ms"),
    "calls": ("run_id", "now_ms"),
}
_OPTIONAL_ARGS: Final[Mapping[str, tuple[str, ...]]] = {"create": ("limits",)}
#: The members of a limits object: the fields of :class:`Limits`, its one definition.
_LIMIT_NAMES: Final = tuple(limit.name for limit in attrs.fields(Limits))

#: What a store operation returns, as the protocol types it.
Result: TypeAlias = Any


class Outcome(enum.Enum):
    """How an operation ended."""

    #: Returned; its result is known.
    OK = "ok"
    #: May or may not have taken effect, at any time after its invocation.
    UNKNOWN = "info"


class MalformedHistoryError(ValueError):
    """The history is not JSON Lines of the history format (exit 2).

    ``line`` is the 1-based line number (0: the file as a whole), ``where`` the JSON
    path of the bad value; the message never quotes the bad value.
    """

    def __init__(self, line: int, where: str, message: str) -> None:
        super().__init__(f"line {line}: {where}: {message}")
        self.line = line
        self.where = where
        self.message = message


@define(slots=True, eq=False)
class HistoryOp:
    """One store operation of a history, decoded to kernel values (CIS-HIST-1).

    ``index`` is the position among the history's operations; ``op_id`` and
    ``process`` are as written. ``args`` holds kernel values: an
    :class:`AdmissionRequest` plus :class:`Limits` for ``create``, ``(before, after)``
    records for ``complete``, a dict of plain values otherwise. ``result`` is what the
    store returned (``None`` when the outcome is unknown). ``invoke_line`` and
    ``complete_line`` are line numbers (``complete_line`` None when unknown).
    """

    index: int
    op_id: int
    process: int | str
    name: str
    run_id: str
    now_ms: int
    args: Any
    outcome: Outcome
    result: Result
    invoke_line: int
    complete_line: int | None

    def describe(self) -> str:
        """A one-line, payload-free description: ``op 7 (process 2) create call_1``."""
        subject = ""
        if self.name == "create":
            subject = f" {self.args[0].tool_call_id}"
        elif self.name == "complete":
            subject = f" {self.args[0].tool_call_id} -> {self.args[1].status.value}"
        elif self.name == "get":
            subject = f" {self.args['tool_call_id']}"
        return f"op {self.op_id} (process {self.process}) {self.name}{subject} at {self.now_ms}"


@frozen(kw_only=True)
class History:
    """A decoded history: the limits in force and the operations in invocation order."""

    limits: Limits
    ops: tuple[HistoryOp, ...]
    lines: int
    implementation: str | None = None


# ---------------------------------------------------------------------------
# Encoding (for recorders)


def header_line(limits: Limits, implementation: str | None = None) -> dict[str, Any]:
    """The header object of a history recorded under ``limits``."""
    header: dict[str, Any] = {
        "type": "header",
        "format": HISTORY_FORMAT,
        "version": HISTORY_VERSION,
        "limits": unstructure(limits),
    }
    if implementation is not None:
        header["implementation"] = implementation
    return header


def _record_obj(record: CanonicalRecord | None) -> Any:
    return None if record is None else unstructure(record)


def _run_obj(run: RunState | None) -> Any:
    return None if run is None else unstructure(run)


def encode_args(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ready ``args`` of an invoke line: records and limits unstructured, others as given."""
    encoded: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, CanonicalRecord | Limits):
            encoded[key] = unstructure(value)
        elif isinstance(value, tuple):
            encoded[key] = list(value)
        else:
            encoded[key] = value
    if name not in OPERATIONS:
        raise ValueError(f"unknown history operation {name!r}")
    return encoded


def encode_result(name: str, result: Result) -> dict[str, Any]:
    """JSON-ready ``result`` of an ok line, for what the store's ``name`` returned."""
    if name in ("open_run", "cancel_run", "close_run"):
        if isinstance(result, ErrorCode):
            return {"code": result.value, "run": None}
        return {"code": None, "run": _run_obj(result)}
    if name == "get_run":
        return {"run": _run_obj(result)}
    if name == "create":
        if isinstance(result, ErrorCode):
            return {"code": result.value, "replayed": None, "record": None, "run": None}
        return {
            "code": None,
            "replayed": result.replayed,
            "record": _record_obj(result.record),
            "run": _run_obj(result.run),
        }
    if name == "complete":
        if isinstance(result, ErrorCode):
            return {"code": result.value, "record": None}
        return {"code": None, "record": _record_obj(result)}
    if name == "get":
        return {"record": _record_obj(result)}
    if name == "get_many":
        return {"records": {tcid: _record_obj(record) for tcid, record in result.items()}}
    if name in ("completed", "calls"):
        return {"tool_call_ids": list(result)}
    raise ValueError(f"unknown history operation {name!r}")


# ---------------------------------------------------------------------------
# Decoding


class _ShapeError(Exception):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _ShapeError("<line>", "duplicate member name")
        result[key] = value
    return result


def _members(obj: Any, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _ShapeError(where, "expected an object")
    required = tuple(required)
    allowed = set(required) | set(optional)
    for key in obj:
        if key not in allowed:
            raise _ShapeError(where, f"unknown member {key!r}" if key.isidentifier() else "unknown member")
    for key in required:
        if key not in obj:
            raise _ShapeError(where, f"missing required member {key!r}")
    return obj


def _int(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or value > 2**53 - 1:
        raise _ShapeError(where, f"expected an integer in [{minimum}, 2**53 - 1]")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _ShapeError(where, "expected a string")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _ShapeError(where, "expected a boolean")
    return value


def _code(value: Any, where: str) -> ErrorCode:
    if not isinstance(value, str) or value not in ErrorCode.__members__:
        raise _ShapeError(where, "expected an error code")
    return ErrorCode(value)


def _codec_path(where: str, exc: CodecError) -> str:
    """``where`` plus the field cattrs named (its message ends with the dotted path)."""
    field_path = str(exc).rsplit(" ", 1)[-1]
    return where if field_path == "<root>" else f"{where}.{field_path}"


def _record(value: Any, where: str) -> CanonicalRecord:
    try:
        return record_from_obj(value)
    except CodecError as exc:
        raise _ShapeError(_codec_path(where, exc), "not a canonical record") from None


def _opt_record(value: Any, where: str) -> CanonicalRecord | None:
    return None if value is None else _record(value, where)


def _run(value: Any, where: str) -> RunState:
    try:
        return run_state_from_obj(value)
    except CodecError as exc:
        raise _ShapeError(_codec_path(where, exc), "not a run state") from None


def _opt_run(value: Any, where: str) -> RunState | None:
    return None if value is None else _run(value, where)


def _limits(value: Any, where: str) -> Limits:
    _members(value, where, _LIMIT_NAMES)
    for name in _LIMIT_NAMES:
        _int(value[name], f"{where}.{name}", 1)
    return limits_from_obj(value)


def _args(name: str, raw: Any, limits: Limits) -> tuple[str, int, Any]:
    """(run_id, now_ms, kernel args) of an invoke line's ``args``."""
    args = _members(raw, "args", OPERATIONS[name], _OPTIONAL_ARGS.get(name, ()))
    now_ms = _int(args["now_ms"], "args.now_ms")
    if name == "complete":
        before = _record(args["before"], "args.before")
        after = _record(args["after"], "args.after")
        if (before.run_id, before.tool_call_id) != (after.run_id, after.tool_call_id):
            raise _ShapeError("args.after", "a completion names another key than its 'before' record")
        return before.run_id, now_ms, (before, after)
    run_id = _str(args["run_id"], "args.run_id")
    if name == "create":
        request = AdmissionRequest(
            run_id=run_id,
            tool_call_id=_str(args["tool_call_id"], "args.tool_call_id"),
            tool_name=_str(args["tool_name"], "args.tool_name"),
            request_json=_str(args["request_json"], "args.request_json"),
            invocation_token=_str(args["invocation_token"], "args.invocation_token"),
        )
        own = args.get("limits")
        return run_id, now_ms, (request, limits if own is None else _limits(own, "args.limits"))
    if name == "open_run":
        return (
            run_id,
            now_ms,
            {
                key: _int(args[key], f"args.{key}", 1 if key == "ttl_ms" else 0)
                for key in ("deadline_ms", "ttl_ms", "tool_call_budget", "byte_budget")
            },
        )
    if name == "get":
        return run_id, now_ms, {"tool_call_id": _str(args["tool_call_id"], "args.tool_call_id")}
    if name == "get_many":
        ids = args["tool_call_ids"]
        if not isinstance(ids, list):
            raise _ShapeError("args.tool_call_ids", "expected an array")
        return (
            run_id,
            now_ms,
            {
                "tool_call_ids": tuple(_str(tcid, f"args.tool_call_ids[{i}]") for i, tcid in enumerate(ids)),
                "include_raw": _bool(args["include_raw"], "args.include_raw"),
            },
        )
    return run_id, now_ms, {}


def _result(name: str, raw: Any) -> Result:
    """Decode an ok line's ``result`` into what the store's ``name`` returns."""
    if name in ("open_run", "cancel_run", "close_run"):
        obj = _members(raw, "result", ("code", "run"))
        if obj["code"] is not None:
            if obj["run"] is not None:
                raise _ShapeError("result.run", "must be null when a code is given")
            return _code(obj["code"], "result.code")
        return _run(obj["run"], "result.run")
    if name == "get_run":
        return _opt_run(_members(raw, "result", ("run",))["run"], "result.run")
    if name == "create":
        obj = _members(raw, "result", ("code", "replayed", "record", "run"))
        if obj["code"] is not None:
            code = _code(obj["code"], "result.code")
            for key in ("replayed", "record", "run"):
                if obj[key] is not None:
                    raise _ShapeError(f"result.{key}", "must be null when a code is given")
            return code
        return Admission(
            run=_run(obj["run"], "result.run"),
            record=_record(obj["record"], "result.record"),
            replayed=_bool(obj["replayed"], "result.replayed"),
        )
    if name == "complete":
        obj = _members(raw, "result", ("code", "record"))
        if obj["code"] is not None:
            if obj["record"] is not None:
                raise _ShapeError("result.record", "must be null when a code is given")
            return _code(obj["code"], "result.code")
        return _record(obj["record"], "result.record")
    if name == "get":
        return _opt_record(_members(raw, "result", ("record",))["record"], "result.record")
    if name == "get_many":
        records = _members(raw, "result", ("records",))["records"]
        if not isinstance(records, dict):
            raise _ShapeError("result.records", "expected an object")
        return {tcid: _opt_record(value, f"result.records.{tcid}") for tcid, value in records.items()}
    ids = _members(raw, "result", ("tool_call_ids",))["tool_call_ids"]
    if not isinstance(ids, list):
        raise _ShapeError("result.tool_call_ids", "expected an array")
    return tuple(_str(tcid, f"result.tool_call_ids[{i}]") for i, tcid in enumerate(ids))


def _process(value: Any, where: str) -> int | str:
    if isinstance(value, str) and value:
        return value
    return _int(value, where)


def _parse(line: bytes | str, number: int) -> dict[str, Any]:
    try:
        obj = json.loads(line, object_pairs_hook=_object_pairs, parse_constant=_reject_constant)
    except _ShapeError:
        raise
    except (ValueError, RecursionError):
        raise _ShapeError("<line>", "not a JSON value (or not UTF-8, or NaN/Infinity)") from None
    if not isinstance(obj, dict):
        raise _ShapeError("<line>", "expected a JSON object")
    if "type" not in obj:
        raise _ShapeError("<line>", "missing required member 'type'")
    return obj


def _header(obj: dict[str, Any]) -> tuple[Limits, str | None]:
    if obj["type"] != "header":
        raise _ShapeError("type", "the first line must be the header")
    _members(obj, "<line>", ("type", "format", "version", "limits"), ("implementation",))
    if obj["format"] != HISTORY_FORMAT:
        raise _ShapeError("format", f"expected {HISTORY_FORMAT!r}")
    if obj["version"] != HISTORY_VERSION or isinstance(obj["version"], bool):
        raise _ShapeError("version", f"this checker reads version {HISTORY_VERSION} only")
    implementation = obj.get("implementation")
    if implementation is not None:
        _str(implementation, "implementation")
    return _limits(obj["limits"], "limits"), implementation


def decode_history(lines: Iterable[bytes | str]) -> History:  # noqa: PLR0915 - one pass, one branch per line type
    """Decode a whole history (CIS-HIST-1); raises :class:`MalformedHistoryError`.

    Checks every line's shape, that ids are unique, that a completion follows its own
    invocation on the same process, and that a process never has two operations
    outstanding (a process is one thread of control, as in Jepsen). ``fail``
    operations are dropped (they did not take effect); invokes left open are
    unknown outcomes.
    """
    limits: Limits | None = None
    implementation: str | None = None
    pending: dict[int, tuple[int, int | str, str, str, int, Any]] = {}
    busy: dict[int | str, int] = {}
    seen: set[int] = set()
    ops: list[HistoryOp] = []
    order: dict[int, int] = {}
    number = 0
    iterator: Iterator[bytes | str] = iter(lines)
    for number, line in enumerate(iterator, start=1):
        try:
            if not line.strip():
                raise _ShapeError("<line>", "blank line")
            obj = _parse(line, number)
            if limits is None:
                limits, implementation = _header(obj)
                continue
            kind = obj["type"]
            if kind == "invoke":
                _members(obj, "<line>", ("type", "id", "process", "op", "args"))
                op_id = _int(obj["id"], "id")
                process = _process(obj["process"], "process")
                name = obj["op"]
                if not isinstance(name, str) or name not in OPERATIONS:
                    raise _ShapeError("op", "unknown operation")
                if op_id in seen:
                    raise _ShapeError("id", "an operation id is used twice")
                if process in busy:
                    raise _ShapeError("process", "the process already has an operation outstanding")
                run_id, now_ms, args = _args(name, obj["args"], limits)
                seen.add(op_id)
                busy[process] = op_id
                pending[op_id] = (number, process, name, run_id, now_ms, args)
                order[op_id] = len(order)
                continue
            if kind not in ("ok", "fail", "info"):
                raise _ShapeError("type", "expected 'header', 'invoke', 'ok', 'fail' or 'info'")
            optional = ("result", "decided_at_ms") if kind == "ok" else ("reason",)
            _members(
                obj, "<line>", ("type", "id", "process", *(("result",) if kind == "ok" else ())), optional
            )
            op_id = _int(obj["id"], "id")
            process = _process(obj["process"], "process")
            if op_id not in pending:
                raise _ShapeError("id", "a completion without an outstanding invocation")
            invoke_line, invoker, name, run_id, now_ms, args = pending.pop(op_id)
            if invoker != process:
                raise _ShapeError("process", "completed by another process than the one that invoked it")
            del busy[process]
            if kind == "fail":
                if "reason" in obj and obj["reason"] is not None:
                    _str(obj["reason"], "reason")
                continue
            if kind == "info":
                if "reason" in obj and obj["reason"] is not None:
                    _str(obj["reason"], "reason")
                outcome, result, complete_line = Outcome.UNKNOWN, None, None
            else:
                outcome, result, complete_line = Outcome.OK, _result(name, obj["result"]), number
                if obj.get("decided_at_ms") is not None:  # the time the store really decided at
                    now_ms = _int(obj["decided_at_ms"], "decided_at_ms")
            ops.append(
                HistoryOp(
                    index=0,
                    op_id=op_id,
                    process=process,
                    name=name,
                    run_id=run_id,
                    now_ms=now_ms,
                    args=args,
                    outcome=outcome,
                    result=result,
                    invoke_line=invoke_line,
                    complete_line=complete_line,
                )
            )
        except _ShapeError as bad:
            raise MalformedHistoryError(number, bad.where, bad.message) from None
    if limits is None:
        raise MalformedHistoryError(max(number, 1), "<line>", "empty history: no header line")
    for op_id, (invoke_line, process, name, run_id, now_ms, args) in pending.items():
        ops.append(
            HistoryOp(
                index=0,
                op_id=op_id,
                process=process,
                name=name,
                run_id=run_id,
                now_ms=now_ms,
                args=args,
                outcome=Outcome.UNKNOWN,
                result=None,
                invoke_line=invoke_line,
                complete_line=None,
            )
        )
    ops.sort(key=lambda op: op.invoke_line)
    for index, op in enumerate(ops):
        op.index = index
    return History(limits=limits, ops=tuple(ops), lines=number, implementation=implementation)
