"""The JSON Schema of one history line, derived from the format's tables (CIS-HIST-1).

``spec/history.schema.json`` is :func:`history_schema` written with sorted keys and
a 1-space indent by ``scripts/generate_vectors.py`` (or ``python -m
invocation_store.history._schema``); a test keeps the file identical and checks that
recorded lines validate against it.
"""

from __future__ import annotations

import json
from typing import Any, Final

import attrs

from ..kernel import CanonicalRecord, ErrorCode, EvidenceStatus, InvocationStatus, RunState, RunStatus
from ._format import _LIMIT_NAMES, HISTORY_FORMAT, HISTORY_VERSION, OPERATIONS

__all__ = ["history_schema"]

_INT: Final = {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}
_CODE: Final = {"enum": [code.value for code in ErrorCode]}
_PROCESS: Final = {
    "description": "The worker (one thread of control): an integer >= 0 or a non-empty string.",
    "oneOf": [_INT, {"type": "string", "minLength": 1}],
}
_ARG_TYPES: Final[dict[str, Any]] = {
    "run_id": {"type": "string"},
    "tool_call_id": {"type": "string"},
    "tool_name": {"type": "string"},
    "request_json": {"type": "string", "description": "The arguments JSON text exactly as supplied."},
    "invocation_token": {"type": "string"},
    "now_ms": {**_INT, "description": "The time the operation used, integer ms."},
    "deadline_ms": _INT,
    "ttl_ms": {**_INT, "minimum": 1},
    "tool_call_budget": _INT,
    "byte_budget": _INT,
    "before": {"$ref": "#/$defs/Record", "description": "The record the worker created (compare)."},
    "after": {"$ref": "#/$defs/Record", "description": "The record to write (set)."},
    "tool_call_ids": {"type": "array", "items": {"type": "string"}},
    "include_raw": {"type": "boolean"},
    "limits": {"$ref": "#/$defs/Limits", "description": "Limits of this call, if not the header's."},
}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [schema, {"type": "null"}]}


def _field_schema(kind: Any) -> dict[str, Any]:
    # A string annotation, or the resolved type once cattrs has resolved the class.
    text = kind if isinstance(kind, str) else getattr(kind, "__name__", None) or str(kind)
    enums = {
        "InvocationStatus": [s.value for s in InvocationStatus],
        "EvidenceStatus": [s.value for s in EvidenceStatus],
        "ErrorCode": [c.value for c in ErrorCode],
        "RunStatus": [s.value for s in RunStatus],
    }
    for name, values in enums.items():
        if name in text:
            schema: dict[str, Any] = {"enum": values}
            return _nullable(schema) if "None" in text else schema
    base = _INT if text == "int" else {"type": "string"}
    return _nullable(base) if "None" in text else dict(base)


def _attrs_schema(cls: type, description: str) -> dict[str, Any]:
    fields = attrs.fields(cls)
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "required": [f.name for f in fields],
        "properties": {f.name: _field_schema(f.type) for f in fields},
    }


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(required),
        "properties": {**required, **(optional or {})},
        **extra,
    }


def _results() -> dict[str, Any]:
    record, run = {"$ref": "#/$defs/Record"}, {"$ref": "#/$defs/Run"}
    code = _nullable(_CODE)
    return {
        "RunResult": _object(
            {"code": code, "run": _nullable(run)},
            description="open_run, cancel_run, close_run: the run state, or a code (then run is null).",
        ),
        "GetRunResult": _object({"run": _nullable(run)}, description="get_run: the live run state or null."),
        "CreateResult": _object(
            {
                "code": code,
                "replayed": _nullable({"type": "boolean"}),
                "record": _nullable(record),
                "run": _nullable(run),
            },
            description="create: the Admission (replayed, record, run), or a code (the others null).",
        ),
        "CompleteResult": _object(
            {"code": code, "record": _nullable(record)},
            description="complete: the stored record, or a code (INVALID_TRANSITION: nothing written).",
        ),
        "GetResult": _object({"record": _nullable(record)}, description="get: the live record or null."),
        "GetManyResult": _object(
            {"records": {"type": "object", "additionalProperties": _nullable(record)}},
            description="get_many: each id asked for, with its live record or null.",
        ),
        "IdsResult": _object(
            {"tool_call_ids": {"type": "array", "items": {"type": "string"}}},
            description="completed, calls: the run's ordered ids ([] for a run that is not live).",
        ),
    }


def history_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one history line (CIS-HIST-1)."""
    invokes = {}
    for name, required in OPERATIONS.items():
        optional = {"limits": _ARG_TYPES["limits"]} if name == "create" else {}
        args = _object({arg: _ARG_TYPES[arg] for arg in required}, optional)
        invokes[f"Invoke_{name}"] = _object(
            {
                "type": {"const": "invoke"},
                "id": _INT,
                "process": _PROCESS,
                "op": {"const": name},
                "args": args,
            },
            description=f"The invocation of {name}, written just before the call.",
        )
    reason = {"reason": _nullable({"type": "string", "description": "The exception type, for example."})}
    defs: dict[str, Any] = {
        "Limits": _object(
            {name: {**_INT, "minimum": 1} for name in _LIMIT_NAMES},
            description="The byte limits in force (UTF-8 bytes; max_json_depth and max_facts are counts).",
        ),
        "Record": _attrs_schema(CanonicalRecord, "A canonical record, every field (as in spec/vectors)."),
        "Run": _attrs_schema(RunState, "A run state, every field."),
        "Header": _object(
            {
                "type": {"const": "header"},
                "format": {"const": HISTORY_FORMAT},
                "version": {"const": HISTORY_VERSION},
                "limits": {"$ref": "#/$defs/Limits"},
            },
            {"implementation": {"type": "string"}},
            description="The first line.",
        ),
        **invokes,
        "Ok": _object(
            {
                "type": {"const": "ok"},
                "id": _INT,
                "process": _PROCESS,
                "result": {"oneOf": [{"$ref": f"#/$defs/{name}"} for name in _results()]},
            },
            {"decided_at_ms": _INT},
            description=(
                "The operation returned; result has the shape of its operation's result. "
                "decided_at_ms, when present, is the time the store decided at (it replaces the "
                "invocation's now_ms)."
            ),
        ),
        "Fail": _object(
            {"type": {"const": "fail"}, "id": _INT, "process": _PROCESS},
            reason,
            description="The operation certainly did not take effect.",
        ),
        "Info": _object(
            {"type": {"const": "info"}, "id": _INT, "process": _PROCESS},
            reason,
            description="Unknown outcome: it took effect at some time after its invocation, or never.",
        ),
        **_results(),
    }
    lines = ["Header", *invokes, "Ok", "Fail", "Info"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://canonical-invocation-store.invalid/spec/history.schema.json",
        "title": f"{HISTORY_FORMAT} v{HISTORY_VERSION}: one line",
        "description": (
            "One line of a concurrent history of store operations (JSON Lines). The first line is the "
            "header; then one invoke line per operation and at most one completion line (ok, fail or "
            "info) after it. Line order is real time. See spec/history.md."
        ),
        "oneOf": [{"$ref": f"#/$defs/{name}"} for name in lines],
        "$defs": defs,
    }


if __name__ == "__main__":  # pragma: no cover - regenerates spec/history.schema.json
    print(json.dumps(history_schema(), indent=1, sort_keys=True))
